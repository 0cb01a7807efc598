//! Job level (IO-SETS, fluid mode): generating, running and measuring
//! fluid-mode workloads.

use pyo3::prelude::*;
use serde::{Deserialize, Serialize};

use concerto_core::job::Sets;
use concerto_core::AppId;
use concerto_sim::fluid;

use crate::objects::{from_py, to_py};
use crate::ConcertoConfigError;

/// Draws a fluid-mode workload from a generator file (TOML text) with
/// `seed`; returns the workload file's text (JSON, as `concerto fluid
/// generate` writes it).
#[pyfunction]
pub fn fluid_generate(spec: &str, seed: u64) -> PyResult<String> {
    let spec = fluid::GeneratorSpec::from_toml(spec).map_err(ConcertoConfigError::new_err)?;
    let apps =
        fluid::generate(&spec, seed).map_err(|e| ConcertoConfigError::new_err(e.to_string()))?;
    serde_json::to_string_pretty(&fluid::WorkloadFile::generated(&spec, &apps))
        .map_err(|e| ConcertoConfigError::new_err(e.to_string()))
}

/// One I/O phase of a fluid run, with the set the rule put its application in.
#[derive(Serialize)]
struct PhaseRun<'a> {
    app: &'a str,
    phase: u32,
    request_s: f64,
    start_s: f64,
    end_s: f64,
    bytes: f64,
    priority: f64,
    set: i64,
}

/// What `fluid_run` returns (`FluidRun` in the stub).
#[derive(Serialize)]
struct FluidRunOut<'a> {
    metrics: fluid::WindowMetrics,
    app_end_s: Vec<f64>,
    events: u64,
    phases: Vec<PhaseRun<'a>>,
    apps: Vec<&'a str>,
}

fn workload_file(text: &str) -> PyResult<fluid::WorkloadFile> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de)
        .map_err(|e| ConcertoConfigError::new_err(format!("{}: {}", e.path(), e.inner())))
}

/// Runs a fluid-mode workload (the workload file's text, JSON) under a set
/// rule (TOML text) and measures it over [window_begin, window_end].
#[pyfunction]
pub fn fluid_run(
    py: Python<'_>,
    workload: &str,
    rule: &str,
    window_begin: f64,
    window_end: f64,
) -> PyResult<PyObject> {
    let file = workload_file(workload)?;
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
    let out = FluidRunOut {
        metrics,
        app_end_s: run.app_end_s.clone(),
        events: run.events,
        phases: run
            .phases
            .iter()
            .map(|p| PhaseRun {
                app: &file.apps[p.app as usize].name,
                phase: p.phase,
                request_s: p.request_s,
                start_s: p.start_s,
                end_s: p.end_s,
                bytes: p.bytes,
                priority: p.priority,
                set: set_of(p.app),
            })
            .collect(),
        apps: file.apps.iter().map(|a| a.name.as_str()).collect(),
    };
    to_py(py, &out)
}

/// One I/O phase that ran elsewhere (the real cluster), as
/// `fluid_phase_metrics` takes it (`RanPhase` in the stub).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RanPhase {
    app: u32,
    phase: u32,
    request_s: f64,
    start_s: f64,
    end_s: f64,
    bytes: f64,
    #[serde(default)]
    priority: Option<f64>,
}

/// io-sets.txt's window metrics of phases that ran elsewhere (the real
/// cluster): `workload` is the workload file's object, `phases` one object
/// per I/O phase with `app` (the application's index in `workload`),
/// `phase`, `request_s`, `start_s`, `end_s`, `bytes`; measured as the fluid
/// mode measures its own runs, with the workload's bandwidth.
#[pyfunction]
pub fn fluid_phase_metrics(
    py: Python<'_>,
    workload: &Bound<'_, PyAny>,
    phases: &Bound<'_, PyAny>,
    window_begin: f64,
    window_end: f64,
) -> PyResult<PyObject> {
    let file: fluid::WorkloadFile = from_py(workload, "workload")?;
    let apps = file.apps().map_err(ConcertoConfigError::new_err)?;
    let ran: Vec<RanPhase> = from_py(phases, "phases")?;
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
    to_py(py, &metrics)
}

/// One repetition of a fluid-mode sweep point: draws a workload from the
/// generator in `table` of `text` (after `overrides`) with `seed`, runs it
/// under each rule (TOML text) and measures it over [window_begin,
/// window_end]. Returns one outcome per rule, in order. With `check_only`,
/// only reads and checks the generator and the rules (and returns none).
#[pyfunction]
#[pyo3(signature = (text, table, overrides, seed, rules, window_begin, window_end, check_only=false))]
#[allow(clippy::too_many_arguments)]
pub fn fluid_measure(
    py: Python<'_>,
    text: &str,
    table: Option<&str>,
    overrides: Vec<String>,
    seed: u64,
    rules: Vec<String>,
    window_begin: f64,
    window_end: f64,
    check_only: bool,
) -> PyResult<PyObject> {
    let spec = fluid::GeneratorSpec::from_toml_table(text, table, &overrides)
        .map_err(ConcertoConfigError::new_err)?;
    let rules = rules
        .iter()
        .map(|r| fluid::rule_from_toml(r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ConcertoConfigError::new_err)?;
    if check_only {
        return to_py(py, &Vec::<()>::new());
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
    to_py(py, &outcomes)
}
