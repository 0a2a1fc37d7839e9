#!/usr/bin/env bash
# Proxy overhead of `disagg-engine router` against nginx, same run, same sim-workers.
# Two sim-workers (speed-up 1e6: a 4-token answer takes microseconds of model time) answer
# directly, through nginx (Debian nginx-light: round-robin upstream, keep-alive pool, buffering off,
# 2 worker processes) and through our router (default policy llm-d with its approximate prefix
# history, so it scores every request; 2 threads). bench/router-load.mjs sends the load:
# concurrency 1 for latency (non-streaming and streaming), concurrency 32 for maximum requests/s.
# Added latency = proxied p50 / p99 minus direct p50 / p99. Prints a markdown table with ratios to
# nginx. Builds nothing: run `npx projen engine` first (or ENGINE=path/to/disagg-engine).
# On a small shared machine single runs swing by tens of percent, so the three targets are measured
# in ROUNDS (3) interleaved rounds, in a new random order each round, and every cell is the median
# over rounds. Each proxy's own CPU time per request (user + system from /proc, all its threads or
# worker processes) is reported too: it is what the proxy costs the machine, and it varies less
# than latency when other processes compete for the cores. A second table pairs each round's router
# cell with the same round's nginx cell and gives the median with a 95% bootstrap interval
# (bench/lib/paired.mjs) and a verdict: router better, nginx better, or no difference beyond this
# run's noise (none below 8 rounds; the default 3 keeps `npm run bench` short).
# REQUESTS (2000) and RPS_REQUESTS (20000) size the runs; ROUTER_FLAGS adds router flags
# (e.g. "--upstream-keepalive 0": a new upstream connection per request, as before the pool).
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-engine/build/disagg-engine}
requests=${REQUESTS:-2000}
rps_requests=${RPS_REQUESTS:-20000}
model=bench-model
# shellcheck source=bench/lib/proxy-peers.sh
source bench/lib/proxy-peers.sh
bench_begin router "$engine"
# shellcheck disable=SC2086  # ROUTER_FLAGS is a list of words
bench_start router "$engine" router --host 127.0.0.1 --port 0 --model-name $model --threads 2 ${ROUTER_FLAGS:-} \
  --endpoint "role=aggregated,url=http://127.0.0.1:$w1" --endpoint "role=aggregated,url=http://127.0.0.1:$w2"
router=$port

nginx_port=$(free_port)
write_nginx_conf "$nginx_port" 2 "$w1" "$w2"
"$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -g 'daemon off;' &
pids+=($!)
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$nginx_port/health" >/dev/null 2>&1 && break; sleep 0.05; done
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$router/ready" >/dev/null 2>&1 && break; sleep 0.05; done

load() { node bench/router-load.mjs --model $model "$@"; }
# CPU ticks (user + system) used so far by the given processes, all their threads included.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
declare -A url cpu_pids
url[direct]=http://127.0.0.1:$w1
url[nginx]=http://127.0.0.1:$nginx_port
url[router]=http://127.0.0.1:$router
cpu_pids[direct]=${pids[0]}
cpu_pids[nginx]=$(pgrep -P "${pids[-1]}" | tr '\n' ' ')  # nginx's worker processes
cpu_pids[router]=${pids[2]}
hz=$(getconf CLK_TCK)
rounds=${ROUNDS:-3}
: >"$tmp/results"
for round in $(seq "$rounds"); do
  for target in $(printf '%s\n' direct nginx router | shuf); do
    for mode in plain stream rps; do
      case $mode in
        plain) args=(--requests "$requests" --concurrency 1) ;;
        stream) args=(--requests "$requests" --concurrency 1 --stream) ;;
        rps) args=(--requests "$rps_requests" --concurrency 32) ;;
      esac
      # shellcheck disable=SC2086  # a list of pids
      before=$(ticks ${cpu_pids[$target]})
      out=$(load --url "${url[$target]}" "${args[@]}")
      # shellcheck disable=SC2086
      after=$(ticks ${cpu_pids[$target]})
      echo "$round $target $mode $((after - before)) $hz $out" >>"$tmp/results"
      echo "round $round, $target $mode: $out" >&2
    done
  done
done

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $rounds rounds" >&2
node --input-type=module - "$tmp/results" "$rounds" <<'EOF'
import fs from 'node:fs';
import { MIN_ROUNDS, median, medianInterval, verdict } from './bench/lib/paired.mjs';
const [file, rounds] = process.argv.slice(2);
const cells = {};
for (const line of fs.readFileSync(file, 'utf8').trim().split('\n')) {
  const [round, target, mode, ticks, hz, ...json] = line.split(' ');
  const r = JSON.parse(json.join(' '));
  r.round = Number(round);
  // CPU per request; the load tool's warm-up requests ran inside the measured window too.
  r.cpuUs = ((Number(ticks) / Number(hz)) * 1e6) / (r.requests + r.warmup);
  (cells[`${target} ${mode}`] ??= []).push(r);
}
const med = (target, mode, k) => median(cells[`${target} ${mode}`].map((r) => r[k]));
const f = (x) => x.toFixed(3);
const ratio = (a, b) => (b > 0 ? (a / b).toFixed(2) + 'x' : '-');
const rows = [];
for (const [label, mode] of [['non-streaming', 'plain'], ['streaming', 'stream']]) {
  for (const k of ['p50Ms', 'p99Ms']) {
    const d = med('direct', mode, k);
    const an = Math.max(0, med('nginx', mode, k) - d);
    const ar = Math.max(0, med('router', mode, k) - d);
    rows.push(`| added latency ${k.slice(0, 3)} ms, ${label} | ${f(d)} (total) | ${f(an)} | ${f(ar)} | ${ratio(ar, an)} |`);
  }
}
const rps = (t) => med(t, 'rps', 'rps');
rows.push(`| max requests/s (concurrency 32, non-streaming) | ${rps('direct').toFixed(0)} | ${rps('nginx').toFixed(0)} | ${rps('router').toFixed(0)} | ${ratio(rps('router'), rps('nginx'))} |`);
for (const [label, mode] of [['non-streaming, concurrency 1', 'plain'], ['streaming, concurrency 1', 'stream'], ['concurrency 32', 'rps']]) {
  const n = med('nginx', mode, 'cpuUs');
  const r = med('router', mode, 'cpuUs');
  rows.push(`| proxy CPU us per request, ${label} | - | ${n.toFixed(0)} | ${r.toFixed(0)} | ${ratio(r, n)} |`);
}
const errors = Object.values(cells).flat().reduce((n, x) => n + x.errors, 0);
console.log('| metric | direct | nginx | router | router / nginx |');
console.log('|---|---:|---:|---:|---:|');
for (const row of rows) console.log(row);

// The goal's measures paired by round: the router's cell against nginx's cell of the same round
// (bench/lib/paired.mjs). Added latency pairs as a difference, router minus nginx in microseconds
// (the direct latency is common to both and cancels); a ratio of added latencies would divide by
// the tens of microseconds nginx adds at p50 and swing wildly. Requests/s and CPU pair as ratios.
const paired = (mode, k, combine) => {
  const nginx = new Map(cells[`nginx ${mode}`].map((r) => [r.round, r[k]]));
  return cells[`router ${mode}`].filter((r) => nginx.has(r.round)).map((r) => combine(r[k], nginx.get(r.round)));
};
const goal = [
  ['added latency p50, non-streaming', 'plain', 'p50Ms', 'diff', true],
  ['added latency p99, non-streaming', 'plain', 'p99Ms', 'diff', true],
  ['added latency p50, streaming', 'stream', 'p50Ms', 'diff', true],
  ['added latency p99, streaming', 'stream', 'p99Ms', 'diff', true],
  ['max requests/s, concurrency 32', 'rps', 'rps', 'ratio', false],
  ['proxy CPU per request, concurrency 32', 'rps', 'cpuUs', 'ratio', true],
];
const word = { better: 'router better', worse: 'nginx better', even: 'no difference beyond noise' };
console.log(`\n| paired by round | router against nginx: median [95% interval] | verdict |`);
console.log('|---|---:|---|');
for (const [label, mode, k, kind, lowerIsBetter] of goal) {
  const xs = kind === 'diff' ? paired(mode, k, (r, n) => (r - n) * 1000) : paired(mode, k, (r, n) => r / n);
  if (xs.length === 0 || xs.some((x) => !Number.isFinite(x))) {  // e.g. no CPU tick in a short cell
    console.log(`| ${label} | - | - |`);
    continue;
  }
  const [lo, hi] = medianInterval(xs);
  const cell = kind === 'diff'
    ? `${median(xs) >= 0 ? '+' : ''}${median(xs).toFixed(0)} us [${lo.toFixed(0)} to ${hi.toFixed(0)}]`
    : `${median(xs).toFixed(2)}x [${lo.toFixed(2)}-${hi.toFixed(2)}]`;
  const says = xs.length < MIN_ROUNDS ? `none from ${xs.length} rounds (ROUNDS=${MIN_ROUNDS} or more)` : word[verdict([lo, hi], kind === 'diff' ? 0 : 1, lowerIsBetter)];
  console.log(`| ${label} | ${cell} | ${says} |`);
}
console.log(`\nerrors: ${errors}; medians of ${rounds} interleaved rounds; latency at concurrency 1, ` +
  `${cells['direct plain'][0].requests} requests per cell; lower added latency and CPU, higher requests/s are better; ` +
  'a verdict other than "no difference" needs the interval to leave out 0 us or 1.00x');
EOF
