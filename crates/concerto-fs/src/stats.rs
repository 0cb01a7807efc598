//! Per-server statistics: what the scheduling loop records, what
//! `concerto cluster stats` shows, and the Prometheus text exposition served
//! on the metrics port.
//!
//! The exposition format is a handful of `name{labels} value` lines, so it
//! is written here directly from the one snapshot type rather than mirroring
//! every counter into a metrics library's registry.

use std::collections::BTreeMap;
use std::fmt::Write;

use concerto_core::{Op, Time};
use serde::{Deserialize, Serialize};

use crate::protocol::Role;

/// Upper bounds of the latency buckets: 50 us doubling to about 6.5 s.
fn bucket_bounds() -> Vec<f64> {
    (0..18).map(|k| 50e-6 * f64::from(1u32 << k)).collect()
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AppStats {
    pub app: u32,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub data_ops: u64,
    pub metadata_ops: u64,
    /// Requests of this application waiting in the queue now.
    pub queued: u64,
    /// Time this application had requests waiting in the queue.
    pub waiting_s: f64,
    /// Time it had requests waiting while the storage had free slots: the
    /// policy held it back (a coordinated window, a cap, a share) rather
    /// than the storage being full.
    pub held_s: f64,
}

/// Time from arrival at the server to the reply, queueing included.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyHistogram {
    pub op: String,
    /// Upper bound of each bucket, seconds; one more bucket counts the rest.
    pub bounds_s: Vec<f64>,
    pub counts: Vec<u64>,
    pub sum_s: f64,
    pub count: u64,
}

impl LatencyHistogram {
    fn new(op: &str) -> LatencyHistogram {
        let bounds_s = bucket_bounds();
        let counts = vec![0; bounds_s.len() + 1];
        LatencyHistogram {
            op: op.into(),
            bounds_s,
            counts,
            sum_s: 0.0,
            count: 0,
        }
    }

    fn record(&mut self, seconds: f64) {
        let i = self
            .bounds_s
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(self.bounds_s.len());
        self.counts[i] += 1;
        self.sum_s += seconds;
        self.count += 1;
    }

    /// The bound below which `q` of the samples fall (the bucket's upper bound).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= target {
                return Some(self.bounds_s.get(i).copied().unwrap_or(f64::INFINITY));
            }
        }
        None
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    pub address: String,
    pub roles: Vec<Role>,
    pub policy: String,
    /// The throttle's description, or `None` when the storage runs at full speed.
    pub throttle: Option<String>,
    pub uptime_s: f64,
    /// Requests waiting in the policy's queue.
    pub queued: u64,
    /// Requests on the storage now.
    pub in_flight: u64,
    pub apps: Vec<AppStats>,
    pub latency: Vec<LatencyHistogram>,
    /// Service reports exchanged with the peers (total-service sharing).
    pub reports: ReportCounts,
    /// The data directory's file system, bytes.
    pub space_total: u64,
    pub space_free: u64,
}

/// Service reports a server sent (each to every peer) and received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportCounts {
    pub sent: u64,
    pub received: u64,
}

/// What the scheduling loop updates as requests move.
pub struct Recorder {
    started: Time,
    last: Time,
    /// Whether, after the last dispatch, the storage had slots the policy left unused.
    free_slots: bool,
    apps: BTreeMap<u32, AppStats>,
    latency: [LatencyHistogram; 3],
    reports: ReportCounts,
}

impl Recorder {
    pub fn new(now: Time) -> Recorder {
        Recorder {
            started: now,
            last: now,
            free_slots: false,
            apps: BTreeMap::new(),
            latency: [
                LatencyHistogram::new("read"),
                LatencyHistogram::new("write"),
                LatencyHistogram::new("metadata"),
            ],
            reports: ReportCounts::default(),
        }
    }

    pub fn report_sent(&mut self) {
        self.reports.sent += 1;
    }

    pub fn report_received(&mut self) {
        self.reports.received += 1;
    }

    pub fn reports(&self) -> ReportCounts {
        self.reports
    }

    /// Accounts the time since the last call to the applications waiting.
    pub fn advance(&mut self, now: Time) {
        let dt = now.saturating_sub(self.last).as_secs_f64();
        self.last = now;
        for a in self.apps.values_mut().filter(|a| a.queued > 0) {
            a.waiting_s += dt;
            if self.free_slots {
                a.held_s += dt;
            }
        }
    }

    /// After a dispatch round: were slots left free while requests waited?
    pub fn set_free_slots(&mut self, free: bool) {
        self.free_slots = free;
    }

    fn app(&mut self, app: u32) -> &mut AppStats {
        self.apps.entry(app).or_insert_with(|| AppStats {
            app,
            ..AppStats::default()
        })
    }

    pub fn enqueued(&mut self, app: u32) {
        self.app(app).queued += 1;
    }

    pub fn dispatched(&mut self, app: u32) {
        let a = self.app(app);
        a.queued = a.queued.saturating_sub(1);
    }

    pub fn completed(&mut self, app: u32, op: Op, bytes: u64, latency: Time) {
        let a = self.app(app);
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
        self.apps.values().cloned().collect()
    }

    pub fn latency(&self) -> Vec<LatencyHistogram> {
        self.latency.to_vec()
    }

    pub fn uptime_s(&self, now: Time) -> f64 {
        now.saturating_sub(self.started).as_secs_f64()
    }
}

impl ServerStats {
    /// The Prometheus text exposition format (version 0.0.4).
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
            let _ = writeln!(
                out,
                "# HELP concerto_{name} {help}\n# TYPE concerto_{name} {kind}"
            );
            for (labels, value) in samples {
                let _ = writeln!(out, "concerto_{name}{labels} {value}");
            }
        };
        let policy = format!("{{policy=\"{}\"}}", self.policy);
        metric(
            "info",
            "gauge",
            "The server's current policy.",
            &[(policy, 1.0)],
        );
        metric(
            "uptime_seconds",
            "gauge",
            "Seconds since the server started.",
            &[(String::new(), self.uptime_s)],
        );
        metric(
            "queue_length",
            "gauge",
            "Requests waiting in the policy's queue.",
            &[(String::new(), self.queued as f64)],
        );
        metric(
            "in_flight",
            "gauge",
            "Requests on the storage.",
            &[(String::new(), self.in_flight as f64)],
        );
        // One sample per application, or per application and a second label's values.
        type Field = (&'static str, fn(&AppStats) -> f64);
        let per_app = |label: &str, parts: &[Field]| -> Vec<(String, f64)> {
            self.apps
                .iter()
                .flat_map(|a| {
                    parts.iter().map(move |(value, get)| match label {
                        "" => (format!("{{app=\"{}\"}}", a.app), get(a)),
                        _ => (format!("{{app=\"{}\",{label}=\"{value}\"}}", a.app), get(a)),
                    })
                })
                .collect()
        };
        let bytes = per_app(
            "op",
            &[
                ("read", |a| a.read_bytes as f64),
                ("write", |a| a.write_bytes as f64),
            ],
        );
        metric(
            "app_bytes_total",
            "counter",
            "Bytes served per application.",
            &bytes,
        );
        let ops = per_app(
            "kind",
            &[
                ("data", |a| a.data_ops as f64),
                ("metadata", |a| a.metadata_ops as f64),
            ],
        );
        metric(
            "app_operations_total",
            "counter",
            "Requests served per application.",
            &ops,
        );
        metric(
            "service_reports_total",
            "counter",
            "Service reports sent to the peers and received from them (service-sync).",
            &[
                ("{direction=\"sent\"}".to_string(), self.reports.sent as f64),
                (
                    "{direction=\"received\"}".to_string(),
                    self.reports.received as f64,
                ),
            ],
        );
        let queued = per_app("", &[("", |a| a.queued as f64)]);
        metric(
            "app_queued",
            "gauge",
            "Requests waiting per application.",
            &queued,
        );
        let waiting = per_app("", &[("", |a| a.waiting_s)]);
        metric(
            "app_waiting_seconds_total",
            "counter",
            "Time an application had requests queued.",
            &waiting,
        );
        let held = per_app("", &[("", |a| a.held_s)]);
        metric(
            "app_held_seconds_total",
            "counter",
            "Time an application was held back by the policy while storage slots were free.",
            &held,
        );
        let _ = writeln!(
            out,
            "# HELP concerto_request_latency_seconds Arrival to reply, queueing included."
        );
        let _ = writeln!(out, "# TYPE concerto_request_latency_seconds histogram");
        for h in &self.latency {
            let mut cumulative = 0;
            for (i, c) in h.counts.iter().enumerate() {
                cumulative += c;
                let le = h
                    .bounds_s
                    .get(i)
                    .map_or("+Inf".to_string(), |b| format!("{b}"));
                let _ = writeln!(
                    out,
                    "concerto_request_latency_seconds_bucket{{op=\"{}\",le=\"{le}\"}} {cumulative}",
                    h.op
                );
            }
            let _ = writeln!(
                out,
                "concerto_request_latency_seconds_sum{{op=\"{}\"}} {}",
                h.op, h.sum_s
            );
            let _ = writeln!(
                out,
                "concerto_request_latency_seconds_count{{op=\"{}\"}} {}",
                h.op, h.count
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn histogram_buckets_are_cumulative_in_the_exposition() {
        let mut r = Recorder::new(Time::ZERO);
        for ms in [1, 1, 3, 200] {
            r.completed(7, Op::Read, 4096, Time::from_millis(ms));
        }
        let h = &r.latency()[0];
        assert_eq!(h.count, 4);
        assert_eq!(h.quantile(0.5), Some(0.0016));
        let stats = ServerStats {
            address: "a".into(),
            roles: vec![Role::Data],
            policy: "fifo".into(),
            throttle: None,
            uptime_s: 1.0,
            queued: 0,
            in_flight: 0,
            apps: r.apps(),
            latency: r.latency(),
            reports: ReportCounts {
                sent: 3,
                received: 2,
            },
            space_total: 0,
            space_free: 0,
        };
        let text = stats.prometheus();
        assert!(text.contains("concerto_app_bytes_total{app=\"7\",op=\"read\"} 16384"));
        assert!(text.contains("concerto_request_latency_seconds_bucket{op=\"read\",le=\"+Inf\"} 4"));
        assert!(text.contains("concerto_request_latency_seconds_count{op=\"read\"} 4"));
        assert!(text.contains("concerto_service_reports_total{direction=\"sent\"} 3"));
    }
}
