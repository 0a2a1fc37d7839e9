// kvstore against redis-server, reply for reply: what operators type at a prompt (KEYS with Redis
// globs, STRLEN, inline commands with quotes) and LMCache's Redis connector's command sequence
// (EXISTS, GET, SET, MGET, SCAN, DEL on "<key>metadata" / "<key>kv_bytes" pairs).
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { createClient, RESP_TYPES } from 'redis';
import { BINARY, HAVE_BINARY, HAVE_REDIS_SERVER, RawConnection, Server, startKvstore, startRedis, stop } from './util';

const describeIfBoth = HAVE_BINARY && HAVE_REDIS_SERVER ? describe : describe.skip;
if (!HAVE_BINARY || !HAVE_REDIS_SERVER) {
  // eslint-disable-next-line no-console
  console.warn(`kvstore/redis-server comparison skipped: needs ${BINARY} and redis-server (apt-get install -y redis-server)`);
}

jest.setTimeout(120_000);

type Client = ReturnType<typeof connect>;
function connect(port: number) {
  const c = createClient({ url: `redis://127.0.0.1:${port}` });
  c.on('error', () => undefined);
  return c;
}

/** A seeded generator (Park-Miller), so a failing pattern can be replayed. */
function rng(seed: number): () => number {
  let s = seed % 2147483647 || 1;
  return () => {
    s = (s * 48271) % 2147483647;
    return s / 2147483647;
  };
}

describeIfBoth('kvstore replies as redis-server does', () => {
  let dir: string;
  let kv: Server;
  let redis: Server;
  let clients: [Client, Client];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvstore-compat-'));
    kv = await startKvstore(['--memory-bytes', '64m']);
    redis = await startRedis(dir);
    clients = [connect(kv.port), connect(redis.port)];
    await Promise.all(clients.map(c => c.connect()));
  });

  afterAll(async () => {
    for (const c of clients ?? []) c.destroy();
    await stop(kv);
    await stop(redis);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Runs `command` on both servers and returns [kvstore's reply, redis-server's reply]. */
  async function both(command: (string | Buffer)[]): Promise<[unknown, unknown]> {
    const replies = await Promise.all(clients.map(c =>
      c.sendCommand(command, { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } }).then(r => r, (e: Error) => `error: ${e.message}`)));
    return [replies[0], replies[1]];
  }

  test('KEYS with Redis globs, over fixed and seeded random patterns', async () => {
    // GIVEN the same keys in both, chosen to exercise classes, ranges and escapes (and the empty key)
    const keys = ['', 'a', 'b', 'x', 'ab', 'abc', 'a]', 'a-', 'a^', 'a\\', 'a*', 'a?', 'a[', 'h]llo', 'hello', 'hallo',
      'user:1', 'user:22', 'item:1', '[x]', '-', '^'];
    await both(['FLUSHALL']);
    for (const k of keys) await both(['SET', k, 'v']);
    const fixed = ['*', '**', '?', 'a*', '*c', 'a[bc', '[^', 'a[b-]', 'a[]', 'a\\', '[]-a]', 'a[\\]]', '[a-]', 'h[^e]llo',
      'h[a-e]llo', 'h[e-a]llo', 'user:[0-9]', 'user:*', 'a\\*', 'a\\?', '\\[x\\]', '[[]x]', '*[', '[-]', '[\\^]', 'a[^]'];
    const random = rng(20);
    const alphabet = 'ab]-^\\[*?xu';
    const generated = Array.from({ length: 300 }, () =>
      Array.from({ length: 1 + Math.floor(random() * 6) }, () => alphabet[Math.floor(random() * alphabet.length)]).join(''));
    for (const pattern of [...fixed, ...generated]) {
      // WHEN each pattern is listed
      const [mine, theirs] = await both(['KEYS', pattern]);
      const sorted = (r: unknown) => (r as Buffer[]).map(b => b.toString('latin1')).sort();
      // THEN the same keys come back
      expect({ pattern, keys: sorted(mine) }).toEqual({ pattern, keys: sorted(theirs) });
    }
  });

  test('STRLEN', async () => {
    await both(['SET', 'short', 'hello']);
    await both(['SET', 'long', Buffer.alloc(300_000, 1)]);
    for (const k of ['short', 'long', 'missing']) {
      const [mine, theirs] = await both(['STRLEN', k]);
      expect(mine).toEqual(theirs);
    }
  });

  test('inline commands with quotes split as Redis splits them; unbalanced ones are refused', async () => {
    const args = ['"hello world"', "'it\\'s'", '"a\\x41\\n\\t\\"q\\\\"', 'ab"c d"', '""', "'a\\nb'", '"\\xzz"', '"\\x4"',
      '\'"\'', '"\'"', 'plain\tword', '"tab\\there"'];
    const unbalanced = ['"abc', "'abc", '"abc"def', "'a'b", '"trailing\\"'];
    for (const arg of [...args, ...unbalanced]) {
      const replies: string[][] = [];
      for (const server of [kv, redis]) {
        // GIVEN an inline SET typed into telnet with this argument, then a GET in array form
        const c = await RawConnection.open(server.port);
        await c.write(`SET k ${arg}\r\n`);
        const reply = [await c.line()];
        if (reply[0] === '+OK') {
          const got = await clients[server === kv ? 0 : 1].sendCommand(['GET', 'k'], { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } });
          reply.push((got as unknown as Buffer).toString('latin1'));
        } else {
          reply.push(`closed: ${await c.closedBy(1500)}`);
        }
        c.destroy();
        replies.push(reply);
      }
      // THEN both servers stored the same bytes, or refused it with the same error and closed
      expect({ arg, reply: replies[0] }).toEqual({ arg, reply: replies[1] });
    }
  });

  test("LMCache's Redis connector sequence: put, exists, get, batched contains, MGET, SCAN, cleanup", async () => {
    // GIVEN LMCache's key layout: per chunk, "<key>kv_bytes" (the KV bytes) and "<key>metadata"
    const chunkKeys = Array.from({ length: 6 }, (_, i) => `vllm@llama@1@0@${(0xabc0 + i).toString(16)}@bfloat16`);
    const random = rng(7);
    const kvBytes = chunkKeys.map(() => Buffer.from(Array.from({ length: 256 * 1024 }, () => Math.floor(random() * 256))));
    const metadata = chunkKeys.map((_, i) => Buffer.from([i, 0, 1, 0, 0x10, 0, 0, 0, 2, 0x80]));
    await both(['FLUSHALL']);
    const transcript: [string, unknown, unknown][] = [];
    const run = async (...command: (string | Buffer)[]) => {
      const [mine, theirs] = await both(command);
      transcript.push([command.map(a => (typeof a === 'string' ? a : `<${a.length} bytes>`)).join(' '), mine, theirs]);
      return mine;
    };
    // put (kv bytes first, "to avoid race condition", then the metadata)
    for (let i = 0; i < 4; i++) {
      await run('SET', `${chunkKeys[i]}kv_bytes`, kvBytes[i]);
      await run('SET', `${chunkKeys[i]}metadata`, metadata[i]);
    }
    // exists / batched contains: EXISTS on the metadata key, chunk after chunk, until a miss
    for (const key of chunkKeys) {
      if (!(await run('EXISTS', `${key}metadata`))) break;
    }
    // get: metadata, then the KV bytes (checked byte for byte below, through the transcript)
    for (let i = 0; i < 5; i++) {
      await run('GET', `${chunkKeys[i]}metadata`);
      await run('GET', `${chunkKeys[i]}kv_bytes`);
    }
    // the Valkey-style batched get and a listing of what is stored
    await run('MGET', ...chunkKeys.map(k => `${k}metadata`));
    const listed = new Set<string>();
    let cursor = '0';
    do {
      const [mine, theirs] = await both(['SCAN', cursor, 'MATCH', '*metadata', 'COUNT', '3']);
      const [next, keys] = mine as [Buffer, Buffer[]];
      keys.forEach(k => listed.add(k.toString()));
      cursor = next.toString();
      expect(Array.isArray(theirs)).toBe(true);
    } while (cursor !== '0');
    expect([...listed].sort()).toEqual(chunkKeys.slice(0, 4).map(k => `${k}metadata`).sort());
    // a chunk whose KV bytes were evicted: the connector deletes the orphaned metadata
    await run('DEL', `${chunkKeys[3]}kv_bytes`);
    expect(await run('GET', `${chunkKeys[3]}kv_bytes`)).toBeNull();
    await run('DEL', `${chunkKeys[3]}metadata`);
    await run('EXISTS', `${chunkKeys[3]}metadata`);
    // THEN every reply equals redis-server's, and the KV bytes read back are the ones written
    for (const [command, mine, theirs] of transcript) expect({ command, reply: mine }).toEqual({ command, reply: theirs });
    for (let i = 0; i < 4; i++) {
      const got = transcript.find(([c]) => c === `GET ${chunkKeys[i]}kv_bytes`)![1] as Buffer;
      expect(got.equals(kvBytes[i])).toBe(true);
    }
  });
});
