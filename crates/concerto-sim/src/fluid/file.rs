//! Workloads and set rules as files: the fluid mode's JSON workload
//! files and TOML set rules.

use super::*;
use serde::Deserialize;

use concerto_core::job::SetRule;

/// A set rule from TOML text (`kind = "set10"`, ...), checked; an error
/// names the line, column and key.
pub fn rule_from_toml(text: &str) -> Result<SetRule, String> {
    let rule: SetRule = concerto_toml::parse(text).map_err(|e| format!("rule: {e}"))?;
    rule.validate().map_err(|e| e.within("rule"))?;
    Ok(rule)
}

/// A workload of the fluid mode as a file (JSON): the platform's bandwidth
/// and every application's phases, so users bring their own applications
/// and results can be checked independently. `concerto sim workload
/// generate` writes one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    /// Bytes per second.
    pub bandwidth: f64,
    pub apps: Vec<WorkloadApp>,
    /// Where it came from (an importer's note: the Darshan log, say); not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
}

/// One application of a [`WorkloadFile`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadApp {
    pub name: String,
    /// Its characteristic time, seconds, when known (what SET-10 maps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_iter_s: Option<f64>,
    /// The group it was drawn from and the group's characteristic time
    /// (what CLAIRVOYANT maps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_w_iter_s: Option<f64>,
    #[serde(default)]
    pub release_s: f64,
    /// `[compute seconds, I/O bytes]` per iteration, in order.
    pub phases: Vec<(f64, f64)>,
}

impl WorkloadFile {
    /// A generated workload as a file.
    pub fn generated(spec: &GeneratorSpec, apps: &[Generated]) -> WorkloadFile {
        WorkloadFile {
            bandwidth: spec.bandwidth.0,
            apps: apps
                .iter()
                .enumerate()
                .map(|(i, g)| WorkloadApp {
                    name: format!("g{}-{i}", g.group),
                    w_iter_s: Some(g.w_iter_s),
                    group: Some(g.group),
                    group_w_iter_s: Some(spec.groups[g.group as usize].mu_s),
                    release_s: g.app.release_s,
                    phases: g
                        .app
                        .phases
                        .iter()
                        .map(|p| (p.compute_s, p.io_bytes))
                        .collect(),
                })
                .collect(),
            source: None,
        }
    }

    /// The applications to run; an error names the application and field.
    pub fn apps(&self) -> Result<Vec<FluidApp>, String> {
        if !(self.bandwidth.is_finite() && self.bandwidth > 0.0) {
            return Err(format!(
                "bandwidth: {} must be a positive number of bytes per second",
                self.bandwidth
            ));
        }
        self.apps
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let bad = |field: &str, v: f64| {
                    Err(format!(
                        "apps[{i}].{field}: {v} must be a finite number >= 0"
                    ))
                };
                let ok = |v: f64| v.is_finite() && v >= 0.0;
                if !ok(a.release_s) {
                    return bad("release_s", a.release_s);
                }
                for (k, &(c, b)) in a.phases.iter().enumerate() {
                    if !ok(c) {
                        return bad(&format!("phases[{k}][0]"), c);
                    }
                    if !ok(b) {
                        return bad(&format!("phases[{k}][1]"), b);
                    }
                }
                let seconds = |field: &str, v: Option<f64>| match v {
                    Some(v) if !(v.is_finite() && v > 0.0) => Err(format!(
                        "apps[{i}].{field}: {v} must be a positive number of seconds"
                    )),
                    v => Ok(v.map(Time::from_secs_f64)),
                };
                let w_iter = seconds("w_iter_s", a.w_iter_s)?;
                let group = match (a.group, seconds("group_w_iter_s", a.group_w_iter_s)?) {
                    (Some(g), Some(w)) => Some((g, w)),
                    (None, None) => None,
                    _ => return Err(format!("apps[{i}]: give group and group_w_iter_s together")),
                };
                Ok(FluidApp {
                    release_s: a.release_s,
                    phases: a
                        .phases
                        .iter()
                        .map(|&(compute_s, io_bytes)| FluidPhase {
                            compute_s,
                            io_bytes,
                        })
                        .collect(),
                    info: PhaseInfo { w_iter, group },
                })
            })
            .collect()
    }
}
