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
