//! The Prometheus text exposition (format 0.0.4) of a server's statistics,
//! served on the metrics port.
//!
//! The format is a handful of `name{labels} value` lines, so it is written
//! here directly from the one snapshot type rather than mirroring every
//! counter into a metrics library's registry.

use std::fmt::Write;

use concerto_proto::stats::{AppStats, CoordinatorStats, PhaseEntry, ServerStats, REFUSAL_CAUSES};

/// A label value as Prometheus's text format needs it: backslash, double
/// quote and newline escaped, so no value can end its label early or add
/// a line of its own.
pub fn label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A server's statistics in the exposition format.
pub fn prometheus(stats: &ServerStats) -> String {
    let mut out = Exposition::default();
    server_gauges(&mut out, stats);
    application_metrics(&mut out, stats);
    connection_and_report_counters(&mut out, stats);
    if let Some(c) = &stats.coordinator {
        coordinator_metrics(&mut out, c);
    }
    latency_histograms(&mut out, stats);
    out.text
}

/// One sample: its label set (`{a="b"}` or empty) and its value.
type Sample = (String, f64);

/// One per-application figure: the second label's value (empty for none)
/// and how to read it.
type Field = (&'static str, fn(&AppStats) -> f64);

#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    /// One metric: its HELP and TYPE lines, then its samples.
    fn metric(&mut self, name: &str, kind: &str, help: &str, samples: &[Sample]) {
        let _ = writeln!(
            self.text,
            "# HELP concerto_{name} {help}\n# TYPE concerto_{name} {kind}"
        );
        for (labels, value) in samples {
            let _ = writeln!(self.text, "concerto_{name}{labels} {value}");
        }
    }

    /// A metric with one unlabelled sample.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.metric(name, kind, help, &[(String::new(), value)]);
    }
}

fn server_gauges(out: &mut Exposition, stats: &ServerStats) {
    let policy = format!("{{policy=\"{}\"}}", label_value(&stats.policy));
    out.metric(
        "info",
        "gauge",
        "The server's current policy.",
        &[(policy, 1.0)],
    );
    out.single(
        "uptime_seconds",
        "gauge",
        "Seconds since the server started.",
        stats.uptime_s,
    );
    out.single(
        "queue_length",
        "gauge",
        "Requests waiting in the policy's queue.",
        stats.queued as f64,
    );
    out.single(
        "in_flight",
        "gauge",
        "Requests on the storage.",
        stats.in_flight as f64,
    );
}

/// One sample per application, or per application and a second label's
/// values (`label` empty for none).
fn per_app(apps: &[(String, &AppStats)], label: &str, fields: &[Field]) -> Vec<Sample> {
    apps.iter()
        .flat_map(|(id, a)| {
            fields.iter().map(move |(value, get)| {
                let labels = match label {
                    "" => format!("{{app=\"{}\"}}", label_value(id)),
                    _ => format!(
                        "{{app=\"{}\",{label}=\"{}\"}}",
                        label_value(id),
                        label_value(value)
                    ),
                };
                (labels, get(a))
            })
        })
        .collect()
}

/// Per-application figures. Counters also get an `app="retired"` sample,
/// the sum of the applications no longer tracked, so sums over `app` never
/// go down.
fn application_metrics(out: &mut Exposition, stats: &ServerStats) {
    let retired = stats.retired.as_app();
    let tracked: Vec<(String, &AppStats)> =
        stats.apps.iter().map(|a| (a.app.to_string(), a)).collect();
    let mut with_retired = tracked.clone();
    if stats.retired.apps > 0 {
        with_retired.push(("retired".to_string(), &retired));
    }
    let bytes: [Field; 2] = [
        ("read", |a| a.read_bytes as f64),
        ("write", |a| a.write_bytes as f64),
    ];
    out.metric(
        "app_bytes_total",
        "counter",
        "Bytes served per application.",
        &per_app(&with_retired, "op", &bytes),
    );
    let ops: [Field; 2] = [
        ("data", |a| a.data_ops as f64),
        ("metadata", |a| a.metadata_ops as f64),
    ];
    out.metric(
        "app_operations_total",
        "counter",
        "Requests served per application.",
        &per_app(&with_retired, "kind", &ops),
    );
    out.metric(
        "app_queued",
        "gauge",
        "Requests waiting per application.",
        &per_app(&tracked, "", &[("", |a| a.queued as f64)]),
    );
    out.metric(
        "app_waiting_seconds_total",
        "counter",
        "Time an application had requests queued.",
        &per_app(&with_retired, "", &[("", |a| a.waiting_s)]),
    );
    out.metric(
        "app_held_seconds_total",
        "counter",
        "Time an application was held back by the policy while storage slots were free.",
        &per_app(&with_retired, "", &[("", |a| a.held_s)]),
    );
    let grants: Vec<Sample> = stats
        .grants
        .iter()
        .map(|&(app, p)| (format!("{{app=\"{app}\"}}"), p))
        .collect();
    out.metric(
        "grant_priority",
        "gauge",
        "The coordinator's grants in force here: the priority of each application doing I/O.",
        &grants,
    );
}

fn connection_and_report_counters(out: &mut Exposition, stats: &ServerStats) {
    let c = stats.connections;
    out.metric(
        "connections_total",
        "counter",
        "Connections authenticated, by whether every frame carries a MAC.",
        &[
            ("{integrity=\"on\"}".to_string(), c.with_integrity as f64),
            (
                "{integrity=\"off\"}".to_string(),
                c.authenticated.saturating_sub(c.with_integrity) as f64,
            ),
        ],
    );
    out.single(
        "integrity_failures_total",
        "counter",
        "Connections closed because a frame failed its MAC check.",
        c.integrity_failures as f64,
    );
    let refused: Vec<(String, f64)> = REFUSAL_CAUSES
        .iter()
        .zip(c.refused)
        .map(|(cause, n)| (format!("{{cause=\"{cause}\"}}"), n as f64))
        .collect();
    out.metric(
        "refusals_total",
        "counter",
        "Connections refused or cut off outside their requests' answers, by cause (the log has one line per interval).",
        &refused,
    );
    let r = stats.reports;
    out.single(
        "service_report_trimmed_bytes_total",
        "counter",
        "Bytes of peers' service reports dropped as more than their servers could serve.",
        r.trimmed_bytes as f64,
    );
    out.single(
        "service_report_clamped_weights_total",
        "counter",
        "Weights in peers' service reports moved into the range this server knows.",
        r.clamped_weights as f64,
    );
    out.metric(
        "service_reports_total",
        "counter",
        "Service reports sent to the peers and received from them (service-sync).",
        &[
            ("{direction=\"sent\"}".to_string(), r.sent as f64),
            ("{direction=\"received\"}".to_string(), r.received as f64),
        ],
    );
}

fn coordinator_metrics(out: &mut Exposition, c: &CoordinatorStats) {
    let phase = |entries: &[PhaseEntry]| -> Vec<Sample> {
        entries
            .iter()
            .map(|e| (format!("{{app=\"{}\",set=\"{}\"}}", e.app, e.set), e.for_s))
            .collect()
    };
    out.metric(
        "coordinator_granted_seconds",
        "gauge",
        "Applications doing I/O by the coordinator's grant, and for how long.",
        &phase(&c.granted),
    );
    out.metric(
        "coordinator_waiting_seconds",
        "gauge",
        "Applications waiting for their set's turn, and for how long.",
        &phase(&c.waiting),
    );
    out.single(
        "coordinator_grants_total",
        "counter",
        "I/O phases the coordinator granted.",
        c.grants_total as f64,
    );
    out.single(
        "coordinator_leases_expired_total",
        "counter",
        "Grants and places in a queue given up because their lease ran out.",
        c.leases_expired as f64,
    );
}

fn latency_histograms(out: &mut Exposition, stats: &ServerStats) {
    let text = &mut out.text;
    let _ = writeln!(
        text,
        "# HELP concerto_request_latency_seconds Arrival to reply, queueing included."
    );
    let _ = writeln!(text, "# TYPE concerto_request_latency_seconds histogram");
    for h in &stats.latency {
        let mut cumulative = 0;
        for (i, c) in h.counts.iter().enumerate() {
            cumulative += c;
            let le = h
                .bounds_s
                .get(i)
                .map_or("+Inf".to_string(), |b| format!("{b}"));
            let _ = writeln!(
                text,
                "concerto_request_latency_seconds_bucket{{op=\"{}\",le=\"{le}\"}} {cumulative}",
                h.op
            );
        }
        let _ = writeln!(
            text,
            "concerto_request_latency_seconds_sum{{op=\"{}\"}} {}",
            h.op, h.sum_s
        );
        let _ = writeln!(
            text,
            "concerto_request_latency_seconds_count{{op=\"{}\"}} {}",
            h.op, h.count
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Recorder;
    use concerto_core::{Op, Time};
    use concerto_proto::stats::{ConnectionCounts, ReportCounts};
    use concerto_proto::Role;

    #[test]
    fn label_values_cannot_break_out_of_their_label() {
        assert_eq!(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(label_value("fifo"), "fifo");
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
            retired: r.retired(),
            latency: r.latency(),
            reports: ReportCounts {
                sent: 3,
                received: 2,
                trimmed_bytes: 4096,
                clamped_weights: 1,
            },
            connections: ConnectionCounts {
                authenticated: 5,
                with_integrity: 2,
                integrity_failures: 1,
                refused: [7, 0, 0, 2, 0, 1, 0],
            },
            space_total: 0,
            space_free: 0,
            grants: vec![(7, 0.1)],
            coordinator: Some(concerto_proto::stats::CoordinatorStats {
                policy: "set10".into(),
                granted: vec![],
                waiting: vec![concerto_proto::stats::PhaseEntry {
                    app: 9,
                    set: 2,
                    priority: 0.01,
                    for_s: 1.5,
                    w_iter_s: Some(100.0),
                }],
                grants_total: 4,
                leases_expired: 1,
                measured: vec![],
            }),
        };
        let text = prometheus(&stats);
        assert!(
            text.contains("concerto_grant_priority{app=\"7\"} 0.1"),
            "{text}"
        );
        assert!(text.contains("concerto_coordinator_waiting_seconds{app=\"9\",set=\"2\"} 1.5"));
        assert!(text.contains("concerto_coordinator_leases_expired_total 1"));
        assert!(text.contains("concerto_refusals_total{cause=\"handshake pool full\"} 7"));
        assert!(text.contains("concerto_refusals_total{cause=\"address busy\"} 2"));
        assert!(text.contains("concerto_app_bytes_total{app=\"7\",op=\"read\"} 16384"));
        assert!(text.contains("concerto_request_latency_seconds_bucket{op=\"read\",le=\"+Inf\"} 4"));
        assert!(text.contains("concerto_request_latency_seconds_count{op=\"read\"} 4"));
        assert!(text.contains("concerto_service_reports_total{direction=\"sent\"} 3"));
        assert!(text.contains("concerto_connections_total{integrity=\"on\"} 2"));
        assert!(text.contains("concerto_connections_total{integrity=\"off\"} 3"));
        assert!(text.contains("concerto_integrity_failures_total 1"));
        assert!(text.contains("concerto_service_report_trimmed_bytes_total 4096"));
        assert!(text.contains("concerto_service_report_clamped_weights_total 1"));
    }
}
