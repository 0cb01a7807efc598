//! What a peer's service reports may charge here (`service-sync`, and
//! `dmclock` with distributed tags).
//!
//! A report says how much service a peer gave each application and at
//! which weight; this server charges it to the applications' start tags
//! (or, under dmClock, to their reservation, limit and proportional tags).
//! A server that holds the peer key — a compromised one — could report
//! service it never gave, or a tiny weight, and push an application's tags
//! here as far as it liked (starving it). So a report from a peer key is
//! held to what the servers at its sender's address could have served:
//!
//! - **bytes**: a token bucket per sending address, filled at this server's
//!   capacity times the data servers the cluster map lists at that address
//!   (the servers of a cluster are taken to be alike), holding at most
//!   [`BURST`] of it; bytes past it are dropped from the report, every
//!   application's share scaled alike. A report from an address where the
//!   map lists no data server is refused. Requests and the parts given by
//!   reservations are scaled with the bytes (and never more than them).
//! - **weights**: each between the smallest and the largest weight this
//!   server itself knows — seen on its own requests, given by its key ring
//!   or its QoS rules, 1 — times the coordinator's priorities in force.
//!
//! An honest peer stays within both: it serves at most its capacity (its
//! reports are merged while a peer is unreachable, and [`BURST`] covers
//! such a backlog of ten seconds), with the weights the same ring, rules and
//! grants gave its requests.

use std::collections::HashMap;
use std::net::IpAddr;

use concerto_core::server::ServiceReport;
use concerto_core::units::Bandwidth;
use concerto_core::Time;

/// Service a bucket holds at most, in seconds of its rate.
pub(crate) const BURST: Time = Time::from_millis(10_000);

/// What a report lost to the bounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Trimmed {
    /// Bytes dropped.
    pub bytes: u64,
    /// Weights moved into the known range.
    pub weights: u64,
}

#[derive(Debug)]
struct Bucket {
    bytes: f64,
    at: Time,
}

/// The bounds, and what they remember: a bucket per sending address and
/// the range of weights seen on this server's own requests.
#[derive(Debug)]
pub(crate) struct ReportBounds {
    /// Bytes per second one server can serve.
    per_server: f64,
    buckets: HashMap<IpAddr, Bucket>,
    seen: (f64, f64),
}

impl ReportBounds {
    pub(crate) fn new(capacity: Bandwidth) -> ReportBounds {
        ReportBounds {
            per_server: capacity.0.max(0.0),
            buckets: HashMap::new(),
            seen: (1.0, 1.0),
        }
    }

    /// One of this server's own requests carried `weight` (`None`: 1).
    pub(crate) fn saw_weight(&mut self, weight: Option<f64>) {
        if let Some(w) = weight.filter(|w| w.is_finite() && *w > 0.0) {
            self.seen = (self.seen.0.min(w), self.seen.1.max(w));
        }
    }

    /// The weights seen here, widened by `others` (the ring's, the rules')
    /// and multiplied by the range of `priorities` (and 1).
    pub(crate) fn known_weights(
        &self,
        others: impl IntoIterator<Item = f64>,
        priorities: impl IntoIterator<Item = f64>,
    ) -> (f64, f64) {
        let widen = |(lo, hi): (f64, f64), w: f64| {
            if w.is_finite() && w > 0.0 {
                (lo.min(w), hi.max(w))
            } else {
                (lo, hi)
            }
        };
        let (lo, hi) = others.into_iter().fold(self.seen, widen);
        let (plo, phi) = priorities.into_iter().fold((1.0, 1.0), widen);
        (lo * plo, hi * phi)
    }

    /// Holds `report`, from `from` where the cluster map lists `servers`
    /// data servers, to the bounds at `now`; `weights` is the known range
    /// ([`known_weights`](Self::known_weights)). `Err` when the map lists
    /// no data server there.
    pub(crate) fn bound(
        &mut self,
        from: IpAddr,
        servers: usize,
        weights: (f64, f64),
        report: &mut ServiceReport,
        now: Time,
    ) -> Result<Trimmed, String> {
        if servers == 0 {
            return Err(format!(
                "service report from {from}: the cluster map lists no data server at that address"
            ));
        }
        let rate = self.per_server * servers as f64;
        let most = rate * BURST.as_secs_f64();
        let bucket = self.buckets.entry(from).or_insert(Bucket {
            bytes: most,
            at: now,
        });
        let dt = now.saturating_sub(bucket.at).as_secs_f64();
        bucket.bytes = (bucket.bytes + rate * dt).min(most);
        bucket.at = now;
        let mut trimmed = Trimmed::default();
        let total: u64 = report
            .served
            .iter()
            .fold(0u64, |t, s| t.saturating_add(s.bytes));
        let keep = if (total as f64) > bucket.bytes {
            bucket.bytes / total as f64
        } else {
            1.0
        };
        let (lo, hi) = weights;
        let scaled = |n: u64| (n as f64 * keep).floor() as u64;
        for s in &mut report.served {
            if keep < 1.0 {
                // Requests and the reserved parts go with the bytes (a
                // request is at least a byte of cost).
                let kept = scaled(s.bytes);
                trimmed.bytes += s.bytes - kept;
                s.bytes = kept;
                s.reserved_bytes = scaled(s.reserved_bytes).min(kept);
                s.requests = scaled(s.requests).min(kept);
                s.reserved_requests = scaled(s.reserved_requests).min(s.requests);
            }
            let clamped = s.weight.clamp(lo, hi);
            if clamped != s.weight {
                trimmed.weights += 1;
                s.weight = clamped;
            }
        }
        let charged = total - trimmed.bytes;
        bucket.bytes = (bucket.bytes - charged as f64).max(0.0);
        Ok(trimmed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use concerto_core::server::Served;
    use concerto_core::AppId;

    fn report(served: &[(u32, u64, f64)]) -> ServiceReport {
        ServiceReport {
            served: served
                .iter()
                .map(|&(a, b, w)| Served {
                    bytes: b,
                    requests: b.div_ceil(1 << 20),
                    ..Served::none(AppId(a), w)
                })
                .collect(),
        }
    }

    const FROM: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn a_peer_is_charged_at_most_what_its_servers_could_serve() {
        // 100 MB/s per server, two servers at the address: a burst of 2 GB,
        // then 200 MB per second.
        let mut b = ReportBounds::new(Bandwidth(100e6));
        let w = (1.0, 1.0);
        let mut r = report(&[(1, 1_500_000_000, 1.0)]);
        assert_eq!(b.bound(FROM, 2, w, &mut r, Time::ZERO).unwrap().bytes, 0);
        // 500 MB left; 3 GB more is cut to it, both applications alike.
        let mut r = report(&[(1, 1_000_000_000, 1.0), (2, 2_000_000_000, 1.0)]);
        let t = b.bound(FROM, 2, w, &mut r, Time::ZERO).unwrap();
        assert_eq!(t.bytes, 2_500_000_001);
        let kept: Vec<u64> = r.served.iter().map(|s| s.bytes).collect();
        assert_eq!(kept, vec![166_666_666, 333_333_333]);
        // A second later, 200 MB more.
        let mut r = report(&[(1, 1_000_000_000, 1.0)]);
        let t = b
            .bound(FROM, 2, w, &mut r, Time::from_millis(1000))
            .unwrap();
        assert_eq!(r.served[0].bytes + t.bytes, 1_000_000_000);
        assert!(
            (r.served[0].bytes as f64 - 200e6).abs() < 2.0,
            "{:?}",
            r.served
        );
        // An honest peer's steady service is never cut.
        let mut b = ReportBounds::new(Bandwidth(100e6));
        for s in 0..100 {
            let mut r = report(&[(1, 50_000_000, 1.0), (2, 40_000_000, 2.0)]);
            let now = Time::from_millis(1000 * s);
            assert_eq!(
                b.bound(FROM, 1, (1.0, 2.0), &mut r, now).unwrap(),
                Trimmed::default()
            );
        }
    }

    #[test]
    fn weights_are_held_to_the_range_this_server_knows() {
        let mut b = ReportBounds::new(Bandwidth(100e6));
        b.saw_weight(Some(4.0));
        b.saw_weight(None);
        b.saw_weight(Some(f64::NAN));
        assert_eq!(b.known_weights([], []), (1.0, 4.0));
        // A rule's 0.5 widens it; a priority of 10 multiplies the top.
        let known = b.known_weights([0.5], [10.0]);
        assert_eq!(known, (0.5, 40.0));
        let mut r = report(&[(1, 10, 1e-9), (2, 10, 2.0), (3, 10, 1e9)]);
        let t = b.bound(FROM, 1, known, &mut r, Time::ZERO).unwrap();
        assert_eq!(t.weights, 2);
        let weights: Vec<f64> = r.served.iter().map(|s| s.weight).collect();
        assert_eq!(weights, vec![0.5, 2.0, 40.0]);
    }

    #[test]
    fn a_report_from_where_no_data_server_is_listed_is_refused_naming_the_address() {
        let mut b = ReportBounds::new(Bandwidth(100e6));
        let e = b
            .bound(FROM, 0, (1.0, 1.0), &mut report(&[(1, 1, 1.0)]), Time::ZERO)
            .unwrap_err();
        assert!(
            e.contains("10.0.0.2") && e.contains("no data server"),
            "{e}"
        );
    }
}
