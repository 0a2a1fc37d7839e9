#!/usr/bin/env bash
# Where a prefill/decode split pays (issue 36): the planner's best aggregated deployment against its
# best split, searched apart at each TTFT SLO, over prompt/output length mixes, for the default
# deployment's model and for DistServe's OPT-13B case beside what DistServe published
# (bench/pd-crossover/map.ts; the same search `disagg plan --simulate` prints as "Where a
# prefill/decode split pays"). Prints markdown maps; writes bench/out/pd-crossover.json. Builds
# nothing: needs the engine addon (`npx projen engine`). About 6 minutes on two cores; arguments name
# the models to map (llama-3.3-70b, opt-13b), default both.
set -euo pipefail
cd "$(dirname "$0")/.."
npx ts-node --transpile-only bench/pd-crossover/map.ts "$@"
