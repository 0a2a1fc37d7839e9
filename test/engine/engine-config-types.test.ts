// The engine configuration's TypeScript types are generated from its JSON Schema
// (projenrc/engine-config-types.ts, `npx projen engine:schema-types`); this keeps the checked-in
// module from falling behind the schema. The generator runs in a child process: json-schema-to-typescript
// formats with prettier 3, whose dynamic import() jest's module sandbox does not allow.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const ROOT = path.resolve(__dirname, '..', '..');
const GENERATOR = path.join('projenrc', 'engine-config-types.ts');
const GENERATED = path.join(ROOT, 'src', 'engine', 'engine-config.generated.ts');

function generator(...args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', GENERATOR, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, TS_NODE_PROJECT: path.join('projenrc', 'tsconfig.json') },
    timeout: 60_000,
  });
  return { status: r.status, stderr: r.stderr };
}

describe('engine configuration types', () => {
  test('src/engine/engine-config.generated.ts is what engine/schema/engine-config.schema.json generates', () => {
    // GIVEN the checked-in module WHEN the generator compares it with the schema's output
    const { status, stderr } = generator('--check');
    // THEN they are the same (else run `npx projen engine:schema-types`)
    expect(stderr).toBe('');
    expect(status).toBe(0);
  });

  test('--check fails, naming the fix, when the module differs from the schema', () => {
    // GIVEN a copy of the generated module edited by hand
    const copy = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'engine-config-types-')), 'edited.ts');
    fs.writeFileSync(copy, fs.readFileSync(GENERATED, 'utf8').replace('weightBytesPerRank: number;', 'weightBytesPerRank?: number;'));
    try {
      // WHEN checked THEN it fails and says how to regenerate
      const { status, stderr } = generator('--check', '--file', copy);
      expect(status).toBe(1);
      expect(stderr).toMatch(/edited\.ts is out of date.*npx projen engine:schema-types/);
    } finally {
      fs.rmSync(path.dirname(copy), { recursive: true, force: true });
    }
  });
});
