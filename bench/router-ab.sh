#!/usr/bin/env bash
# A/B of two `disagg-engine router` builds against nginx, in one run: CPU time per request (user and
# system, all threads or worker processes, from /proc) and requests/s at concurrency 32.
# Why a third router benchmark: on this small shared machine bench/router.sh's ratios swing by
# 10-20% between runs, more than most single changes move them. Here both builds and nginx serve
# the same two sim-workers at the same time, measured in ROUNDS (8) interleaved rounds in a new
# random order each round, so machine-wide drift hits all three alike; cells are medians.
#   ENGINE_A=old/disagg-engine ENGINE_B=engine/build/disagg-engine bash bench/router-ab.sh
# (build the old one from a worktree: git worktree add /tmp/old REV && cmake -S /tmp/old/engine
# -B /tmp/old-build -DDISAGG_BUILD_TESTS=OFF && cmake --build /tmp/old-build --target disagg-engine)
# The sim-workers run ENGINE_B. REQUESTS (20000) per cell. Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE_B:-engine/build/disagg-engine}
if [[ -z "${ENGINE_A:-}" ]]; then
  # `npm run bench` runs every script: without a build to compare with there is nothing to measure.
  echo "router-ab: skipped; set ENGINE_A to a router build to compare with ENGINE_B (default engine/build/disagg-engine)"
  exit 0
fi
engine_a=$ENGINE_A
requests=${REQUESTS:-20000}
rounds=${ROUNDS:-8}
model=bench-model
# shellcheck source=bench/lib/proxy-peers.sh
source bench/lib/proxy-peers.sh
bench_begin ab "$engine_a" "$engine"
endpoints=(--endpoint "role=aggregated,url=http://127.0.0.1:$w1" --endpoint "role=aggregated,url=http://127.0.0.1:$w2")
declare -A url procs
bench_start router-a "$engine_a" router --host 127.0.0.1 --port 0 --model-name $model --threads 2 "${endpoints[@]}"
url[A]=http://127.0.0.1:$port; procs[A]=$started_pid
bench_start router-b "$engine" router --host 127.0.0.1 --port 0 --model-name $model --threads 2 "${endpoints[@]}"
url[B]=http://127.0.0.1:$port; procs[B]=$started_pid
nginx_port=$(free_port)
write_nginx_conf "$nginx_port" 2 "$w1" "$w2"
"$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -g 'daemon off;' &
pids+=($!)
nginx_master=$!
for target in A B nginx; do
  [[ $target == nginx ]] && u=http://127.0.0.1:$nginx_port || u=${url[$target]}
  for _ in $(seq 100); do curl -fs "$u/health" >/dev/null 2>&1 && break; sleep 0.05; done
done
url[nginx]=http://127.0.0.1:$nginx_port
procs[nginx]=$(pgrep -P "$nginx_master" | tr '\n' ' ')  # the worker processes

# "user system" CPU ticks used so far by the given processes.
ticks() { local u=0 s=0 p a b; for p in "$@"; do read -r a b < <(awk '{print $14, $15}' "/proc/$p/stat"); u=$((u + a)); s=$((s + b)); done; echo "$u $s"; }
hz=$(getconf CLK_TCK)
: >"$tmp/results"
for round in $(seq "$rounds"); do
  for target in $(printf '%s\n' A B nginx | shuf); do
    node bench/router-load.mjs --model $model --url "${url[$target]}" --requests 1000 --concurrency 32 >/dev/null
    # shellcheck disable=SC2086  # procs[] holds a list of pids
    read -r u0 s0 < <(ticks ${procs[$target]})
    out=$(node bench/router-load.mjs --model $model --url "${url[$target]}" --requests "$requests" --warmup 0 --concurrency 32)
    # shellcheck disable=SC2086
    read -r u1 s1 < <(ticks ${procs[$target]})
    rps=$(node -e 'const j=JSON.parse(process.argv[1]); if (j.errors) process.exit(1); console.log(j.rps.toFixed(0))' "$out") ||
      { echo "round $round, $target: errors: $out" >&2; exit 1; }
    echo "$target $(( (u1 - u0) * 1000000 / hz / requests )) $(( (s1 - s0) * 1000000 / hz / requests )) $rps" >>"$tmp/results"
    echo "round $round, $target: $(tail -1 "$tmp/results")" >&2
  done
done
node - "$tmp/results" "$rounds" <<'EOF'
const fs = require('fs');
const rows = fs.readFileSync(process.argv[2], 'utf8').trim().split('\n').map((l) => l.split(' '));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const cell = (t, i) => median(rows.filter((r) => r[0] === t).map((r) => Number(r[i])));
const fmt = (x) => Number.isInteger(x) ? String(x) : x.toFixed(1);
console.log('| concurrency 32 | router A | router B | nginx | A / nginx | B / nginx |');
console.log('|---|---:|---:|---:|---:|---:|');
const line = (name, f) => {
  const [a, b, n] = ['A', 'B', 'nginx'].map(f);
  console.log(`| ${name} | ${fmt(a)} | ${fmt(b)} | ${fmt(n)} | ${(a / n).toFixed(2)}x | ${(b / n).toFixed(2)}x |`);
};
line('CPU us per request, user', (t) => cell(t, 1));
line('CPU us per request, system', (t) => cell(t, 2));
line('CPU us per request, total', (t) => median(rows.filter((r) => r[0] === t).map((r) => Number(r[1]) + Number(r[2]))));
line('requests/s', (t) => cell(t, 3));
console.log(`\nmedians of ${process.argv[3]} interleaved rounds; A = ENGINE_A, B = ENGINE_B`);
EOF
