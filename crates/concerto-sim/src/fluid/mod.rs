//! The fluid mode for job-level studies (io-sets.txt Section V): the
//! platform's I/O bandwidth B is shared by the applications an
//! [`IoArbiter`] has granted, each at x_i = p_i / Σ p_j of B; applications
//! alternate compute phases (seconds) and I/O phases (bytes).
//!
//! Event times are exact, with no time steps, and an event costs
//! O(log n) whatever the number of applications doing I/O. Shares change at
//! every grant and completion, but not a granted phase's place in the
//! queue of completions: with V(t) the work done per unit of priority
//! (dV/dt = B / Σ p_j), a phase of `bytes` granted at priority p when V is
//! V₀ completes when V reaches V₀ + bytes / p, however the shares move in
//! between. Completions are a heap on that value; only the time of the next
//! one is recomputed when Σ p_j changes.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use serde::Serialize;

use concerto_core::job::{Decision, IoArbiter, PhaseInfo};
use concerto_core::{AppId, Time};

mod file;
mod generator;
mod metrics;

pub use file::{rule_from_toml, WorkloadApp, WorkloadFile};
pub use generator::{generate, Generated, GeneratorSpec, GroupSpec};
pub use metrics::{measure, window_metrics, RuleOutcome, WindowMetrics};

/// One phase of an application: compute for `compute_s` seconds, then
/// write or read `io_bytes`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FluidPhase {
    pub compute_s: f64,
    pub io_bytes: f64,
}

/// An application of the fluid mode.
#[derive(Clone, Debug, PartialEq)]
pub struct FluidApp {
    /// When it starts its first compute phase, seconds.
    pub release_s: f64,
    pub phases: Vec<FluidPhase>,
    /// What it tells the arbiter (w_iter, group).
    pub info: PhaseInfo,
}

/// One I/O phase as it ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhaseRecord {
    pub app: u32,
    pub phase: u32,
    /// When the application asked to do its I/O.
    pub request_s: f64,
    /// When the arbiter let it.
    pub start_s: f64,
    pub end_s: f64,
    pub bytes: f64,
    pub priority: f64,
}

/// A fluid run: every I/O phase, and when each application finished.
#[derive(Clone, Debug, PartialEq)]
pub struct FluidRun {
    pub phases: Vec<PhaseRecord>,
    pub app_end_s: Vec<f64>,
    pub events: u64,
}

/// A heap entry ordered by an `f64` key (earliest first), then by a
/// sequence number, so that equal keys come out in a fixed order.
#[derive(Clone, Copy, Debug)]
struct Earliest {
    key: f64,
    seq: u64,
    app: u32,
}

impl PartialEq for Earliest {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Earliest {}
impl PartialOrd for Earliest {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Earliest {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap pops the largest.
        other
            .key
            .total_cmp(&self.key)
            .then(other.seq.cmp(&self.seq))
    }
}

/// Where one application is.
#[derive(Clone, Copy, Debug, Default)]
struct AppState {
    /// The phase it is in (compute, then I/O).
    phase: usize,
    request_s: f64,
    start_s: f64,
    priority: f64,
}

/// Starts an application's I/O phase at `now` with `priority`; returns the
/// value of V at which it completes.
fn start_io(s: &mut AppState, app: &FluidApp, priority: f64, now: f64, v: f64) -> f64 {
    s.start_s = now;
    s.priority = priority;
    v + app.phases[s.phase].io_bytes / priority
}

/// Runs the applications on bandwidth `bandwidth` (bytes per second, > 0) under `arbiter`.
pub fn run(
    apps: &[FluidApp],
    bandwidth: f64,
    arbiter: &mut dyn IoArbiter,
) -> Result<FluidRun, String> {
    if !(bandwidth.is_finite() && bandwidth > 0.0) {
        return Err(format!(
            "bandwidth: {bandwidth} must be a positive number of bytes per second"
        ));
    }
    let mut engine = Engine::new(apps, bandwidth);
    loop {
        let next_io = engine.next_completion();
        let next_compute = engine.computing.peek().map(|c| c.key);
        // At equal times a completion goes first: it may free the set a request wants.
        let completion_first = match (next_io, next_compute) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(io), Some(cpu)) => io <= cpu,
        };
        engine.run.events += 1;
        match (completion_first, next_io) {
            (true, Some(at)) => engine.complete(at, arbiter),
            _ => engine.request(arbiter),
        }
    }
    Ok(engine.run)
}

/// The fluid run's state between events.
struct Engine<'a> {
    apps: &'a [FluidApp],
    bandwidth: f64,
    state: Vec<AppState>,
    /// Compute phases by their end: the application then asks for I/O.
    computing: BinaryHeap<Earliest>,
    /// Granted I/O phases by the value of V at which they complete.
    completions: BinaryHeap<Earliest>,
    seq: u64,
    run: FluidRun,
    /// V: work per unit of priority done so far; `v_at` is when it was
    /// last brought up to date; the priorities of the phases granted.
    v: f64,
    v_at: f64,
    total_priority: f64,
}

impl<'a> Engine<'a> {
    fn new(apps: &'a [FluidApp], bandwidth: f64) -> Engine<'a> {
        let mut engine = Engine {
            apps,
            bandwidth,
            state: vec![AppState::default(); apps.len()],
            computing: BinaryHeap::new(),
            completions: BinaryHeap::new(),
            seq: 0,
            run: FluidRun {
                phases: Vec::new(),
                app_end_s: apps.iter().map(|a| a.release_s).collect(),
                events: 0,
            },
            v: 0.0,
            v_at: 0.0,
            total_priority: 0.0,
        };
        for (i, a) in apps.iter().enumerate() {
            if let Some(first) = a.phases.first() {
                engine.push(Heap::Computing, a.release_s + first.compute_s, i);
            }
        }
        engine
    }

    fn push(&mut self, heap: Heap, key: f64, app: usize) {
        self.seq += 1;
        let entry = Earliest {
            key,
            seq: self.seq,
            app: app as u32,
        };
        match heap {
            Heap::Computing => self.computing.push(entry),
            Heap::Completions => self.completions.push(entry),
        }
    }

    /// When the next granted phase completes at the current shares.
    fn next_completion(&self) -> Option<f64> {
        self.completions
            .peek()
            .map(|c| self.v_at + (c.key - self.v) * self.total_priority / self.bandwidth)
    }

    /// Grants `app` its I/O phase at `now` with `priority`.
    fn grant(&mut self, app: usize, priority: f64, now: f64) {
        let key = start_io(&mut self.state[app], &self.apps[app], priority, now, self.v);
        self.total_priority += priority;
        self.push(Heap::Completions, key, app);
    }

    /// The next I/O phase completes at `at`: it is recorded, the arbiter
    /// grants whom it lets go next, and the application computes again
    /// (or ends).
    fn complete(&mut self, at: f64, arbiter: &mut dyn IoArbiter) {
        let Some(done) = self.completions.pop() else {
            return;
        };
        let now = at.max(self.v_at);
        self.v = done.key;
        self.v_at = now;
        let app = done.app as usize;
        let s = self.state[app];
        self.total_priority -= s.priority;
        if self.completions.is_empty() {
            self.total_priority = 0.0; // no residue from rounding
        }
        let phase = &self.apps[app].phases[s.phase];
        self.run.phases.push(PhaseRecord {
            app: app as u32,
            phase: s.phase as u32,
            request_s: s.request_s,
            start_s: s.start_s,
            end_s: now,
            bytes: phase.io_bytes,
            priority: s.priority,
        });
        let granted = arbiter.end_phase(AppId(app as u32), Time::from_secs_f64(now));
        for (next, priority) in granted {
            self.grant(next.0 as usize, priority, now);
        }
        self.state[app].phase += 1;
        match self.apps[app].phases.get(self.state[app].phase) {
            Some(p) => self.push(Heap::Computing, now + p.compute_s, app),
            None => self.run.app_end_s[app] = now,
        }
    }

    /// The next compute phase ends: its application asks for I/O.
    fn request(&mut self, arbiter: &mut dyn IoArbiter) {
        let Some(ready) = self.computing.pop() else {
            return;
        };
        let now = ready.key;
        if self.total_priority > 0.0 {
            self.v += (now - self.v_at) * self.bandwidth / self.total_priority;
        }
        self.v_at = now;
        let app = ready.app as usize;
        self.state[app].request_s = now;
        let info = &self.apps[app].info;
        if let Decision::Granted { priority } =
            arbiter.begin_phase(AppId(app as u32), Time::from_secs_f64(now), info)
        {
            self.grant(app, priority, now);
        }
    }
}

#[derive(Clone, Copy)]
enum Heap {
    Computing,
    Completions,
}

#[cfg(test)]
mod tests;
