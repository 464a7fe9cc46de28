#!/usr/bin/env bash
# Installs the system packages the test suites start themselves, from Debian,
# only when missing: redis-server (the gateway's shared result store, started
# per test by test/support/redis.ts), chromium (the status page, driven
# headless over the DevTools protocol by test/support/chromium.ts) and
# prometheus for its promtool (the alert rules' checks and unit tests, make
# test-monitoring; about 20 s cold, 19 MB), and the image tools: buildah and
# mmdebstrap (make images, hack/images/build.sh), containerd and runc (the image
# tests run the images under them, test/support/containerd.ts), at the versions
# these are pinned at (Debian bookworm's; about 30 s cold, 110 MB). With --real-node also
# what a real node needs (test/support/real-node.ts): the CNI plugins, conntrack and iptables
# (kube-proxy), ipset (kube-router's NetworkPolicies), gcc and a static libc (the pause image).
# Idempotent: a machine that has them all runs no apt command at all. Needs root (or sudo).
set -euo pipefail

REAL_NODE=0
for arg in "$@"; do
  case "$arg" in
  --real-node) REAL_NODE=1 ;;
  *) echo "usage: $0 [--real-node]" >&2; exit 2 ;;
  esac
done

log() { printf '[test-deps] %s\n' "$*" >&2; }

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
[ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# The image tools at pinned versions: a newer buildah or containerd may change the
# images' digests (hack/images/build.sh) or ctr's flags (test/support/containerd.ts).
command -v buildah >/dev/null 2>&1 || need+=(buildah=1.28.2+ds1-3+deb12u1+b3)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap=1.3.5-7)
command -v containerd >/dev/null 2>&1 || need+=(containerd=1.6.20~ds1-1+deb12u3)
command -v runc >/dev/null 2>&1 || need+=(runc=1.1.5+ds1-1+deb12u1)
if [ "$REAL_NODE" = 1 ]; then
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins=1.1.1+ds1-3+b5)
  command -v conntrack >/dev/null 2>&1 || need+=(conntrack=1:1.4.7-1+b2)
  command -v iptables >/dev/null 2>&1 || need+=(iptables=1.8.9-2)
  # kube-router's NetworkPolicy rules match ipsets.
  command -v ipset >/dev/null 2>&1 || need+=(ipset=7.17-1)
  # The pause image's compiler and static libc (hack/images/pause.sh): whatever the release
  # ships, the compiler's version is part of that image's cache key.
  command -v gcc >/dev/null 2>&1 || need+=(gcc)
  [ -f /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev)
fi

if [ ${#need[@]} -eq 0 ]; then
  log "redis-server, chromium, promtool, buildah, mmdebstrap, containerd and runc$([ "$REAL_NODE" = 1 ] && echo ", the CNI plugins, conntrack, iptables, ipset, gcc and libc6-dev"): present"
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { log "need root to install: ${need[*]}"; exit 1; }
  SUDO=(sudo)
fi

log "installing: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
# --no-install-recommends keeps chromium's fonts and extras and prometheus' node
# exporter out; the status page test reads the DOM, the screenshot only needs a
# sans-serif font.
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" fonts-dejavu-core >/dev/null
# Debian starts redis-server and prometheus (and, under systemd, containerd) as services on install; the tests start their own,
# and a Prometheus on :9090 would take the port `make run` bridges the gateway's admin port to.
# Without systemd (and without a policy-rc.d that refuses starts), the init script started them.
for svc in redis-server prometheus containerd; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    "${SUDO[@]}" systemctl disable --now "$svc" >/dev/null 2>&1 || true
  elif [ -x "/etc/init.d/$svc" ] && "${SUDO[@]}" "/etc/init.d/$svc" status >/dev/null 2>&1; then
    "${SUDO[@]}" "/etc/init.d/$svc" stop >/dev/null 2>&1 || true
  fi
done
log "installed: ${need[*]}"
