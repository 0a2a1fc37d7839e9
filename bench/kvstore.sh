#!/usr/bin/env bash
# kvstore vs redis-server (Debian), same machine, same run: redis-benchmark SET and GET with KV-chunk
# sized values (256 KiB, 1 MiB), without and with pipelining (-P 16). Both servers listen on
# loopback; redis-server runs without persistence (--save '' --appendonly no) and kvstore without
# a disk tier, so the data set fits in memory for both. A last row measures kvstore serving a data
# set 4x its memory budget from the disk tier (no redis-server peer: Redis would evict), next to
# the sequential bandwidth of the disk under the disk dir measured with dd (O_DIRECT, 1 MiB blocks).
# Prints markdown tables; ratio = kvstore / redis-server rps (higher is better for kvstore); CPU
# µs/req = the server process's user+system CPU time per request (/proc/PID/stat), which other load
# on the machine disturbs less than rps does.
# Env: DISAGG_ENGINE_BIN (default engine/build/disagg-engine), CLIENTS (default 16), KEYS (default 64),
# BENCH_DIR (where the disk tier and the dd probe file go; default a fresh dir under $TMPDIR or /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${DISAGG_ENGINE_BIN:-engine/build/disagg-engine}
CLIENTS=${CLIENTS:-16}
KEYS=${KEYS:-64}
[ -x "$BIN" ] || { echo "kvstore bench: $BIN is not built; build engine/ first (or set DISAGG_ENGINE_BIN)" >&2; exit 2; }
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
  { echo "kvstore bench: needs redis-server and redis-benchmark (apt-get install -y redis-server redis-tools)" >&2; exit 2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "port $1 never answered" >&2; return 1; }

work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/kvstore-bench.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --proto-max-bulk-len 512mb --client-query-buffer-limit 1gb >/dev/null 2>&1 &
pids+=($!)
kv_port=$(free_port)
"$BIN" kvstore --port "$kv_port" --memory-bytes 4g 2>/dev/null &
pids+=($!)
redis_pid=${pids[0]}
kv_pid=${pids[1]}
wait_port "$redis_port"
wait_port "$kv_port"

# CPU time (clock ticks) the process has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

# rps <port> <test> <value bytes> <requests> <pipeline> [random keys]
rps() {
  redis-benchmark -p "$1" -t "$2" -d "$3" -n "$4" -P "$5" -c "$CLIENTS" -r "${6:-$KEYS}" --csv 2>/dev/null |
    awk -F'","' -v t="$(echo "$2" | tr a-z A-Z)" '$1 == "\""t {print $2; exit}'
}

# measure <pid> <port> <test> <value bytes> <requests> <pipeline>: prints "rps cpu_us_per_request"
measure() {
  local before after r
  before=$(cpu_ticks "$1")
  r=$(rps "$2" "$3" "$4" "$5" "$6")
  after=$(cpu_ticks "$1")
  awk -v r="$r" -v c=$((after - before)) -v n="$5" -v t="$TICK" 'BEGIN { printf "%s %.0f\n", r, c / t / n * 1e6 }'
}

echo "redis-benchmark -c $CLIENTS -r $KEYS (keys), same machine ($(nproc) cores); requests per second and MB/s"
echo
echo "| test | value | pipeline | redis-server rps | kvstore rps | kvstore MB/s | ratio | redis CPU µs/req | kvstore CPU µs/req |"
echo "|------|-------|----------|-----------------:|------------:|-------------:|------:|-----------------:|-------------------:|"
for size in 262144 1048576; do
  n=$(( size == 262144 ? 4000 : 1000 ))
  label=$(( size / 1024 ))KiB
  for p in 1 16; do
    for t in set get; do
      read -r r rc < <(measure "$redis_pid" "$redis_port" "$t" "$size" "$n" "$p")
      read -r k kc < <(measure "$kv_pid" "$kv_port" "$t" "$size" "$n" "$p")
      awk -v t="$t" -v l="$label" -v p="$p" -v r="$r" -v k="$k" -v s="$size" -v rc="$rc" -v kc="$kc" 'BEGIN {
        printf "| %s | %s | %s | %.0f | %.0f | %.0f | %.2f | %s | %s |\n", toupper(t), l, p, r, k, k * s / 1e6, (r > 0 ? k / r : 0), rc, kc }'
    done
  done
done

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
echo "disk tier: 1024 requests of 1 MiB over 256 keys, 64 MiB memory tier; disk $disk_write MB/s write, $disk_read MB/s read (dd, O_DIRECT)"
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
