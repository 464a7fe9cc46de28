#!/usr/bin/env bash
# Runs CMD... inside a fresh private network namespace (and PID namespace), so that
# the test control plane, KWOK pods and simulators can use private pod IPs without
# any traffic leaving the machine, and nothing outlives the command:
#   - lo is up; 10.244.0.0/16 (the pod CIDR) is routed locally, so every pod IP
#     can be bound and connected to; 10.200.0.1/32 is on lo for kube-apiserver to
#     advertise (it must not be a loopback address).
#   - CMD runs under PID 1 of a new PID namespace: when CMD exits, what it left
#     behind gets SIGTERM and up to 5s, then the kernel kills every process left in
#     there (also when this script is killed, even with SIGKILL), and the network
#     namespace goes with the last of them.
#   - SIGTERM/SIGINT/SIGHUP to this script reach CMD as SIGTERM.
#   - TMPDIR is a fresh directory, removed afterwards (kept when
#     CACHEROUTE_KEEP_CONTROLPLANE_DIR=1).
#   - Exports CACHEROUTE_NETNS=1, CACHEROUTE_HOST_IP=10.200.0.1,
#     CACHEROUTE_POD_CIDR=10.244.0.0/16 and CACHEROUTE_NETNS_PID, this script's PID,
#     which is in the namespace: from another shell,
#     `nsenter --net=/proc/$CACHEROUTE_NETNS_PID/ns/net kubectl ...` reaches it.
# Exit code: CMD's (128+N when it dies of signal N); 125 when the namespace cannot be
# made. Needs root (CAP_SYS_ADMIN), util-linux (unshare, setpriv) and iproute2.
# Already inside one: runs CMD directly.
set -euo pipefail

HOST_IP=10.200.0.1
POD_CIDR=10.244.0.0/16

die() { printf 'in-netns: %s\n' "$*" >&2; exit 125; }

# Waits for child pid $1 and returns its exit status. A trapped signal interrupts
# `wait`; bash remembers the status of a reaped child, so the last wait returns it.
wait_for() {
  while kill -0 "$1" 2>/dev/null; do wait "$1" || true; done
  wait "$1"
}

case "${1:-}" in
--netns) # stage 1: in the new network namespace, still in the host PID namespace
  shift
  ip link set lo up
  ip addr add "$HOST_IP/32" dev lo
  ip route add local "$POD_CIDR" dev lo
  export CACHEROUTE_NETNS=1 CACHEROUTE_HOST_IP="$HOST_IP" CACHEROUTE_POD_CIDR="$POD_CIDR" CACHEROUTE_NETNS_PID=$$
  # A private TMPDIR, removed below: a process killed before it could clean up (vitest
  # SIGKILLs busy workers when its main process dies) leaves nothing in /tmp.
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/cacheroute-netns.XXXXXX")
  export TMPDIR="$tmp"
  # unshare blocks SIGINT/SIGTERM while it waits, so signals are forwarded past it to
  # PID 1 inside; --pdeathsig ties unshare to this shell, --kill-child ties PID 1 (and
  # so the whole PID namespace) to unshare.
  setpriv --pdeathsig KILL -- unshare --pid --fork --kill-child --mount-proc bash "$0" --inside "$@" &
  u=$!
  forward() { local c; c=$(cat "/proc/$u/task/$u/children" 2>/dev/null || true); [ -n "$c" ] && kill -TERM $c 2>/dev/null || true; }
  trap forward INT TERM HUP
  wait_for "$u" && rc=0 || rc=$?
  if [ "${CACHEROUTE_KEEP_CONTROLPLANE_DIR:-}" = 1 ]; then
    printf 'in-netns: kept %s\n' "$tmp" >&2
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
  ;;
--inside) # stage 2: PID 1 of the new PID namespace
  shift
  # PID 1 reaps orphans and receives only signals it has handlers for, hence the trap.
  # A background job of a non-interactive shell ignores SIGINT, so forward SIGTERM.
  "$@" &
  child=$!
  trap 'kill -TERM "$child" 2>/dev/null || true' INT TERM HUP
  wait_for "$child" && rc=0 || rc=$?
  # Processes CMD left behind (say, a test worker still removing its temp dir) get
  # SIGTERM and up to 5s; the kernel SIGKILLs whatever remains when PID 1 exits.
  if kill -TERM -1 2>/dev/null; then
    for _ in $(seq 50); do
      procs=(/proc/[0-9]*) # this shell only, once the rest are gone (and reaped)
      [ "${#procs[@]}" -le 1 ] && break
      sleep 0.1
    done
  fi
  exit "$rc"
  ;;
esac

[ $# -gt 0 ] || die "usage: hack/in-netns.sh CMD [ARGS...]"
if [ "${CACHEROUTE_NETNS:-}" = 1 ]; then exec "$@"; fi

[ "$(id -u)" = 0 ] || die "must run as root: it creates network and PID namespaces with unshare (try: sudo $0 $*)"
for c in unshare setpriv ip; do command -v "$c" >/dev/null || die "needs $c (util-linux, iproute2)"; done
unshare --net --pid --fork --mount-proc true 2>/dev/null ||
  die "unshare --net --pid --fork --mount-proc failed: needs CAP_SYS_ADMIN and user-visible namespaces (in a container: --privileged or --cap-add SYS_ADMIN)"

# unshare --net without --fork moves this very process into the namespace, so $$ stays
# the same through both execs and names the namespace from outside.
exec unshare --net bash "$0" --netns "$@"
