// End to end: the real `disagg-engine kvstore` binary driven by real Redis clients (redis-cli,
// redis-benchmark, the `redis` npm client), plus kill -9 during a write stream and a restart.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { createClient, RESP_TYPES } from 'redis';
import { BINARY, HAVE_BINARY, HAVE_REDIS_TOOLS, Server as Kvstore, startKvstore, stop } from './util';

if (!HAVE_BINARY) {
  // eslint-disable-next-line no-console
  console.warn(`kvstore end-to-end tests skipped: ${BINARY} is not built (cmake -S engine -B engine/build && cmake --build engine/build)`);
}
const describeIfBuilt = HAVE_BINARY ? describe : describe.skip;
const testIfTools = HAVE_REDIS_TOOLS ? test : test.skip;

jest.setTimeout(120_000);

describeIfBuilt('kvstore with real Redis clients', () => {
  let dir: string;
  let kv: Kvstore;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvstore-e2e-'));
    kv = await startKvstore(['--memory-bytes', '64m', '--disk-dir', path.join(dir, 'disk'), '--disk-bytes', '256m']);
  });

  afterAll(async () => {
    await stop(kv);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  testIfTools('redis-cli scripted session', () => {
    // GIVEN a session typed into redis-cli, including an unknown command in the middle
    const script = [
      'PING',
      'SET greeting hello',
      'GET greeting',
      'SET greeting other NX',
      'SET counter 1 EX 100',
      'TTL counter',
      'MSET a 1 b 2',
      'MGET a b missing',
      'NOSUCHCOMMAND x',
      'EXISTS a b missing',
      'DEL a b',
      'ECHO still-here',
      'DBSIZE',
    ].join('\n') + '\n';
    // WHEN it runs
    const r = spawnSync('redis-cli', ['-p', String(kv.port)], { input: script, encoding: 'utf8' });
    // THEN each reply is the one Redis would give, and the error did not end the session
    expect(r.status).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toEqual([
      'PONG',
      'OK',
      'hello',
      '',
      'OK',
      '100',
      'OK',
      '1', '2', '',
      expect.stringMatching(/^ERR unknown command 'NOSUCHCOMMAND'/),
      '', // redis-cli prints a blank line after an error reply (same with redis-server)
      '2',
      '2',
      'still-here',
      '2',
    ]);
  });

  testIfTools('redis-benchmark completes without errors, with and without pipelining', () => {
    for (const extra of [[], ['-P', '16']]) {
      // GIVEN a short SET/GET run with 4 KiB values
      const r = spawnSync('redis-benchmark', ['-p', String(kv.port), '-t', 'set,get', '-n', '2000', '-d', '4096', '-q', ...extra], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      // THEN both tests report a throughput and nothing reports an error
      expect(r.status).toBe(0);
      const out = r.stdout + r.stderr;
      expect(out).toMatch(/SET: [\d.]+ requests per second/);
      expect(out).toMatch(/GET: [\d.]+ requests per second/);
      expect(out).not.toMatch(/ERR|[Ee]rror/);
    }
  });

  test('node-redis v5 client: strings, binary values, TTLs, SCAN and errors', async () => {
    const client = createClient({ url: `redis://127.0.0.1:${kv.port}`, name: 'e2e' });
    client.on('error', () => undefined);
    await client.connect();
    try {
      // GIVEN a connected client (its handshake sends CLIENT SETNAME and CLIENT SETINFO)
      expect(await client.ping()).toBe('PONG');
      expect(await client.sendCommand(['CLIENT', 'GETNAME'])).toBe('e2e');
      // WHEN it stores strings and a 256 KiB binary KV chunk
      expect(await client.set('s', 'v', { EX: 60 })).toBe('OK');
      const chunk = Buffer.alloc(256 * 1024);
      for (let i = 0; i < chunk.length; i++) chunk[i] = (i * 131 + 17) % 256;
      expect(await client.set('chunk', chunk)).toBe('OK');
      // THEN it reads them back exactly
      expect(await client.get('s')).toBe('v');
      const binary = client.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
      const got = await binary.get('chunk');
      expect(Buffer.isBuffer(got)).toBe(true);
      expect((got as unknown as Buffer).equals(chunk)).toBe(true);
      expect(await client.mGet(['s', 'nope'])).toEqual(['v', null]);
      expect(await client.exists(['s', 'chunk', 'nope'])).toBe(2);
      const ttl = await client.ttl('s');
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60);
      expect(await client.expire('chunk', 100)).toBe(1);
      // AND SCAN visits every key
      for (let i = 0; i < 50; i++) await client.set(`scan:${i}`, String(i));
      const seen = new Set<string>();
      for await (const keys of client.scanIterator({ MATCH: 'scan:*', COUNT: 7 })) keys.forEach(k => seen.add(k));
      expect(seen.size).toBe(50);
      // AND an unknown command is a rejected promise, not a broken connection
      await expect(client.sendCommand(['NOSUCH'])).rejects.toThrow(/unknown command/);
      expect(await client.unlink(['s', 'chunk'])).toBe(2);
      expect(await client.get('s')).toBeNull();
    } finally {
      client.destroy();
    }
  });

  test('/metrics serves Prometheus text with per-tier series', async () => {
    const res = await fetch(`http://127.0.0.1:${kv.metricsPort}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(/^kvstore_hits_total\{tier="memory"\} \d+$/m);
    expect(text).toMatch(/^kvstore_bytes\{tier="disk"\} \d+$/m);
    expect(text).toMatch(/^kvstore_command_duration_seconds_bucket\{command="get",le="\+Inf"\} \d+$/m);
  });
});

describeIfBuilt('kvstore crash recovery', () => {
  test('kill -9 during a write stream: after restart every read is the last complete value or a miss', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvstore-crash-'));
    // Tiny memory tier and unconditional demotion, so nearly every write reaches the disk tier.
    const args = ['--memory-bytes', '1m', '--disk-dir', path.join(dir, 'disk'), '--disk-bytes', '256m',
      '--segment-bytes', '1m', '--demote-min-reads', '0'];
    let kv = await startKvstore(args);
    const value = (key: string, version: number) => Buffer.from(`${key}:${version}:`.padEnd(100_000, String(version % 10)));
    const acked = new Map<string, number>(); // last version the server confirmed
    const inFlight = new Map<string, number>(); // version sent but not yet confirmed
    const client = createClient({ url: `redis://127.0.0.1:${kv.port}`, disableOfflineQueue: true });
    client.on('error', () => undefined);
    await client.connect();
    // GIVEN 4 writers overwriting 40 keys as fast as the server acknowledges
    let stopWriting = false;
    const writer = async (w: number) => {
      for (let version = 1; !stopWriting; version++) {
        const key = `k${w * 10 + (version % 10)}`;
        inFlight.set(key, version);
        try {
          await client.set(key, value(key, version));
        } catch {
          return; // the server died mid-request
        }
        acked.set(key, version);
        inFlight.delete(key);
      }
    };
    const writers = [0, 1, 2, 3].map(writer);
    // WHEN the server is killed with SIGKILL mid-stream
    await new Promise(r => setTimeout(r, 1500));
    kv.proc.kill('SIGKILL');
    await new Promise(r => kv.proc.once('exit', r));
    stopWriting = true;
    await Promise.all(writers);
    client.destroy();
    expect(acked.size).toBeGreaterThan(10);
    // AND restarted on the same disk directory
    kv = await startKvstore(args);
    const reader = createClient({ url: `redis://127.0.0.1:${kv.port}` }).withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
    reader.on('error', () => undefined);
    await reader.connect();
    try {
      let hits = 0;
      for (const key of new Set([...acked.keys(), ...inFlight.keys()])) {
        const got = (await reader.get(key)) as unknown as Buffer | null;
        if (got === null) continue;
        hits++;
        // THEN a value that is served is complete and is the last acknowledged or the in-flight one
        const version = Number(got.toString('latin1').split(':')[1]);
        expect([acked.get(key), inFlight.get(key)]).toContain(version);
        expect(got.equals(value(key, version))).toBe(true);
      }
      expect(hits).toBeGreaterThan(0);
    } finally {
      reader.destroy();
      await stop(kv);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
