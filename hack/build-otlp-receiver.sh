#!/usr/bin/env bash
# Builds the tracing tests' OTLP receiver (hack/otlp-receiver: a minimal OpenTelemetry
# Collector, the collector's own OTLP receiver and a JSON-lines file exporter) from its Go
# modules, pinned by hack/otlp-receiver/go.mod and go.sum. Output goes to a cache outside
# the repo, keyed by the sources' hash, and is reused; about 4 minutes cold on 2 cores
# (Jaeger v2 all-in-one, tried first, took 15: its storage backends). Needs Go >= 1.26
# (the collector's modules say so). Prints the binary's path on its last line.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/hack/otlp-receiver"
CACHE="${CACHEROUTE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cacheroute}"
HASH=$(cat "$SRC/main.go" "$SRC/go.mod" "$SRC/go.sum" | sha256sum | cut -c1-12)
BIN="$CACHE/otlp-receiver-$HASH/bin"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local

log() { printf '[otlp-receiver] %s\n' "$*" >&2; }

if [ -x "$BIN/otlp-receiver" ]; then
  log "cached ($HASH)"
  echo "$BIN/otlp-receiver"
  exit 0
fi
log "building $HASH (cold: about 4 minutes on 2 cores)"
mkdir -p "$BIN"
(cd "$SRC" && go build -trimpath -ldflags "-s -w" -o "$BIN/otlp-receiver.tmp" .)
mv "$BIN/otlp-receiver.tmp" "$BIN/otlp-receiver"
log "ready: $BIN/otlp-receiver"
echo "$BIN/otlp-receiver"
