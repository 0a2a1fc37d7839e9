// Helpers shared by the kvstore end-to-end tests: start the real `disagg-engine kvstore` binary (or
// redis-server, as the peer that defines the expected behaviour), talk raw RESP over a socket, and
// read a process's resident memory.
import { ChildProcess, spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';

// DISAGG_ENGINE_BIN lets a developer point at a binary built elsewhere.
export const BINARY = process.env.DISAGG_ENGINE_BIN ?? path.join(__dirname, '..', '..', 'engine', 'build', 'disagg-engine');
export const HAVE_BINARY = fs.existsSync(BINARY);
export const HAVE_REDIS_TOOLS = spawnSync('redis-cli', ['--version']).status === 0 && spawnSync('redis-benchmark', ['--version']).status === 0;
export const HAVE_REDIS_SERVER = spawnSync('redis-server', ['--version']).status === 0;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export async function waitForPort(port: number, proc: ChildProcess, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`server exited early with code ${proc.exitCode}`);
    const ok = await new Promise<boolean>(resolve => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => { s.destroy(); resolve(true); });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise(r => setTimeout(r, 50));
  }
  throw new Error(`server did not listen on ${port} within ${timeoutMs} ms`);
}

export interface Server {
  readonly port: number;
  readonly metricsPort: number;
  readonly proc: ChildProcess;
  readonly stderr: () => string;
}

export async function startKvstore(extraArgs: string[]): Promise<Server> {
  const port = await freePort();
  const metricsPort = await freePort();
  const proc = spawn(BINARY, ['kvstore', '--port', String(port), '--metrics-port', String(metricsPort), ...extraArgs], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', d => { err += d.toString(); });
  await waitForPort(port, proc);
  return { port, metricsPort, proc, stderr: () => err };
}

/** redis-server without persistence, the reference for what a reply should be. */
export async function startRedis(dir: string): Promise<Server> {
  const port = await freePort();
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', d => { err += d.toString(); });
  await waitForPort(port, proc);
  return { port, metricsPort: 0, proc, stderr: () => err };
}

export async function stop(k: Server, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (k.proc.exitCode !== null || k.proc.signalCode !== null) return;
  await new Promise<void>(resolve => {
    k.proc.once('exit', () => resolve());
    k.proc.kill(signal);
  });
}

/** Resident set size of a process, in bytes (VmRSS from /proc). */
export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

/**
 * A raw connection: write bytes, wait for reply bytes. Every wait is bounded (`timeoutMs`), so a
 * server that never answers fails the test instead of hanging it.
 */
export class RawConnection {
  static async open(port: number): Promise<RawConnection> {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', () => resolve());
      socket.once('error', reject);
    });
    return new RawConnection(socket);
  }

  private received = Buffer.alloc(0);
  private closed = false;
  private wake: (() => void) | undefined;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', d => { this.received = Buffer.concat([this.received, d]); this.wake?.(); });
    socket.on('close', () => { this.closed = true; this.wake?.(); });
    socket.on('error', () => { this.closed = true; this.wake?.(); });
  }

  /** Writes `data`; resolves once the kernel took it (or the peer closed). */
  async write(data: string | Buffer): Promise<void> {
    if (this.closed) return;
    await new Promise<void>(resolve => {
      this.socket.write(data, () => resolve());
    });
  }

  /** The next CRLF-terminated line, without the CRLF; '' if the connection closed or `timeoutMs` passed first. */
  async line(timeoutMs = 10_000): Promise<string> {
    const ok = await this.waitFor(() => this.received.indexOf('\r\n') >= 0, timeoutMs);
    if (!ok) return '';
    const at = this.received.indexOf('\r\n');
    const text = this.received.subarray(0, at).toString('latin1');
    this.received = this.received.subarray(at + 2);
    return text;
  }

  /** The next `n` bytes; fewer if the connection closed or `timeoutMs` passed first. */
  async read(n: number, timeoutMs = 10_000): Promise<Buffer> {
    await this.waitFor(() => this.received.length >= n, timeoutMs);
    const out = this.received.subarray(0, n);
    this.received = this.received.subarray(out.length);
    return out;
  }

  /** Whether the server closed the connection within `timeoutMs`. */
  async closedBy(timeoutMs = 10_000): Promise<boolean> {
    return this.waitFor(() => this.closed, timeoutMs);
  }

  destroy(): void {
    this.socket.destroy();
  }

  private async waitFor(done: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (this.closed || Date.now() >= deadline) return done();
      await new Promise<void>(resolve => {
        const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.wake = () => { clearTimeout(t); resolve(); };
      });
    }
    return true;
  }
}

/** A command in RESP array form. */
export function resp(...args: (string | Buffer)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const b = typeof a === 'string' ? Buffer.from(a) : a;
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}
