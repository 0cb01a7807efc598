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

mod collective;

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
    AppId, Extent, ObjectId, Op, Request, RequestId, ServerPiece, StripeLayout, Time,
};

use crate::device::{elevator_pick, object_base, Device, DiskWait};
use crate::engine::{Class, EventQueue};
use crate::fluid::{window_metrics, FluidApp, FluidPhase, FluidRun, PhaseRecord};
use crate::network::{End, Network, Nic};
use crate::results::{
    AppResult, IorOperation, JobResult, MdPhase, PieceRecord, RunResult, ServerAppResult,
    ServerResult,
};
use crate::scenario::{
    AppIdRule, DataOp, DeviceConfig, DiskScheduler, JobConfig, MdStep, MetadataPlacement,
    Placement, Scenario, WorkloadKind,
};
use crate::timeline::{Backlog, Bins};
use crate::workload::{self, MetaTarget, Step};
use crate::Progress;
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
    /// A call with no server traffic (md-test's close) completes.
    CallDone {
        rank: u32,
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
}

// RNG streams: separate so that, for one seed, application ids and file
// placement are the same whatever policy runs.
const STREAM_SETUP: u64 = 0;
const STREAM_NETWORK: u64 = 1;
const STREAM_DEVICE: u64 = 2;
const STREAM_TIES: u64 = 3;

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
}

struct FileState {
    layout: StripeLayout,
    /// The server holding the file's metadata.
    meta_server: u32,
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
    /// A streamed write: when its last byte is in (the device cannot
    /// finish it earlier); zero otherwise.
    data_in: Time,
}

pub struct Simulation<'a> {
    sc: &'a Scenario,
    seed: u64,
    events: EventQueue<Event>,
    net: Network,
    rng_net: ChaCha8Rng,
    rng_dev: ChaCha8Rng,
    rng_tie: ChaCha8Rng,
    apps: Vec<AppState>,
    ranks: Vec<RankState>,
    clients: Vec<Nic>,
    files: Vec<FileState>,
    servers: Vec<ServerState>,
    pieces: Vec<Piece>,
    free_pieces: Vec<u32>,
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
    /// Sets up a run of a validated scenario with `seed`.
    pub fn new(sc: &'a Scenario, seed: u64, progress: Option<&'a Progress>) -> Simulation<'a> {
        let cl = &sc.cluster;
        let mut setup = rng(seed, STREAM_SETUP);
        let n_instances: usize = sc.apps.iter().map(|a| a.instances as usize).sum();

        let md = &cl.metadata;
        let n_meta = cl.metadata_servers();
        let meta_servers: Vec<u32> = match md.placement {
            // Spread evenly over the data servers.
            MetadataPlacement::CoLocated => (0..n_meta)
                .map(|i| (i as u64 * cl.servers as u64 / n_meta as u64) as u32)
                .collect(),
            MetadataPlacement::Dedicated => (cl.servers..cl.servers + n_meta).collect(),
        };
        let roles: Vec<ServerRole> = match md.placement {
            MetadataPlacement::CoLocated => (0..cl.servers)
                .map(|i| {
                    if meta_servers.contains(&i) {
                        ServerRole::DataAndMetadata
                    } else {
                        ServerRole::Data
                    }
                })
                .collect(),
            MetadataPlacement::Dedicated => (0..cl.servers)
                .map(|_| ServerRole::Data)
                .chain((0..n_meta).map(|_| ServerRole::Metadata))
                .collect(),
        };
        let servers = roles
            .iter()
            .map(|&role| ServerState {
                role,
                driver: {
                    let mut d = Driver::new(
                        &sc.policy,
                        sc.device_defaults(if role == ServerRole::Metadata {
                            md.depth.unwrap_or(cl.depth)
                        } else {
                            cl.depth
                        }),
                    );
                    d.set_rules(&sc.qos, Time::ZERO);
                    d
                },
                device: Device::new(match (role, &md.device) {
                    (ServerRole::Metadata, Some(d)) => d,
                    _ => &cl.device,
                }),
                nic: Nic::default(),
                kick_pending: false,
                wakeup: None,
                requests: 0,
                metadata_ops: 0,
                bytes: 0,
                busy: Time::ZERO,
                device_free: Time::ZERO,
                max_queue: 0,
                finish: FxHashMap::default(),
                timeline: sc
                    .output
                    .timeline
                    .filter(|_| sc.output.server_timeline)
                    .map(|w| (0..n_instances).map(|_| Backlog::new(w)).collect()),
                reports_sent: 0,
                elevator: role != ServerRole::Metadata
                    && matches!(&cl.device,
                        DeviceConfig::Hdd(h) if h.scheduler == DiskScheduler::Elevator),
                disk_waiting: Vec::new(),
                disk_busy: false,
            })
            .collect();

        let ids = assign_app_ids(sc, n_instances, &mut setup);
        let mut apps = Vec::with_capacity(n_instances);
        let mut ranks = Vec::new();
        let mut files = Vec::new();
        for (spec_idx, spec) in sc.apps.iter().enumerate() {
            // Operations an instance completes: barrier-wide, or per process.
            let operations = if spec.barrier {
                spec.calls() as usize
            } else {
                (0..spec.processes).map(|r| spec.calls_of(r) as usize).sum()
            };
            for instance in 0..spec.instances {
                let app_idx = apps.len() as u32;
                let first_rank = ranks.len() as u32;
                let mut app_files = Vec::new();
                for _ in 0..workload::files_per_instance(spec) {
                    let idx = files.len() as u32;
                    let placed = match cl.placement {
                        Placement::RoundRobin => idx % cl.servers,
                        Placement::Random => setup.gen_range(0..cl.servers),
                    };
                    let first = spec.first_server.unwrap_or(placed);
                    let count = spec.stripe_count.unwrap_or(cl.stripe_count());
                    let layout =
                        StripeLayout::round_robin(cl.stripe_unit.0, count, first, cl.servers)
                            .expect(
                                "validated: stripe unit > 0 and stripe count within the servers",
                            );
                    files.push(FileState {
                        layout,
                        meta_server: meta_servers[idx as usize % meta_servers.len()],
                    });
                    app_files.push(idx);
                }
                for rank in 0..spec.processes {
                    let dir_server = meta_servers[ranks.len() % meta_servers.len()];
                    ranks.push(RankState {
                        app: app_idx,
                        rank,
                        pending: 0,
                        call: 0,
                        issue: Time::ZERO,
                        steps: Vec::new(),
                        dir_server,
                        blocks: Vec::new(),
                    });
                }
                apps.push(AppState {
                    spec: spec_idx,
                    instance,
                    app_id: ids[app_idx as usize],
                    first_rank,
                    files: app_files,
                    next_call: 0,
                    ranks_pending: 0,
                    ranks_finished: 0,
                    op_issue: Time::ZERO,
                    // One entry per operation (reserved: growing the
                    // vectors of thousands of applications was measurable).
                    completions: Vec::with_capacity(operations),
                    spreads: Vec::with_capacity(if spec.barrier { operations } else { 0 }),
                    op_servers: Vec::new(),
                    bytes: 0,
                    pieces: 0,
                    metadata_ops: 0,
                    start: spec.start,
                    timeline: sc.output.timeline.map(Bins::new),
                    end: spec.start,
                    weight: spec.weight,
                    phase_start: Time::ZERO,
                    phase_priority: 1.0,
                    collective: None,
                    plan_cache: None,
                });
            }
        }
        let clients = vec![Nic::default(); ranks.len()];
        Simulation {
            sc,
            seed,
            events: EventQueue::new(),
            net: Network::new(cl.network.clone()),
            rng_net: rng(seed, STREAM_NETWORK),
            rng_dev: rng(seed, STREAM_DEVICE),
            rng_tie: rng(seed, STREAM_TIES),
            apps,
            ranks,
            clients,
            files,
            servers,
            pieces: Vec::new(),
            free_pieces: Vec::new(),
            dispatched: Vec::new(),
            finishes: Vec::new(),
            detail: sc.output.detail.then(Vec::new),
            progress,
            reports: Vec::new(),
            sends: Vec::new(),
            split: Vec::new(),
            kicks: Vec::new(),
            arbiter: sc.job.as_ref().map(|j| Sets::new(j.rule.clone())),
            phases: Vec::new(),
            patterns: sc.apps.iter().map(|a| a.access_pattern()).collect(),
            planners: sc
                .apps
                .iter()
                .map(|a| {
                    (a.workload == WorkloadKind::Collective).then(|| {
                        a.collective
                            .clone()
                            .unwrap_or_default()
                            .planner()
                            .expect("validated: the planner's options")
                    })
                })
                .collect(),
        }
    }

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
            Event::CallDone { rank } => self.call_done(rank, now),
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

    /// The application asks to do its next operation: at once, or when the
    /// job-level arbiter grants it. Its completion time counts from here.
    fn release(&mut self, app: u32, now: Time) {
        self.apps[app as usize].op_issue = now;
        let Some(arbiter) = &mut self.arbiter else {
            return self.start_operation(app, now);
        };
        let a = &self.apps[app as usize];
        let info = self.sc.apps[a.spec].phase_info();
        if let Decision::Granted { priority } = arbiter.begin_phase(AppId(app), now, &info) {
            self.grant(app, priority, now);
        }
    }

    /// The arbiter let `app` start its phase at `priority`.
    fn grant(&mut self, app: u32, priority: f64, now: Time) {
        let a = &mut self.apps[app as usize];
        a.weight = self.sc.apps[a.spec].weight * priority;
        a.phase_start = now;
        a.phase_priority = priority;
        self.start_operation(app, now);
    }

    fn start_operation(&mut self, app: u32, now: Time) {
        let a = &mut self.apps[app as usize];
        let processes = self.sc.apps[a.spec].processes;
        a.ranks_pending = processes;
        if self.planners[a.spec].is_some() {
            return self.start_collective(app, now);
        }
        let first = a.first_rank;
        for r in 0..processes {
            self.issue_call(first + r, now);
        }
    }

    fn issue_call(&mut self, rank: u32, now: Time) {
        let rs = &mut self.ranks[rank as usize];
        let a = &self.apps[rs.app as usize];
        let spec = &self.sc.apps[a.spec];
        let call = if spec.barrier { a.next_call } else { rs.call };
        rs.call = call;
        rs.issue = now;
        rs.steps.clear();
        workload::call_steps(
            spec,
            rs.rank,
            call,
            self.sc.cluster.metadata.getattr_before_read,
            &mut rs.steps,
        );
        rs.steps.reverse();
        if rs.steps.is_empty() {
            // Nothing to send: the call completes once this instant's other events have run.
            self.events
                .schedule(now, Class::Normal, 0, Event::CallDone { rank });
        } else {
            self.issue_step(rank, now);
        }
    }

    /// Sends the next step of the rank's current call.
    fn issue_step(&mut self, rank: u32, now: Time) {
        let rs = &mut self.ranks[rank as usize];
        let Some(step) = rs.steps.pop() else { return };
        let a = &self.apps[rs.app as usize];
        let (app_id, local_rank, call, dir_server) = (a.app_id, rs.rank, rs.call, rs.dir_server);
        let (app_idx, spec_idx, weight) = (rs.app, a.spec, a.weight);
        let user = self.sc.apps[spec_idx].user;
        let template = move |op: Op, object: u64| Request {
            id: RequestId(0),
            app: AppId(app_id),
            rank: local_rank,
            issue_time: now,
            op,
            object: ObjectId(object),
            offset: 0,
            len: 0,
            segments: Vec::new(),
            weight: Some(weight),
            user,
        };
        match step {
            Step::Data { op, access } => {
                let op = match op {
                    DataOp::Read => Op::Read,
                    DataOp::Write => Op::Write,
                };
                let file = self.apps[app_idx as usize].files[access.file as usize];
                let spec = &self.sc.apps[spec_idx];
                if let Some(ordering) = spec.ordering {
                    let layout = &self.files[file as usize].layout;
                    let b = spec.schedule_block.map_or(layout.unit(), |b| b.0);
                    let blocks = ordering::blocks(layout, &access.extents, b);
                    // hash-IOS staggers the processes of one application by
                    // rank; random-IOS draws each process's order from the
                    // run's seed, the application and the rank.
                    let sequence = ordering::order(
                        &blocks,
                        local_rank,
                        self.sc.cluster.servers,
                        ordering,
                        self.seed ^ (u64::from(app_idx) << 40),
                    );
                    self.ranks[rank as usize].pending = sequence.len() as u32;
                    for &i in sequence.iter().rev() {
                        let block = &blocks[i];
                        let req =
                            piece_request(template(op, file as u64), &block.extents, block.bytes);
                        let piece =
                            self.new_piece(rank, block.server, file, call, block.bytes, req, now);
                        self.ranks[rank as usize].blocks.push(piece);
                    }
                    return self.send_block(rank, now);
                }
                // The buffer of pieces is reused from step to step.
                let mut pieces = std::mem::take(&mut self.split);
                self.files[file as usize]
                    .layout
                    .split_extents_into(&access.extents, &mut pieces);
                self.ranks[rank as usize].pending = pieces.len() as u32;
                for p in pieces.drain(..) {
                    let req = piece_request(template(op, file as u64), &p.extents, p.bytes);
                    let piece = self.new_piece(rank, p.server, file, call, p.bytes, req, now);
                    self.send_request(piece, now);
                }
                self.split = pieces;
            }
            Step::Meta { op, target } => {
                let a = &self.apps[app_idx as usize];
                let (server, file, object) = match target {
                    MetaTarget::File(f) => {
                        let file = a.files[f as usize];
                        (self.files[file as usize].meta_server, file, file as u64)
                    }
                    // Directories are named apart from files: the high bit marks them.
                    MetaTarget::Dir => (dir_server, a.files[0], (1 << 63) | rank as u64),
                };
                self.ranks[rank as usize].pending = 1;
                let req = template(Op::Meta(op), object);
                let piece = self.new_piece(rank, server, file, call, 0, req, now);
                self.send_request(piece, now);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn new_piece(
        &mut self,
        rank: u32,
        server: u32,
        file: u32,
        call: u32,
        bytes: u64,
        req: Request,
        now: Time,
    ) -> u32 {
        self.alloc_piece(Piece {
            rank,
            server,
            file,
            op: req.op,
            call,
            bytes,
            issue: now,
            arrive: Time::ZERO,
            start: Time::ZERO,
            done: Time::ZERO,
            req: Some(req),
            ticket: None,
            batch: collective::NO_BATCH,
            cached: false,
            data_in: Time::ZERO,
        })
    }

    /// Puts a piece's request (with the data, for a write) on the wire to
    /// its server; returns when the client's NIC has sent it.
    fn send_request(&mut self, piece: u32, now: Time) -> Time {
        let p = &mut self.pieces[piece as usize];
        p.issue = now;
        if self.net.is_instant() {
            // No network: in the server's queue now, in the order sent.
            self.reach_server(piece, now);
            return now;
        }
        let wire = self.net.header_bytes() + if p.op == Op::Write { p.bytes } else { 0 };
        let sent = self.net.send(
            now,
            wire,
            End {
                nic: &mut self.clients[p.rank as usize],
                bandwidth: self.net.client_bandwidth(),
            },
            End {
                nic: &mut self.servers[p.server as usize].nic,
                bandwidth: self.net.server_bandwidth(),
            },
            &mut self.rng_net,
        );
        // A streamed write reaches the server when its first buffer does.
        let reach = match (p.op, self.net.streamed(wire)) {
            (Op::Write, Some(behind)) => sent
                .arrival
                .saturating_sub(self.net.client_bandwidth().transfer_time(behind)),
            _ => sent.arrival,
        };
        // Simultaneous arrivals at a server are taken in random order.
        let tie = self.rng_tie.gen::<u32>();
        self.events
            .schedule(reach, Class::Normal, tie, Event::ReachServer { piece });
        sent.sent
    }

    /// Sends the next block of a process that orders its blocks. The process
    /// does one transfer at a time: a write block's successor goes once the
    /// block has left the client's NIC; a read block's once its data has
    /// come back (see `response`).
    fn send_block(&mut self, rank: u32, now: Time) {
        let Some(piece) = self.ranks[rank as usize].blocks.pop() else {
            return;
        };
        let is_write = self.pieces[piece as usize].op == Op::Write;
        let sent = self.send_request(piece, now);
        if is_write && !self.ranks[rank as usize].blocks.is_empty() {
            self.events
                .schedule(sent, Class::Normal, 0, Event::SendBlock { rank });
        }
    }

    fn alloc_piece(&mut self, p: Piece) -> u32 {
        match self.free_pieces.pop() {
            Some(i) => {
                self.pieces[i as usize] = p;
                i
            }
            None => {
                self.pieces.push(p);
                (self.pieces.len() - 1) as u32
            }
        }
    }

    fn reach_server(&mut self, piece: u32, now: Time) {
        let p = &mut self.pieces[piece as usize];
        let wire = self.net.header_bytes() + if p.op == Op::Write { p.bytes } else { 0 };
        let server = &mut self.servers[p.server as usize];
        let streamed = self.net.streamed(wire).filter(|_| p.op == Op::Write);
        let done = match streamed {
            // The server may start on a streamed write once its first
            // buffer is in; the disk cannot finish before its last is.
            Some(behind) => {
                let client = self.net.client_bandwidth().transfer_time(behind);
                let full = self.net.receive(
                    now + client,
                    wire,
                    &mut server.nic,
                    self.net.server_bandwidth(),
                );
                p.data_in = full;
                full.saturating_sub(self.net.server_bandwidth().transfer_time(behind))
                    .max(now)
            }
            None => self
                .net
                .receive(now, wire, &mut server.nic, self.net.server_bandwidth()),
        };
        if done == now {
            self.arrive(piece, now);
        } else {
            self.events
                .schedule(done, Class::Normal, 0, Event::Arrive { piece });
        }
    }

    fn arrive(&mut self, piece: u32, now: Time) {
        let p = &mut self.pieces[piece as usize];
        p.arrive = now;
        let Some(mut req) = p.req.take() else { return };
        req.id = RequestId(piece as u64);
        let server = p.server;
        let s = &mut self.servers[server as usize];
        s.driver.enqueue(req, now);
        if let Some(t) = s.timeline.as_mut() {
            t[self.ranks[p.rank as usize].app as usize].enqueued(now);
        }
        let queued = s.driver.queued();
        s.max_queue = s.max_queue.max(queued);
        let poll = self.sc.cluster.poll_interval;
        if !poll.is_zero() && s.driver.in_flight() == 0 && queued == 1 && !s.kick_pending {
            // Idle: pick this request up with whatever else arrives within the poll interval.
            s.kick_pending = true;
            self.events
                .schedule(now + poll, Class::Late, 0, Event::Kick { server });
        } else if s.driver.dispatch_would_act() {
            self.kick(server);
        }
    }

    /// Asks the server to dispatch once everything at this instant has
    /// happened (after the event being handled: `flush_kicks`).
    fn kick(&mut self, server: u32) {
        let s = &mut self.servers[server as usize];
        if !s.kick_pending {
            s.kick_pending = true;
            self.kicks.push(server);
        }
    }

    fn dispatch(&mut self, server: u32, now: Time) {
        let s = &mut self.servers[server as usize];
        let elevator = s.elevator;
        s.kick_pending = false;
        if s.wakeup == Some(now) {
            s.wakeup = None;
        }
        self.dispatched.clear();
        s.driver.dispatch(now, &mut self.dispatched);
        for (req, ticket) in self.dispatched.drain(..) {
            let piece = req.id.0 as u32;
            let p = &mut self.pieces[piece as usize];
            if let Some(t) = s.timeline.as_mut() {
                t[self.ranks[p.rank as usize].app as usize].dispatched(now);
            }
            let base = object_base(&self.sc.cluster.device, self.seed, p.file, p.server);
            if let Some(at) = s.device.cached_until(now, base, &req) {
                // In the server's cache: no disk time.
                p.start = now;
                p.cached = true;
                p.req = Some(req);
                p.ticket = Some(ticket);
                self.events
                    .schedule(at, Class::Normal, 0, Event::DeviceDone { piece });
                continue;
            }
            if elevator && req.op.is_data() {
                // The disk takes it when the elevator picks it.
                let address = base.wrapping_add(req.offset);
                s.disk_waiting.push(DiskWait {
                    piece,
                    address,
                    arrived: now,
                });
                p.req = Some(req);
                p.ticket = Some(ticket);
                continue;
            }
            let done = match req.op {
                Op::Meta(op) => s
                    .device
                    .start_metadata(now, self.sc.cluster.metadata.costs.of(op)),
                Op::Read | Op::Write => s
                    .device
                    .start(now, base, &req, &mut self.rng_dev)
                    .max(p.data_in),
            };
            s.busy += done - now.max(s.device_free);
            s.device_free = s.device_free.max(done);
            p.start = now;
            p.req = Some(req);
            p.ticket = Some(ticket);
            self.events
                .schedule(done, Class::Normal, 0, Event::DeviceDone { piece });
        }
        if let Some(at) = s.driver.next_wakeup(now) {
            // One pending wakeup suffices: when it fires the queue is asked again.
            if at > now && s.wakeup.is_none_or(|w| at < w) {
                s.wakeup = Some(at);
                self.events
                    .schedule(at, Class::Late, 0, Event::Kick { server });
            }
        }
        if elevator {
            self.start_disk(server, now);
        }
    }

    /// Under the elevator: if the disk is free, starts the request it picks.
    fn start_disk(&mut self, server: u32, now: Time) {
        let DeviceConfig::Hdd(cfg) = &self.sc.cluster.device else {
            return;
        };
        let s = &mut self.servers[server as usize];
        if s.disk_busy || s.disk_waiting.is_empty() {
            return;
        }
        let Device::Hdd(disk) = &s.device else {
            return;
        };
        let i = elevator_pick(&s.disk_waiting, disk.head(), now, cfg.deadline);
        let DiskWait { piece, .. } = s.disk_waiting.remove(i);
        let p = &mut self.pieces[piece as usize];
        let Some(req) = p.req.as_ref() else { return };
        let base = object_base(&self.sc.cluster.device, self.seed, p.file, p.server);
        let done = s
            .device
            .start(now, base, req, &mut self.rng_dev)
            .max(p.data_in);
        s.busy += done - now.max(s.device_free);
        s.device_free = s.device_free.max(done);
        s.disk_busy = true;
        p.start = now;
        self.events
            .schedule(done, Class::Normal, 0, Event::DeviceDone { piece });
    }

    fn device_done(&mut self, piece: u32, now: Time) {
        let p = &mut self.pieces[piece as usize];
        p.done = now;
        let (server, rank, bytes, op, cached) = (p.server, p.rank, p.bytes, p.op, p.cached);
        let is_meta = !op.is_data();
        let running = p.req.take().zip(p.ticket.take());
        let s = &mut self.servers[server as usize];
        if let Some((req, ticket)) = running {
            if let Some(report) = s.driver.complete(&req, ticket, now) {
                s.reports_sent += 1;
                self.send_report(server, report, now);
            }
        }
        let s = &mut self.servers[server as usize];
        s.requests += 1;
        s.metadata_ops += is_meta as u64;
        s.bytes += bytes;
        let app = self.ranks[rank as usize].app;
        let f = s.finish.entry(app).or_insert(AppAtServer {
            first: now,
            last: now,
            op: 0,
        });
        f.last = now;
        let a = &mut self.apps[app as usize];
        if self.sc.apps[a.spec].barrier && f.op != a.next_call + 1 {
            // The operation's first piece to finish here.
            f.op = a.next_call + 1;
            a.op_servers.push(server);
        }
        if let Some(t) = a.timeline.as_mut() {
            t.served(now, bytes, is_meta);
        }
        if let Some(t) = s.timeline.as_mut() {
            t[app as usize].bins.served(now, bytes, is_meta);
        }
        let instant = self.net.is_instant();
        if !instant {
            let wire = self.net.header_bytes() + if op == Op::Read { bytes } else { 0 };
            let reply_from = if op == Op::Read {
                self.net
                    .reply_start(self.pieces[piece as usize].start, now, wire)
            } else {
                now
            };
            let sent = self.net.send(
                reply_from,
                wire,
                End {
                    nic: &mut s.nic,
                    bandwidth: self.net.server_bandwidth(),
                },
                End {
                    nic: &mut self.clients[rank as usize],
                    bandwidth: self.net.client_bandwidth(),
                },
                &mut self.rng_net,
            );
            self.events
                .schedule(sent.arrival, Class::Normal, 0, Event::ReachClient { piece });
        }
        self.kick(server);
        if !is_meta && !cached && self.servers[server as usize].elevator {
            self.servers[server as usize].disk_busy = false;
            self.start_disk(server, now);
        }
        if instant {
            // No network: the reply is back now, once the server has moved
            // on (the process's next request may come to this server).
            self.reach_client(piece, now);
        }
    }

    fn reach_client(&mut self, piece: u32, now: Time) {
        let p = &self.pieces[piece as usize];
        let wire = self.net.header_bytes() + if p.op == Op::Read { p.bytes } else { 0 };
        let done = self.net.receive(
            now,
            wire,
            &mut self.clients[p.rank as usize],
            self.net.client_bandwidth(),
        );
        if done == now {
            self.response(piece, now);
        } else {
            self.events
                .schedule(done, Class::Normal, 0, Event::Response { piece });
        }
    }

    fn response(&mut self, piece: u32, now: Time) {
        let p = &self.pieces[piece as usize];
        let (rank, bytes, is_meta, is_read) = (p.rank, p.bytes, !p.op.is_data(), p.op == Op::Read);
        let batch = p.batch;
        if let Some(detail) = self.detail.as_mut() {
            detail.push(PieceRecord {
                app: self.ranks[rank as usize].app,
                rank: self.ranks[rank as usize].rank,
                call: p.call,
                server: p.server,
                op: p.op,
                bytes,
                issue: p.issue,
                arrive: p.arrive,
                start: p.start,
                done: p.done,
                response: now,
            });
        }
        self.free_pieces.push(piece);
        let rs = &mut self.ranks[rank as usize];
        let a = &mut self.apps[rs.app as usize];
        a.pieces += 1;
        if batch != collective::NO_BATCH {
            // A collective call counts the bytes it was asked for when it
            // ends (its plan may read some twice or exchange them).
            return self.batch_piece_done(rank, batch, now);
        }
        a.bytes += bytes;
        a.metadata_ops += is_meta as u64;
        rs.pending -= 1;
        if rs.pending > 0 {
            if is_read && !rs.blocks.is_empty() {
                self.send_block(rank, now);
            }
            return;
        }
        if rs.steps.is_empty() {
            self.call_done(rank, now);
        } else {
            self.issue_step(rank, now);
        }
    }

    /// The rank's current call has finished all its steps.
    fn call_done(&mut self, rank: u32, now: Time) {
        let rs = &mut self.ranks[rank as usize];
        let app = rs.app;
        let a = &mut self.apps[app as usize];
        let spec = &self.sc.apps[a.spec];
        if spec.barrier {
            a.ranks_pending -= 1;
            if a.ranks_pending == 0 {
                self.operation_done(app, now);
            }
        } else {
            a.completions.push((now - rs.issue).as_secs_f64());
            rs.call += 1;
            if let Some(p) = self.progress {
                p.add(1);
            }
            if rs.call < spec.calls_of(rs.rank) {
                self.events.schedule(
                    spec.issue_time(rs.rank, rs.call, now),
                    Class::Normal,
                    0,
                    Event::Call { rank },
                );
            } else {
                a.ranks_finished += 1;
                if a.ranks_finished == spec.processes {
                    a.end = now;
                }
            }
        }
    }

    fn operation_done(&mut self, app: u32, now: Time) {
        let a = &mut self.apps[app as usize];
        let spec = &self.sc.apps[a.spec];
        a.completions.push((now - a.op_issue).as_secs_f64());
        if let Some(call) = a.collective.take() {
            a.bytes += call.requested();
        }
        let issue = a.op_issue;
        // The buffer is reused from operation to operation.
        let mut finishes = std::mem::take(&mut self.finishes);
        finishes.clear();
        finishes.extend(
            a.op_servers
                .iter()
                .map(|&s| (self.servers[s as usize].finish[&app].last - issue).as_secs_f64()),
        );
        if let Some(spread) = finish_spread(&finishes) {
            a.spreads.push(spread);
        }
        self.finishes = finishes;
        a.op_servers.clear();
        let call = a.next_call;
        a.next_call += 1;
        if a.next_call < spec.calls() {
            self.events.schedule(
                now + spec.compute_before(a.next_call),
                Class::Normal,
                0,
                Event::Release { app },
            );
        } else {
            a.end = now;
        }
        self.count_progress();
        if let Some(arbiter) = &mut self.arbiter {
            let a = &self.apps[app as usize];
            self.phases.push(PhaseRecord {
                app,
                phase: call,
                request_s: a.op_issue.as_secs_f64(),
                start_s: a.phase_start.as_secs_f64(),
                end_s: now.as_secs_f64(),
                bytes: spec.bytes_of_call(call) as f64,
                priority: a.phase_priority,
            });
            for (next, priority) in arbiter.end_phase(AppId(app), now) {
                self.grant(next.0, priority, now);
            }
        }
    }

    fn count_progress(&self) {
        if let Some(p) = self.progress {
            p.add(1);
        }
    }

    /// Sends a service report to every other server (one message each,
    /// taking the network latency; reports are small).
    fn send_report(&mut self, from: u32, report: ServiceReport, now: Time) {
        let idx = self.reports.len() as u32;
        self.reports.push(report);
        let at = now + self.net.latency();
        for server in (0..self.servers.len() as u32).filter(|&s| s != from) {
            self.events.schedule(
                at,
                Class::Normal,
                0,
                Event::ServiceReport {
                    server,
                    report: idx,
                },
            );
        }
    }

    fn results(mut self) -> RunResult {
        let makespan = self.apps.iter().map(|a| a.end).max().unwrap_or(Time::ZERO);
        let apps: Vec<AppResult> = self
            .apps
            .iter()
            .map(|a| {
                let spec = &self.sc.apps[a.spec];
                AppResult::new(
                    spec.label(),
                    spec.workload_name(),
                    a.instance,
                    a.app_id,
                    spec.processes,
                    a.completions.clone(),
                    &a.spreads,
                    a.bytes,
                    a.pieces,
                    a.metadata_ops,
                    a.start,
                    a.end,
                )
                .with_timeline(a.timeline.as_ref().map(|t| t.to_timeline(false)))
                .with_ior(spec.block_size.is_some().then(|| {
                    let moved = spec.bytes_per_call() * spec.processes as u64;
                    spec.ior_operations()
                        .iter()
                        .zip(&a.completions)
                        .map(|(op, &s)| IorOperation::new(*op == DataOp::Read, moved, s))
                        .collect()
                }))
                .with_mdtest(
                    (spec.workload == WorkloadKind::MdTest && spec.barrier).then(|| {
                        // Directory phases handle one item per process.
                        let items = spec.items.unwrap_or(1) as u64 * spec.processes as u64;
                        spec.md_steps()
                            .iter()
                            .zip(&a.completions)
                            .map(|(&phase, &seconds)| {
                                let items = match phase {
                                    MdStep::Mktestdir | MdStep::Rmtestdir | MdStep::Readdir => {
                                        spec.processes as u64
                                    }
                                    _ => items,
                                };
                                MdPhase {
                                    phase,
                                    items,
                                    seconds,
                                    ops_per_s: if seconds > 0.0 {
                                        items as f64 / seconds
                                    } else {
                                        0.0
                                    },
                                }
                            })
                            .collect()
                    }),
                )
            })
            .collect();
        let servers: Vec<ServerResult> = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| ServerResult {
                index: i as u32,
                role: s.role.name(),
                requests: s.requests,
                metadata_ops: s.metadata_ops,
                bytes: s.bytes,
                busy_s: s.busy.as_secs_f64(),
                utilization: if makespan.is_zero() {
                    0.0
                } else {
                    s.busy.as_secs_f64() / makespan.as_secs_f64()
                },
                max_queue: s.max_queue as u64,
                service_reports: s.reports_sent,
                timeline: s
                    .timeline
                    .as_ref()
                    .map(|per_app| per_app.iter().map(|t| t.bins.to_timeline(true)).collect()),
                apps: {
                    let mut apps: Vec<ServerAppResult> = s
                        .finish
                        .iter()
                        .map(|(&app, f)| ServerAppResult {
                            app,
                            first_finish_s: f.first.as_secs_f64(),
                            last_finish_s: f.last.as_secs_f64(),
                        })
                        .collect();
                    apps.sort_unstable_by_key(|a| a.app);
                    apps
                },
            })
            .collect();
        let pooled: Vec<f64> = self
            .apps
            .iter()
            .flat_map(|a| a.completions.iter().copied())
            .collect();
        let sc = self.sc;
        let job = sc.job.as_ref().map(|job| self.job_result(job));
        let mut result = RunResult::new(
            self.sc,
            self.seed,
            self.sc.resolved_policy(),
            apps,
            servers,
            makespan,
            self.events.processed(),
            pooled,
            self.detail,
        );
        result.job = job;
        result
    }

    /// The phases as they ran, and the window metrics the fluid mode
    /// computes, over the same applications seen as compute and I/O phases.
    fn job_result(&mut self, job: &JobConfig) -> JobResult {
        let run = FluidRun {
            phases: std::mem::take(&mut self.phases),
            app_end_s: self.apps.iter().map(|a| a.end.as_secs_f64()).collect(),
            events: self.events.processed(),
        };
        let waited: f64 = run.phases.iter().map(|p| p.start_s - p.request_s).sum();
        let metrics = job
            .window_s
            .zip(job.bandwidth)
            .map(|([begin, end], bandwidth)| {
                let apps: Vec<FluidApp> = self
                    .apps
                    .iter()
                    .map(|a| {
                        let spec = &self.sc.apps[a.spec];
                        FluidApp {
                            release_s: spec.start.as_secs_f64(),
                            phases: (0..spec.calls())
                                .map(|k| FluidPhase {
                                    compute_s: spec.compute_before(k).as_secs_f64(),
                                    io_bytes: spec.bytes_of_call(k) as f64,
                                })
                                .collect(),
                            info: spec.phase_info(),
                        }
                    })
                    .collect();
                window_metrics(&apps, &run, bandwidth.0, begin, end).expect(
                    "validated: the window ends after it begins, and there are applications",
                )
            });
        JobResult {
            phases: run.phases.len() as u64,
            mean_wait_s: if run.phases.is_empty() {
                0.0
            } else {
                waited / run.phases.len() as f64
            },
            metrics,
            phase_records: run.phases,
        }
    }
}

/// `req` narrowed to one server's piece of an access (a split piece or an
/// ordered block): its object `extents` of `bytes` in all, as list I/O
/// when there are several.
fn piece_request(mut req: Request, extents: &[Extent], bytes: u64) -> Request {
    req.offset = extents[0].offset;
    req.len = bytes;
    if extents.len() > 1 {
        req.segments = extents.to_vec();
    }
    req
}

fn assign_app_ids(sc: &Scenario, n: usize, rng: &mut ChaCha8Rng) -> Vec<u32> {
    match &sc.app_ids {
        AppIdRule::Random { min, max } => {
            let mut used = HashSet::new();
            (0..n)
                .map(|_| loop {
                    let id = rng.gen_range(*min..=*max);
                    if used.insert(id) {
                        break id;
                    }
                })
                .collect()
        }
        AppIdRule::Sequential { start } => (0..n as u32).map(|i| start + i).collect(),
        AppIdRule::Explicit => sc
            .apps
            .iter()
            .flat_map(|a| (0..a.instances).map(move |i| a.app_id.unwrap_or(0) + i))
            .collect(),
    }
}
