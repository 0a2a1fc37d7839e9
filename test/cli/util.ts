import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { runCli } from '../../src/cli/run-cli';

/** Runs the `disagg` CLI in-process and collects its exit code and what it writes. */
export async function disagg(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, { out: t => out.push(t), err: t => err.push(t) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

/** A new empty folder under the system's temporary folder, named disagg-cli-<name>-XXXXXX. */
export function tmpdir(name: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `disagg-cli-${name}-`));
}

/**
 * Checks that `text` is well-formed XML as SVG writers produce it: one root, every tag closed in
 * order, quoted attributes, no stray '<' or '&'. Returns the element names in document order.
 */
export function wellFormedXml(text: string): string[] {
  const body = text.replace(/^<\?xml[^?]*\?>\s*/, '');
  const names: string[] = [];
  const stack: string[] = [];
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/y;
  let i = 0;
  let roots = 0;
  while (i < body.length) {
    const lt = body.indexOf('<', i);
    const chunk = body.slice(i, lt < 0 ? body.length : lt);
    if (/&(?!(amp|lt|gt|quot|apos|#\d+);)/.test(chunk)) throw new Error(`unescaped '&' near ${i}`);
    if (lt < 0) break;
    tag.lastIndex = lt;
    const m = tag.exec(body);
    if (!m) throw new Error(`malformed tag at ${lt}: ${body.slice(lt, lt + 60)}`);
    const [, closing, name, , selfClosing] = m;
    if (closing) {
      if (stack.pop() !== name) throw new Error(`</${name}> closes the wrong element`);
    } else {
      if (stack.length === 0) roots += 1;
      names.push(name);
      if (!selfClosing) stack.push(name);
    }
    i = tag.lastIndex;
  }
  if (stack.length !== 0 || roots !== 1) throw new Error(`unclosed ${stack.join(',')} or ${roots} roots`);
  return names;
}

/** A `<text>` element of an SVG with the box it covers (Helvetica widths as src/cli/svg-chart.ts lays them out). */
export interface TextBox {
  readonly text: string;
  readonly x0: number;
  readonly x1: number;
  readonly y0: number;
  readonly y1: number;
}

/** The boxes of every `<text>` in `svg`, from its x, y, anchor, baseline, size and weight. */
export function textBoxes(svg: string, width: (text: string, fontSize: number, bold: boolean) => number): TextBox[] {
  const boxes: TextBox[] = [];
  for (const m of svg.matchAll(/<text([^>]*)>([^<]*)<\/text>/g)) {
    const attr = (name: string) => new RegExp(`\\s${name}="([^"]*)"`).exec(m[1])?.[1];
    const text = m[2].replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&amp;/g, '&');
    const size = Number(attr('font-size') ?? 11);
    const w = width(text, size, attr('font-weight') === 'bold');
    const x = Number(attr('x'));
    const y = Number(attr('y'));
    const anchor = attr('text-anchor') ?? 'start';
    const x0 = anchor === 'middle' ? x - w / 2 : anchor === 'end' ? x - w : x;
    const middle = attr('dominant-baseline') === 'middle';
    boxes.push({ text, x0, x1: x0 + w, y0: middle ? y - size / 2 : y - 0.8 * size, y1: middle ? y + size / 2 : y + 0.2 * size });
  }
  return boxes;
}

/** Pairs of boxes that overlap by more than `slack` pixels both ways. */
export function overlaps(boxes: TextBox[], slack = 0.5): Array<[string, string]> {
  const found: Array<[string, string]> = [];
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i];
      const b = boxes[j];
      if (Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0) > slack && Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0) > slack) {
        found.push([a.text, b.text]);
      }
    }
  }
  return found;
}
