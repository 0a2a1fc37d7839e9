import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { DockerIgnoreStrategy } from 'aws-cdk-lib';
import {
  ancestry, Dockerfile, effectiveEntrypoint, effectiveLabels, effectiveUser, expandArgs, parseDockerfile, Stage,
} from './dockerfile';
import { builderPackages, PROVIDERS, readPackageList } from './engine-packages';
import { EngineImageVariant } from '../../src/aws/engine-image';

// Static checks of images/*/Dockerfile: Docker cannot run here, so these read the files.

const REPO = path.resolve(__dirname, '..', '..');
const MAIN_CC = path.join(REPO, 'engine', 'src', 'cmd', 'main.cc');
/** Roles that our manifests start with `disagg-engine <role>`. */
const MANIFEST_ROLES = ['router', 'sim-worker', 'kvstore'];
const REQUIRED_LABELS = [
  'org.opencontainers.image.title',
  'org.opencontainers.image.description',
  'org.opencontainers.image.source',
  'org.opencontainers.image.licenses',
  'org.opencontainers.image.version',
  'org.opencontainers.image.revision',
  'org.opencontainers.image.base.name',
];

/** What each image promises about its user (see the comment at the top of each Dockerfile). */
const RUNS_AS_ROOT: Record<string, boolean> = {
  'engine': true, // EFA memory registration needs CAP_IPC_LOCK, which only root processes hold
  'engine-slim': false,
  'engine-neuron': true, // the Neuron runtime and EFA register memory for DMA, likewise
};

const VARIANTS = [EngineImageVariant.FULL, EngineImageVariant.SLIM, EngineImageVariant.NEURON];

function read(variant: EngineImageVariant): { text: string; file: Dockerfile } {
  const text = fs.readFileSync(path.join(REPO, variant.dockerfile), 'utf8');
  return { text, file: parseDockerfile(text) };
}

/** Build-arg values as BuildKit sees them for one target architecture. */
function argValues(file: Dockerfile, stage: Stage | undefined, targetArch: string): Record<string, string | undefined> {
  return { ...file.globalArgs, ...(stage?.args ?? {}), TARGETARCH: targetArch, TARGETPLATFORM: `linux/${targetArch}` };
}

function finalStage(file: Dockerfile): Stage {
  return file.stages[file.stages.length - 1];
}

/** `linux/amd64` -> `amd64`. */
function arches(variant: EngineImageVariant): string[] {
  return variant.platforms.map((p) => p.split('/')[1]);
}

/** True for `name:tag` with a version-like tag, or a `@sha256:` digest; never `latest`. */
function isPinnedImage(reference: string): boolean {
  if (/@sha256:[0-9a-f]{64}$/.test(reference)) return true;
  const lastSegment = reference.slice(reference.lastIndexOf('/') + 1);
  const colon = lastSegment.lastIndexOf(':');
  if (colon < 0) return false;
  const tag = lastSegment.slice(colon + 1);
  return tag !== 'latest' && /\d/.test(tag) && !/\$/.test(reference);
}

function which(binary: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, binary);
    if (dir && fs.existsSync(candidate)) return candidate;
  }
  return undefined;
}

describe('the Dockerfile reader', () => {
  test('reads stages, continuations, labels, COPY --from and exec-form ENTRYPOINT', () => {
    // GIVEN a small two-stage file with a directive, a global ARG and a continued LABEL
    const file = parseDockerfile([
      '# syntax=docker/dockerfile:1',
      'ARG BASE=debian:bookworm-20250929-slim',
      'FROM debian:bookworm-20250929 AS Build',
      'RUN echo a \\',
      '  # a comment inside a continuation',
      '  && echo b',
      'FROM ${BASE} AS runtime',
      'LABEL a="x y" \\',
      '      b=z',
      'COPY --from=build /out/app /usr/local/bin/app',
      'USER 10001:10001',
      'ENTRYPOINT ["app"]',
    ].join('\n'));

    // THEN
    expect(file.directives).toEqual({ syntax: 'docker/dockerfile:1' });
    expect(file.globalArgs).toEqual({ BASE: 'debian:bookworm-20250929-slim' });
    expect(file.stages.map((s) => s.name)).toEqual(['build', 'runtime']);
    expect(file.stages[0].instructions[0].args).toBe('echo a && echo b');
    const runtime = file.stages[1];
    expect(expandArgs(runtime.base, file.globalArgs)).toBe('debian:bookworm-20250929-slim');
    expect(runtime.labels).toEqual({ a: 'x y', b: 'z' });
    expect(runtime.copies).toEqual([{ keyword: 'COPY', from: 'build', sources: ['/out/app'], destination: '/usr/local/bin/app', line: 10 }]);
    expect(runtime.user).toBe('10001:10001');
    expect(runtime.entrypoint).toEqual({ json: true, argv: ['app'], line: 12 });
  });

  test('rejects what it cannot read, naming the line', () => {
    expect(() => parseDockerfile('RUN true\n')).toThrow(/line 1: RUN before the first FROM/);
    expect(() => parseDockerfile('FROM a:1 AS\n')).toThrow(/line 1: expected 'FROM/);
    expect(() => parseDockerfile('FROM a:1\nENTRYPOINT ["x",\n')).toThrow(/line 2: ENTRYPOINT looks like JSON/);
    expect(() => parseDockerfile('FROM a:1\n--flag x\n')).toThrow(/line 2: not an instruction/);
  });

  test('knows a pinned reference from a floating one', () => {
    expect(isPinnedImage('ubuntu:jammy-20251001')).toBe(true);
    expect(isPinnedImage('localhost:5000/x@sha256:' + 'a'.repeat(64))).toBe(true);
    expect(isPinnedImage('localhost:5000/x')).toBe(false);
    expect(isPinnedImage('vllm/vllm-openai:latest')).toBe(false);
    expect(isPinnedImage('debian:stable-slim')).toBe(false);
    expect(isPinnedImage('ubuntu')).toBe(false);
  });
});

describe('.dockerignore (the build context is the package root)', () => {
  const patterns = fs.readFileSync(path.join(REPO, '.dockerignore'), 'utf8')
    .split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  const strategy = new DockerIgnoreStrategy(REPO, patterns);

  test('sends engine sources and images, and nothing else', () => {
    // GIVEN paths inside and outside what the Dockerfiles need
    const sent = ['engine/CMakeLists.txt', 'images/engine/Dockerfile', 'images/common/build-engine.sh'];
    const notSent = ['node_modules/aws-cdk-lib/package.json', 'lib/index.js', 'src/index.ts', '.git/HEAD',
      'engine/build/CMakeCache.txt', 'engine/build-addon/Makefile', 'cdk.out/manifest.json'];

    // THEN
    for (const p of sent) expect({ path: p, ignored: strategy.ignores(path.join(REPO, p)) }).toEqual({ path: p, ignored: false });
    for (const p of notSent) expect({ path: p, ignored: strategy.ignores(path.join(REPO, p)) }).toEqual({ path: p, ignored: true });
  });
});

describe.each(VARIANTS.map((v) => [v.name, v] as const))('images/%s/Dockerfile', (name, variant) => {
  const { text, file } = read(variant);
  const runtime = finalStage(file);

  test('has a builder stage and ends in a runtime stage', () => {
    // THEN
    expect(file.stages.length).toBeGreaterThanOrEqual(2);
    expect(file.stages.map((s) => s.name)).toContain('builder');
    expect(runtime.name).toBe('runtime');
    for (const arch of arches(variant)) {
      const chain = ancestry(file, runtime, argValues(file, runtime, arch)).map((s) => s.name);
      expect(chain).not.toContain('builder');
    }
  });

  test.each(arches(variant))('pins every base image (TARGETARCH=%s)', (arch) => {
    // WHEN every FROM is expanded as BuildKit would for this architecture
    const unpinned: string[] = [];
    for (const stage of file.stages) {
      const base = expandArgs(stage.base, argValues(file, undefined, arch));
      const isEarlierStage = file.stages.some((s) => s.name === base.toLowerCase() && s.index < stage.index);
      if (!isEarlierStage && !isPinnedImage(base)) unpinned.push(`line ${stage.line}: FROM ${stage.base} -> ${base}`);
    }

    // THEN
    expect(unpinned).toEqual([]);
    // AND the runtime stage reaches a registry image for this architecture (e.g. runtime-arm64 exists)
    const chain = ancestry(file, runtime, argValues(file, runtime, arch));
    const root = chain[chain.length - 1];
    expect(isPinnedImage(expandArgs(root.base, argValues(file, undefined, arch)))).toBe(true);
  });

  test('copies only files that exist in the repository and that the build context sends', () => {
    const patterns = fs.readFileSync(path.join(REPO, '.dockerignore'), 'utf8')
      .split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
    const strategy = new DockerIgnoreStrategy(REPO, patterns);
    const problems: string[] = [];
    const contextCopies = file.stages.flatMap((s) => s.copies.filter((c) => c.from === undefined));

    // WHEN each source of a COPY from the build context is looked up
    for (const copy of contextCopies) {
      for (const source of copy.sources) {
        const absolute = path.join(REPO, source);
        if (!fs.existsSync(absolute)) problems.push(`line ${copy.line}: ${source} does not exist`);
        else if (strategy.ignores(absolute)) problems.push(`line ${copy.line}: ${source} is excluded by .dockerignore`);
      }
    }

    // THEN
    expect(contextCopies.length).toBeGreaterThan(0);
    expect(problems).toEqual([]);
  });

  test('copies --from earlier stages only', () => {
    for (const stage of file.stages) {
      for (const copy of stage.copies.filter((c) => c.from !== undefined)) {
        const source = file.stages.find((s) => s.name === copy.from!.toLowerCase());
        expect({ line: copy.line, from: copy.from, earlier: source !== undefined && source.index < stage.index })
          .toEqual({ line: copy.line, from: copy.from, earlier: true });
      }
    }
  });

  test('builds engine/ in the builder with the shared script, tests off', () => {
    // GIVEN
    const builder = file.stages.find((s) => s.name === 'builder')!;
    const script = fs.readFileSync(path.join(REPO, 'images', 'common', 'build-engine.sh'), 'utf8');

    // THEN the builder copies the engine sources and runs the script on them
    expect(builder.copies.map((c) => c.sources[0])).toEqual(expect.arrayContaining(['engine', 'images/common/build-engine.sh']));
    expect(builder.instructions.some((i) => i.keyword === 'RUN' && /build-engine\.sh \/src\/engine \/out\/disagg-engine/.test(i.args))).toBe(true);
    expect(script).toMatch(/-DDISAGG_BUILD_TESTS=OFF/);
    expect(script).toMatch(/--target disagg-engine/);
  });

  test('installs the libraries the engine\'s servers build and run with', () => {
    // GIVEN the libraries engine/ requires (the images label router and sim-worker roles, which need them)
    const cmake = ['CMakeLists.txt', 'src/lib/http/CMakeLists.txt', 'src/lib/kv_events/CMakeLists.txt', 'src/servers/router/CMakeLists.txt',
      'src/servers/sim_worker/CMakeLists.txt']
      .map((f) => fs.readFileSync(path.join(REPO, 'engine', f), 'utf8')).join('\n');
    expect(cmake).toMatch(/find_package\(Boost [^)]*REQUIRED\)/);
    expect(cmake).toMatch(/find_path\([A-Z_]+ zmq\.h REQUIRED\)/);
    expect(cmake).toMatch(/find_library\([A-Z_]+ zmq REQUIRED\)/);
    expect(cmake).toMatch(/find_path\([A-Z_]+ zmq\.hpp REQUIRED\)/);
    expect(cmake).toMatch(/find_path\([A-Z_]+ msgpack\.hpp REQUIRED\)/);
    // WHEN the builder's package list (images/common/engine-build-packages.<distro>.txt, the one
    // scripts/setup.sh installs) and the runtime's apt lines are read
    const used = builderPackages(file.stages.find((s) => s.name === 'builder')!);
    expect(used.distro).toBeDefined();
    const buildPackages = readPackageList(used.distro!);
    const runtimeApt = text.split('\n').filter((l) => /apt-get install|ENGINE_RUNTIME_PACKAGES=/.test(l)).join('\n');
    // THEN the builder has Boost, libzmq, cppzmq and msgpack-cxx (the configure step fails without
    // them), and gperftools' static tcmalloc; the runtime has libzmq's shared library
    // AND PCRE2 and utf8proc (the router's tokenizer, engine/src/lib/text), linked statically by
    // the build script, so no runtime package (their names differ between the bases) is needed
    const textCmake = fs.readFileSync(path.join(REPO, 'engine', 'src', 'lib', 'text', 'CMakeLists.txt'), 'utf8');
    expect(textCmake).toMatch(/pkg_check_modules\(DISAGG_PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8\)/);
    expect(textCmake).toMatch(/pkg_check_modules\(DISAGG_UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc\)/);
    expect(fs.readFileSync(path.join(REPO, 'images', 'common', 'build-engine.sh'), 'utf8')).toMatch(/-DDISAGG_STATIC_TEXT_LIBS=ON/);
    // (package names per distribution: the PROVIDERS table, test/images/engine-packages.ts)
    for (const lookup of ['find_package(Boost)', 'find_path(zmq.h)', 'find_library(zmq)', 'find_path(zmq.hpp)', 'find_path(msgpack.hpp)',
      'find_library(libtcmalloc_minimal.a)', 'find_package(nlohmann_json)', 'pkg_check_modules(libpcre2-8)', 'pkg_check_modules(libutf8proc)']) {
      const p = PROVIDERS.find((x) => x.lookup === lookup)!.packages[used.distro!];
      expect({ lookup, package: p, in: buildPackages.includes(p) }).toEqual({ lookup, package: p, in: true });
    }
    expect(runtimeApt).toMatch(/\blibzmq5\b/);
  });

  test('runs disagg-engine as its exec-form ENTRYPOINT, copied from the builder onto PATH', () => {
    for (const arch of arches(variant)) {
      // WHEN
      const entrypoint = effectiveEntrypoint(file, runtime, argValues(file, runtime, arch));

      // THEN
      expect(entrypoint?.json).toBe(true);
      expect(entrypoint?.argv).toEqual(['disagg-engine']);
    }
    expect(runtime.copies).toContainEqual(expect.objectContaining({
      from: 'builder', sources: ['/out/disagg-engine'], destination: '/usr/local/bin/disagg-engine',
    }));
  });

  test('carries the OCI labels', () => {
    for (const arch of arches(variant)) {
      // WHEN
      const labels = effectiveLabels(file, runtime, argValues(file, runtime, arch));

      // THEN
      const missing = REQUIRED_LABELS.filter((k) => !labels[k] || labels[k].trim() === '');
      expect({ arch, missing }).toEqual({ arch, missing: [] });
      expect(labels['org.opencontainers.image.licenses']).toBe('Apache-2.0');
      expect(labels['dev.disagg.image.variant']).toBe(name);
      // base.name names the image this architecture really starts from
      const chain = ancestry(file, runtime, argValues(file, runtime, arch));
      const base = expandArgs(chain[chain.length - 1].base, argValues(file, undefined, arch));
      expect(labels['org.opencontainers.image.base.name'].endsWith(base)).toBe(true);
    }
  });

  test('runs as the user it promises', () => {
    for (const arch of arches(variant)) {
      // WHEN
      const user = effectiveUser(file, runtime, argValues(file, runtime, arch));

      // THEN
      if (RUNS_AS_ROOT[name]) {
        // root on purpose: the reason is written in the file, and uid 10001 exists for pods that opt in
        expect(user === undefined || user === 'root' || user === '0').toBe(true);
        expect(text).toMatch(/CAP_IPC_LOCK/);
      } else {
        // numeric, so that Kubernetes' runAsNonRoot can verify it
        expect(user).toMatch(/^10001(:10001)?$/);
      }
    }
    const runs = file.stages.flatMap((s) => s.instructions).filter((i) => i.keyword === 'RUN').map((i) => i.args);
    expect(runs.some((r) => /useradd [^&]*--uid 10001\b/.test(r))).toBe(true);
  });

  test('labels the roles our manifests use', () => {
    const labels = effectiveLabels(file, runtime, argValues(file, runtime, arches(variant)[0]));
    const roles = (labels['dev.disagg.engine.roles'] ?? '').split(',');
    expect(roles).toEqual(expect.arrayContaining(MANIFEST_ROLES));
  });

  const hasMain = fs.existsSync(MAIN_CC);
  if (!hasMain) {
    // eslint-disable-next-line no-console
    console.warn(`skipping the role dispatch check: ${path.relative(REPO, MAIN_CC)} does not exist yet`);
  }
  (hasMain ? test : test.skip)('names only roles that engine/src/cmd/main.cc dispatches', () => {
    // GIVEN the roles the image's label promises
    const labels = effectiveLabels(file, runtime, argValues(file, runtime, arches(variant)[0]));
    const roles = (labels['dev.disagg.engine.roles'] ?? '').split(',').filter((r) => r !== '');
    const main = fs.readFileSync(MAIN_CC, 'utf8');

    // THEN each one is compared against argv[1] in main.cc's dispatch
    const dispatched = new Set([...main.matchAll(/role\s*==\s*"([a-z-]+)"/g)].map((m) => m[1]));
    expect(roles.filter((r) => !dispatched.has(r))).toEqual([]);
  });
});

describe('hadolint', () => {
  const hadolint = which('hadolint');
  if (!hadolint) {
    // eslint-disable-next-line no-console
    console.warn('skipping hadolint: the binary is not on PATH (Debian 12 does not package it)');
  }
  (hadolint ? test : test.skip).each(VARIANTS.map((v) => v.dockerfile))('%s has no hadolint errors', (dockerfile) => {
    // WHEN / THEN: hadolint exits non-zero on findings at or above the threshold
    expect(() => execFileSync(hadolint!, ['--failure-threshold', 'error', path.join(REPO, dockerfile)], { encoding: 'utf8' }))
      .not.toThrow();
  });
});
