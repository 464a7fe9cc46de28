#!/usr/bin/env bash
# Installs the system packages the test suites start themselves, from Debian,
# only when missing: redis-server (the gateway's shared result store, started
# per test by test/support/redis.ts) and chromium (the status page, driven
# headless over the DevTools protocol by test/support/chromium.ts). Idempotent:
# a machine that has both runs no apt command at all. Needs root (or sudo).
set -euo pipefail

log() { printf '[test-deps] %s\n' "$*" >&2; }

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
[ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1 || need+=(chromium)

if [ ${#need[@]} -eq 0 ]; then
  log "redis-server and chromium: present"
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
# --no-install-recommends keeps chromium's fonts and extras out; the status
# page test reads the DOM, the screenshot only needs a sans-serif font.
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" fonts-dejavu-core >/dev/null
# Debian starts redis-server as a service on install; the tests start their own.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
  "${SUDO[@]}" systemctl disable --now redis-server >/dev/null 2>&1 || true
fi
log "installed: ${need[*]}"
