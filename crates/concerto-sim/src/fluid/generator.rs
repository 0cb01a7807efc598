//! The workload generator of io-sets.txt Section V-B.

use super::*;
use concerto_core::FieldError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use concerto_core::units::Bandwidth;

use crate::scenario::ConfigError;

/// A group of applications of the generator: `count` applications whose
/// w_iter is drawn from N(`mu_s`, `sigma_s`) truncated to values of at least the generator's `min_w_iter_s`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    pub count: u32,
    pub mu_s: f64,
    pub sigma_s: f64,
}

fn default_min_w_iter() -> f64 {
    0.01
}

/// The most I/O phases a generated workload may have (each costs memory
/// until the run ends).
pub const MAX_PHASES: u64 = 50_000_000;

/// The workload generator of io-sets.txt Section V-B.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeneratorSpec {
    pub groups: Vec<GroupSpec>,
    /// Horizon h, seconds: each application runs n = ⌊h / w_iter⌉ iterations.
    pub horizon_s: f64,
    /// Target I/O stress ω = Σ α_io.
    pub io_stress: f64,
    /// Noise bound b: each phase's length is scaled by 1 + U[-b, b] (0: periodic).
    #[serde(default)]
    pub noise: f64,
    /// Release times drawn from U[0, w_iter] (the journal version), else all at 0.
    #[serde(default)]
    pub release: bool,
    /// The smallest w_iter drawn, seconds: N(μ, σ) is truncated to values
    /// at least this large. io-sets.txt truncates at 0; a w_iter near 0
    /// makes h / w_iter iterations without bound (10 µs: two billion), so
    /// the default is 10 ms, below which N(10, 10), the widest profile the
    /// paper draws, puts 0.03% of its mass.
    #[serde(default = "default_min_w_iter")]
    pub min_w_iter_s: f64,
    /// The platform bandwidth (`"1GB/s"`, or bytes per second): an I/O
    /// phase of t_io seconds alone on the platform is t_io × bandwidth bytes.
    pub bandwidth: Bandwidth,
}

impl GeneratorSpec {
    /// Reads a generator file (TOML: the keys below, `[[groups]]` tables)
    /// and checks it; an error names the line, column and key.
    pub fn from_toml(text: &str) -> Result<GeneratorSpec, String> {
        let spec: GeneratorSpec = concerto_toml::parse(text)?;
        spec.validate().map_err(|e| e.to_string())?;
        Ok(spec)
    }

    /// Reads the generator from `table` of `text` (the whole text when
    /// `None`) after applying `overrides` (`key.path=value`, as `--set`
    /// takes them), and checks it: what a sweep point of a sweep file
    /// runs. An error names the key, and where the file writes it.
    pub fn from_toml_table(
        text: &str,
        table: Option<&str>,
        overrides: &[String],
    ) -> Result<GeneratorSpec, String> {
        let mut doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| concerto_toml::syntax_message(text, &e))?;
        if let Some(key) = table {
            doc = match doc.remove(key) {
                Some(toml::Value::Table(t)) => t,
                Some(_) => return Err(format!("{key}: must be a table")),
                None => return Err(format!("{key}: missing table")),
            };
        }
        for o in overrides {
            crate::scenario::overrides::apply(&mut doc, o).map_err(|e| e.to_string())?;
        }
        let placed = |e: ConfigError| e.placed(text, table, overrides).to_string();
        let spec: GeneratorSpec = serde_path_to_error::deserialize(toml::Value::Table(doc))
            .map_err(|e| {
                let message = e.inner().message().trim().to_string();
                match e.path().to_string().as_str() {
                    "." | "" => message,
                    path => placed(ConfigError::at(path.to_string(), message)),
                }
            })?;
        spec.validate().map_err(|e| placed(ConfigError::field(e)))?;
        Ok(spec)
    }

    /// Checks the numbers; the error names the field.
    pub fn validate(&self) -> Result<(), FieldError> {
        let positive = |field: &'static str, v: f64, unit: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(FieldError::new(
                    field,
                    format!("{v} must be a positive number{unit}"),
                ))
            }
        };
        if self.groups.iter().all(|g| g.count == 0) {
            return Err(FieldError::new(
                "groups",
                "need at least one application".into(),
            ));
        }
        for g in &self.groups {
            positive("groups.mu_s", g.mu_s, " of seconds")?;
            if !(g.sigma_s.is_finite() && g.sigma_s >= 0.0) {
                return Err(FieldError::new(
                    "groups.sigma_s",
                    format!("{} must be a number >= 0", g.sigma_s),
                ));
            }
        }
        positive("horizon_s", self.horizon_s, " of seconds")?;
        if !(self.min_w_iter_s.is_finite() && self.min_w_iter_s >= 0.0) {
            return Err(FieldError::new(
                "min_w_iter_s",
                format!("{} must be a number of seconds >= 0", self.min_w_iter_s),
            ));
        }
        for g in &self.groups {
            if g.sigma_s == 0.0 && g.mu_s < self.min_w_iter_s {
                return Err(FieldError::new(
                    "groups.mu_s",
                    format!(
                        "{} is below min_w_iter_s ({}) with sigma_s = 0",
                        g.mu_s, self.min_w_iter_s
                    ),
                ));
            }
        }
        positive("io_stress", self.io_stress, "")?;
        positive("bandwidth", self.bandwidth.0, " of bytes per second")?;
        if !(0.0..=1.0).contains(&self.noise) {
            return Err(FieldError::new(
                "noise",
                format!("{} must be in [0, 1]", self.noise),
            ));
        }
        Ok(())
    }
}

/// One generated application: its phases, and what it was drawn as.
#[derive(Clone, Debug, PartialEq)]
pub struct Generated {
    pub app: FluidApp,
    pub group: u32,
    pub w_iter_s: f64,
    pub io_fraction: f64,
}

/// Draws a workload (Section V-B): per application w_iter ~ N(μ, σ)
/// truncated at min_w_iter_s, n = ⌊h / w_iter⌉ iterations (at least 1),
/// α_j ~ U[0, 1] rescaled so that Σ α_io = ω, t_cpu = (1 − α_io) w_iter and
/// t_io = α_io w_iter, each phase scaled by 1 + U[−b, b] when noisy.
/// The info each application gives the arbiter is its w_iter and its group
/// (with the group's μ).
pub fn generate(spec: &GeneratorSpec, seed: u64) -> Result<Vec<Generated>, FieldError> {
    spec.validate()?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut drawn: Vec<(u32, f64, f64)> = Vec::new(); // (group, w_iter, α_j)
    for (g, group) in spec.groups.iter().enumerate() {
        let normal = Normal::new(group.mu_s, group.sigma_s).expect("validated: σ >= 0");
        for _ in 0..group.count {
            let w = loop {
                let w: f64 = normal.sample(&mut rng);
                if w > 0.0 && w >= spec.min_w_iter_s {
                    break w;
                }
            };
            drawn.push((g as u32, w, rng.gen::<f64>()));
        }
    }
    let phases: f64 = drawn
        .iter()
        .map(|d| (spec.horizon_s / d.1).round().max(1.0))
        .sum();
    if phases > MAX_PHASES as f64 {
        let shortest = drawn.iter().map(|d| d.1).fold(f64::INFINITY, f64::min);
        return Err(FieldError::new(
            "min_w_iter_s",
            format!(
                "the workload would have {phases:.0} I/O phases (the shortest w_iter drawn is {shortest} s); \
                 at most {MAX_PHASES} are simulated: raise min_w_iter_s or lower horizon_s"
            ),
        ));
    }
    let alpha_sum: f64 = drawn.iter().map(|d| d.2).sum();
    Ok(drawn
        .into_iter()
        .map(|(group, w, alpha)| {
            let io_fraction = if alpha_sum > 0.0 {
                spec.io_stress * alpha / alpha_sum
            } else {
                0.0
            };
            let (t_cpu, t_io) = ((1.0 - io_fraction) * w, io_fraction * w);
            let n = ((spec.horizon_s / w).round() as u64).max(1);
            let noise = |rng: &mut ChaCha8Rng| {
                if spec.noise > 0.0 {
                    1.0 + rng.gen_range(-spec.noise..=spec.noise)
                } else {
                    1.0
                }
            };
            let phases = (0..n)
                .map(|_| FluidPhase {
                    compute_s: (t_cpu * noise(&mut rng)).max(0.0),
                    io_bytes: (t_io * noise(&mut rng)).max(0.0) * spec.bandwidth.0,
                })
                .collect();
            let release_s = if spec.release {
                rng.gen_range(0.0..=w)
            } else {
                0.0
            };
            let mu = spec.groups[group as usize].mu_s;
            Generated {
                app: FluidApp {
                    release_s,
                    phases,
                    info: PhaseInfo {
                        w_iter: Some(Time::from_secs_f64(w)),
                        group: Some((group, Time::from_secs_f64(mu))),
                    },
                },
                group,
                w_iter_s: w,
                io_fraction,
            }
        })
        .collect())
}
