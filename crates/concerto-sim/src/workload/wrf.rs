//! WRF-like: each call is `getattrs` getattr requests, then one small I/O
//! of `request_size` to the process's own (checkpoint) file.

use concerto_core::MetaOp;

use super::{required, Access, MetaTarget, Steps, Workload};
use crate::scenario::{positive, AppSpec, ConfigError};

pub struct Wrf;

impl Workload for Wrf {
    fn keys(&self) -> &'static [&'static str] {
        &["request_size", "getattrs"]
    }

    fn check(&self, at: &str, app: &AppSpec) -> Result<(), ConfigError> {
        required(at, app, "request_size", app.request_size.is_some())?;
        positive(
            &format!("{at}.request_size"),
            app.request_size.map_or(0, |b| b.0),
        )
    }

    fn bytes_per_call(&self, app: &AppSpec) -> u64 {
        app.request_size.map_or(0, |b| b.0)
    }

    /// A file per process.
    fn files_per_instance(&self, app: &AppSpec) -> u32 {
        app.processes
    }

    fn steps(&self, app: &AppSpec, rank: u32, call: u32, steps: &mut Steps) {
        for _ in 0..app.getattrs.unwrap_or(0) {
            steps.meta(MetaOp::Getattr, MetaTarget::File(rank));
        }
        let size = app.request_size.map_or(0, |b| b.0);
        steps.data(app.op, Access::one(rank, call as u64 * size, size));
    }
}
