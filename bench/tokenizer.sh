#!/usr/bin/env bash
# The engine's tokenizer and chat template against Hugging Face's Rust tokenizers, same run (see
# bench/tokenizer.mjs). Builds nothing: run `npx projen compile` (or build engine/build) first.
# ROUNDS (8) paired rounds, REPEAT (30) timed runs per cell.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${DISAGG_ENGINE_BIN:-engine/build/disagg-engine}
[[ -x "$bin" ]] || { echo "missing $bin; build it: cmake --build engine/build --target disagg-engine" >&2; exit 1; }
node bench/tokenizer.mjs
