#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in engine/build-fuzz and runs each for
# FUZZ_SECONDS (default 20) with a corpus under engine/build-fuzz/corpus/<target>, seeded with a few
# valid inputs. Exits non-zero when a target crashes (the reproducer is left in
# engine/build-fuzz/crashes/<target>/). Only the fuzz targets are built, by name, so the servers
# (Boost.Beast) need not compile under clang. Needs clang (apt-get install -y clang).
#   engine/fuzz.sh                 # 5 targets x 20 s
#   FUZZ_SECONDS=300 engine/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")"
seconds=${FUZZ_SECONDS:-20}
jobs=${FUZZ_BUILD_JOBS:-2}
build=build-fuzz
command -v clang++ >/dev/null || { echo "clang++ not found; install it: apt-get install -y clang" >&2; exit 2; }

CC=clang CXX=clang++ cmake -S . -B "$build" -DDISAGG_FUZZ=ON -DDISAGG_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# target  path in the build tree  -max_len
targets=(
  "disagg_kvstore_resp_fuzz src/servers/kvstore 16384"
  "disagg_kv_event_decoder_fuzz src/lib/kv_events 8192"
  "disagg_request_parse_fuzz src/lib/openai 8192"
  "disagg_http_parse_fuzz src/lib/http 4096"
  "disagg_json_depth_fuzz src/lib/http 4096"
)
names=()
for t in "${targets[@]}"; do names+=("${t%% *}"); done
cmake --build "$build" --parallel "$jobs" --target "${names[@]}"

# Seeds: one valid input per target (the first byte is the target's mode byte).
seed() { mkdir -p "$build/corpus/$1"; printf '%b' "$3" > "$build/corpus/$1/$2"; }
seed disagg_kvstore_resp_fuzz set '\x10*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n'
seed disagg_kvstore_resp_fuzz inline '\x05PING\r\nGET k\r\n'
# msgpack [ts, [["BlockStored", [1, 2], null, [5, 6], 16]], 0] — vLLM's KvEventBatch shape.
seed disagg_kv_event_decoder_fuzz stored '\x00\x93\xcb\x41\xd9\x00\x00\x00\x00\x00\x00\x91\x95\xabBlockStored\x92\x01\x02\xc0\x92\x05\x06\x10\x00'
seed disagg_request_parse_fuzz completions '\x00{"model":"llama","prompt":"hello world","stream":true,"max_tokens":5}'
seed disagg_request_parse_fuzz tokens '\x00{"model":"llama","prompt":[[1,2,3],[4]],"max_completion_tokens":1}'
seed disagg_request_parse_fuzz chat '\x01{"model":"llama-3.3-70b","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}]}'

seed disagg_http_parse_fuzz request '\x00POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}'
seed disagg_http_parse_fuzz response '\x01HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n'
seed disagg_http_parse_fuzz chunked '\x0b5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n'
seed disagg_json_depth_fuzz chat '\x05{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"[{\\"x"}]}]}'
seed disagg_json_depth_fuzz deep '\x03[[[[{"a":[1]}]]]]'

status=0
for t in "${targets[@]}"; do
  read -r name dir max_len <<<"$t"
  mkdir -p "$build/crashes/$name"
  echo "== $name: ${seconds}s, -max_len=$max_len"
  if ! "$build/$dir/$name" "$build/corpus/$name" -max_total_time="$seconds" -max_len="$max_len" \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/crashes/$name/" \
      2>"$build/$name.log"; then
    echo "FAILED: $name (log $build/$name.log, reproducer in $build/crashes/$name/)" >&2
    tail -n 40 "$build/$name.log" >&2
    status=1
  else
    grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$build/$name.log" | tr '\n' ' '; echo
  fi
done
exit "$status"
