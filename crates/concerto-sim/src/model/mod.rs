//! The simulated parallel file system: applications whose processes issue
//! striped I/O calls, a network, and data servers each running one
//! `RequestQueue` from concerto-core in front of one device, and metadata
//! servers (co-located on data servers, or dedicated) whose operations go
//! through the same kind of queue.
//!
//! The life of one piece of one call (one process's part on one server):
//! `issue` → wire → `ReachServer` (received, then enqueued) → `Kick` (the
//! queue dispatches into free device slots) → `DeviceDone` (complete; reply
//! sent) → `ReachClient` (received: the piece is done). A call is a sequence
//! of steps (a data access split over the servers, or one metadata
//! operation); the next step is issued when all pieces of the previous one
//! have replied, and the call is done after its last step. With a barrier,
//! an operation is done when every process's call is, and the next one is
//! released after the compute time.

mod build;
mod client;
mod collective;
mod page_cache;
mod read_ahead;
mod reaper;
mod report;
mod server;
mod sharing;
mod write_behind;

use std::collections::HashSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use concerto_core::client::collective::patterns::Pattern as AccessPattern;
use concerto_core::client::collective::Planner;
use concerto_core::client::ordering;
use concerto_core::job::{Decision, IoArbiter, Sets};
use concerto_core::metrics::finish_spread;
use concerto_core::server::{Driver, ServiceReport, Ticket};
use concerto_core::{
    AppId, Extent, Nid, ObjectId, Op, Request, RequestId, ServerPiece, StripeLayout, Time,
};

use crate::device::{elevator_pick, object_base, Device, DiskWait};
use crate::engine::{Class, EventQueue};
use crate::fluid::{window_metrics, FluidApp, FluidPhase, FluidRun, PhaseRecord};
use crate::network::{End, Network, Nic};
use crate::results::{AppResult, JobResult, PieceRecord, RunResult, ServerAppResult, ServerResult};
use crate::scenario::{AppIdRule, DataOp, JobConfig, MetadataPlacement, Placement, Scenario};
use crate::timeline::{Backlog, Bins};
use crate::workload::{self, MetaTarget, Step};
use crate::Progress;
use client::piece_request;
use rustc_hash::FxHashMap;

#[derive(Clone, Copy, Debug)]
enum Event {
    /// Barrier released: every process of the application issues its next call.
    Release {
        app: u32,
    },
    /// One process issues its next call (applications without a barrier).
    Call {
        rank: u32,
    },
    /// One process's next step leaves, its client overhead spent.
    Step {
        rank: u32,
    },
    /// A call with no server traffic (md-test's close) completes.
    CallDone {
        rank: u32,
    },
    /// A step whose requests the process does not wait for (a write held
    /// or sent behind) completes.
    StepDone {
        rank: u32,
    },
    /// A file's held writes may have come due (write-behind).
    FlushDue {
        file: u32,
    },
    /// A metadata server commits its namespace changes: the orphans they
    /// made become the reaper's (`posix_mount`).
    Commit {
        server: u32,
    },
    /// A metadata server's reaper sends its batch (`posix_mount`).
    Reap {
        server: u32,
    },
    /// A request reaches its server's NIC (uncontended arrival time).
    ReachServer {
        piece: u32,
    },
    /// A reply reaches its client's NIC.
    ReachClient {
        piece: u32,
    },
    /// The server decides what to start; runs after all other events at its instant.
    Kick {
        server: u32,
    },
    DeviceDone {
        piece: u32,
    },
    /// A request has fully arrived after waiting for the server's NIC.
    Arrive {
        piece: u32,
    },
    /// A reply has fully arrived after waiting for the client's NIC.
    Response {
        piece: u32,
    },
    /// A process that orders its blocks (`ordering`) sends its next one.
    SendBlock {
        rank: u32,
    },
    /// Another server's service report (total-service sharing) arrives.
    ServiceReport {
        server: u32,
        report: u32,
    },
    /// A collective call's batch is sent (after its delay).
    SendBatch {
        app: u32,
        rank: u32,
        batch: u32,
    },
    /// Data exchanged between two processes of a collective call reaches
    /// the receiver's NIC ...
    ExchangeReach {
        app: u32,
        exchange: u32,
    },
    /// ... and has fully arrived.
    ExchangeArrive {
        app: u32,
        exchange: u32,
    },
    /// A flow of the `shared` network may have ended; stale unless the
    /// fabric is still at `generation`.
    FlowEnd {
        generation: u32,
    },
}

// RNG streams: separate so that, for one seed, application ids and file
// placement are the same whatever policy runs.
const STREAM_SETUP: u64 = 0;
const STREAM_NETWORK: u64 = 1;
const STREAM_DEVICE: u64 = 2;
const STREAM_TIES: u64 = 3;
const STREAM_CLIENT: u64 = 4;

fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

struct AppState {
    spec: usize,
    instance: u32,
    app_id: u32,
    first_rank: u32,
    files: Vec<u32>,
    next_call: u32,
    ranks_pending: u32,
    ranks_finished: u32,
    op_issue: Time,
    completions: Vec<f64>,
    spreads: Vec<f64>,
    /// The servers the current operation touched, in the order it first
    /// finished there (when it last did is in the server's `AppAtServer`).
    op_servers: Vec<u32>,
    bytes: u64,
    pieces: u64,
    metadata_ops: u64,
    start: Time,
    end: Time,
    /// Service over time (when the output asks for it).
    timeline: Option<Bins>,
    /// The weight its requests carry: its own, times the priority the
    /// job-level arbiter granted its current phase.
    weight: f64,
    /// Under `[job]`: when the current phase was granted, and at what priority.
    phase_start: Time,
    phase_priority: f64,
    /// The collective call it is running (workload "collective").
    collective: Option<collective::CollectiveCall>,
    /// A plan (and what it fixes) made for call `base`, which later calls
    /// of a pattern that repeats itself shifted use too.
    plan_cache: Option<(std::rc::Rc<collective::CallShape>, u64)>,
}

struct RankState {
    app: u32,
    rank: u32,
    pending: u32,
    call: u32,
    issue: Time,
    /// The current call's steps still to issue, last first.
    steps: Vec<Step>,
    /// Metadata server of the process's own directory.
    dir_server: u32,
    /// Under `ordering`: the current step's blocks still to send (pieces,
    /// last first), one at a time.
    blocks: Vec<u32>,
    /// The kernel's lock the current step holds (`posix_mount`).
    holds: Option<Held>,
    /// Whether `holds` was taken by a lookup for the change after it,
    /// which keeps it (the kernel looks a name up under the lock).
    held_for_change: bool,
    /// The client NIC of the process's node (`clients`).
    nic: u32,
    /// Write-behind: its pieces in flight that no step waits for, their
    /// bytes, and what its current step waits for among them.
    behind: u32,
    behind_bytes: u64,
    behind_wait: write_behind::Wait,
    /// Read-ahead: its stream of each file it read (`cluster.read_ahead`).
    streams: read_ahead::Streams,
}

struct FileState {
    layout: StripeLayout,
    /// The server holding the file's metadata.
    meta_server: u32,
    /// With write-behind, what its processes hold unsent (core's policy),
    /// and when a `FlushDue` is scheduled.
    writes: Option<concerto_core::client::write_behind::FileWrites<u32>>,
    flush_at: Option<Time>,
    /// The furthest byte written to it in the run: where read-ahead sees
    /// its data end.
    written_end: u64,
}

/// A lock the kernel holds across a system call on Concerto's mount
/// (`posix_mount`): the rank holding it, and those waiting for it in turn.
#[derive(Default)]
struct KernelLock {
    holder: Option<u32>,
    waiting: std::collections::VecDeque<u32>,
}

/// Which kernel lock a rank's step holds (each node's kernel has its own:
/// `Simulation::kernel_locks` is keyed by the lock and the node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Held {
    /// A file's (by index), across a write(2) or an fsync(2).
    File(u32),
    /// An application instance's directory (by index), across a call that
    /// adds or removes a name in it.
    Directory(u32),
}

struct ServerState {
    role: ServerRole,
    /// The server's queue, its slots and its reports.
    driver: Driver,
    device: Device,
    nic: Nic,
    kick_pending: bool,
    /// The earliest wakeup the queue asked for that is still scheduled.
    wakeup: Option<Time>,
    requests: u64,
    metadata_ops: u64,
    bytes: u64,
    busy: Time,
    device_free: Time,
    max_queue: usize,
    /// Per application with pieces here (only applications that used the
    /// server have an entry, so a run's memory grows with pieces placed,
    /// not applications × servers).
    finish: FxHashMap<u32, AppAtServer>,
    /// Per application: service and backlog over time (`output.server_timeline`).
    timeline: Option<Vec<Backlog>>,
    reports_sent: u64,
    /// Whether the disk reorders what it is given (an HDD data server with
    /// the elevator), and then the data requests dispatched to it and
    /// waiting, and whether it is serving one.
    elevator: bool,
    disk_waiting: Vec<DiskWait>,
    disk_busy: bool,
}

/// What a server knows of one application's pieces it finished.
struct AppAtServer {
    /// The first and last finish time of a piece.
    first: Time,
    last: Time,
    /// The operation (`AppState::next_call` + 1) whose pieces it last
    /// finished; zero for none. Under a barrier, the operation's per-server
    /// finish time is `last` when this is the current one.
    op: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ServerRole {
    Data,
    Metadata,
    DataAndMetadata,
}

impl ServerRole {
    fn name(self) -> &'static str {
        match self {
            ServerRole::Data => "data",
            ServerRole::Metadata => "metadata",
            ServerRole::DataAndMetadata => "data+metadata",
        }
    }
}

struct Piece {
    rank: u32,
    server: u32,
    file: u32,
    op: Op,
    call: u32,
    bytes: u64,
    issue: Time,
    arrive: Time,
    start: Time,
    done: Time,
    /// Before dispatch the request to enqueue; in service the request and its ticket.
    req: Option<Request>,
    ticket: Option<Ticket>,
    /// The collective batch of its process it belongs to, or `NO_BATCH`.
    batch: u32,
    /// Served from the server's cache, not the disk.
    cached: bool,
    /// Sent without its process waiting for the reply (the mount's
    /// release notice): it occupies its server, not its process.
    background: bool,
    /// Sent behind its process's writes (write-behind): counted in the
    /// process's `behind`.
    behind: bool,
    /// The read-ahead fetch it is part of, or `NO_FETCH`.
    fetch: u32,
    /// A streamed write: when its last byte is in (the device cannot
    /// finish it earlier); zero otherwise.
    data_in: Time,
    /// A reaper's removal: the objects it removes (its device time is
    /// that many removes); zero otherwise.
    objects: u32,
}

/// A piece that is no read-ahead fetch's.
const NO_FETCH: u32 = u32::MAX;

pub struct Simulation<'a> {
    sc: &'a Scenario,
    seed: u64,
    events: EventQueue<Event>,
    net: Network,
    rng_net: ChaCha8Rng,
    rng_dev: ChaCha8Rng,
    rng_tie: ChaCha8Rng,
    /// Each step's client overhead, when it varies (`client_overhead_spread`).
    rng_client: ChaCha8Rng,
    /// Under `posix_mount`, the locks each node's kernel holds across a
    /// system call (a file's, an application's directory's), by the lock
    /// and the node's client NIC: taken when first asked for.
    kernel_locks: FxHashMap<(Held, u32), KernelLock>,
    apps: Vec<AppState>,
    ranks: Vec<RankState>,
    clients: Vec<Nic>,
    /// The network in `shared` mode, where messages are flows sharing NICs.
    shared: sharing::SharedNetwork,
    files: Vec<FileState>,
    servers: Vec<ServerState>,
    pieces: Vec<Piece>,
    free_pieces: Vec<u32>,
    /// Read-ahead fetches, by token.
    fetches: Vec<read_ahead::Fetch>,
    dispatched: Vec<(Request, Ticket)>,
    /// An operation's per-server finish times, reused (see `operation_done`).
    finishes: Vec<f64>,
    detail: Option<Vec<PieceRecord>>,
    progress: Option<&'a Progress>,
    /// Service reports in flight between servers, by index.
    reports: Vec<ServiceReport>,
    /// Scratch space for the requests of a collective batch being issued.
    sends: Vec<(u32, u32, u64, Request)>,
    /// Scratch space for the per-server pieces of the step being issued.
    split: Vec<ServerPiece>,
    /// Each server's reaper (metadata servers' only ever gather).
    reapers: Vec<reaper::Reaper>,
    /// Each client node's page cache (`cluster.page_cache`).
    page_caches: page_cache::PageCaches,
    /// Servers asked to dispatch by the event being handled, in order (see `kick`).
    kicks: Vec<u32>,
    /// Under `[job]`: the arbiter (applications by instance index) and
    /// every phase as it ran.
    arbiter: Option<Sets>,
    phases: Vec<PhaseRecord>,
    /// Per application spec, a collective workload's access pattern and planner.
    patterns: Vec<Option<AccessPattern>>,
    planners: Vec<Option<Box<dyn Planner + Send + Sync>>>,
}

impl<'a> Simulation<'a> {
    /// Runs until every application has finished; returns the results.
    pub fn run(mut self) -> RunResult {
        let mut idle_ranks = Vec::new();
        for (i, app) in self.apps.iter().enumerate() {
            let spec = &self.sc.apps[app.spec];
            if spec.barrier {
                self.events.schedule(
                    spec.start + spec.compute_before(0),
                    Class::Normal,
                    0,
                    Event::Release { app: i as u32 },
                );
            } else {
                for r in 0..spec.processes {
                    if spec.calls_of(r) == 0 {
                        // A traced rank with nothing to do.
                        idle_ranks.push(i);
                        continue;
                    }
                    self.events.schedule(
                        spec.issue_time(r, 0, spec.start),
                        Class::Normal,
                        0,
                        Event::Call {
                            rank: app.first_rank + r,
                        },
                    );
                }
            }
        }
        for i in idle_ranks {
            let a = &mut self.apps[i];
            a.ranks_finished += 1;
            if a.ranks_finished == self.sc.apps[a.spec].processes {
                a.end = a.start;
            }
        }
        while let Some((now, event)) = self.events.pop() {
            self.handle(event, now);
            self.flush_kicks(now);
        }
        self.results()
    }

    /// Runs one event's handler.
    fn handle(&mut self, event: Event, now: Time) {
        match event {
            Event::Release { app } => self.release(app, now),
            Event::Call { rank } => self.issue_call(rank, now),
            Event::Step { rank } => self.issue_step(rank, now),
            Event::CallDone { rank } => self.call_done(rank, now),
            Event::StepDone { rank } => self.step_done(rank, now),
            Event::FlushDue { file } => self.flush_due(file, now),
            Event::Commit { server } => self.commit(server, now),
            Event::Reap { server } => self.reap(server, now),
            Event::ReachServer { piece } => self.reach_server(piece, now),
            Event::Arrive { piece } => self.arrive(piece, now),
            Event::Kick { server } => self.dispatch(server, now),
            Event::DeviceDone { piece } => self.device_done(piece, now),
            Event::ReachClient { piece } => self.reach_client(piece, now),
            Event::Response { piece } => self.response(piece, now),
            Event::SendBlock { rank } => self.send_block(rank, now),
            Event::ServiceReport { server, report } => {
                self.servers[server as usize]
                    .driver
                    .absorb(&self.reports[report as usize]);
            }
            Event::SendBatch { app, rank, batch } => self.send_batch(app, rank, batch, now),
            Event::ExchangeReach { app, exchange } => self.exchange_reach(app, exchange, now),
            Event::ExchangeArrive { app, exchange } => self.exchange_arrive(app, exchange, now),
            Event::FlowEnd { generation } => self.flow_end(generation, now),
        }
    }

    /// Dispatches at the kicked servers, in the order they were kicked, once
    /// nothing else is due at this instant: a dispatch sees every arrival
    /// and completion of its instant. Until then the kicks wait in the list,
    /// not in the event queue. The order is the one `Late` events would
    /// give: the `Late` events already in the queue for this instant (a
    /// poll or wakeup, scheduled before the kicks were made) run first, and
    /// should a dispatch schedule something for this instant, the kicks
    /// after it wait for that too.
    fn flush_kicks(&mut self, now: Time) {
        let mut i = 0;
        while let Some(&server) = self.kicks.get(i) {
            if self.events.next_time().is_some_and(|t| t <= now) {
                break;
            }
            i += 1;
            self.dispatch(server, now);
        }
        self.kicks.drain(..i);
    }

    fn count_progress(&self) {
        if let Some(p) = self.progress {
            p.add(1);
        }
    }
}
