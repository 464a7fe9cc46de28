#!/usr/bin/env bash
# Regenerates gateway/src/epp/protos.binpb, the protobuf descriptors of Envoy's ext_proc v3
# service and gRPC's health service (with every file they import), from the descriptors
# compiled into the Go modules pinned by hack/ext-proc-protos/go.mod and go.sum
# (github.com/envoyproxy/go-control-plane/envoy v1.40.0: the API Envoy 1.40 is built from).
# Go modules carry no .proto files; their compiled descriptors are the same content.
#   bash hack/ext-proc-protos.sh          # rewrite the committed file
#   bash hack/ext-proc-protos.sh --check  # fail when it differs from what the modules give
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/gateway/src/epp/protos.binpb"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
(cd "$ROOT/hack/ext-proc-protos" && go run . "$TMP/protos.binpb")
if [ "${1:-}" = "--check" ]; then
  cmp -s "$TMP/protos.binpb" "$OUT" ||
    { echo "gateway/src/epp/protos.binpb differs from the pinned modules: run make ext-proc-protos" >&2; exit 1; }
  exit 0
fi
cp "$TMP/protos.binpb" "$OUT"
