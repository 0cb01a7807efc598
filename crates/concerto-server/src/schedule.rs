//! The scheduling loop: concerto-core's [`Driver`] decides what runs and
//! when; this loop carries requests to the storage executor and back,
//! moves service reports to and from the peers, and keeps the statistics.
//!
//! Every request — data or metadata — enters the policy's queue with its
//! tags; up to D at a time are dispatched to the storage executor
//! (positioned I/O on object files, metadata transactions, on tokio's
//! blocking pool, at the throttle's pace when there is one), and each
//! completes in the queue when the storage is done with it. Its reply goes
//! straight from the storage thread to its connection's writer.
//!
//! Time for the policy is the Unix-epoch clock the clients stamp their
//! issue times with, advanced monotonically from the server's start, so
//! "now" and "issued at" are comparable and never go backwards.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit};

use concerto_core::server::{Driver, QosRules, ServiceReport, Ticket};
use concerto_core::{AppId, Op, Request, RequestId, Time};
use concerto_proto::auth::Principal;
use concerto_proto::{Envelope, ErrorKind, Member, Message, MetaRequest, Role};

use crate::coordinator::{CoordinatorHandle, PhaseCommand};
use crate::data::{ObjectOp, Placement};
use crate::members::Members;
use crate::metadata::{Caller, MetadataService, Outcome};
use crate::peers::PeerLink;
use crate::report_bounds::ReportBounds;
use crate::rules::{parse_policy, rules_toml, save_rules};
use crate::server::ServerConfig;
use crate::stats::{ArrivalOp, ConnectionCounters, Recorder, ServerStats};
use crate::storage::ObjectStore;
use crate::throttle::Throttle;

/// What the scheduling loop is asked to do.
pub(crate) enum Command {
    /// A request for the policy's queue.
    Submit(Job),
    /// A request served at once, outside the policy's queue: a data
    /// server asking whether a file exists before it creates an object
    /// (queued, it could wait behind the very writes that asked).
    Direct(Job),
    /// A connection ended (the metadata role releases what it held).
    ConnectionClosed(u64),
    SetPolicy {
        policy: String,
        reply: Reply,
    },
    Ping {
        reply: Reply,
    },
    Space {
        reply: Reply,
    },
    Stats {
        reply: oneshot::Sender<ServerStats>,
    },
    /// The arrival log after request `after`.
    Arrivals {
        after: u64,
        reply: Reply,
    },
    /// A peer's service report, to charge to the policy.
    Absorb {
        report: ServiceReport,
        /// The sender's address, and whether its report is bounded (a peer key's).
        from: (IpAddr, bool),
        reply: Reply,
    },
    SetCluster {
        servers: Vec<Member>,
        reply: Reply,
    },
    /// QoS rules, checked already; put in force (and saved) when `apply`.
    SetRules {
        rules: QosRules,
        apply: bool,
        reply: Reply,
    },
    GetRules {
        reply: Reply,
    },
    /// For the coordinator role.
    Phase(PhaseCommand),
    /// The coordinator's grants, for the policy.
    SetGrants {
        grants: Vec<(u32, f64)>,
        reply: Reply,
    },
}

/// A request as the policy sees it, what the storage does for it, and where the answer goes.
pub(crate) struct Job {
    pub req: Request,
    pub action: Action,
    pub reply: Reply,
    /// The connection it came on.
    pub conn: u64,
    /// Who its key is on files.
    pub who: Arc<Principal>,
    /// Its key's id (capabilities are bound to it).
    pub key_id: Arc<str>,
}

/// The storage executor's side of a request.
pub(crate) enum Action {
    Object(ObjectOp),
    Meta(MetaRequest),
}

impl Action {
    /// What the arrival log calls it.
    fn arrival_op(&self) -> ArrivalOp {
        match self {
            Action::Object(ObjectOp::Read { .. }) => ArrivalOp::Read,
            Action::Object(ObjectOp::Write { .. }) => ArrivalOp::Write,
            Action::Object(ObjectOp::Fsync) => ArrivalOp::Sync,
            _ => ArrivalOp::Metadata,
        }
    }
}

/// Where a request's answer goes: straight onto its connection's outgoing
/// frames under the request's id, from whichever thread finishes it. One
/// dropped unanswered (the server stopping) answers that it was not done.
pub(crate) struct Reply {
    pub id: u64,
    pub out: Option<mpsc::UnboundedSender<Outgoing>>,
    /// The request's share of its connection's memory budget, given back
    /// once the reply is written.
    pub permit: Option<Held>,
}

/// A frame for a connection's writer, with the budget it gives back once
/// written.
pub(crate) type Outgoing = (Envelope, Option<Held>);

/// What a request holds, until its reply is written, of its connection's,
/// its address's, its key's and the server's memory budgets.
pub(crate) type Held = [OwnedSemaphorePermit; 4];

impl Reply {
    pub fn send(mut self, message: Message) {
        if let Some(out) = self.out.take() {
            let _ = out.send((Envelope::new(self.id, message), self.permit.take()));
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if let Some(out) = self.out.take() {
            let error = Message::Error {
                kind: ErrorKind::Io,
                message: "server is shutting down".into(),
            };
            let _ = out.send((Envelope::new(self.id, error), self.permit.take()));
        }
    }
}

/// What the storage executor works on.
pub(crate) struct Backend {
    pub objects: Option<Arc<ObjectStore>>,
    pub metadata: Option<Arc<MetadataService>>,
    /// The coordinator role (its own task; phase requests go there).
    pub coordinator: Option<CoordinatorHandle>,
    pub throttle: Option<Throttle>,
    pub members: Arc<Members>,
}

/// An error reply for a request the server cannot take as asked.
fn invalid(message: impl Into<String>) -> Message {
    Message::Error {
        kind: ErrorKind::Invalid,
        message: message.into(),
    }
}

impl Backend {
    /// Runs a dispatched request on the storage executor, at the
    /// throttle's pace when there is one.
    fn execute(&self, action: Action, at: Placement, caller: Caller, now_ns: u64) -> Outcome {
        match action {
            Action::Meta(op) => match &self.metadata {
                None => Outcome::Now(invalid("this server has no metadata role")),
                Some(service) => match &self.throttle {
                    Some(t) => t.metadata(|| service.apply(&op, caller, now_ns)),
                    None => service.apply(&op, caller, now_ns),
                },
            },
            Action::Object(op) => Outcome::Now(match &self.objects {
                None => invalid("this server has no data role"),
                Some(objects) => op.execute(objects, self.throttle.as_ref(), at),
            }),
        }
    }

    /// A metadata request run on the scheduling loop itself, when it is
    /// quick: no throttle to pace it, and the store not held by a commit.
    /// Spares the hop to a storage thread and back, which is most of what
    /// a namespace operation costs on a loopback cluster.
    fn execute_inline(
        &self,
        action: &Action,
        at: Placement,
        caller: Caller,
        now_ns: u64,
    ) -> Option<Outcome> {
        if self.throttle.is_some() {
            return None;
        }
        match (action, &self.metadata, &self.objects) {
            (Action::Meta(op), Some(service), _) => service.apply_if_free(op, caller, now_ns),
            // A small read of pages in memory (nothing waits for the disk on the loop).
            (Action::Object(op), _, Some(objects)) => {
                op.execute_if_cached(objects, at).map(Outcome::Now)
            }
            _ => None,
        }
    }

    /// A request served outside the queue.
    fn execute_direct(&self, action: Action) -> Message {
        match (action, &self.metadata) {
            (Action::Meta(MetaRequest::Exists { inode }), Some(service)) => service.exists(inode),
            _ => invalid("this request needs the metadata role"),
        }
    }
}

/// Epoch-aligned monotonic clock.
struct Clock {
    epoch_at_start: u64,
    start: Instant,
}

impl Clock {
    fn new() -> Clock {
        let epoch_at_start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Clock {
            epoch_at_start,
            start: Instant::now(),
        }
    }
    fn now(&self) -> Time {
        Time::from_nanos(self.epoch_at_start + self.start.elapsed().as_nanos() as u64)
    }
}

/// A request on the storage (its reply already travels with the work).
struct InFlight {
    req: Request,
    ticket: Ticket,
    arrived: Time,
}

/// A request in the policy's queue: what to do once dispatched.
struct Waiting {
    action: Action,
    reply: Reply,
    arrived: Time,
    conn: u64,
    who: Arc<Principal>,
    key_id: Arc<str>,
}

/// A request the storage finished: which, and the bytes it moved.
struct Finished {
    id: u64,
    moved: u64,
}

/// The loop's state besides the policy: what it carries and counts.
struct Loop {
    cfg: ServerConfig,
    addr: SocketAddr,
    clock: Clock,
    backend: Arc<Backend>,
    rules: QosRules,
    peers: PeerLink,
    connections: Arc<ConnectionCounters>,
    report_bounds: ReportBounds,
    waiting: HashMap<u64, Waiting>,
    in_flight: HashMap<u64, InFlight>,
    recorder: Recorder,
    done_tx: mpsc::UnboundedSender<Finished>,
    next_id: u64,
}

pub(crate) async fn schedule(
    cfg: ServerConfig,
    addr: SocketAddr,
    backend: Backend,
    rules: QosRules,
    connections: Arc<ConnectionCounters>,
    mut rx: mpsc::Receiver<Command>,
    mut stopped: watch::Receiver<bool>,
) {
    let clock = Clock::new();
    let capacity = cfg.capacity;
    let mut driver = Driver::new(&cfg.policy, cfg.device_defaults());
    driver.set_rules(&rules, clock.now());
    let peers = PeerLink::start(addr, backend.members.data_peers(), cfg.keys.clone());
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Finished>();
    let mut state = Loop {
        recorder: Recorder::new(clock.now()),
        cfg,
        addr,
        clock,
        backend: Arc::new(backend),
        rules,
        peers,
        connections,
        report_bounds: ReportBounds::new(capacity),
        waiting: HashMap::new(),
        in_flight: HashMap::new(),
        done_tx,
        next_id: 0,
    };
    let mut started = Vec::new();
    loop {
        let now = state.clock.now();
        state.recorder.advance(now);
        started.clear();
        driver.dispatch(now, &mut started);
        for (req, ticket) in started.drain(..) {
            state.start(req, ticket, now);
        }
        state
            .recorder
            .set_free_slots(driver.waiting_with_free_slots());
        let sleep = driver.next_wakeup(now).map(|at| {
            std::time::Duration::from_nanos(at.saturating_sub(state.clock.now()).as_nanos())
        });
        tokio::select! {
            // Completions before commands: a command that follows a reply
            // (statistics, a policy switch) sees that request finished.
            biased;
            Some(Finished { id, moved }) = done_rx.recv() => state.finished(&mut driver, id, moved),
            cmd = rx.recv() => match cmd {
                None => break,
                Some(cmd) => state.command(&mut driver, cmd),
            },
            _ = tokio::time::sleep(sleep.unwrap_or_default()), if sleep.is_some() => {}
            _ = stopped.changed() => break,
        }
    }
    if let Some(service) = &state.backend.metadata {
        service.close();
    }
}

impl Loop {
    /// Holds a peer's service report to what the servers at its address
    /// could have served, and its weights to those this server knows
    /// ([`crate::report_bounds`]); what was cut is counted and logged.
    fn bound_report(
        &mut self,
        driver: &Driver,
        from: IpAddr,
        report: &mut ServiceReport,
    ) -> Result<(), String> {
        let servers = self.backend.members.map().map_or(0, |m| {
            m.members
                .iter()
                .filter(|s| s.roles.contains(&Role::Data) && s.address.ip() == from)
                .count()
        });
        let ring = self.cfg.keys.ring();
        let others = ring
            .keys()
            .iter()
            .filter_map(|k| k.weight)
            .chain(self.rules.rules.iter().filter_map(|r| r.weight));
        let priorities = driver.grants().into_iter().map(|(_, p)| p);
        let known = self.report_bounds.known_weights(others, priorities);
        let now = self.clock.now();
        let trimmed = self
            .report_bounds
            .bound(from, servers, known, report, now)?;
        if trimmed != Default::default() {
            eprintln!(
                "concerto-server: service report from {from}: {} bytes over what its {servers} \
                 server(s) could serve dropped, {} weight(s) outside {known:?} moved into it",
                trimmed.bytes, trimmed.weights
            );
            self.recorder.report_trimmed(trimmed.bytes, trimmed.weights);
        }
        Ok(())
    }

    /// Sends a dispatched request to the storage executor.
    fn start(&mut self, req: Request, ticket: Ticket, now: Time) {
        self.recorder.started(req.id.0);
        self.recorder.dispatched(req.app.0);
        let id = req.id.0;
        let Some(w) = self.waiting.remove(&id) else {
            return;
        };
        let (backend, done) = (self.backend.clone(), self.done_tx.clone());
        let at = Placement {
            object: req.object.0,
            offset: req.offset,
            len: req.len,
            segments: req.segments.len().max(1),
        };
        let caller = Caller {
            conn: w.conn,
            who: w.who,
            key_id: w.key_id,
            tags: concerto_proto::Tags {
                app: req.app.0,
                rank: req.rank,
                issue_ns: req.issue_time.as_nanos(),
                weight: None,
            },
        };
        let now_ns = now.as_nanos();
        let writes = req.op == Op::Write;
        self.in_flight.insert(
            id,
            InFlight {
                req,
                ticket,
                arrived: w.arrived,
            },
        );
        let (action, reply) = (w.action, w.reply);
        // Bookkeeping first: once the client has its answer it may ask for
        // statistics, and those must already count this request (the loop
        // drains completions before commands).
        let finish = move |outcome: Outcome, reply: Reply| match outcome {
            Outcome::Now(message) => {
                let moved = match &message {
                    Message::Data { data } => data.len() as u64,
                    Message::Done if writes => at.len,
                    _ => 0,
                };
                let _ = done.send(Finished { id, moved });
                reply.send(message);
            }
            // The storage's part is done; what follows waits on other servers.
            Outcome::Later(then) => {
                let _ = done.send(Finished { id, moved: 0 });
                tokio::task::spawn_blocking(move || reply.send(then()));
            }
        };
        if let Some(outcome) = self
            .backend
            .execute_inline(&action, at, caller.clone(), now_ns)
        {
            return finish(outcome, reply);
        }
        tokio::task::spawn_blocking(move || {
            finish(backend.execute(action, at, caller, now_ns), reply)
        });
    }

    fn finished(&mut self, driver: &mut Driver, id: u64, moved: u64) {
        if let Some(f) = self.in_flight.remove(&id) {
            let now = self.clock.now();
            if let Some(report) = driver.complete(&f.req, f.ticket, now) {
                self.recorder.report_sent();
                self.peers.send(report);
            }
            self.recorder
                .completed(f.req.app.0, f.req.op, moved, now.saturating_sub(f.arrived));
        }
    }

    fn space(&self) -> crate::storage::DiskSpace {
        self.backend
            .objects
            .as_ref()
            .and_then(|o| o.space().ok())
            .unwrap_or(crate::storage::DiskSpace {
                total: 0,
                free: 0,
                available: 0,
                fsid: 0,
            })
    }

    fn command(&mut self, driver: &mut Driver, cmd: Command) {
        match cmd {
            Command::Submit(job) => self.submit(driver, job),
            Command::Direct(job) => self.direct(job),
            Command::ConnectionClosed(conn) => {
                if let Some(service) = &self.backend.metadata {
                    service.connection_closed(conn);
                }
            }
            Command::Space { reply } => {
                let space = self.space();
                reply.send(Message::SpaceReply {
                    total: space.total,
                    free: space.free,
                    available: space.available,
                    disk: crate::storage::disk_identity(space.fsid),
                });
            }
            Command::Ping { reply } => {
                reply.send(Message::Pong {
                    policy: driver.policy().name().to_string(),
                    roles: self.cfg.roles.clone(),
                });
            }
            Command::SetPolicy { policy, reply } => {
                reply.send(match parse_policy(&policy) {
                    Ok(p) => Message::Switched {
                        retiring: driver.switch(&p),
                    },
                    Err(message) => invalid(message),
                });
            }
            Command::Absorb {
                report,
                from,
                reply,
            } => reply.send(self.absorb(driver, report, from)),
            Command::SetRules {
                rules,
                apply,
                reply,
            } => reply.send(self.set_rules(driver, rules, apply)),
            Command::Phase(cmd) => self.phase(cmd),
            Command::SetGrants { grants, reply } => {
                driver.set_grants(grants.into_iter().map(|(app, p)| (AppId(app), p)));
                reply.send(Message::Done);
            }
            Command::GetRules { reply } => {
                reply.send(Message::RulesReply {
                    rules: rules_toml(&self.rules),
                });
            }
            Command::SetCluster { servers, reply } => reply.send(self.set_cluster(servers)),
            Command::Arrivals { after, reply } => {
                let arrivals = self.recorder.arrivals_after(after);
                reply.send(Message::ArrivalLog { arrivals });
            }
            Command::Stats { reply } => {
                let _ = reply.send(self.stats(driver));
            }
        }
    }

    /// A request into the policy's queue.
    fn submit(&mut self, driver: &mut Driver, mut job: Job) {
        self.next_id += 1;
        job.req.id = RequestId(self.next_id);
        let arrived = self.clock.now();
        self.recorder.arrived(&job.req, job.action.arrival_op());
        // The client's clock is its word only within the skew allowed.
        job.req.issue_time = job
            .req
            .issue_time
            .clamp(arrived.saturating_sub(self.cfg.issue_skew), arrived);
        self.recorder.advance(arrived);
        self.recorder.enqueued(job.req.app.0);
        self.waiting.insert(
            self.next_id,
            Waiting {
                action: job.action,
                reply: job.reply,
                arrived,
                conn: job.conn,
                who: job.who,
                key_id: job.key_id,
            },
        );
        self.report_bounds.saw_weight(job.req.weight);
        driver.enqueue(job.req, arrived);
    }

    /// A request served outside the policy's queue: here if it is quick,
    /// else on a storage thread.
    fn direct(&mut self, job: Job) {
        let caller = Caller {
            conn: job.conn,
            who: job.who,
            key_id: job.key_id,
            tags: concerto_proto::Tags {
                app: job.req.app.0,
                rank: job.req.rank,
                issue_ns: 0,
                weight: None,
            },
        };
        let at = Placement {
            object: 0,
            offset: 0,
            len: 0,
            segments: 1,
        };
        match self.backend.execute_inline(&job.action, at, caller, 0) {
            Some(Outcome::Now(message)) => job.reply.send(message),
            _ => {
                let backend = self.backend.clone();
                tokio::task::spawn_blocking(move || {
                    job.reply.send(backend.execute_direct(job.action))
                });
            }
        }
    }

    /// A peer's service report charged to the policy; a peer key's report
    /// is bounded first by what this server knows.
    fn absorb(
        &mut self,
        driver: &mut Driver,
        mut report: ServiceReport,
        (from, bounded): (IpAddr, bool),
    ) -> Message {
        if bounded {
            if let Err(message) = self.bound_report(driver, from, &mut report) {
                eprintln!("concerto-server: {message}");
                return Message::Error {
                    kind: ErrorKind::Denied,
                    message,
                };
            }
        }
        driver.absorb(&report);
        self.recorder.report_received();
        Message::Done
    }

    fn set_rules(&mut self, driver: &mut Driver, new: QosRules, apply: bool) -> Message {
        if !apply {
            return Message::Done;
        }
        // Saved first: rules in force that a restart would lose would be
        // a surprise.
        match save_rules(&self.cfg.data_dir, &new) {
            Ok(()) => {
                driver.set_rules(&new, self.clock.now());
                self.rules = new;
                Message::Done
            }
            Err(e) => Message::Error {
                kind: ErrorKind::Io,
                message: e.to_string(),
            },
        }
    }

    /// A job's I/O phase, for the coordinator role.
    fn phase(&self, cmd: PhaseCommand) {
        match &self.backend.coordinator {
            Some(c) => c.send(cmd),
            None => {
                let (PhaseCommand::Begin { reply, .. }
                | PhaseCommand::End { reply, .. }
                | PhaseCommand::Switch { reply, .. }) = cmd;
                reply.send(invalid(format!(
                    "server {} has no coordinator role: ask the cluster's coordinator",
                    self.addr
                )));
            }
        }
    }

    fn set_cluster(&mut self, servers: Vec<Member>) -> Message {
        match crate::members::save(&self.cfg.data_dir, &servers)
            .and_then(|()| self.backend.members.set(servers))
        {
            Ok(()) => {
                self.peers.set(self.backend.members.data_peers());
                Message::Done
            }
            Err(message) => invalid(message),
        }
    }

    fn stats(&mut self, driver: &Driver) -> ServerStats {
        let now = self.clock.now();
        self.recorder.advance(now);
        let space = self.space();
        ServerStats {
            address: self.addr.to_string(),
            roles: self.cfg.roles.clone(),
            policy: driver.policy().name().to_string(),
            throttle: self.backend.throttle.as_ref().map(|t| t.describe()),
            uptime_s: self.recorder.uptime_s(now),
            queued: driver.queued() as u64,
            in_flight: self.in_flight.len() as u64,
            apps: self.recorder.apps(),
            retired: self.recorder.retired(),
            latency: self.recorder.latency(),
            reports: self.recorder.reports(),
            connections: self.connections.counts(),
            space_total: space.total,
            space_free: space.available,
            grants: driver.grants().into_iter().map(|(a, p)| (a.0, p)).collect(),
            coordinator: self.backend.coordinator.as_ref().map(|c| c.stats()),
        }
    }
}
