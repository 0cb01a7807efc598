#!/usr/bin/env bash
# The real file system beside the local one, GlusterFS and MooseFS, in one
# run (docs/performance.md): starts the two peers on this machine
# (peers.sh), runs `concerto bench fs` against all of them, and stops the
# peers again, also when the benchmark fails. Where the peers cannot be had
# (not root, no Debian packages), Concerto is measured beside the local
# file system only, and this says so.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=${CONCERTO_PEERS_ROOT:-/tmp/concerto-peers}
compare=()
if [ "$(id -u)" = 0 ] && bash benches/peers/peers.sh up "$ROOT"; then
    trap 'bash benches/peers/peers.sh down "$ROOT"' EXIT
    compare=(--compare "glusterfs=$ROOT/mnt/glusterfs" --compare "moosefs=$ROOT/mnt/moosefs")
else
    echo "fsbench: GlusterFS and MooseFS could not be started; measuring Concerto beside the local file system only"
fi
.venv/bin/concerto bench fs --out results/bench "${compare[@]}" "$@"
