#!/usr/bin/env bash
# Starts (up) or stops (down) the two file systems Concerto is compared
# with on this machine, on the same disk as Concerto's servers, each with
# four data servers on loopback, mounted with their own FUSE clients:
#   GlusterFS (a distributed volume of 4 bricks)  at $ROOT/mnt/glusterfs
#   MooseFS   (1 master, 4 chunkservers, goal 1)  at $ROOT/mnt/moosefs
# Usage: benches/peers/peers.sh up|down [ROOT]   (ROOT: /tmp/concerto-peers)
# Installs Debian's glusterfs-server and moosefs packages if missing
# (needs root, as the FUSE mounts do).
set -euo pipefail
what=${1:?usage: peers.sh up|down [ROOT]}
ROOT=${2:-/tmp/concerto-peers}
HOST=$(hostname)
# MooseFS's chunkservers refuse a loopback address for their master: the
# machine's own address it is (still this machine, as for the others).
IP=$(hostname -I | awk '{print $1}')

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
  pgrep -x glusterd >/dev/null || glusterd
  wait_for 30 "glusterd answering" gluster volume list
  if ! gluster volume info cv >/dev/null 2>&1; then
    local bricks=()
    for i in 1 2 3 4; do mkdir -p "$ROOT/glusterfs/brick$i"; bricks+=("$HOST:$ROOT/glusterfs/brick$i"); done
    gluster --mode=script volume create cv transport tcp "${bricks[@]}" force
  fi
  gluster volume info cv | grep -q 'Status: Started' || gluster --mode=script volume start cv
  mountpoint -q "$ROOT/mnt/glusterfs" || mount -t glusterfs "$HOST:/cv" "$ROOT/mnt/glusterfs"
  wait_for 30 "the GlusterFS mount" mountpoint -q "$ROOT/mnt/glusterfs"
}

gluster_down() {
  mountpoint -q "$ROOT/mnt/glusterfs" 2>/dev/null && umount -l "$ROOT/mnt/glusterfs"
  if pgrep -x glusterd >/dev/null; then
    gluster --mode=script volume stop cv force >/dev/null 2>&1 || true
    gluster --mode=script volume delete cv >/dev/null 2>&1 || true
  fi
  pkill -x glusterfsd || true; pkill -x glusterfs || true; pkill -x glusterd || true
  rm -rf "$ROOT/glusterfs"
}

moose_up() {
  local m="$ROOT/moosefs"
  mkdir -p "$m/master" "$ROOT/mnt/moosefs"
  [ -f "$m/master/metadata.mfs" ] || cp /var/lib/mfs/metadata.mfs.empty "$m/master/metadata.mfs"
  printf '*\t/\trw,alldirs,admin,maproot=0:0\n' > "$m/exports.cfg"
  cat > "$m/master.cfg" <<CFG
WORKING_USER = root
DATA_PATH = $m/master
EXPORTS_FILENAME = $m/exports.cfg
MATOML_LISTEN_HOST = $IP
MATOCS_LISTEN_HOST = $IP
MATOCL_LISTEN_HOST = $IP
CFG
  mfsmaster -c "$m/master.cfg" start
  for i in 1 2 3 4; do
    mkdir -p "$m/cs$i/data"
    echo "$m/cs$i/data" > "$m/cs$i/hdd.cfg"
    cat > "$m/cs$i/cs.cfg" <<CFG
WORKING_USER = root
DATA_PATH = $m/cs$i
HDD_CONF_FILENAME = $m/cs$i/hdd.cfg
MASTER_HOST = $IP
BIND_HOST = $IP
CSSERV_LISTEN_HOST = $IP
CSSERV_LISTEN_PORT = $((9430 + i))
HDD_TEST_FREQ = 0
CFG
    mfschunkserver -c "$m/cs$i/cs.cfg" start
  done
  mountpoint -q "$ROOT/mnt/moosefs" || mfsmount -H "$IP" "$ROOT/mnt/moosefs"
  wait_for 30 "the MooseFS mount" mountpoint -q "$ROOT/mnt/moosefs"
  # One copy of each chunk, as Concerto and the GlusterFS volume keep.
  mfssetgoal -r 1 "$ROOT/mnt/moosefs" >/dev/null
}

moose_down() {
  local m="$ROOT/moosefs"
  mountpoint -q "$ROOT/mnt/moosefs" 2>/dev/null && umount -l "$ROOT/mnt/moosefs"
  for i in 1 2 3 4; do [ -f "$m/cs$i/cs.cfg" ] && mfschunkserver -c "$m/cs$i/cs.cfg" stop >/dev/null 2>&1 || true; done
  [ -f "$m/master.cfg" ] && mfsmaster -c "$m/master.cfg" stop >/dev/null 2>&1 || true
  rm -rf "$m"
}

case $what in
  up) install; gluster_up; moose_up; echo "peers.sh: GlusterFS at $ROOT/mnt/glusterfs, MooseFS at $ROOT/mnt/moosefs" ;;
  down) gluster_down; moose_down; rm -rf "$ROOT" ;;
  *) echo "usage: peers.sh up|down [ROOT]" >&2; exit 2 ;;
esac
