#!/usr/bin/env bash
# Router against nginx, or two router builds against nginx, in one run: CPU time per request (user
# and system, all threads or worker processes, from /proc) and requests/s at concurrency 32.
# Why a third router benchmark: on this small shared machine bench/router.sh's ratios swing by
# 10-20% between runs, more than most single changes move them. Here every target serves the same
# two sim-workers in the same run, measured in ROUNDS (8) interleaved rounds in a new random order
# each round, so machine-wide drift hits them alike. Cells are medians; each router's ratio to
# nginx is also taken round by round (the two measured seconds apart) and given as the median of
# those paired ratios with a bootstrap 95% interval over the rounds, which says whether a
# difference is larger than this machine's noise.
#   bash bench/router-ab.sh                              # engine/build/disagg-engine against nginx
#   ENGINE_A=old/disagg-engine bash bench/router-ab.sh   # ... and an older build, A
# (build the old one from a worktree: git worktree add /tmp/old REV && cmake -S /tmp/old/engine
# -B /tmp/old-build -DDISAGG_BUILD_TESTS=OFF && cmake --build /tmp/old-build --target disagg-engine)
# THREADS (2): the router's --threads and nginx's worker processes. PIN=1: each router thread and
# each nginx worker on a CPU of its own (`--pin-threads on`, `worker_cpu_affinity auto`). The
# sim-workers run ENGINE_B (default engine/build/disagg-engine). REQUESTS (20000) per cell. Prints
# markdown tables. The rest of the loop is measured too (the sim-workers' and the load client's CPU
# per request): the proxy shares the cores with them, so requests/s follows the whole loop's cost.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE_B:-engine/build/disagg-engine}
requests=${REQUESTS:-20000}
rounds=${ROUNDS:-8}
threads=${THREADS:-2}
pin=${PIN:-0}
[[ $pin == 0 || $pin == 1 ]] || { echo "router-ab: PIN is '$pin'; give 0 or 1" >&2; exit 2; }
pin_flags=()
[[ $pin == 1 ]] && pin_flags=(--pin-threads on)
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "router-ab: THREADS is '$threads'; give a positive integer" >&2; exit 2; }
model=bench-model
# shellcheck source=bench/lib/proxy-peers.sh
source bench/lib/proxy-peers.sh
targets=(B nginx)
[[ -n "${ENGINE_A:-}" ]] && targets=(A B nginx)
bench_begin ab ${ENGINE_A:+"$ENGINE_A"} "$engine"
workers=("${pids[@]}")  # the two sim-workers, the only processes started so far
endpoints=(--endpoint "role=aggregated,url=http://127.0.0.1:$w1" --endpoint "role=aggregated,url=http://127.0.0.1:$w2")
declare -A url procs
if [[ -n "${ENGINE_A:-}" ]]; then
  bench_start router-a "$ENGINE_A" router --host 127.0.0.1 --port 0 --model-name $model --threads "$threads" "${pin_flags[@]}" "${endpoints[@]}"
  url[A]=http://127.0.0.1:$port; procs[A]=$started_pid
fi
bench_start router-b "$engine" router --host 127.0.0.1 --port 0 --model-name $model --threads "$threads" "${pin_flags[@]}" "${endpoints[@]}"
url[B]=http://127.0.0.1:$port; procs[B]=$started_pid
nginx_port=$(free_port)
write_nginx_conf "$nginx_port" "$threads" "$w1" "$w2"
[[ $pin == 1 ]] && sed -i 's/^worker_processes .*/&\nworker_cpu_affinity auto;/' "$tmp/nginx/nginx.conf"
"$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -g 'daemon off;' &
pids+=($!)
nginx_master=$!
for target in "${targets[@]}"; do
  [[ $target == nginx ]] && u=http://127.0.0.1:$nginx_port || u=${url[$target]}
  for _ in $(seq 100); do curl -fs "$u/health" >/dev/null 2>&1 && break; sleep 0.05; done
done
url[nginx]=http://127.0.0.1:$nginx_port
# The worker processes (one worker runs without a master: then the process itself).
if [[ $threads == 1 ]]; then procs[nginx]=$nginx_master; else procs[nginx]=$(pgrep -P "$nginx_master" | tr '\n' ' '); fi

# "user system" CPU ticks used so far by the given processes. Ticks are samples: the kernel
# charges a whole tick (10 ms) to whatever runs when it fires, so a cell of 20,000 requests
# (about 0.6 s of CPU) holds some 60 of them; they give the split, not the total.
ticks() { local u=0 s=0 p a b; for p in "$@"; do read -r a b < <(awk '{print $14, $15}' "/proc/$p/stat"); u=$((u + a)); s=$((s + b)); done; echo "$u $s"; }
hz=$(getconf CLK_TCK)
# "thread nanoseconds" lines: each thread's time on a CPU as the scheduler counts it (schedstat,
# to the nanosecond), for every thread of the given processes.
on_cpu() { local p f; for p in "$@"; do for f in /proc/"$p"/task/*/schedstat; do echo "${f%/schedstat} $(cut -d' ' -f1 "$f" 2>/dev/null || echo 0)"; done; done; }
# Nanoseconds between two on_cpu listings, over the threads in both (a thread that started or
# ended in between is left out; the proxies here keep theirs).
on_cpu_delta() { awk 'NR == FNR { t[$1] = $2; next } ($1 in t) { d += $2 - t[$1] } END { printf "%d\n", d }' "$1" "$2"; }
: >"$tmp/results"
for round in $(seq "$rounds"); do
  for target in $(printf '%s\n' "${targets[@]}" | shuf); do
    node bench/router-load.mjs --model $model --url "${url[$target]}" --requests 1000 --concurrency 32 >/dev/null
    # shellcheck disable=SC2086  # procs[] holds a list of pids
    read -r u0 s0 < <(ticks ${procs[$target]})
    # shellcheck disable=SC2086
    on_cpu ${procs[$target]} >"$tmp/cpu0"
    on_cpu "${workers[@]}" >"$tmp/wcpu0"
    out=$(node bench/router-load.mjs --model $model --url "${url[$target]}" --requests "$requests" --warmup 0 --concurrency 32)
    # shellcheck disable=SC2086
    read -r u1 s1 < <(ticks ${procs[$target]})
    # shellcheck disable=SC2086
    on_cpu ${procs[$target]} >"$tmp/cpu1"
    on_cpu "${workers[@]}" >"$tmp/wcpu1"
    read -r rps client_us < <(node -e 'const j=JSON.parse(process.argv[1]); if (j.errors) process.exit(1); console.log(j.rps.toFixed(0), j.clientCpuUs.toFixed(1))' "$out") ||
      { echo "round $round, $target: errors: $out" >&2; exit 1; }
    ns=$(on_cpu_delta "$tmp/cpu0" "$tmp/cpu1")
    worker_ns=$(on_cpu_delta "$tmp/wcpu0" "$tmp/wcpu1")
    echo "$target $(( (u1 - u0) * 1000000 / hz / requests )) $(( (s1 - s0) * 1000000 / hz / requests )) $rps $(( ns / requests )) $(( worker_ns / requests )) $client_us" >>"$tmp/results"
    echo "round $round, $target: $(tail -1 "$tmp/results")" >&2
  done
done
node --input-type=module - "$tmp/results" "$rounds" "$threads$([[ $pin == 1 ]] && echo ', pinned')" <<'EOF'
import fs from 'node:fs';
import { median, medianInterval } from './bench/lib/paired.mjs';
const [file, rounds, threads] = process.argv.slice(2);
// Rows in measuring order: target, user us and system us (ticks), requests/s, on-CPU ns (the
// scheduler's count), the sim-workers' on-CPU ns and the load client's CPU us (both per request);
// each target once per round.
const rows = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => l.split(' '));
const targets = ['A', 'B', 'nginx'].filter((t) => rows.some((r) => r[0] === t));
const routers = targets.filter((t) => t !== 'nginx');
const name = { A: 'router A', B: routers.length === 1 ? 'router' : 'router B', nginx: 'nginx' };
const metrics = [
  ['CPU us per request (scheduler, ns precision)', (r) => Number(r[4]) / 1000],
  ['CPU us per request, user (10 ms ticks)', (r) => Number(r[1])],
  ['CPU us per request, system (10 ms ticks)', (r) => Number(r[2])],
  ['requests/s', (r) => Number(r[3])],
  // The cores are shared, so requests/s follows what a request costs the whole loop, not only the
  // proxy: its effect on the others (their caches, their batching) shows here.
  ['CPU us per request, the two sim-workers', (r) => Number(r[5]) / 1000],
  ['CPU us per request, the load client', (r) => Number(r[6])],
  ['CPU us per request, whole loop (proxy + sim-workers + client)', (r) => Number(r[4]) / 1000 + Number(r[5]) / 1000 + Number(r[6])],
];
const per = (t, f) => rows.filter((r) => r[0] === t).map(f);  // round by round
const fmt = (x) => Number.isInteger(x) ? String(x) : x.toFixed(1);
const head = `concurrency 32, ${threads} thread(s) / worker(s)`;
console.log(`| ${head} | ${targets.map((t) => name[t]).join(' | ')} | ${routers.map((t) => `${name[t]} / nginx`).join(' | ')} |`);
console.log(`|---|${targets.map(() => '---:').join('|')}|${routers.map(() => '---:').join('|')}|`);
for (const [label, f] of metrics) {
  const m = Object.fromEntries(targets.map((t) => [t, median(per(t, f))]));
  console.log(`| ${label} | ${targets.map((t) => fmt(m[t])).join(' | ')} | ${routers.map((t) => `${(m[t] / m.nginx).toFixed(2)}x`).join(' | ')} |`);
}
// Paired ratios: round i's router value over round i's nginx value, with a bootstrap interval
// (bench/lib/paired.mjs).
// Each pair: [numerator, denominator]; with two builds, B is also paired with A.
const pairs = routers.map((t) => [t, 'nginx']);
if (routers.length > 1) pairs.push(['B', 'A']);
console.log(`\n| paired by round, ${threads} thread(s) / worker(s) | ${pairs.map(([a, b]) => `${name[a]} / ${name[b]}: median [95% interval]`).join(' | ')} |`);
console.log(`|---|${pairs.map(() => '---:').join('|')}|`);
for (const [label, f] of metrics) {
  const cells = pairs.map(([a, b]) => {
    const d = per(b, f);
    const ratios = per(a, f).map((v, i) => v / d[i]);
    const [lo, hi] = medianInterval(ratios);
    return `${median(ratios).toFixed(2)}x [${lo.toFixed(2)}-${hi.toFixed(2)}]`;
  });
  console.log(`| ${label} | ${cells.join(' | ')} |`);
}
const which = routers.length > 1 ? '; A = ENGINE_A, B = ENGINE_B' : '';
console.log(`\nmedians of ${rounds} interleaved rounds${which}; an interval that leaves out 1.00x is a difference beyond this run's noise`);
EOF
