#!/usr/bin/env bash
# The cost model against a real GPU: times a Llama-3.1-8B-shaped decoder's prefill and decode steps
# on this machine's CUDA GPU (bench/gpu/step_times.py, random weights, CUDA graphs) and sets them
# against `disagg-engine cost` for the catalog's numbers of that GPU (bench/gpu/compare.mjs).
#   bash bench/gpu.sh                          # on a machine with a CUDA GPU and PyTorch
#   STEP_TIMES=times.json bash bench/gpu.sh    # compare times measured elsewhere
# ACCELERATOR (default H200) names the catalog accelerator the GPU is. Without a GPU and without
# STEP_TIMES it prints "skipped", so `npm run bench` runs everywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
times=${STEP_TIMES:-}
if [[ -z "$times" ]]; then
  if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu: skipped; no CUDA GPU with PyTorch here (set STEP_TIMES to a step_times.py JSON to compare one)"
    exit 0
  fi
  times=$(mktemp)
  trap 'rm -f "$times"' EXIT
  python3 bench/gpu/step_times.py > "$times"
fi
node bench/gpu/compare.mjs "$times" "${ACCELERATOR:-H200}"
