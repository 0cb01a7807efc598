//! Per-server statistics: what the scheduling loop records and what
//! `concerto cluster stats` shows (`prometheus` writes them for the
//! metrics port).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use concerto_core::{Op, Request, Time};

use crate::refusals::Refusals;

pub use concerto_proto::stats::{
    AppStats, Arrival, ArrivalOp, ConnectionCounts, LatencyHistogram, ReportCounts, RetiredApps,
    ServerStats, ARRIVAL_LOG, MAX_TRACKED_APPS,
};

/// One tracked application.
struct Tracked {
    stats: AppStats,
    /// Its requests at the server: queued or on the storage.
    present: u64,
    /// When it last enqueued or completed a request.
    last_active: Time,
}

/// This machine's monotonic clock, nanoseconds.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given and nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What the scheduling loop updates as requests move.
pub struct Recorder {
    started: Time,
    last: Time,
    /// Whether, after the last dispatch, the storage had slots the policy left unused.
    free_slots: bool,
    apps: BTreeMap<u32, Tracked>,
    /// Applications with requests queued now (what `advance` charges).
    waiting: BTreeSet<u32>,
    retired: RetiredApps,
    latency: [LatencyHistogram; 3],
    reports: ReportCounts,
    /// The latest requests to arrive, at most [`ARRIVAL_LOG`].
    arrivals: VecDeque<Arrival>,
    arrived: u64,
    /// Requests the policy started.
    starts: u64,
}

impl Recorder {
    pub fn new(now: Time) -> Recorder {
        Recorder {
            started: now,
            last: now,
            free_slots: false,
            apps: BTreeMap::new(),
            waiting: BTreeSet::new(),
            retired: RetiredApps::default(),
            latency: [
                LatencyHistogram::new("read"),
                LatencyHistogram::new("write"),
                LatencyHistogram::new("metadata"),
            ],
            reports: ReportCounts::default(),
            arrivals: VecDeque::with_capacity(ARRIVAL_LOG),
            arrived: 0,
            starts: 0,
        }
    }

    pub fn report_sent(&mut self) {
        self.reports.sent += 1;
    }

    pub fn report_received(&mut self) {
        self.reports.received += 1;
    }

    pub fn report_trimmed(&mut self, bytes: u64, weights: u64) {
        self.reports.trimmed_bytes += bytes;
        self.reports.clamped_weights += weights;
    }

    pub fn reports(&self) -> ReportCounts {
        self.reports
    }

    /// Accounts the time since the last call to the applications waiting.
    pub fn advance(&mut self, now: Time) {
        let dt = now.saturating_sub(self.last).as_secs_f64();
        self.last = now;
        for app in &self.waiting {
            if let Some(t) = self.apps.get_mut(app) {
                t.stats.waiting_s += dt;
                if self.free_slots {
                    t.stats.held_s += dt;
                }
            }
        }
    }

    /// After a dispatch round: were slots left free while requests waited?
    pub fn set_free_slots(&mut self, free: bool) {
        self.free_slots = free;
    }

    /// The application's entry, made (and the table kept bounded) if new;
    /// it is active now.
    fn app(&mut self, app: u32) -> &mut Tracked {
        if !self.apps.contains_key(&app) && self.apps.len() >= MAX_TRACKED_APPS {
            self.retire_one_idle();
        }
        let now = self.last;
        let t = self.apps.entry(app).or_insert_with(|| Tracked {
            stats: AppStats {
                app,
                ..AppStats::default()
            },
            present: 0,
            last_active: now,
        });
        t.last_active = now;
        t
    }

    /// Folds the application idle the longest into the retired totals; none
    /// when every tracked application has requests at the server (the table
    /// then grows only as far as the requests the server holds).
    fn retire_one_idle(&mut self) {
        let idlest = self
            .apps
            .iter()
            .filter(|(_, t)| t.present == 0)
            .min_by_key(|(&app, t)| (t.last_active, app))
            .map(|(&app, _)| app);
        if let Some(t) = idlest.and_then(|app| self.apps.remove(&app)) {
            self.retired.absorb(&t.stats);
        }
    }

    /// Notes `req`'s arrival (now), an `op`, in the arrival log (the
    /// oldest entry goes once the log is full). Its place in the log is its
    /// id: the server numbers requests in arrival order, from 1.
    pub fn arrived(&mut self, req: &Request, op: ArrivalOp) {
        self.arrived += 1;
        if self.arrivals.len() == ARRIVAL_LOG {
            self.arrivals.pop_front();
        }
        self.arrivals.push_back(Arrival {
            seq: req.id.0,
            at_ns: monotonic_ns(),
            app: req.app.0,
            rank: req.rank,
            issue_ns: req.issue_time.as_nanos(),
            op,
            object: req.object.0,
            offset: req.offset,
            bytes: req.len,
            started: 0,
        });
    }

    /// Notes in the arrival log that the policy started request `id` (if
    /// the log still holds it).
    pub fn started(&mut self, id: u64) {
        self.starts += 1;
        let at = self.arrivals.partition_point(|a| a.seq < id);
        if let Some(a) = self.arrivals.get_mut(at).filter(|a| a.seq == id) {
            a.started = self.starts;
        }
    }

    /// The arrival log's entries after request `after`.
    pub fn arrivals_after(&self, after: u64) -> Vec<Arrival> {
        let skip = self.arrivals.partition_point(|a| a.seq <= after);
        self.arrivals.range(skip..).cloned().collect()
    }

    pub fn enqueued(&mut self, app: u32) {
        let t = self.app(app);
        t.stats.queued += 1;
        t.present += 1;
        self.waiting.insert(app);
    }

    pub fn dispatched(&mut self, app: u32) {
        let t = self.app(app);
        t.stats.queued = t.stats.queued.saturating_sub(1);
        if t.stats.queued == 0 {
            self.waiting.remove(&app);
        }
    }

    pub fn completed(&mut self, app: u32, op: Op, bytes: u64, latency: Time) {
        let a = self.app(app);
        a.present = a.present.saturating_sub(1);
        let a = &mut a.stats;
        match op {
            Op::Read => a.read_bytes += bytes,
            Op::Write => a.write_bytes += bytes,
            Op::Meta(_) => {}
        }
        if op.is_data() {
            a.data_ops += 1;
        } else {
            a.metadata_ops += 1;
        }
        let h = match op {
            Op::Read => 0,
            Op::Write => 1,
            Op::Meta(_) => 2,
        };
        self.latency[h].record(latency.as_secs_f64());
    }

    pub fn apps(&self) -> Vec<AppStats> {
        self.apps.values().map(|t| t.stats.clone()).collect()
    }

    pub fn retired(&self) -> RetiredApps {
        self.retired
    }

    pub fn latency(&self) -> Vec<LatencyHistogram> {
        self.latency.to_vec()
    }

    pub fn uptime_s(&self, now: Time) -> f64 {
        now.saturating_sub(self.started).as_secs_f64()
    }
}

/// Connections let in, closed for a failed MAC and refused, counted by the
/// connection tasks and read for the statistics (and the log's summaries).
#[derive(Debug, Default)]
pub(crate) struct ConnectionCounters {
    authenticated: AtomicU64,
    with_integrity: AtomicU64,
    integrity_failures: AtomicU64,
    pub(crate) refusals: Refusals,
}

impl ConnectionCounters {
    pub(crate) fn authenticated(&self, integrity: bool) {
        self.authenticated.fetch_add(1, Ordering::Relaxed);
        if integrity {
            self.with_integrity.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn integrity_failed(&self) {
        self.integrity_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn counts(&self) -> ConnectionCounts {
        ConnectionCounts {
            authenticated: self.authenticated.load(Ordering::Relaxed),
            with_integrity: self.with_integrity.load(Ordering::Relaxed),
            integrity_failures: self.integrity_failures.load(Ordering::Relaxed),
            refused: self.refusals.totals(),
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn the_arrival_log_keeps_the_latest_requests_in_order() {
        let mut r = Recorder::new(Time::ZERO);
        let req = |i: u64| Request::data(i + 1, 3, 0, Time::ZERO, Op::Write, 9, i, 4096);
        for i in 0..ARRIVAL_LOG as u64 + 10 {
            r.arrived(&req(i), ArrivalOp::Write);
        }
        let all = r.arrivals_after(0);
        assert_eq!(all.len(), ARRIVAL_LOG);
        assert_eq!((all[0].seq, all[0].offset), (11, 10));
        assert!(all
            .windows(2)
            .all(|w| w[0].seq + 1 == w[1].seq && w[0].at_ns <= w[1].at_ns));
        let last = all.last().unwrap().seq;
        assert_eq!(r.arrivals_after(last - 2).len(), 2);
        assert!(r.arrivals_after(last).is_empty());
    }

    #[test]
    fn the_arrival_log_records_the_order_the_policy_started_requests_in() {
        let mut r = Recorder::new(Time::ZERO);
        let req = |i: u64| Request::data(i, 3, 0, Time::ZERO, Op::Write, 9, i, 4096);
        for i in 1..=4 {
            r.arrived(&req(i), ArrivalOp::Write);
        }
        for i in [3, 1, 4] {
            r.started(i);
        }
        let started: Vec<u64> = r.arrivals_after(0).iter().map(|a| a.started).collect();
        assert_eq!(started, [2, 0, 1, 3], "request 2 still waits");
    }

    #[test]
    fn waiting_and_held_time_accumulate_only_while_queued() {
        let mut r = Recorder::new(Time::ZERO);
        r.enqueued(1);
        r.advance(Time::from_millis(10));
        r.set_free_slots(true);
        r.advance(Time::from_millis(30));
        r.dispatched(1);
        r.advance(Time::from_millis(100));
        let a = &r.apps()[0];
        assert!((a.waiting_s - 0.030).abs() < 1e-9, "{}", a.waiting_s);
        assert!((a.held_s - 0.020).abs() < 1e-9, "{}", a.held_s);
    }

    #[test]
    fn the_table_retires_the_idlest_application_and_keeps_the_totals() {
        let mut r = Recorder::new(Time::ZERO);
        // One application stays busy: a request queued from the start.
        r.enqueued(u32::MAX);
        for app in 0..MAX_TRACKED_APPS as u32 + 10 {
            r.advance(Time::from_millis(app as u64 + 1));
            r.enqueued(app);
            r.dispatched(app);
            r.completed(app, Op::Write, 100, Time::from_millis(1));
        }
        let apps = r.apps();
        assert_eq!(apps.len(), MAX_TRACKED_APPS);
        let retired = r.retired();
        // The eleven idlest went (the busy one never does), in order of idleness.
        assert_eq!(retired.apps, 11);
        assert!(apps.iter().any(|a| a.app == u32::MAX));
        assert!(apps.iter().all(|a| a.app == u32::MAX || a.app >= 11));
        let tracked: u64 = apps.iter().map(|a| a.write_bytes).sum();
        assert_eq!(
            tracked + retired.write_bytes,
            100 * (MAX_TRACKED_APPS as u64 + 10)
        );
        assert_eq!(retired.data_ops, 11);
    }

    #[test]
    fn an_application_with_requests_at_the_server_is_never_retired() {
        let mut r = Recorder::new(Time::ZERO);
        for app in 0..MAX_TRACKED_APPS as u32 {
            r.enqueued(app);
            r.dispatched(app); // in flight, not complete
        }
        r.enqueued(1 << 20);
        assert_eq!(r.apps().len(), MAX_TRACKED_APPS + 1);
        assert_eq!(r.retired().apps, 0);
    }
}
