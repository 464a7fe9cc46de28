#!/usr/bin/env bash
# Installs the system packages the test suites start themselves, from Debian,
# only when missing: redis-server (the gateway's shared result store, started
# per test by test/support/redis.ts), chromium (the status page, driven
# headless over the DevTools protocol by test/support/chromium.ts) and
# prometheus for its promtool (the alert rules' checks and unit tests, make
# test-monitoring; about 20 s cold, 19 MB). Idempotent: a machine that has them
# all runs no apt command at all. Needs root (or sudo).
set -euo pipefail

log() { printf '[test-deps] %s\n' "$*" >&2; }

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
[ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)

if [ ${#need[@]} -eq 0 ]; then
  log "redis-server, chromium and promtool: present"
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
# Debian starts redis-server and prometheus as services on install; the tests start their own,
# and a Prometheus on :9090 would take the port `make run` bridges the gateway's admin port to.
# Without systemd (and without a policy-rc.d that refuses starts), the init script started them.
for svc in redis-server prometheus; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    "${SUDO[@]}" systemctl disable --now "$svc" >/dev/null 2>&1 || true
  elif [ -x "/etc/init.d/$svc" ] && "${SUDO[@]}" "/etc/init.d/$svc" status >/dev/null 2>&1; then
    "${SUDO[@]}" "/etc/init.d/$svc" stop >/dev/null 2>&1 || true
  fi
done
log "installed: ${need[*]}"
