// The SimGrid side of Concerto's engine comparison (docs/performance.md):
// APPS actors on one host, each reading 100 MiB from the host's one disk in
// 100 sequential 1 MiB reads, all starting at once. Concerto runs the same
// workload in the `simulator_simgrid_equivalent` benchmark group
// (crates/concerto-bench/benches/simulator.rs); both count 100 x APPS
// request completions.
//
// Build and run (needs Debian's libsimgrid-dev; `make bench` does this):
//   g++ -O2 -std=c++17 benches/simgrid/disk_reads.cpp -o target/simgrid-disk-reads $(pkg-config --cflags --libs simgrid)
//   target/simgrid-disk-reads 100 --log=root.thres:critical
// It prints the wall time of the engine run alone, per completion.

#include <string>

#include <simgrid/s4u.hpp>

#include "reads_common.hpp"

namespace sg4 = simgrid::s4u;

static long completions = 0;

static void reader(sg4::Disk* disk)
{
  for (int i = 0; i < 100; i++) {
    disk->read(1 << 20);
    completions++;
  }
}

int main(int argc, char** argv)
{
  sg4::Engine engine(&argc, argv);
  int apps = apps_argument(argc, argv);
  if (apps == 0)
    return 2;
  auto* zone = sg4::create_full_zone("zone");
  auto* disk = io_disk(zone);
  zone->seal();
  for (int a = 0; a < apps; a++)
    sg4::Actor::create("app" + std::to_string(a), disk->get_host(), reader, disk);

  run_and_report(engine, "simgrid", apps, completions);
  return 0;
}
