//! The administrator's QoS rules, as a stage in front of any policy: a
//! weight for the proportional-share policies, and Lustre NRS TBF's token
//! bucket filter.
//!
//! A rule matches requests by application (job), user and operation
//! class, or by a Lustre TBF expression (`match`: job, user, group, client
//! NID and opcode, conjunctions and alternatives; [`super::TbfMatch`]). The
//! first matching rule, in the order given (Lustre's rank), applies; a request that
//! matches none goes straight on with the weight it came with (the key's
//! weight on a real server, the scenario's in the simulator). A rule may
//! set the request's weight, which the SFQ family shares the device by; the
//! weight a request carried is then ignored, so what a job gets is what
//! the administrator wrote. A rule may cap its requests at a rate in
//! requests per second, in bytes per second, or both, each with a burst
//! depth: a request waits in that rule's FIFO until its tokens are there,
//! and only then goes to the policy's queue. The stage is not work-conserving (a capped job stays
//! capped on an idle server, as in Lustre) unless the rules say so, in
//! which case a held request may also go when the policy has nothing else
//! to run; such a request costs no tokens, since it takes capacity nobody
//! else wanted.
//!
//! A **realtime** rule (Lustre's `realtime=1`) guarantees its rate: the
//! requests its tokens release do not join the policy's queue but take
//! the next free slot before anything the policy holds.
//!
//! Counting bytes as well as requests is the point: Lustre's TBF counts
//! RPCs, so a job capped at N RPC/s moves 1,000 times more data with 4 MiB
//! RPCs than with 4 KiB ones. A bytes-per-second rule holds whatever the
//! request size. A request larger than the byte burst goes once the bucket
//! is full and leaves it in debt, so the long-run rate still holds.
//!
//! Written here rather than taken from a rate-limiting crate because it is
//! the product: it runs inside the [`super::Driver`] in both worlds, with
//! time passed in (the crates read a clock), and it queues requests rather
//! than answering yes or no.

use crate::FieldError;
use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::tbf_match::TbfMatch;
use crate::request::{Op, Request};
use crate::time::Time;
use crate::units::{Bandwidth, Bytes};

/// Which requests a rule applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpClass {
    Read,
    Write,
    Metadata,
}

impl OpClass {
    pub fn of(op: Op) -> OpClass {
        match op {
            Op::Read => OpClass::Read,
            Op::Write => OpClass::Write,
            Op::Meta(_) => OpClass::Metadata,
        }
    }
}

/// One rule, as the administrator writes it (`[[rules]]`): a weight, a
/// rate, or both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QosRule {
    /// How the rule is named in listings and errors.
    pub name: String,
    /// The application (job) it applies to; every one when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<u32>,
    /// The operations it applies to; every one when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<OpClass>,
    /// The user (numeric id) it applies to, all of the user's jobs
    /// together; every one when unset. A request whose user is not known
    /// matches no user rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<u32>,
    /// Requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_second: Option<f64>,
    /// Bytes per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Bandwidth>,
    /// Requests that may go at once after a quiet spell (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_requests: Option<u32>,
    /// Bytes that may go at once after a quiet spell (default: a tenth of
    /// a second at the rate, at least 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<Bytes>,
    /// The proportional-share weight its requests get, whatever they carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// Lustre TBF's expression, instead of `job`, `op` and `user`:
    /// `jobid={1 2}&opcode={write}, nid={192.168.1.[1-9]@tcp}`.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    /// Its released requests start before the policy's own (Lustre's
    /// realtime rules): its rate is guaranteed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub realtime: bool,
}

impl QosRule {
    /// Whether `req` is the rule's by `job`, `op` and `user` (a rule with
    /// an expression matches through its bucket's parsed [`TbfMatch`]).
    fn matches_fields(&self, req: &Request) -> bool {
        self.job.is_none_or(|j| j == req.app.0)
            && self.op.is_none_or(|o| o == OpClass::of(req.op))
            && self.user.is_none_or(|u| req.user == Some(u))
    }

    /// Whether it caps a rate (a rule may only set a weight).
    fn limits_rate(&self) -> bool {
        self.requests_per_second.is_some() || self.bandwidth.is_some()
    }

    fn burst_requests(&self) -> f64 {
        self.burst_requests.unwrap_or(1) as f64
    }

    fn burst_bytes(&self) -> f64 {
        match (self.burst, self.bandwidth) {
            (Some(b), _) => b.0 as f64,
            (None, Some(bw)) => (bw.0 / 10.0).max((1u64 << 20) as f64),
            (None, None) => 0.0,
        }
    }

    /// The error names the field: `rules[2].bandwidth: must be > 0`.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.name.is_empty() {
            return Err(FieldError::new("name", "a rule needs a name".into()));
        }
        if self.requests_per_second.is_none() && self.bandwidth.is_none() && self.weight.is_none() {
            return Err(FieldError::new(
                "requests_per_second",
                "give a weight, requests_per_second, bandwidth, or several of them".into(),
            ));
        }
        if let Some(w) = self.weight {
            if !(w.is_finite() && w > 0.0) {
                return Err(FieldError::new(
                    "weight",
                    format!("{w} is not a number > 0"),
                ));
            }
        }
        if let Some(r) = self.requests_per_second {
            if !(r.is_finite() && r > 0.0) {
                return Err(FieldError::new(
                    "requests_per_second",
                    format!("{r} is not a number > 0"),
                ));
            }
        }
        if let Some(b) = self.bandwidth {
            if !(b.0.is_finite() && b.0 > 0.0) {
                return Err(FieldError::new("bandwidth", "must be > 0".into()));
            }
        }
        if self.burst_requests == Some(0) {
            return Err(FieldError::new(
                "burst_requests",
                "must be at least 1".into(),
            ));
        }
        if self.burst.is_some_and(|b| b.0 == 0) {
            return Err(FieldError::new("burst", "must be > 0".into()));
        }
        if let Some(e) = &self.expression {
            if self.job.is_some() || self.op.is_some() || self.user.is_some() {
                return Err(FieldError::new(
                    "match",
                    "give either match or job, op and user, not both".into(),
                ));
            }
            TbfMatch::parse(e).map_err(|problem| FieldError::new("match", problem))?;
        }
        if self.realtime && !self.limits_rate() {
            return Err(FieldError::new(
                "realtime",
                "a realtime rule guarantees a rate: give bandwidth or requests_per_second".into(),
            ));
        }
        Ok(())
    }
}

/// The rules of one server, in order, and whether held requests may use
/// capacity nobody else wants.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QosRules {
    #[serde(default)]
    pub rules: Vec<QosRule>,
    #[serde(default)]
    pub work_conserving: bool,
}

impl QosRules {
    /// Every rule valid, names unique; the error names the rule's index.
    pub fn validate(&self) -> Result<(), FieldError> {
        for (i, r) in self.rules.iter().enumerate() {
            r.validate().map_err(|e| e.under(&format!("rules[{i}]")))?;
            if self.rules[..i].iter().any(|o| o.name == r.name) {
                return Err(FieldError::new(
                    format!("rules[{i}].name"),
                    format!("{:?} appears twice", r.name),
                ));
            }
        }
        Ok(())
    }
}

/// One rule's buckets and the requests waiting for them.
#[derive(Debug)]
struct Bucket {
    rule: QosRule,
    /// The rule's expression, parsed.
    expression: Option<TbfMatch>,
    requests: f64,
    bytes: f64,
    refilled: Time,
    held: VecDeque<Request>,
}

impl Bucket {
    fn new(rule: QosRule, now: Time) -> Bucket {
        Bucket {
            // Validated: an expression that does not parse matches nothing.
            expression: rule
                .expression
                .as_deref()
                .map(|e| TbfMatch::parse(e).unwrap_or(TbfMatch::NOTHING)),
            requests: rule.burst_requests(),
            bytes: rule.burst_bytes(),
            rule,
            refilled: now,
            held: VecDeque::new(),
        }
    }

    fn matches(&self, req: &Request) -> bool {
        match &self.expression {
            Some(m) => m.matches(req),
            None if self.rule.expression.is_some() => false,
            None => self.rule.matches_fields(req),
        }
    }

    fn refill(&mut self, now: Time) {
        let dt = now.saturating_sub(self.refilled).as_secs_f64();
        self.refilled = self.refilled.max(now);
        if let Some(r) = self.rule.requests_per_second {
            self.requests = (self.requests + r * dt).min(self.rule.burst_requests());
        }
        if let Some(b) = self.rule.bandwidth {
            self.bytes = (self.bytes + b.0 * dt).min(self.rule.burst_bytes());
        }
    }

    /// Tokens `req` needs of each bucket before it may go: one request,
    /// and its bytes (at most a full bucket).
    fn needs(&self, req: &Request) -> (f64, f64) {
        (1.0, (req.len as f64).min(self.rule.burst_bytes()))
    }

    /// Whether `req` may go now (tokens refilled to now).
    fn affords(&self, req: &Request) -> bool {
        // Nanosecond rounding of the wake-up time may leave a sliver short.
        const SLACK: f64 = 1e-6;
        let (r, b) = self.needs(req);
        (self.rule.requests_per_second.is_none() || self.requests + SLACK >= r)
            && (self.rule.bandwidth.is_none() || self.bytes + SLACK >= b)
    }

    fn charge(&mut self, req: &Request) {
        if self.rule.requests_per_second.is_some() {
            self.requests -= 1.0;
        }
        if self.rule.bandwidth.is_some() {
            self.bytes -= req.len as f64;
        }
    }

    /// When the head of the queue can go (tokens refilled to `refilled`).
    fn ready_at(&self) -> Option<Time> {
        let head = self.held.front()?;
        let (r, b) = self.needs(head);
        let mut wait: f64 = 0.0;
        if let Some(rate) = self.rule.requests_per_second {
            wait = wait.max((r - self.requests) / rate);
        }
        if let Some(bw) = self.rule.bandwidth {
            wait = wait.max((b - self.bytes) / bw.0);
        }
        Some(self.refilled + Time::from_nanos((wait.max(0.0) * 1e9).ceil() as u64))
    }
}

/// The stage itself: [`QosRules`] with their buckets and held requests.
#[derive(Debug, Default)]
pub struct QosStage {
    buckets: Vec<Bucket>,
    work_conserving: bool,
    /// Requests held back, those of `realtime` included.
    held: usize,
    /// Released by realtime rules, waiting for a slot.
    realtime: VecDeque<Request>,
}

impl QosStage {
    /// A limiter for `rules` (validated), buckets full at `now`.
    pub fn new(rules: &QosRules, now: Time) -> QosStage {
        QosStage {
            buckets: rules
                .rules
                .iter()
                .map(|r| Bucket::new(r.clone(), now))
                .collect(),
            work_conserving: rules.work_conserving,
            held: 0,
            realtime: VecDeque::new(),
        }
    }

    /// Replaces the rules. Requests held under the old ones are returned,
    /// to go on to the policy at once: a rule taken away frees its queue.
    pub fn replace(&mut self, rules: &QosRules, now: Time) -> Vec<Request> {
        let old = std::mem::replace(self, QosStage::new(rules, now));
        old.realtime
            .into_iter()
            .chain(old.buckets.into_iter().flat_map(|b| b.held))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Requests held back.
    #[inline]
    pub fn held(&self) -> usize {
        self.held
    }

    /// A request arrives: given its rule's weight, and returned if it may
    /// go on now, else held.
    #[inline]
    pub fn admit(&mut self, mut req: Request, now: Time) -> Option<Request> {
        let Some(b) = self.buckets.iter_mut().find(|b| b.matches(&req)) else {
            return Some(req);
        };
        if let Some(w) = b.rule.weight {
            req.weight = Some(w);
        }
        if !b.rule.limits_rate() {
            return Some(req);
        }
        b.refill(now);
        if b.held.is_empty() && b.affords(&req) {
            b.charge(&req);
            if !b.rule.realtime {
                return Some(req);
            }
            self.realtime.push_back(req);
        } else {
            b.held.push_back(req);
        }
        self.held += 1;
        None
    }

    /// The oldest request a realtime rule released, to start before
    /// anything the policy holds.
    #[inline]
    pub fn take_realtime(&mut self) -> Option<Request> {
        let req = self.realtime.pop_front()?;
        self.held -= 1;
        Some(req)
    }

    /// Appends to `out` the held requests whose tokens are there at `now`,
    /// in order within each rule, rules in order.
    #[inline]
    pub fn release(&mut self, now: Time, out: &mut Vec<Request>) {
        if self.held == 0 {
            return;
        }
        for b in &mut self.buckets {
            if b.held.is_empty() {
                continue;
            }
            b.refill(now);
            while let Some(head) = b.held.front() {
                if !b.affords(head) {
                    break;
                }
                let req = b.held.pop_front().expect("a head");
                b.charge(&req);
                if b.rule.realtime {
                    self.realtime.push_back(req);
                } else {
                    self.held -= 1;
                    out.push(req);
                }
            }
        }
    }

    /// When work-conserving: one held request, the one whose rule would
    /// release it soonest, for a server with nothing else to run. It costs
    /// no tokens.
    #[inline]
    pub fn spare(&mut self) -> Option<Request> {
        if !self.work_conserving || self.held == 0 {
            return None;
        }
        let b = self
            .buckets
            .iter_mut()
            .filter(|b| !b.held.is_empty())
            .min_by_key(|b| b.ready_at())?;
        self.held -= 1;
        b.held.pop_front()
    }

    /// When some held request's tokens will be there.
    #[inline]
    pub fn next_wakeup(&self) -> Option<Time> {
        self.buckets.iter().filter_map(Bucket::ready_at).min()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::request::{AppId, ObjectId, RequestId};

    fn req(id: u64, app: u32, op: Op, len: u64) -> Request {
        Request {
            id: RequestId(id),
            app: AppId(app),
            rank: 0,
            issue_time: Time::ZERO,
            op,
            object: ObjectId(0),
            offset: 0,
            len,
            segments: Vec::new(),
            weight: None,
            user: None,
            group: None,
            nid: None,
        }
    }

    fn rule(bandwidth: Option<f64>, rps: Option<f64>) -> QosRule {
        QosRule {
            name: "cap".into(),
            job: Some(1),
            op: None,
            user: None,
            requests_per_second: rps,
            bandwidth: bandwidth.map(Bandwidth),
            burst_requests: None,
            burst: None,
            weight: None,
            expression: None,
            realtime: false,
        }
    }

    fn rules(r: QosRule) -> QosRules {
        QosRules {
            rules: vec![r],
            work_conserving: false,
        }
    }

    /// Runs a limiter against a backlog of `n` requests of `len` bytes
    /// from job 1, releasing at every wake-up; returns the release times.
    fn drain(rules: &QosRules, n: u64, len: u64) -> Vec<(Time, u64)> {
        let mut l = QosStage::new(rules, Time::ZERO);
        let mut out = Vec::new();
        for i in 0..n {
            if let Some(r) = l.admit(req(i, 1, Op::Write, len), Time::ZERO) {
                out.push((Time::ZERO, r.len));
            }
        }
        let mut now = Time::ZERO;
        let mut batch = Vec::new();
        while let Some(at) = l.next_wakeup() {
            assert!(at >= now, "wake-ups never go back in time");
            now = at;
            l.release(now, &mut batch);
            assert!(!batch.is_empty(), "a wake-up releases something");
            out.extend(batch.drain(..).map(|r| (now, r.len)));
        }
        assert_eq!(l.held(), 0);
        out
    }

    #[test]
    fn unmatched_requests_pass_and_matched_ones_wait_their_turn() {
        let mut l = QosStage::new(&rules(rule(None, Some(10.0))), Time::ZERO);
        assert!(
            l.admit(req(0, 2, Op::Read, 4096), Time::ZERO).is_some(),
            "another job"
        );
        assert!(
            l.admit(req(1, 1, Op::Read, 4096), Time::ZERO).is_some(),
            "the burst"
        );
        assert!(l.admit(req(2, 1, Op::Read, 4096), Time::ZERO).is_none());
        assert_eq!(l.next_wakeup(), Some(Time::from_millis(100)));
        let mut out = Vec::new();
        l.release(Time::from_millis(99), &mut out);
        assert!(out.is_empty());
        l.release(Time::from_millis(100), &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn a_byte_rate_holds_for_small_and_large_requests_alike() {
        // 10 MB/s: 4 KiB requests and 4 MiB requests both move 10 MB/s,
        // where a rule counting requests would let the large ones move
        // a thousand times more.
        for len in [4096u64, 4 << 20] {
            let total = 200u64 << 20;
            let out = drain(&rules(rule(Some(10e6), None)), total / len, len);
            let end = out.last().unwrap().0.as_secs_f64();
            let rate = total as f64 / end;
            assert!(
                (rate / 10e6 - 1.0).abs() < 0.05,
                "{len}-byte requests: {rate} B/s"
            );
        }
    }

    #[test]
    fn work_conserving_rules_lend_spare_capacity_without_charging_it() {
        let mut r = rules(rule(None, Some(1.0)));
        r.work_conserving = true;
        let mut l = QosStage::new(&r, Time::ZERO);
        assert!(l.admit(req(0, 1, Op::Read, 1), Time::ZERO).is_some());
        assert!(l.admit(req(1, 1, Op::Read, 1), Time::ZERO).is_none());
        assert_eq!(l.spare().map(|r| r.id), Some(RequestId(1)));
        assert_eq!(l.held(), 0);
        r.work_conserving = false;
        let mut l = QosStage::new(&r, Time::ZERO);
        l.admit(req(0, 1, Op::Read, 1), Time::ZERO);
        l.admit(req(1, 1, Op::Read, 1), Time::ZERO);
        assert!(
            l.spare().is_none(),
            "not work-conserving: a capped job stays capped"
        );
    }

    #[test]
    fn the_first_matching_rule_sets_the_weight_whatever_the_request_carried() {
        let mut weighted = rule(None, None);
        weighted.weight = Some(3.0);
        let mut other = rule(None, Some(1.0));
        other.name = "other".into();
        other.job = Some(2);
        let r = QosRules {
            rules: vec![weighted, other],
            work_conserving: false,
        };
        assert_eq!(r.validate(), Ok(()));
        let mut l = QosStage::new(&r, Time::ZERO);
        let mut claimed = req(0, 1, Op::Write, 4096);
        claimed.weight = Some(1000.0);
        for i in 0..10 {
            let mut r = claimed.clone();
            r.id = RequestId(i);
            let passed = l
                .admit(r, Time::ZERO)
                .expect("a weight-only rule never holds");
            assert_eq!(passed.weight, Some(3.0));
        }
        let mut unmatched = req(10, 7, Op::Write, 4096);
        unmatched.weight = Some(2.0);
        assert_eq!(l.admit(unmatched, Time::ZERO).unwrap().weight, Some(2.0));
        assert_eq!(
            l.admit(req(11, 2, Op::Read, 1), Time::ZERO).unwrap().weight,
            None
        );
        assert!(
            l.admit(req(12, 2, Op::Read, 1), Time::ZERO).is_none(),
            "job 2's rate rule"
        );
    }

    #[test]
    fn a_user_rule_holds_all_of_the_users_jobs_and_only_them() {
        let mut r = rule(None, Some(1.0));
        r.job = None;
        r.user = Some(7);
        let mut l = QosStage::new(&rules(r), Time::ZERO);
        let of = |id: u64, app: u32, user: Option<u32>| Request {
            user,
            ..req(id, app, Op::Read, 1)
        };
        assert!(
            l.admit(of(0, 1, Some(7)), Time::ZERO).is_some(),
            "the burst"
        );
        assert!(
            l.admit(of(1, 2, Some(7)), Time::ZERO).is_none(),
            "another job of user 7 shares it"
        );
        assert!(
            l.admit(of(2, 3, Some(8)), Time::ZERO).is_some(),
            "another user"
        );
        assert!(
            l.admit(of(3, 3, None), Time::ZERO).is_some(),
            "no user known"
        );
    }

    #[test]
    fn bad_rules_are_named() {
        let mut r = rules(rule(None, None));
        assert_eq!(
            r.validate().unwrap_err().field,
            "rules[0].requests_per_second"
        );
        r.rules[0].weight = Some(0.0);
        assert_eq!(r.validate().unwrap_err().field, "rules[0].weight");
        r.rules[0].weight = None;
        r.rules[0].requests_per_second = Some(5.0);
        r.rules.push(r.rules[0].clone());
        assert_eq!(r.validate().unwrap_err().field, "rules[1].name");
    }

    proptest! {
        /// Whatever arrives when: in every interval, what a rule lets
        /// through is at most its burst plus its rate times the interval
        /// (plus one request's bytes for the debt a large request may
        /// leave), counted in requests and in bytes; nothing is lost,
        /// duplicated or reordered within the rule.
        #[test]
        fn a_rule_never_passes_more_than_burst_plus_rate(
            arrivals in prop::collection::vec((0u64..2_000_000_000, 1u64..(8 << 20)), 1..60),
            rps in prop::option::of(1.0f64..1000.0),
            bw in prop::option::of(1e5f64..1e8),
            burst_requests in 1u32..5,
        ) {
            let bw = if rps.is_none() && bw.is_none() { Some(1e6) } else { bw };
            let mut r = rule(bw, rps);
            r.burst_requests = Some(burst_requests);
            let rules = rules(r.clone());
            let mut arrivals = arrivals;
            arrivals.sort_unstable();
            let mut l = QosStage::new(&rules, Time::ZERO);
            let mut released: Vec<(Time, Request)> = Vec::new();
            let mut out = Vec::new();
            let mut pending = arrivals.iter().enumerate().peekable();
            let mut now = Time::ZERO;
            loop {
                let next_arrival = pending.peek().map(|(_, &(t, _))| Time::from_nanos(t));
                let next = match (next_arrival, l.next_wakeup()) {
                    (Some(a), Some(w)) => a.min(w),
                    (Some(a), None) => a,
                    (None, Some(w)) => w,
                    (None, None) => break,
                };
                prop_assert!(next >= now);
                now = next;
                while let Some((i, &(t, len))) = pending.peek().copied() {
                    if Time::from_nanos(t) > now { break; }
                    pending.next();
                    if let Some(r) = l.admit(req(i as u64, 1, Op::Write, len), now) {
                        released.push((now, r));
                    }
                }
                l.release(now, &mut out);
                released.extend(out.drain(..).map(|r| (now, r)));
            }
            // Everything, once, in arrival order.
            let ids: Vec<u64> = released.iter().map(|(_, r)| r.id.0).collect();
            prop_assert_eq!(ids, (0..arrivals.len() as u64).collect::<Vec<_>>());
            let max_len = arrivals.iter().map(|a| a.1).max().unwrap_or(0) as f64;
            for (i, &(t0, _)) in released.iter().enumerate() {
                for j in i..released.len() {
                    let dt = released[j].0.saturating_sub(t0).as_secs_f64();
                    let n = (j - i + 1) as f64;
                    let bytes: f64 = released[i..=j].iter().map(|(_, r)| r.len as f64).sum();
                    if let Some(rate) = rps {
                        prop_assert!(n <= r.burst_requests() + rate * dt + 1e-6,
                            "{n} requests in {dt} s at {rate}/s, burst {}", r.burst_requests());
                    }
                    if let Some(bw) = bw {
                        prop_assert!(bytes <= r.burst_bytes() + bw * dt + max_len + 1.0,
                            "{bytes} bytes in {dt} s at {bw} B/s");
                    }
                }
            }
        }
    }
}
