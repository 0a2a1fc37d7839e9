import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

// The library is a jsii library: its package.json declares the Python, Java, .NET and Go targets, every
// README snippet and API example compiles under jsii-rosetta (so Construct Hub and the generated
// packages can show them in each language), the README's Python quick start is rosetta's translation
// of the TypeScript one with the constant names jsii-pacmak gives Python, and jsii-pacmak generates a
// Python package from the compiled assembly (.jsii, written by `npx projen compile`). Building the
// wheel, the jar, the NuGet package or the Go module needs PyPI, Maven Central, NuGet or the Go proxy
// and each toolchain, which CI does not have: the Python package is generated and byte-compiled here,
// not installed.
const ROOT = path.join(__dirname, '..');
const BIN = path.join(ROOT, 'node_modules', '.bin');
const TIMEOUT_MS = 300_000;

function run(command: string, args: string[], cwd = ROOT) {
  const r = spawnSync(command, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const output = `${r.stdout ?? ''}${r.stderr ?? ''}`.split('\n').filter((l) => !l.startsWith('!!')).join('\n');
  return { status: r.status, output };
}

/** The first fenced block of `lang` in `markdown` whose body contains `marker`. */
function fencedBlock(markdown: string, lang: string, marker: string): string | undefined {
  return [...markdown.matchAll(new RegExp('```' + lang + '(?: [^\\n]*)?\\n([\\s\\S]*?)```', 'g'))]
    .map((m) => m[1]).find((body) => body.includes(marker));
}

const QUICK_START_MARKER = "new InferenceCluster(stack, 'Cluster'";

describe('jsii targets', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const assemblyFile = path.join(ROOT, '.jsii');
  let work: string;

  beforeAll(() => {
    if (!fs.existsSync(assemblyFile)) {
      throw new Error('.jsii is missing: run `npx projen compile` (scripts/setup.sh does) before these tests');
    }
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-jsii-'));
  });
  afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

  test('package.json declares Python, Java, .NET and Go with the names Construct Hub shows', () => {
    // THEN
    expect(pkg.jsii.targets).toEqual({
      python: { distName: 'disagg', module: 'disagg' },
      java: { package: 'io.github.disagg.disagg', maven: { groupId: 'io.github.disagg', artifactId: 'disagg' } },
      dotnet: { namespace: 'Disagg', packageId: 'Disagg' },
      go: { moduleName: 'github.com/disagg/disagg-go' },
    });
    // AND the compiled assembly carries them (jsii-pacmak reads the assembly, not package.json)
    const assembly = JSON.parse(fs.readFileSync(assemblyFile, 'utf8'));
    expect(assembly.targets).toMatchObject(pkg.jsii.targets);
  });

  describe('jsii-rosetta and jsii-pacmak', () => {
    let tablet: any;
    let pyDir: string;
    let pacmak: { status: number | null; output: string };

    beforeAll(() => {
      // Every snippet of the README and every @example compiles (`--fail`), with the fixtures in rosetta/;
      // the tablet holds their translations into each language.
      const tabletFile = path.join(work, 'tablet.json');
      const r = run(path.join(BIN, 'jsii-rosetta'), ['extract', '--compile', '--fail', '--cache-to', tabletFile, '.']);
      if (r.status !== 0) throw new Error(`jsii-rosetta extract --compile --fail failed:\n${r.output.slice(-6000)}`);
      tablet = JSON.parse(fs.readFileSync(tabletFile, 'utf8'));
      // The Python bindings, code only (building the wheel needs PyPI).
      const outdir = path.join(work, 'dist');
      pacmak = run(path.join(BIN, 'jsii-pacmak'), ['--targets', 'python', '--code-only', '--no-npmignore', '--outdir', outdir]);
      pyDir = path.join(outdir, 'python');
    }, TIMEOUT_MS);

    test('every README snippet and API example compiles and is translated into Python, Java, C# and Go', () => {
      // THEN
      const snippets: any[] = Object.values(tablet.snippets);
      const readme = snippets.filter((s) => s.location.api.api === 'moduleReadme');
      expect(readme.length).toBeGreaterThanOrEqual(5);
      for (const s of snippets) {
        expect({ at: s.location, didCompile: s.didCompile }).toEqual({ at: s.location, didCompile: true });
        expect(Object.keys(s.translations).sort()).toEqual(['$', 'csharp', 'go', 'java', 'python']);
      }
    });

    test('jsii-pacmak generates the Python package, which byte-compiles and shows Python in its README', () => {
      // THEN pacmak succeeds
      expect({ status: pacmak.status, output: pacmak.status === 0 ? '' : pacmak.output.slice(-6000) })
        .toEqual({ status: 0, output: '' });

      // AND setup.py names the distribution and module, and depends on the jsii runtime and the CDK packages
      const setup = fs.readFileSync(path.join(pyDir, 'setup.py'), 'utf8');
      const kwargs = JSON.parse(setup.match(/json\.loads\(\s*"""([\s\S]*?)"""/)![1]);
      expect(kwargs.name).toBe('disagg');
      expect(kwargs.packages).toEqual(['disagg', 'disagg._jsii']);
      const requires = (kwargs.install_requires as string[]).map((s) => s.split(/[<>=~, ]/)[0]);
      expect(requires).toEqual(expect.arrayContaining([
        'jsii', 'aws-cdk-lib', 'constructs', 'cdk8s', 'cdk8s-plus-28', 'aws-cdk.lambda-layer-kubectl-v35',
      ]));
      // AND it bundles the npm package the jsii runtime loads
      const bundle = kwargs.package_data['disagg._jsii'][0];
      expect(fs.statSync(path.join(pyDir, 'src', 'disagg', '_jsii', bundle)).size).toBeGreaterThan(0);

      // AND the module defines the constructs, and Python compiles it
      const init = fs.readFileSync(path.join(pyDir, 'src', 'disagg', '__init__.py'), 'utf8');
      for (const cls of ['InferenceCluster', 'AcceleratedNodeGroup', 'DisaggregatedInference', 'ExpertParallelPool', 'TieredKvCache']) {
        expect(init).toMatch(new RegExp(`^class ${cls}\\(`, 'm'));
      }
      const py = run('python3', ['-m', 'compileall', '-q', path.join(pyDir, 'src')]);
      expect({ status: py.status, output: py.output }).toEqual({ status: 0, output: '' });

      // AND the package's README shows the quick start in Python, not TypeScript
      const pyReadme = fs.readFileSync(path.join(pyDir, 'README.md'), 'utf8');
      expect(pyReadme).toContain('inference.add_accelerated_node_group("H200",');
      expect(pyReadme).not.toContain(QUICK_START_MARKER);
    });

    test('the README\'s Python quick start is rosetta\'s translation of its TypeScript one, with Python\'s names', () => {
      // GIVEN the README's two forms of the quick start
      const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
      const ts = fencedBlock(readme, 'ts', QUICK_START_MARKER);
      const python = fencedBlock(readme, 'python', 'InferenceCluster(stack, "Cluster"');
      expect(ts).toBeDefined();
      expect(python).toBeDefined();
      // AND rosetta's translation of that TypeScript (`$` is the source language)
      const snippet: any = Object.values(tablet.snippets)
        .find((s: any) => s.translations.$.source.trim() === ts!.trim());
      if (!snippet) throw new Error('.jsii holds an older README than README.md: run `npx projen compile`');
      // AND the Python names of the static constants, which rosetta keeps as TypeScript spells them but
      // jsii-pacmak splits at each digit/letter boundary (P5EN_48XLARGE is P5_EN_48_XLARGE in Python)
      const init = fs.readFileSync(path.join(pyDir, 'src', 'disagg', '__init__.py'), 'utf8');
      const pythonNames = new Map([...init.matchAll(/@jsii\.member\(jsii_name="(\w+)"\)\s*\n\s*def (\w+)\(cls\)/g)]
        .filter((m) => m[1] !== m[2]).map((m) => [m[1], m[2]]));
      expect(pythonNames.get('P5EN_48XLARGE')).toBe('P5_EN_48_XLARGE');

      // WHEN rosetta's Python gets the module's real names
      const expected = (snippet.translations.python.source as string)
        .replace(/\.([A-Z][A-Z0-9_]*)\b/g, (m, name) => (pythonNames.has(name) ? `.${pythonNames.get(name)}` : m));

      // THEN the README shows exactly that (after changing the TypeScript, paste the output of
      // `npx jsii-rosetta snippet --language python FILE` here and correct the constants' names)
      expect(python!.trim()).toEqual(expected.trim());
      // AND the Gateway's Kubernetes field names stay as Kubernetes spells them
      expect(python).toContain('"gatewayClassName": "istio"');
      expect(python).toContain('gateway.add_json_patch(');
    });
  });
});
