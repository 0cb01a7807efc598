//! Server-side I/O coordination (the coordination paper, Section 3).
//!
//! Every server orders its queue by `(time window, application id)`, where
//! the window is `floor(request time / width)`. Since the application id and
//! the client issue time travel with the request, every server computes the
//! same order without talking to the others, so all servers serve one
//! application at a time and its striped requests finish together. Earlier
//! windows always go first, so nothing starves.
//!
//! The paper's priority `req_time / interval * 32768 + app_id` is the same
//! order for ids below 32768; ties are broken by issue time, then arrival.

use crate::FieldError;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use super::{PolicySpec, RequestQueue};
use crate::request::Request;
use crate::time::Time;
use crate::units::Bandwidth;

/// `kind = "coordinated"`: the time window and where issue times come from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoordinatedConfig {
    /// Time window width; `None` means the device class default
    /// (1000 ms for HDD-class devices, 250 ms for SSD-class).
    pub window: Option<Time>,
    pub time_source: TimeSource,
}

impl PolicySpec for CoordinatedConfig {
    const NAME: &'static str = "coordinated";
    fn build(&self, default_window: Time) -> Box<dyn RequestQueue> {
        Box::new(Coordinated::new(
            self.window.unwrap_or(default_window),
            self.time_source,
        ))
    }
    fn validate(&self) -> Result<(), FieldError> {
        match self.window {
            Some(w) if w.is_zero() => Err(FieldError::new("window", "must be > 0".into())),
            _ => Ok(()),
        }
    }
    fn resolve(&mut self, default_window: Time, _device_capacity: Bandwidth) {
        self.window.get_or_insert(default_window);
    }
}

/// Which clock stamps a request for windowing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeSource {
    /// The client's issue time (the paper's choice: identical on every server).
    #[default]
    Issue,
    /// The server's arrival time (differs between servers by network delay).
    Arrival,
}

/// (window, application id, issue time, arrival sequence): smaller goes first.
type Priority = (u64, u32, Time, u64);

pub struct Coordinated {
    window: u64,
    time_source: TimeSource,
    /// Waiting requests live in a slab; the heap orders slab slots, so sifting
    /// moves 40-byte keys rather than whole requests.
    heap: BinaryHeap<Reverse<(Priority, usize)>>,
    slab: Vec<Option<Request>>,
    free: Vec<usize>,
    arrivals: u64,
}

impl Coordinated {
    /// `window` of zero is treated as one nanosecond (every instant its own window).
    pub fn new(window: Time, time_source: TimeSource) -> Coordinated {
        Coordinated {
            window: window.as_nanos().max(1),
            time_source,
            heap: BinaryHeap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            arrivals: 0,
        }
    }

    pub fn window(&self) -> Time {
        Time::from_nanos(self.window)
    }

    /// The window a request falls in, given when it arrived.
    pub fn window_of(&self, req: &Request, arrival: Time) -> u64 {
        let t = match self.time_source {
            TimeSource::Issue => req.issue_time,
            TimeSource::Arrival => arrival,
        };
        t.as_nanos() / self.window
    }
}

impl RequestQueue for Coordinated {
    fn name(&self) -> &'static str {
        "coordinated"
    }

    fn enqueue(&mut self, req: Request, now: Time) {
        let prio = (
            self.window_of(&req, now),
            req.app.0,
            req.issue_time,
            self.arrivals,
        );
        self.arrivals += 1;
        let slot = match self.free.pop() {
            Some(s) => {
                self.slab[s] = Some(req);
                s
            }
            None => {
                self.slab.push(Some(req));
                self.slab.len() - 1
            }
        };
        self.heap.push(Reverse((prio, slot)));
    }

    fn dispatch(&mut self, _now: Time, free_slots: u32, out: &mut Vec<Request>) {
        for _ in 0..free_slots {
            let Some(Reverse((_, slot))) = self.heap.pop() else {
                break;
            };
            if let Some(req) = self.slab[slot].take() {
                self.free.push(slot);
                out.push(req);
            }
        }
    }

    fn complete(&mut self, _req: &Request, _now: Time) {}

    fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Op;

    fn req(id: u64, app: u32, issue_ms: u64) -> Request {
        Request::data(
            id,
            app,
            0,
            Time::from_millis(issue_ms),
            Op::Read,
            0,
            0,
            4096,
        )
    }

    fn drain(q: &mut dyn RequestQueue) -> Vec<u64> {
        let mut out = Vec::new();
        q.dispatch(Time::ZERO, u32::MAX, &mut out);
        out.iter().map(|r| r.id.0).collect()
    }

    #[test]
    fn orders_by_window_then_application() {
        let mut q = Coordinated::new(Time::from_millis(1000), TimeSource::Issue);
        q.enqueue(req(1, 9, 10), Time::ZERO);
        q.enqueue(req(2, 3, 1500), Time::ZERO); // later window, lower id
        q.enqueue(req(3, 3, 900), Time::ZERO);
        q.enqueue(req(4, 9, 5), Time::ZERO); // same window and app as 1, issued earlier
        assert_eq!(drain(&mut q), vec![3, 4, 1, 2]);
    }

    #[test]
    fn matches_the_papers_priority_formula() {
        // req_prior = req_time / interval * 32768 + app_id, ascending.
        let interval = 250u64;
        let mut q = Coordinated::new(Time::from_millis(interval), TimeSource::Issue);
        let tags = [
            (7u32, 0u64),
            (32767, 100),
            (0, 260),
            (5, 249),
            (1, 900),
            (2, 501),
        ];
        for (i, &(app, t)) in tags.iter().enumerate() {
            q.enqueue(req(i as u64, app, t), Time::ZERO);
        }
        let mut expected: Vec<(u64, u64)> = tags
            .iter()
            .enumerate()
            .map(|(i, &(app, t))| (t / interval * 32768 + app as u64, i as u64))
            .collect();
        expected.sort();
        assert_eq!(
            drain(&mut q),
            expected.iter().map(|&(_, i)| i).collect::<Vec<_>>()
        );
    }

    #[test]
    fn arrival_time_source_uses_the_servers_clock() {
        let mut q = Coordinated::new(Time::from_millis(100), TimeSource::Arrival);
        q.enqueue(req(1, 1, 0), Time::from_millis(150)); // issued early, arrived in window 1
        q.enqueue(req(2, 5, 120), Time::from_millis(50)); // arrived in window 0
        assert_eq!(drain(&mut q), vec![2, 1]);
    }
}
