#!/usr/bin/env bash
# The simulator against real vLLM serving runs (issue 21): every run of
# ../shared/validation/vllm-runs-calibration.json expressed from the catalog and the run's own
# configuration (bench/validation/runs.ts: vLLM's limits, the client's traffic replayed as a trace),
# simulated once through the engine addon, and scored as the README there defines it: absolute
# percentage error of the E2E, TTFT and ITL means per run, then the mean, beside the published
# simulators' errors on the same runs. Prints a markdown table. Builds nothing: needs the addon
# (`npx projen engine`). Env: VALIDATION_RUNS (another runs file of the same format, e.g. the
# held-out set), DISAGG_ENGINE_ADDON.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${VALIDATION_RUNS:-../shared/validation/vllm-runs-calibration.json}
if [[ ! -f "$runs" ]]; then
  echo "validation: $runs is absent (the runs live beside the repository in shared/validation); set VALIDATION_RUNS" >&2
  exit 0
fi
VALIDATION_RUNS=$(cd "$(dirname "$runs")" && pwd)/$(basename "$runs") npx ts-node --transpile-only bench/validation/score.ts
