//! mClock (Gulati, Merchant and Varman, "mClock: Handling Throughput
//! Variability for Hypervisor IO Scheduling", OSDI 2010), the scheduler
//! Ceph ships as dmClock: every application has a **reservation** (the
//! service it gets whatever its neighbours do), a **weight** (its share of
//! what is left) and a **limit** (the most it gets, even on an idle
//! device), in bytes or requests per second.
//!
//! Each request gets three tags when it arrives at `t` (seconds): a
//! reservation tag `R = max(R' + cost / r, t)`, a limit tag
//! `L = max(L' + cost / l, t)` and a proportional tag `P`, where `R'`,
//! `L'` are the application's previous tags. The scheduler first serves,
//! in `R` order, any request whose reservation tag is due (`R <= now`: the
//! constraint phase); otherwise, among the requests whose limit tag is due,
//! the smallest `P` (the weight phase), and then takes `cost / r` off the
//! reservation tags of that application's other requests, so that service
//! in the weight phase is not counted again against its reservation.
//!
//! Where this differs from the paper, and why:
//! - `P` is kept in virtual time, as SFQ's finish tag, not anchored to real
//!   time: `P = max(P', v) + cost / w` with `v` the largest `P` served. The
//!   paper anchors `P` to `t` and, when an application becomes active,
//!   shifts every active application's `P` tags so that the smallest is
//!   `t`; both give a returning application no credit for its idle time,
//!   and this one needs no pass over the other applications' tags.
//! - A request that starts later than its limit tag (the device was busy
//!   with others) moves the application's waiting limit tags to their
//!   costs apart from its start, so requests that came due meanwhile go at
//!   the limit's pace, not all at once. With tags fixed at arrival (the
//!   paper), a limited job held back behind a reservation passed its limit
//!   by up to 8% over the next second, in both worlds (`concerto reproduce
//!   arena --real`, over sliding one-second windows). Only a start later
//!   than the next request's tag does so: one a little late — a real
//!   server's timer fires a millisecond or so after the tag — keeps the
//!   tags, else every request lost its timer's lateness (a limit of 8 MB/s
//!   in 64 KiB requests gave 7.0 on real servers).
//! - dmClock's distributed tags (`distributed = true`): the service the
//!   application got from the other data servers counts in its tags —
//!   `delta` in the limit and proportional tags, `rho` (the part
//!   reservations gave) in the reservation tag — as Ceph's dmclock does
//!   (`prev + (delta + cost) / rate`), so reservations and limits hold for
//!   its service from all the servers together. Where dmClock counts them
//!   in the next request's tags, the limit and reservation tags here move
//!   as the service is told, the waiting requests' included
//!   ([`Client::count_elsewhere`]): a server with requests already tagged
//!   otherwise lets them go at its own pace. In
//!   dmClock and Ceph the *client* counts `delta` and `rho` and sends them
//!   with each request; here the servers tell one another what they served
//!   (the service reports `service-sync` exchanges, authenticated with the
//!   peer key and held to what the sender could have served), because a
//!   client that under-reports would get past its limit. Service is seen
//!   elsewhere up to one report late (`report_threshold`,
//!   `report_interval`) where the client's count is exact; it is counted
//!   when a request starts (this policy knows the phase then).
//! - Without `distributed`, each server meets reservations and limits for
//!   the service it gives (mClock).
//! - An application is what Concerto's tags name (a job); the paper's VM.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::sfq::{cost_bytes, default_metadata_cost};
use super::unreported::UnreportedService;
use super::{positive, PolicySpec, RequestQueue, Served, ServiceReport, DEFAULT_DEPTH};
use crate::request::{AppId, Request};
use crate::time::Time;
use crate::units::{parse_bandwidth, Bytes};
use crate::FieldError;

/// A reservation or a limit: bytes per second (`"40MB/s"`) or requests per
/// second (`"500 IOPS"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    Bytes(f64),
    Requests(f64),
}

impl Rate {
    fn per_second(self) -> f64 {
        match self {
            Rate::Bytes(v) | Rate::Requests(v) => v,
        }
    }

    fn counts_requests(self) -> bool {
        matches!(self, Rate::Requests(_))
    }
}

/// Parses `"40MB/s"` (bytes per second) or `"500 IOPS"` (requests).
fn parse_rate(s: &str) -> Result<Rate, String> {
    let trimmed = s.trim();
    if let Some(n) = trimmed
        .strip_suffix("IOPS")
        .or_else(|| trimmed.strip_suffix("iops"))
    {
        let v: f64 = n
            .trim()
            .parse()
            .map_err(|_| format!("\"{s}\" is not a request rate (write it like \"500 IOPS\")"))?;
        if !v.is_finite() || v < 0.0 {
            return Err(format!("\"{s}\" is not a valid request rate"));
        }
        return Ok(Rate::Requests(v));
    }
    parse_bandwidth(trimmed)
        .map(Rate::Bytes)
        .map_err(|_| format!("\"{s}\" is not a rate (write it like \"40MB/s\" or \"500 IOPS\")"))
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Rate;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a rate such as \"40MB/s\" or \"500 IOPS\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Rate, E> {
                parse_rate(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Rate::Bytes(v) => s.serialize_str(&format!("{v}B/s")),
            Rate::Requests(v) => s.serialize_str(&format!("{v} IOPS")),
        }
    }
}

/// One application's reservation, weight and limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppQos {
    pub app: u32,
    #[serde(default)]
    pub reservation: Option<Rate>,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default)]
    pub limit: Option<Rate>,
}

fn one() -> f64 {
    1.0
}

/// `kind = "dmclock"`: the slots, the applications' reservations, weights
/// and limits (an application without an entry has weight 1 and neither),
/// and what a metadata operation costs when rates are in bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DmClockConfig {
    pub depth: u32,
    pub metadata_cost: Bytes,
    pub apps: Vec<AppQos>,
    /// dmClock's distributed tags: the service the other data servers
    /// gave an application counts here too (see the module).
    pub distributed: bool,
    /// With `distributed`: a server tells the others what it served once
    /// that reaches this many bytes since its last report...
    pub report_threshold: Bytes,
    /// ...or this long after its last report, whichever comes first.
    pub report_interval: Time,
}

impl Default for DmClockConfig {
    fn default() -> DmClockConfig {
        DmClockConfig {
            depth: DEFAULT_DEPTH,
            metadata_cost: default_metadata_cost(),
            apps: Vec::new(),
            distributed: false,
            report_threshold: Bytes(256 << 10),
            report_interval: Time::from_millis(10),
        }
    }
}

impl DmClockConfig {
    /// Whether rates count requests (every rate given is in IOPS) rather
    /// than bytes.
    fn counts_requests(&self) -> bool {
        self.rates()
            .next()
            .is_some_and(|(_, r)| r.counts_requests())
    }

    fn rates(&self) -> impl Iterator<Item = (String, Rate)> + '_ {
        self.apps.iter().enumerate().flat_map(|(i, a)| {
            [("reservation", a.reservation), ("limit", a.limit)]
                .into_iter()
                .filter_map(move |(name, r)| r.map(|r| (format!("apps[{i}].{name}"), r)))
        })
    }
}

impl PolicySpec for DmClockConfig {
    const NAME: &'static str = "dmclock";

    fn build(&self, _default_window: Time) -> Box<dyn RequestQueue> {
        Box::new(DmClock::new(self))
    }

    fn validate(&self) -> Result<(), FieldError> {
        positive("depth", self.depth as u64)?;
        positive("metadata_cost", self.metadata_cost.0)?;
        positive("report_threshold", self.report_threshold.0)?;
        positive("report_interval", self.report_interval.as_nanos())?;
        let requests = self.counts_requests();
        for (field, rate) in self.rates() {
            if rate.counts_requests() != requests {
                return Err(FieldError::new(
                    field,
                    "mixes bytes per second and IOPS: write every rate of the policy in one unit"
                        .into(),
                ));
            }
            if !(rate.per_second().is_finite() && rate.per_second() > 0.0) {
                return Err(FieldError::new(field, "must be > 0".into()));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, a) in self.apps.iter().enumerate() {
            if !seen.insert(a.app) {
                return Err(FieldError::new(
                    format!("apps[{i}].app"),
                    format!("application {} has two entries", a.app),
                ));
            }
            if !(a.weight.is_finite() && a.weight > 0.0) {
                return Err(FieldError::new(
                    format!("apps[{i}].weight"),
                    "must be > 0".into(),
                ));
            }
            if let (Some(r), Some(l)) = (a.reservation, a.limit) {
                if r.per_second() > l.per_second() {
                    return Err(FieldError::new(
                        format!("apps[{i}].reservation"),
                        "is above the application's limit".into(),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// An application's settings, in cost units per second.
#[derive(Clone, Copy, Debug)]
struct Settings {
    reservation: Option<f64>,
    weight: f64,
    limit: Option<f64>,
}

const DEFAULT_SETTINGS: Settings = Settings {
    reservation: None,
    weight: 1.0,
    limit: None,
};

/// A waiting request and its tags (seconds; `P` in virtual seconds).
struct Tagged {
    req: Request,
    cost: f64,
    r: f64,
    l: f64,
    p: f64,
}

struct Client {
    queue: VecDeque<Tagged>,
    last_r: f64,
    last_l: f64,
    last_p: f64,
    /// Service the other servers gave the application since its last
    /// request here, in cost units (dmClock's `delta`): counted into its
    /// next request's proportional tag. (Its limit and reservation tags
    /// count service elsewhere as it is told: [`Client::count_elsewhere`].)
    elsewhere: f64,
}

impl Client {
    /// Service the other servers gave it (`all`, of which reservations
    /// gave `reserved`) moves its limit and reservation tags at once, the
    /// tags of the requests already waiting included. Counted only in the
    /// next request's tags (dmClock's delta and rho, which its client
    /// carries with that request), each server let the requests it had
    /// already tagged go at its own pace: over three and four servers a
    /// limit of 10 MB/s passed by 6-8% in the first second, by the queues.
    fn count_elsewhere(
        &mut self,
        all: f64,
        reserved: f64,
        reservation: Option<f64>,
        limit: Option<f64>,
    ) {
        if let Some(l) = limit {
            let later = all / l;
            for q in self.queue.iter_mut() {
                q.l += later;
            }
            self.last_l += later;
        }
        if let Some(r) = reservation {
            let later = reserved / r;
            for q in self.queue.iter_mut() {
                q.r += later;
            }
            self.last_r += later;
        }
    }

    /// A request of the application started at `start`, well after its
    /// limit tag (the device was busy with others): its waiting requests'
    /// limit tags are moved to at least their cost apart from there, as
    /// tags are from one another. mClock's tags, set at arrival, would let
    /// every request that came due while the device served others go at
    /// once, passing the limit over the next second by all of them.
    fn space_limit_tags_from(&mut self, start: f64, l: f64) {
        let mut previous = start;
        for q in self.queue.iter_mut() {
            let due = previous + q.cost / l;
            if q.l >= due {
                // The rest are already their costs apart.
                return;
            }
            q.l = due;
            previous = due;
        }
        self.last_l = self.last_l.max(previous);
    }
}

impl Default for Client {
    /// A new application's first request is due at once: its reservation
    /// and limit tags are its arrival time.
    fn default() -> Client {
        Client {
            queue: VecDeque::new(),
            last_r: f64::NEG_INFINITY,
            last_l: f64::NEG_INFINITY,
            last_p: 0.0,
            elsewhere: 0.0,
        }
    }
}

/// Which phase served a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Reservation,
    Weight,
}

pub struct DmClock {
    depth: u32,
    metadata_cost: u64,
    counts_requests: bool,
    settings: BTreeMap<AppId, Settings>,
    /// Ordered by id so that ties break the same way every run.
    clients: BTreeMap<AppId, Client>,
    /// The largest `P` served: where a returning application's tags start.
    virtual_p: f64,
    in_flight: u32,
    waiting: usize,
    /// Requests served in each phase (reservation, weight): what the tests
    /// check the phases by.
    served: [u64; 2],
    /// With distributed tags: what to tell the other servers.
    /// Distributed: what this server served and has not told the others.
    reporting: Option<UnreportedService>,
}

/// The fewest applications remembered before idle ones are forgotten.
const FORGET_FLOOR: usize = 64;
/// The most applications remembered for service elsewhere before they
/// sent anything here: a peer's reports cannot grow the table past it.
const MAX_REMEMBERED: usize = 4096;

impl DmClock {
    pub fn new(config: &DmClockConfig) -> DmClock {
        let per_second = |r: Option<Rate>| r.map(Rate::per_second).filter(|v| *v > 0.0);
        DmClock {
            depth: config.depth.max(1),
            metadata_cost: config.metadata_cost.0,
            counts_requests: config.counts_requests(),
            settings: config
                .apps
                .iter()
                .map(|a| {
                    let weight = if a.weight.is_finite() && a.weight > 0.0 {
                        a.weight
                    } else {
                        1.0
                    };
                    let s = Settings {
                        reservation: per_second(a.reservation),
                        weight,
                        limit: per_second(a.limit),
                    };
                    (AppId(a.app), s)
                })
                .collect(),
            clients: BTreeMap::new(),
            virtual_p: 0.0,
            in_flight: 0,
            waiting: 0,
            served: [0; 2],
            reporting: config.distributed.then(|| {
                UnreportedService::new(config.report_threshold.0, Some(config.report_interval))
            }),
        }
    }

    /// Requests served in the reservation phase and in the weight phase.
    pub fn served_by_phase(&self) -> [u64; 2] {
        self.served
    }

    fn cost(&self, req: &Request) -> f64 {
        if self.counts_requests {
            1.0
        } else {
            cost_bytes(req, self.metadata_cost).max(1) as f64
        }
    }

    fn settings(&self, app: AppId) -> Settings {
        self.settings.get(&app).copied().unwrap_or(DEFAULT_SETTINGS)
    }

    /// Forgets applications with nothing queued whose tags carry nothing
    /// forward at `t` (as `capped` does), once many are known.
    fn forget_idle(&mut self, t: f64) {
        let v = self.virtual_p;
        self.clients.retain(|_, c| {
            !(c.queue.is_empty()
                && c.last_r <= t
                && c.last_l <= t
                && c.last_p <= v
                && c.elsewhere == 0.0)
        });
    }

    /// The next request to serve at `t`, and the phase that serves it.
    fn choose(&self, t: f64) -> Option<(AppId, Phase)> {
        let due = self
            .clients
            .iter()
            .filter_map(|(id, c)| c.queue.front().map(|h| (id, h)))
            .filter(|(_, h)| h.r <= t)
            .min_by(|a, b| a.1.r.total_cmp(&b.1.r).then(a.0.cmp(b.0)));
        if let Some((id, _)) = due {
            return Some((*id, Phase::Reservation));
        }
        self.clients
            .iter()
            .filter_map(|(id, c)| c.queue.front().map(|h| (id, h)))
            .filter(|(_, h)| h.l <= t)
            .min_by(|a, b| a.1.p.total_cmp(&b.1.p).then(a.0.cmp(b.0)))
            .map(|(id, _)| (*id, Phase::Weight))
    }
}

impl RequestQueue for DmClock {
    fn name(&self) -> &'static str {
        "dmclock"
    }

    fn enqueue(&mut self, req: Request, now: Time) {
        let t = now.as_secs_f64();
        if self.clients.len() > FORGET_FLOOR && !self.clients.contains_key(&req.app) {
            self.forget_idle(t);
        }
        let s = self.settings(req.app);
        let cost = self.cost(&req);
        let v = self.virtual_p;
        let c = self.clients.entry(req.app).or_default();
        // dmClock's delta and rho: what the other servers gave it since
        // its last request here (zero without distributed tags).
        let delta = std::mem::take(&mut c.elsewhere);
        // No reservation: a tag that never comes due.
        let r = s
            .reservation
            .map_or(f64::INFINITY, |r| (c.last_r + cost / r).max(t));
        // Service elsewhere already moved the limit tags as it was told
        // (`absorb_service`).
        let l = s.limit.map_or(t, |l| (c.last_l + cost / l).max(t));
        let p = c.last_p.max(v) + (cost + delta) / s.weight;
        if r.is_finite() {
            c.last_r = r;
        }
        c.last_l = l;
        c.last_p = p;
        c.queue.push_back(Tagged { req, cost, r, l, p });
        self.waiting += 1;
    }

    fn dispatch(&mut self, now: Time, free_slots: u32, out: &mut Vec<Request>) {
        let t = now.as_secs_f64();
        let mut free = free_slots.min(self.depth.saturating_sub(self.in_flight));
        while free > 0 {
            let Some((id, phase)) = self.choose(t) else {
                return;
            };
            let Settings {
                reservation,
                limit,
                weight,
            } = self.settings(id);
            let Some(c) = self.clients.get_mut(&id) else {
                return;
            };
            let Some(head) = c.queue.pop_front() else {
                return;
            };
            if let Some(l) = limit {
                // Late past where the next request of the limit's pace
                // would have started (see the module).
                if t > head.l + head.cost / l {
                    c.space_limit_tags_from(t, l);
                }
            }
            if phase == Phase::Weight {
                // Served beyond its reservation: its reservation tags move
                // back by what this request would have counted.
                if let Some(r) = reservation {
                    let back = head.cost / r;
                    for q in c.queue.iter_mut() {
                        q.r -= back;
                    }
                    c.last_r -= back;
                }
                self.virtual_p = self.virtual_p.max(head.p);
            }
            if let Some(reporting) = self.reporting.as_mut() {
                let bytes = cost_bytes(&head.req, self.metadata_cost);
                let reserved = phase == Phase::Reservation;
                reporting.add(Served {
                    bytes,
                    requests: 1,
                    reserved_bytes: if reserved { bytes } else { 0 },
                    reserved_requests: reserved as u64,
                    ..Served::none(head.req.app, weight)
                });
            }
            self.served[phase as usize] += 1;
            self.waiting -= 1;
            self.in_flight += 1;
            free -= 1;
            out.push(head.req);
        }
    }

    fn complete(&mut self, _req: &Request, _now: Time) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    fn next_wakeup(&self, now: Time) -> Option<Time> {
        let t = now.as_secs_f64();
        self.clients
            .values()
            .filter_map(|c| c.queue.front())
            .map(|h| h.r.min(h.l))
            .filter(|&at| at > t)
            .min_by(f64::total_cmp)
            .map(|at| Time::from_secs_f64(at).max(now + Time::from_nanos(1)))
    }

    fn depth(&self) -> Option<u32> {
        Some(self.depth)
    }

    fn len(&self) -> usize {
        self.waiting
    }

    fn service_report(&mut self, now: Time) -> Option<ServiceReport> {
        self.reporting.as_mut()?.report(now)
    }

    fn absorb_service(&mut self, report: &ServiceReport) {
        if self.reporting.is_none() {
            return;
        }
        for s in &report.served {
            let (all, reserved) = if self.counts_requests {
                (s.requests, s.reserved_requests)
            } else {
                (s.bytes, s.reserved_bytes)
            };
            if !self.clients.contains_key(&s.app) && self.clients.len() >= MAX_REMEMBERED {
                continue;
            }
            let Settings {
                reservation, limit, ..
            } = self.settings(s.app);
            let c = self.clients.entry(s.app).or_default();
            c.elsewhere += all as f64;
            // Never more reserved than served (a report is checked for
            // that on the wire; this keeps the tags sane regardless).
            c.count_elsewhere(all as f64, reserved.min(all) as f64, reservation, limit);
        }
    }
}

#[cfg(test)]
mod distributed_tests;
#[cfg(test)]
mod tests;
