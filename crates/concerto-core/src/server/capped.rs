//! The non-work-conserving baseline of vPFS+ (Section V-B): SFQ(D) order,
//! but an application whose service has reached its share of the device's
//! capacity is held back, even when the device is idle.
//!
//! Each application's share is `capacity * weight / (sum of the weights of
//! the applications seen so far)`. A limit tag in real time enforces it, as
//! in mClock: a request becomes eligible at `max(arrival, previous limit
//! tag + cost / share)`. Among eligible requests the smallest SFQ start tag
//! goes first.

use crate::FieldError;
use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::sfq::{cost_bytes, default_metadata_cost, weight_of};
use super::{check_capacity, positive, PolicySpec, RequestQueue, DEFAULT_DEPTH};
use crate::request::{AppId, Request};
use crate::time::Time;
use crate::units::{Bandwidth, Bytes};

/// `kind = "capped"`: the slots, and the capacity shared out (the device's
/// rated bandwidth when not given).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CappedConfig {
    pub depth: u32,
    pub capacity: Option<Bandwidth>,
    pub metadata_cost: Bytes,
}

impl Default for CappedConfig {
    fn default() -> CappedConfig {
        CappedConfig {
            depth: DEFAULT_DEPTH,
            capacity: None,
            metadata_cost: default_metadata_cost(),
        }
    }
}

impl PolicySpec for CappedConfig {
    const NAME: &'static str = "capped";
    fn build(&self, _default_window: Time) -> Box<dyn RequestQueue> {
        // Resolved by the driver from the device; the default only for a
        // queue built by hand without a device (tests, benchmarks).
        Box::new(Capped::new(
            self.capacity.unwrap_or(super::DEFAULT_CAPACITY),
            self.depth,
            self.metadata_cost.0,
        ))
    }
    fn validate(&self) -> Result<(), FieldError> {
        positive("depth", self.depth as u64)?;
        positive("metadata_cost", self.metadata_cost.0)?;
        check_capacity(self.capacity)
    }
    fn resolve(&mut self, _default_window: Time, device_capacity: Bandwidth) {
        self.capacity.get_or_insert(device_capacity);
    }
}

struct Held {
    req: Request,
    start: f64,
    finish: f64,
    eligible: Time,
}

#[derive(Default)]
struct App {
    queue: VecDeque<Held>,
    last_finish: f64,
    last_limit: Time,
    weight: f64,
}

pub struct Capped {
    capacity: f64,
    depth: u32,
    metadata_cost: u64,
    /// Ordered by id so that ties between applications break the same way every run.
    apps: BTreeMap<AppId, App>,
    /// When `apps` next sheds idle applications (see [`Capped::forget_idle`]).
    forget_at: usize,
    weight_sum: f64,
    virtual_time: f64,
    /// The largest finish tag of a request dispatched.
    max_finish: f64,
    in_flight: u32,
    waiting: usize,
}

impl Capped {
    pub fn new(capacity: Bandwidth, depth: u32, metadata_cost: u64) -> Capped {
        Capped {
            capacity: if capacity.0.is_finite() && capacity.0 > 0.0 {
                capacity.0
            } else {
                1.0
            },
            depth: depth.max(1),
            metadata_cost,
            apps: BTreeMap::new(),
            forget_at: FORGET_FLOOR,
            weight_sum: 0.0,
            virtual_time: 0.0,
            max_finish: 0.0,
            in_flight: 0,
            waiting: 0,
        }
    }
}

/// The fewest applications `capped` remembers before it forgets idle ones.
const FORGET_FLOOR: usize = 64;

impl Capped {
    /// Forgets the applications with nothing queued whose tags carry
    /// nothing forward at `now` (finish tag behind the virtual time, limit
    /// tag passed), and their weights with them: the share of capacity is
    /// then divided among the applications present rather than every one
    /// ever seen. Run only once more than [`FORGET_FLOOR`] applications
    /// are known, and again when the table doubled, so the experiments of
    /// a few jobs keep every application's weight as before, and a
    /// long-lived server holds what its jobs of the moment need.
    fn forget_idle(&mut self, now: Time) {
        let vt = self.virtual_time;
        let mut freed = 0.0;
        self.apps.retain(|_, a| {
            let idle = a.queue.is_empty() && a.last_finish <= vt && a.last_limit <= now;
            if idle {
                freed += a.weight;
            }
            !idle
        });
        self.weight_sum -= freed;
        self.forget_at = (2 * self.apps.len()).max(FORGET_FLOOR + 1);
    }

    /// Applications remembered (for tests of [`Capped::forget_idle`]).
    pub fn remembered_apps(&self) -> usize {
        self.apps.len()
    }
}

impl RequestQueue for Capped {
    fn name(&self) -> &'static str {
        "capped"
    }

    fn enqueue(&mut self, req: Request, now: Time) {
        let weight = weight_of(&req);
        let cost = cost_bytes(&req, self.metadata_cost) as f64;
        if self.apps.len() > self.forget_at.max(FORGET_FLOOR) && !self.apps.contains_key(&req.app) {
            self.forget_idle(now);
        }
        let app = self.apps.entry(req.app).or_default();
        if app.weight != weight {
            self.weight_sum += weight - app.weight;
            app.weight = weight;
        }
        let share = self.capacity * weight / self.weight_sum;
        let start = self.virtual_time.max(app.last_finish);
        app.last_finish = start + cost / weight;
        let eligible = now.max(app.last_limit);
        app.last_limit = eligible + Time::from_secs_f64(cost / share);
        app.queue.push_back(Held {
            req,
            start,
            finish: app.last_finish,
            eligible,
        });
        self.waiting += 1;
    }

    fn dispatch(&mut self, now: Time, free_slots: u32, out: &mut Vec<Request>) {
        let mut free = free_slots.min(self.depth.saturating_sub(self.in_flight));
        while free > 0 {
            let best = self
                .apps
                .iter()
                .filter_map(|(id, a)| {
                    a.queue
                        .front()
                        .filter(|h| h.eligible <= now)
                        .map(|h| (h.start, *id))
                })
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let Some((_, id)) = best else { return };
            let held = self
                .apps
                .get_mut(&id)
                .and_then(|a| a.queue.pop_front())
                .expect("chosen from a non-empty queue");
            self.virtual_time = self.virtual_time.max(held.start);
            self.max_finish = self.max_finish.max(held.finish);
            self.waiting -= 1;
            self.in_flight += 1;
            free -= 1;
            out.push(held.req);
        }
    }

    fn complete(&mut self, _req: &Request, _now: Time) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.in_flight == 0 && self.waiting == 0 {
            // The end of a busy period, as in SFQ (`sfq.rs`): the virtual
            // time moves to the largest finish tag dispatched.
            self.virtual_time = self.virtual_time.max(self.max_finish);
        }
    }

    fn next_wakeup(&self, now: Time) -> Option<Time> {
        self.apps
            .values()
            .filter_map(|a| a.queue.front())
            .map(|h| h.eligible)
            .filter(|&t| t > now)
            .min()
    }

    fn depth(&self) -> Option<u32> {
        Some(self.depth)
    }

    fn len(&self) -> usize {
        self.waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Op;

    #[test]
    fn holds_an_application_past_its_share_even_when_idle() {
        // 1 MB/s shared by two applications: each may have 500 KB/s.
        let mut q = Capped::new(Bandwidth(1e6), 4, 10_240);
        q.enqueue(
            Request::data(0, 1, 0, Time::ZERO, Op::Read, 0, 0, 1),
            Time::ZERO,
        );
        for i in 1..5 {
            q.enqueue(
                Request::data(i, 0, 0, Time::ZERO, Op::Write, 0, 0, 100_000),
                Time::ZERO,
            );
        }
        let mut out = Vec::new();
        q.dispatch(Time::ZERO, 4, &mut out);
        // Both applications' first requests go at once; app 0's second is
        // held until 100 KB / 500 KB/s = 200 ms.
        assert_eq!(out.len(), 2);
        for r in out.drain(..) {
            q.complete(&r, Time::ZERO);
        }
        q.dispatch(Time::from_millis(1), 4, &mut out);
        assert!(out.is_empty(), "device idle, but the request stays held");
        assert_eq!(
            q.next_wakeup(Time::from_millis(1)),
            Some(Time::from_millis(200))
        );
        q.dispatch(Time::from_millis(200), 4, &mut out);
        assert_eq!(out.len(), 1);
    }
    /// Ten thousand one-request jobs, each long gone when the next comes,
    /// leave a bounded table, and a newcomer then shares the capacity with
    /// the applications present, not with every one ever seen.
    #[test]
    fn applications_that_come_and_go_are_not_all_remembered() {
        let mut q = Capped::new(Bandwidth(1e6), 4, 10_240);
        let mut out = Vec::new();
        for i in 0..10_000u64 {
            let now = Time::from_secs(i);
            q.enqueue(
                Request::data(i, i as u32, 0, now, Op::Write, 0, 0, 1000),
                now,
            );
            out.clear();
            q.dispatch(now, 4, &mut out);
            assert_eq!(out.len(), 1, "request {i} goes at once: its job is alone");
            q.complete(&out[0], now);
        }
        assert!(
            q.remembered_apps() <= 2 * FORGET_FLOOR + 2,
            "{}",
            q.remembered_apps()
        );
        assert!(
            q.weight_sum <= (2 * FORGET_FLOOR + 2) as f64,
            "{}",
            q.weight_sum
        );
    }
}
