// The engine's tiers, checked on its #include lines (issue 38), as test/import-cycles.test.ts checks
// src/: a rule shared across a boundary lives below it, so nothing reaches upwards.
//   core     engine/include/disagg, engine/src/core: the rules (cost model, routing, pressure, ...)
//   sim      engine/src/sim: the simulator, over core
//   lib      engine/src/lib/<name>: libraries the servers share (http, openai, text, config, kv_events), over
//            core and other libraries
//   server   engine/src/servers/<name>: I/O loops (router, sim_worker, kvstore), over core and lib;
//            none includes another server
//   cmd      engine/src/cmd: main.cc and the command-line front ends, over anything
//   addon    engine/src/addon: the Node binding, over core (and so sim's public header)
// Nothing includes cmd or addon.
import * as fs from 'fs';
import * as path from 'path';

const ENGINE = path.resolve(__dirname, '..', '..', 'engine');

type Tier = 'core' | 'sim' | `lib:${string}` | `server:${string}` | 'cmd' | 'addon';

function tierOf(rel: string): Tier | undefined {
  if (rel.startsWith('include/disagg/') || rel.startsWith('src/core/')) return 'core';
  if (rel.startsWith('src/sim/')) return 'sim';
  const lib = /^src\/lib\/([^/]+)\//.exec(rel);
  if (lib) return `lib:${lib[1]}`;
  const server = /^src\/servers\/([^/]+)\//.exec(rel);
  if (server) return `server:${server[1]}`;
  if (rel.startsWith('src/cmd/')) return 'cmd';
  if (rel.startsWith('src/addon/')) return 'addon';
  return undefined;
}

/** Whether a file of tier `from` may include one of tier `to`. */
function allowed(from: Tier, to: Tier): boolean {
  if (from === to) return true;
  if (to === 'cmd' || to === 'addon') return false;
  if (to === 'core') return true;
  switch (from) {
    case 'core': return false;
    case 'sim': return false;
    case 'cmd': return true;
    case 'addon': return false;
    default: break;
  }
  if (from.startsWith('lib:')) return to.startsWith('lib:');
  // A server: libraries, never another server or the simulator.
  return to.startsWith('lib:');
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sources(p));
    else if (/\.(h|cc|inc)$/.test(entry.name)) out.push(p);
  }
  return out;
}

/** Every quoted #include of the engine's sources, resolved to the file it names. */
function includes(): Array<{ from: string; to: string; line: string }> {
  const files = [...sources(path.join(ENGINE, 'src')), ...sources(path.join(ENGINE, 'include'))];
  const out: Array<{ from: string; to: string; line: string }> = [];
  for (const file of files) {
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      const m = /^\s*#\s*include\s+"([^"]+)"/.exec(line);
      if (!m) continue;
      // The compiler's search: beside the file, then the include roots; else the one file of that
      // path a target's include directories expose (a server's own folder).
      const candidates = [path.resolve(path.dirname(file), m[1]), path.join(ENGINE, 'src', m[1]), path.join(ENGINE, 'include', m[1])];
      let to = candidates.find(c => fs.existsSync(c));
      if (!to) {
        const matches = files.filter(f => f.endsWith(`/${m[1]}`));
        if (matches.length !== 1) throw new Error(`${path.relative(ENGINE, file)}: cannot resolve #include "${m[1]}" (${matches.length} candidates)`);
        to = matches[0];
      }
      out.push({ from: path.relative(ENGINE, file), to: path.relative(ENGINE, to), line: line.trim() });
    }
  }
  return out;
}

describe('engine tiers', () => {
  test('no #include reaches upwards or across servers', () => {
    const all = includes();
    expect(all.length).toBeGreaterThan(300);
    const broken = all.filter(e => {
      const a = tierOf(e.from);
      const b = tierOf(e.to);
      return a === undefined || b === undefined || !allowed(a, b);
    }).map(e => `${e.from} (${tierOf(e.from) ?? 'no tier'}) includes ${e.to} (${tierOf(e.to) ?? 'no tier'}): ${e.line}`);
    expect(broken).toEqual([]);
    // Every tier is present, so a moved folder cannot empty a rule and pass it.
    const tiers = new Set(all.map(e => tierOf(e.from)));
    for (const t of ['core', 'sim', 'lib:http', 'lib:openai', 'lib:kv_events', 'lib:text', 'server:router', 'server:sim_worker', 'server:kvstore', 'cmd', 'addon']) {
      expect([t, tiers.has(t as Tier)]).toEqual([t, true]);
    }
  });

  test('the rules refuse what they should', () => {
    expect(allowed('core', 'sim')).toBe(false);
    expect(allowed('core', 'lib:http')).toBe(false);
    expect(allowed('sim', 'server:router')).toBe(false);
    expect(allowed('lib:text', 'server:router')).toBe(false);
    expect(allowed('server:router', 'server:sim_worker')).toBe(false);
    expect(allowed('server:router', 'sim')).toBe(false);
    expect(allowed('cmd', 'addon')).toBe(false);
    expect(allowed('server:router', 'lib:text')).toBe(true);
    expect(allowed('cmd', 'server:router')).toBe(true);
    expect(tierOf('src/servers/router/router.cc')).toBe('server:router');
    expect(tierOf('src/lib/text/jinja/parser.cc')).toBe('lib:text');
    expect(tierOf('include/disagg/pool_pressure.h')).toBe('core');
  });
});
