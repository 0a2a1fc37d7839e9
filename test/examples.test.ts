// The examples as users write and run them: each imports the package by name, never a path into this
// repository, has a README with its command, and the cdk8s ones run as their README says, from their
// own folder, writing plain YAML.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { parseAllDocuments } from 'yaml';

const EXAMPLES = path.join(__dirname, '..', 'examples');
const folders = fs.readdirSync(EXAMPLES).filter(f => fs.statSync(path.join(EXAMPLES, f)).isDirectory());

describe('examples', () => {
  test.each(folders)('%s imports the package by name and has a README with its command', (folder) => {
    const dir = path.join(EXAMPLES, folder);
    for (const file of fs.readdirSync(dir).filter(f => f.endsWith('.ts'))) {
      const code = fs.readFileSync(path.join(dir, file), 'utf8');
      const imports = [...code.matchAll(/from '([^']+)'/g)].map(m => m[1]);
      // THEN nothing reaches outside the folder; the library comes in as 'disagg'
      expect({ file, outside: imports.filter(i => i.startsWith('../')) }).toEqual({ file, outside: [] });
    }
    const tsconfig = JSON.parse(fs.readFileSync(path.join(dir, 'tsconfig.json'), 'utf8'));
    expect(tsconfig.compilerOptions.paths).toEqual({ disagg: ['../../src/index.ts'] });
    const readme = fs.readFileSync(path.join(dir, 'README.md'), 'utf8');
    expect(readme).toMatch(/```bash\n[^`]*(npx ts-node main\.ts|npx cdk synth)/);
  });

  const cdk8s = folders.filter(f => f.startsWith('cdk8s-'));
  test.each(cdk8s)('%s runs from its folder as its README says and writes valid YAML', (folder) => {
    const dir = path.join(EXAMPLES, folder);
    fs.rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
    // WHEN run as the README says
    const r = spawnSync('npx', ['ts-node', 'main.ts'], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: expect.not.stringMatching(/Error/) });
    expect(r.stdout).toMatch(/^wrote .*dist/m);
    // THEN it wrote YAML whose every document is a Kubernetes object
    const files = fs.readdirSync(path.join(dir, 'dist')).filter(f => f.endsWith('.k8s.yaml'));
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) {
      const docs = parseAllDocuments(fs.readFileSync(path.join(dir, 'dist', f), 'utf8')).map(d => d.toJS());
      expect(docs.length).toBeGreaterThan(3);
      for (const d of docs) expect(d).toEqual(expect.objectContaining({ apiVersion: expect.any(String), kind: expect.any(String) }));
    }
  });
});
