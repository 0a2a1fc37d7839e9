#!/usr/bin/env bash
# Builds images/engine-slim/Dockerfile for real on this machine (Debian 12, root, no Docker daemon)
# and runs what it built: `disagg-engine sim-worker` and `disagg-engine router` started from the
# image's own filesystem as uid 10001, one OpenAI completion sent through the router with curl.
#
#   sudo bash scripts/build-slim-image.sh          # progress on stderr, a result table on stdout
#
# How, and why this way:
# - podman (Debian's), `podman build --isolation chroot`: no daemon, and no OCI runtime for the
#   RUN steps, so it works on a machine whose cgroups cannot host containers.
# - Base images: Docker Hub is not used. A Debian 12 rootfs is made with
#   `debootstrap --variant=minbase bookworm` (the variant the official debian images use) from the
#   mirror this machine's apt already uses, imported with `podman import`, and tagged with the
#   names the Dockerfile's FROM lines use (debian:bookworm-20250929 for the builder; the -slim one
#   gets the same rootfs with the official slim images' dpkg path-excludes applied; both get the
#   official images' apt settings, e.g. downloaded .debs deleted after install), so the build
#   resolves them locally (--pull=never). The rootfs's apt sources point at the same mirror, so the
#   Dockerfile's own `apt-get update` inside the build reaches it. The tarballs are cached under
#   .cache/build-slim-image/ (git-ignored): delete them, or set REFRESH_ROOTFS=1, to remake them.
#   What differs from a build on Docker Hub's images: the base is today's bookworm from the mirror
#   rather than the 2025-09-29 snapshot the tags name.
# - Running it: `podman image mount` gives the image's filesystem; the two servers start from it
#   with `chroot --userspec=10001:10001` (the Dockerfile's USER) on loopback ports, with /proc,
#   /dev and a scratch /tmp (what a container runtime or the pod's emptyDir provides) mounted in.
#   The sim-worker publishes KV events over ZMQ (msgpack) and the router subscribes to them, so
#   libzmq5 and the msgpack encoder in the image are exercised, not only the HTTP path.
# - Everything started here (servers, mounts) is stopped and unmounted on exit, also on failure
#   or Ctrl-C. The image stays (tagged $IMAGE), so a second run reuses the build cache.
#
# Env: IMAGE (localhost/disagg-engine-slim:local), NO_CACHE=1 (build every step again: the time of
# a clean build; `npm run bench` sets it), REFRESH_ROOTFS=1 (remake the base rootfs), DEBIAN_MIRROR
# and DEBIAN_SECURITY_MIRROR (default: read from /etc/apt/sources.list{,.d/*}), CACHE_DIR
# (.cache/build-slim-image).
set -euo pipefail
cd "$(dirname "$0")/.."

DOCKERFILE=images/engine-slim/Dockerfile
IMAGE=${IMAGE:-localhost/disagg-engine-slim:local}
CACHE_DIR=${CACHE_DIR:-.cache/build-slim-image}
MODEL=slim-check
started=$(date +%s)

say() { printf '\033[1m[slim-image %s]\033[0m %s\n' "$(date -u -d "@$(( $(date +%s) - started ))" +%M:%S)" "$*" >&2; }
die() { say "FAILED: $*"; exit 1; }

# ---- cleanup: every process and mount this script starts ------------------------------------------
pids=()
mounts=()        # mount points to unmount, last first
image_mounted=0
scratch=""
cleanup() {
  local rc=$? p i
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  for (( i=${#mounts[@]}-1; i>=0; i-- )); do umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null || true; done
  [ "$image_mounted" = 1 ] && { podman image unmount "$IMAGE" >/dev/null 2>&1 || true; }
  [ -n "$scratch" ] && rm -rf --one-file-system "$scratch"
  [ "$rc" = 0 ] || say "exit $rc; stopped the servers and unmounted everything"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- prerequisites ------------------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "run as root (podman builds, debootstrap and chroot need it): sudo bash $0"
. /etc/os-release
[ "${ID:-}" = debian ] || say "warning: written for Debian 12; this is ${PRETTY_NAME:-unknown}"
missing=()
for tool in podman debootstrap curl; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v python3 >/dev/null || die "python3 is needed to pick free ports and read the answer"

# The Debian mirror apt uses here: the first deb source (one-line or deb822) serving SUITE.
apt_mirror() {
  local suite=$1 f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v s="$suite" '$1=="deb" { i=2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } if ($(i+1)==s) { print $i; exit } }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$suite" '
      function flush() { if (deb && uri != "" && (" " suites " ") ~ (" " s " ")) { print uri; found=1; exit } deb=0; uri=""; suites="" }
      /^[[:space:]]*$/ { flush(); next }
      /^Types:/ { deb = ($0 ~ /[[:space:]]deb([[:space:]]|$)/) }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { suites = $0; sub(/^Suites:[[:space:]]*/, "", suites) }
      END { if (!found) flush() }' "$f"
  done | head -1
}
MIRROR=${DEBIAN_MIRROR:-$(apt_mirror bookworm)}
SECURITY=${DEBIAN_SECURITY_MIRROR:-$(apt_mirror bookworm-security)}
[ -n "$MIRROR" ] || die "no 'bookworm' source in /etc/apt/sources.list{,.d/*}; set DEBIAN_MIRROR"
say "Debian mirror: $MIRROR${SECURITY:+ (security: $SECURITY)}"

# The base images the Dockerfile names.
mapfile -t bases < <(awk 'toupper($1)=="FROM" { print $2 }' "$DOCKERFILE" | grep '^debian:bookworm' | sort -u)
[ ${#bases[@]} -gt 0 ] || die "$DOCKERFILE names no debian:bookworm* base; this script only makes those"

# ---- base rootfs (debootstrap), cached ----------------------------------------------------------------
mkdir -p "$CACHE_DIR"
full_tar=$CACHE_DIR/bookworm-minbase.tar
slim_tar=$CACHE_DIR/bookworm-minbase-slim.tar
# Bump rootfs=N when what goes into the rootfs changes, so that cached tarballs are remade.
meta="rootfs=2 mirror=$MIRROR security=$SECURITY"
if [ "${REFRESH_ROOTFS:-0}" = 1 ] || [ ! -f "$full_tar" ] || [ ! -f "$slim_tar" ] \
   || [ "$(cat "$CACHE_DIR/rootfs.meta" 2>/dev/null)" != "$meta" ]; then
  t0=$(date +%s)
  scratch=$(mktemp -d /var/tmp/slim-rootfs.XXXXXX)
  rootfs=$scratch/rootfs
  say "debootstrap --variant=minbase bookworm from $MIRROR (a few minutes; cached afterwards)"
  if ! debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$scratch/debootstrap.log" 2>&1; then
    tail -20 "$scratch/debootstrap.log" >&2
    for m in $(awk -v r="$rootfs" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r); do umount -l "$m" || true; done
    die "debootstrap failed (log above)"
  fi
  for m in $(awk -v r="$rootfs" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r); do umount -l "$m" || true; done
  # apt sources as the official image writes them (deb822), at the same mirror.
  rm -f "$rootfs/etc/apt/sources.list"
  {
    printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$MIRROR"
    [ -z "$SECURITY" ] || printf '\nTypes: deb\nURIs: %s\nSuites: bookworm-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$SECURITY"
  } >"$rootfs/etc/apt/sources.list.d/debian.sources"
  # The apt and dpkg settings of the official images (debuerreotype-minimizing-config): apt deletes
  # the .debs it downloaded and keeps no package cache, so an `apt-get install` layer holds what was
  # installed, not its downloads (without them the slim image carried 85 MB of /var/cache/apt).
  printf '%s\n' \
    'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };' \
    'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };' \
    'Dir::Cache::pkgcache "";' 'Dir::Cache::srcpkgcache "";' >"$rootfs/etc/apt/apt.conf.d/docker-clean"
  echo 'Acquire::GzipIndexes "true";' >"$rootfs/etc/apt/apt.conf.d/docker-gzip-indexes"
  echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
  echo 'force-unsafe-io' >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/*.log
  tar --numeric-owner -C "$rootfs" -cf "$full_tar.part" . && mv "$full_tar.part" "$full_tar"
  # The -slim variant: the official slim images' dpkg path-excludes (debuerreotype --slimify):
  # documentation, man pages and locales are left out, copyright files kept.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
  find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/{groff,info,linda,locale,man}/* "$rootfs"/usr/share/lintian/overrides/*
  tar --numeric-owner -C "$rootfs" -cf "$slim_tar.part" . && mv "$slim_tar.part" "$slim_tar"
  echo "$meta" >"$CACHE_DIR/rootfs.meta"
  rm -rf --one-file-system "$scratch"; scratch=""
  say "rootfs made in $(( $(date +%s) - t0 )) s: $(du -h "$full_tar" | cut -f1) (slim $(du -h "$slim_tar" | cut -f1)), cached in $CACHE_DIR"
else
  say "rootfs: cached $full_tar and $slim_tar ($(cat "$CACHE_DIR/rootfs.meta"))"
fi
for base in "${bases[@]}"; do
  tarball=$full_tar
  case "$base" in *-slim) tarball=$slim_tar ;; esac
  # Imported once per tarball: a new import is a new image id, which would void the build cache.
  id=$(cat "$tarball.imported" 2>/dev/null || true)
  if [ -z "$id" ] || [ "$tarball" -nt "$tarball.imported" ] || ! podman image exists "$id"; then
    id=$(podman import --quiet --change 'CMD ["bash"]' "$tarball")
    echo "$id" >"$tarball.imported"
  fi
  # Both spellings, so the short name in FROM resolves locally however podman normalizes it; an
  # earlier import these names pointed at goes (fails harmlessly while a cached build uses it).
  old_id=$(podman image inspect --format '{{.Id}}' "localhost/$base" 2>/dev/null || true)
  podman tag "$id" "localhost/$base" "docker.io/library/$base"
  [ -z "$old_id" ] || [ "sha256:$old_id" = "$id" ] || [ "$old_id" = "$id" ] || podman rmi "$old_id" >/dev/null 2>&1 || true
  id=${id#sha256:}
  say "base $base <- $(basename "$tarball") (image ${id:0:12})"
done

# ---- build ----------------------------------------------------------------------------------------------
revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain -- engine images 2>/dev/null)" ] || revision="$revision-dirty"
# NO_CACHE=1: every step again, and no intermediate images kept (they would pile up run after run).
cache_flag=()
[ "${NO_CACHE:-0}" = 1 ] && cache_flag=(--no-cache --layers=false)
previous=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
say "podman build --isolation chroot -f $DOCKERFILE ${cache_flag[*]} (compiles engine/ inside: 10-25 min on 2 cores)"
build_log=$CACHE_DIR/build.log
t0=$(date +%s)
if ! podman build --isolation chroot --pull=never "${cache_flag[@]}" -f "$DOCKERFILE" -t "$IMAGE" \
      --build-arg DISAGG_REVISION="$revision" . >"$build_log" 2>&1; then
  tail -30 "$build_log" >&2
  die "podman build failed (the whole log: $build_log)"
fi
build_s=$(( $(date +%s) - t0 ))
# The image this tag named before, now untagged: removed (fails harmlessly while something uses it).
current=$(podman image inspect --format '{{.Id}}' "$IMAGE")
[ -z "$previous" ] || [ "$previous" = "$current" ] || podman rmi "$previous" >/dev/null 2>&1 || true
cached_steps=$(grep -c -- '--> Using cache' "$build_log" || true)
say "built $IMAGE in ${build_s} s ($cached_steps steps from cache; log: $build_log)"

# ---- size -------------------------------------------------------------------------------------------------
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
slim_base=$(awk 'toupper($1)=="FROM" && $2 ~ /-slim$/ { print $2 }' "$DOCKERFILE" | tail -1)
base_size=$(podman image inspect --format '{{.Size}}' "localhost/$slim_base")
gz=$(podman image save --format docker-archive "$IMAGE" 2>/dev/null | gzip -1 -c | wc -c)
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
say "image size: $(mb "$size") unpacked ($(mb "$gz") as a gzipped archive); the base $slim_base $(mb "$base_size")"

# ---- run it: sim-worker and router from the image's filesystem, as uid 10001 -----------------------
mnt=$(podman image mount "$IMAGE")
image_mounted=1
bin=$mnt/usr/local/bin/disagg-engine
[ -x "$bin" ] || die "$IMAGE has no /usr/local/bin/disagg-engine"
scratch=$(mktemp -d /var/tmp/slim-run.XXXXXX)
install -d -o 10001 -g 10001 -m 1777 "$scratch/tmp"
mount -t proc proc "$mnt/proc" || die "cannot mount /proc in $mnt"
mounts+=("$mnt/proc")
mount --bind /dev "$mnt/dev" || die "cannot bind /dev into $mnt"
mounts+=("$mnt/dev")
mount --bind "$scratch/tmp" "$mnt/tmp" || die "cannot bind a scratch /tmp into $mnt"
mounts+=("$mnt/tmp")
# The engine configuration, as the pod's config volume would give it (read by the sim-worker).
cp engine/examples/llama-3.3-70b-p5en.json "$scratch/tmp/engine.json"
chmod 0644 "$scratch/tmp/engine.json"
version=$(chroot --userspec=10001:10001 "$mnt" /usr/local/bin/disagg-engine version)
say "disagg-engine version (in the image, uid 10001): $version"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
# start NAME ARGS...: disagg-engine ARGS from the image as uid 10001; sets `port` from its
# "listening on http://127.0.0.1:PORT" line.
start() {
  local name=$1; shift
  : >"$scratch/$name.log"
  chroot --userspec=10001:10001 "$mnt" /usr/local/bin/disagg-engine "$@" >"$scratch/$name.log" 2>&1 &
  pids+=($!)
  port=""
  for _ in $(seq 300); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$scratch/$name.log" | head -1)
    [ -n "$port" ] && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$scratch/$name.log" >&2; die "$name did not start"; }
  say "$name listening on 127.0.0.1:$port (pid ${pids[-1]}, uid $(awk '/^Uid:/ { print $2 }' "/proc/${pids[-1]}/status"))"
}
kv_port=$(free_port)
start sim-worker sim-worker --config /tmp/engine.json --host 127.0.0.1 --port 0 --model-name "$MODEL" \
  --speedup 1000 --kv-events-port "$kv_port"
worker=$port
start router router --host 127.0.0.1 --port 0 --model-name "$MODEL" \
  --endpoint "role=aggregated,url=http://127.0.0.1:$worker,kv=tcp://127.0.0.1:$kv_port"
router=$port
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$router/ready" >/dev/null 2>&1 && break; sleep 0.1; done

# A prompt of several KV blocks (16 tokens each), so the sim-worker stores blocks and publishes them.
prompt=$(printf 'The slim image answers through its own router, from its own filesystem. %.0s' 1 2 3 4 5 6 7 8)
request='{"model":"'$MODEL'","prompt":"'${prompt% }'","max_tokens":8}'
say "POST http://127.0.0.1:$router/v1/completions (model $MODEL, a ${#prompt}-character prompt, max_tokens 8)"
answer=$(curl -sS --fail-with-body -m 30 -H 'content-type: application/json' -d "$request" \
  "http://127.0.0.1:$router/v1/completions") || die "the router did not answer: $answer"
say "answer: $answer"
summary=$(python3 -c '
import json, sys
a = json.loads(sys.argv[1])
c = a["choices"][0]
assert a.get("object") == "text_completion", "object is %r, not text_completion" % a.get("object")
assert a.get("model") == sys.argv[2], "model is %r" % a.get("model")
assert c.get("text"), "empty completion text"
assert c.get("finish_reason") == "length", "finish_reason %r (max_tokens 8)" % c.get("finish_reason")
assert a["usage"]["completion_tokens"] == 8, "completion_tokens %r" % a["usage"]["completion_tokens"]
print("%s, %d prompt + %d completion tokens, finish_reason %s" % (a["object"], a["usage"]["prompt_tokens"], a["usage"]["completion_tokens"], c["finish_reason"]))
' "$answer" "$MODEL") || die "unexpected answer: $answer"
# The router learns the worker's blocks from its KV events (msgpack over ZMQ): batches applied,
# none that failed to decode.
metric() { curl -fs "http://127.0.0.1:$router/metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { print s + 0 }'; }
batches=0
for _ in $(seq 50); do
  batches=$(metric disagg_router_kv_events_batches_total)
  [ "$batches" -gt 0 ] && break
  sleep 0.1
done
decode_errors=$(metric disagg_router_kv_events_decode_errors_total)
[ "$decode_errors" = 0 ] || die "the router could not decode $decode_errors KV event batches from the sim-worker"
[ "$batches" -gt 0 ] || die "the router applied no KV event batch from the sim-worker (tcp://127.0.0.1:$kv_port)"
kv_events="batches applied by the router: $batches, decode errors: 0"
say "checked: $summary; KV events $kv_events"
total_s=$(( $(date +%s) - started ))

# ---- result (stdout, markdown) ------------------------------------------------------------------------
cat <<EOF
| | |
|---|---|
| date, machine | $(date -u +%Y-%m-%d), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -m), ${PRETTY_NAME:-?}; podman $(podman version --format '{{.Client.Version}}'), --isolation chroot |
| built | $DOCKERFILE -> $IMAGE (revision $revision); bases: ${bases[*]} made by debootstrap from $MIRROR |
| build time | ${build_s} s (${cached_steps} steps from cache$([ "${NO_CACHE:-0}" = 1 ] && echo ', --no-cache')) |
| image size | $(mb "$size") unpacked, $(mb "$gz") gzipped; base $(mb "$base_size"), so the image adds $(mb $(( size - base_size ))) |
| ran | sim-worker and router from the image as uid 10001 on loopback; \`disagg-engine version\`: $version |
| request answered | POST /v1/completions through the router: $summary; KV events $kv_events |
| total | ${total_s} s |
EOF
say "done in ${total_s} s"
