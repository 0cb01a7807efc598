//! `concerto._native`: the Rust engine as seen from Python.
//!
//! Thin on purpose: it parses nothing and decides nothing itself, it hands
//! the files users write (as text) and the structures Python built (as
//! objects) to the Rust crates and returns Python objects (`objects.rs`).
//! Long calls release the GIL.

mod fluid;
mod fs;
mod keys;
mod objects;
mod plan;
mod profile;
mod replay;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use concerto_core::analysis;
use concerto_sim::{simulate_reps, ConfigError, Scenario};

use objects::to_py;

create_exception!(
    _native,
    ConcertoConfigError,
    PyValueError,
    "A scenario or option is invalid; the message names the key."
);

pub(crate) fn config_err(e: ConfigError) -> PyErr {
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

/// Parses and validates a scenario; returns it with defaults filled in.
#[pyfunction]
#[pyo3(signature = (text, table=None, overrides=Vec::new()))]
fn load_scenario(
    py: Python<'_>,
    text: &str,
    table: Option<&str>,
    overrides: Vec<String>,
) -> PyResult<PyObject> {
    to_py(py, &load(text, table, overrides)?)
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

/// Runs a scenario `reps` times (seeds `seed`, `seed + 1`, ...; the
/// scenario's own seed when `seed` is None) and returns the run set.
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
) -> PyResult<PyObject> {
    let mut sc = load(text, table, overrides)?;
    if reps == 0 {
        return Err(ConcertoConfigError::new_err("reps: must be > 0"));
    }
    if detail_csv.is_some() {
        sc.output.detail = true;
    }
    let seed = seed.unwrap_or(sc.seed);
    let progress = progress.map(|p| p.inner.clone());
    let (set, write_result) = py.allow_threads(|| {
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
        (set, write_result)
    });
    write_result.map_err(PyOSError::new_err)?;
    to_py(py, &set)
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

/// Checks one QoS rule (its fields as `concerto cluster rule add` sets
/// them) as every server will: None if it is valid, else the field at
/// fault and why, for the command to name its option.
#[pyfunction]
fn check_qos_rule(rule: &Bound<'_, PyAny>) -> Option<(String, String)> {
    let mut de = pythonize::Depythonizer::from_object(rule);
    match serde_path_to_error::deserialize::<_, concerto_core::server::QosRule>(&mut de) {
        Err(e) => Some((e.path().to_string(), e.inner().to_string())),
        Ok(r) => r.validate().err().map(|e| (e.field, e.message)),
    }
}

/// The values of a `[policy]` table (as `concerto cluster` builds it from
/// its options) that are valid but almost surely mistakes, each with the
/// fix; none when the table is invalid (the servers say why).
#[pyfunction]
fn policy_warnings(table: &Bound<'_, PyAny>) -> Vec<String> {
    // Each warning is the reader's message for its value (the command
    // names the option it came from).
    let read = || {
        let mut de = pythonize::Depythonizer::from_object(table);
        serde_path_to_error::deserialize::<_, concerto_core::PolicyConfig>(&mut de)
            .map_err(|e| e.inner().to_string())
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

/// The row of mdtest's summary an md-test step counts under ("Tree
/// creation", "File creation", ...), or None for a step without one
/// (readdir, close): the simulator's names, for the twin's real side.
#[pyfunction]
fn mdtest_row(step: &str) -> PyResult<Option<&'static str>> {
    let parsed: concerto_sim::scenario::MdStep =
        serde_json::from_value(serde_json::Value::String(step.into()))
            .map_err(|e| PyValueError::new_err(format!("md-test step {step:?}: {e}")))?;
    Ok(parsed.mdtest_operation())
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
    m.add_function(wrap_pyfunction!(fluid::fluid_generate, m)?)?;
    m.add_function(wrap_pyfunction!(fluid::fluid_run, m)?)?;
    m.add_function(wrap_pyfunction!(fluid::fluid_phase_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(fluid::fluid_measure, m)?)?;
    m.add_function(wrap_pyfunction!(plan::parse_transfer_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(plan::random_transfer_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(plan::regular_transfer_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(plan::skewed_transfer_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(plan::plan_transfers, m)?)?;
    m.add_function(wrap_pyfunction!(plan::plan_collective, m)?)?;
    m.add_function(wrap_pyfunction!(fifo_expected_completion, m)?)?;
    m.add_function(wrap_pyfunction!(coordinated_expected_completion, m)?)?;
    m.add_function(wrap_pyfunction!(independent_order_spread, m)?)?;
    m.add_function(wrap_pyfunction!(expected_reduction_rate, m)?)?;
    m.add_function(wrap_pyfunction!(policy_names, m)?)?;
    m.add_function(wrap_pyfunction!(policy_keys, m)?)?;
    m.add_function(wrap_pyfunction!(replay::replay_policy, m)?)?;
    m.add_function(wrap_pyfunction!(profile::profile_device, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(check_qos_rule, m)?)?;
    m.add_function(wrap_pyfunction!(policy_warnings, m)?)?;
    m.add_function(wrap_pyfunction!(stripe_unit_warning, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(mdtest_row, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bandwidth, m)?)?;
    m.add_class::<fs::FsClientHandle>()?;
    m.add_class::<fs::FsFile>()?;
    m.add_function(wrap_pyfunction!(fs::check_cluster_file, m)?)?;
    m.add_function(wrap_pyfunction!(keys::generate_keys, m)?)?;
    m.add_function(wrap_pyfunction!(keys::issue_key, m)?)?;
    m.add_function(wrap_pyfunction!(keys::issue_node_key, m)?)?;
    m.add_function(wrap_pyfunction!(keys::revoke_key, m)?)?;
    m.add_function(wrap_pyfunction!(keys::list_keys, m)?)?;
    m.add_function(wrap_pyfunction!(keys::emulation_preset, m)?)?;
    m.add_function(wrap_pyfunction!(fs::stripe_map, m)?)?;
    m.add_function(wrap_pyfunction!(profile::profile_directory, m)?)?;
    m.add_function(wrap_pyfunction!(profile::profile_server, m)?)?;
    m.add_function(wrap_pyfunction!(jain_index, m)?)?;
    Ok(())
}
