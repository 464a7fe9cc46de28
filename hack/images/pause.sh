#!/usr/bin/env bash
# Builds the pause image a real node's containerd uses as its pod sandbox (make run
# REAL_NODE=1, test/support/real-node.ts): no registry is reachable here, so it is built
# from Kubernetes' own source, build/pause/linux/pause.c of the k8s.io/kubernetes module
# the control plane is built from, compiled with the flags build/pause/Makefile uses
# (gcc -Os -Wall -Werror -static), into an image FROM scratch with the user and
# entrypoint of build/pause/Dockerfile. Cached as $CACHE/images/pause-<key>.oci.tar, key a
# hash of this script, the source and the compiler; prints `pause <archive> <digest>`.
# Needs gcc with a static libc (libc6-dev), buildah and root (buildah's vfs storage).
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.35.4}"
# The pause version build/pause/Makefile of that release names (TAG, REV).
PAUSE_VERSION="${PAUSE_VERSION:-3.10.1}"
CACHE="${CACHEROUTE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cacheroute}"
OUT="$CACHE/images"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1767225600}"
REF="${PAUSE_REF:-registry.k8s.io/pause:$PAUSE_VERSION}"

log() { printf '[pause] %s\n' "$*" >&2; }
die() { printf '[pause] %s\n' "$*" >&2; exit 1; }
for c in gcc buildah go; do command -v "$c" >/dev/null || die "needs $c"; done

src="$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_VERSION/build/pause/linux/pause.c"
if [ ! -f "$src" ]; then
  GOFLAGS=-mod=mod go mod download "k8s.io/kubernetes@$K8S_VERSION" || die "cannot download k8s.io/kubernetes@$K8S_VERSION"
fi
[ -f "$src" ] || die "$src: not in the module k8s.io/kubernetes@$K8S_VERSION"

key="$( (cat "${BASH_SOURCE[0]}" "$src"; gcc --version | head -1; echo "$REF $SOURCE_DATE_EPOCH") | sha256sum | cut -c1-16)"
archive="$OUT/pause-$key.oci.tar"
if [ -s "$archive" ] && [ -s "$archive.digest" ]; then
  log "cached ($archive)"
  printf 'pause %s %s\n' "$archive" "$(cat "$archive.digest")"
  exit 0
fi
[ -z "${IMAGES_CACHED_ONLY:-}" ] || die "no pause image for the current inputs in $OUT (key $key): run \`bash hack/images/pause.sh\` first"

mkdir -p "$OUT"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cacheroute-pause.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
BUILDAH=(buildah --root "$WORK/storage/root" --runroot "$WORK/storage/run" --storage-driver vfs)
started=$SECONDS
mkdir -p "$WORK/ctx"
gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION-cacheroute" -o "$WORK/ctx/pause" "$src"
strip "$WORK/ctx/pause"
touch -d "@$SOURCE_DATE_EPOCH" "$WORK/ctx/pause"
cat >"$WORK/ctx/Containerfile" <<'EOF'
FROM scratch
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
EOF
"${BUILDAH[@]}" bud --quiet --timestamp "$SOURCE_DATE_EPOCH" --layers=false --pull=never \
  -f "$WORK/ctx/Containerfile" -t "$REF" "$WORK/ctx" >/dev/null
"${BUILDAH[@]}" push --quiet --digestfile "$archive.digest.tmp" "$REF" "oci-archive:$archive.tmp:$REF"
mv "$archive.tmp" "$archive"
mv "$archive.digest.tmp" "$archive.digest"
find "$OUT" -maxdepth 1 -name "pause-*.oci.tar*" ! -name "pause-$key.oci.tar*" -delete
log "built $REF in $((SECONDS - started)) s, $(du -h "$archive" | cut -f1)"
printf 'pause %s %s\n' "$archive" "$(cat "$archive.digest")"
