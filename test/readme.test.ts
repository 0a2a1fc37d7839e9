import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

// Every TypeScript snippet in the README must be one that a test compiles and synthesizes: the
// readme-snippets tests hold them, and this test checks that the README still says the same thing.
const ROOT = path.join(__dirname, '..');
const SNIPPET_TESTS = ['test/k8s/readme-snippets.test.ts', 'test/aws/readme-snippets.test.ts'];

/**
 * Code lines without imports, comment lines, indentation, `const`/`let` keywords and the `App` the
 * tests pass in as a parameter, joined by newlines.
 */
function normalize(code: string): string {
  return code.replace(/^import [\s\S]*? from '[^']+';$/gm, '')
    .split('\n')
    .map((line) => line.trim().replace(/^(const|let) /, ''))
    .filter((line) => line && !line.startsWith('//') && line !== 'app = new App();')
    .join('\n');
}

describe('README', () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const tests = SNIPPET_TESTS.map((f) => normalize(fs.readFileSync(path.join(ROOT, f), 'utf8'))).join('\n');
  // A fence may carry jsii-rosetta parameters after the language (```ts fixture=workloads, ```ts nofixture).
  const snippets = [...readme.matchAll(/```ts(?: [^\n]*)?\n([\s\S]*?)```/g)].map((m) => m[1]);

  test('opens with the two commands: the main job and every test', () => {
    const firstScreen = readme.split('\n').slice(0, 15).join('\n');
    expect(firstScreen).toMatch(/^scripts\/setup\.sh && npx disagg synth && npx disagg local /m);
    expect(firstScreen).toMatch(/^scripts\/setup\.sh && npm test /m);
  });

  // `npx disagg` runs the package's own bin, lib/cli/main.js, which `npx projen compile` builds.
  const bin = path.join(ROOT, 'lib', 'cli', 'main.js');
  (fs.existsSync(bin) ? test : test.skip)('the main command\'s `npx disagg` runs from this checkout', () => {
    // GIVEN the compiled bin WHEN run as the README runs it
    const r = spawnSync('npx', ['--no-install', 'disagg', '--help'], { cwd: ROOT, encoding: 'utf8' });
    // THEN it starts (a bin without the executable bit fails here with "Permission denied")
    expect(r.stderr).not.toMatch(/Permission denied/);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^Usage: disagg <command>/);
    expect(() => fs.accessSync(bin, fs.constants.X_OK)).not.toThrow();
  });

  test('has TypeScript snippets', () => {
    expect(snippets.length).toBeGreaterThanOrEqual(5);
  });

  test.each(snippets.map((s, i) => [i + 1, s]))('snippet %i is compiled by a readme-snippets test', (_i, snippet) => {
    const body = normalize(snippet as string);
    // An imports-only preamble has nothing to check.
    if (!body) return;
    expect(tests).toContain(body);
  });
});
