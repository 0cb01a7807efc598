// The SimGrid side of Concerto's engine comparison with the network in the
// model (docs/performance.md): the workload of disk_reads.cpp, but each of
// the APPS applications runs on its own client host and reads over the
// network, as in Concerto's `benches/simgrid/disk_reads.toml` (default
// network). Per read, a client sends a 256-byte request to the I/O host; a
// handler actor there (one per client) reads 1 MiB from the host's disk and
// sends the 1 MiB back; the client issues its next read once the reply is
// in. Each client has a 1.25 GB/s full-duplex NIC with 50 us of latency,
// the server a 1.25 GB/s full-duplex NIC: Concerto's default network,
// without its random jitter.
//
// One handler per client is the faster of the two ways tried: one server
// actor taking every request from one shared mailbox cost SimGrid 14 us per
// completion at 10 applications and 562 us at 1,000 (most of it scanning a
// list in libsimgrid's communication code, by `perf record`).
//
// Build and run (needs Debian's libsimgrid-dev; benches/simgrid/run.sh does this):
//   g++ -O2 -std=c++17 benches/simgrid/remote_reads.cpp -o target/simgrid-remote-reads $(pkg-config --cflags --libs simgrid)
//   target/simgrid-remote-reads 100 --log=root.thres:critical
// It prints the wall time of the engine run alone, per completion.

#include <string>
#include <vector>

#include <simgrid/s4u.hpp>

#include "reads_common.hpp"

namespace sg4 = simgrid::s4u;

static long completions = 0;
static constexpr int READS = 100;
static constexpr uint64_t REQUEST_BYTES = 256;
static constexpr uint64_t READ_BYTES = 1 << 20;

// A client's handler on the I/O host: takes the client's requests as they
// come, reads, and sends each reply without waiting for it to be received.
static void handler(sg4::Disk* disk, int app)
{
  auto* inbox = sg4::Mailbox::by_name("s" + std::to_string(app));
  // Requests travel as soon as they are sent and wait at the server, as
  // they do in Concerto (without this, SimGrid's mailbox would start a
  // transfer only when the handler asks for the next request).
  inbox->set_receiver(sg4::Actor::self());
  for (int i = 0; i < READS; i++) {
    auto* client = inbox->get<sg4::Mailbox>();
    disk->read(READ_BYTES);
    client->put_init(client, READ_BYTES)->detach();
  }
}

static void client(int app)
{
  auto* server = sg4::Mailbox::by_name("s" + std::to_string(app));
  auto* inbox = sg4::Mailbox::by_name("c" + std::to_string(app));
  inbox->set_receiver(sg4::Actor::self());
  for (int i = 0; i < READS; i++) {
    server->put(inbox, REQUEST_BYTES);
    inbox->get<sg4::Mailbox>();
    completions++;
  }
}

int main(int argc, char** argv)
{
  sg4::Engine engine(&argc, argv);
  // Latency and bandwidth as given, without the TCP correction factors of
  // SimGrid's default model: Concerto's network has none.
  engine.set_config("network/model:CM02");
  int apps = apps_argument(argc, argv);
  if (apps == 0)
    return 2;
  auto* zone = sg4::create_full_zone("zone");
  auto* disk = io_disk(zone);
  auto* io = disk->get_host();
  auto* io_nic = zone->create_split_duplex_link("io-nic", 1.25e9)->seal();
  std::vector<sg4::Host*> clients;
  for (int a = 0; a < apps; a++) {
    auto* host = zone->create_host("c" + std::to_string(a), 1e9);
    auto* nic = zone->create_split_duplex_link("c" + std::to_string(a) + "-nic", 1.25e9)->set_latency(50e-6)->seal();
    // Client to server: out of the client's NIC, into the server's (and back
    // the other way: the route is symmetrical).
    zone->add_route(host->get_netpoint(), io->get_netpoint(), nullptr, nullptr,
                    {sg4::LinkInRoute(nic, sg4::LinkInRoute::Direction::UP),
                     sg4::LinkInRoute(io_nic, sg4::LinkInRoute::Direction::DOWN)},
                    true);
    clients.push_back(host);
  }
  zone->seal();
  for (int a = 0; a < apps; a++) {
    sg4::Actor::create("handler" + std::to_string(a), io, handler, disk, a);
    sg4::Actor::create("app" + std::to_string(a), clients[a], client, a);
  }

  run_and_report(engine, "simgrid-remote", apps, completions);
  return 0;
}
