//! `concerto._native`: the Rust engine as seen from Python.
//!
//! Thin on purpose: it parses nothing and decides nothing itself, it hands
//! text to the Rust crates and returns JSON. Long calls release the GIL.

mod fs;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use concerto_core::analysis;
use concerto_core::client::transfers;
use concerto_core::job::Sets;
use concerto_core::profile::{self, ProfileSpec};
use concerto_core::AppId;
use concerto_sim::fluid;
use concerto_sim::profile::DeviceProbe;
use concerto_sim::{simulate_reps, ConfigError, Scenario};

create_exception!(
    _native,
    ConcertoConfigError,
    PyValueError,
    "A scenario or option is invalid; the message names the key."
);

fn config_err(e: ConfigError) -> PyErr {
    ConcertoConfigError::new_err(e.to_string())
}

/// Operations completed by a running simulation; poll it from another thread.
#[pyclass(frozen)]
struct Progress {
    inner: Arc<concerto_sim::Progress>,
}

#[pymethods]
impl Progress {
    #[new]
    fn new() -> Progress {
        Progress {
            inner: Arc::new(concerto_sim::Progress::new()),
        }
    }
    #[getter]
    fn done(&self) -> u64 {
        self.inner.done()
    }
    #[getter]
    fn total(&self) -> u64 {
        self.inner.total()
    }
}

fn load(text: &str, table: Option<&str>, overrides: Vec<String>) -> PyResult<Scenario> {
    Scenario::from_toml_table(text, table, &overrides).map_err(config_err)
}

/// Parses and validates a scenario; returns it as JSON with defaults filled in.
#[pyfunction]
#[pyo3(signature = (text, table=None, overrides=Vec::new()))]
fn load_scenario(text: &str, table: Option<&str>, overrides: Vec<String>) -> PyResult<String> {
    let sc = load(text, table, overrides)?;
    serde_json::to_string(&sc).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The values of a scenario that are valid but almost surely mistakes (a
/// duration without a unit, a stripe unit in decimal units), each placed
/// and worded as an error would be, with the fix.
#[pyfunction]
#[pyo3(signature = (text, table=None, overrides=Vec::new()))]
fn scenario_warnings(
    text: &str,
    table: Option<&str>,
    overrides: Vec<String>,
) -> PyResult<Vec<String>> {
    let (_, warnings) =
        Scenario::from_toml_table_warned(text, table, &overrides).map_err(config_err)?;
    Ok(warnings.iter().map(ToString::to_string).collect())
}

/// Draws a fluid-mode workload from a generator file (TOML text) with
/// `seed`; returns the workload file as JSON.
#[pyfunction]
fn fluid_generate(spec: &str, seed: u64) -> PyResult<String> {
    let spec = fluid::GeneratorSpec::from_toml(spec).map_err(ConcertoConfigError::new_err)?;
    let apps =
        fluid::generate(&spec, seed).map_err(|e| ConcertoConfigError::new_err(e.to_string()))?;
    serde_json::to_string_pretty(&fluid::WorkloadFile::generated(&spec, &apps))
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Runs a fluid-mode workload (JSON text) under a set rule (TOML text) and
/// measures it over [window_begin, window_end]. Returns JSON: `metrics`,
/// `app_end_s`, `events`, and `phases` (one object per I/O phase, with the
/// set the rule put its application in).
#[pyfunction]
fn fluid_run(
    py: Python<'_>,
    workload: &str,
    rule: &str,
    window_begin: f64,
    window_end: f64,
) -> PyResult<String> {
    let mut de = serde_json::Deserializer::from_str(workload);
    let file: fluid::WorkloadFile = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| ConcertoConfigError::new_err(format!("{}: {}", e.path(), e.inner())))?;
    let apps = file.apps().map_err(ConcertoConfigError::new_err)?;
    let rule = fluid::rule_from_toml(rule).map_err(ConcertoConfigError::new_err)?;
    let (run, metrics) = py
        .allow_threads(|| {
            let run = fluid::run(&apps, file.bandwidth, &mut Sets::new(rule.clone()))?;
            let metrics =
                fluid::window_metrics(&apps, &run, file.bandwidth, window_begin, window_end)?;
            Ok::<_, String>((run, metrics))
        })
        .map_err(ConcertoConfigError::new_err)?;
    let set_of = |app: u32| rule.place(AppId(app), &apps[app as usize].info).0 .0;
    let phases: Vec<serde_json::Value> = run
        .phases
        .iter()
        .map(|p| {
            serde_json::json!({
                "app": file.apps[p.app as usize].name, "phase": p.phase, "request_s": p.request_s,
                "start_s": p.start_s, "end_s": p.end_s, "bytes": p.bytes, "priority": p.priority,
                "set": set_of(p.app),
            })
        })
        .collect();
    Ok(serde_json::json!({
        "metrics": metrics, "app_end_s": run.app_end_s, "events": run.events, "phases": phases,
        "apps": file.apps.iter().map(|a| &a.name).collect::<Vec<_>>(),
    })
    .to_string())
}

/// io-sets.txt's window metrics of phases that ran elsewhere (the real
/// cluster): `phases` is JSON, one object per I/O phase with `app` (the
/// application's index in `workload`), `phase`, `request_s`, `start_s`,
/// `end_s`, `bytes`; measured as the fluid mode measures its own runs,
/// with the workload's bandwidth. Returns the metrics as JSON.
#[pyfunction]
fn fluid_phase_metrics(
    workload: &str,
    phases: &str,
    window_begin: f64,
    window_end: f64,
) -> PyResult<String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Ran {
        app: u32,
        phase: u32,
        request_s: f64,
        start_s: f64,
        end_s: f64,
        bytes: f64,
        #[serde(default)]
        priority: Option<f64>,
    }
    let mut de = serde_json::Deserializer::from_str(workload);
    let file: fluid::WorkloadFile = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        ConcertoConfigError::new_err(format!("workload: {}: {}", e.path(), e.inner()))
    })?;
    let apps = file.apps().map_err(ConcertoConfigError::new_err)?;
    let mut de = serde_json::Deserializer::from_str(phases);
    let ran: Vec<Ran> = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        ConcertoConfigError::new_err(format!("phases: {}: {}", e.path(), e.inner()))
    })?;
    if let Some((i, r)) = ran
        .iter()
        .enumerate()
        .find(|(_, r)| r.app as usize >= apps.len())
    {
        return Err(ConcertoConfigError::new_err(format!(
            "phases[{i}].app: {} is not one of the workload's {} applications",
            r.app,
            apps.len()
        )));
    }
    let run = fluid::FluidRun {
        phases: ran
            .iter()
            .map(|r| fluid::PhaseRecord {
                app: r.app,
                phase: r.phase,
                request_s: r.request_s,
                start_s: r.start_s,
                end_s: r.end_s,
                bytes: r.bytes,
                priority: r.priority.unwrap_or(1.0),
            })
            .collect(),
        app_end_s: Vec::new(),
        events: 0,
    };
    let metrics = fluid::window_metrics(&apps, &run, file.bandwidth, window_begin, window_end)
        .map_err(ConcertoConfigError::new_err)?;
    serde_json::to_string(&metrics).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// One repetition of a fluid-mode sweep point: draws a workload from the
/// generator in `table` of `text` (after `overrides`) with `seed`, runs it
/// under each rule (TOML text) and measures it over [window_begin,
/// window_end]. Returns JSON: one outcome per rule, in order. With
/// `check_only`, only reads and checks the generator and the rules.
#[pyfunction]
#[pyo3(signature = (text, table, overrides, seed, rules, window_begin, window_end, check_only=false))]
#[allow(clippy::too_many_arguments)]
fn fluid_measure(
    py: Python<'_>,
    text: &str,
    table: Option<&str>,
    overrides: Vec<String>,
    seed: u64,
    rules: Vec<String>,
    window_begin: f64,
    window_end: f64,
    check_only: bool,
) -> PyResult<String> {
    let spec = fluid::GeneratorSpec::from_toml_table(text, table, &overrides)
        .map_err(ConcertoConfigError::new_err)?;
    let rules = rules
        .iter()
        .map(|r| fluid::rule_from_toml(r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ConcertoConfigError::new_err)?;
    if check_only {
        return Ok("[]".into());
    }
    let outcomes = py
        .allow_threads(|| {
            let apps = fluid::generate(&spec, seed).map_err(|e| e.to_string())?;
            fluid::measure(
                &apps,
                spec.groups.len(),
                spec.bandwidth.0,
                &rules,
                window_begin,
                window_end,
            )
        })
        .map_err(ConcertoConfigError::new_err)?;
    serde_json::to_string(&outcomes).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Reads a transfer matrix (one row per client, one number per server);
/// an error names the row and column.
#[pyfunction]
fn parse_transfer_matrix(text: &str) -> PyResult<Vec<Vec<u64>>> {
    transfers::parse_counts(text).map_err(|e| ConcertoConfigError::new_err(e.to_string()))
}

/// A random transfer matrix: each (client, server) pair gets 1..=`max_per_pair`
/// transfers with probability `density`, else none.
#[pyfunction]
fn random_transfer_matrix(
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
fn regular_transfer_matrix(n: u32, degree: u32, seed: u64) -> Vec<Vec<u64>> {
    transfers::regular_counts(n, degree, seed)
}

/// Each client sends `per_client` transfers to servers drawn with weight
/// 1/(k+1)^exponent, as a count matrix.
#[pyfunction]
fn skewed_transfer_matrix(
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
/// schedule whose steps to include. Returns JSON.
#[pyfunction]
#[pyo3(signature = (rows, unit=0, seed=1, passes=3, show=None))]
fn plan_transfers(
    py: Python<'_>,
    rows: Vec<Vec<u64>>,
    unit: u64,
    seed: u64,
    passes: u32,
    show: Option<&str>,
) -> PyResult<String> {
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
    let entries: Vec<serde_json::Value> = schedules
        .iter()
        .map(|(name, s)| {
            let mut v = serde_json::json!({ "name": name, "length": s.len(), "valid": s.check(&t).is_ok() });
            if show == Some(*name) {
                let steps: Vec<Vec<(u32, u32)>> = s
                    .steps
                    .iter()
                    .map(|step| step.iter().map(|&e| t.edges()[e as usize]).collect())
                    .collect();
                v["steps"] = serde_json::json!(steps);
            }
            v
        })
        .collect();
    Ok(serde_json::json!({
        "clients": t.clients(), "servers": t.servers(), "transfers": t.edges().len(), "delta": delta,
        "unit": unit, "load_bound": if unit > 0 { Some(transfers::load_bound(&rows)) } else { None },
        "schedules": entries,
    })
    .to_string())
}

/// Plans one collective call of `pattern` (see
/// `concerto_core::client::collective::patterns`) for `procs` processes on
/// a file striped in `stripe`-byte units over `servers` servers, with
/// `strategy` (independent, two-phase or resonant). Returns JSON: the plan,
/// and per request the servers it touches in order, for people to read.
#[pyfunction]
#[pyo3(signature = (pattern, procs, servers, stripe, strategy, write=false, call=0, max_segments=None,
                    cb_nodes=None, cb_buffer_size=None, align=false, agents_per_server=None, group_delay_us=None))]
#[allow(clippy::too_many_arguments)]
fn plan_collective(
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
) -> PyResult<String> {
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
    // Per rank, batch and request: (server, first offset, bytes) runs in
    // the order the request touches them.
    type Runs = Vec<(u32, u64, u64)>;
    let touches: Vec<Vec<Vec<Runs>>> = plan
        .processes
        .iter()
        .map(|batches| {
            batches
                .iter()
                .map(|b| {
                    b.requests
                        .iter()
                        .map(|r| {
                            let mut runs: Runs = Vec::new();
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
    Ok(serde_json::json!({
        "strategy": planner.name(), "procs": procs, "servers": servers, "stripe": stripe,
        "requested_bytes": accesses.iter().flatten().map(|e| e.len).sum::<u64>(),
        "io_bytes": plan.io_bytes(), "exchanged_bytes": plan.exchanged_bytes(),
        "plan": plan, "touches": touches,
    })
    .to_string())
}

/// Runs a scenario `reps` times (seeds `seed`, `seed + 1`, ...; the
/// scenario's own seed when `seed` is None) and returns the results as JSON.
/// With `detail_csv`, writes one row per request piece to that path.
#[pyfunction]
#[pyo3(signature = (text, table=None, overrides=Vec::new(), seed=None, reps=1, progress=None, detail_csv=None))]
#[allow(clippy::too_many_arguments)]
fn simulate(
    py: Python<'_>,
    text: &str,
    table: Option<&str>,
    overrides: Vec<String>,
    seed: Option<u64>,
    reps: u32,
    progress: Option<PyRef<'_, Progress>>,
    detail_csv: Option<std::path::PathBuf>,
) -> PyResult<String> {
    let mut sc = load(text, table, overrides)?;
    if reps == 0 {
        return Err(ConcertoConfigError::new_err("reps: must be > 0"));
    }
    if detail_csv.is_some() {
        sc.output.detail = true;
    }
    let seed = seed.unwrap_or(sc.seed);
    let progress = progress.map(|p| p.inner.clone());
    let (json, write_result) = py.allow_threads(|| {
        let set = simulate_reps(&sc, seed, reps, progress.as_deref());
        let write_result = match &detail_csv {
            Some(path) => (|| -> std::io::Result<()> {
                let mut out = BufWriter::new(File::create(path)?);
                for (i, run) in set.runs.iter().enumerate() {
                    run.write_detail_csv(&mut out, i == 0)?;
                }
                out.flush()
            })()
            .map_err(|e| format!("{}: {e}", path.display())),
            None => Ok(()),
        };
        (serde_json::to_string(&set), write_result)
    });
    write_result.map_err(PyOSError::new_err)?;
    json.map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Jain's fairness index of weight-normalized service (concerto-core's `metrics::jain_index`).
#[pyfunction]
fn jain_index(service: Vec<f64>, weights: Vec<f64>) -> PyResult<f64> {
    if service.len() != weights.len() {
        return Err(PyValueError::new_err(format!(
            "{} service figures for {} weights",
            service.len(),
            weights.len()
        )));
    }
    Ok(concerto_core::metrics::jain_index(&service, &weights))
}

/// Formula (1) of the coordination paper: expected average completion time
/// without coordination for m applications on n servers, service time t.
#[pyfunction]
fn fifo_expected_completion(m: u32, n: u32, t: f64) -> f64 {
    analysis::fifo_expected_completion(m, n, t)
}

/// Figures 3 and 5's expected MAX/MIN of an application's per-server finish
/// times when the n servers order the m applications independently at random.
#[pyfunction]
fn independent_order_spread(m: u32, n: u32) -> f64 {
    analysis::independent_order_spread(m, n)
}

/// Formula (3) as a rate: the share of formula (1)'s completion time that
/// coordination removes, for m applications on n servers.
#[pyfunction]
fn expected_reduction_rate(m: u32, n: u32) -> f64 {
    analysis::expected_reduction(m, n, 1.0) / analysis::fifo_expected_completion(m, n, 1.0)
}

/// Formula (2): the same with coordination, (m + 1) / 2 · t.
#[pyfunction]
fn coordinated_expected_completion(m: u32, t: f64) -> f64 {
    analysis::coordinated_expected_completion(m, t)
}

/// Profiles a modelled device (`device`: the TOML keys of a
/// `[cluster.device]` table) with the sweep in `spec` (JSON object of
/// `ProfileSpec` fields; defaults for the rest). Returns the profile as JSON.
#[pyfunction]
#[pyo3(signature = (device, spec="{}", seed=1))]
fn profile_device(py: Python<'_>, device: &str, spec: &str, seed: u64) -> PyResult<String> {
    let mut probe = DeviceProbe::from_toml(device, seed).map_err(config_err)?;
    let spec = profile_spec(spec)?;
    let profile = py.allow_threads(|| profile::run(&mut probe, &spec));
    serde_json::to_string(&profile).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A profiling sweep from JSON (`ProfileSpec` fields; defaults for the
/// rest), validated; errors name the field (`profile.count: ...`).
fn profile_spec(spec: &str) -> PyResult<ProfileSpec> {
    let mut de = serde_json::Deserializer::from_str(spec);
    let spec: ProfileSpec = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        ConcertoConfigError::new_err(format!("profile.{}: {}", e.path(), json_message(&e)))
    })?;
    spec.validate()
        .map_err(|e| ConcertoConfigError::new_err(e.within("profile")))?;
    Ok(spec)
}

/// A deserialization error of JSON this module built, without serde_json's
/// position in that JSON (the field path says more).
fn json_message(e: &serde_path_to_error::Error<serde_json::Error>) -> String {
    let message = e.inner().to_string();
    message
        .split(" at line ")
        .next()
        .unwrap_or(&message)
        .to_string()
}

/// Checks one QoS rule (its fields as `concerto cluster rule add` sets
/// them, JSON) as every server will: None if it is valid, else the field
/// at fault and why, for the command to name its option.
#[pyfunction]
fn check_qos_rule(rule: &str) -> Option<(String, String)> {
    let mut de = serde_json::Deserializer::from_str(rule);
    match serde_path_to_error::deserialize::<_, concerto_core::server::QosRule>(&mut de) {
        Err(e) => Some((e.path().to_string(), json_message(&e))),
        Ok(r) => r.validate().err().map(|e| (e.field, e.message)),
    }
}

/// The values of a `[policy]` table (JSON, as `concerto cluster` builds it
/// from its options) that are valid but almost surely mistakes, each with
/// the fix; none when the table is invalid (the servers say why).
#[pyfunction]
fn policy_warnings(table: &str) -> Vec<String> {
    let read = || {
        let mut de = serde_json::Deserializer::from_str(table);
        serde_path_to_error::deserialize::<_, concerto_core::PolicyConfig>(&mut de)
            .map_err(|e| json_message(&e))
    };
    concerto_core::traps::read_warned(read).map_or_else(|_| Vec::new(), |(_, warnings)| warnings)
}

/// What a stripe unit of `bytes`, written `written`, means when it is almost
/// surely a mistake (decimal units, not whole 4 KiB pages), with the fix.
#[pyfunction]
fn stripe_unit_warning(bytes: u64, written: &str) -> Option<String> {
    concerto_core::units::stripe_unit_warning(bytes, Some(written))
}

/// Policy names accepted in scenarios.
/// A size as configuration spells it (`4096`, `"64KiB"`, `"1MB"`) in bytes.
#[pyfunction]
fn parse_size(text: &str) -> PyResult<u64> {
    // The parser's messages quote the text already.
    concerto_core::units::parse_size(text.trim()).map_err(PyValueError::new_err)
}

/// A duration as the scenario files write it ("10ms", "2s"), in seconds.
#[pyfunction]
fn parse_duration(text: &str) -> PyResult<f64> {
    concerto_core::units::parse_duration(text.trim())
        .map(|t| t.as_secs_f64())
        .map_err(PyValueError::new_err)
}

/// A bandwidth as configuration spells it (`"10GB/s"`, `"500MiB/s"`) in bytes per second.
#[pyfunction]
fn parse_bandwidth(text: &str) -> PyResult<f64> {
    concerto_core::units::parse_bandwidth(text.trim()).map_err(PyValueError::new_err)
}

#[pyfunction]
fn policy_names() -> Vec<&'static str> {
    concerto_core::PolicyConfig::NAMES.to_vec()
}

/// The parameters (besides `kind`) the policy called `name` takes: the
/// fields of its configuration as core serializes it.
#[pyfunction]
fn policy_keys(name: &str) -> PyResult<Vec<String>> {
    let policy = concerto_core::PolicyConfig::from_name(name)
        .ok_or_else(|| ConcertoConfigError::new_err(format!("unknown policy '{name}'")))?;
    let fields = match serde_json::to_value(policy) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => return Ok(Vec::new()),
    };
    Ok(fields.keys().filter(|k| *k != "kind").cloned().collect())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", concerto_sim::VERSION)?;
    m.add("ConfigError", m.py().get_type::<ConcertoConfigError>())?;
    m.add_class::<Progress>()?;
    m.add_function(wrap_pyfunction!(load_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(scenario_warnings, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(fluid_generate, m)?)?;
    m.add_function(wrap_pyfunction!(fluid_run, m)?)?;
    m.add_function(wrap_pyfunction!(fluid_phase_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(fluid_measure, m)?)?;
    m.add_function(wrap_pyfunction!(parse_transfer_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(random_transfer_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(regular_transfer_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(skewed_transfer_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(plan_transfers, m)?)?;
    m.add_function(wrap_pyfunction!(plan_collective, m)?)?;
    m.add_function(wrap_pyfunction!(fifo_expected_completion, m)?)?;
    m.add_function(wrap_pyfunction!(coordinated_expected_completion, m)?)?;
    m.add_function(wrap_pyfunction!(independent_order_spread, m)?)?;
    m.add_function(wrap_pyfunction!(expected_reduction_rate, m)?)?;
    m.add_function(wrap_pyfunction!(policy_names, m)?)?;
    m.add_function(wrap_pyfunction!(policy_keys, m)?)?;
    m.add_function(wrap_pyfunction!(profile_device, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(check_qos_rule, m)?)?;
    m.add_function(wrap_pyfunction!(policy_warnings, m)?)?;
    m.add_function(wrap_pyfunction!(stripe_unit_warning, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bandwidth, m)?)?;
    m.add_class::<fs::FsClientHandle>()?;
    m.add_class::<fs::FsFile>()?;
    m.add_function(wrap_pyfunction!(fs::check_cluster_file, m)?)?;
    m.add_function(wrap_pyfunction!(fs::generate_keys, m)?)?;
    m.add_function(wrap_pyfunction!(fs::issue_key, m)?)?;
    m.add_function(wrap_pyfunction!(fs::issue_node_key, m)?)?;
    m.add_function(wrap_pyfunction!(fs::revoke_key, m)?)?;
    m.add_function(wrap_pyfunction!(fs::list_keys, m)?)?;
    m.add_function(wrap_pyfunction!(fs::emulation_preset, m)?)?;
    m.add_function(wrap_pyfunction!(fs::stripe_map, m)?)?;
    m.add_function(wrap_pyfunction!(fs::profile_directory, m)?)?;
    m.add_function(wrap_pyfunction!(fs::profile_server, m)?)?;
    m.add_function(wrap_pyfunction!(jain_index, m)?)?;
    Ok(())
}
