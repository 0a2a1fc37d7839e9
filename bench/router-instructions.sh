#!/usr/bin/env bash
# User-space instructions per request of `disagg-engine router` against nginx, counted by Valgrind's
# callgrind: the same two sim-workers and load as bench/router.sh, each proxy run under callgrind in
# turn (router: 2 threads, default policy, so it scores every request; nginx: one worker process,
# round robin, keep-alive upstream pool, buffering off). Counters are zeroed after a warm-up and
# dumped after N requests per mode, so start-up and warm-up are excluded.
# Why a second benchmark: on a small shared machine the wall-clock ratios of bench/router.sh swing
# by tens of percent between runs, while instruction counts repeat to about 1%; they show what the
# proxy's own code costs per request (system calls and kernel time are not counted: see
# bench/router.sh for those).
# REQUESTS (1000) per mode. Needs valgrind (Debian: apt-get install -y valgrind) and nginx-light.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-engine/build/disagg-engine}
command -v valgrind >/dev/null || { echo "missing valgrind; install Debian's: apt-get install -y valgrind" >&2; exit 1; }
requests=${REQUESTS:-1000}
model=bench-model
# shellcheck source=bench/lib/proxy-peers.sh
source bench/lib/proxy-peers.sh
bench_begin instr "$engine"

# Counts the proxy at `url` (callgrind pid `pid`, dumps named $tmp/$name.*) per mode; appends
# "name mode instructions-per-request" lines to $tmp/results.
measure() {
  local name=$1 pid=$2 url=$3 mode args total f v
  for _ in $(seq 300); do curl -fs "$url/v1/models" >/dev/null 2>&1 && break; sleep 0.1; done
  for mode in plain stream c8; do
    case $mode in
      plain) args=(--concurrency 1) ;;
      stream) args=(--concurrency 1 --stream) ;;
      c8) args=(--concurrency 8) ;;
    esac
    node bench/router-load.mjs --model $model --url "$url" --requests 200 "${args[@]}" >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    node bench/router-load.mjs --model $model --url "$url" --requests "$requests" --warmup 0 "${args[@]}" >"$tmp/load.json"
    callgrind_control -d "$pid" >/dev/null 2>&1
    sleep 0.5
    total=0
    for f in "$tmp/$name".*.*; do
      v=$(awk '/^(summary|totals):/{print $2; exit}' "$f")
      total=$((total + ${v:-0}))
      rm -f "$f"
    done
    grep -q '"errors":0' "$tmp/load.json" || { echo "$name $mode: requests failed: $(cat "$tmp/load.json")" >&2; exit 1; }
    echo "$name $mode $((total / requests))" >>"$tmp/results"
    echo "$name $mode: $((total / requests)) instructions per request" >&2
  done
}

: >"$tmp/results"
bench_start router valgrind --tool=callgrind --callgrind-out-file="$tmp/router.%p" "$engine" router \
  --host 127.0.0.1 --port 0 --model-name $model --threads 2 --endpoint "role=aggregated,url=http://127.0.0.1:$w1" \
  --endpoint "role=aggregated,url=http://127.0.0.1:$w2"
measure router "$started_pid" "http://127.0.0.1:$port"
kill "$started_pid" 2>/dev/null || true

nginx_port=$(free_port)
write_nginx_conf "$nginx_port" 1 "$w1" "$w2"
valgrind --tool=callgrind --callgrind-out-file="$tmp/nginx.%p" "$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" \
  -g 'daemon off;' 2>"$tmp/nginx.err" &
pids+=($!)
measure nginx $! "http://127.0.0.1:$nginx_port"

node - "$tmp/results" "$requests" <<'JS'
const [file, requests] = process.argv.slice(2);
const ir = {};
for (const line of require('fs').readFileSync(file, 'utf8').trim().split('\n')) {
  const [name, mode, n] = line.split(' ');
  ir[`${name} ${mode}`] = Number(n);
}
console.log('| user-space instructions per request | nginx | router | router / nginx |');
console.log('|---|---:|---:|---:|');
for (const [label, mode] of [['non-streaming, concurrency 1', 'plain'], ['streaming, concurrency 1', 'stream'], ['non-streaming, concurrency 8', 'c8']]) {
  const n = ir[`nginx ${mode}`];
  const r = ir[`router ${mode}`];
  console.log(`| ${label} | ${n.toLocaleString('en')} | ${r.toLocaleString('en')} | ${(r / n).toFixed(2)}x |`);
}
console.log(`\n${requests} requests per mode after a warm-up, counted by callgrind; lower is better`);
JS
