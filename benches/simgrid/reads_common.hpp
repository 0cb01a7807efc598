#pragma once

// What disk_reads.cpp and remote_reads.cpp share: the APPS argument, the
// I/O host's disk, and the timed engine run with its one line of figures
// (docs/performance.md reads `ns_per_completion`).

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <simgrid/s4u.hpp>

// The number of applications from argv[1]; 0 (having said why) when absent or not positive.
inline int apps_argument(int argc, char** argv)
{
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s APPS [SimGrid options]\n", argv[0]);
    return 0;
  }
  int apps = std::atoi(argv[1]);
  if (apps < 1)
    std::fprintf(stderr, "APPS must be a positive number, not %s\n", argv[1]);
  return apps < 1 ? 0 : apps;
}

// The I/O host "io" and its disk: 100 MB/s, so a 1 MiB read alone takes
// about 10 ms, as Concerto's fixed device (benches/simgrid/disk_reads.toml).
inline simgrid::s4u::Disk* io_disk(simgrid::s4u::NetZone* zone)
{
  return zone->create_host("io", 1e9)->create_disk("disk", 1e8, 1e8);
}

// Runs the simulation and prints the wall time of the engine run alone
// (platform and actor set-up excluded), per completion.
inline void run_and_report(simgrid::s4u::Engine& engine, const char* name, int apps, const long& completions)
{
  auto start = std::chrono::steady_clock::now();
  engine.run();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s apps=%d completions=%ld simulated_s=%.3f wall_s=%.6f ns_per_completion=%.1f\n", name, apps,
              completions, simgrid::s4u::Engine::get_clock(), wall, wall * 1e9 / completions);
}
