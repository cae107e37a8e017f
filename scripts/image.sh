#!/usr/bin/env bash
# Build and run the sparsescope container image, with docker where a working one is found (its
# daemon answers `docker info`), with buildah otherwise (no daemon, no root-owned socket needed).
#
#   scripts/image.sh build [BUILDER ARGS...]   build $IMAGE from the Dockerfile (e.g. --no-cache)
#   scripts/image.sh run                       serve $IMAGE on $PORT, the share database in $DATA
#   scripts/image.sh base                      make the Debian bookworm base image $BASE_IMAGE
#   scripts/image.sh info                      print the engine and storage driver it would use
#
# Offline machines: when the registry's python:3.11-slim cannot be pulled, `build` makes a plain
# Debian bookworm base with mmdebstrap (Debian's mirror is all it needs) and builds on that. With
# buildah, this machine's pip configuration (`pip config list`: index, find-links, CA bundle,
# constraints) is handed to the build's RUN steps, read-only, with the files and folders it names,
# so an offline pip that works here works in the build too.
#
# Environment: IMAGE (localhost/sparsescope:latest), BASE (the base image; default: python:3.11-slim
# if it can be pulled, else $BASE_IMAGE), BASE_IMAGE (localhost/sparsescope-base:12), ENGINE
# (docker | buildah; default: detected), STORAGE_DRIVER (buildah/podman storage: overlay where the
# kernel allows it, else vfs), PORT (8000), HOST (127.0.0.1: where `run` listens on this machine),
# DATA (host folder mounted at /data, ./image-data), TORCH_INDEX_URL (default: PyTorch's CPU index
# when it answers, else pip's configured index, or PyPI: this machine's pip config then picks torch),
# PIP_CONFIG (host | none: hand this machine's pip configuration to a buildah build; host).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-localhost/sparsescope:latest}
BASE_IMAGE=${BASE_IMAGE:-localhost/sparsescope-base:12}
REGISTRY_BASE=python:3.11-slim
PORT=${PORT:-8000}
HOST=${HOST:-127.0.0.1}
DATA=${DATA:-$PWD/image-data}
PIP_CONFIG=${PIP_CONFIG:-host}
DEFAULT_TORCH_INDEX=https://download.pytorch.org/whl/cpu

WORK=$(mktemp -d)

# buildah's storage: overlay where the kernel mounts it for us (no copies), else vfs (a full copy
# of the root filesystem per layer: slow, and many GB for this image). A store keeps the driver
# it was made with: an existing vfs store stays vfs (remove it, or set STORAGE_DRIVER, to switch).
overlay_works() {
  [ "$(id -u)" = 0 ] || return 1
  local d=$WORK/ovl ok=1
  mkdir -p "$d/l" "$d/u" "$d/w" "$d/m"
  if mount -t overlay overlay -o "lowerdir=$d/l,upperdir=$d/u,workdir=$d/w" "$d/m" 2>/dev/null; then
    umount "$d/m" && ok=0
  fi
  rm -rf "$d"
  return $ok
}
STORE=/var/lib/containers/storage
if [ -z "${STORAGE_DRIVER:-}" ]; then
  if [ -d "$STORE/vfs-images" ] && [ ! -d "$STORE/overlay-images" ]; then
    STORAGE_DRIVER=vfs  # the store this machine already has
  elif overlay_works; then STORAGE_DRIVER=overlay; else STORAGE_DRIVER=vfs; fi
fi

CTR=
cleanup() {
  if [ -n "$CTR" ]; then buildah --storage-driver "$STORAGE_DRIVER" rm "$CTR" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

die() { echo "image.sh: $*" >&2; exit 2; }
note() { echo "==> $*" >&2; }

detect_engine() {
  if [ -n "${ENGINE:-}" ]; then
    echo "$ENGINE"
  elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    echo docker
  elif command -v buildah >/dev/null 2>&1; then
    echo buildah
  else
    die "neither a working docker nor buildah found (apt-get install buildah podman mmdebstrap)"
  fi
}

bah() { buildah --storage-driver "$STORAGE_DRIVER" "$@"; }

has_image() {
  case "$1" in
    docker) docker image inspect "$2" >/dev/null 2>&1 ;;
    buildah) bah inspect --type image "$2" >/dev/null 2>&1 ;;
  esac
}

can_pull() {
  case "$1" in
    docker) timeout 120 docker pull -q "$2" >/dev/null 2>&1 ;;
    buildah) timeout 120 buildah --storage-driver "$STORAGE_DRIVER" pull -q "docker.io/library/$2" \
               >/dev/null 2>&1 ;;
  esac
}

make_base() {
  local engine=$1
  command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap not found (apt-get install mmdebstrap)"
  local tmp=$WORK
  note "Debian bookworm base with mmdebstrap -> $BASE_IMAGE"
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    bookworm "$tmp/base.tar"
  local path=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  case "$engine" in
    docker) docker import --change "ENV $path" "$tmp/base.tar" "$BASE_IMAGE" >/dev/null ;;
    buildah)
      if command -v podman >/dev/null 2>&1; then
        podman --storage-driver "$STORAGE_DRIVER" import -q --change "ENV $path" "$tmp/base.tar" \
          "$BASE_IMAGE" >/dev/null
      else
        local ctr
        ctr=$(bah from scratch)
        bah add "$ctr" "$tmp/base.tar" /
        bah config --env "$path" "$ctr"
        bah commit -q "$ctr" "$BASE_IMAGE" >/dev/null
        bah rm "$ctr" >/dev/null
      fi ;;
  esac
}

pick_base() {
  local engine=$1
  if [ -n "${BASE:-}" ]; then
    echo "$BASE"
  elif has_image "$engine" "$REGISTRY_BASE" || has_image "$engine" "docker.io/library/$REGISTRY_BASE" \
      || can_pull "$engine" "$REGISTRY_BASE"; then
    echo "$REGISTRY_BASE"
  else
    note "$REGISTRY_BASE cannot be pulled (no registry reachable): Debian base $BASE_IMAGE"
    has_image "$engine" "$BASE_IMAGE" || make_base "$engine"
    echo "$BASE_IMAGE"
  fi
}

# TORCH_INDEX_URL: as given; else PyTorch's CPU index when it answers; else pip's configured index
# (PyPI when none is set), where this machine's pip finds its torch (a local CPU wheel, say)
torch_index() {
  if [ -n "${TORCH_INDEX_URL:-}" ]; then
    echo "$TORCH_INDEX_URL"
  elif python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=10)" \
      "$DEFAULT_TORCH_INDEX" >/dev/null 2>&1; then
    echo "$DEFAULT_TORCH_INDEX"
  else
    local index
    index=$(python3 -m pip config get global.index-url 2>/dev/null || true)
    index=${index:-https://pypi.org/simple}
    note "$DEFAULT_TORCH_INDEX unreachable: torch from $index and pip's configuration"
    echo "$index"
  fi
}

# This machine's pip configuration as one pip.conf (a key set in several places keeps the value
# that pip itself uses: environment, then site, user, global), plus `-v` mounts of what it names.
PIP_MOUNTS=()
host_pip_config() {
  local conf=$1 path
  python3 -m pip config list 2>/dev/null | python3 -c '
import os, sys
rank = {":env:": 0, "site": 1, "user": 2, "global": 3}
best = {}
for line in sys.stdin:
    key, sep, value = line.rstrip("\n").partition("=")
    if not sep:
        continue
    scope, _, name = key.rpartition(".")
    value = value.strip().strip("\x27")
    r = rank.get(scope, 4)
    if name not in best or r < best[name][0]:
        best[name] = (r, value)
with open(sys.argv[1], "w") as conf:
    conf.write("[global]\n")
    for name, (_, value) in sorted(best.items()):
        conf.write(f"{name} = {value}\n")
for _, value in best.values():
    for word in value.split():
        path = word.removeprefix("file://").rstrip("/")
        if word.startswith("file://") and os.path.basename(path) == "simple":
            path = os.path.dirname(path)  # a local index: its pages link to files beside it
        if path.startswith("/") and os.path.exists(path):
            print(path)
' "$conf" >"$WORK/pip-paths" || return 0
  [ -s "$conf" ] || return 0
  while IFS= read -r path; do PIP_MOUNTS+=(-v "$path:$path:ro"); done <"$WORK/pip-paths"
  PIP_MOUNTS+=(-v "$conf:/etc/pip.conf:ro")
  note "pip configuration of this machine handed to the build: $(tr '\n' ' ' <"$WORK/pip-paths")"
}

build() {
  local engine base index
  engine=$(detect_engine)
  base=$(pick_base "$engine")
  index=$(torch_index)
  note "building $IMAGE with $engine on $base"
  case "$engine" in
    docker)
      docker build -t "$IMAGE" --build-arg "BASE=$base" --build-arg "TORCH_INDEX_URL=$index" "$@" .
      ;;
    buildah)
      if [ "$PIP_CONFIG" = host ]; then
        host_pip_config "$WORK/pip.conf"
      fi
      bah bud --isolation chroot --network host --layers --format docker \
        -t "$IMAGE" --build-arg "BASE=$base" --build-arg "TORCH_INDEX_URL=$index" \
        ${PIP_MOUNTS[@]+"${PIP_MOUNTS[@]}"} "$@" .
      ;;
  esac
}

run() {
  local engine
  engine=$(detect_engine)
  mkdir -p "$DATA"
  # the server runs as uid 10001: it must be able to write the share database
  if [ "$(id -u)" = 0 ]; then chown 10001:10001 "$DATA"; fi
  note "serving $IMAGE on http://$HOST:$PORT/ (data: $DATA)"
  case "$engine" in
    docker) exec docker run --rm -p "$HOST:$PORT:8000" -v "$DATA:/data" "$IMAGE" "$@" ;;
    buildah)
      # `podman run` cannot start containers on every host (crun and RLIMIT_NOFILE); buildah
      # runs the image's command in a chroot on the host's network, as the image's user.
      CTR=$(bah from -q "$IMAGE")
      # buildah run mounts an anonymous volume over the image's VOLUME /data, hiding `-v DATA:/data`:
      # drop the declaration from this working container so the host folder is what /data is
      bah config --volume /data- "$CTR"
      bah run --isolation chroot --network host -v "$DATA:/data" "$CTR" -- \
        sparsescope serve --host "$HOST" --port "$PORT" "$@"
      ;;
  esac
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  base) shift; make_base "$(detect_engine)" ;;
  info) echo "engine=$(detect_engine) storage_driver=$STORAGE_DRIVER image=$IMAGE" ;;
  *) die "usage: scripts/image.sh build [ARGS...] | run [ARGS...] | base | info" ;;
esac
