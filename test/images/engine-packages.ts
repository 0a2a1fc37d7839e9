/**
 * The engine's build packages, checked without Docker: the one list per distribution under
 * images/common/ (engine-build-packages.<distro>.txt, installed by the Dockerfiles' builder stages
 * and by scripts/setup.sh), what engine/'s CMake files look for when they configure the
 * `disagg-engine` target, and a table of which package provides each of those on each distribution.
 */
import * as fs from 'fs';
import * as path from 'path';
import { Dockerfile, Stage } from './dockerfile';

const REPO = path.resolve(__dirname, '..', '..');

/** The distributions the builder stages run on (test-only code: a union is fine here). */
export type Distro = 'debian-12' | 'ubuntu-22.04' | 'ubuntu-24.04';
export const DISTROS: Distro[] = ['debian-12', 'ubuntu-22.04', 'ubuntu-24.04'];

/** `images/common/engine-build-packages.<distro>.txt`, relative to the repository root. */
export function packageListPath(distro: Distro): string {
  return `images/common/engine-build-packages.${distro}.txt`;
}

/** One package a line; `#` starts a comment, to the end of the line (the Dockerfiles strip it with sed). */
export function parsePackageList(text: string): string[] {
  return text.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter((l) => l !== '')
    .flatMap((l) => l.split(/\s+/));
}

export function readPackageList(distro: Distro): string[] {
  return parsePackageList(fs.readFileSync(path.join(REPO, packageListPath(distro)), 'utf8'));
}

/**
 * The distribution of a pinned base image, from its name and tag: `debian:bookworm-*` is
 * Debian 12, `ubuntu:jammy-*` / `ubuntu:22.04` Ubuntu 22.04, `ubuntu:noble-*` / `ubuntu:24.04`
 * Ubuntu 24.04; undefined for anything else.
 */
export function distroOfImage(reference: string): Distro | undefined {
  const m = /^(?:docker\.io\/(?:library\/)?)?(debian|ubuntu):([^@]+)/.exec(reference);
  if (!m) return undefined;
  const tag = m[2];
  if (m[1] === 'debian') return /^(bookworm|12)\b/.test(tag) ? 'debian-12' : undefined;
  if (/^(jammy|22\.04)\b/.test(tag)) return 'ubuntu-22.04';
  if (/^(noble|24\.04)\b/.test(tag)) return 'ubuntu-24.04';
  return undefined;
}

/** What a builder stage installs from the shared lists. */
export interface BuilderPackages {
  /** The distribution of the stage's FROM, if known. */
  readonly distro?: Distro;
  /** The list the stage copies in (repository path), if any. */
  readonly listPath?: string;
  /** Where the list is copied to inside the image. */
  readonly destination?: string;
  /** True when a RUN installs the copied list with apt-get. */
  readonly installed: boolean;
}

/** Reads a builder stage: which list it copies and whether a RUN `apt-get install`s from it. */
export function builderPackages(stage: Stage): BuilderPackages {
  const copy = stage.copies.find((c) => c.from === undefined
    && c.sources.some((s) => /^images\/common\/engine-build-packages\.[^/]+\.txt$/.test(s)));
  const listPath = copy?.sources.find((s) => s.startsWith('images/common/engine-build-packages.'));
  const destination = copy?.destination;
  const installed = destination !== undefined && stage.instructions.some((i) => i.keyword === 'RUN'
    && /apt-get install\b/.test(i.args) && i.args.includes(destination));
  return { distro: distroOfImage(stage.base), listPath, destination, installed };
}

export function builderStage(file: Dockerfile): Stage | undefined {
  return file.stages.find((s) => s.name === 'builder');
}

// ---- engine/'s CMake lookups ---------------------------------------------------------------------

/** One find_package / find_path / find_library / pkg_check_modules call. */
export interface CmakeLookup {
  readonly command: 'find_package' | 'find_path' | 'find_library' | 'pkg_check_modules';
  /** What it looks for: the package, file or pkg-config module name(s). */
  readonly names: string[];
  readonly required: boolean;
  readonly quiet: boolean;
  /** Repository-relative CMakeLists.txt and 1-based line. */
  readonly file: string;
  readonly line: number;
  /** The call as written, whitespace collapsed. */
  readonly text: string;
}

interface CmakeCommand { readonly name: string; readonly args: string[]; readonly line: number; readonly text: string }

/** Splits CMake source into commands; comments dropped, arguments unquoted. Enough for engine/. */
export function parseCmakeCommands(source: string): CmakeCommand[] {
  const commands: CmakeCommand[] = [];
  let i = 0;
  let line = 1;
  const n = source.length;
  while (i < n) {
    const c = source[i];
    if (c === '\n') { line++; i++; continue; }
    if (c === '#') { while (i < n && source[i] !== '\n') i++; continue; }
    const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(source.slice(i, i + 64));
    if (!m) { i++; continue; }
    let j = i + m[0].length;
    while (j < n && (source[j] === ' ' || source[j] === '\t')) j++;
    if (source[j] !== '(') { i = j; continue; }
    const startLine = line;
    // Arguments up to the matching parenthesis: quotes and nested parentheses respected.
    const args: string[] = [];
    let depth = 1;
    let current = '';
    let quoted = false;
    let inWord = false;
    j++;
    const push = () => { if (inWord) args.push(current); current = ''; inWord = false; };
    for (; j < n && depth > 0; j++) {
      const ch = source[j];
      if (ch === '\n') line++;
      if (quoted) {
        if (ch === '\\' && j + 1 < n) { current += source[++j]; continue; }
        if (ch === '"') { quoted = false; continue; }
        current += ch;
        continue;
      }
      if (ch === '"') { quoted = true; inWord = true; continue; }
      if (ch === '#') { while (j + 1 < n && source[j + 1] !== '\n') j++; push(); continue; }
      if (ch === '(') { depth++; current += ch; inWord = true; continue; }
      if (ch === ')') { depth--; if (depth > 0) { current += ch; inWord = true; } continue; }
      if (/\s/.test(ch)) { push(); continue; }
      current += ch;
      inWord = true;
    }
    push();
    commands.push({
      name: m[0].toLowerCase(),
      args,
      line: startLine,
      text: `${m[0]}(${args.join(' ')})`,
    });
    i = j;
  }
  return commands;
}

/**
 * Conditions whose branch is not part of the image build: the test suite, the fuzzers, the Node
 * addon (cmake-js), MSVC. A branch under `NOT <name>` is kept.
 */
const NOT_IN_THE_IMAGE_BUILD = /^(DISAGG_BUILD_TESTS|DISAGG_FUZZ|CMAKE_JS_VERSION|MSVC)$/;

function conditionExcludes(args: string[]): boolean {
  return args.some((a, k) => NOT_IN_THE_IMAGE_BUILD.test(a) && args[k - 1] !== 'NOT');
}

const FIND_KEYWORDS = new Set(['NAMES', 'HINTS', 'PATHS', 'PATH_SUFFIXES', 'DOC', 'REQUIRED', 'NO_CACHE',
  'NO_DEFAULT_PATH', 'NO_PACKAGE_ROOT_PATH', 'NO_CMAKE_PATH', 'NO_CMAKE_ENVIRONMENT_PATH',
  'NO_SYSTEM_ENVIRONMENT_PATH', 'NO_CMAKE_SYSTEM_PATH', 'CMAKE_FIND_ROOT_PATH_BOTH',
  'ONLY_CMAKE_FIND_ROOT_PATH', 'NO_CMAKE_FIND_ROOT_PATH', 'ENV', 'OPTIONAL', 'VALIDATOR']);
const PKG_KEYWORDS = new Set(['REQUIRED', 'QUIET', 'NO_CMAKE_PATH', 'NO_CMAKE_ENVIRONMENT_PATH', 'IMPORTED_TARGET', 'GLOBAL']);

function toLookup(cmd: CmakeCommand, file: string): CmakeLookup | undefined {
  const base = { file, line: cmd.line, text: cmd.text, required: cmd.args.includes('REQUIRED'), quiet: cmd.args.includes('QUIET') };
  switch (cmd.name) {
    case 'find_package':
      return { command: 'find_package', names: [cmd.args[0]], ...base };
    case 'find_path':
    case 'find_library': {
      const rest = cmd.args.slice(1);
      let names = [rest[0]];
      if (rest[0] === 'NAMES') {
        const end = rest.findIndex((a, k) => k > 0 && FIND_KEYWORDS.has(a));
        names = rest.slice(1, end < 0 ? undefined : end);
      }
      return { command: cmd.name, names, ...base };
    }
    case 'pkg_check_modules':
      return { command: 'pkg_check_modules', names: cmd.args.slice(1).filter((a) => !PKG_KEYWORDS.has(a)), ...base };
    default:
      return undefined;
  }
}

/**
 * Every lookup the `disagg-engine` build makes: engine/CMakeLists.txt and the subdirectories it
 * adds (add_subdirectory), leaving out the branches of NOT_IN_THE_IMAGE_BUILD and function bodies
 * (disagg_fuzz_target). Both sides of other conditions count (e.g. DISAGG_STATIC_TEXT_LIBS).
 */
export function engineLookups(engineDir = path.join(REPO, 'engine')): CmakeLookup[] {
  const lookups: CmakeLookup[] = [];
  const visit = (dir: string) => {
    const listFile = path.join(dir, 'CMakeLists.txt');
    if (!fs.existsSync(listFile)) return;
    const rel = path.relative(REPO, listFile);
    // One entry per open if/function: whether its current branch is left out.
    const stack: { excluded: boolean; parent: boolean }[] = [];
    const excluded = () => stack.length > 0 && stack[stack.length - 1].excluded;
    for (const cmd of parseCmakeCommands(fs.readFileSync(listFile, 'utf8'))) {
      switch (cmd.name) {
        case 'if': { const parent = excluded(); stack.push({ parent, excluded: parent || conditionExcludes(cmd.args) }); continue; }
        case 'elseif': { const top = stack[stack.length - 1]; top.excluded = top.parent || conditionExcludes(cmd.args); continue; }
        case 'else': { const top = stack[stack.length - 1]; top.excluded = top.parent; continue; }
        case 'function': case 'macro': stack.push({ parent: excluded(), excluded: true }); continue;
        case 'endif': case 'endfunction': case 'endmacro': stack.pop(); continue;
        default: break;
      }
      if (excluded()) continue;
      if (cmd.name === 'return' && stack.length === 0) break;
      if (cmd.name === 'add_subdirectory') {
        visit(path.resolve(dir, cmd.args[0].replace('${CMAKE_CURRENT_SOURCE_DIR}', dir)));
        continue;
      }
      const lookup = toLookup(cmd, rel);
      if (lookup) lookups.push(lookup);
    }
  };
  visit(engineDir);
  return lookups;
}

/**
 * The lookups a package list must satisfy: the required ones, and the optional ones the images
 * rely on (tcmalloc's find_library, neither REQUIRED nor QUIET). QUIET lookups without REQUIRED are
 * alternatives tried before a REQUIRED one (msgpack-cxx's CMake package before find_path(msgpack.hpp)).
 */
export function neededLookups(lookups: CmakeLookup[]): CmakeLookup[] {
  return lookups.filter((l) => l.required || !l.quiet);
}

/** `find_path(msgpack.hpp)`, `pkg_check_modules(libpcre2-8)`: the key of PROVIDERS. */
export function lookupKeys(lookup: CmakeLookup): string[] {
  return lookup.names.map((n) => `${lookup.command}(${n})`);
}

// ---- who provides what --------------------------------------------------------------------------

/** The packages that provide one lookup, per distribution. */
export interface Provider {
  /** Key: `find_path(zmq.hpp)`, or `tool(cmake)` for the toolchain build-engine.sh runs. */
  readonly lookup: string;
  /** What is found, as Debian 12 installs it: a `dpkg -S` glob (`*` for the multiarch directory). */
  readonly file?: string;
  readonly packages: Record<Distro, string>;
}

/**
 * Header, CMake package, pkg-config module or archive -> the package that provides it.
 *
 * Sources, per column:
 * - debian-12: `dpkg -S <file>` on Debian 12 (bookworm) with the packages installed; the test
 *   "matches dpkg -S on this Debian 12 machine" re-runs it wherever it runs on Debian 12, and
 *   scripts/build-slim-image.sh builds images/engine-slim from the Debian 12 list for real.
 * - ubuntu-24.04 (noble, images/engine-neuron): the same names as Debian 12; noble's msgpack-cxx
 *   source package (packages.ubuntu.com/source/noble/msgpack-cxx, cited in ros/rosdistro#53521)
 *   builds libmsgpack-cxx-dev, and noble's libzmq3-dev is 4.3.5 (manpages.ubuntu.com, noble zmq(7)),
 *   which no longer ships zmq.hpp, so cppzmq-dev is the one that does, as on Debian 12.
 * - ubuntu-22.04 (jammy, images/engine): jammy took its packages from Debian before its Debian
 *   Import Freeze (2022-02-24). The Debian changelogs (/usr/share/doc/<pkg>/changelog.Debian.gz on
 *   Debian 12) date the two splits after it: msgpack-cxx was first uploaded on 2022-07-15 (before,
 *   msgpack-c 3.3.0's libmsgpack-dev shipped msgpack.hpp: libmsgpack-cxx-dev Breaks/Replaces
 *   libmsgpack-dev << 4.0.0-1~), and cppzmq on 2022-07-29, with zeromq3 4.3.4-3 (2022-08-15)
 *   removing zmq.hpp from libzmq3-dev (cppzmq-dev Breaks/Replaces libzmq3-dev << 4.3.4-3);
 *   kinetic (22.10) is the first Ubuntu with libzmq3-dev 4.3.4-3 (manpages.ubuntu.com, kinetic zmq(7)).
 *   So on jammy zmq.hpp comes from libzmq3-dev and msgpack.hpp from libmsgpack-dev, and the names
 *   cppzmq-dev and libmsgpack-cxx-dev do not exist there.
 * NOT checked: jammy's and noble's Packages indexes themselves (no Ubuntu mirror is reachable
 * from here), nor whether jammy's libutf8proc-dev and libpcre2-dev ship the static archives
 * (libutf8proc.a, libpcre2-8.a) as Debian 12's do; neither Ubuntu builder was built.
 */
export const PROVIDERS: Provider[] = [
  { lookup: 'tool(c++)', packages: { 'debian-12': 'g++', 'ubuntu-22.04': 'g++-12', 'ubuntu-24.04': 'g++' } },
  { lookup: 'tool(cmake)', file: '/usr/bin/cmake', packages: { 'debian-12': 'cmake', 'ubuntu-22.04': 'cmake', 'ubuntu-24.04': 'cmake' } },
  { lookup: 'tool(make)', file: '/usr/bin/make', packages: { 'debian-12': 'make', 'ubuntu-22.04': 'make', 'ubuntu-24.04': 'make' } },
  // pthread.h from libc6-dev, which every g++ pulls in.
  { lookup: 'find_package(Threads)', packages: { 'debian-12': 'g++', 'ubuntu-22.04': 'g++-12', 'ubuntu-24.04': 'g++' } },
  { lookup: 'find_package(PkgConfig)', file: '/usr/bin/pkg-config', packages: { 'debian-12': 'pkg-config', 'ubuntu-22.04': 'pkg-config', 'ubuntu-24.04': 'pkg-config' } },
  { lookup: 'find_package(nlohmann_json)', file: '*/nlohmann_json/nlohmann_jsonConfig.cmake', packages: { 'debian-12': 'nlohmann-json3-dev', 'ubuntu-22.04': 'nlohmann-json3-dev', 'ubuntu-24.04': 'nlohmann-json3-dev' } },
  // FindBoost reads boost/version.hpp.
  { lookup: 'find_package(Boost)', file: '/usr/include/boost/version.hpp', packages: { 'debian-12': 'libboost-dev', 'ubuntu-22.04': 'libboost-dev', 'ubuntu-24.04': 'libboost-dev' } },
  { lookup: 'find_path(zmq.h)', file: '/usr/include/zmq.h', packages: { 'debian-12': 'libzmq3-dev', 'ubuntu-22.04': 'libzmq3-dev', 'ubuntu-24.04': 'libzmq3-dev' } },
  { lookup: 'find_library(zmq)', file: '*/libzmq.so', packages: { 'debian-12': 'libzmq3-dev', 'ubuntu-22.04': 'libzmq3-dev', 'ubuntu-24.04': 'libzmq3-dev' } },
  { lookup: 'find_path(zmq.hpp)', file: '/usr/include/zmq.hpp', packages: { 'debian-12': 'cppzmq-dev', 'ubuntu-22.04': 'libzmq3-dev', 'ubuntu-24.04': 'cppzmq-dev' } },
  { lookup: 'find_path(msgpack.hpp)', file: '/usr/include/msgpack.hpp', packages: { 'debian-12': 'libmsgpack-cxx-dev', 'ubuntu-22.04': 'libmsgpack-dev', 'ubuntu-24.04': 'libmsgpack-cxx-dev' } },
  { lookup: 'pkg_check_modules(libpcre2-8)', file: '*/pkgconfig/libpcre2-8.pc', packages: { 'debian-12': 'libpcre2-dev', 'ubuntu-22.04': 'libpcre2-dev', 'ubuntu-24.04': 'libpcre2-dev' } },
  { lookup: 'find_library(libpcre2-8.a)', file: '*/libpcre2-8.a', packages: { 'debian-12': 'libpcre2-dev', 'ubuntu-22.04': 'libpcre2-dev', 'ubuntu-24.04': 'libpcre2-dev' } },
  { lookup: 'pkg_check_modules(libutf8proc)', file: '*/pkgconfig/libutf8proc.pc', packages: { 'debian-12': 'libutf8proc-dev', 'ubuntu-22.04': 'libutf8proc-dev', 'ubuntu-24.04': 'libutf8proc-dev' } },
  { lookup: 'find_library(libutf8proc.a)', file: '*/libutf8proc.a', packages: { 'debian-12': 'libutf8proc-dev', 'ubuntu-22.04': 'libutf8proc-dev', 'ubuntu-24.04': 'libutf8proc-dev' } },
  { lookup: 'find_library(libtcmalloc_minimal.a)', file: '*/libtcmalloc_minimal.a', packages: { 'debian-12': 'libgoogle-perftools-dev', 'ubuntu-22.04': 'libgoogle-perftools-dev', 'ubuntu-24.04': 'libgoogle-perftools-dev' } },
];

/**
 * The toolchain every build needs besides the lookups: a C++ compiler (`project(... LANGUAGES
 * CXX)`), and cmake with its default generator's make (images/common/build-engine.sh runs them).
 */
export const TOOLS = ['tool(c++)', 'tool(cmake)', 'tool(make)'];

/** One line per need the list does not meet, naming the Dockerfile, the package and the fix. */
export function missingPackages(args: {
  readonly dockerfile: string;
  readonly distro: Distro;
  readonly listPath: string;
  readonly packages: string[];
  readonly lookups: CmakeLookup[];
}): string[] {
  const problems: string[] = [];
  const needs: { key: string; why: string }[] = [
    ...TOOLS.map((key) => ({ key, why: 'the engine build (images/common/build-engine.sh)' })),
    ...neededLookups(args.lookups).flatMap((l) => lookupKeys(l).map((key) => ({ key, why: `${l.file}:${l.line} ${l.text}` }))),
  ];
  for (const { key, why } of needs) {
    const provider = PROVIDERS.find((p) => p.lookup === key);
    if (!provider) {
      problems.push(`${key} (${why}) is not in the PROVIDERS table of test/images/engine-packages.ts: `
        + `add the package that provides it on ${DISTROS.join(', ')}, with its source`);
      continue;
    }
    const pkg = provider.packages[args.distro];
    if (!args.packages.includes(pkg)) {
      problems.push(`${args.dockerfile}: its builder installs ${args.listPath}, which lacks ${pkg} `
        + `(provides ${key} on ${args.distro}, needed by ${why}); fix: add a line '${pkg}' to ${args.listPath}`);
    }
  }
  return problems;
}
