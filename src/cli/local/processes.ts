import { ChildProcess, spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import type { CliIo } from '../command';
import { ScrapeTargetsOptions, writeScrapeTargets } from './scrape-targets';

/**
 * `disagg-engine` processes started by `disagg local`, and their cleanup: every process started
 * here is tracked until it has exited, and stopAll() (called on success, error and Ctrl-C) ends
 * them, SIGTERM first (they drain), SIGKILL after a grace period.
 */

/** The package root: src/cli/local (or lib/cli/local) is three levels below it. */
const PACKAGE_ROOT = path.resolve(__dirname, '..', '..', '..');

/** Where `npx projen engine` puts the binary. */
export const DEFAULT_ENGINE_BINARY = path.join(PACKAGE_ROOT, 'engine', 'build', 'disagg-engine');

/**
 * The engine binary to run: `explicit`, else $DISAGG_ENGINE_BIN, else engine/build/disagg-engine.
 * @throws an Error saying how to build it when it is missing or lacks the router or sim-worker role
 */
export function resolveEngineBinary(explicit?: string): string {
  const binary = explicit ?? process.env.DISAGG_ENGINE_BIN ?? DEFAULT_ENGINE_BINARY;
  if (!fs.existsSync(binary)) {
    throw new Error(`the engine binary ${binary} is missing; build it with \`npx projen engine\` (or pass --engine PATH)`);
  }
  for (const role of ['router', 'sim-worker']) {
    const r = spawnSync(binary, [role, '--help'], { stdio: 'ignore', timeout: 10_000 });
    if (r.status !== 0) {
      throw new Error(`${binary} has no '${role}' role (exit ${r.status ?? r.signal}); rebuild it with \`npx projen engine\``);
    }
  }
  return binary;
}

/** A free loopback TCP port (closed again before it is returned; the caller binds it next). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Whether `port` can be bound on 127.0.0.1 now. */
async function portFree(port: number): Promise<boolean> {
  return new Promise(resolve => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * The kernel's ephemeral port range (Linux's ip_local_port_range; 32768-60999 where it cannot be
 * read). Outbound connections take their local ports from it, so a port chosen there now may be
 * some client's by the time a process binds it.
 */
export function ephemeralPortRange(): [number, number] {
  try {
    const [low, high] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high) && low <= high) return [low, high];
  } catch {
    // not Linux: the default of Linux itself is as good a guess as any
  }
  return [32_768, 60_999];
}

/**
 * The first of `n` consecutive loopback ports that are all free now (a pod's per-rank ports, as its
 * pool's router configuration lists them), from random bases in 10000 up to the kernel's ephemeral
 * range (a slot bound minutes later, as `--autoscale` binds its scale-ups, must not be one an outbound
 * connection took meanwhile); the caller binds them next.
 * @throws after 100 tries
 */
export async function consecutiveFreePorts(n: number): Promise<number> {
  const [ephemeralLow, ephemeralHigh] = ephemeralPortRange();
  // Below the ephemeral range when it leaves room, else above it, else anywhere from 10000.
  const [low, high] = ephemeralLow - 10_000 >= n + 1_000 ? [10_000, ephemeralLow]
    : 65_535 - ephemeralHigh >= n + 1_000 ? [ephemeralHigh + 1, 65_536] : [10_000, 65_536];
  for (let tries = 0; tries < 100; tries++) {
    const base = low + Math.floor(Math.random() * (high - low - n));
    let ok = true;
    for (let i = 0; i < n && ok; i++) ok = await portFree(base + i);
    if (ok) return base;
  }
  throw new Error(`found no ${n} consecutive free loopback ports in 100 tries`);
}

/** One started engine process. */
export interface EngineProcess {
  /** 'router', 'prefill-0', 'decode-1', 'worker-2', ... */
  readonly name: string;
  readonly pid: number;
  /** The HTTP port it printed ("listening on http://127.0.0.1:PORT"). */
  readonly port: number;
  readonly url: string;
  /** Its stderr so far (for error messages). */
  readonly stderr: () => string;
}

interface Tracked {
  readonly name: string;
  readonly proc: ChildProcess;
  readonly exited: Promise<void>;
  done: boolean;
  /** Set once it listens. */
  started?: EngineProcess;
}

/** The processes of one `disagg local` run. */
export class ProcessGroup {
  private readonly tracked: Tracked[] = [];
  /** Every pid ever started (for the JSON report and the no-orphans test). */
  public readonly pids: Array<{ name: string; pid: number }> = [];

  /** Called with the processes that listen now, whenever one starts listening or exits. */
  private listener?: (live: EngineProcess[]) => void;

  constructor(private readonly binary: string) {}

  /** Calls `listener` with the live processes whenever one starts listening or exits (one listener). */
  public onChange(listener: (live: EngineProcess[]) => void): void {
    this.listener = listener;
  }

  private changed(): void {
    this.listener?.(this.tracked.filter(t => !t.done && t.started).map(t => t.started!));
  }

  /**
   * Starts `disagg-engine <args>` and waits for its "listening on" line (at most `timeoutMs`).
   * @throws when it exits or stays silent; the error quotes its stderr
   */
  public async start(name: string, args: string[], timeoutMs = 20_000): Promise<EngineProcess> {
    const proc = spawn(this.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    let out = '';
    proc.stderr!.on('data', d => { err = (err + d.toString()).slice(-8192); });
    const t: Tracked = {
      name,
      proc,
      done: false,
      exited: new Promise<void>(resolve => proc.once('exit', () => { t.done = true; this.changed(); resolve(); })),
    };
    proc.once('error', () => { t.done = true; });
    this.tracked.push(t);
    if (proc.pid !== undefined) this.pids.push({ name, pid: proc.pid });
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name} did not start within ${timeoutMs} ms: ${err.trim()}`)), timeoutMs);
      proc.stdout!.on('data', d => {
        out += d.toString();
        const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      proc.once('exit', code => {
        clearTimeout(timer);
        reject(new Error(`${name} exited with ${code} while starting: ${err.trim()}`));
      });
      proc.once('error', e => {
        clearTimeout(timer);
        reject(new Error(`${name} could not start: ${e.message}`));
      });
    });
    proc.stdout!.resume(); // keep draining its stdout
    t.started = { name, pid: proc.pid!, port, url: `http://127.0.0.1:${port}`, stderr: () => err };
    this.changed();
    return t.started;
  }

  /** Stops every live process: SIGTERM, then SIGKILL after `graceMs`; resolves when all have exited. */
  public async stopAll(graceMs = 3_000): Promise<void> {
    const live = this.tracked.filter(t => !t.done);
    for (const t of live) t.proc.kill('SIGTERM');
    const timer = setTimeout(() => { for (const t of live) if (!t.done) t.proc.kill('SIGKILL'); }, graceMs);
    await Promise.all(live.map(t => t.exited));
    clearTimeout(timer);
    this.tracked.splice(0, this.tracked.length, ...this.tracked.filter(t => !t.done));
  }

  /**
   * Stops one process as a pod is stopped: SIGTERM (a sim-worker drains: new requests get 503, those
   * in flight finish), SIGKILL after `graceMs`. Resolves with its exit code, or the signal that ended it.
   */
  public async stop(p: EngineProcess, graceMs: number): Promise<number | string> {
    const t = this.tracked.find(x => x.proc.pid === p.pid);
    if (!t) throw new Error(`${p.name} (pid ${p.pid}) is not a process of this group`);
    const ended = new Promise<number | string>(resolve => {
      if (t.done) resolve(t.proc.exitCode ?? t.proc.signalCode ?? 'exited');
      else t.proc.once('exit', (code, signal) => resolve(code ?? signal ?? 'exited'));
    });
    if (!t.done) t.proc.kill('SIGTERM');
    const timer = setTimeout(() => { if (!t.done) t.proc.kill('SIGKILL'); }, graceMs);
    const result = await ended;
    clearTimeout(timer);
    return result;
  }

  /** Last resort (process 'exit' handler, synchronous): SIGKILL whatever still runs. */
  public killAllNow(): void {
    for (const t of this.tracked) if (!t.done) t.proc.kill('SIGKILL');
  }
}

/** Waits until GET `url` answers 200 (at most `timeoutMs`). @throws with the last answer */
export async function waitFor200(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(1_000) });
      const body = await r.text();
      if (r.status === 200) return;
      last = `HTTP ${r.status} ${body.slice(0, 200)}`;
    } catch (e) {
      last = (e as Error).message;
    }
    await new Promise(r => setTimeout(r, 50));
  }
  throw new Error(`${url} did not answer 200 within ${timeoutMs} ms (last: ${last})`);
}

/** What a `disagg local` run gets from withProcessGroup. */
export interface LocalSession {
  readonly group: ProcessGroup;
  /** A private temporary folder (configuration files), removed at the end. */
  readonly tmp: string;
  /** Set on Ctrl-C or SIGTERM: the processes are being stopped, so requests now fail. */
  readonly interrupted: { value: boolean };
}

/**
 * Runs `body` with a fresh process group and temporary folder, and cleans up whatever happens:
 * every process it started is stopped (SIGTERM, they drain) and the folder removed, on success, on an
 * error and on Ctrl-C / SIGTERM (then the command exits 130 / 143); a process 'exit' SIGKILLs leftovers.
 * With `scrapeTargets`, the live processes are kept in that Prometheus file_sd file (scrape-targets.ts).
 */
export async function withProcessGroup<T>(binary: string, io: CliIo, body: (s: LocalSession) => Promise<T>,
  scrapeTargets?: ScrapeTargetsOptions): Promise<T> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-local-'));
  const group = new ProcessGroup(binary);
  if (scrapeTargets) {
    writeScrapeTargets([], scrapeTargets);
    group.onChange(live => writeScrapeTargets(live, scrapeTargets));
  }
  const interrupted = { value: false };
  const onSignal = (signal: NodeJS.Signals) => {
    interrupted.value = true;
    io.err(`\ndisagg local: ${signal}: stopping the router and sim-workers`);
    void group.stopAll(2_000).finally(() => {
      fs.rmSync(tmp, { recursive: true, force: true });
      process.exit(signal === 'SIGINT' ? 130 : 143);
    });
  };
  const onExit = () => group.killAllNow();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', onExit);
  try {
    return await body({ group, tmp, interrupted });
  } finally {
    await group.stopAll();
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    process.removeListener('exit', onExit);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
