#!/usr/bin/env bash
# kvstore vs redis-server (Debian), same machine, same run: redis-benchmark SET and GET with KV-chunk
# sized values (256 KiB, 1 MiB), without and with pipelining (-P 16). Both servers listen on
# loopback; redis-server runs without persistence (--save '' --appendonly no) and kvstore without
# a disk tier, so the data set fits in memory for both. A last table measures kvstore serving a data
# set 4x its memory budget from the disk tier (no redis-server peer: Redis would evict), next to
# the sequential bandwidth of the disk under the disk dir measured with dd (O_DIRECT, 1 MiB blocks).
#
# On a small shared machine one redis-benchmark run swings by tens of percent, so the cells are
# measured in ROUNDS interleaved rounds: in each round every cell runs on both servers back to back
# (which one goes first is drawn per cell), and each round's kvstore cell is paired with the same
# round's redis-server cell. The first table gives medians over rounds; the second the paired ratio
# kvstore / redis-server per cell with its median, a 95% bootstrap interval and a verdict
# (bench/lib/paired.mjs; none below 8 rounds): rps (higher is better for kvstore) and the server
# process's CPU time per request (user + system from /proc/PID/stat; lower is better), which other
# load on the machine disturbs less than rps. The load average before and after is printed too.
# Env: DISAGG_ENGINE_BIN (default engine/build/disagg-engine), ROUNDS (default 8), CLIENTS (16),
# KEYS (64), SIZES (default "262144 1048576"), PIPELINES (default "1 16"), DISK (1: also the disk
# tier table; default 1), BENCH_DIR (where the disk tier and the dd probe file go; default a fresh
# dir under $TMPDIR or /tmp), DISAGG_ENGINE_BIN_B (a second kvstore build measured in the same
# rounds, paired with redis-server and with the first: B / A, e.g. after and before a change).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${DISAGG_ENGINE_BIN:-engine/build/disagg-engine}
BIN_B=${DISAGG_ENGINE_BIN_B:-}
ROUNDS=${ROUNDS:-8}
CLIENTS=${CLIENTS:-16}
KEYS=${KEYS:-64}
SIZES=${SIZES:-262144 1048576}
PIPELINES=${PIPELINES:-1 16}
[ -x "$BIN" ] || { echo "kvstore bench: $BIN is not built; build engine/ first (or set DISAGG_ENGINE_BIN)" >&2; exit 2; }
[ -z "$BIN_B" ] || [ -x "$BIN_B" ] || { echo "kvstore bench: DISAGG_ENGINE_BIN_B ($BIN_B) is not an executable" >&2; exit 2; }
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
  { echo "kvstore bench: needs redis-server and redis-benchmark (apt-get install -y redis-server redis-tools)" >&2; exit 2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "port $1 never answered" >&2; return 1; }

work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/kvstore-bench.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

declare -A port pid
servers=(redis kvstore)
port[redis]=$(free_port)
redis-server --port "${port[redis]}" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --proto-max-bulk-len 512mb --client-query-buffer-limit 1gb >/dev/null 2>&1 &
pid[redis]=$!
pids+=($!)
port[kvstore]=$(free_port)
"$BIN" kvstore --port "${port[kvstore]}" --memory-bytes 4g 2>/dev/null &
pid[kvstore]=$!
pids+=($!)
if [ -n "$BIN_B" ]; then
  servers+=(kvstore-b)
  port[kvstore-b]=$(free_port)
  "$BIN_B" kvstore --port "${port[kvstore-b]}" --memory-bytes 4g 2>/dev/null &
  pid[kvstore-b]=$!
  pids+=($!)
fi
for s in "${servers[@]}"; do wait_port "${port[$s]}"; done

# CPU time (clock ticks) the process has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

# rps <port> <test> <value bytes> <requests> <pipeline> [random keys]
rps() {
  redis-benchmark -p "$1" -t "$2" -d "$3" -n "$4" -P "$5" -c "$CLIENTS" -r "${6:-$KEYS}" --csv 2>/dev/null |
    awk -F'","' -v t="$(echo "$2" | tr a-z A-Z)" '$1 == "\""t {print $2; exit}'
}

# measure <server> <test> <value bytes> <requests> <pipeline>: prints "rps cpu_us_per_request"
measure() {
  local before after r
  before=$(cpu_ticks "${pid[$1]}")
  r=$(rps "${port[$1]}" "$2" "$3" "$4" "$5")
  after=$(cpu_ticks "${pid[$1]}")
  awk -v r="$r" -v c=$((after - before)) -v n="$4" -v t="$TICK" 'BEGIN { printf "%s %.1f\n", r, c / t / n * 1e6 }'
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
results="$work/results"
: >"$results"
for round in $(seq "$ROUNDS"); do
  for size in $SIZES; do
    n=$(( size <= 262144 ? 4000 : 1000 ))
    for p in $PIPELINES; do
      for t in set get; do
        # Both servers back to back, in an order drawn per cell, so neither always runs first.
        for s in $(printf '%s\n' "${servers[@]}" | shuf); do
          read -r r c < <(measure "$s" "$t" "$size" "$n" "$p")
          echo "$round $s $t $size $p $r $c" >>"$results"
        done
      done
    done
  done
  echo "kvstore bench: round $round of $ROUNDS done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

echo "redis-benchmark -c $CLIENTS -r $KEYS (keys), same machine ($(nproc) cores); $ROUNDS rounds; load average before $load_before, after $load_after"
echo
node --input-type=module - "$results" <<'EOF'
import fs from 'node:fs';
import { MIN_ROUNDS, median, medianInterval, verdict } from './bench/lib/paired.mjs';
const cells = new Map();  // "test size p" -> server -> [{round, rps, cpu}]
for (const line of fs.readFileSync(process.argv[2], 'utf8').trim().split('\n')) {
  const [round, server, test, size, p, rps, cpu] = line.split(' ');
  const key = `${test} ${size} ${p}`;
  if (!cells.has(key)) cells.set(key, new Map());
  const byServer = cells.get(key);
  if (!byServer.has(server)) byServer.set(server, []);
  byServer.get(server).push({ round: Number(round), rps: Number(rps), cpu: Number(cpu) });
}
const label = (key) => {
  const [test, size, p] = key.split(' ');
  return `${test.toUpperCase()} | ${Number(size) / 1024} KiB | ${p}`;
};
const med = (rows, k) => median(rows.map((r) => r[k]));
const hasB = [...cells.values()].some((m) => m.has('kvstore-b'));
console.log(`| test | value | pipeline | redis-server rps | kvstore rps | kvstore MB/s | redis CPU µs/req | kvstore CPU µs/req |${hasB ? ' kvstore-b rps | kvstore-b CPU µs/req |' : ''}`);
console.log(`|------|-------|---------:|-----------------:|------------:|-------------:|-----------------:|-------------------:|${hasB ? '---:|---:|' : ''}`);
for (const [key, m] of cells) {
  const size = Number(key.split(' ')[1]);
  const r = m.get('redis'), k = m.get('kvstore'), b = m.get('kvstore-b');
  const extra = b ? ` ${med(b, 'rps').toFixed(0)} | ${med(b, 'cpu').toFixed(0)} |` : '';
  console.log(`| ${label(key)} | ${med(r, 'rps').toFixed(0)} | ${med(k, 'rps').toFixed(0)} | ${(med(k, 'rps') * size / 1e6).toFixed(0)} | ${med(r, 'cpu').toFixed(0)} | ${med(k, 'cpu').toFixed(0)} |${extra}`);
}
// Each round's cell of one server against the same round's cell of the other.
const paired = (m, a, b, k) => {
  const other = new Map(m.get(b).map((x) => [x.round, x[k]]));
  return m.get(a).filter((x) => other.has(x.round) && other.get(x.round) > 0).map((x) => x[k] / other.get(x.round));
};
const show = (xs, lowerIsBetter, names) => {
  if (xs.length === 0 || xs.some((x) => !Number.isFinite(x))) return '- | -';
  const [lo, hi] = medianInterval(xs);
  const says = xs.length < MIN_ROUNDS ? `none from ${xs.length} rounds (ROUNDS=${MIN_ROUNDS} or more)`
    : { better: `${names[0]} better`, worse: `${names[1]} better`, even: 'no difference beyond noise' }[verdict([lo, hi], 1, lowerIsBetter)];
  return `${median(xs).toFixed(2)}x [${lo.toFixed(2)}-${hi.toFixed(2)}] | ${says}`;
};
const pairs = [['kvstore', 'redis', ['kvstore', 'redis-server']]];
if (hasB) pairs.push(['kvstore-b', 'redis', ['kvstore-b', 'redis-server']], ['kvstore-b', 'kvstore', ['B', 'A']]);
for (const [a, b, names] of pairs) {
  console.log(`\n| paired by round: ${a} / ${b === 'redis' ? 'redis-server' : b} | rps: median [95% interval] | verdict | CPU per request: median [95% interval] | verdict |`);
  console.log('|---|---:|---|---:|---|');
  for (const [key, m] of cells) {
    console.log(`| ${label(key).replaceAll(' | ', ' ')} | ${show(paired(m, a, b, 'rps'), false, names)} | ${show(paired(m, a, b, 'cpu'), true, names)} |`);
  }
}
EOF

[ "${DISK:-1}" = 1 ] || exit 0
# Disk bandwidth of the filesystem under the disk dir: sequential 1 MiB blocks with O_DIRECT (no
# page cache), written with a final fsync, then read back.
mkdir -p "$work/disk"
dd_mbps() { # dd_mbps <dd args...>: MB/s from dd's "N bytes ... copied, S s" line
  LC_ALL=C dd "$@" 2>&1 | awk '/bytes/ && /copied/ { for (i = 1; i <= NF; i++) if ($i == "s,") s = $(i - 1); printf "%.0f", $1 / s / 1e6 }'
}
probe="$work/disk/dd-probe"
disk_write=$(dd_mbps if=/dev/zero of="$probe" bs=1M count=512 oflag=direct conv=fsync)
disk_read=$(dd_mbps if="$probe" of=/dev/null bs=1M iflag=direct)
rm -f "$probe"

# Beyond memory: 256 MiB of 1 MiB values through a 64 MiB memory tier; every entry is demoted
# (--demote-min-reads 0). SETs write demoted entries to segment files (page cache, no fsync: the
# tier is a cache). Before the GETs the segments are fsync'd and dropped from the page cache
# (dd iflag=nocache), so disk hits are read from the device; "device MB read" is the server's
# /proc/PID/io read_bytes during the GET run (hits of re-demoted entries come from page cache).
disk_port=$(free_port)
"$BIN" kvstore --port "$disk_port" --memory-bytes 64m --disk-dir "$work/disk" --disk-bytes 2g \
  --demote-min-reads 0 2>/dev/null &
disk_pid=$!
pids+=("$disk_pid")
wait_port "$disk_port"
read_bytes() { awk '$1 == "read_bytes:" {print $2}' "/proc/$1/io"; }
echo
echo "disk tier (one run): 1024 requests of 1 MiB over 256 keys, 64 MiB memory tier; disk $disk_write MB/s write, $disk_read MB/s read (dd, O_DIRECT)"
echo
echo "| test | kvstore rps | kvstore MB/s | disk MB/s (dd) | fraction of disk | device MB read |"
echo "|------|------------:|-------------:|---------------:|-----------------:|---------------:|"
for t in set get; do
  if [ "$t" = get ]; then
    for f in "$work"/disk/segment-*.kvs; do
      sync "$f" 2>/dev/null || true
      dd if="$f" iflag=nocache count=0 status=none 2>/dev/null || true
    done
  fi
  rb0=$(read_bytes "$disk_pid")
  k=$(rps "$disk_port" "$t" 1048576 1024 1 256)
  rb1=$(read_bytes "$disk_pid")
  bw=$([ "$t" = set ] && echo "$disk_write" || echo "$disk_read")
  awk -v t="$t" -v k="$k" -v bw="$bw" -v rb=$((rb1 - rb0)) 'BEGIN {
    mbs = k * 1048576 / 1e6
    printf "| %s (4x memory, disk tier) | %.0f | %.0f | %s | %.2f | %.0f |\n", toupper(t), k, mbs, bw, (bw > 0 ? mbs / bw : 0), rb / 1e6 }'
done
