// The SimGrid side of the fluid-mode comparison (docs/performance.md): the
// IO-SETS model as io-sets.txt built it in SimGrid, on a workload Concerto
// exported (benches/simgrid/iosets_export.py). Each application is an
// actor: it computes (sleeps), asks the arbiter for its set, transfers its
// phase's bytes as an activity of its set's priority on a resource of
// bandwidth B (SimGrid shares it as x_i = p_i / sum p_j), and on finishing
// hands the set to the next application waiting in it, first come first
// served.
//
// Input (text): "B N", then per application "set priority release_s K" and
// K lines "compute_s bytes". Output: one line of timing, then with a second
// argument, each application's end time to that file (one per line), which
// run.sh compares with Concerto's.
//
// Build: g++ -O2 -std=c++17 benches/simgrid/iosets_fluid.cpp -o target/simgrid-iosets $(pkg-config --cflags --libs simgrid)

#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <simgrid/s4u.hpp>

namespace sg4 = simgrid::s4u;

struct App {
  long set;
  double priority;
  double release;
  std::vector<std::pair<double, double>> phases;
  sg4::ActorPtr actor;
  bool granted = false;
  double end = 0;
};

struct Set {
  bool busy = false;
  std::deque<size_t> waiting;
};

static std::vector<App> apps;
static std::map<long, Set> sets;
static long phases_done = 0;

static void run_app(size_t i)
{
  App& a = apps[i];
  sg4::this_actor::sleep_for(a.release);
  for (auto [compute, bytes] : a.phases) {
    sg4::this_actor::sleep_for(compute);
    Set& s = sets[a.set];
    if (s.busy) {
      s.waiting.push_back(i);
      a.granted = false;
      while (!a.granted)
        sg4::this_actor::suspend();
    } else {
      s.busy = true;
    }
    if (bytes > 0)
      sg4::this_actor::exec_init(bytes)->set_priority(a.priority)->wait();
    phases_done++;
    if (s.waiting.empty()) {
      s.busy = false;
    } else {
      App& next = apps[s.waiting.front()];
      s.waiting.pop_front();
      next.granted = true;
      next.actor->resume();
    }
  }
  a.end = sg4::Engine::get_clock();
}

int main(int argc, char** argv)
{
  sg4::Engine engine(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s WORKLOAD.txt [END_TIMES_OUT] [SimGrid options]\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  double bandwidth;
  size_t n;
  if (!(in >> bandwidth >> n)) {
    std::fprintf(stderr, "%s: expected 'bandwidth applications' on the first line\n", argv[1]);
    return 2;
  }
  apps.resize(n);
  for (size_t i = 0; i < n; i++) {
    size_t k;
    if (!(in >> apps[i].set >> apps[i].priority >> apps[i].release >> k)) {
      std::fprintf(stderr, "%s: application %zu: expected 'set priority release phases'\n", argv[1], i);
      return 2;
    }
    apps[i].phases.resize(k);
    for (auto& p : apps[i].phases)
      if (!(in >> p.first >> p.second)) {
        std::fprintf(stderr, "%s: application %zu: a phase is not 'compute bytes'\n", argv[1], i);
        return 2;
      }
  }
  auto* zone = sg4::create_full_zone("zone");
  // The platform's I/O bandwidth as the speed of one resource: an activity
  // of `bytes` work alone takes bytes / B, and concurrent ones share by priority.
  auto* io = zone->create_host("io", bandwidth);
  zone->seal();
  for (size_t i = 0; i < n; i++)
    apps[i].actor = sg4::Actor::create("app" + std::to_string(i), io, run_app, i);

  auto start = std::chrono::steady_clock::now();
  engine.run();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("simgrid applications=%zu phases=%ld simulated_s=%.3f wall_s=%.6f\n", n, phases_done,
              sg4::Engine::get_clock(), wall);
  if (argc > 2) {
    std::ofstream out(argv[2]);
    out.precision(17);
    for (auto& a : apps)
      out << a.end << "\n";
  }
  return 0;
}
