#!/usr/bin/env node
// Closed-loop chat load for bench/router-precise.sh: `--concurrency` users, each holding one
// multi-turn conversation at a time on a keep-alive connection (node:http Agent) and sending
// /v1/chat/completions with the whole conversation so far, so that every turn repeats the previous
// turn's prompt as its prefix (as a chat client does). The text is real: paragraphs of this
// repository's READMEs, as bench/tokenizer.mjs uses. Conversation c is the same for every run
// (seeded by c): 8 tenants' system prompts (whole paragraphs, at least 600-2,400 characters, shared
// by the conversations of a tenant), 1-8 user turns (the first at least 400-4,000 characters, the
// others 400-2,000) and the answers; with Qwen3's tokenizer prompts run from about 600 to 8,500
// tokens, 3,200 on average. `--tag` goes first in every system prompt: runs with different tags
// share no KV block, so one run cannot warm the workers' caches for the next.
// `--stream mixed` (the default) streams every other conversation (SSE, with
// stream_options.include_usage), `always` or `never` all of them.
// Prints one JSON line: requests/s and latency to the last byte after `--warmup` requests (not
// measured), the mean prompt tokens, the share of prompt tokens the workers found cached
// (usage.prompt_tokens_details.cached_tokens: the routing's effect), the share the router
// expected cached on its pick (X-Disagg-Cached-Blocks x --block-size), and this process's CPU
// time per measured request (`clientCpuUs`).
//   node bench/router-chat-load.mjs --url http://127.0.0.1:8000 --model qwen3 --requests 2000 --concurrency 32
import http from 'node:http';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    requests: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '32' },
    warmup: { type: 'string', default: '200' },
    stream: { type: 'string', default: 'mixed' },
    model: { type: 'string', default: 'bench-model' },
    'max-tokens': { type: 'string', default: '8' },
    'block-size': { type: 'string', default: '16' },
    tag: { type: 'string', default: 'run' },
  },
});
if (!values.url) {
  console.error('router-chat-load: --url is required, e.g. --url http://127.0.0.1:8000');
  process.exit(2);
}
if (!['mixed', 'always', 'never'].includes(values.stream)) {
  console.error(`router-chat-load: --stream is "${values.stream}"; use mixed, always or never`);
  process.exit(2);
}
const url = new URL('/v1/chat/completions', values.url);
const requests = Number(values.requests);
const concurrency = Number(values.concurrency);
const warmup = Number(values.warmup);
const blockSize = Number(values['block-size']);
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const paragraphs = ['README.md', 'engine/README.md', 'engine/src/servers/router/README.md']
  .flatMap((f) => readFileSync(path.join(root, f), 'utf8').split(/\n\n+/))
  .filter((p) => p.trim().length > 0);

// xorshift32 from a seed: the same conversation for the same number in every run.
function rng(seed) {
  let s = (seed * 2654435761) >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}
// Consecutive paragraphs from a random place, at least `chars` characters (about 4 per token).
function text(random, chars) {
  let i = Math.floor(random() * paragraphs.length);
  let out = '';
  while (out.length < chars) out += (out ? '\n\n' : '') + paragraphs[i++ % paragraphs.length];
  return out;
}
const between = (random, lo, hi) => lo + Math.floor(random() * (hi - lo));
const tenants = Array.from({ length: 8 }, (_, t) => text(rng(1000 + t), between(rng(2000 + t), 600, 2400)));

let conversations = 0;
// A new conversation: its messages so far, the user turns still to send, and whether it streams.
function conversation() {
  const c = conversations++;
  const random = rng(c + 1);
  const tenant = c % tenants.length;
  return {
    messages: [{ role: 'system', content: `${values.tag} tenant ${tenant}. ${tenants[tenant]}` }],
    turns: Array.from({ length: between(random, 1, 9) }, (_, k) => text(random, k === 0 ? between(random, 400, 4000) : between(random, 400, 2000))),
    stream: values.stream === 'always' || (values.stream === 'mixed' && c % 2 === 1),
  };
}

// One turn of `conv`: sends it, appends the answer; resolves to the latency and the counts.
function once(conv) {
  conv.messages.push({ role: 'user', content: conv.turns.shift() });
  const request = { model: values.model, messages: conv.messages, max_tokens: Number(values['max-tokens']) };
  if (conv.stream) Object.assign(request, { stream: true, stream_options: { include_usage: true } });
  const body = JSON.stringify(request);
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = http.request(url, {
      method: 'POST', agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('end', () => {
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}`));
        const raw = Buffer.concat(chunks).toString();
        let answer = '';
        let usage;
        if (conv.stream) {
          for (const line of raw.split('\n')) {
            if (!line.startsWith('data: {')) continue;
            const chunk = JSON.parse(line.slice(6));
            answer += chunk.choices?.[0]?.delta?.content ?? '';
            usage = chunk.usage ?? usage;
          }
        } else {
          const j = JSON.parse(raw);
          answer = j.choices[0].message.content ?? '';
          usage = j.usage;
        }
        if (!usage) return reject(new Error('no usage in the response'));
        conv.messages.push({ role: 'assistant', content: answer });
        resolve({
          ms,
          prompt: usage.prompt_tokens,
          cached: usage.prompt_tokens_details?.cached_tokens ?? 0,
          expected: Number(res.headers['x-disagg-cached-blocks'] ?? 0) * blockSize,
        });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const users = Array.from({ length: concurrency }, () => conversation());
async function run(count) {
  const results = [];
  let next = 0;
  let errors = 0;
  const t0 = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  await Promise.all(users.map(async (_, i) => {
    while (next < count) {
      next++;
      if (users[i].turns.length === 0) users[i] = conversation();
      try {
        results.push(await once(users[i]));
      } catch {
        errors++;
        users[i] = conversation();
      }
    }
  }));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  return { results, errors, seconds, cpuUs: cpu.user + cpu.system };
}

await run(warmup);
const { results, errors, seconds, cpuUs } = await run(requests);
const latencies = results.map((r) => r.ms).sort((a, b) => a - b);
const q = (p) => latencies[Math.min(latencies.length - 1, Math.max(0, Math.ceil(p * latencies.length) - 1))];
const sum = (k) => results.reduce((n, r) => n + r[k], 0);
const n = Math.max(1, results.length);
console.log(JSON.stringify({
  requests: results.length, errors, concurrency, stream: values.stream, warmup, conversations,
  p50Ms: q(0.5), p99Ms: q(0.99), rps: results.length / seconds,
  promptTokens: sum('prompt') / n, cachedShare: sum('cached') / Math.max(1, sum('prompt')),
  expectedShare: sum('expected') / Math.max(1, sum('prompt')), clientCpuUs: cpuUs / n,
}));
agent.destroy();
