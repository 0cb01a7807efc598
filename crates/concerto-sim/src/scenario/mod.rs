//! Scenario files: the TOML a user writes, its defaults, `--set` overrides,
//! and validation whose errors name the key (`apps[2].request_size: must be > 0`).
//!
//! Every key is documented in `docs/configuration.md`; keep the two in step.

use concerto_core::client::collective::patterns::Pattern as AccessPattern;
use concerto_core::client::collective::PlannerChoice;
use concerto_core::client::ordering::Ordering;
use concerto_core::server::{DeviceDefaults, QosRules};
use concerto_core::units::{Bandwidth, Bytes};
use concerto_core::{MetaOp, PolicyConfig, Time};
use serde::{Deserialize, Serialize};

mod apps;
pub mod calibration;
mod cluster;
pub mod overrides;

pub use crate::config_error::*;
pub(crate) use crate::device::validate_device;
pub use crate::device::{
    DeviceConfig, DiskScheduler, FixedConfig, HddConfig, ObjectPlacement, Overload, SsdConfig,
};
pub use apps::*;
pub use cluster::*;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub cluster: ClusterConfig,
    #[serde(default = "default_policy")]
    pub policy: PolicyConfig,
    #[serde(default)]
    pub app_ids: AppIdRule,
    /// The administrator's QoS rules (weights, and rates as Lustre's TBF), on every server, in
    /// front of the policy.
    #[serde(default, skip_serializing_if = "no_rules")]
    pub qos: QosRules,
    pub apps: Vec<AppSpec>,
    /// Job-level arbitration (IO-SETS): an arbiter gates each
    /// application's operations (its I/O phases) and its priority becomes
    /// the weight of the phase's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobConfig>,
    #[serde(default)]
    pub output: OutputConfig,
}

/// `[job]`: the same arbiter as the fluid mode's, in the request-level
/// simulator. Each operation of an application (its processes' calls up
/// to the barrier) is one I/O phase: it starts when the arbiter grants it,
/// and its requests carry the application's weight times the granted
/// priority, so the SFQ family shares the servers by priority.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobConfig {
    /// The set rule (`kind = "set10"`, ...; as `--rule` takes it).
    pub rule: concerto_core::job::SetRule,
    /// The platform bandwidth B the window metrics take an I/O phase's
    /// time alone from (bytes / B).
    #[serde(default)]
    pub bandwidth: Option<Bandwidth>,
    /// Measure utilization, stretch and I/O slowdown over `[begin, end]`
    /// seconds (needs `bandwidth`).
    #[serde(default)]
    pub window_s: Option<[f64; 2]>,
}

fn default_name() -> String {
    "scenario".into()
}

fn default_seed() -> u64 {
    1
}

fn default_policy() -> PolicyConfig {
    PolicyConfig::Fifo(Default::default())
}

fn no_rules(r: &QosRules) -> bool {
    r.rules.is_empty()
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    /// Keep a record of every request for CSV output.
    #[serde(default)]
    pub detail: bool,
    /// Width of the bins of each application's service timeline (bytes and
    /// requests served per bin); no timeline when absent.
    #[serde(default)]
    pub timeline: Option<Time>,
    /// Also keep, on every server, each application's timeline there with
    /// the time it had requests waiting (needs `timeline`).
    #[serde(default)]
    pub server_timeline: bool,
}

/// Upper bound on simulated processes, so a typo cannot exhaust memory.
pub const MAX_PROCESSES: u64 = 1_000_000;

/// Upper bound on one md-test instance's files, for the same reason.
pub const MAX_FILES: u64 = 10_000_000;

/// Upper bound on the transfers of one IOR operation of one process: each
/// is a step held in memory while the operation runs.
pub const MAX_IOR_TRANSFERS: u64 = 1_000_000;

impl Scenario {
    /// Parses TOML text, applies `--set key.path=value` overrides, and validates.
    pub fn from_toml(text: &str, overrides: &[String]) -> Result<Scenario, ConfigError> {
        Scenario::from_toml_table(text, None, overrides)
    }

    /// As [`from_toml`](Self::from_toml), reading the scenario from the table
    /// at `table` (for experiment files that embed a scenario).
    pub fn from_toml_table(
        text: &str,
        table: Option<&str>,
        overrides: &[String],
    ) -> Result<Scenario, ConfigError> {
        Scenario::read(text, table, overrides, false).map(|(scenario, _)| scenario)
    }

    /// As [`from_toml_table`](Self::from_toml_table); with the scenario, a
    /// warning for each value that is valid but almost surely a mistake
    /// (see `concerto_core::traps`), placed as an error would be.
    pub fn from_toml_table_warned(
        text: &str,
        table: Option<&str>,
        overrides: &[String],
    ) -> Result<(Scenario, Vec<ConfigError>), ConfigError> {
        Scenario::read(text, table, overrides, true)
    }

    /// Reads and validates; with `warn`, also reads once more per trap to
    /// place its warning (see `concerto_core::traps`).
    fn read(
        text: &str,
        table: Option<&str>,
        overrides: &[String],
        warn: bool,
    ) -> Result<(Scenario, Vec<ConfigError>), ConfigError> {
        let mut doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            ConfigError::Syntax(format!(
                "invalid TOML: {}",
                concerto_toml::syntax_message(text, &e)
            ))
        })?;
        if let Some(key) = table {
            doc = match doc.remove(key) {
                Some(toml::Value::Table(t)) => t,
                Some(_) => return Err(ConfigError::at(key, "must be a table")),
                None => return Err(ConfigError::at(key, "missing table")),
            };
        }
        for o in overrides {
            overrides::apply(&mut doc, o)?;
        }
        let placed = |e: ConfigError| e.placed(text, table, overrides);
        calibration::include(&mut doc).map_err(placed)?;
        let read = || {
            serde_path_to_error::deserialize(toml::Value::Table(doc.clone())).map_err(|e| {
                let path = e.path().to_string();
                let message = e.inner().message().trim().to_string();
                if path == "." || path.is_empty() {
                    ConfigError::Syntax(message)
                } else {
                    // A bad value in `[policy]` is reported at the table: name its key.
                    let path = concerto_toml::blame_key_in::<Scenario>(&doc, &path, &message)
                        .unwrap_or(path);
                    placed(ConfigError::at(path, message))
                }
            })
        };
        let (mut scenario, warnings): (Scenario, _) = if warn {
            concerto_core::traps::read_warned(read)?
        } else {
            (read()?, Vec::new())
        };
        scenario.validate().map_err(placed)?;
        scenario.load_traces().map_err(placed)?;
        Ok((scenario, warnings))
    }

    /// Reads the trace files the applications name (each file once), and
    /// takes each trace's ranks as the application's processes.
    fn load_traces(&mut self) -> Result<(), ConfigError> {
        let mut files: std::collections::HashMap<String, crate::trace::TraceFile> =
            std::collections::HashMap::new();
        for (i, app) in self.apps.iter_mut().enumerate() {
            let Some(path) = app.trace.clone() else {
                continue;
            };
            let key = |field: &str| format!("apps[{i}].{field}");
            if !files.contains_key(&path) {
                let file = crate::trace::load(std::path::Path::new(&path))
                    .map_err(|e| ConfigError::at(key("trace"), e))?;
                files.insert(path.clone(), file);
            }
            let file = &files[&path];
            let chosen = match &app.trace_app {
                Some(name) => file.apps.iter().find(|a| &a.name == name).ok_or_else(|| {
                    ConfigError::at(
                        key("trace_app"),
                        format!("{path} has no application {name:?}"),
                    )
                })?,
                None if file.apps.len() == 1 => &file.apps[0],
                None => {
                    let names: Vec<&str> = file.apps.iter().map(|a| a.name.as_str()).collect();
                    return Err(ConfigError::at(
                        key("trace_app"),
                        format!(
                            "{path} holds {} applications: say which ({})",
                            names.len(),
                            names.join(", ")
                        ),
                    ));
                }
            };
            let ranks = chosen.ranks.len() as u32;
            if app.processes != 1 && app.processes != ranks {
                return Err(ConfigError::at(
                    key("processes"),
                    format!(
                        "{} but the trace has {ranks} ranks (leave it out)",
                        app.processes
                    ),
                ));
            }
            app.processes = ranks;
            // Each rank replays on its own.
            app.barrier = false;
            if app.name.is_none() {
                app.name = Some(chosen.name.clone());
            }
            app.trace_data = Some(std::sync::Arc::new(chosen.clone()));
        }
        Ok(())
    }

    /// Checks values that types alone do not rule out.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_cluster(&self.cluster)?;
        self.validate_output()?;
        validate_network(&self.cluster.network)?;
        self.validate_policy()?;
        self.validate_job()?;
        self.validate_placement()?;
        self.validate_apps()
    }

    fn validate_output(&self) -> Result<(), ConfigError> {
        if let Some(t) = self.output.timeline {
            if t < Time::from_millis(1) {
                return Err(ConfigError::at(
                    "output.timeline",
                    "bins must be at least 1 ms wide",
                ));
            }
        }
        if self.output.server_timeline && self.output.timeline.is_none() {
            return Err(ConfigError::at(
                "output.server_timeline",
                "needs output.timeline (the bin width)",
            ));
        }
        Ok(())
    }

    /// The servers' policy and the administrator's QoS rules.
    fn validate_policy(&self) -> Result<(), ConfigError> {
        self.policy
            .validate()
            .map_err(|e| ConfigError::field(e.under("policy")))?;
        if let PolicyConfig::Capped(concerto_core::server::CappedConfig {
            capacity: None, ..
        }) = &self.policy
        {
            if self.cluster.device.nominal_bandwidth().is_none() {
                return Err(ConfigError::at(
                    "policy.capacity",
                    "required with the fixed device, which has no rated bandwidth",
                ));
            }
        }
        self.qos
            .validate()
            .map_err(|e| ConfigError::field(e.under("qos")))?;
        Ok(())
    }

    /// The job-level arbiter: its rule, and what its metrics need.
    fn validate_job(&self) -> Result<(), ConfigError> {
        if let Some(job) = &self.job {
            job.rule
                .validate()
                .map_err(|e| ConfigError::field(e.under("job.rule")))?;
            if let Some(b) = job.bandwidth {
                positive_f("job.bandwidth", b.0)?;
            }
            if let Some([begin, end]) = job.window_s {
                if !(begin.is_finite() && end.is_finite() && begin >= 0.0 && end > begin) {
                    return Err(ConfigError::at(
                        "job.window_s",
                        format!("[{begin}, {end}] must be [begin, end] seconds, end after begin"),
                    ));
                }
                if job.bandwidth.is_none() {
                    return Err(ConfigError::at(
                        "job.bandwidth",
                        "required with job.window_s: the metrics take an I/O phase's time alone from it",
                    ));
                }
            }
            if let Some(i) = self.apps.iter().position(|a| !a.barrier) {
                return Err(ConfigError::at(
                    format!("apps[{i}].barrier"),
                    "must be true under [job]: the arbiter gates operations, which need a barrier",
                ));
            }
        }
        Ok(())
    }

    /// Each application's weight and where its files go on the cluster.
    fn validate_placement(&self) -> Result<(), ConfigError> {
        let c = &self.cluster;
        for (i, app) in self.apps.iter().enumerate() {
            if !(app.weight.is_finite() && app.weight > 0.0) {
                return Err(ConfigError::at(
                    format!("apps[{i}].weight"),
                    "must be a number > 0",
                ));
            }
            if let Some(count) = app.stripe_count {
                positive(&format!("apps[{i}].stripe_count"), count as u64)?;
                if count > c.servers {
                    return Err(ConfigError::at(
                        format!("apps[{i}].stripe_count"),
                        format!("{count} is larger than cluster.servers ({})", c.servers),
                    ));
                }
            }
            if let Some(first) = app.first_server {
                if first >= c.servers {
                    return Err(ConfigError::at(
                        format!("apps[{i}].first_server"),
                        format!(
                            "server {first} does not exist (cluster.servers is {})",
                            c.servers
                        ),
                    ));
                }
            }
        }

        Ok(())
    }

    /// Every application, their number, and the ids they get.
    fn validate_apps(&self) -> Result<(), ConfigError> {
        if self.apps.is_empty() {
            return Err(ConfigError::at(
                "apps",
                "at least one [[apps]] entry is needed",
            ));
        }
        let mut processes = 0u64;
        let mut instances = 0u64;
        for (i, app) in self.apps.iter().enumerate() {
            validate_app(&format!("apps[{i}]"), app, &self.app_ids)?;
            instances += app.instances as u64;
            processes += app.instances as u64 * app.processes as u64;
        }
        if processes > MAX_PROCESSES {
            return Err(ConfigError::at(
                "apps",
                format!("{processes} processes in all; at most {MAX_PROCESSES} are simulated"),
            ));
        }
        if let AppIdRule::Random { min, max } = self.app_ids {
            if min > max {
                return Err(ConfigError::at(
                    "app_ids.max",
                    format!("must be >= app_ids.min ({min})"),
                ));
            }
            if (max - min) as u64 + 1 < instances {
                return Err(ConfigError::at(
                    "app_ids",
                    format!("[{min}, {max}] holds fewer distinct ids than the {instances} application instances"),
                ));
            }
        }
        if let AppIdRule::Sequential { start } = self.app_ids {
            if start as u64 + instances > u32::MAX as u64 {
                return Err(ConfigError::at(
                    "app_ids.start",
                    "too large for the number of applications",
                ));
            }
        }
        Ok(())
    }

    /// What the data servers' policy defaults to on this cluster's device,
    /// with `depth` slots when the policy sets no depth of its own.
    pub fn device_defaults(&self, depth: u32) -> DeviceDefaults {
        DeviceDefaults {
            class: self.cluster.device.class(),
            depth,
            // Validation guarantees a capacity where it is needed; the fallback is never used then.
            capacity: self
                .cluster
                .device
                .nominal_bandwidth()
                .unwrap_or(Bandwidth(100e6)),
        }
    }

    /// The policy with device-dependent defaults filled in.
    pub fn resolved_policy(&self) -> PolicyConfig {
        self.device_defaults(self.cluster.depth)
            .resolve(&self.policy)
    }

    /// Total synchronized operations (barrier mode) or calls (otherwise):
    /// the unit progress is counted in.
    pub fn total_operations(&self) -> u64 {
        self.apps
            .iter()
            .map(|a| {
                let per_instance = match &a.trace_data {
                    Some(t) => t.requests() as u64,
                    None if a.barrier => a.calls() as u64,
                    None => a.calls() as u64 * a.processes as u64,
                };
                per_instance * a.instances as u64
            })
            .sum()
    }
}
