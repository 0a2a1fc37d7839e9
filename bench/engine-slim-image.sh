#!/usr/bin/env bash
# The slim engine image built for real (scripts/build-slim-image.sh): images/engine-slim/Dockerfile
# through podman with --isolation chroot and --no-cache, so the time is a clean build's (engine/
# compiled inside); then the sim-worker and the router run from the image as uid 10001 and answer
# one OpenAI completion. Prints the script's result table. Needs root (podman, debootstrap, chroot);
# skipped, with a line saying so, otherwise. No peer: this records what the image costs to build
# and weighs, next to the Debian base it starts from.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "skipped: building the image needs root (podman, debootstrap, chroot): sudo bash bench/engine-slim-image.sh"
  exit 0
fi
NO_CACHE=${NO_CACHE:-1} exec bash scripts/build-slim-image.sh
