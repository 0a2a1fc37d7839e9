import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { parseDockerfile } from './dockerfile';
import {
  builderPackages, builderStage, Distro, DISTROS, engineLookups, missingPackages, neededLookups, packageListPath,
  parseCmakeCommands, PROVIDERS, readPackageList, TOOLS, lookupKeys,
} from './engine-packages';
import { EngineImageVariant } from '../../src/aws/engine-image';

// One list of the engine's build packages per distribution (images/common/engine-build-packages.*.txt),
// installed by every Dockerfile's builder and by scripts/setup.sh, checked against engine/'s CMake.

const REPO = path.resolve(__dirname, '..', '..');
const VARIANTS = [EngineImageVariant.FULL, EngineImageVariant.SLIM, EngineImageVariant.NEURON];

function osRelease(): Record<string, string> {
  if (!fs.existsSync('/etc/os-release')) return {};
  return Object.fromEntries(fs.readFileSync('/etc/os-release', 'utf8').split('\n')
    .map((l) => /^([A-Z_]+)=(.*)$/.exec(l)).filter((m): m is RegExpExecArray => m !== null)
    .map((m) => [m[1], m[2].replace(/^"(.*)"$/, '$1')]));
}

describe('engine/\'s CMake lookups', () => {
  const lookups = engineLookups();

  test('are read from the subdirectories the engine adds, without tests, fuzzers or the addon', () => {
    // WHEN
    const keys = lookups.flatMap(lookupKeys);

    // THEN the servers' libraries are there, each where it is written
    expect(keys).toEqual(expect.arrayContaining([
      'find_package(Boost)', 'find_path(zmq.h)', 'find_library(zmq)', 'find_path(zmq.hpp)', 'find_path(msgpack.hpp)',
      'pkg_check_modules(libpcre2-8)', 'find_library(libutf8proc.a)', 'find_library(libtcmalloc_minimal.a)',
    ]));
    expect(lookups.find((l) => l.names.includes('msgpack.hpp'))).toMatchObject({
      file: 'engine/src/lib/kv_events/CMakeLists.txt', required: true,
    });
    // AND what only the tests (GoogleTest) and the addon (node) need is left out
    expect(keys).not.toContain('find_package(GTest)');
    expect(lookups.map((l) => l.text).join('\n')).not.toMatch(/NODE_EXECUTABLE/);
  });

  test('treat QUIET lookups as alternatives and the rest as needs', () => {
    // WHEN
    const optional = lookups.filter((l) => !neededLookups(lookups).includes(l)).flatMap(lookupKeys);

    // THEN only msgpack's CMake packages, tried before find_path(msgpack.hpp REQUIRED), are optional
    expect(optional.sort()).toEqual(['find_package(msgpack)', 'find_package(msgpack-cxx)']);
  });

  test('the CMake reader keeps quoted arguments, nested parentheses and line numbers', () => {
    // GIVEN
    const commands = parseCmakeCommands([
      '# find_package(Commented REQUIRED)',
      'if(NOT DISAGG_CORE_SOURCES MATCHES "scheduler\\\\.cc")',
      '  find_library(X NAMES libx.a liby.a HINTS ${D} REQUIRED) # trailing',
      'endif()',
    ].join('\n'));

    // THEN
    expect(commands.map((c) => [c.name, c.line])).toEqual([['if', 2], ['find_library', 3], ['endif', 4]]);
    expect(commands[0].args).toEqual(['NOT', 'DISAGG_CORE_SOURCES', 'MATCHES', 'scheduler\\.cc']);
    expect(commands[1].args).toEqual(['X', 'NAMES', 'libx.a', 'liby.a', 'HINTS', '${D}', 'REQUIRED']);
  });
});

describe.each(VARIANTS.map((v) => [v.dockerfile, v] as const))('%s builder', (dockerfile) => {
  const file = parseDockerfile(fs.readFileSync(path.join(REPO, dockerfile), 'utf8'));
  const builder = builderStage(file)!;
  const used = builderPackages(builder);

  test('installs the package list of its own distribution', () => {
    // THEN the FROM names a known distribution, and the stage copies that distribution's list in
    // and apt-get installs it
    expect(used.distro).toBeDefined();
    expect({ dockerfile, list: used.listPath, installed: used.installed })
      .toEqual({ dockerfile, list: packageListPath(used.distro!), installed: true });
  });

  test('gets every library engine/\'s CMake looks for from that list', () => {
    // WHEN
    const problems = missingPackages({
      dockerfile,
      distro: used.distro!,
      listPath: used.listPath!,
      packages: readPackageList(used.distro!),
      lookups: engineLookups(),
    });

    // THEN
    expect(problems).toEqual([]);
  });
});

describe('the package lists', () => {
  test('a list without msgpack-cxx fails, naming the Dockerfile, the package and the fix', () => {
    // GIVEN the Debian 12 list without libmsgpack-cxx-dev (the images' bug of issue 34)
    const packages = readPackageList('debian-12').filter((p) => p !== 'libmsgpack-cxx-dev');

    // WHEN
    const problems = missingPackages({
      dockerfile: 'images/engine-slim/Dockerfile',
      distro: 'debian-12',
      listPath: packageListPath('debian-12'),
      packages,
      lookups: engineLookups(),
    });

    // THEN
    expect(problems).toEqual([expect.stringMatching(new RegExp([
      '^images/engine-slim/Dockerfile: its builder installs images/common/engine-build-packages\\.debian-12\\.txt, ',
      'which lacks libmsgpack-cxx-dev \\(provides find_path\\(msgpack\\.hpp\\) on debian-12, ',
      'needed by engine/src/lib/kv_events/CMakeLists\\.txt:\\d+ find_path\\(DISAGG_MSGPACK_INCLUDE msgpack\\.hpp REQUIRED\\)\\); ',
      'fix: add a line \'libmsgpack-cxx-dev\' to images/common/engine-build-packages\\.debian-12\\.txt$',
    ].join('')))]);
  });

  test.each(DISTROS)('%s lists nothing that no lookup needs', (distro: Distro) => {
    // GIVEN the packages the table names for this distribution
    const provided = new Set(PROVIDERS.map((p) => p.packages[distro]));

    // THEN each package in the list provides something engine/ looks for (no stale entries)
    expect(readPackageList(distro).filter((p) => !provided.has(p))).toEqual([]);
  });

  test('every lookup and tool in the table is one engine/ makes (no stale rows)', () => {
    const made = new Set([...TOOLS, ...engineLookups().flatMap(lookupKeys)]);
    expect(PROVIDERS.map((p) => p.lookup).filter((k) => !made.has(k))).toEqual([]);
  });

  test.each(DISTROS)('scripts/setup.sh installs the %s list, plus its test-only packages', (distro: Distro) => {
    // WHEN setup.sh is asked what it would install on that distribution
    const out = execFileSync('bash', ['scripts/setup.sh', '--list-packages'], {
      cwd: REPO, encoding: 'utf8', env: { ...process.env, DISAGG_DISTRO: distro },
    });
    const listed = out.split(/\s+/).filter((p) => p !== '');

    // THEN every package of the list is among them, and the test-only ones are added
    expect(readPackageList(distro).filter((p) => !listed.includes(p))).toEqual([]);
    expect(listed).toEqual(expect.arrayContaining(['libgtest-dev', 'redis-server']));
  });

  const release = osRelease();
  const onDebian12 = release.ID === 'debian' && release.VERSION_ID === '12' && fs.existsSync('/usr/bin/dpkg');
  if (!onDebian12) {
    // eslint-disable-next-line no-console
    console.warn('skipping the dpkg -S check of the Debian 12 column: this is not Debian 12');
  }
  (onDebian12 ? test : test.skip)('the Debian 12 column matches dpkg -S on this Debian 12 machine', () => {
    // GIVEN the installed packages' dependencies (a list entry may pull the owner in: libboost-dev
    // -> libboost1.74-dev, pkg-config -> pkgconf)
    const depends = (pkg: string): string[] => {
      try {
        return execFileSync('dpkg-query', ['-W', '-f', '${Depends}', pkg], { encoding: 'utf8' })
          .split(',').map((d) => d.trim().split(/[\s:|]/)[0]).filter((d) => d !== '');
      } catch {
        return [];
      }
    };
    const closure = (pkg: string): Set<string> => {
      const seen = new Set([pkg]);
      let frontier = [pkg];
      for (let depth = 0; depth < 3; depth++) {
        frontier = frontier.flatMap(depends).filter((d) => !seen.has(d));
        frontier.forEach((d) => seen.add(d));
      }
      return seen;
    };
    const problems: string[] = [];

    // WHEN each file the table names is looked up with dpkg -S
    for (const p of PROVIDERS.filter((x) => x.file !== undefined)) {
      let owners: string[];
      try {
        owners = execFileSync('dpkg', ['-S', p.file!], { encoding: 'utf8' }).split('\n')
          .map((l) => l.split(':')[0].split(',')[0].trim()).filter((o) => o !== '' && !o.startsWith('diversion'));
      } catch {
        problems.push(`${p.lookup}: no installed package has ${p.file} (run scripts/setup.sh)`);
        continue;
      }
      const pulled = closure(p.packages['debian-12']);
      if (!owners.some((o) => pulled.has(o))) {
        problems.push(`${p.lookup}: ${p.file} belongs to ${owners.join(', ')}, which ${p.packages['debian-12']} does not pull in`);
      }
    }

    // THEN
    expect(problems).toEqual([]);
  });
});
