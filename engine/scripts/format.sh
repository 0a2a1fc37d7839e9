#!/usr/bin/env bash
# Format the engine's C++ with clang-format (engine/.clang-format), or check that it is formatted.
#   engine/scripts/format.sh            rewrite every tracked .cc/.h under engine/ in place
#   engine/scripts/format.sh --check    list the files clang-format would change and exit 1 (CI)
# Every file, not only the changed ones: the tree was formatted once, so a clean tree stays clean and a
# change that is not formatted names its file.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format.sh: clang-format not found (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cpp')
if [ "${1:-}" = --check ]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    printf 'engine/%s is not formatted\n' "${bad[@]}" >&2
    echo "format.sh: run engine/scripts/format.sh (clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1)) and commit" >&2
    exit 1
  fi
  echo "format.sh: ${#files[@]} files formatted"
else
  clang-format -i "${files[@]}"
fi
