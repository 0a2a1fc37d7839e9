// Hostile clients against the real binary (issue 20): lengths it will never send, values it sends
// half of, and what that does to the server's memory. Every wait is bounded; no test asserts a time.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { BINARY, HAVE_BINARY, HAVE_REDIS_SERVER, RawConnection, resp, rssBytes, startKvstore, startRedis, stop } from './util';

const describeIfBuilt = HAVE_BINARY ? describe : describe.skip;
const testIfRedis = HAVE_REDIS_SERVER ? test : test.skip;
if (!HAVE_BINARY) {
  // eslint-disable-next-line no-console
  console.warn(`kvstore hostile-client tests skipped: ${BINARY} is not built`);
}

jest.setTimeout(120_000);

const MiB = 1024 * 1024;

/** The header of a SET whose value is `bytes` long; none of the value follows. */
function setHeader(key: string, bytes: number): string {
  return `*3\r\n$3\r\nSET\r\n$${key.length}\r\n${key}\r\n$${bytes}\r\n`;
}

async function field(port: number, name: string): Promise<string> {
  const c = await RawConnection.open(port);
  try {
    await c.write(resp('INFO'));
    const head = await c.line();
    const body = (await c.read(Number(head.slice(1)))).toString('latin1');
    const m = new RegExp(`^${name}:(.*)\r$`, 'm').exec(body);
    if (!m) throw new Error(`INFO (${head}) has no ${name}: ${body}`);
    return m[1];
  } finally {
    c.destroy();
  }
}

/** Bytes the server has read from clients so far (its /metrics counter). */
async function bytesIn(metricsPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const m = /^kvstore_network_bytes_total\{direction="in"\} (\d+)$/m.exec(text);
  if (!m) throw new Error('no kvstore_network_bytes_total{direction="in"} in /metrics');
  return Number(m[1]);
}

describeIfBuilt('kvstore against hostile clients', () => {
  testIfRedis('a declared length over the value limit is refused at its header, as redis-server does', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvstore-hostile-'));
    const kv = await startKvstore(['--memory-bytes', '64m']);
    const redis = await startRedis(dir);
    try {
      for (const server of [kv, redis]) {
        // GIVEN a client that declares a 2 GiB value (over both servers' 512 MiB limit) and sends none of it
        const c = await RawConnection.open(server.port);
        await c.write(setHeader('k', 2 ** 31));
        // THEN it is answered without waiting for the value, with Redis's error, and the connection closes
        const reply = await c.line();
        expect(reply).toMatch(/^-ERR Protocol error: invalid bulk length/);
        expect(await c.closedBy()).toBe(true);
        c.destroy();
      }
    } finally {
      await stop(kv);
      await stop(redis);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('values still arriving stay within --memory-bytes, are refused at once beyond it, and their memory comes back', async () => {
    // GIVEN a 64 MiB memory tier
    const kv = await startKvstore(['--memory-bytes', '64m']);
    const pid = kv.proc.pid!;
    const conns: RawConnection[] = [];
    try {
      const before = rssBytes(pid);
      // WHEN three clients each declare a 150 MB value (larger than the whole budget) and send half
      const refusals: string[] = [];
      for (let i = 0; i < 3; i++) {
        const c = await RawConnection.open(kv.port);
        conns.push(c);
        await c.write(setHeader(`big${i}`, 150_000_000));
        // THEN each is refused at its header, before any of its value is sent
        refusals.push(await c.line());
        await c.write(Buffer.alloc(75_000_000, 0x61));
      }
      for (const r of refusals) expect(r).toMatch(/^-OOM .*--memory-bytes/);
      // AND two clients half-way through 40 MiB values: the first fits and is held, the second is refused
      const a = await RawConnection.open(kv.port);
      const b = await RawConnection.open(kv.port);
      conns.push(a, b);
      await a.write(Buffer.concat([Buffer.from(setHeader('a', 40 * MiB)), Buffer.alloc(20 * MiB, 0x62)]));
      await b.write(setHeader('b', 40 * MiB));
      expect(await b.line()).toMatch(/^-OOM .*beside \d+ bytes of other values still arriving/);
      await b.write(Buffer.alloc(20 * MiB, 0x63));
      expect(Number(await field(kv.port, 'inflight_bytes'))).toBe(40 * MiB + 4);
      // (RSS is read once the server has read every byte sent: the skipped ones and A's half value)
      const sent = 3 * 75_000_000 + 40 * MiB;
      for (let i = 0; i < 200 && await bytesIn(kv.metricsPort) < sent; i++) await new Promise(r => setTimeout(r, 50));
      expect(await bytesIn(kv.metricsPort)).toBeGreaterThan(sent);
      const during = rssBytes(pid);
      // AND once they all go away, the reservation is returned and the memory with it
      for (const c of conns) c.destroy();
      let inflight = '';
      for (let i = 0; i < 100 && inflight !== '0'; i++) {
        inflight = await field(kv.port, 'inflight_bytes');
        if (inflight !== '0') await new Promise(r => setTimeout(r, 50));
      }
      expect(inflight).toBe('0');
      // (the server hands freed memory back to the system once it has been idle for a moment)
      let after = rssBytes(pid);
      for (let i = 0; i < 50 && after - before >= 8 * MiB; i++) {
        await new Promise(r => setTimeout(r, 100));
        after = rssBytes(pid);
      }
      // eslint-disable-next-line no-console
      console.log(`kvstore RSS under hostile uploads (--memory-bytes 64m): before ${(before / MiB).toFixed(1)} MiB, ` +
        `during ${(during / MiB).toFixed(1)} MiB, after ${(after / MiB).toFixed(1)} MiB`);
      // Bounds: within the budget while they arrived (they would be 3 x 75 MB + 20 MiB otherwise),
      // and back to within a few MiB of the start afterwards.
      expect(during - before).toBeLessThan(64 * MiB);
      expect(after - before).toBeLessThan(8 * MiB);
      // AND the server still works
      const c = await RawConnection.open(kv.port);
      await c.write(resp('SET', 'after', 'ok'));
      expect(await c.line()).toBe('+OK');
      c.destroy();
    } finally {
      for (const c of conns) c.destroy();
      await stop(kv);
    }
  });
});
