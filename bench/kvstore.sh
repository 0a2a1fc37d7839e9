#!/usr/bin/env bash
# kvstore vs redis-server (Debian), same machine, same run: redis-benchmark SET and GET with KV-chunk
# sized values (256 KiB, 1 MiB), without and with pipelining (-P 16). Both servers listen on
# loopback; redis-server runs without persistence (--save '' --appendonly no) and kvstore without
# a disk tier, so the data set fits in memory for both. A last row measures kvstore serving a data
# set 4x its memory budget from the disk tier (no redis-server peer: Redis would evict).
# Prints a markdown table; ratio = kvstore / redis-server (higher is better for kvstore).
# Env: DISAGG_ENGINE_BIN (default engine/build/disagg-engine), CLIENTS (default 16), KEYS (default 64).
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

work=$(mktemp -d)
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
wait_port "$redis_port"
wait_port "$kv_port"

# rps <port> <test> <value bytes> <requests> <pipeline>
rps() {
  redis-benchmark -p "$1" -t "$2" -d "$3" -n "$4" -P "$5" -c "$CLIENTS" -r "$KEYS" --csv 2>/dev/null |
    awk -F'","' -v t="$(echo "$2" | tr a-z A-Z)" '$1 == "\""t {print $2; exit}'
}

echo "redis-benchmark -c $CLIENTS -r $KEYS (keys), same machine ($(nproc) cores); requests per second and MB/s"
echo
echo "| test | value | pipeline | redis-server rps | kvstore rps | kvstore MB/s | ratio |"
echo "|------|-------|----------|-----------------:|------------:|-------------:|------:|"
for size in 262144 1048576; do
  n=$(( size == 262144 ? 4000 : 1000 ))
  label=$(( size / 1024 ))KiB
  for p in 1 16; do
    for t in set get; do
      r=$(rps "$redis_port" "$t" "$size" "$n" "$p")
      k=$(rps "$kv_port" "$t" "$size" "$n" "$p")
      awk -v t="$t" -v l="$label" -v p="$p" -v r="$r" -v k="$k" -v s="$size" 'BEGIN {
        printf "| %s | %s | %s | %.0f | %.0f | %.0f | %.2f |\n", toupper(t), l, p, r, k, k * s / 1e6, (r > 0 ? k / r : 0) }'
    done
  done
done

# Beyond memory: 256 MiB of 1 MiB values through a 64 MiB memory tier; every entry is demoted
# (--demote-min-reads 0), so GETs are served by the disk tier (and promoted).
disk_port=$(free_port)
"$BIN" kvstore --port "$disk_port" --memory-bytes 64m --disk-dir "$work/disk" --disk-bytes 2g \
  --demote-min-reads 0 2>/dev/null &
pids+=($!)
wait_port "$disk_port"
for t in set get; do
  k=$(redis-benchmark -p "$disk_port" -t "$t" -d 1048576 -n 1024 -P 1 -c "$CLIENTS" -r 256 --csv 2>/dev/null |
    awk -F'","' -v t="$(echo "$t" | tr a-z A-Z)" '$1 == "\""t {print $2; exit}')
  awk -v t="$t" -v k="$k" 'BEGIN { printf "| %s (4x memory, disk tier) | 1024KiB | 1 | - | %.0f | %.0f | - |\n", toupper(t), k, k * 1048576 / 1e6 }'
done
