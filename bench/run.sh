#!/usr/bin/env bash
# `npm run bench`: every benchmark, each against a peer measured in the same run.
# Usage: bench/run.sh [name ...]   (names: the bench/*.sh files without .sh; default: all)
# Output: bench/out/<name>.md (a markdown table per benchmark). Copy reviewed numbers into
# bench/RESULTS.md with the date and machine; benchmarks never run as part of `npm test`.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/out

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in bench/*.sh; do
    n=$(basename "$f" .sh)
    [ "$n" = run ] || names+=("$n")
  done
fi

machine="$(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME")"
echo "# disagg benchmarks, $(date -u +%Y-%m-%d), ${machine}"
for n in "${names[@]}"; do
  [ -f "bench/$n.sh" ] || { echo "unknown benchmark '$n'; known: $(ls bench/*.sh | xargs -n1 basename | sed 's/\.sh$//' | grep -v '^run$' | tr '\n' ' ')" >&2; exit 2; }
  echo
  echo "## $n"
  bash "bench/$n.sh" | tee "bench/out/$n.md"
done
