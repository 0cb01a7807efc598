//! What a server has served and not yet told the other servers: the one
//! account behind every policy that exchanges [`ServiceReport`]s
//! (total-service sharing, distributed dmClock).
//!
//! A report is due when the service since the last one reaches a threshold
//! (which bounds how far the others' view lags), or, when there is news,
//! once an interval has passed since the last one (which bounds how late a
//! trickle is told).

use std::collections::BTreeMap;

use super::{Served, ServiceReport};
use crate::request::AppId;
use crate::time::Time;

pub(crate) struct UnreportedService {
    threshold: u64,
    interval: Option<Time>,
    served: BTreeMap<AppId, Served>,
    bytes: u64,
    last_report: Time,
    reports: u64,
}

impl UnreportedService {
    /// Reports after `threshold` bytes (at least 1), and with `interval`
    /// also once that long has passed with something to tell.
    pub(crate) fn new(threshold: u64, interval: Option<Time>) -> UnreportedService {
        UnreportedService {
            threshold: threshold.max(1),
            interval,
            served: BTreeMap::new(),
            bytes: 0,
            last_report: Time::ZERO,
            reports: 0,
        }
    }

    /// Counts service given here; its weight is the application's from now on.
    pub(crate) fn add(&mut self, this: Served) {
        self.served
            .entry(this.app)
            .or_insert_with(|| Served::none(this.app, this.weight))
            .add(&this);
        self.bytes = self.bytes.saturating_add(this.bytes);
    }

    /// The report to send at `now`, if one is due; what it tells is then told.
    pub(crate) fn report(&mut self, now: Time) -> Option<ServiceReport> {
        let due_by_time = self.interval.is_some_and(|i| now >= self.last_report + i);
        if self.bytes == 0 || (self.bytes < self.threshold && !due_by_time) {
            return None;
        }
        self.last_report = now;
        self.bytes = 0;
        self.reports += 1;
        let served = std::mem::take(&mut self.served).into_values().collect();
        Some(ServiceReport { served })
    }

    /// Reports sent so far.
    pub(crate) fn reports_sent(&self) -> u64 {
        self.reports
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(app: u32, bytes: u64) -> Served {
        Served {
            bytes,
            requests: 1,
            ..Served::none(AppId(app), 1.0)
        }
    }

    #[test]
    fn a_report_is_due_at_the_threshold_and_tells_each_application_once() {
        let mut u = UnreportedService::new(100, None);
        u.add(served(1, 60));
        assert_eq!(
            u.report(Time::from_secs(10)),
            None,
            "below the threshold, no interval"
        );
        u.add(served(2, 30));
        u.add(served(1, 10));
        let r = u.report(Time::from_secs(10)).expect("100 bytes reached");
        let told: Vec<(u32, u64, u64)> = r
            .served
            .iter()
            .map(|s| (s.app.0, s.bytes, s.requests))
            .collect();
        assert_eq!(told, vec![(1, 70, 2), (2, 30, 1)]);
        assert_eq!(u.report(Time::from_secs(20)), None, "nothing new to tell");
        assert_eq!(u.reports_sent(), 1);
    }

    #[test]
    fn an_interval_tells_a_trickle_once_it_has_passed() {
        let mut u = UnreportedService::new(1 << 20, Some(Time::from_millis(10)));
        u.add(served(1, 5));
        assert_eq!(u.report(Time::from_millis(9)), None);
        assert!(u.report(Time::from_millis(10)).is_some());
        u.add(served(1, 5));
        assert_eq!(
            u.report(Time::from_millis(15)),
            None,
            "the interval counts from the last report"
        );
        assert!(u.report(Time::from_millis(20)).is_some());
    }
}
