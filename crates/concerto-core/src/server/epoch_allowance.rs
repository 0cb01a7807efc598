//! Byte allowances per application per epoch: the enforcement both
//! throttle-and-redistribute policies share (GIFT's coupons, AdapTBF's
//! token loans), as Lustre's TBF enforces the rates their controllers set.
//!
//! Time is cut into epochs. At each epoch's start the policy looks at what
//! every application did in the one that ended ([`EpochUse`]) and gives
//! each a number of bytes it may start in the new one. Each application
//! has a FIFO; applications with requests and bytes left take turns, one
//! request a turn. A request may overdraw what is left (a large request is
//! never stuck), and the overdraft is carried into the next epoch.
//!
//! An application that has spent its allowance waits while any
//! application with bytes left has a request; when none has, the others
//! take turns uncharged (capacity nobody with bytes left wanted), so the
//! device is never idle with work waiting. Without that, an application
//! paced elsewhere, whose use jitters around what it was given, would be
//! held back one epoch and owed a full share the next, which it then
//! leaves unused: 6% of the device lost in the unit tests. An application
//! the policy has not seen yet (it arrived mid-epoch) takes its turns
//! until the next epoch gives it its share; otherwise a job arriving at a
//! busy server would wait an epoch for nothing.
//!
//! The queues also measure what the server delivers: the bytes completed
//! per second of the time a request was in service, over each epoch the
//! device was busy at least half of, averaged over the last few such
//! epochs ([`delivered`](EpochQueues::delivered)). Shares of a
//! rated bandwidth a seeking disk never reaches would never bind; shares
//! of what it delivered do.

use std::collections::{BTreeMap, VecDeque};

use super::sfq::cost_bytes;
use super::RequestQueue;
use crate::request::{AppId, Request};
use crate::time::Time;

/// What one application did in the epoch that ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpochUse {
    pub app: AppId,
    /// Bytes it started (a metadata operation at its metadata cost).
    pub served: u64,
    /// Bytes it has waiting now.
    pub waiting: u64,
    /// It wanted more than it was given: it had requests waiting with its
    /// allowance spent at some point of the epoch, or still has.
    pub hungry: bool,
}

impl EpochUse {
    /// It sent anything, or wants to.
    pub fn active(&self) -> bool {
        self.served > 0 || self.waiting > 0
    }
}

#[derive(Default)]
struct AppState {
    queue: VecDeque<Request>,
    queued_bytes: u64,
    /// Bytes it may still start this epoch; negative after an overdraft.
    left: f64,
    /// The policy gave it an allowance (else it is new this epoch).
    allotted: bool,
    served: u64,
    held_back: bool,
}

pub(crate) struct EpochQueues {
    epoch: Time,
    metadata_cost: u64,
    /// When the current epoch ends (ZERO before the first request).
    ends: Time,
    apps: BTreeMap<AppId, AppState>,
    /// The application whose turn was last.
    last_turn: Option<AppId>,
    in_flight: u32,
    waiting: usize,
    /// Bytes completed in this epoch, the time in it with a request in
    /// service, and since when the present busy spell runs.
    completed: u64,
    busy: Time,
    busy_since: Option<Time>,
    delivered: Option<f64>,
}

/// How much of the delivered estimate the latest busy epoch makes up.
const DELIVERED_WEIGHT: f64 = 0.25;

impl EpochQueues {
    pub fn new(epoch: Time, metadata_cost: u64) -> EpochQueues {
        EpochQueues {
            epoch: if epoch.is_zero() {
                Time::from_millis(1)
            } else {
                epoch
            },
            metadata_cost,
            ends: Time::ZERO,
            apps: BTreeMap::new(),
            last_turn: None,
            in_flight: 0,
            waiting: 0,
            completed: 0,
            busy: Time::ZERO,
            busy_since: None,
            delivered: None,
        }
    }

    /// Bytes per second the device delivered in its recent busy epochs.
    pub fn delivered(&self) -> Option<f64> {
        self.delivered
    }

    pub fn epoch(&self) -> Time {
        self.epoch
    }

    pub fn cost(&self, req: &Request) -> u64 {
        cost_bytes(req, self.metadata_cost)
    }

    pub fn enqueue(&mut self, req: Request) {
        let cost = self.cost(&req);
        let app = self.apps.entry(req.app).or_default();
        app.queued_bytes += cost;
        app.queue.push_back(req);
        self.waiting += 1;
    }

    /// If the epoch has ended at `now`: what each application did in it
    /// (applications neither active nor holding a debt of allowance are
    /// forgotten), to be answered with [`allot`](Self::allot). Several
    /// epochs passed in silence count as one.
    pub fn roll(&mut self, now: Time) -> Option<Vec<EpochUse>> {
        if now < self.ends {
            return None;
        }
        let first = self.ends == Time::ZERO;
        let missed = now.saturating_sub(self.ends).as_nanos() / self.epoch.as_nanos() + 1;
        if let Some(since) = self.busy_since.as_mut() {
            self.busy += self.ends.saturating_sub(*since);
            *since = self.ends.max(*since);
        }
        let busy = self.busy.as_secs_f64();
        if !first && busy >= self.epoch.as_secs_f64() / 2.0 && self.completed > 0 {
            let sample = self.completed as f64 / busy;
            self.delivered = Some(match self.delivered {
                None => sample,
                Some(d) => d + DELIVERED_WEIGHT * (sample - d),
            });
        }
        self.completed = 0;
        self.busy = Time::ZERO;
        self.ends = if first {
            // The first request: epochs start with it.
            now + self.epoch
        } else {
            self.ends + Time::from_nanos(missed * self.epoch.as_nanos())
        };
        let uses = self
            .apps
            .iter()
            .map(|(&app, a)| EpochUse {
                app,
                served: a.served,
                waiting: a.queued_bytes,
                hungry: a.held_back || a.queued_bytes > 0,
            })
            .collect();
        self.apps
            .retain(|_, a| !a.queue.is_empty() || a.served > 0 || a.left < 0.0);
        for a in self.apps.values_mut() {
            a.served = 0;
            a.held_back = false;
            a.allotted = false;
        }
        Some(uses)
    }

    /// Gives each application its bytes for the epoch that began; an
    /// overdraft of the last one is paid out of them.
    pub fn allot(&mut self, allowances: impl IntoIterator<Item = (AppId, f64)>) {
        for (app, bytes) in allowances {
            if let Some(a) = self.apps.get_mut(&app) {
                a.left = a.left.min(0.0) + bytes.max(0.0);
                a.allotted = true;
            }
        }
    }

    /// Starts requests in turn among the applications with bytes left,
    /// while slots are free.
    pub fn dispatch(&mut self, now: Time, depth: u32, free_slots: u32, out: &mut Vec<Request>) {
        if self.in_flight == 0 && self.waiting > 0 && free_slots > 0 {
            self.busy_since = Some(now);
        }
        let mut free = free_slots.min(depth.saturating_sub(self.in_flight));
        while free > 0 && self.waiting > 0 {
            let (app, charged) = match self.next_turn(true) {
                Some(app) => (app, true),
                None => match self.next_turn(false) {
                    Some(app) => (app, false),
                    None => break,
                },
            };
            let a = self
                .apps
                .get_mut(&app)
                .expect("a turn is a known application");
            let req = a.queue.pop_front().expect("a turn has a request");
            let cost = cost_bytes(&req, self.metadata_cost);
            a.queued_bytes -= cost;
            a.served += cost;
            if charged && a.allotted {
                a.left -= cost as f64;
            }
            if !charged {
                a.held_back = true;
            }
            self.last_turn = Some(app);
            self.waiting -= 1;
            self.in_flight += 1;
            free -= 1;
            out.push(req);
        }
        for a in self.apps.values_mut() {
            if !a.queue.is_empty() && a.allotted && a.left <= 0.0 {
                a.held_back = true;
            }
        }
    }

    /// The next application after the last turn with a request and, when
    /// `with_bytes_left`, bytes left (an application without an allowance
    /// yet has them).
    fn next_turn(&self, with_bytes_left: bool) -> Option<AppId> {
        let may =
            |a: &AppState| !a.queue.is_empty() && (!with_bytes_left || !a.allotted || a.left > 0.0);
        let after = self.last_turn;
        let later = self
            .apps
            .iter()
            .filter(|(id, _)| after.is_none_or(|l| **id > l));
        let earlier = self
            .apps
            .iter()
            .filter(|(id, _)| after.is_some_and(|l| **id <= l));
        later
            .chain(earlier)
            .find(|(_, a)| may(a))
            .map(|(id, _)| *id)
    }

    pub fn complete(&mut self, req: &Request, now: Time) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.completed += cost_bytes(req, self.metadata_cost);
        if self.in_flight == 0 {
            if let Some(since) = self.busy_since.take() {
                self.busy += now.saturating_sub(since);
            }
        }
    }

    /// The next epoch's start, when requests wait (they wait for a free
    /// slot, but the epoch's bookkeeping is due then all the same).
    pub fn wakeup(&self) -> Option<Time> {
        (self.waiting > 0).then_some(self.ends)
    }

    pub fn len(&self) -> usize {
        self.waiting
    }
}

/// What a throttle-and-redistribute policy decides at each epoch's start.
pub trait EpochRule: Send {
    const NAME: &'static str;

    /// The bandwidth the administrator set to share out, if any.
    fn capacity(&self) -> Option<f64>;

    /// The bytes each application may start in the epoch beginning at
    /// `now`, from what each did in the last one; `budget` is what the
    /// server can give out in it (`capacity`, else what it delivered),
    /// `None` before it has measured anything.
    fn decide(&mut self, uses: &[EpochUse], now: Time, budget: Option<f64>) -> Vec<(AppId, f64)>;
}

/// A policy of per-epoch allowances: [`EpochQueues`] enforcing what its
/// [`EpochRule`] decides.
pub struct EpochPolicy<R> {
    queues: EpochQueues,
    depth: u32,
    rule: R,
}

impl<R: EpochRule> EpochPolicy<R> {
    pub(crate) fn with_rule(
        epoch: Time,
        metadata_cost: u64,
        depth: u32,
        rule: R,
    ) -> EpochPolicy<R> {
        EpochPolicy {
            queues: EpochQueues::new(epoch, metadata_cost),
            depth: depth.max(1),
            rule,
        }
    }

    pub(crate) fn rule(&self) -> &R {
        &self.rule
    }

    fn roll(&mut self, now: Time) {
        if let Some(uses) = self.queues.roll(now) {
            let epoch = self.queues.epoch().as_secs_f64();
            let budget = self
                .rule
                .capacity()
                .or(self.queues.delivered())
                .map(|bytes_per_s| bytes_per_s * epoch);
            let allowances = self.rule.decide(&uses, now, budget);
            self.queues.allot(allowances);
        }
    }
}

impl<R: EpochRule> RequestQueue for EpochPolicy<R> {
    fn name(&self) -> &'static str {
        R::NAME
    }

    fn enqueue(&mut self, req: Request, now: Time) {
        self.roll(now);
        self.queues.enqueue(req);
    }

    fn dispatch(&mut self, now: Time, free_slots: u32, out: &mut Vec<Request>) {
        self.roll(now);
        self.queues.dispatch(now, self.depth, free_slots, out);
    }

    fn complete(&mut self, req: &Request, now: Time) {
        self.queues.complete(req, now);
    }

    fn next_wakeup(&self, _now: Time) -> Option<Time> {
        self.queues.wakeup()
    }

    fn depth(&self) -> Option<u32> {
        Some(self.depth)
    }

    fn len(&self) -> usize {
        self.queues.len()
    }
}

/// A configured capacity, when it is a rate > 0.
pub(crate) fn set_capacity(capacity: Option<crate::units::Bandwidth>) -> Option<f64> {
    capacity.map(|c| c.0).filter(|c| c.is_finite() && *c > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Op;

    fn write(id: u64, app: u32, len: u64) -> Request {
        Request::data(id, app, 0, Time::ZERO, Op::Write, app as u64, 0, len)
    }

    #[test]
    fn an_application_that_spent_its_bytes_waits_for_the_next_epoch() {
        let mut q = EpochQueues::new(Time::from_millis(100), 1);
        let uses = q.roll(Time::ZERO).expect("the first epoch begins");
        assert!(uses.is_empty());
        for i in 0..4 {
            q.enqueue(write(i, 1, 1_000));
        }
        let mut out = Vec::new();
        q.dispatch(Time::ZERO, 8, 8, &mut out);
        assert_eq!(out.len(), 4, "not allotted before it was seen: it may go");
        for i in 4..8 {
            q.enqueue(write(i, 1, 1_000));
            q.enqueue(write(10 + i, 2, 1_000));
        }
        let uses = q.roll(Time::from_millis(100)).expect("an epoch ended");
        assert_eq!(uses[0].served, 4_000);
        assert!(uses[0].hungry, "requests still wait");
        q.allot([(AppId(1), 1_500.0), (AppId(2), 10_000.0)]);
        out.clear();
        q.dispatch(Time::ZERO, 8, 6, &mut out);
        let ones = out.iter().filter(|r| r.app.0 == 1).count();
        assert_eq!(
            ones, 2,
            "1,500 bytes: one request, then the overdraft; then 2's turns"
        );
        assert_eq!(q.wakeup(), Some(Time::from_millis(200)));
        assert!(q.roll(Time::from_millis(150)).is_none());
    }

    #[test]
    fn with_nobody_holding_bytes_left_the_spent_ones_go_uncharged() {
        let mut q = EpochQueues::new(Time::from_millis(100), 1);
        q.roll(Time::ZERO);
        q.enqueue(write(0, 1, 1_000));
        let mut out = Vec::new();
        q.dispatch(Time::ZERO, 8, 8, &mut out);
        q.roll(Time::from_millis(100));
        q.allot([(AppId(1), 1.0)]);
        for i in 1..4 {
            q.enqueue(write(i, 1, 1_000));
        }
        out.clear();
        q.dispatch(Time::ZERO, 8, 8, &mut out);
        assert_eq!(out.len(), 3, "the device is not left idle");
        let uses = q.roll(Time::from_millis(200)).expect("an epoch ended");
        assert!(uses[0].hungry, "it wanted more than it was given");
    }

    #[test]
    fn applications_with_bytes_left_take_turns() {
        let mut q = EpochQueues::new(Time::from_millis(100), 1);
        q.roll(Time::ZERO);
        for i in 0..3 {
            q.enqueue(write(i, 1, 10));
            q.enqueue(write(10 + i, 2, 10));
        }
        let mut out = Vec::new();
        q.dispatch(Time::ZERO, 6, 6, &mut out);
        let order: Vec<u32> = out.iter().map(|r| r.app.0).collect();
        assert_eq!(order, vec![1, 2, 1, 2, 1, 2]);
    }
}
