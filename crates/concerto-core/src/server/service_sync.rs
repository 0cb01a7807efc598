//! Total-service proportional sharing across servers (vPFS / DSFQ style).
//!
//! Per-server SFQ shares each server fairly, but an application that uses
//! more servers than another then receives more in total. Here each server
//! runs SFQ(D)+ and tells the others how much service it gave each
//! application; a server charges service received elsewhere to the
//! application's next start tag (delay = bytes / weight), so every
//! application's total service follows the weights.
//!
//! A server reports when the service it gave since its last report reaches
//! `threshold` bytes, and optionally once `interval` has passed: the
//! threshold bounds the unfairness, and is the knob between that and the
//! number of exchanges. The owner (simulator or real server) carries the
//! reports between servers.

use crate::FieldError;

use serde::{Deserialize, Serialize};

use super::sfq::{cost_bytes, weight_of, CostRow, Sfq, SfqDPlusConfig, SfqParams};
use super::unreported::UnreportedService;
use super::{positive, PolicySpec, RequestQueue, Served, ServiceReport};
use crate::request::Request;
use crate::time::Time;
use crate::units::Bytes;

/// `kind = "service-sync"`: SFQ(D)+'s parameters, and when to report.
/// SFQ(D)+'s six keys are repeated here rather than flattened in: serde
/// cannot refuse unknown keys (`deny_unknown_fields`) in a struct with a
/// flattened field, and a misspelt key must be an error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceSyncConfig {
    pub depth: u32,
    /// Requests of at least this size are large.
    pub small_threshold: Bytes,
    /// Slots a large request holds (L).
    pub large_slots: u32,
    /// Overrides the two above: rows of `{ size, slots }`.
    pub cost_table: Option<Vec<CostRow>>,
    pub backfill: bool,
    pub metadata_cost: Bytes,
    /// Report after serving this many bytes since the last report.
    pub threshold: Bytes,
    /// Also report at least this often (when there is news).
    pub interval: Option<Time>,
}

impl ServiceSyncConfig {
    /// The SFQ(D)+ each server runs.
    fn sfq(&self) -> SfqDPlusConfig {
        SfqDPlusConfig {
            depth: self.depth,
            small_threshold: self.small_threshold,
            large_slots: self.large_slots,
            cost_table: self.cost_table.clone(),
            backfill: self.backfill,
            metadata_cost: self.metadata_cost,
        }
    }
}

impl Default for ServiceSyncConfig {
    fn default() -> ServiceSyncConfig {
        let sfq = SfqDPlusConfig::default();
        ServiceSyncConfig {
            depth: sfq.depth,
            small_threshold: sfq.small_threshold,
            large_slots: sfq.large_slots,
            cost_table: sfq.cost_table,
            backfill: sfq.backfill,
            metadata_cost: sfq.metadata_cost,
            threshold: Bytes(4 << 20),
            interval: None,
        }
    }
}

impl PolicySpec for ServiceSyncConfig {
    const NAME: &'static str = "service-sync";
    fn build(&self, _default_window: Time) -> Box<dyn RequestQueue> {
        Box::new(ServiceSync::new(
            self.sfq().params(),
            self.threshold.0,
            self.interval,
        ))
    }
    fn validate(&self) -> Result<(), FieldError> {
        positive("depth", self.depth as u64)?;
        positive("metadata_cost", self.metadata_cost.0)?;
        positive("threshold", self.threshold.0)?;
        if self.interval.is_some_and(|i| i.is_zero()) {
            return Err(FieldError::new("interval", "must be > 0".into()));
        }
        self.sfq().validate()
    }
}

pub struct ServiceSync {
    sfq: Sfq,
    unreported: UnreportedService,
}

impl ServiceSync {
    pub fn new(params: SfqParams, threshold: u64, interval: Option<Time>) -> ServiceSync {
        ServiceSync {
            sfq: Sfq::new("service-sync", params),
            unreported: UnreportedService::new(threshold, interval),
        }
    }

    /// Reports this server has sent.
    pub fn reports_sent(&self) -> u64 {
        self.unreported.reports_sent()
    }
}

impl RequestQueue for ServiceSync {
    fn name(&self) -> &'static str {
        "service-sync"
    }

    fn enqueue(&mut self, req: Request, now: Time) {
        self.sfq.enqueue(req, now);
    }

    fn dispatch(&mut self, now: Time, free_slots: u32, out: &mut Vec<Request>) {
        self.sfq.dispatch(now, free_slots, out);
    }

    fn complete(&mut self, req: &Request, now: Time) {
        self.sfq.complete(req, now);
        let bytes = cost_bytes(req, self.sfq.params().metadata_cost);
        self.unreported.add(Served {
            bytes,
            requests: 1,
            ..Served::none(req.app, weight_of(req))
        });
    }

    fn slot_cost(&self, req: &Request) -> u32 {
        self.sfq.slot_cost(req)
    }

    fn depth(&self) -> Option<u32> {
        self.sfq.depth()
    }

    fn len(&self) -> usize {
        self.sfq.len()
    }

    fn service_report(&mut self, now: Time) -> Option<ServiceReport> {
        self.unreported.report(now)
    }

    fn absorb_service(&mut self, report: &ServiceReport) {
        for s in &report.served {
            self.sfq.charge_remote(s.app, s.bytes, s.weight);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{AppId, Op};
    use crate::server::SlotCosts;

    fn params() -> SfqParams {
        SfqParams::sfq_d_plus(1, SlotCosts::unit(), false)
    }

    #[test]
    fn reports_when_the_threshold_is_reached() {
        let mut q = ServiceSync::new(params(), 10_000, None);
        let r = Request::data(0, 3, 0, Time::ZERO, Op::Write, 0, 0, 6_000);
        q.complete(&r, Time::ZERO);
        assert!(q.service_report(Time::ZERO).is_none());
        q.complete(&r, Time::ZERO);
        let rep = q
            .service_report(Time::ZERO)
            .expect("12 KB served, threshold 10 KB");
        assert_eq!(
            rep.served,
            vec![Served {
                bytes: 12_000,
                requests: 2,
                ..Served::none(AppId(3), 1.0)
            }]
        );
        assert!(
            q.service_report(Time::ZERO).is_none(),
            "nothing new to report"
        );
        assert_eq!(q.reports_sent(), 1);
    }

    #[test]
    fn interval_reports_below_the_threshold() {
        let mut q = ServiceSync::new(params(), 1 << 30, Some(Time::from_millis(100)));
        q.complete(
            &Request::data(0, 1, 0, Time::ZERO, Op::Read, 0, 0, 10),
            Time::from_millis(50),
        );
        assert!(q.service_report(Time::from_millis(50)).is_none());
        assert!(q.service_report(Time::from_millis(100)).is_some());
    }

    #[test]
    fn remote_service_delays_an_application_here() {
        // Apps 0 and 1 backlogged here with equal weights; app 0 already got
        // 4 requests' worth elsewhere, so app 1 goes first four times.
        let mut q = ServiceSync::new(params(), 1, None);
        q.absorb_service(&ServiceReport {
            served: vec![Served {
                bytes: 4_000,
                requests: 4,
                ..Served::none(AppId(0), 1.0)
            }],
        });
        for i in 0..6u64 {
            q.enqueue(
                Request::data(i, 0, 0, Time::ZERO, Op::Write, 0, 0, 1_000),
                Time::ZERO,
            );
            q.enqueue(
                Request::data(100 + i, 1, 0, Time::ZERO, Op::Write, 1, 0, 1_000),
                Time::ZERO,
            );
        }
        let mut out = Vec::new();
        let mut order = Vec::new();
        while !q.is_empty() {
            q.dispatch(Time::ZERO, 1, &mut out);
            for r in out.drain(..) {
                order.push(r.app.0);
                q.complete(&r, Time::ZERO);
            }
        }
        assert_eq!(&order[..5], &[1, 1, 1, 1, 0]);
    }
}
