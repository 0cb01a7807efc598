//! An explicit request trace (`trace`, docs/workloads.md): each rank
//! replays its own requests, one per call, with no barriers.

use super::{required, Access, Steps, Workload};
use crate::scenario::{AppSpec, ConfigError};

pub struct Trace;

impl Workload for Trace {
    fn keys(&self) -> &'static [&'static str] {
        &["trace", "trace_app"]
    }

    /// Its file, whose requests are the calls.
    fn check(&self, at: &str, app: &AppSpec) -> Result<(), ConfigError> {
        required(at, app, "trace", app.trace.is_some())?;
        if app.requests != 1 {
            return Err(ConfigError::at(
                format!("{at}.requests"),
                "does not apply to workload \"trace\" (its calls are the trace's requests)",
            ));
        }
        Ok(())
    }

    /// The most any rank makes (`AppSpec::calls_of` gives each rank's).
    fn calls(&self, app: &AppSpec) -> u32 {
        app.trace_data.as_ref().map_or(0, |t| {
            t.ranks.iter().map(Vec::len).max().unwrap_or(0) as u32
        })
    }

    /// The largest request.
    fn bytes_per_call(&self, app: &AppSpec) -> u64 {
        app.trace_data.as_ref().map_or(0, |t| {
            t.ranks
                .iter()
                .flatten()
                .map(|q| q.length)
                .max()
                .unwrap_or(0)
        })
    }

    fn files_per_instance(&self, app: &AppSpec) -> u32 {
        app.trace_data.as_ref().map_or(1, |t| t.file_count().max(1))
    }

    fn steps(&self, app: &AppSpec, rank: u32, call: u32, steps: &mut Steps) {
        let traced = app
            .trace_data
            .as_ref()
            .and_then(|t| t.ranks.get(rank as usize)?.get(call as usize));
        if let Some(q) = traced {
            steps.data(q.op, Access::one(q.file, q.offset, q.length));
        }
    }
}
