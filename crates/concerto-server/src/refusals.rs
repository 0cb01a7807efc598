//! Refused connections counted, not logged one by one: a flood of bad
//! handshakes would otherwise write a line each (2.5 minutes of keyless
//! churn wrote 510,661 lines, 59 MB), so whoever can reach the port could
//! fill the server's disk. Each refusal is counted by cause (for the
//! statistics and Prometheus) and, for the log, by cause and source in a
//! window that the accept loop writes out as one line per interval
//! (`refusal_log_interval`, 10 s by default), with the sources that
//! refused most and the last reason given.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use concerto_proto::stats::REFUSAL_CAUSES;

/// Sources one cause counts one by one in a window (the rest are "others").
const SOURCES_PER_CAUSE: usize = 64;
/// Sources one cause names in a log line, the most refused first.
const SOURCES_SHOWN: usize = 3;
/// The longest reason a log line repeats.
const REASON_SHOWN: usize = 200;

/// Why a connection was refused or cut off ([`REFUSAL_CAUSES`]' order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    PoolFull,
    KeyRefused,
    Protocol,
    Busy,
    Revoked,
    Tampered,
    Stalled,
}

/// Where refusals come from, as the server accounts for them: an IPv4
/// address, or an IPv6 address's /64 (one host may own a whole /64).
pub(crate) fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(prefix.into())
        }
    }
}

#[derive(Debug, Default)]
struct CauseWindow {
    count: u64,
    /// At most [`SOURCES_PER_CAUSE`]; the rest are in `count` alone.
    sources: HashMap<IpAddr, u64>,
    last: String,
}

/// Refusals since the server started (by cause) and since the last log line.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    totals: [AtomicU64; REFUSAL_CAUSES.len()],
    window: Mutex<[CauseWindow; REFUSAL_CAUSES.len()]>,
}

impl Refusals {
    fn window(&self) -> MutexGuard<'_, [CauseWindow; REFUSAL_CAUSES.len()]> {
        self.window.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection from `from` was refused for `cause`, `reason` saying how.
    pub(crate) fn record(&self, cause: Refusal, from: IpAddr, reason: &str) {
        self.totals[cause as usize].fetch_add(1, Ordering::Relaxed);
        let mut window = self.window();
        let w = &mut window[cause as usize];
        w.count += 1;
        let source = source_of(from);
        if let Some(n) = w.sources.get_mut(&source) {
            *n += 1;
        } else if w.sources.len() < SOURCES_PER_CAUSE {
            w.sources.insert(source, 1);
        }
        w.last.clear();
        w.last.extend(reason.chars().take(REASON_SHOWN));
    }

    /// Refusals by cause since the server started.
    pub(crate) fn totals(&self) -> [u64; REFUSAL_CAUSES.len()] {
        std::array::from_fn(|i| self.totals[i].load(Ordering::Relaxed))
    }

    /// One line for the refusals since the last one (`None` if there were
    /// none), and a fresh window.
    pub(crate) fn summary(&self, interval: Duration) -> Option<String> {
        let window = std::mem::take(&mut *self.window());
        let parts: Vec<String> = window
            .iter()
            .enumerate()
            .filter(|(_, w)| w.count > 0)
            .map(|(i, w)| {
                let mut sources: Vec<(&IpAddr, &u64)> = w.sources.iter().collect();
                sources.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
                let mut shown: Vec<String> = sources
                    .iter()
                    .take(SOURCES_SHOWN)
                    .map(|(ip, n)| format!("{ip} {n}"))
                    .collect();
                let named: u64 = sources.iter().take(SOURCES_SHOWN).map(|(_, n)| **n).sum();
                if w.count > named {
                    shown.push(format!("{} from others", w.count - named));
                }
                format!(
                    "{} {} ({}; last: {})",
                    w.count,
                    REFUSAL_CAUSES[i],
                    shown.join(", "),
                    w.last
                )
            })
            .collect();
        if parts.is_empty() {
            return None;
        }
        Some(format!(
            "refused in the last {} s: {}",
            interval.as_secs_f64(),
            parts.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG_INTERVAL: Duration = Duration::from_secs(10);

    #[test]
    fn a_flood_is_one_line_per_interval_naming_the_most_refused_sources() {
        let r = Refusals::default();
        assert_eq!(
            r.summary(LOG_INTERVAL),
            None,
            "nothing refused, nothing written"
        );
        for i in 0..10_000u32 {
            let from = IpAddr::from([10, 0, (i % 200) as u8, 1]);
            r.record(Refusal::KeyRefused, from, &format!("unknown key \"k{i}\""));
        }
        for _ in 0..5 {
            r.record(
                Refusal::PoolFull,
                IpAddr::from([10, 9, 9, 9]),
                "1024 handshakes",
            );
        }
        let line = r.summary(LOG_INTERVAL).unwrap();
        assert!(line.starts_with("refused in the last 10 s: 5 handshake pool full (10.9.9.9 5; last: 1024 handshakes); 10000 key refused ("), "{line}");
        assert!(
            line.contains("9850 from others; last: unknown key \"k9999\")"),
            "{line}"
        );
        assert!(line.len() < 600, "one short line: {line}");
        assert_eq!(r.summary(LOG_INTERVAL), None, "the window starts again");
        let totals = r.totals();
        assert_eq!((totals[0], totals[1]), (5, 10_000), "the totals stay");
    }

    #[test]
    fn an_ipv6_host_is_one_source_for_its_whole_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_of(a), source_of(b));
        assert_ne!(source_of(a), source_of(c));
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(source_of(v4), v4);
    }

    #[test]
    fn a_long_reason_is_cut_and_the_sources_counted_are_bounded() {
        let r = Refusals::default();
        r.record(
            Refusal::Protocol,
            IpAddr::from([1, 1, 1, 1]),
            &"x".repeat(10_000),
        );
        for i in 0..1000u32 {
            r.record(Refusal::Busy, IpAddr::from(i.to_be_bytes()), "busy");
        }
        assert!(r.window()[Refusal::Busy as usize].sources.len() <= SOURCES_PER_CAUSE);
        let line = r.summary(LOG_INTERVAL).unwrap();
        assert!(line.len() < 800, "{}", line.len());
        assert!(
            line.contains("1000 address busy") && line.contains("997 from others"),
            "{line}"
        );
    }
}
