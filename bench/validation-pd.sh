#!/usr/bin/env bash
# The simulator against published P/D-vs-aggregated measurements (issue 36): every point of
# ../shared/validation/pd-published-calibration.json expressed from its own fields
# (bench/validation-pd/points.ts: catalog model and instance, each arm's engine generation, topology,
# KV-transfer fabric, and its traffic: the published request stream where there is one), simulated
# through the engine addon, and judged (bench/validation-pd/score.ts): both arms' headline measure, the
# predicted P/D : aggregated ratio beside the published one, and the direction. Prints a markdown table;
# the last line is one JSON object. Builds nothing: needs the addon (`npx projen engine`).
# Env: PD_POINTS (another points file of the same format, e.g. the held-out set), DISAGG_ENGINE_ADDON.
set -euo pipefail
cd "$(dirname "$0")/.."
points=${PD_POINTS:-../shared/validation/pd-published-calibration.json}
if [[ ! -f "$points" ]]; then
  echo "validation-pd: $points is absent (the points live beside the repository in shared/validation); set PD_POINTS" >&2
  exit 0
fi
PD_POINTS=$(cd "$(dirname "$points")" && pwd)/$(basename "$points") npx ts-node --transpile-only bench/validation-pd/score.ts
