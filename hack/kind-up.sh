#!/usr/bin/env bash
# cacheroute on kind, for users with Docker (CI here has no Docker and cannot run it).
#
#   bash hack/kind-up.sh          # create (or reuse) the cluster, build, load, install
#   bash hack/kind-up.sh --down   # delete the cluster
#
# 1. A kind cluster whose kube-apiserver enables ExtendedResourceToleration: a pod
#    that requests nvidia.com/gpu tolerates the GPU nodes' taint by itself (as on GKE
#    and in the local control plane of `make run`).
# 2. Fake GPU nodes: KWOK runs in the cluster and plays FAKE_GPU_NODES nodes with
#    8 nvidia.com/gpu each, tainted nvidia.com/gpu=present:NoSchedule. Pods scheduled
#    there are reported Running but run nothing, so an SGLang Deployment gets pods but
#    its endpoints never pass identity verification, and the gateway, failing closed,
#    routes nothing to them. FAKE_GPU_NODES=0 skips KWOK, for a cluster with a real GPU
#    node and the NVIDIA device plugin.
# 3. The operator and gateway images, built by the script `make images` runs
#    (hack/images/build.sh, from operator/Containerfile and gateway/Containerfile) with
#    Docker, and loaded into the nodes with `kind load`.
# 4. `helm upgrade --install` of charts/cacheroute with those images, waiting for the
#    rollout; the image values are also written to $STATE_DIR/images.values.yaml, which
#    `make test-e2e-kind` passes to test/e2e/chart.test.ts.
#
# Environment: KIND_CLUSTER (cacheroute), FAKE_GPU_NODES (2), KWOK_VERSION (v0.8.0),
# KIND_NODE_IMAGE (kind's default), IMAGE_TAG (dev-<time>), RELEASE (cacheroute),
# NAMESPACE (cacheroute-system), HELM_ARGS (more helm flags, e.g. "--set gateway.replicas=2").
# Needs docker, kind, mmdebstrap and npm (hack/images/build.sh makes the images' base from
# Debian packages), kubectl and helm on PATH (or kubectl and helm from `make controlplane`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER="${KIND_CLUSTER:-cacheroute}"
FAKE_GPU_NODES="${FAKE_GPU_NODES:-2}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
IMAGE_TAG="${IMAGE_TAG:-dev-$(date +%Y%m%d%H%M%S)}"
RELEASE="${RELEASE:-cacheroute}"
NAMESPACE="${NAMESPACE:-cacheroute-system}"
CACHE="${CACHEROUTE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cacheroute}"
STATE_DIR="${STATE_DIR:-$CACHE/kind-$CLUSTER}"
KUBECONFIG_FILE="$STATE_DIR/kubeconfig"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'kind-up: %s\n' "$*" >&2; exit 1; }

# kubectl and helm: the machine's, else the ones `make controlplane` built.
BUILT_BIN="${CACHEROUTE_BIN:-$CACHE/k8s-${K8S_VERSION:-v1.35.4}/bin}"
tool() {
  if command -v "$1" >/dev/null 2>&1; then command -v "$1"
  elif [[ -x "$BUILT_BIN/$1" ]]; then echo "$BUILT_BIN/$1"
  else die "$1 not found: install it, or run \`make controlplane\` (builds kubectl and helm)"; fi
}

if [[ "${1:-}" == "--down" ]]; then
  command -v kind >/dev/null || die "kind not found (https://kind.sigs.k8s.io)"
  kind delete cluster --name "$CLUSTER"
  rm -rf "$STATE_DIR"
  exit 0
fi
[[ $# -eq 0 ]] || die "usage: $0 [--down]"

command -v docker >/dev/null || die "docker not found: the kind path needs Docker (without it: make run)"
command -v kind >/dev/null || die "kind not found (https://kind.sigs.k8s.io/docs/user/quick-start/#installation)"
command -v mmdebstrap >/dev/null || die "mmdebstrap not found: the images' base is made from Debian packages (apt-get install mmdebstrap)"
docker info >/dev/null 2>&1 || die "docker is installed but the daemon does not answer (docker info)"
KUBECTL="$(tool kubectl)"
HELM="$(tool helm)"
mkdir -p "$STATE_DIR"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# ---- 1. cluster -------------------------------------------------------------------
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "reusing kind cluster $CLUSTER"
else
  log "creating kind cluster $CLUSTER"
  kind create cluster --name "$CLUSTER" ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --wait 120s --config - <<'EOF'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
    kubeadmConfigPatches:
      - |
        kind: ClusterConfiguration
        apiServer:
          extraArgs:
            enable-admission-plugins: NodeRestriction,ExtendedResourceToleration
EOF
fi
kind get kubeconfig --name "$CLUSTER" >"$KUBECONFIG_FILE"

# ---- 2. fake GPU nodes ------------------------------------------------------------
if [[ "$FAKE_GPU_NODES" -gt 0 ]]; then
  log "KWOK $KWOK_VERSION in the cluster, $FAKE_GPU_NODES fake GPU node(s)"
  k apply --server-side -f "https://github.com/kubernetes-sigs/kwok/releases/download/$KWOK_VERSION/kwok.yaml"
  k apply --server-side -f "https://github.com/kubernetes-sigs/kwok/releases/download/$KWOK_VERSION/stage-fast.yaml"
  k -n kube-system rollout status deployment/kwok-controller --timeout=180s
  for ((i = 0; i < FAKE_GPU_NODES; i++)); do
    # Like the local plane's gpu-node-N (test/support/components.ts).
    k apply --server-side -f - <<EOF
apiVersion: v1
kind: Node
metadata:
  name: gpu-node-$i
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: gpu-node-$i
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
    nvidia.com/gpu.present: "true"
spec:
  taints:
    - key: nvidia.com/gpu
      value: present
      effect: NoSchedule
status:
  allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
  capacity: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
EOF
  done
  k wait --for=condition=Ready --timeout=120s node -l type=kwok
fi

# ---- 3. images --------------------------------------------------------------------
log "building cacheroute/operator:$IMAGE_TAG and cacheroute/gateway:$IMAGE_TAG (hack/images/build.sh)"
IMAGE_ENGINE=docker IMAGE_REPO=cacheroute IMAGE_TAG="$IMAGE_TAG" bash "$ROOT/hack/images/build.sh" operator gateway
for component in operator gateway; do
  kind load docker-image --name "$CLUSTER" "cacheroute/$component:$IMAGE_TAG"
done
cat >"$STATE_DIR/images.values.yaml" <<EOF
# Written by hack/kind-up.sh: the images it built and loaded into kind.
operator:
  image: {repository: cacheroute/operator, tag: "$IMAGE_TAG", pullPolicy: Never}
gateway:
  image: {repository: cacheroute/gateway, tag: "$IMAGE_TAG", pullPolicy: Never}
EOF

# ---- 4. the chart -----------------------------------------------------------------
log "helm upgrade --install $RELEASE ($NAMESPACE)"
# Helm installs CRDs only on the first install; apply them first so reruns update them.
k apply --server-side -f "$ROOT/charts/cacheroute/crds/"
"$HELM" --kubeconfig "$KUBECONFIG_FILE" upgrade --install "$RELEASE" "$ROOT/charts/cacheroute" \
  --namespace "$NAMESPACE" --create-namespace \
  --values "$STATE_DIR/images.values.yaml" \
  ${HELM_ARGS:-} \
  --wait --timeout 5m

# The chart's object prefix (cacheroute.fullname): the release name when it contains the chart's.
if [[ "$RELEASE" == *cacheroute* ]]; then FULLNAME="$RELEASE"; else FULLNAME="$RELEASE-cacheroute"; fi
cat <<EOF

cacheroute is up on kind cluster "$CLUSTER".

  export KUBECONFIG=$KUBECONFIG_FILE
  kubectl apply -f examples/deployment-dense.yaml -f examples/cachepolicy.yaml
  kubectl get cacheroute
  kubectl -n $NAMESPACE port-forward svc/$FULLNAME-gateway 8080:80          # the API: http://localhost:8080/v1
  kubectl -n $NAMESPACE port-forward svc/$FULLNAME-gateway-admin 9090:9090  # then http://localhost:9090/status

  make test-e2e-kind            # the chart's end-to-end test against this cluster
  bash hack/kind-up.sh --down   # delete the cluster
EOF
