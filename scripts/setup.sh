#!/usr/bin/env bash
# Prepare a fresh Debian/Ubuntu machine (Node.js 20+ already there) to build and test disagg:
# system packages for the C++ engine and its tests, npm dependencies, then a build of the engine,
# its Node addon and the TypeScript library. Safe to run again: every step is skipped when done.
#   scripts/setup.sh                   prepare this machine
#   scripts/setup.sh --list-packages   print the system packages it needs here, one a line
# DISAGG_DISTRO (debian-12, ubuntu-22.04 or ubuntu-24.04) picks the package names; default: this
# machine's /etc/os-release.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# --- Which system packages ----------------------------------------------------------------------
# The engine's build packages are the one list the images' builder stages install too:
# images/common/engine-build-packages.<distribution>.txt (compiler, CMake, Boost, libzmq + cppzmq,
# msgpack-cxx, nlohmann-json, gperftools, PCRE2, utf8proc; test/images/engine-build-packages.test.ts
# checks it against engine/'s CMake). Added here, for the tests, fuzzers and benchmarks only:
# libgtest/libgmock: engine tests; redis-server/redis-tools: real Redis clients and the peer for
# kvstore tests and benchmarks; nginx-light: the proxy peer in the router benchmark; curl: raw-HTTP
# tests; clang + libclang-rt-14-dev: libFuzzer targets (engine/fuzz.sh); python3-jinja2: the
# reference renderer in the chat-template differential test; clang-format: the engine's format check
# (engine/scripts/format.sh --check, in .ci/run); prometheus: promtool checks and tests the alert rules,
# and a real Prometheus scrapes a local run in the monitoring tests.
distro=${DISAGG_DISTRO:-}
if [ -z "$distro" ] && [ -r /etc/os-release ]; then
  distro=$(. /etc/os-release && echo "${ID:-}-${VERSION_ID:-}")
fi
engine_list=images/common/engine-build-packages.$distro.txt
if [ ! -f "$engine_list" ]; then
  echo "[setup] no package list for '$distro' ($engine_list); using Debian 12's names" >&2
  engine_list=images/common/engine-build-packages.debian-12.txt
fi
mapfile -t packages < <(sed 's/#.*//' "$engine_list" | tr -s ' \t' '\n' | sed '/^$/d')
[ ${#packages[@]} -gt 0 ] || { echo "[setup] $engine_list lists no packages" >&2; exit 1; }
packages+=(libgtest-dev libgmock-dev redis-server redis-tools nginx-light curl clang libclang-rt-14-dev
  python3-jinja2 clang-format prometheus)
if [ "${1:-}" = --list-packages ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

# --- Node.js -------------------------------------------------------------------------------------
if ! command -v node >/dev/null 2>&1; then
  echo "[setup] Node.js 20 or newer is required: https://nodejs.org/en/download" >&2
  exit 1
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "[setup] Node.js $(node --version) found; disagg needs 20 or newer." >&2
  exit 1
fi

# --- System packages (the list above) ------------------------------------------------------------
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    say "installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "[setup] missing system packages: ${missing[*]}" >&2
    echo "[setup] install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# --- npm dependencies ----------------------------------------------------------------------------
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm dependencies (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
fi

# --- Build ---------------------------------------------------------------------------------------
# `projen compile` builds the engine (CMake: library, disagg-engine, tests; cmake-js: Node addon)
# and then the jsii library into lib/.
say "building the engine and the library"
npx projen compile
say "ready: try 'npx disagg plan' or 'npm test'"
