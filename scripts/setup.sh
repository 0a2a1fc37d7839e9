#!/usr/bin/env bash
# Prepare a fresh Debian/Ubuntu machine (Node.js 20+ already there) to build and test disagg:
# system packages for the C++ engine and its tests, npm dependencies, then a build of the engine,
# its Node addon and the TypeScript library. Safe to run again: every step is skipped when done.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

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

# --- System packages -----------------------------------------------------------------------------
# cmake/g++: engine; libgtest/libgmock: engine tests; nlohmann-json: engine config parsing;
# boost (Asio/Beast), libzmq + cppzmq, msgpack-cxx: the router and sim-worker servers (HTTP, KV events);
# redis-server/redis-tools: real Redis clients and the peer for kvstore tests and benchmarks;
# nginx-light: the proxy peer in the router benchmark; curl: raw-HTTP tests;
# clang + libclang-rt-14-dev: libFuzzer targets (engine/fuzz.sh);
# libgoogle-perftools-dev: tcmalloc, linked statically into disagg-engine (engine/CMakeLists.txt);
# libpcre2-dev/libutf8proc-dev: the engine's tokenizer (pre-tokenizer regexes, NFC);
# python3-jinja2: the reference renderer in the chat-template differential test.
packages=(cmake g++ make pkg-config libgtest-dev libgmock-dev nlohmann-json3-dev
  libboost-dev libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libgoogle-perftools-dev
  redis-server redis-tools nginx-light curl clang libclang-rt-14-dev
  libpcre2-dev libutf8proc-dev python3-jinja2)
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
