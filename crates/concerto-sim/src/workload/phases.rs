//! Explicit phases (a job-level workload): `phases` lists `[compute
//! seconds, bytes]`; each call computes, then the processes write the
//! phase's bytes in equal shares over the same region of one file.

use super::{required, Access, Steps, Workload};
use crate::scenario::{phase_bytes, positive, AppSpec, ConfigError};

/// The largest request of a "phases" workload when `request_size` is not given.
pub const DEFAULT_PHASE_REQUEST: u64 = 4 << 20;

pub struct Phases;

impl Workload for Phases {
    fn keys(&self) -> &'static [&'static str] {
        &["request_size", "phases"]
    }

    /// Each `[compute seconds, bytes]` finite and not negative.
    fn check(&self, at: &str, app: &AppSpec) -> Result<(), ConfigError> {
        let key = |k: &str| format!("{at}.{k}");
        required(at, app, "phases", app.phases.is_some())?;
        let phases = app.phases.as_deref().unwrap_or(&[]);
        if phases.is_empty() {
            return Err(ConfigError::at(key("phases"), "needs at least one phase"));
        }
        for (k, [compute, bytes]) in phases.iter().enumerate() {
            for (j, v) in [(0, compute), (1, bytes)] {
                if !(v.is_finite() && *v >= 0.0) {
                    return Err(ConfigError::at(
                        format!("{at}.phases[{k}][{j}]"),
                        format!("{v} must be a finite number >= 0"),
                    ));
                }
            }
        }
        if !app.barrier {
            return Err(ConfigError::at(
                key("barrier"),
                "must be true for workload \"phases\" (each phase is one operation)",
            ));
        }
        if let Some(size) = app.request_size {
            positive(&key("request_size"), size.0)?;
        }
        Ok(())
    }

    /// One per phase.
    fn calls(&self, app: &AppSpec) -> u32 {
        app.phases.as_ref().map_or(0, |p| p.len() as u32)
    }

    /// The largest phase's share per process.
    fn bytes_per_call(&self, app: &AppSpec) -> u64 {
        app.phases.as_ref().map_or(0, |p| {
            p.iter().map(|x| phase_bytes(x[1])).max().unwrap_or(0) / app.processes.max(1) as u64
        })
    }

    fn bytes_of_call(&self, app: &AppSpec, call: u32) -> u64 {
        app.phases
            .as_ref()
            .map_or(0, |p| phase_bytes(p[call as usize][1]))
    }

    /// Phase `call` of process `rank`: the phase's bytes in equal shares
    /// (the first ones a byte more), each process's share contiguous, in
    /// requests of at most `request_size`.
    fn steps(&self, app: &AppSpec, rank: u32, call: u32, steps: &mut Steps) {
        let (r, procs) = (rank as u64, app.processes as u64);
        let total = self.bytes_of_call(app, call);
        let (share, extra) = (total / procs, total % procs);
        let mine = share + u64::from(r < extra);
        let mut offset = r * share + r.min(extra);
        let chunk = app.request_size.map_or(DEFAULT_PHASE_REQUEST, |b| b.0);
        let end = offset + mine;
        while offset < end {
            let len = chunk.min(end - offset);
            steps.data(app.op, Access::one(0, offset, len));
            offset += len;
        }
    }
}
