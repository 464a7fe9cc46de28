#!/usr/bin/env bash
# Builds the real Kubernetes control plane for tests from Go modules (no prebuilt
# downloads are reachable here): kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl from k8s.io/kubernetes, etcd from its server module,
# KWOK, helm, the LeaderWorkerSet controller with its CRD, and versitygw (an S3 server, Apache-2.0,
# for the object-store model source's tests). Output goes to a
# cache outside the repo and is reused; each binary is rebuilt only when missing. Prints the bin directory on its last line.
#
#   bash hack/build-controlplane.sh          # the control plane the tests run
#   bash hack/build-controlplane.sh --node   # and a real node's kubelet, kube-proxy, CoreDNS and kube-router (make run REAL_NODE=1)
set -euo pipefail

WITH_NODE=0
for arg in "$@"; do
  case "$arg" in
  --node) WITH_NODE=1 ;;
  *) echo "usage: $0 [--node]" >&2; exit 2 ;;
  esac
done

K8S_VERSION="${K8S_VERSION:-v1.35.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
HELM_VERSION="${HELM_VERSION:-v3.19.5}"
# LeaderWorkerSet, the controller multi-node Deployments render to (ADR 0018).
LWS_VERSION="${LWS_VERSION:-v0.7.0}"
# A real node's cluster DNS and NetworkPolicy enforcement (--node only). kube-router: the
# version the module proxy here lists; only its network-policy controller runs.
COREDNS_VERSION="${COREDNS_VERSION:-v1.14.7}"
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"
# The object store the model fetcher's s3:// tests read (posix backend, SigV4 checked): not MinIO
# or Garage, which are AGPL. About 90 s cold on 2 cores.
VERSITYGW_VERSION="${VERSITYGW_VERSION:-v1.8.0}"
CACHE="${CACHEROUTE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cacheroute}"
BIN="$CACHE/k8s-$K8S_VERSION/bin"
SRC="$CACHE/src"
# Upstream builds these with cgo off; it also keeps the binaries static.
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
mkdir -p "$BIN" "$SRC"

log() { printf '[controlplane] %s\n' "$*" >&2; }
have() { [ -x "$BIN/$1" ]; }

build_kubernetes() {
  local need=() want=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  # A real node's binaries only on request: the tests' nodes are KWOK's, and the kubelet
  # adds minutes to a cold build.
  [ "$WITH_NODE" = 1 ] && want+=(kubelet kube-proxy)
  for b in "${want[@]}"; do have "$b" || need+=("$b"); done
  [ ${#need[@]} -eq 0 ] && { log "kubernetes $K8S_VERSION: cached"; return; }
  log "kubernetes $K8S_VERSION: building ${need[*]} (cold: tens of minutes on 2 cores)"
  local dir="$SRC/kubernetes-$K8S_VERSION" minor patch modfile
  minor=$(echo "$K8S_VERSION" | cut -d. -f2); patch=$(echo "$K8S_VERSION" | cut -d. -f3)
  mkdir -p "$dir"
  modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  {
    echo "module cacheroute.dev/controlplane-build"
    echo
    grep -m1 '^go ' "$modfile"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    # Every staging module is required at v0.0.0 and replaced by a path that only
    # exists in the kubernetes repo; map each to its published v0.<minor>.<patch>.
    sed -n 's#^\s*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/k8s\.io/[a-z0-9-]*$#\1#p' "$modfile" |
      sort -u | while read -r m; do echo "	$m => $m v0.$minor.$patch"; done
    echo ")"
  } > "$dir/go.mod"
  cat > "$dir/tools.go" <<GO
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
  local date ld=""
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  for b in "${need[@]}"; do
    log "  go build $b"
    (cd "$dir" && go build -trimpath -ldflags "-s -w $ld" -o "$BIN/$b" "k8s.io/kubernetes/cmd/$b")
  done
}

build_etcd() {
  have etcd && { log "etcd $ETCD_VERSION: cached"; return; }
  log "etcd $ETCD_VERSION: building"
  local dir="$SRC/etcd-$ETCD_VERSION" modfile
  mkdir -p "$dir"
  modfile=$(go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  # etcd's own go.mod replaces its sibling modules with local paths; pin them to the release instead.
  {
    echo "module cacheroute.dev/etcd-build"
    echo
    grep -m1 '^go ' "$modfile"
    echo
    echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
  } > "$dir/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > "$dir/tools.go"
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
}

build_installable() { # name module-path version
  have "$1" && { log "$1 $3: cached"; return; }
  log "$1 $3: building"
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "$2@$3"
}

build_kwok_stages() {
  local stages="$CACHE/k8s-$K8S_VERSION/kwok-stages.yaml" root
  [ -s "$stages" ] && return
  root="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  [ -d "$root" ] || go mod download "sigs.k8s.io/kwok@$KWOK_VERSION"
  # v0.8.0 ships no built-in stages when run out of cluster; these are the ones it ships as files.
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    for g in $root/$f; do echo "---"; cat "$g"; done
  done > "$stages.tmp"
  mv "$stages.tmp" "$stages"
}

# The LeaderWorkerSet manager, and its CRD beside it: the module's own go.mod pins the
# Kubernetes libraries it was released with, so it builds as a dependency of a wrapper
# module like etcd. The version is named: the proxy here refuses the module's version list.
build_lws() {
  local crd="$CACHE/k8s-$K8S_VERSION/lws-$LWS_VERSION-crd.yaml" root
  if have lws-manager && [ -s "$crd" ]; then log "lws $LWS_VERSION: cached"; return; fi
  log "lws $LWS_VERSION: building"
  local dir="$SRC/lws-$LWS_VERSION" modfile
  mkdir -p "$dir"
  modfile=$(go mod download -json "sigs.k8s.io/lws@$LWS_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  {
    echo "module cacheroute.dev/lws-build"
    echo
    grep -m1 '^go ' "$modfile"
    echo
    echo "require sigs.k8s.io/lws $LWS_VERSION"
  } > "$dir/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "sigs.k8s.io/lws/cmd"\n' > "$dir/tools.go"
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
  (cd "$dir" && go build -trimpath -ldflags "-s -w -X sigs.k8s.io/lws/pkg/version.GitVersion=$LWS_VERSION" \
    -o "$BIN/lws-manager" sigs.k8s.io/lws/cmd)
  root="$(go env GOMODCACHE)/sigs.k8s.io/lws@$LWS_VERSION"
  cp "$root/config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml" "$crd.tmp"
  chmod 0644 "$crd.tmp"
  mv "$crd.tmp" "$crd"
}

build_etcd
build_kubernetes
build_installable kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
build_kwok_stages
build_installable helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
build_lws
build_installable versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION"
if [ "$WITH_NODE" = 1 ]; then
  build_installable coredns github.com/coredns/coredns "$COREDNS_VERSION"
  build_installable kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router "$KUBE_ROUTER_VERSION"
fi
log "ready: $(cd "$BIN" && ls | tr '\n' ' ')"
echo "$BIN"
