#!/usr/bin/env bash
# The Gateway API Inference Extension's CRDs (InferencePool, and the InferencePoolImport beside it),
# pinned: copied byte for byte from the release's Go module (config/crd/bases) into
# charts/cacheroute/gie-crds/, where the chart (inferencePool.installCRDs), `make run` and the test
# control plane read them. Never edited by hand: bump GIE_VERSION and run `make gie-crds`.
#
#   bash hack/gie-crds.sh           # write them
#   bash hack/gie-crds.sh --check   # fail when the committed copies differ from the module's
set -euo pipefail

GIE_VERSION="${GIE_VERSION:-v1.6.2}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/charts/cacheroute/gie-crds"
CHECK=0
for arg in "$@"; do
  case "$arg" in
  --check) CHECK=1 ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
  esac
done

export GOFLAGS=-mod=mod GOTOOLCHAIN=local
dir=$(cd /tmp && go mod download -json "sigs.k8s.io/gateway-api-inference-extension@$GIE_VERSION" |
  sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
src="$dir/config/crd/bases"
[ -d "$src" ] || { echo "no $src in the module: is $GIE_VERSION a GIE release?" >&2; exit 1; }

if [ "$CHECK" = 1 ]; then
  if ! diff -r "$src" "$OUT" >/dev/null; then
    echo "charts/cacheroute/gie-crds differs from GIE $GIE_VERSION's config/crd/bases: run \`make gie-crds\`" >&2
    exit 1
  fi
  echo "GIE $GIE_VERSION CRDs: up to date"
  exit 0
fi
rm -f "$OUT"/*.yaml
mkdir -p "$OUT"
for f in "$src"/*.yaml; do install -m 0644 "$f" "$OUT/$(basename "$f")"; done
echo "GIE $GIE_VERSION CRDs: $(ls "$OUT" | tr '\n' ' ')"
