//! Service over time: what an application was served in consecutive bins,
//! overall or on one server, and (per server) how long it had requests
//! waiting in that server's queue, which is what "backlogged" means when
//! judging a proportional-share policy.

use serde::Serialize;

use concerto_core::Time;

/// Counters per bin of `width`, grown on demand.
#[derive(Clone, Debug)]
pub(crate) struct Bins {
    width: Time,
    /// Per bin: bytes, requests, metadata operations, nanoseconds waiting.
    bins: Vec<[u64; 4]>,
}

impl Bins {
    pub(crate) fn new(width: Time) -> Bins {
        Bins {
            width,
            bins: Vec::new(),
        }
    }

    fn bin(&mut self, at: Time) -> &mut [u64; 4] {
        let i = (at.as_nanos() / self.width.as_nanos().max(1)) as usize;
        if self.bins.len() <= i {
            self.bins.resize(i + 1, [0; 4]);
        }
        &mut self.bins[i]
    }

    /// A request finished being served at `at`.
    pub(crate) fn served(&mut self, at: Time, bytes: u64, metadata: bool) {
        let b = self.bin(at);
        b[0] += bytes;
        b[1] += 1;
        b[2] += metadata as u64;
    }

    /// Requests were waiting from `from` to `to`; split over the bins it spans.
    pub(crate) fn waited(&mut self, from: Time, to: Time) {
        let w = self.width.as_nanos().max(1);
        let (mut t, end) = (from.as_nanos(), to.as_nanos());
        while t < end {
            let bin_end = (t / w + 1) * w;
            let upto = bin_end.min(end);
            self.bin(Time::from_nanos(t))[3] += upto - t;
            t = upto;
        }
    }

    pub(crate) fn to_timeline(&self, with_waiting: bool) -> Timeline {
        let col = |k: usize| self.bins.iter().map(|b| b[k]).collect();
        Timeline {
            bin_s: self.width.as_secs_f64(),
            bytes: col(0),
            requests: col(1),
            metadata_ops: col(2),
            waiting_s: with_waiting.then(|| self.bins.iter().map(|b| b[3] as f64 * 1e-9).collect()),
        }
    }
}

/// One application on one server: its service there over time, and how
/// long it had requests queued (enqueued, not yet dispatched).
#[derive(Clone, Debug)]
pub(crate) struct Backlog {
    pub(crate) bins: Bins,
    queued: u32,
    since: Time,
}

impl Backlog {
    pub(crate) fn new(width: Time) -> Backlog {
        Backlog {
            bins: Bins::new(width),
            queued: 0,
            since: Time::ZERO,
        }
    }

    pub(crate) fn enqueued(&mut self, now: Time) {
        if self.queued == 0 {
            self.since = now;
        }
        self.queued += 1;
    }

    pub(crate) fn dispatched(&mut self, now: Time) {
        self.queued = self.queued.saturating_sub(1);
        if self.queued == 0 {
            self.bins.waited(self.since, now);
        }
    }
}

/// Bytes, requests and metadata operations served in consecutive bins of
/// `bin_s` seconds, counted when requests finished on the servers.
#[derive(Clone, Debug, Serialize)]
pub struct Timeline {
    pub bin_s: f64,
    pub bytes: Vec<u64>,
    pub requests: Vec<u64>,
    pub metadata_ops: Vec<u64>,
    /// Per-server timelines: seconds of each bin during which the
    /// application had requests waiting (queued, not yet dispatched) there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_s: Option<Vec<f64>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_is_split_across_bins() {
        let mut b = Bins::new(Time::from_millis(10));
        b.waited(Time::from_millis(5), Time::from_millis(27));
        b.served(Time::from_millis(12), 100, true);
        let t = b.to_timeline(true);
        let w = t.waiting_s.unwrap();
        assert_eq!(w.len(), 3);
        assert!(
            (w[0] - 0.005).abs() < 1e-12
                && (w[1] - 0.010).abs() < 1e-12
                && (w[2] - 0.007).abs() < 1e-12
        );
        assert_eq!((t.bytes[1], t.requests[1], t.metadata_ops[1]), (100, 1, 1));
    }

    #[test]
    fn backlog_counts_only_while_something_is_queued() {
        let mut b = Backlog::new(Time::from_millis(10));
        b.enqueued(Time::from_millis(1));
        b.enqueued(Time::from_millis(2));
        b.dispatched(Time::from_millis(4));
        b.dispatched(Time::from_millis(6));
        b.enqueued(Time::from_millis(8));
        b.dispatched(Time::from_millis(9));
        let w = b.bins.to_timeline(true).waiting_s.unwrap();
        assert!((w[0] - 0.006).abs() < 1e-12, "{w:?}");
    }
}
