//! The simulated parallel file system: applications whose processes issue
//! striped I/O calls, a network, and data servers each running one
//! `RequestQueue` from concerto-core in front of one device.
//!
//! The life of one piece of one call (one process's part on one server):
//! `issue` → wire → `ReachServer` (received, then enqueued) → `Kick` (the
//! queue dispatches into free device slots) → `DeviceDone` (complete; reply
//! sent) → `ReachClient` (received: the piece is done). A call is done when all its pieces have
//! replied; with a barrier, an operation is done when every process's call
//! is, and the next one is released after the compute time.

use std::collections::HashSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use concerto_core::metrics::finish_spread;
use concerto_core::server::{RequestQueue, ServiceReport};
use concerto_core::{AppId, ObjectId, Op, Request, RequestId, StripeLayout, Time};

use crate::config::{AppIdRule, DataOp, DeviceConfig, Placement, Scenario};
use crate::device::Device;
use crate::engine::{Class, EventQueue};
use crate::network::{Network, Nic};
use crate::results::{AppResult, PieceRecord, RunResult, ServerAppResult, ServerResult};
use crate::workload;
use crate::Progress;

#[derive(Clone, Copy, Debug)]
enum Event {
    /// Barrier released: every process of the application issues its next call.
    Release { app: u32 },
    /// One process issues its next call (applications without a barrier).
    Call { rank: u32 },
    /// A request reaches its server's NIC (uncontended arrival time).
    ReachServer { piece: u32 },
    /// A reply reaches its client's NIC.
    ReachClient { piece: u32 },
    /// The server decides what to start; runs after all other events at its instant.
    Kick { server: u32 },
    DeviceDone { piece: u32 },
    /// A request has fully arrived after waiting for the server's NIC.
    Arrive { piece: u32 },
    /// A reply has fully arrived after waiting for the client's NIC.
    Response { piece: u32 },
    /// Another server's service report (total-service sharing) arrives.
    ServiceReport { server: u32, report: u32 },
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
    /// Per server: when this operation's last piece there finished.
    op_finish: Vec<Time>,
    op_servers: Vec<u32>,
    bytes: u64,
    pieces: u64,
    start: Time,
    end: Time,
    /// Bytes and requests served per timeline bin (when the output asks for one).
    timeline: Vec<(u64, u64)>,
}

struct RankState {
    app: u32,
    rank: u32,
    pending: u32,
    call: u32,
    issue: Time,
}

struct FileState {
    layout: StripeLayout,
    /// Where this file's object starts on each server's device.
    base: u64,
}

struct ServerState {
    queue: Box<dyn RequestQueue>,
    device: Device,
    nic: Nic,
    slots_used: u32,
    kick_pending: bool,
    /// The earliest wakeup the queue asked for that is still scheduled.
    wakeup: Option<Time>,
    requests: u64,
    bytes: u64,
    busy: Time,
    device_free: Time,
    max_queue: usize,
    /// Per application: first and last finish time of a piece here.
    finish: Vec<(Time, Time)>,
    reports_sent: u64,
}

struct Piece {
    rank: u32,
    server: u32,
    file: u32,
    call: u32,
    bytes: u64,
    issue: Time,
    arrive: Time,
    start: Time,
    done: Time,
    req: Option<Request>,
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
    dispatched: Vec<Request>,
    detail: Option<Vec<PieceRecord>>,
    progress: Option<&'a Progress>,
    /// Service reports in flight between servers, by index.
    reports: Vec<ServiceReport>,
}

impl<'a> Simulation<'a> {
    /// Sets up a run of a validated scenario with `seed`.
    pub fn new(sc: &'a Scenario, seed: u64, progress: Option<&'a Progress>) -> Simulation<'a> {
        let cl = &sc.cluster;
        let mut setup = rng(seed, STREAM_SETUP);
        let policy = sc.resolved_policy();
        let default_window = cl.device.default_window();
        let n_instances: usize = sc.apps.iter().map(|a| a.instances as usize).sum();

        let servers = (0..cl.servers)
            .map(|_| ServerState {
                queue: policy.build(default_window),
                device: Device::new(&cl.device),
                nic: Nic::default(),
                slots_used: 0,
                kick_pending: false,
                wakeup: None,
                requests: 0,
                bytes: 0,
                busy: Time::ZERO,
                device_free: Time::ZERO,
                max_queue: 0,
                finish: vec![(Time::MAX, Time::ZERO); n_instances],
                reports_sent: 0,
            })
            .collect();

        let ids = assign_app_ids(sc, n_instances, &mut setup);
        let (spacing, capacity) = match &cl.device {
            DeviceConfig::Hdd(h) => (h.object_spacing.0, h.capacity.0.max(1)),
            _ => (0, 1),
        };
        let mut apps = Vec::with_capacity(n_instances);
        let mut ranks = Vec::new();
        let mut files = Vec::new();
        for (spec_idx, spec) in sc.apps.iter().enumerate() {
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
                    let layout = StripeLayout::round_robin(cl.stripe_unit.0, count, first, cl.servers)
                        .expect("validated: stripe unit > 0 and stripe count within the servers");
                    files.push(FileState { layout, base: (idx as u64).wrapping_mul(spacing) % capacity });
                    app_files.push(idx);
                }
                for rank in 0..spec.processes {
                    ranks.push(RankState { app: app_idx, rank, pending: 0, call: 0, issue: Time::ZERO });
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
                    completions: Vec::new(),
                    spreads: Vec::new(),
                    op_finish: Vec::new(),
                    op_servers: Vec::new(),
                    bytes: 0,
                    pieces: 0,
                    start: spec.start,
                    timeline: Vec::new(),
                    end: spec.start,
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
            detail: sc.output.detail.then(Vec::new),
            progress,
            reports: Vec::new(),
        }
    }

    /// Runs until every application has finished; returns the results.
    pub fn run(mut self) -> RunResult {
        for (i, app) in self.apps.iter().enumerate() {
            let spec = &self.sc.apps[app.spec];
            if spec.barrier {
                self.events.schedule(spec.start, Class::Normal, 0, Event::Release { app: i as u32 });
            } else {
                for r in 0..spec.processes {
                    self.events.schedule(spec.start, Class::Normal, 0, Event::Call { rank: app.first_rank + r });
                }
            }
        }
        while let Some((now, event)) = self.events.pop() {
            match event {
                Event::Release { app } => self.release(app, now),
                Event::Call { rank } => self.issue_call(rank, now),
                Event::ReachServer { piece } => self.reach_server(piece, now),
                Event::Arrive { piece } => self.arrive(piece, now),
                Event::Kick { server } => self.dispatch(server, now),
                Event::DeviceDone { piece } => self.device_done(piece, now),
                Event::ReachClient { piece } => self.reach_client(piece, now),
                Event::Response { piece } => self.response(piece, now),
                Event::ServiceReport { server, report } => {
                    self.servers[server as usize].queue.absorb_service(&self.reports[report as usize]);
                }
            }
        }
        self.results()
    }

    fn release(&mut self, app: u32, now: Time) {
        let a = &mut self.apps[app as usize];
        let processes = self.sc.apps[a.spec].processes;
        a.op_issue = now;
        a.ranks_pending = processes;
        let first = a.first_rank;
        for r in 0..processes {
            self.issue_call(first + r, now);
        }
    }

    fn issue_call(&mut self, rank: u32, now: Time) {
        let rs = &self.ranks[rank as usize];
        let a = &self.apps[rs.app as usize];
        let spec = &self.sc.apps[a.spec];
        let call = if spec.barrier { a.next_call } else { rs.call };
        let access = workload::access(spec, rs.rank, call);
        let file = a.files[access.file as usize];
        let op = match spec.op {
            DataOp::Read => Op::Read,
            DataOp::Write => Op::Write,
        };
        let (app_id, local_rank) = (a.app_id, rs.rank);
        let pieces = self.files[file as usize].layout.split_extents(&access.extents);
        let rs = &mut self.ranks[rank as usize];
        rs.pending = pieces.len() as u32;
        rs.issue = now;
        let header = self.net.header_bytes();
        for p in pieces {
            let first = p.extents[0];
            let req = Request {
                id: RequestId(0),
                app: AppId(app_id),
                rank: local_rank,
                issue_time: now,
                op,
                object: ObjectId(file as u64),
                offset: first.offset,
                len: p.bytes,
                segments: if p.extents.len() > 1 { p.extents } else { Vec::new() },
                weight: Some(spec.weight),
            };
            let piece = self.alloc_piece(Piece {
                rank,
                server: p.server,
                file,
                call,
                bytes: p.bytes,
                issue: now,
                arrive: Time::ZERO,
                start: Time::ZERO,
                done: Time::ZERO,
                req: Some(req),
            });
            let wire = header + if op == Op::Write { p.bytes } else { 0 };
            let arrival =
                self.net.transmit(now, wire, &mut self.clients[rank as usize], self.net.client_bandwidth(), &mut self.rng_net);
            // Simultaneous arrivals at a server are taken in random order.
            let tie = self.rng_tie.gen::<u32>();
            self.events.schedule(arrival, Class::Normal, tie, Event::ReachServer { piece });
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
        let p = &self.pieces[piece as usize];
        let op_is_write = p.req.as_ref().is_some_and(|r| r.op == Op::Write);
        let wire = self.net.header_bytes() + if op_is_write { p.bytes } else { 0 };
        let server = &mut self.servers[p.server as usize];
        let done = self.net.receive(now, wire, &mut server.nic, self.net.server_bandwidth());
        if done == now {
            self.arrive(piece, now);
        } else {
            self.events.schedule(done, Class::Normal, 0, Event::Arrive { piece });
        }
    }

    fn arrive(&mut self, piece: u32, now: Time) {
        let p = &mut self.pieces[piece as usize];
        p.arrive = now;
        let Some(mut req) = p.req.take() else { return };
        req.id = RequestId(piece as u64);
        let server = p.server;
        let s = &mut self.servers[server as usize];
        s.queue.enqueue(req, now);
        s.max_queue = s.max_queue.max(s.queue.len());
        let poll = self.sc.cluster.poll_interval;
        if !poll.is_zero() && s.slots_used == 0 && s.queue.len() == 1 && !s.kick_pending {
            // Idle: pick this request up with whatever else arrives within the poll interval.
            s.kick_pending = true;
            self.events.schedule(now + poll, Class::Late, 0, Event::Kick { server });
        } else {
            self.kick(server, now);
        }
    }

    /// Asks the server to dispatch once everything at this instant has happened.
    fn kick(&mut self, server: u32, now: Time) {
        let s = &mut self.servers[server as usize];
        if !s.kick_pending {
            s.kick_pending = true;
            self.events.schedule(now, Class::Late, 0, Event::Kick { server });
        }
    }

    fn dispatch(&mut self, server: u32, now: Time) {
        let s = &mut self.servers[server as usize];
        let depth = s.queue.depth().unwrap_or(self.sc.cluster.depth);
        s.kick_pending = false;
        if s.wakeup == Some(now) {
            s.wakeup = None;
        }
        let free = depth.saturating_sub(s.slots_used);
        if free > 0 && !s.queue.is_empty() {
            self.dispatched.clear();
            s.queue.dispatch(now, free, &mut self.dispatched);
            for req in self.dispatched.drain(..) {
                s.slots_used += s.queue.slot_cost(&req);
                let piece = req.id.0 as u32;
                let p = &mut self.pieces[piece as usize];
                let base = self.files[p.file as usize].base;
                let done = s.device.start(now, base, &req, &mut self.rng_dev);
                s.busy += done - now.max(s.device_free);
                s.device_free = s.device_free.max(done);
                p.start = now;
                p.req = Some(req);
                self.events.schedule(done, Class::Normal, 0, Event::DeviceDone { piece });
            }
        }
        if let Some(at) = s.queue.next_wakeup(now) {
            // One pending wakeup suffices: when it fires the queue is asked again.
            if at > now && s.wakeup.map_or(true, |w| at < w) {
                s.wakeup = Some(at);
                self.events.schedule(at, Class::Late, 0, Event::Kick { server });
            }
        }
    }

    fn device_done(&mut self, piece: u32, now: Time) {
        let p = &mut self.pieces[piece as usize];
        p.done = now;
        let (server, rank, bytes) = (p.server, p.rank, p.bytes);
        let req = p.req.take();
        let s = &mut self.servers[server as usize];
        if let Some(req) = req {
            s.slots_used = s.slots_used.saturating_sub(s.queue.slot_cost(&req));
            s.queue.complete(&req, now);
        }
        if let Some(report) = s.queue.service_report(now) {
            s.reports_sent += 1;
            self.send_report(server, report, now);
        }
        let s = &mut self.servers[server as usize];
        s.requests += 1;
        s.bytes += bytes;
        let app = self.ranks[rank as usize].app;
        let f = &mut s.finish[app as usize];
        f.0 = f.0.min(now);
        f.1 = f.1.max(now);
        let a = &mut self.apps[app as usize];
        if let Some(width) = self.sc.output.timeline {
            let bin = (now.as_nanos() / width.as_nanos()) as usize;
            if a.timeline.len() <= bin {
                a.timeline.resize(bin + 1, (0, 0));
            }
            a.timeline[bin].0 += bytes;
            a.timeline[bin].1 += 1;
        }
        if self.sc.apps[a.spec].barrier {
            if a.op_finish.is_empty() {
                a.op_finish = vec![Time::MAX; self.sc.cluster.servers as usize];
            }
            if a.op_finish[server as usize] == Time::MAX {
                a.op_servers.push(server);
            }
            a.op_finish[server as usize] = now;
        }
        let op_is_read = self.sc.apps[a.spec].op == DataOp::Read;
        let wire = self.net.header_bytes() + if op_is_read { bytes } else { 0 };
        let arrival = self.net.transmit(now, wire, &mut s.nic, self.net.server_bandwidth(), &mut self.rng_net);
        self.events.schedule(arrival, Class::Normal, 0, Event::ReachClient { piece });
        self.kick(server, now);
    }

    fn reach_client(&mut self, piece: u32, now: Time) {
        let p = &self.pieces[piece as usize];
        let is_read = self.sc.apps[self.apps[self.ranks[p.rank as usize].app as usize].spec].op == DataOp::Read;
        let wire = self.net.header_bytes() + if is_read { p.bytes } else { 0 };
        let done = self.net.receive(now, wire, &mut self.clients[p.rank as usize], self.net.client_bandwidth());
        if done == now {
            self.response(piece, now);
        } else {
            self.events.schedule(done, Class::Normal, 0, Event::Response { piece });
        }
    }

    fn response(&mut self, piece: u32, now: Time) {
        let p = &self.pieces[piece as usize];
        let (rank, bytes) = (p.rank, p.bytes);
        if let Some(detail) = self.detail.as_mut() {
            detail.push(PieceRecord {
                app: self.ranks[rank as usize].app,
                rank: self.ranks[rank as usize].rank,
                call: p.call,
                server: p.server,
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
        let app = rs.app;
        let a = &mut self.apps[app as usize];
        a.bytes += bytes;
        a.pieces += 1;
        rs.pending -= 1;
        if rs.pending > 0 {
            return;
        }
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
            if rs.call < spec.requests {
                self.events.schedule(now + spec.compute_time, Class::Normal, 0, Event::Call { rank });
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
        let issue = a.op_issue;
        let finishes: Vec<f64> = a.op_servers.iter().map(|&s| (a.op_finish[s as usize] - issue).as_secs_f64()).collect();
        if let Some(spread) = finish_spread(&finishes) {
            a.spreads.push(spread);
        }
        for s in a.op_servers.drain(..) {
            a.op_finish[s as usize] = Time::MAX;
        }
        a.next_call += 1;
        if a.next_call < spec.requests {
            self.events.schedule(now + spec.compute_time, Class::Normal, 0, Event::Release { app });
        } else {
            a.end = now;
        }
        self.count_progress();
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
        let at = now + self.sc.cluster.network.latency;
        for server in (0..self.sc.cluster.servers).filter(|&s| s != from) {
            self.events.schedule(at, Class::Normal, 0, Event::ServiceReport { server, report: idx });
        }
    }

    fn results(self) -> RunResult {
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
                    a.start,
                    a.end,
                )
                .with_timeline(self.sc.output.timeline, &a.timeline)
            })
            .collect();
        let servers: Vec<ServerResult> = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| ServerResult {
                index: i as u32,
                requests: s.requests,
                bytes: s.bytes,
                busy_s: s.busy.as_secs_f64(),
                utilization: if makespan.is_zero() { 0.0 } else { s.busy.as_secs_f64() / makespan.as_secs_f64() },
                max_queue: s.max_queue as u64,
                service_reports: s.reports_sent,
                apps: s
                    .finish
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.0 != Time::MAX)
                    .map(|(app, f)| ServerAppResult { app: app as u32, first_finish_s: f.0.as_secs_f64(), last_finish_s: f.1.as_secs_f64() })
                    .collect(),
            })
            .collect();
        let pooled: Vec<f64> = self.apps.iter().flat_map(|a| a.completions.iter().copied()).collect();
        RunResult::new(self.sc, self.seed, self.sc.resolved_policy(), apps, servers, makespan, self.events.processed(), pooled, self.detail)
    }
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
