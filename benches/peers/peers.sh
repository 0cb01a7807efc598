#!/usr/bin/env bash
# Starts (up) or stops (down) the two file systems Concerto is compared
# with on this machine, on the same disk as Concerto's servers, each with
# four data servers, mounted with their own FUSE clients:
#   GlusterFS (a distributed volume of 4 bricks)  at $ROOT/mnt/glusterfs
#   MooseFS   (1 master, 4 chunkservers, goal 1)  at $ROOT/mnt/moosefs
# Usage: benches/peers/peers.sh up|down [ROOT]   (ROOT: /tmp/concerto-peers)
# Installs Debian's glusterfs-server and moosefs packages if missing
# (needs root, as the FUSE mounts do).
#
# Fairly and safely:
# - at Concerto's scheduling priority: MooseFS's daemons and client renice
#   themselves to -19 unless told otherwise (NICE_LEVEL, mfsnice);
# - reachable from this machine only: MooseFS runs in a network namespace
#   of its own (its chunkservers refuse a loopback address for their
#   master, so it gets a private one there; its client joins the namespace
#   for the network only, so the mount is the host's); GlusterFS refuses
#   bricks on loopback, so its volume admits this host's address only
#   (auth.allow);
# - stopped by what this script started: its own volume name, its own
#   glusterd (refused if another is running: one machine has one), the
#   daemons its own configuration files name.
set -euo pipefail
what=${1:?usage: peers.sh up|down [ROOT]}
ROOT=${2:-/tmp/concerto-peers}
HOST=$(hostname)
IP=$(hostname -I | awk '{print $1}')
VOLUME=concerto-peers
NETNS=concerto-peers-moosefs
MOOSE_IP=10.254.77.1

install() {
  local need=()
  command -v glusterd >/dev/null || need+=(glusterfs-server glusterfs-client)
  command -v mfsmaster >/dev/null || need+=(moosefs-master moosefs-chunkserver moosefs-client)
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
  fi
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: poll until COMMAND succeeds
  local until=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $until ] || { echo "peers.sh: $what did not happen within the time allowed" >&2; return 1; }
    sleep 0.2
  done
}

gluster_up() {
  mkdir -p "$ROOT/glusterfs" "$ROOT/mnt/glusterfs"
  if [ ! -f "$ROOT/glusterd.pid" ] && pgrep -x glusterd >/dev/null; then
    echo "peers.sh: a glusterd this script did not start is running; stop it first (one machine runs one)" >&2
    return 1
  fi
  [ -f "$ROOT/glusterd.pid" ] || glusterd -p "$ROOT/glusterd.pid"
  wait_for 30 "glusterd answering" gluster volume list
  if ! gluster volume info "$VOLUME" >/dev/null 2>&1; then
    local bricks=()
    for i in 1 2 3 4; do mkdir -p "$ROOT/glusterfs/brick$i"; bricks+=("$HOST:$ROOT/glusterfs/brick$i"); done
    gluster --mode=script volume create "$VOLUME" transport tcp "${bricks[@]}" force
    gluster --mode=script volume set "$VOLUME" auth.allow "$IP"
  fi
  gluster volume info "$VOLUME" | grep -q 'Status: Started' || gluster --mode=script volume start "$VOLUME"
  mountpoint -q "$ROOT/mnt/glusterfs" || mount -t glusterfs "$HOST:/$VOLUME" "$ROOT/mnt/glusterfs"
  wait_for 30 "the GlusterFS mount" mountpoint -q "$ROOT/mnt/glusterfs"
}

gluster_down() {
  mountpoint -q "$ROOT/mnt/glusterfs" 2>/dev/null && umount -l "$ROOT/mnt/glusterfs"
  [ -f "$ROOT/glusterd.pid" ] || return 0
  gluster --mode=script volume stop "$VOLUME" force >/dev/null 2>&1 || true
  gluster --mode=script volume delete "$VOLUME" >/dev/null 2>&1 || true
  local pid
  pid=$(cat "$ROOT/glusterd.pid")
  kill "$pid" 2>/dev/null || true
  wait_for 30 "glusterd ($pid) stopping" sh -c "! kill -0 $pid"
  rm -f "$ROOT/glusterd.pid"
  rm -rf "$ROOT/glusterfs"
}

moose_up() {
  local m="$ROOT/moosefs" in_ns=(ip netns exec "$NETNS")
  mkdir -p "$m/master" "$ROOT/mnt/moosefs"
  if ! ip netns list | grep -qw "$NETNS"; then
    ip netns add "$NETNS"
    ip -n "$NETNS" link set lo up
    ip -n "$NETNS" addr add "$MOOSE_IP/32" dev lo
  fi
  [ -f "$m/master/metadata.mfs" ] || cp /var/lib/mfs/metadata.mfs.empty "$m/master/metadata.mfs"
  printf '%s/32\t/\trw,alldirs,admin,maproot=0:0\n' "$MOOSE_IP" > "$m/exports.cfg"
  cat > "$m/master.cfg" <<CFG
WORKING_USER = root
NICE_LEVEL = 0
DATA_PATH = $m/master
EXPORTS_FILENAME = $m/exports.cfg
MATOML_LISTEN_HOST = $MOOSE_IP
MATOCS_LISTEN_HOST = $MOOSE_IP
MATOCL_LISTEN_HOST = $MOOSE_IP
CFG
  "${in_ns[@]}" mfsmaster -c "$m/master.cfg" start
  for i in 1 2 3 4; do
    mkdir -p "$m/cs$i/data"
    echo "$m/cs$i/data" > "$m/cs$i/hdd.cfg"
    cat > "$m/cs$i/cs.cfg" <<CFG
WORKING_USER = root
NICE_LEVEL = 0
DATA_PATH = $m/cs$i
HDD_CONF_FILENAME = $m/cs$i/hdd.cfg
MASTER_HOST = $MOOSE_IP
BIND_HOST = $MOOSE_IP
CSSERV_LISTEN_HOST = $MOOSE_IP
CSSERV_LISTEN_PORT = $((9430 + i))
HDD_TEST_FREQ = 0
CFG
    "${in_ns[@]}" mfschunkserver -c "$m/cs$i/cs.cfg" start
  done
  # The client joins the namespace's network only: its mount is the host's.
  mountpoint -q "$ROOT/mnt/moosefs" ||
    nsenter --net="/run/netns/$NETNS" mfsmount -H "$MOOSE_IP" -o mfsnice=0 "$ROOT/mnt/moosefs"
  wait_for 30 "the MooseFS mount" mountpoint -q "$ROOT/mnt/moosefs"
  # One copy of each chunk, as Concerto and the GlusterFS volume keep. The
  # tool asks the master, reachable from the namespace's network only.
  nsenter --net="/run/netns/$NETNS" mfssetgoal -r 1 "$ROOT/mnt/moosefs" >/dev/null
}

moose_down() {
  local m="$ROOT/moosefs" in_ns=(ip netns exec "$NETNS")
  mountpoint -q "$ROOT/mnt/moosefs" 2>/dev/null && umount -l "$ROOT/mnt/moosefs"
  if ip netns list | grep -qw "$NETNS"; then
    for i in 1 2 3 4; do
      [ -f "$m/cs$i/cs.cfg" ] && "${in_ns[@]}" mfschunkserver -c "$m/cs$i/cs.cfg" stop >/dev/null 2>&1 || true
    done
    [ -f "$m/master.cfg" ] && "${in_ns[@]}" mfsmaster -c "$m/master.cfg" stop >/dev/null 2>&1 || true
    ip netns del "$NETNS"
  fi
  rm -rf "$m"
}

case $what in
  up) install; gluster_up; moose_up; echo "peers.sh: GlusterFS at $ROOT/mnt/glusterfs, MooseFS at $ROOT/mnt/moosefs" ;;
  down) gluster_down; moose_down; rm -rf "$ROOT" ;;
  *) echo "usage: peers.sh up|down [ROOT]" >&2; exit 2 ;;
esac
