//! noncontig: each call, a vector of `elements` small elements per
//! process, interleaved across the processes (the benchmark's vector type).

use super::{Access, Steps, Workload};
use crate::scenario::{AppSpec, ConfigError};
use concerto_core::Extent;

pub struct Noncontig;

impl Workload for Noncontig {
    fn keys(&self) -> &'static [&'static str] {
        &["element_size", "elements"]
    }

    fn check(&self, at: &str, app: &AppSpec) -> Result<(), ConfigError> {
        check_elements(at, app)
    }

    fn bytes_per_call(&self, app: &AppSpec) -> u64 {
        elements_bytes(app)
    }

    fn steps(&self, app: &AppSpec, rank: u32, call: u32, steps: &mut Steps) {
        steps.data(app.op, access(app, rank, call));
    }
}

/// Element i of process r sits at (i · processes + r) · element_size;
/// call k continues with the next `elements` elements.
pub(super) fn access(app: &AppSpec, rank: u32, call: u32) -> Access {
    let (r, k, procs) = (rank as u64, call as u64, app.processes as u64);
    let n = app.elements.unwrap_or(1) as u64;
    let esz = app.element_size.map_or(1, |b| b.0);
    let extents = (0..n)
        .map(|i| Extent::new(((k * n + i) * procs + r) * esz, esz))
        .collect();
    Access { file: 0, extents }
}

/// noncontig and BTIO: a vector of elements per process and call.
pub(super) fn check_elements(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    super::required(at, app, "elements", app.elements.is_some())?;
    super::required(at, app, "element_size", app.element_size.is_some())?;
    crate::scenario::positive(&key("elements"), app.elements.unwrap_or(0) as u64)?;
    crate::scenario::positive(&key("element_size"), app.element_size.map_or(0, |b| b.0))
}

/// The bytes of one call's elements, per process.
pub(super) fn elements_bytes(app: &AppSpec) -> u64 {
    app.elements.unwrap_or(0) as u64 * app.element_size.map_or(0, |b| b.0)
}
