#!/usr/bin/env bash
# Simulator throughput: one hour of traffic at 100 requests/s (ISL 1k / OSL 256, 16 workers, prefix
# caching on) through engine/build/disagg-sim-bench, once per routing policy. Builds nothing: run
# `cmake --build engine/build` first. Target (issue 5): under 10 s of wall time on one core.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=engine/build/disagg-sim-bench
[[ -x "$bin" ]] || { echo "missing $bin; build it: cmake --build engine/build --target disagg-sim-bench" >&2; exit 1; }
first=1
for policy in ${POLICIES:-round-robin llm-d}; do
  if [[ $first == 1 ]]; then "$bin" --policy "$policy" "$@"; first=0; else "$bin" --policy "$policy" "$@" | tail -n 1; fi
done
