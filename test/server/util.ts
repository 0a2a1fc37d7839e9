import { ChildProcess, spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const ROOT = path.join(__dirname, '..', '..');
/** The engine binary under test; DISAGG_ENGINE_BIN points at one built elsewhere. */
export const BINARY = process.env.DISAGG_ENGINE_BIN ?? path.join(ROOT, 'engine', 'build', 'disagg-engine');
/** The example engine configuration the servers run with. */
export const CONFIG = path.join(ROOT, 'engine', 'examples', 'llama-3.3-70b-p5en.json');

/**
 * `describe` when BINARY has every one of `roles` (a role whose libraries were missing at build time
 * is left out of the binary), else `describe.skip` with a warning that names `what`.
 */
export function describeIfRoles(what: string, ...roles: string[]): jest.Describe {
  const built = fs.existsSync(BINARY) && roles.every(r => spawnSync(BINARY, [r, '--help']).status === 0);
  if (!built) {
    // eslint-disable-next-line no-console
    console.warn(`${what} skipped: ${BINARY} lacks the ${roles.join(' or ')} role (build engine/ first)`);
  }
  return built ? describe : describe.skip;
}

/** Runs curl (a real raw-HTTP client) and returns [status, body]. */
export function curl(args: string[]): [number, string] {
  const r = spawnSync('curl', ['-s', '-o', '-', '-w', '\n%{http_code}', ...args], { encoding: 'utf8' });
  const lines = r.stdout.split('\n');
  const status = Number(lines.pop());
  return [status, lines.join('\n')];
}

/** A `disagg-engine` server process under test. */
export interface EngineProcess {
  readonly port: number;
  readonly url: string;
  readonly proc: ChildProcess;
  /** Resolves with the exit code once the process has exited. */
  readonly exited: Promise<number | null>;
  /** What it wrote to stderr so far. */
  readonly stderr: () => string;
}

/**
 * Starts `disagg-engine <args>` (a server role with `--port 0`) and waits at most `timeoutMs` for
 * its "listening on http://127.0.0.1:PORT" line; rejects, with its stderr, when it exits first.
 */
export async function startEngine(args: string[], timeoutMs = 15_000): Promise<EngineProcess> {
  const proc = spawn(BINARY, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (d) => { err += d.toString(); });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${args[0]} did not start: ${err}`)), timeoutMs);
    proc.stdout!.on('data', (d) => {
      out += d.toString();
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.once('exit', (code) => { clearTimeout(timer); reject(new Error(`${args[0]} exited with ${code}: ${err}`)); });
  });
  return { port, url: `http://127.0.0.1:${port}`, proc, exited, stderr: () => err };
}

/** A free loopback TCP port (the CLI's own helper). */
export { freePort } from '../../src/cli/local/processes';

/** Polls `check` until it is true (errors count as not yet) or `ms` pass. */
export async function waitFor(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      if (await check()) return;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Prometheus text -> "name{labels}" -> value (bucket lines dropped). */
export async function metrics(p: { url: string }): Promise<Map<string, number>> {
  const text = await (await fetch(`${p.url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '' || line.includes('_bucket{')) continue;
    const cut = line.lastIndexOf(' ');
    out.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return out;
}

/** Sum of every sample of a family (all label sets). */
export function total(m: Map<string, number>, family: string): number {
  let sum = 0;
  for (const [k, v] of m) if (k === family || k.startsWith(`${family}{`)) sum += v;
  return sum;
}

/**
 * A start function for one test file's engine processes: each call is startEngine(args, timeoutMs)
 * and remembers the process; after the file's last test every one still running is killed
 * (SIGKILL) and awaited. Registers that afterAll, so call it at the file's top level.
 */
export function engineProcesses(timeoutMs?: number): (args: string[]) => Promise<EngineProcess> {
  const started: EngineProcess[] = [];
  afterAll(async () => {
    for (const p of started) if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
    await Promise.all(started.map((p) => p.exited));
  });
  return async (args) => {
    const p = await startEngine(args, timeoutMs);
    started.push(p);
    return p;
  };
}

/** The value of `family` for endpoint `host:port` (undefined when absent). */
export function ofEndpoint(m: Map<string, number>, family: string, endpoint: string): number | undefined {
  return [...m].find(([k]) => k.startsWith(`${family}{`) && k.includes(`endpoint="${endpoint}"`))?.[1];
}

/**
 * A prompt of `words` distinct words, `prefix` then the word's index written in `radix` (a few
 * tokens each in the sim-worker's tokenizer).
 */
export function prompt(prefix: string, words: number, radix = 10): string {
  return Array.from({ length: words }, (_, i) => `${prefix}${i.toString(radix)}`).join(' ');
}
