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
# The disk alone (SimGrid's disk model; Concerto with network.mode = "ideal"),
# and reads over a network (Concerto's default network).
g++ -O2 -std=c++17 benches/simgrid/disk_reads.cpp -o target/simgrid-disk-reads $(pkg-config --cflags --libs simgrid)
g++ -O2 -std=c++17 benches/simgrid/remote_reads.cpp -o target/simgrid-remote-reads $(pkg-config --cflags --libs simgrid)
for apps in 10 100 1000; do
    target/simgrid-disk-reads "$apps" --log=root.thres:critical
done
echo "Concerto on the same workload: simulator_simgrid_equivalent/{10,100,1000}_apps_ideal_network above (time per completion = 1 / thrpt)"
for apps in 10 100 1000; do
    target/simgrid-remote-reads "$apps" --log=root.thres:critical
done
echo "Concerto on the same workload: simulator_simgrid_equivalent/{10,100,1000}_apps above"

# The fluid mode (IO-SETS): the 60-application workload of the criterion
# group fluid_iosets_60_apps, exported with each application's set and
# priority, run by SimGrid's own sharing model; the two simulators' end
# times are compared application by application.
g++ -O2 -std=c++17 benches/simgrid/iosets_fluid.cpp -o target/simgrid-iosets $(pkg-config --cflags --libs simgrid)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.venv/bin/concerto sim workload generate benches/simgrid/iosets_60.toml --seed 1 > "$work/w.json"
for rule in set10 exclusive-fcfs fair-share; do
    .venv/bin/python benches/simgrid/iosets_export.py export "$work/w.json" "$rule" "$work/$rule.txt" "$work/$rule-concerto.txt"
    target/simgrid-iosets "$work/$rule.txt" "$work/$rule-simgrid.txt" --log=root.thres:critical
    .venv/bin/python benches/simgrid/iosets_export.py compare "$work/$rule-concerto.txt" "$work/$rule-simgrid.txt"
done
echo "Concerto's engine alone on the same workload: fluid_iosets_60_apps/{set10,exclusive-fcfs,fair-share} above"
