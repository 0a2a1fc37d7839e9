#!/usr/bin/env bash
# Simulator throughput: one hour of traffic at 100 requests/s (ISL 1k / OSL 256, 16 workers, prefix
# caching on) through engine/build/disagg-sim-bench, once per routing policy (single-threaded: one
# core; not pinned, since a pinned core may be busy on a shared machine). Then a determinism check: the same short run twice must print the same
# summary JSON, bit for bit. Builds nothing: run `cmake --build engine/build` first.
# Target (issue 5): under 10 s of wall time on one core. Extra flags go to every run (e.g.
# --seconds 360 for a quick look); POLICIES overrides the policies.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=engine/build/disagg-sim-bench
[[ -x "$bin" ]] || { echo "missing $bin; build it: cmake --build engine/build --target disagg-sim-bench" >&2; exit 1; }
first=1
for policy in ${POLICIES:-round-robin llm-d}; do
  if [[ $first == 1 ]]; then "$bin" --policy "$policy" "$@"; first=0; else "$bin" --policy "$policy" "$@" | tail -n 1; fi
done
a=$("$bin" --policy llm-d --workload chat --seconds 60 --summary 1 | tail -n 1)
b=$("$bin" --policy llm-d --workload chat --seconds 60 --summary 1 | tail -n 1)
if [[ "$a" == "$b" ]]; then
  echo "deterministic: two 60 s chat runs (llm-d) printed the same summary ($(printf '%s' "$a" | sha256sum | cut -c1-16))"
else
  echo "NOT deterministic: two identical 60 s chat runs printed different summaries" >&2
  exit 1
fi
