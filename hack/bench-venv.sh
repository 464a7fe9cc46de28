#!/usr/bin/env bash
# Create (or reuse) the virtualenv with SGLang's router and smg for `make bench`.
#
#   bash hack/bench-venv.sh            # prints the venv directory on stdout
#
# Idempotent: lives outside the repo in $CACHEROUTE_CACHE/bench-venv
# (default ~/.cache/cacheroute/bench-venv); each package is installed only when
# its marker is missing. A package that cannot be installed is recorded in
# <venv>/failed-<name>.txt (the pip output) and the script goes on: the bench
# reports that router as skipped with the reason. Exit status is non-zero only
# when the venv itself cannot be created.
set -uo pipefail

CACHE="${CACHEROUTE_CACHE:-$HOME/.cache/cacheroute}"
VENV="${BENCH_VENV:-$CACHE/bench-venv}"
PY="${PYTHON:-python3}"
# Versions PyPI serves today; override with SGLANG_ROUTER_SPEC / SMG_SPEC.
SGLANG_ROUTER_SPEC="${SGLANG_ROUTER_SPEC:-sglang-router==0.3.2}"
SMG_SPEC="${SMG_SPEC:-smg==1.13.0}"

log() { echo "bench-venv: $*" >&2; }

mkdir -p "$CACHE"
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV"
  if ! "$PY" -m venv "$VENV" >&2; then
    log "python3 -m venv failed"
    exit 1
  fi
  timeout 300 "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2 || log "pip upgrade failed (continuing)"
fi

install_one() {
  local name="$1" spec="$2"
  local marker="$VENV/.installed-$name" failed="$VENV/failed-$name.txt"
  if [[ -f "$marker" && "$(cat "$marker")" == "$spec" ]]; then
    return 0
  fi
  log "installing $spec"
  if timeout 900 "$VENV/bin/python" -m pip install --disable-pip-version-check "$spec" >"$failed.tmp" 2>&1; then
    echo "$spec" >"$marker"
    rm -f "$failed" "$failed.tmp"
  else
    mv "$failed.tmp" "$failed"
    rm -f "$marker"
    log "$spec failed to install; see $failed"
  fi
}

install_one sglang-router "$SGLANG_ROUTER_SPEC"
install_one smg "$SMG_SPEC"
echo "$VENV"
