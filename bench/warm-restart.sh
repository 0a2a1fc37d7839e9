#!/usr/bin/env bash
# A router that restarts warm (issue 35): the share of requests routed to a worker holding their
# prefix, second by second after a kill -9 and restart under load, for a cold restart (no replay, no
# peer), a replay-only restart (the workers' replay sockets) and a peer restart (a live peer
# router's snapshot). About 1.5 minutes. See bench/warm-restart.mjs for the knobs.
# ENGINE (engine/build/disagg-engine). Builds nothing: run `npx projen engine`.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-engine/build/disagg-engine}
[[ -x "$engine" ]] || { echo "missing $engine; build it with \`npx projen engine\`" >&2; exit 1; }
node bench/warm-restart.mjs "$engine"
