#!/usr/bin/env node
// Closed-loop HTTP load for bench/router.sh: `--requests` completions over `--concurrency`
// keep-alive connections (node:http Agent), streamed (SSE) or not; prints one JSON line with
// per-request latency percentiles (to the last byte) and requests per second (after `--warmup`
// requests, which are not measured).
// `--prompts unique` (the default) starts each prompt with its own word, so that no two requests
// share a KV block: a prefix-aware router then spreads them by load, as round robin does, and both
// proxies keep both workers busy. `--prompts fixed` sends one prompt, which such a router sends to
// the worker that has it cached: at high concurrency that worker, not the proxy, is the limit.
// `clientCpuUs` is this process's own CPU time (user + system) per measured request: on a machine
// whose cores the client shares with the proxy and the workers, it is part of what a request costs.
// `--url` may list several proxies, comma-separated: connection i goes to the (i mod n)-th, e.g. two
// one-thread routers against one two-thread router.
//   node bench/router-load.mjs --url http://127.0.0.1:8000 --requests 2000 --concurrency 1 [--stream]
import http from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    requests: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '1' },
    warmup: { type: 'string', default: '200' },
    stream: { type: 'boolean', default: false },
    model: { type: 'string', default: 'bench-model' },
    'max-tokens': { type: 'string', default: '4' },
    'prompt-words': { type: 'string', default: '64' },
    prompts: { type: 'string', default: 'unique' },
  },
});
if (!values.url) {
  console.error('router-load: --url is required, e.g. --url http://127.0.0.1:8000');
  process.exit(2);
}
const urls = values.url.split(',').map((u) => new URL('/v1/completions', u));
const requests = Number(values.requests);
const concurrency = Number(values.concurrency);
const warmup = Number(values.warmup);
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
if (values.prompts !== 'unique' && values.prompts !== 'fixed') {
  console.error(`router-load: --prompts is "${values.prompts}"; use unique or fixed`);
  process.exit(2);
}
const words = Array.from({ length: Number(values['prompt-words']) - 1 }, (_, i) => `w${i % 97}`).join(' ');
let sent = 0;
// The request body: the first word is the request's number with `--prompts unique`.
function requestBody() {
  const first = values.prompts === 'unique' ? `u${sent++}` : 'u';
  return JSON.stringify({ model: values.model, prompt: `${first} ${words}`, max_tokens: Number(values['max-tokens']), stream: values.stream });
}

function once(url) {
  const body = requestBody();
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = http.request(url, {
      method: 'POST', agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      let bytes = 0;
      res.on('data', (d) => { bytes += d.length; });
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`HTTP ${res.statusCode}`));
        else resolve(Number(process.hrtime.bigint() - t0) / 1e6);
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function run(count) {
  const latencies = [];
  let next = 0;
  let errors = 0;
  const t0 = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  await Promise.all(Array.from({ length: concurrency }, async (_, i) => {
    while (next < count) {
      next++;
      try {
        latencies.push(await once(urls[i % urls.length]));
      } catch {
        errors++;
      }
    }
  }));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  return { latencies, errors, seconds, cpuUs: cpu.user + cpu.system };
}

await run(warmup);
const { latencies, errors, seconds, cpuUs } = await run(requests);
latencies.sort((a, b) => a - b);
const q = (p) => latencies[Math.min(latencies.length - 1, Math.max(0, Math.ceil(p * latencies.length) - 1))];
console.log(JSON.stringify({
  requests: latencies.length, errors, concurrency, stream: values.stream, warmup, prompts: values.prompts,
  p50Ms: q(0.5), p99Ms: q(0.99), rps: latencies.length / seconds, clientCpuUs: cpuUs / Math.max(1, latencies.length),
}));
agent.destroy();
