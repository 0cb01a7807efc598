//! Client side: transfer matrices and their schedules (the bipartite
//! transfer-scheduling problem), and collective-call plans.

use pyo3::prelude::*;
use serde::Serialize;

use concerto_core::client::collective::CollectivePlan;
use concerto_core::client::transfers;

use crate::objects::to_py;
use crate::ConcertoConfigError;

/// Reads a transfer matrix (one row per client, one number per server);
/// an error names the row and column.
#[pyfunction]
pub fn parse_transfer_matrix(text: &str) -> PyResult<Vec<Vec<u64>>> {
    transfers::parse_counts(text).map_err(|e| ConcertoConfigError::new_err(e.to_string()))
}

/// A random transfer matrix: each (client, server) pair gets 1..=`max_per_pair`
/// transfers with probability `density`, else none.
#[pyfunction]
pub fn random_transfer_matrix(
    clients: u32,
    servers: u32,
    density: f64,
    max_per_pair: u64,
    seed: u64,
) -> Vec<Vec<u64>> {
    transfers::random_counts(clients, servers, density, max_per_pair, seed)
}

/// A degree-regular bipartite multigraph on n clients and n servers (sum of
/// `degree` seeded random permutations), as a count matrix.
#[pyfunction]
pub fn regular_transfer_matrix(n: u32, degree: u32, seed: u64) -> Vec<Vec<u64>> {
    transfers::regular_counts(n, degree, seed)
}

/// Each client sends `per_client` transfers to servers drawn with weight
/// 1/(k+1)^exponent, as a count matrix.
#[pyfunction]
pub fn skewed_transfer_matrix(
    clients: u32,
    servers: u32,
    per_client: u32,
    exponent: f64,
    seed: u64,
) -> Vec<Vec<u64>> {
    transfers::skewed_counts(clients, servers, per_client, exponent, seed)
}

/// Schedules a transfer matrix with every heuristic and optimally. With
/// `unit` > 0 the entries are sizes in bytes, split into transfers of
/// `unit` bytes, and the load bound (bytes) is reported. `show` names the
/// schedule whose steps to include.
#[pyfunction]
#[pyo3(signature = (rows, unit=0, seed=1, passes=3, show=None))]
pub fn plan_transfers(
    py: Python<'_>,
    rows: Vec<Vec<u64>>,
    unit: u64,
    seed: u64,
    passes: u32,
    show: Option<&str>,
) -> PyResult<PyObject> {
    let counts = if unit > 0 {
        transfers::split_sizes(&rows, unit)
    } else {
        rows.clone()
    };
    let t = transfers::Transfers::from_counts(&counts)
        .map_err(|e| ConcertoConfigError::new_err(e.to_string()))?;
    let heuristics = [
        transfers::Heuristic::Fcfs,
        transfers::Heuristic::Hdf,
        transfers::Heuristic::Hcdf,
        transfers::Heuristic::Uar,
        transfers::Heuristic::MPasses { passes },
    ];
    let known: Vec<&str> = heuristics
        .iter()
        .map(|h| h.name())
        .chain(["optimal"])
        .collect();
    if let Some(name) = show {
        if !known.contains(&name) {
            return Err(ConcertoConfigError::new_err(format!(
                "--show: unknown schedule {name:?} (known: {})",
                known.join(", ")
            )));
        }
    }
    let (delta, schedules) = py.allow_threads(|| {
        let mut out: Vec<(&'static str, transfers::Schedule)> = heuristics
            .iter()
            .map(|&h| (h.name(), transfers::schedule(&t, h, seed)))
            .collect();
        out.push(("optimal", transfers::optimal(&t)));
        (t.max_degree(), out)
    });
    let out = TransferPlan {
        clients: t.clients(),
        servers: t.servers(),
        transfers: t.edges().len(),
        delta,
        unit,
        load_bound: (unit > 0).then(|| transfers::load_bound(&rows)),
        schedules: schedules
            .iter()
            .map(|(name, s)| ScheduleEntry {
                name,
                length: s.len(),
                valid: s.check(&t).is_ok(),
                steps: (show == Some(*name)).then(|| {
                    s.steps
                        .iter()
                        .map(|step| step.iter().map(|&e| t.edges()[e as usize]).collect())
                        .collect()
                }),
            })
            .collect(),
    };
    to_py(py, &out)
}

/// Plans one collective call of `pattern` (see
/// `concerto_core::client::collective::patterns`) for `procs` processes on
/// a file striped in `stripe`-byte units over `servers` servers, with
/// `strategy` (independent, two-phase or resonant): the plan, and per
/// request the servers it touches in order, for people to read.
#[pyfunction]
#[pyo3(signature = (pattern, procs, servers, stripe, strategy, write=false, call=0, max_segments=None,
                    cb_nodes=None, cb_buffer_size=None, align=false, agents_per_server=None, group_delay_us=None))]
#[allow(clippy::too_many_arguments)]
pub fn plan_collective(
    py: Python<'_>,
    pattern: &str,
    procs: u32,
    servers: u32,
    stripe: u64,
    strategy: &str,
    write: bool,
    call: u64,
    max_segments: Option<usize>,
    cb_nodes: Option<u32>,
    cb_buffer_size: Option<u64>,
    align: bool,
    agents_per_server: Option<u32>,
    group_delay_us: Option<u64>,
) -> PyResult<PyObject> {
    use concerto_core::client::collective::{
        patterns::Pattern, Direction, PlannerChoice, Strategy,
    };
    let bad = |m: String| ConcertoConfigError::new_err(m);
    let pattern = Pattern::parse(pattern).map_err(|e| bad(format!("--pattern: {e}")))?;
    if procs == 0 {
        return Err(bad("--procs: must be > 0".into()));
    }
    let layout = concerto_core::StripeLayout::round_robin(stripe, servers, 0, servers)
        .map_err(|e| bad(format!("--servers/--stripe: {e}")))?;
    let choice = PlannerChoice {
        strategy: Strategy::parse(strategy).map_err(|e| bad(format!("--strategy: {e}")))?,
        max_segments,
        cb_nodes,
        cb_buffer_size: cb_buffer_size.map(concerto_core::units::Bytes),
        align,
        agents_per_server,
        group_delay: group_delay_us.map(concerto_core::Time::from_micros),
        // The plan itself is shown, whatever ROMIO's rule would make of the call.
        romio_cb: None,
    };
    // The options are the command's: `cb_nodes` is `--cb-nodes`.
    choice
        .validate()
        .map_err(|e| bad(format!("--{} {}", e.field.replace('_', "-"), e.message)))?;
    let planner = choice.planner().map_err(|e| bad(e.to_string()))?;
    let accesses = pattern.accesses(procs, call);
    let direction = if write {
        Direction::Write
    } else {
        Direction::Read
    };
    let plan = planner
        .plan(direction, &accesses, &layout)
        .map_err(|e| bad(e.to_string()))?;
    plan.check(&accesses)
        .map_err(|e| bad(format!("internal error, the plan is wrong: {e}")))?;
    let touches: Touches = plan
        .processes
        .iter()
        .map(|batches| {
            batches
                .iter()
                .map(|b| {
                    b.requests
                        .iter()
                        .map(|r| {
                            let mut runs: Vec<(u32, u64, u64)> = Vec::new();
                            for e in &r.extents {
                                for c in layout.chunks(e.offset, e.len) {
                                    match runs.last_mut() {
                                        Some(run) if run.0 == c.server => run.2 += c.len,
                                        _ => runs.push((c.server, c.file_offset, c.len)),
                                    }
                                }
                            }
                            runs
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let out = CollectivePlanOut {
        strategy: planner.name(),
        procs,
        servers,
        stripe,
        requested_bytes: accesses.iter().flatten().map(|e| e.len).sum(),
        io_bytes: plan.io_bytes(),
        exchanged_bytes: plan.exchanged_bytes(),
        plan: &plan,
        touches,
    };
    to_py(py, &out)
}

/// One schedule of a transfer plan; `steps` (per step, the (client,
/// server) transfers) only for the schedule asked to be shown.
#[derive(Serialize)]
struct ScheduleEntry<'a> {
    name: &'a str,
    length: usize,
    valid: bool,
    steps: Option<Vec<Vec<(u32, u32)>>>,
}

/// What `plan_transfers` returns (`TransferPlan` in the stub).
#[derive(Serialize)]
struct TransferPlan<'a> {
    clients: u32,
    servers: u32,
    transfers: usize,
    delta: u32,
    unit: u64,
    load_bound: Option<u64>,
    schedules: Vec<ScheduleEntry<'a>>,
}

/// Per rank, batch and request: (server, first offset, bytes) runs in the
/// order the request touches them.
type Touches = Vec<Vec<Vec<Vec<(u32, u64, u64)>>>>;

/// What `plan_collective` returns (`CollectivePlan` in the stub).
#[derive(Serialize)]
struct CollectivePlanOut<'a> {
    strategy: &'a str,
    procs: u32,
    servers: u32,
    stripe: u64,
    requested_bytes: u64,
    io_bytes: u64,
    exchanged_bytes: u64,
    plan: &'a CollectivePlan,
    touches: Touches,
}
