//! The one piece of code around a [`RequestQueue`], shared by the
//! simulator's server model and the real server's scheduling loop (as
//! ceph/dmclock ships its pull queue beside the queue for both its
//! simulator and the OSD).
//!
//! A `Driver` is a pure state machine with time passed in. It owns the
//! queue, the slot capacity D and the slots in use, charges each request's
//! slot cost at dispatch and gives it back at completion, answers when the
//! policy next wants to be asked (`next_wakeup`), produces the service
//! reports a policy wants sent after completions and absorbs the ones that
//! arrive, and switches policy live: the old generation keeps serving what
//! it holds until it drains while the new one takes every arrival. The
//! device-class defaults (the coordination window, the capacity `capped`
//! shares out, the default depth) are resolved here too, so both worlds
//! build the same queue from the same configuration.
//!
//! The job-level arbiter's grants ([`Driver::set_grants`]) weigh the
//! requests of the applications doing I/O by their set's priority, as the
//! request-level simulator weighs a granted phase's requests: the weight
//! the request has (its key's, a rule's, else 1) times the priority.
//!
//! In front of the policy sits the administrator's rate rules
//! ([`QosStage`], Lustre's TBF): a request a rule holds reaches the
//! policy only once its tokens are there, and `next_wakeup` includes that
//! moment, so the rules run the same in both worlds.
//!
//! The owner does only what is its world's own: carry requests to and from
//! the device (simulated or real), move reports between servers, and call
//! `dispatch` again at `next_wakeup`.

use std::collections::HashMap;

use super::{default_window, PolicyConfig, QosRules, QosStage, RequestQueue, ServiceReport};
use crate::request::{AppId, Request};
use crate::time::Time;
use crate::units::Bandwidth;

/// What kind of device a server schedules for, as far as policy defaults care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceClass {
    /// A disk arm: one request at a time, seeks matter.
    Rotational,
    /// Flash: several requests at once, no seeks.
    Flash,
}

impl DeviceClass {
    /// The coordination paper's default time window for this class.
    pub fn default_window(self) -> Time {
        match self {
            DeviceClass::Rotational => default_window::HDD,
            DeviceClass::Flash => default_window::SSD,
        }
    }
}

/// The server-side facts a policy's unset parameters default to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceDefaults {
    pub class: DeviceClass,
    /// Slots (requests in flight on the device) when the policy sets no depth of its own.
    pub depth: u32,
    /// What `capped` shares out when its policy does not say.
    pub capacity: Bandwidth,
}

impl DeviceDefaults {
    /// `policy` with the device-dependent defaults filled in.
    pub fn resolve(&self, policy: &PolicyConfig) -> PolicyConfig {
        let mut p = policy.clone();
        p.resolve(self.class.default_window(), self.capacity);
        p
    }
}

/// What a dispatched request holds until it completes; the owner keeps it
/// with the request and hands it back to [`Driver::complete`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    generation: u64,
    slots: u32,
    /// Started by a realtime rule, past the policy: the policy never saw it.
    past_policy: bool,
}

/// A policy and the requests it dispatched that are still in flight.
struct Generation {
    id: u64,
    queue: Box<dyn RequestQueue>,
    depth: u32,
    slots_used: u32,
    in_flight: u32,
}

impl Generation {
    fn holds_nothing(&self) -> bool {
        self.in_flight == 0 && self.queue.is_empty()
    }
}

pub struct Driver {
    defaults: DeviceDefaults,
    /// Oldest first; the last one takes arrivals, the others are draining.
    generations: Vec<Generation>,
    next_generation: u64,
    /// The policy running now, with its defaults resolved.
    policy: PolicyConfig,
    /// Scratch space for one queue's dispatch.
    started: Vec<Request>,
    /// The rate rules, in front of the policy.
    rules: QosStage,
    /// The job-level arbiter's grants: applications doing I/O now and
    /// their priorities.
    grants: HashMap<AppId, f64>,
}

impl Driver {
    /// A driver running `policy` (validated) on a device with `defaults`.
    pub fn new(policy: &PolicyConfig, defaults: DeviceDefaults) -> Driver {
        let mut d = Driver {
            defaults,
            generations: Vec::with_capacity(2),
            next_generation: 0,
            policy: PolicyConfig::Fifo(Default::default()),
            started: Vec::new(),
            rules: QosStage::default(),
            grants: HashMap::new(),
        };
        d.push_generation(policy);
        d
    }

    fn push_generation(&mut self, policy: &PolicyConfig) {
        self.policy = self.defaults.resolve(policy);
        let queue = self.policy.build(self.defaults.class.default_window());
        let depth = queue.depth().unwrap_or(self.defaults.depth).max(1);
        self.generations.push(Generation {
            id: self.next_generation,
            queue,
            depth,
            slots_used: 0,
            in_flight: 0,
        });
        self.next_generation += 1;
    }

    /// Switches to `policy` (validated): arrivals from now on go to it, and
    /// what the previous policies hold is finished under them. Returns how
    /// many requests they still hold (queued or in service).
    pub fn switch(&mut self, policy: &PolicyConfig) -> u64 {
        let retiring = self.queued() as u64 + self.in_flight() as u64;
        self.push_generation(policy);
        self.drop_drained();
        retiring
    }

    /// The policy taking arrivals, with its device defaults filled in.
    pub fn policy(&self) -> &PolicyConfig {
        &self.policy
    }

    /// Slot capacity of the policy taking arrivals.
    pub fn depth(&self) -> u32 {
        self.current().depth
    }

    fn current(&self) -> &Generation {
        self.generations
            .last()
            .expect("a driver always has a generation")
    }

    /// Replaces the rate rules (validated) at `now`, buckets full; what
    /// the old rules held goes on to the policy.
    pub fn set_rules(&mut self, rules: &QosRules, now: Time) {
        for req in self.rules.replace(rules, now) {
            self.enqueue_at_policy(req, now);
        }
    }

    /// A request arrives at `now`.
    #[inline]
    pub fn enqueue(&mut self, req: Request, now: Time) {
        if let Some(req) = self.rules.admit(req, now) {
            self.enqueue_at_policy(req, now);
        }
    }

    /// Replaces the job-level grants: the applications doing I/O now and
    /// their priorities (finite, > 0; others are ignored). Requests that
    /// arrive from now on are weighed by them; queued ones keep their tags.
    pub fn set_grants(&mut self, grants: impl IntoIterator<Item = (AppId, f64)>) {
        self.grants = grants
            .into_iter()
            .filter(|(_, p)| p.is_finite() && *p > 0.0)
            .collect();
    }

    /// The grants in force, by application.
    pub fn grants(&self) -> Vec<(AppId, f64)> {
        let mut g: Vec<_> = self.grants.iter().map(|(&a, &p)| (a, p)).collect();
        g.sort_by_key(|&(a, _)| a);
        g
    }

    #[inline]
    fn enqueue_at_policy(&mut self, mut req: Request, now: Time) {
        if let Some(&priority) = self.grants.get(&req.app) {
            req.weight = Some(req.weight.unwrap_or(1.0) * priority);
        }
        let g = self
            .generations
            .last_mut()
            .expect("a driver always has a generation");
        g.queue.enqueue(req, now);
    }

    /// Appends the requests to start now to `out`, each with the ticket to
    /// complete it with. Retiring generations go first, so they drain.
    /// Requests the rate rules release now join the policy first; with
    /// work-conserving rules, held requests fill slots the policy leaves
    /// idle.
    #[inline]
    pub fn dispatch(&mut self, now: Time, out: &mut Vec<(Request, Ticket)>) {
        if self.rules.held() > 0 {
            let mut released = std::mem::take(&mut self.started);
            self.rules.release(now, &mut released);
            for req in released.drain(..) {
                self.enqueue_at_policy(req, now);
            }
            self.started = released;
            self.dispatch_realtime(out);
        }
        self.dispatch_policies(now, out);
        // Held requests may fill slots only when the policies hold nothing.
        while self.rules.held() > 0
            && self.generations.iter().all(|g| g.queue.is_empty())
            && self.has_free_slot()
        {
            let Some(req) = self.rules.spare() else {
                break;
            };
            self.enqueue_at_policy(req, now);
            self.dispatch_policies(now, out);
        }
    }

    /// What realtime rules released takes the free slots of the policy
    /// taking arrivals before the policy does.
    fn dispatch_realtime(&mut self, out: &mut Vec<(Request, Ticket)>) {
        while self.has_free_slot() {
            let Some(req) = self.rules.take_realtime() else {
                break;
            };
            let g = self
                .generations
                .last_mut()
                .expect("a driver always has a generation");
            g.slots_used += 1;
            g.in_flight += 1;
            out.push((
                req,
                Ticket {
                    generation: g.id,
                    slots: 1,
                    past_policy: true,
                },
            ));
        }
    }

    #[inline]
    fn has_free_slot(&self) -> bool {
        let g = self.current();
        g.slots_used < g.depth
    }

    #[inline]
    fn dispatch_policies(&mut self, now: Time, out: &mut Vec<(Request, Ticket)>) {
        for g in &mut self.generations {
            let free = g.depth.saturating_sub(g.slots_used);
            if free == 0 || g.queue.is_empty() {
                continue;
            }
            self.started.clear();
            g.queue.dispatch(now, free, &mut self.started);
            for req in self.started.drain(..) {
                let slots = g.queue.slot_cost(&req);
                g.slots_used += slots;
                g.in_flight += 1;
                out.push((
                    req,
                    Ticket {
                        generation: g.id,
                        slots,
                        past_policy: false,
                    },
                ));
            }
        }
    }

    /// A started request finished at `now`. Returns the service report to
    /// send to every peer when its policy wants one sent now.
    #[inline]
    pub fn complete(&mut self, req: &Request, ticket: Ticket, now: Time) -> Option<ServiceReport> {
        let g = self
            .generations
            .iter_mut()
            .find(|g| g.id == ticket.generation)?;
        g.slots_used = g.slots_used.saturating_sub(ticket.slots);
        g.in_flight = g.in_flight.saturating_sub(1);
        if ticket.past_policy {
            self.drop_drained();
            return None;
        }
        g.queue.complete(req, now);
        let report = g.queue.service_report(now);
        self.drop_drained();
        report
    }

    /// A peer's service report arrived: every generation charges it.
    pub fn absorb(&mut self, report: &ServiceReport) {
        for g in &mut self.generations {
            g.queue.absorb_service(report);
        }
    }

    /// When some policy that holds requests back wants `dispatch` called
    /// again even if nothing arrives or completes.
    #[inline]
    pub fn next_wakeup(&self, now: Time) -> Option<Time> {
        self.generations
            .iter()
            .filter_map(|g| g.queue.next_wakeup(now))
            .chain(self.rules.next_wakeup())
            .min()
    }

    /// Requests waiting (not yet dispatched): in the queues, and held by
    /// the rate rules.
    #[inline]
    pub fn queued(&self) -> usize {
        self.generations
            .iter()
            .map(|g| g.queue.len())
            .sum::<usize>()
            + self.rules.held()
    }

    /// Requests dispatched and not yet completed.
    #[inline]
    pub fn in_flight(&self) -> u32 {
        self.generations.iter().map(|g| g.in_flight).sum()
    }

    /// Whether `dispatch` now could do anything: start a request (some
    /// queue holds one and has a free slot) or release one the rate rules
    /// hold. When it could not, an owner may skip the call (the simulator
    /// does on every arrival at a busy server) and make it at the next
    /// completion, which frees a slot: nothing changes in between.
    #[inline]
    pub fn dispatch_would_act(&self) -> bool {
        self.rules.held() > 0 || self.queued_with_free_slots()
    }

    /// Whether some queue holds requests back although it has free slots
    /// (a non-work-conserving policy waiting, or a window not yet open).
    pub fn waiting_with_free_slots(&self) -> bool {
        self.queued_with_free_slots() || (self.rules.held() > 0 && self.has_free_slot())
    }

    /// Whether some generation has both a queued request and a free slot.
    #[inline]
    fn queued_with_free_slots(&self) -> bool {
        self.generations
            .iter()
            .any(|g| g.slots_used < g.depth && !g.queue.is_empty())
    }

    /// Generations that are neither taking arrivals nor holding anything go.
    #[inline]
    fn drop_drained(&mut self) {
        let last = self.generations.len() - 1;
        let mut i = 0;
        self.generations.retain(|g| {
            let keep = i == last || !g.holds_nothing();
            i += 1;
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;
    use crate::request::Op;
    use crate::server::QosRule;

    #[derive(Clone, Debug)]
    enum Step {
        Arrive {
            app: u32,
            size: u64,
        },
        Dispatch,
        CompleteOldest,
        Switch(usize),
        /// Replace the rate rules: none, or a cap on app 0 or on writes.
        Rules(u8),
        Tick,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u32..4, prop::sample::select(vec![512u64, 4096, 65536, 1 << 20, 4 << 20]))
                .prop_map(|(app, size)| Step::Arrive { app, size }),
            3 => Just(Step::Dispatch),
            3 => Just(Step::CompleteOldest),
            1 => (0..PolicyConfig::NAMES.len()).prop_map(Step::Switch),
            1 => (0u8..4).prop_map(Step::Rules),
            1 => Just(Step::Tick),
        ]
    }

    fn policy(i: usize) -> PolicyConfig {
        PolicyConfig::from_name(PolicyConfig::NAMES[i]).unwrap()
    }

    proptest! {
        /// Under every policy and across live switches to every other, and
        /// with rate rules set and replaced on the way: no generation ever
        /// holds more slots than its depth, every request is dispatched
        /// once and completes once, and only a reporting policy produces
        /// reports, never for more bytes than it served.
        #[test]
        fn the_driver_keeps_slots_requests_and_reports_straight(
            first in 0..PolicyConfig::NAMES.len(),
            steps in prop::collection::vec(step(), 1..150),
        ) {
            let mut d = Driver::new(&policy(first), defaults(DeviceClass::Rotational));
            let mut now = Time::ZERO;
            let mut next = 0u64;
            let mut in_flight: Vec<(Request, Ticket)> = Vec::new();
            let mut dispatched = HashSet::new();
            let mut completed = HashSet::new();
            let mut reporting = d.policy().name() == "service-sync";
            let (mut served, mut reported) = (0u64, 0u64);
            let mut out = Vec::new();
            let mut run = |step: &Step, d: &mut Driver, now: Time| -> Result<(), TestCaseError> {
                match *step {
                    Step::Arrive { app, size } => {
                        d.enqueue(Request::data(next, app, 0, now, Op::Write, app as u64, 0, size), now);
                        next += 1;
                    }
                    Step::Dispatch => {
                        out.clear();
                        d.dispatch(now, &mut out);
                        for (r, t) in out.drain(..) {
                            prop_assert!(dispatched.insert(r.id.0), "request {} dispatched twice", r.id.0);
                            in_flight.push((r, t));
                        }
                        for g in &d.generations {
                            prop_assert!(g.slots_used <= g.depth, "{} slots used of {}", g.slots_used, g.depth);
                        }
                    }
                    Step::CompleteOldest => {
                        if !in_flight.is_empty() {
                            let (r, t) = in_flight.remove(0);
                            prop_assert!(completed.insert(r.id.0));
                            served += r.len;
                            if let Some(report) = d.complete(&r, t, now) {
                                prop_assert!(reporting, "a policy that shares no service reported");
                                reported += report.served.iter().map(|s| s.bytes).sum::<u64>();
                                d.absorb(&report);
                            }
                        }
                    }
                    Step::Switch(i) => {
                        let held = d.queued() as u64 + d.in_flight() as u64;
                        prop_assert_eq!(d.switch(&policy(i)), held);
                        reporting |= d.policy().name() == "service-sync";
                    }
                    Step::Rules(k) => d.set_rules(&rate_rules(k), now),
                    Step::Tick => {}
                }
                Ok(())
            };
            for s in &steps {
                now += Time::from_millis(7);
                run(s, &mut d, now)?;
            }
            // Drain: everything enqueued is dispatched and completes exactly once.
            let mut rounds = 0;
            while d.queued() > 0 || d.in_flight() > 0 {
                now = d.next_wakeup(now).unwrap_or(now).max(now + Time::from_millis(1));
                run(&Step::Dispatch, &mut d, now)?;
                run(&Step::CompleteOldest, &mut d, now)?;
                rounds += 1;
                prop_assert!(rounds < 100_000, "the driver does not drain");
            }
            prop_assert_eq!(completed.len() as u64, next);
            prop_assert_eq!(dispatched.len() as u64, next);
            prop_assert!(reported <= served);
            prop_assert_eq!(d.generations.len(), 1, "drained generations are dropped");
        }
    }

    /// No rules (0), app 0 at 10 requests/s (1), writes at 1 MB/s (2), or
    /// both, work-conserving, app 0's realtime (3).
    fn rate_rules(k: u8) -> QosRules {
        let cap_app = QosRule {
            name: "app0".into(),
            job: Some(0),
            op: None,
            user: None,
            requests_per_second: Some(10.0),
            bandwidth: None,
            burst_requests: None,
            burst: None,
            weight: None,
            expression: None,
            realtime: false,
        };
        let cap_writes = QosRule {
            name: "writes".into(),
            job: None,
            op: Some(super::super::OpClass::Write),
            user: None,
            requests_per_second: None,
            bandwidth: Some(Bandwidth(1e6)),
            burst_requests: None,
            burst: None,
            weight: None,
            expression: None,
            realtime: false,
        };
        let rules = match k {
            0 => vec![],
            1 => vec![cap_app],
            2 => vec![cap_writes],
            _ => vec![
                QosRule {
                    realtime: true,
                    ..cap_app
                },
                cap_writes,
            ],
        };
        QosRules {
            rules,
            work_conserving: k == 3,
        }
    }

    #[test]
    fn a_capped_job_gets_its_rate_and_the_others_the_rest() {
        // Job 1 capped at 10 MB/s on a FIFO server with room for all;
        // job 2 uncapped. Each has a backlog of 1 MiB writes.
        let mut d = Driver::new(
            &PolicyConfig::Fifo(Default::default()),
            defaults(DeviceClass::Flash),
        );
        let mut rules = rate_rules(0);
        rules.rules.push(QosRule {
            name: "job1".into(),
            job: Some(1),
            op: None,
            user: None,
            requests_per_second: None,
            bandwidth: Some(Bandwidth(10e6)),
            burst_requests: None,
            burst: None,
            weight: None,
            expression: None,
            realtime: false,
        });
        d.set_rules(&rules, Time::ZERO);
        for id in 0..400 {
            d.enqueue(write(id, 1 + (id % 2) as u32, 1 << 20), Time::ZERO);
        }
        // Every request takes 1 ms on the device.
        let mut now = Time::ZERO;
        let mut done: Vec<(Time, u32)> = Vec::new();
        let mut out = Vec::new();
        while d.queued() > 0 || d.in_flight() > 0 {
            d.dispatch(now, &mut out);
            let idle = out.is_empty();
            for (r, t) in out.drain(..) {
                d.complete(&r, t, now + Time::from_millis(1));
                done.push((now, r.app.0));
            }
            now += Time::from_millis(1);
            if idle {
                // Nothing could start: the next moment something can.
                now = now.max(d.next_wakeup(now).unwrap_or(now));
            }
        }
        let last = |app| {
            done.iter()
                .filter(|d| d.1 == app)
                .map(|d| d.0)
                .max()
                .unwrap()
        };
        // Job 2's 200 MiB went at the device's pace; job 1's at 10 MB/s.
        assert!(last(2) < Time::from_millis(1000), "{:?}", last(2));
        let rate = (200u64 << 20) as f64 / last(1).as_secs_f64();
        assert!((rate / 10e6 - 1.0).abs() < 0.05, "job 1 at {rate} B/s");
    }

    /// When job 1's requests start, with job 2's backlog of 100 queued at
    /// the FIFO first; job 1 under a rule of 1,000 requests/s.
    fn starts_behind_a_backlog(realtime: bool) -> Vec<Time> {
        let mut d = Driver::new(
            &PolicyConfig::Fifo(Default::default()),
            defaults(DeviceClass::Flash),
        );
        let mut rules = rate_rules(0);
        rules.rules.push(QosRule {
            requests_per_second: Some(1000.0),
            job: None,
            expression: Some("jobid={1}".into()),
            realtime,
            ..rate_rules(1).rules.remove(0)
        });
        rules.validate().unwrap();
        d.set_rules(&rules, Time::ZERO);
        for id in 0..100 {
            d.enqueue(write(id, 2, 4096), Time::ZERO);
        }
        for id in 100..105 {
            d.enqueue(write(id, 1, 4096), Time::ZERO);
        }
        let mut now = Time::ZERO;
        let mut starts = Vec::new();
        let mut out = Vec::new();
        while d.queued() > 0 || d.in_flight() > 0 {
            d.dispatch(now, &mut out);
            for (r, t) in out.drain(..) {
                if r.app.0 == 1 {
                    starts.push(now);
                }
                d.complete(&r, t, now + Time::from_millis(1));
            }
            now += Time::from_millis(1);
        }
        starts
    }

    #[test]
    fn a_realtime_rules_requests_start_before_what_the_policy_holds() {
        let behind = starts_behind_a_backlog(false);
        let ahead = starts_behind_a_backlog(true);
        assert!(behind[0] >= Time::from_millis(49), "FIFO: {behind:?}");
        assert_eq!(ahead[0], Time::ZERO, "the first token is there at once");
        assert!(
            ahead[4] <= Time::from_millis(5),
            "one a millisecond, at the rule's rate: {ahead:?}"
        );
    }

    fn defaults(class: DeviceClass) -> DeviceDefaults {
        DeviceDefaults {
            class,
            depth: 2,
            capacity: Bandwidth(100e6),
        }
    }

    fn write(id: u64, app: u32, len: u64) -> Request {
        Request::data(id, app, 0, Time::ZERO, Op::Write, 0, 0, len)
    }

    #[test]
    fn the_coordination_window_follows_the_device_class() {
        let coordinated = PolicyConfig::from_name("coordinated").unwrap();
        for (class, window) in [
            (DeviceClass::Rotational, Time::from_millis(1000)),
            (DeviceClass::Flash, Time::from_millis(250)),
        ] {
            let d = Driver::new(&coordinated, defaults(class));
            assert_eq!(
                d.policy(),
                &PolicyConfig::Coordinated(super::super::CoordinatedConfig {
                    window: Some(window),
                    time_source: Default::default()
                })
            );
        }
    }

    #[test]
    fn the_policy_depth_overrides_the_device_default() {
        let fifo = Driver::new(
            &PolicyConfig::Fifo(Default::default()),
            defaults(DeviceClass::Rotational),
        );
        assert_eq!(fifo.depth(), 2);
        let sfq = Driver::new(
            &PolicyConfig::from_name("sfq-d").unwrap(),
            defaults(DeviceClass::Rotational),
        );
        assert_eq!(sfq.depth(), super::super::DEFAULT_DEPTH);
    }

    #[test]
    fn a_switch_drains_the_old_generation_first() {
        let mut d = Driver::new(
            &PolicyConfig::Fifo(Default::default()),
            defaults(DeviceClass::Rotational),
        );
        let now = Time::ZERO;
        for id in 0..4 {
            d.enqueue(write(id, 1, 4096), now);
        }
        let mut out = Vec::new();
        d.dispatch(now, &mut out);
        assert_eq!(out.len(), 2);
        // Two in service and two queued under FIFO when the switch comes.
        assert_eq!(d.switch(&PolicyConfig::from_name("sfq").unwrap()), 4);
        assert_eq!(d.policy().name(), "sfq");
        d.enqueue(write(10, 2, 4096), now);
        out.clear();
        d.dispatch(now, &mut out);
        // FIFO is full; SFQ starts its own request in its own slot.
        assert_eq!(out.iter().map(|(r, _)| r.id.0).collect::<Vec<_>>(), [10]);
        assert_eq!(d.in_flight(), 3);
        assert_eq!(d.queued(), 2);
    }

    #[test]
    fn reports_come_from_completions_and_reach_every_generation() {
        let sync = PolicyConfig::from_name("service-sync").unwrap();
        let mut d = Driver::new(&sync, defaults(DeviceClass::Rotational));
        let mut out = Vec::new();
        d.enqueue(write(1, 1, 8 << 20), Time::ZERO);
        d.dispatch(Time::ZERO, &mut out);
        let (req, ticket) = out.pop().unwrap();
        let report = d
            .complete(&req, ticket, Time::from_millis(5))
            .expect("8 MiB served is past the 4 MiB threshold");
        assert_eq!(report.served[0].bytes, 8 << 20);
        assert_eq!(d.in_flight(), 0);
    }
    /// A granted application's requests weigh its weight times its set's
    /// priority; others keep theirs, and a new grant table replaces the old.
    #[test]
    fn grants_weigh_the_requests_of_applications_doing_io() {
        // FIFO starts all four at once; the weight travels with the request.
        let deep = DeviceDefaults {
            depth: 8,
            ..defaults(DeviceClass::Rotational)
        };
        let mut d = Driver::new(&PolicyConfig::Fifo(Default::default()), deep);
        d.set_grants([(AppId(1), 0.1), (AppId(2), 0.5), (AppId(9), f64::NAN)]);
        assert_eq!(d.grants(), [(AppId(1), 0.1), (AppId(2), 0.5)]);
        let mut weighted = write(2, 2, 4096);
        weighted.weight = Some(4.0);
        for r in [write(1, 1, 4096), weighted, write(3, 3, 4096)] {
            d.enqueue(r, Time::ZERO);
        }
        d.set_grants([]);
        d.enqueue(write(4, 1, 4096), Time::ZERO);
        let mut out = Vec::new();
        d.dispatch(Time::ZERO, &mut out);
        let mut weights: Vec<_> = out.iter().map(|(r, _)| (r.id.0, r.weight)).collect();
        weights.sort_by_key(|&(id, _)| id);
        assert_eq!(
            weights,
            [(1, Some(0.1)), (2, Some(2.0)), (3, None), (4, None)]
        );
    }
}
