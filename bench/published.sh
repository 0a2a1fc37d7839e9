#!/usr/bin/env bash
# Published results (REFERENCE.md section 7) reproduced in simulation, without tuning to them:
# bench/published/make-configs.ts resolves every scenario's engine configuration from src/catalog and
# src/sizing, `disagg-engine simulate` runs each, bench/published/report.ts prints a markdown table
# (scenario, metric, published, simulated, direction match, ratio). Builds nothing: run
# `cmake --build engine/build` first. Analysis of the gaps: bench/RESULTS.md.
#
# Env: SIMULATE (command that takes `--config FILE` and prints the summary JSON; default
# engine/build/disagg-engine simulate; SIMULATE="npx ts-node --transpile-only bench/published/simulate-addon.ts"
# runs the addon instead), PLAN (the same for *.plan.json placement searches; default
# engine/build/disagg-engine plan), OUT (directory for configs and summaries; default a temp dir).
# The wide-EP rows (wideep-*.json) compare an absolute figure: llm-d's ~2.2k output tok/s per H200.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=engine/build/disagg-engine
simulate=${SIMULATE:-"$bin simulate"}
if [[ -z "${SIMULATE:-}" && ! -x "$bin" ]]; then
  echo "missing $bin; build it: cmake --build engine/build --target disagg-engine" >&2
  exit 1
fi
out=${OUT:-$(mktemp -d)}
npx ts-node --transpile-only bench/published/make-configs.ts "$out" >&2
for config in "$out"/*.json; do
  [[ "$config" == *.summary.json ]] && continue
  name=$(basename "$config" .json)
  # *.plan.json: a placement search (the planner), else one simulation.
  run=$simulate
  [[ "$name" == *.plan ]] && run=${PLAN:-"$bin plan"}
  start=$(date +%s.%N)
  if $run --config "$config" > "$out/$name.summary.json" 2> "$out/$name.err"; then
    printf '%-22s %6.1f s wall\n' "$name" "$(echo "$(date +%s.%N) - $start" | bc)" >&2
  else
    rm -f "$out/$name.summary.json"
    echo "$name: $(head -c 400 "$out/$name.err")" >&2
  fi
done
npx ts-node --transpile-only bench/published/report.ts "$out"
