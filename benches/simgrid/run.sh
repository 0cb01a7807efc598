#!/usr/bin/env bash
# The SimGrid side of the engine comparison (docs/performance.md): builds
# disk_reads.cpp against Debian's libsimgrid-dev (installing it when this is
# a Debian machine we are root on) and runs it at 10, 100 and 1000
# applications. Skips, saying why, where SimGrid cannot be had.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! pkg-config --exists simgrid 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libsimgrid-dev >/dev/null
    else
        echo "simgrid comparison skipped: libsimgrid-dev is not installed (apt-get install libsimgrid-dev)"
        exit 0
    fi
fi
mkdir -p target
g++ -O2 -std=c++17 benches/simgrid/disk_reads.cpp -o target/simgrid-disk-reads $(pkg-config --cflags --libs simgrid)
for apps in 10 100 1000; do
    target/simgrid-disk-reads "$apps" --log=root.thres:critical
done
echo "Concerto on the same workload: simulator_simgrid_equivalent/{10,100,1000}_apps above (time per completion = 1 / thrpt)"
