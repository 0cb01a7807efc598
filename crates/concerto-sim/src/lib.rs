//! Concerto's simulator: a deterministic discrete-event model of a parallel
//! file system whose servers run concerto-core's policies unchanged.
//!
//! ```text
//! Scenario (TOML) ──► Simulation ──► RunResult (JSON, CSV)
//! ```
//!
//! Same scenario and seed give byte-identical results: all randomness comes
//! from seeded ChaCha streams and event order is total (see [`engine`]).

pub mod config_error;
pub mod device;
pub mod engine;
pub mod fluid;
pub mod model;
pub mod network;
pub mod profile;
pub mod results;
pub mod scenario;
pub mod timeline;
pub mod trace;
pub mod workload;

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

pub use model::Simulation;
pub use results::{RunResult, RunSet, VERSION};
pub use scenario::{ConfigError, Scenario};

/// Operations completed so far, readable from another thread (the Python
/// front polls it to draw a progress bar while the simulation runs).
#[derive(Debug, Default)]
pub struct Progress {
    done: AtomicU64,
    total: AtomicU64,
}

impl Progress {
    pub fn new() -> Progress {
        Progress::default()
    }
    pub fn add(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }
    pub fn add_total(&self, n: u64) {
        self.total.fetch_add(n, Ordering::Relaxed);
    }
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

/// One run of a validated scenario.
pub fn simulate(scenario: &Scenario, seed: u64, progress: Option<&Progress>) -> RunResult {
    Simulation::new(scenario, seed, progress).run()
}

/// `reps` runs with seeds `seed, seed + 1, ...`, spread over the machine's
/// cores; results come back in seed order whatever the thread timing.
pub fn simulate_reps(
    scenario: &Scenario,
    seed: u64,
    reps: u32,
    progress: Option<&Progress>,
) -> RunSet {
    if let Some(p) = progress {
        p.add_total(scenario.total_operations() * reps as u64);
    }
    let runs: Vec<RunResult> = (0..reps.max(1) as u64)
        .into_par_iter()
        .map(|i| simulate(scenario, seed.wrapping_add(i), progress))
        .collect();
    RunSet::new(scenario.clone(), runs)
}
