// No module of src/ imports itself through others (type-only imports count: they still tie the
// modules' edits together). The cycle src/engine/index.ts <-> engine-config-builder.ts was one.
import * as fs from 'fs';
import * as path from 'path';

const SRC = path.resolve(__dirname, '..', 'src');

/** Relative imports and re-exports of every .ts file under `dir`, resolved to files. */
function importGraph(dir: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const visit = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const file = path.join(d, entry.name);
      if (entry.isDirectory()) {
        visit(file);
      } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
        const text = fs.readFileSync(file, 'utf8');
        const targets = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?from\s+'(\.[^']*)'/g)].map(m => resolve(file, m[1]));
        graph.set(file, targets.filter((t): t is string => t !== undefined));
      }
    }
  };
  visit(dir);
  return graph;
}

function resolve(from: string, spec: string): string | undefined {
  const base = path.resolve(path.dirname(from), spec);
  return [`${base}.ts`, path.join(base, 'index.ts')].find(f => fs.existsSync(f));
}

/** Every cycle found by a depth-first search, as file paths relative to src/. */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const dfs = (file: string) => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') found.push([...stack.slice(stack.indexOf(next)), next].map(f => path.relative(SRC, f)));
      else if (!state.has(next)) dfs(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) dfs(file);
  return found;
}

describe('module graph of src/', () => {
  test('the checker finds a cycle', () => {
    // GIVEN a graph a -> b -> a WHEN searched THEN the cycle is reported
    const a = path.join(SRC, 'a.ts');
    const b = path.join(SRC, 'b.ts');
    expect(cycles(new Map([[a, [b]], [b, [a]]]))).toEqual([['a.ts', 'b.ts', 'a.ts']]);
  });

  test('has no import cycle', () => {
    // GIVEN every relative import and re-export of src/ WHEN searched THEN no module reaches itself
    const graph = importGraph(SRC);
    expect(graph.size).toBeGreaterThan(50);
    expect(cycles(graph)).toEqual([]);
  });
});
