//! A device model for the throttle-and-redistribute policies' tests: one
//! request in service at a time at a fixed bandwidth, and applications
//! that each send at most at their own pace (what holds them back
//! elsewhere: another server, their computation), keeping a few requests
//! queued while their pace allows.

use std::collections::BTreeMap;

use super::RequestQueue;
use crate::request::{Op, Request};
use crate::time::Time;

pub(super) const SIZE: u64 = 64 << 10;

/// One stretch of an application's sending: from `from_s` to `to_s`
/// seconds, at most `rate` bytes per second (infinite: as fast as served).
#[derive(Clone, Copy, Debug)]
pub(super) struct Stretch {
    pub from_s: f64,
    pub to_s: f64,
    pub rate: f64,
}

pub(super) struct Paced {
    pub app: u32,
    pub stretches: Vec<Stretch>,
}

impl Paced {
    /// Sends as fast as it is served over `[from_s, to_s)`.
    pub fn greedy(app: u32, from_s: f64, to_s: f64) -> Paced {
        Paced::at(app, &[(from_s, to_s, f64::INFINITY)])
    }

    /// A drawn application: from `start_halves` half-seconds on, one
    /// second at `rate_mb` MB/s, then `greedy_s` seconds as fast as served.
    pub fn slow_then_greedy(app: u32, start_halves: u32, rate_mb: u32, greedy_s: u32) -> Paced {
        let from = start_halves as f64 * 0.5;
        let slow = (from, from + 1.0, rate_mb as f64 * 1e6);
        let fast = (from + 1.0, from + 1.0 + greedy_s as f64, f64::INFINITY);
        Paced::at(app, &[slow, fast])
    }

    pub fn at(app: u32, stretches: &[(f64, f64, f64)]) -> Paced {
        Paced {
            app,
            stretches: stretches
                .iter()
                .map(|&(from_s, to_s, rate)| Stretch { from_s, to_s, rate })
                .collect(),
        }
    }

    /// When, at or after `now`, it may send its next request, having sent
    /// `sent` bytes in the stretch that holds `now` (None: not in one).
    fn next_send(&self, now: f64, sent: u64) -> Option<(usize, f64)> {
        let (i, s) = self
            .stretches
            .iter()
            .enumerate()
            .find(|(_, s)| now >= s.from_s && now < s.to_s)?;
        let at = if s.rate.is_infinite() {
            now
        } else {
            (s.from_s + sent as f64 / s.rate).max(now)
        };
        (at < s.to_s).then_some((i, at))
    }
}

/// Runs `loads` on `q` for `seconds` with the device at `capacity` bytes
/// per second; returns each request's application, start time and bytes,
/// in start order.
pub(super) fn run(
    q: &mut dyn RequestQueue,
    loads: &[Paced],
    capacity: f64,
    seconds: f64,
) -> Vec<(u32, f64, u64)> {
    let mut queued: BTreeMap<u32, u32> = loads.iter().map(|l| (l.app, 0)).collect();
    // Bytes sent in each application's current stretch.
    let mut sent: BTreeMap<(u32, usize), u64> = BTreeMap::new();
    let mut started = Vec::new();
    let mut now = 0.0f64;
    let mut id = 0;
    let mut out = Vec::new();
    while now < seconds {
        let t = Time::from_secs_f64(now);
        let mut next_event = seconds;
        for l in loads {
            let n = queued.get_mut(&l.app).expect("every load has a count");
            loop {
                let stretch = l
                    .stretches
                    .iter()
                    .position(|s| now >= s.from_s && now < s.to_s);
                let done = stretch.map_or(0, |i| sent.get(&(l.app, i)).copied().unwrap_or(0));
                match l.next_send(now, done) {
                    Some((i, at)) if at <= now && *n < 4 => {
                        q.enqueue(Request::data(id, l.app, 0, t, Op::Write, 0, 0, SIZE), t);
                        id += 1;
                        *n += 1;
                        *sent.entry((l.app, i)).or_default() += SIZE;
                    }
                    Some((_, at)) if at > now => {
                        next_event = next_event.min(at);
                        break;
                    }
                    _ => break,
                }
            }
            for s in &l.stretches {
                if s.from_s > now {
                    next_event = next_event.min(s.from_s);
                }
            }
        }
        out.clear();
        q.dispatch(t, 1, &mut out);
        let Some(r) = out.pop() else {
            let wake = q.next_wakeup(t).map_or(seconds, |w| w.as_secs_f64());
            now = next_event.min(wake).max(now + 1e-9);
            continue;
        };
        started.push((r.app.0, now, r.len));
        *queued.get_mut(&r.app.0).expect("a known application") -= 1;
        now += r.len as f64 / capacity;
        q.complete(&r, Time::from_secs_f64(now));
    }
    started
}

/// Bytes `app` started in `[from_s, to_s)`.
pub(super) fn served(started: &[(u32, f64, u64)], app: u32, from_s: f64, to_s: f64) -> u64 {
    started
        .iter()
        .filter(|s| s.0 == app && s.1 >= from_s && s.1 < to_s)
        .map(|s| s.2)
        .sum()
}
