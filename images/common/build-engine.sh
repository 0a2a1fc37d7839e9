#!/bin/sh
# Builds the `disagg-engine` binary in the builder stage of every image under images/.
#
#   build-engine.sh <engine source dir> <installed binary path>
#
# - Tests are off (no GoogleTest in the image); warnings do not fail the build
#   (DISAGG_WERROR=OFF), because each image compiles with its base distribution's g++, which
#   may warn about things the project's CI compiler does not.
# - libstdc++ and libgcc are linked statically, and so are PCRE2 and utf8proc (the router's tokenizer),
#   so the binary needs only the runtime's glibc (the builder is chosen to match it) and libzmq.
# - The binary runs once (`version`) so a broken build fails here, not in a pod.
# Environment: CXX picks the compiler; ENGINE_BUILD_JOBS the parallelism (default: nproc).
set -eu

src=${1:?usage: build-engine.sh <engine source dir> <installed binary path>}
out=${2:?usage: build-engine.sh <engine source dir> <installed binary path>}
build=$(mktemp -d)

cmake -S "$src" -B "$build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DDISAGG_BUILD_TESTS=OFF \
  -DDISAGG_WERROR=OFF \
  -DDISAGG_STATIC_TEXT_LIBS=ON \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc"
cmake --build "$build" --target disagg-engine --parallel "${ENGINE_BUILD_JOBS:-$(nproc)}"

install -D -m 0755 "$build/disagg-engine" "$out"
strip "$out"
"$out" version
rm -rf "$build"
