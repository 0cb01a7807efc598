//! The coordinator role: concerto-core's job-level arbiter (IO-SETS,
//! [`concerto_core::job::Sets`]) as a service, the same code the fluid and
//! request-level simulators run.
//!
//! An application asks to begin an I/O phase (`BeginPhase`) and is granted
//! at its set's priority or queued; ending its phase (`EndPhase`) may grant
//! the next of its set. Which set and priority come from the
//! administrator's set rule (`[coordinator.sets]`, SET-10 by default) and
//! from the application's characteristic time w_iter as the coordinator
//! measures it (the time between its phase starts, smoothed), never from
//! what a client claims. The application is the one its key names (a
//! tenant's job), as for every other request.
//!
//! Every grant and every place in a queue is held under a lease: a client
//! renews it by asking again (`BeginPhase` while granted or queued changes
//! nothing else), and one that dies or never ends its phase loses it when
//! the lease runs out, so no client holds a set for ever. A queued client's
//! `BeginPhase` waits here (up to the `wait_ms` it gives) for its grant, so
//! it learns of it without polling.
//!
//! The grants reach the data servers as a table ([`Message::SetGrants`],
//! sent with the ring's peer key whenever it changes and again every
//! [`GRANTS_REFRESH`], so a data server that restarts has it back soon);
//! there the SFQ family weighs a granted application's requests by its
//! priority ([`concerto_core::server::Driver::set_grants`]): bandwidth is
//! shared by priority between sets on the devices, and exclusive inside a
//! set here.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use concerto_core::job::{
    Decision, IoArbiter, PhaseConfig, PhaseDetector, PhaseInfo, SetRule, Sets,
};
use concerto_core::{AppId, Time};
use concerto_proto::stats::{CoordinatorStats, MeasuredJob, PhaseEntry};
use concerto_proto::{Message, Role};

use crate::members::Members;
use crate::schedule::Reply;

/// The coordinator's settings (`[coordinator]` in the server file).
#[derive(Clone, Debug, PartialEq)]
pub struct CoordinatorConfig {
    /// Which set an application goes to, and the set's priority.
    pub sets: SetRule,
    /// How long a grant or a place in a queue lasts unless renewed.
    pub lease: Duration,
    /// How w_iter samples are smoothed (`smoothing`; the gap settings are
    /// for detected phases).
    pub phases: PhaseConfig,
}

impl Default for CoordinatorConfig {
    fn default() -> CoordinatorConfig {
        CoordinatorConfig {
            sets: SetRule::Set10,
            lease: DEFAULT_LEASE,
            phases: PhaseConfig::default(),
        }
    }
}

/// The default lease: long beside a renewal every third of it, short
/// beside a job's run.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// How often the grants are sent to the data servers even when unchanged.
pub const GRANTS_REFRESH: Duration = Duration::from_secs(1);

/// Most applications whose w_iter the coordinator remembers between their
/// phases; the one seen the longest ago is forgotten first.
const MAX_REMEMBERED: usize = 4096;

/// What the coordinator is asked.
pub(crate) enum PhaseCommand {
    Begin {
        app: u32,
        wait: Duration,
        reply: Reply,
    },
    End {
        app: u32,
        reply: Reply,
    },
    /// A new set rule, live.
    Switch {
        rule: SetRule,
        reply: Reply,
    },
}

/// A set rule from TOML text (`kind = "set10"`, a table's entries ...),
/// validated; an error names the key (`sets.base: ...`).
pub fn parse_sets(text: &str) -> Result<SetRule, String> {
    let rule: SetRule = concerto_toml::parse(text).map_err(|e| format!("sets: {e}"))?;
    rule.validate().map_err(|e| e.within("sets"))?;
    Ok(rule)
}

/// The scheduling loop's handle on the coordinator task.
pub(crate) struct CoordinatorHandle {
    tx: mpsc::UnboundedSender<PhaseCommand>,
    stats: Arc<Mutex<CoordinatorStats>>,
}

impl CoordinatorHandle {
    /// Starts the coordinator and the task that sends its grants to the
    /// data servers of `members`' cluster map.
    pub(crate) fn start(
        cfg: CoordinatorConfig,
        members: Arc<Members>,
        stopped: watch::Receiver<bool>,
    ) -> CoordinatorHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let (grants_tx, grants_rx) = watch::channel(Vec::new());
        let stats = Arc::new(Mutex::new(CoordinatorStats::default()));
        let state = Coordinator::new(cfg, grants_tx, stats.clone());
        tokio::spawn(state.run(rx, stopped.clone()));
        tokio::spawn(push_grants(members, grants_rx, stopped));
        CoordinatorHandle { tx, stats }
    }

    pub(crate) fn send(&self, cmd: PhaseCommand) {
        let _ = self.tx.send(cmd);
    }

    pub(crate) fn stats(&self) -> CoordinatorStats {
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// An application granted or waiting.
struct Turn {
    granted: bool,
    /// Since it was granted, or since it asked.
    since: Instant,
    lease_until: Instant,
}

/// A `BeginPhase` waiting for its grant.
struct Waiter {
    reply: Reply,
    until: Instant,
}

struct Coordinator {
    cfg: CoordinatorConfig,
    arbiter: Sets,
    epoch: Instant,
    turns: BTreeMap<u32, Turn>,
    waiters: HashMap<u32, Vec<Waiter>>,
    /// Each application's phase starts, for its w_iter; and when it was last seen.
    detectors: HashMap<u32, (PhaseDetector, Instant)>,
    grants_tx: watch::Sender<Vec<(u32, f64)>>,
    stats: Arc<Mutex<CoordinatorStats>>,
    grants_total: u64,
    leases_expired: u64,
    /// Answers decided while handling one command or expiry, sent only
    /// after the statistics and grants are published: a client told it is
    /// granted (or that a switch is done) and then asking for statistics
    /// sees the state that answer came from.
    outbox: Vec<(Reply, Message)>,
}

impl Coordinator {
    fn new(
        cfg: CoordinatorConfig,
        grants_tx: watch::Sender<Vec<(u32, f64)>>,
        stats: Arc<Mutex<CoordinatorStats>>,
    ) -> Coordinator {
        let mut c = Coordinator {
            arbiter: Sets::new(cfg.sets.clone()),
            cfg,
            epoch: Instant::now(),
            turns: BTreeMap::new(),
            waiters: HashMap::new(),
            detectors: HashMap::new(),
            grants_tx,
            stats,
            grants_total: 0,
            leases_expired: 0,
            outbox: Vec::new(),
        };
        c.publish(Instant::now());
        c
    }

    /// Time as the arbiter takes it: since the coordinator started.
    fn time(&self, at: Instant) -> Time {
        Time::from_nanos(at.saturating_duration_since(self.epoch).as_nanos() as u64)
    }

    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<PhaseCommand>,
        mut stopped: watch::Receiver<bool>,
    ) {
        loop {
            let next = self.next_deadline();
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(cmd) => self.command(cmd, Instant::now()),
                    None => return,
                },
                _ = sleep_until(next), if next.is_some() => self.expire(Instant::now()),
                _ = stopped.changed() => return,
            }
        }
    }

    fn command(&mut self, cmd: PhaseCommand, now: Instant) {
        match cmd {
            PhaseCommand::Begin { app, wait, reply } => self.begin(app, wait, reply, now),
            PhaseCommand::End { app, reply } => {
                self.end(app, now);
                self.answer(reply, Message::Done);
            }
            PhaseCommand::Switch { rule, reply } => {
                self.switch(rule, now);
                self.answer(reply, Message::Done);
            }
        }
        self.publish(now);
    }

    /// Queues an answer for after the next `publish`.
    fn answer(&mut self, reply: Reply, message: Message) {
        self.outbox.push((reply, message));
    }

    fn begin(&mut self, app: u32, wait: Duration, reply: Reply, now: Instant) {
        let t = self.time(now);
        let info = match self.turns.get(&app) {
            // Asking again: the lease is renewed (below), nothing else changes.
            Some(_) => PhaseInfo::default(),
            None => {
                let phases = self.cfg.phases;
                let (detector, seen) = self
                    .detectors
                    .entry(app)
                    .or_insert_with(|| (PhaseDetector::new(phases), now));
                detector.phase_began(t);
                *seen = now;
                let info = PhaseInfo {
                    w_iter: detector.w_iter(),
                    group: None,
                };
                self.forget_old_detectors();
                info
            }
        };
        let decision = self.arbiter.begin_phase(AppId(app), t, &info);
        // A grant lasts a lease from this answer; a place in a queue lasts
        // while its client waits here for the grant, and a lease after
        // (the client, alive while it waits, asks again once its wait is
        // answered). Not the longer of the lease and the wait for both: a
        // client that waits 5 s and is granted at once then held its turn
        // 5 s after dying, whatever the lease.
        let (lease, waiting) = (self.cfg.lease, now + wait + self.cfg.lease);
        let turn = self.turns.entry(app).or_insert(Turn {
            granted: false,
            since: now,
            lease_until: waiting,
        });
        turn.lease_until = if matches!(decision, Decision::Granted { .. }) {
            now + lease
        } else {
            waiting
        };
        match decision {
            Decision::Granted { priority } => {
                if !turn.granted {
                    turn.granted = true;
                    turn.since = now;
                    self.grants_total += 1;
                }
                {
                    let m = self.granted(priority);
                    self.answer(reply, m);
                }
            }
            Decision::Queued if wait.is_zero() => {
                let m = self.queued(app);
                self.answer(reply, m);
            }
            Decision::Queued => self.waiters.entry(app).or_default().push(Waiter {
                reply,
                until: now + wait,
            }),
        }
    }

    /// Replaces the set rule, live: every job holding or waiting for a
    /// turn is placed again under the new rule, those granted first (in
    /// the order they were granted), then those waiting (in request
    /// order). A waiting job the new rule grants is answered at once; a
    /// job granted before that must wait under the new rule cannot be
    /// stopped in the middle of its phase, so it finishes it, but at the
    /// default weight (its grant is withdrawn from the data servers), and
    /// its next phase waits its turn.
    fn switch(&mut self, rule: SetRule, now: Instant) {
        let t = self.time(now);
        let old = std::mem::replace(&mut self.arbiter, Sets::new(rule.clone()));
        self.cfg.sets = rule;
        let mut granted: Vec<(Instant, u32)> = self
            .turns
            .iter()
            .filter(|(_, turn)| turn.granted)
            .map(|(&app, turn)| (turn.since, app))
            .collect();
        granted.sort();
        let order: Vec<u32> = granted
            .into_iter()
            .map(|(_, app)| app)
            .chain(old.queue().into_iter().map(|(_, app, _)| app.0))
            .collect();
        for app in order {
            let info = PhaseInfo {
                w_iter: self.detectors.get(&app).and_then(|(d, _)| d.w_iter()),
                group: None,
            };
            let decision = self.arbiter.begin_phase(AppId(app), t, &info);
            let Some(turn) = self.turns.get_mut(&app) else {
                continue;
            };
            match decision {
                Decision::Granted { priority } if !turn.granted => {
                    turn.granted = true;
                    turn.since = now;
                    self.grants_total += 1;
                    for w in self.waiters.remove(&app).unwrap_or_default() {
                        let m = self.granted(priority);
                        self.answer(w.reply, m);
                    }
                }
                Decision::Granted { .. } => {}
                Decision::Queued => {
                    if turn.granted {
                        turn.granted = false;
                        turn.since = now;
                    }
                }
            }
        }
        eprintln!(
            "concerto-server: coordinator: set rule now {}",
            rule_name(&self.cfg.sets)
        );
    }

    /// `app`'s phase ends (asked, or its lease ran out): the applications
    /// this grants are told (their waiting `BeginPhase`s answered).
    fn end(&mut self, app: u32, now: Instant) {
        if self.turns.remove(&app).is_none() {
            return;
        }
        if let Some((detector, seen)) = self.detectors.get_mut(&app) {
            detector.phase_ended();
            *seen = now;
        }
        for w in self.waiters.remove(&app).unwrap_or_default() {
            self.answer(
                w.reply,
                Message::Queued {
                    set: 0,
                    ahead: 0,
                    lease_ms: 0,
                },
            );
        }
        let t = self.time(now);
        for (next, priority) in self.arbiter.end_phase(AppId(app), t) {
            let Some(turn) = self.turns.get_mut(&next.0) else {
                continue;
            };
            turn.granted = true;
            turn.since = now;
            // A fresh lease from the grant: a client that polls rather
            // than waits has a whole lease to learn of it.
            turn.lease_until = now + self.cfg.lease;
            self.grants_total += 1;
            for w in self.waiters.remove(&next.0).unwrap_or_default() {
                let m = self.granted(priority);
                self.answer(w.reply, m);
            }
        }
    }

    fn granted(&self, priority: f64) -> Message {
        Message::Granted {
            priority,
            lease_ms: self.cfg.lease.as_millis() as u64,
        }
    }

    /// Where a queued application stands: its set and how many go before it.
    fn queued(&self, app: u32) -> Message {
        let set = self.arbiter.set_of(AppId(app));
        let ahead = self
            .arbiter
            .queue()
            .iter()
            .filter(|(s, _, _)| Some(*s) == set)
            .take_while(|(_, a, _)| a.0 != app)
            .count();
        Message::Queued {
            set: set.map_or(0, |s| s.0),
            // The application doing I/O in the set goes first too.
            ahead: ahead as u32 + 1,
            lease_ms: self.cfg.lease.as_millis() as u64,
        }
    }

    /// The next lease to run out or waiting `BeginPhase` to answer.
    fn next_deadline(&self) -> Option<Instant> {
        let leases = self.turns.values().map(|t| t.lease_until);
        let waits = self.waiters.values().flatten().map(|w| w.until);
        leases.chain(waits).min()
    }

    /// Ends the phases whose lease ran out, and answers the waits that are over.
    fn expire(&mut self, now: Instant) {
        let lapsed: Vec<u32> = self
            .turns
            .iter()
            .filter(|(_, t)| t.lease_until <= now)
            .map(|(&app, _)| app)
            .collect();
        for app in lapsed {
            let granted = self.turns.get(&app).is_some_and(|t| t.granted);
            eprintln!(
                "concerto-server: coordinator: application {app}'s lease ran out ({}); its turn is released",
                if granted { "granted" } else { "waiting" }
            );
            self.leases_expired += 1;
            self.end(app, now);
        }
        let over: Vec<u32> = self
            .waiters
            .iter()
            .filter(|(_, ws)| ws.iter().any(|w| w.until <= now))
            .map(|(&app, _)| app)
            .collect();
        for app in over {
            let waiting = self.waiters.remove(&app).unwrap_or_default();
            let (done, still): (Vec<_>, Vec<_>) = waiting.into_iter().partition(|w| w.until <= now);
            for w in done {
                let m = self.queued(app);
                self.answer(w.reply, m);
            }
            if !still.is_empty() {
                self.waiters.insert(app, still);
            }
        }
        self.publish(now);
    }

    fn forget_old_detectors(&mut self) {
        if self.detectors.len() <= MAX_REMEMBERED {
            return;
        }
        let turns = &self.turns;
        if let Some(oldest) = self
            .detectors
            .iter()
            .filter(|(app, _)| !turns.contains_key(app))
            .min_by_key(|(_, (_, seen))| *seen)
            .map(|(&app, _)| app)
        {
            self.detectors.remove(&oldest);
        }
    }

    /// The grants for the data servers, and the statistics.
    fn publish(&mut self, now: Instant) {
        let grants: Vec<(u32, f64)> = self
            .arbiter
            .granted()
            .into_iter()
            .map(|(a, p)| (a.0, p))
            .collect();
        self.grants_tx.send_if_modified(|g| {
            let changed = *g != grants;
            *g = grants.clone();
            changed
        });
        let entry = |app: u32, set: i64, priority: f64| PhaseEntry {
            app,
            set,
            priority,
            for_s: self.turns.get(&app).map_or(0.0, |t| {
                now.saturating_duration_since(t.since).as_secs_f64()
            }),
            w_iter_s: self
                .detectors
                .get(&app)
                .and_then(|(d, _)| d.w_iter())
                .map(|w| w.as_secs_f64()),
        };
        let mut granted: Vec<PhaseEntry> = grants
            .iter()
            .map(|&(app, p)| {
                let set = self.arbiter.set_of(AppId(app)).map_or(0, |s| s.0);
                entry(app, set, p)
            })
            .collect();
        granted.sort_by(|a, b| b.for_s.total_cmp(&a.for_s));
        let waiting = self
            .arbiter
            .queue()
            .into_iter()
            .map(|(set, app, p)| entry(app.0, set.0, p))
            .collect();
        let mut measured: Vec<MeasuredJob> = self
            .detectors
            .iter()
            .map(|(&app, (d, _))| MeasuredJob {
                app,
                phases: d.samples() + 1,
                w_iter_s: d.w_iter().map(|w| w.as_secs_f64()),
            })
            .collect();
        measured.sort_by_key(|m| m.app);
        *self.stats.lock().unwrap_or_else(|p| p.into_inner()) = CoordinatorStats {
            policy: rule_name(&self.cfg.sets).to_string(),
            granted,
            waiting,
            grants_total: self.grants_total,
            leases_expired: self.leases_expired,
            measured,
        };
        for (reply, message) in self.outbox.drain(..) {
            reply.send(message);
        }
    }
}

/// The set rule's name as the server file spells its `kind`.
pub fn rule_name(rule: &SetRule) -> &'static str {
    match rule {
        SetRule::FairShare => "fair-share",
        SetRule::ExclusiveFcfs => "exclusive-fcfs",
        SetRule::Set10 => "set10",
        SetRule::Clairvoyant => "clairvoyant",
        SetRule::SetFairShare => "set-fair-share",
        SetRule::SharePriority => "share-priority",
        SetRule::Log { .. } => "log",
        SetRule::Thresholds { .. } => "thresholds",
        SetRule::Table { .. } => "table",
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at.into()).await;
    }
}

/// Sends the grant table to every data server of the cluster map when it
/// changes, and again every [`GRANTS_REFRESH`]; a server that does not
/// answer gets it on the next round.
async fn push_grants(
    members: Arc<Members>,
    mut grants: watch::Receiver<Vec<(u32, f64)>>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            changed = grants.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(GRANTS_REFRESH) => {}
            _ = stopped.changed() => return,
        }
        let table = grants.borrow_and_update().clone();
        let Some(map) = members.map() else {
            continue;
        };
        let data = map
            .members
            .iter()
            .filter(|m| m.roles.contains(&Role::Data))
            .map(|m| m.id);
        futures::future::join_all(data.map(|id| {
            let (map, table) = (map.clone(), table.clone());
            async move {
                if let Ok(c) = map.pool.get(id).await {
                    let _ = c.call(Message::SetGrants { grants: table }).await;
                }
            }
        }))
        .await;
    }
}
