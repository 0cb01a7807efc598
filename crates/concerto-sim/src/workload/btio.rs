//! NPB BTIO: `requests` output steps writing the solution, then as many
//! verification steps reading it back, each moving `elements` cells of
//! `element_size` per process — as tiny I/Os one at a time ("simple") or
//! aggregated by collective buffering into one I/O ("full").

use super::noncontig::{check_elements, elements_bytes};
use super::{Access, Steps, Workload};
use crate::scenario::{AppSpec, BtioSubtype, ConfigError, DataOp};

pub struct Btio;

impl Workload for Btio {
    fn keys(&self) -> &'static [&'static str] {
        &["element_size", "elements", "subtype"]
    }

    fn check(&self, at: &str, app: &AppSpec) -> Result<(), ConfigError> {
        check_elements(at, app)
    }

    /// Output, then verification.
    fn calls(&self, app: &AppSpec) -> u32 {
        app.requests.saturating_mul(2)
    }

    fn bytes_per_call(&self, app: &AppSpec) -> u64 {
        elements_bytes(app)
    }

    /// Output steps write the solution; verification steps read it back in
    /// the same places.
    fn steps(&self, app: &AppSpec, rank: u32, call: u32, steps: &mut Steps) {
        let (r, procs) = (rank as u64, app.processes as u64);
        let outputs = app.requests as u64;
        let (op, k) = if (call as u64) < outputs {
            (DataOp::Write, call as u64)
        } else {
            (DataOp::Read, call as u64 - outputs)
        };
        let n = app.elements.unwrap_or(1) as u64;
        let esz = app.element_size.map_or(1, |b| b.0);
        match app.subtype.unwrap_or_default() {
            // Collective buffering hands each process one aggregated, contiguous piece.
            BtioSubtype::Full => steps.data(op, Access::one(0, (k * procs + r) * n * esz, n * esz)),
            // Each cell is its own tiny I/O, one outstanding, interleaved across processes.
            BtioSubtype::Simple => {
                for i in 0..n {
                    steps.data(op, Access::one(0, ((k * n + i) * procs + r) * esz, esz));
                }
            }
        }
    }
}
