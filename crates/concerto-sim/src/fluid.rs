//! The fluid mode for job-level studies (io-sets.txt Section V): the
//! platform's I/O bandwidth B is shared by the applications an
//! [`IoArbiter`] has granted, each at x_i = p_i / Σ p_j of B; applications
//! alternate compute phases (seconds) and I/O phases (bytes).
//!
//! Event times are exact, with no time steps, and an event costs
//! O(log n) whatever the number of applications doing I/O. Shares change at
//! every grant and completion, but not a granted phase's place in the
//! queue of completions: with V(t) the work done per unit of priority
//! (dV/dt = B / Σ p_j), a phase of `bytes` granted at priority p when V is
//! V₀ completes when V reaches V₀ + bytes / p, however the shares move in
//! between. Completions are a heap on that value; only the time of the next
//! one is recomputed when Σ p_j changes.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use concerto_core::job::{Decision, IoArbiter, PhaseInfo, SetRule, Sets};
use concerto_core::units::Bandwidth;
use concerto_core::{AppId, Time};

use crate::scenario::ConfigError;

/// One phase of an application: compute for `compute_s` seconds, then
/// write or read `io_bytes`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FluidPhase {
    pub compute_s: f64,
    pub io_bytes: f64,
}

/// An application of the fluid mode.
#[derive(Clone, Debug, PartialEq)]
pub struct FluidApp {
    /// When it starts its first compute phase, seconds.
    pub release_s: f64,
    pub phases: Vec<FluidPhase>,
    /// What it tells the arbiter (w_iter, group).
    pub info: PhaseInfo,
}

/// One I/O phase as it ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhaseRecord {
    pub app: u32,
    pub phase: u32,
    /// When the application asked to do its I/O.
    pub request_s: f64,
    /// When the arbiter let it.
    pub start_s: f64,
    pub end_s: f64,
    pub bytes: f64,
    pub priority: f64,
}

/// A fluid run: every I/O phase, and when each application finished.
#[derive(Clone, Debug, PartialEq)]
pub struct FluidRun {
    pub phases: Vec<PhaseRecord>,
    pub app_end_s: Vec<f64>,
    pub events: u64,
}

/// A heap entry ordered by an `f64` key (earliest first), then by a
/// sequence number, so that equal keys come out in a fixed order.
#[derive(Clone, Copy, Debug)]
struct Earliest {
    key: f64,
    seq: u64,
    app: u32,
}

impl PartialEq for Earliest {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Earliest {}
impl PartialOrd for Earliest {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Earliest {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap pops the largest.
        other
            .key
            .total_cmp(&self.key)
            .then(other.seq.cmp(&self.seq))
    }
}

/// Where one application is.
#[derive(Clone, Copy, Debug, Default)]
struct AppState {
    /// The phase it is in (compute, then I/O).
    phase: usize,
    request_s: f64,
    start_s: f64,
    priority: f64,
}

/// Starts an application's I/O phase at `now` with `priority`; returns the
/// value of V at which it completes.
fn start_io(s: &mut AppState, app: &FluidApp, priority: f64, now: f64, v: f64) -> f64 {
    s.start_s = now;
    s.priority = priority;
    v + app.phases[s.phase].io_bytes / priority
}

/// Runs the applications on bandwidth `bandwidth` (bytes per second, > 0) under `arbiter`.
pub fn run(
    apps: &[FluidApp],
    bandwidth: f64,
    arbiter: &mut dyn IoArbiter,
) -> Result<FluidRun, String> {
    if !(bandwidth.is_finite() && bandwidth > 0.0) {
        return Err(format!(
            "bandwidth: {bandwidth} must be a positive number of bytes per second"
        ));
    }
    let mut state = vec![AppState::default(); apps.len()];
    let mut computing: BinaryHeap<Earliest> = BinaryHeap::new();
    let mut completions: BinaryHeap<Earliest> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut next_seq = || {
        seq += 1;
        seq
    };
    for (i, a) in apps.iter().enumerate() {
        if let Some(first) = a.phases.first() {
            computing.push(Earliest {
                key: a.release_s + first.compute_s,
                seq: next_seq(),
                app: i as u32,
            });
        }
    }
    let mut run = FluidRun {
        phases: Vec::new(),
        app_end_s: apps.iter().map(|a| a.release_s).collect(),
        events: 0,
    };
    // V: work per unit of priority done so far; `v_at` is when it was last brought up to date.
    let (mut v, mut v_at, mut total_priority) = (0.0f64, 0.0f64, 0.0f64);
    loop {
        let next_io = completions
            .peek()
            .map(|c| v_at + (c.key - v) * total_priority / bandwidth);
        let next_compute = computing.peek().map(|c| c.key);
        // At equal times a completion goes first: it may free the set a request wants.
        let completion_first = match (next_io, next_compute) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(io), Some(cpu)) => io <= cpu,
        };
        run.events += 1;
        if completion_first {
            let done = completions.pop().expect("peeked above");
            let now = next_io.expect("a completion is due").max(v_at);
            v = done.key;
            v_at = now;
            let app = done.app as usize;
            let s = state[app];
            total_priority -= s.priority;
            if completions.is_empty() {
                total_priority = 0.0; // no residue from rounding
            }
            let phase = &apps[app].phases[s.phase];
            run.phases.push(PhaseRecord {
                app: app as u32,
                phase: s.phase as u32,
                request_s: s.request_s,
                start_s: s.start_s,
                end_s: now,
                bytes: phase.io_bytes,
                priority: s.priority,
            });
            let granted = arbiter.end_phase(AppId(app as u32), Time::from_secs_f64(now));
            for (next, priority) in granted {
                let i = next.0 as usize;
                let key = start_io(&mut state[i], &apps[i], priority, now, v);
                total_priority += priority;
                completions.push(Earliest {
                    key,
                    seq: next_seq(),
                    app: next.0,
                });
            }
            state[app].phase += 1;
            match apps[app].phases.get(state[app].phase) {
                Some(p) => computing.push(Earliest {
                    key: now + p.compute_s,
                    seq: next_seq(),
                    app: app as u32,
                }),
                None => run.app_end_s[app] = now,
            }
        } else {
            let ready = computing.pop().expect("peeked above");
            let now = ready.key;
            if total_priority > 0.0 {
                v += (now - v_at) * bandwidth / total_priority;
            }
            v_at = now;
            let app = ready.app as usize;
            state[app].request_s = now;
            let info = &apps[app].info;
            if let Decision::Granted { priority } =
                arbiter.begin_phase(AppId(app as u32), Time::from_secs_f64(now), info)
            {
                let key = start_io(&mut state[app], &apps[app], priority, now, v);
                total_priority += priority;
                completions.push(Earliest {
                    key,
                    seq: next_seq(),
                    app: app as u32,
                });
            }
        }
    }
    Ok(run)
}

/// io-sets.txt's metrics over a window [begin, end] (Section V-D), and the
/// journal version's I/O slowdown.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowMetrics {
    /// Σ_j e_cpu,j / (n (end − begin)): the share of the applications' time spent computing.
    pub utilization: f64,
    /// max_j (end − begin) / e_j.
    pub max_stretch: f64,
    /// (end − begin) / e_j per application.
    pub stretch: Vec<f64>,
    /// Geometric mean over the applications with I/O in the window of the
    /// time they spent in I/O (waiting included) over the I/O time they
    /// would need alone.
    pub io_slowdown: f64,
}

/// The length of `[a, b]` inside `[lo, hi]`.
fn overlap(a: f64, b: f64, lo: f64, hi: f64) -> f64 {
    (b.min(hi) - a.max(lo)).max(0.0)
}

/// The metrics of `run` over `[begin, end]`. An application's effective
/// work e_j = e_cpu + e_io counts what it did inside the window:
/// - a compute phase (from the end of the previous I/O phase, or the
///   release, to the next I/O request) counts the part of it inside the
///   window;
/// - an I/O phase counts its time alone on the platform (bytes / B) times
///   the fraction of its transfer (grant to end) inside the window; a
///   phase of no bytes counts nothing.
///
/// The I/O slowdown's time in I/O runs from the request (waiting for the
/// set included) to the end, clipped to the window the same way.
pub fn window_metrics(
    apps: &[FluidApp],
    run: &FluidRun,
    bandwidth: f64,
    begin: f64,
    end: f64,
) -> Result<WindowMetrics, String> {
    if !(begin.is_finite() && end.is_finite() && end > begin) {
        return Err(format!("window: [{begin}, {end}] must end after it begins"));
    }
    if apps.is_empty() {
        return Err("window: there are no applications to measure".into());
    }
    let span = end - begin;
    let n = apps.len();
    let (mut cpu, mut io, mut in_io) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    // Where each application's next compute phase starts: its release, then each I/O end.
    let mut compute_from: Vec<f64> = apps.iter().map(|a| a.release_s).collect();
    let mut phases: Vec<&PhaseRecord> = run.phases.iter().collect();
    phases.sort_by_key(|p| (p.app, p.phase));
    for p in phases {
        let j = p.app as usize;
        cpu[j] += overlap(compute_from[j], p.request_s, begin, end);
        compute_from[j] = p.end_s;
        let transfer = p.end_s - p.start_s;
        if transfer > 0.0 {
            io[j] += p.bytes / bandwidth * overlap(p.start_s, p.end_s, begin, end) / transfer;
        }
        in_io[j] += overlap(p.request_s, p.end_s, begin, end);
    }
    let stretch: Vec<f64> = (0..n)
        .map(|j| {
            let e = cpu[j] + io[j];
            if e > 0.0 {
                span / e
            } else {
                f64::INFINITY
            }
        })
        .collect();
    let slowdowns: Vec<f64> = (0..n)
        .filter(|&j| io[j] > 0.0)
        .map(|j| in_io[j] / io[j])
        .collect();
    let io_slowdown = if slowdowns.is_empty() {
        1.0
    } else {
        (slowdowns.iter().map(|x| x.ln()).sum::<f64>() / slowdowns.len() as f64).exp()
    };
    Ok(WindowMetrics {
        utilization: cpu.iter().sum::<f64>() / (n as f64 * span),
        max_stretch: stretch.iter().copied().fold(0.0, f64::max),
        stretch,
        io_slowdown,
    })
}

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
        spec.validate()
            .map_err(|(field, message)| format!("{field}: {message}"))?;
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
        spec.validate()
            .map_err(|(field, message)| placed(ConfigError::at(field, message)))?;
        Ok(spec)
    }

    /// Checks the numbers; the error names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let positive = |field: &'static str, v: f64, unit: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err((field, format!("{v} must be a positive number{unit}")))
            }
        };
        if self.groups.iter().all(|g| g.count == 0) {
            return Err(("groups", "need at least one application".into()));
        }
        for g in &self.groups {
            positive("groups.mu_s", g.mu_s, " of seconds")?;
            if !(g.sigma_s.is_finite() && g.sigma_s >= 0.0) {
                return Err((
                    "groups.sigma_s",
                    format!("{} must be a number >= 0", g.sigma_s),
                ));
            }
        }
        positive("horizon_s", self.horizon_s, " of seconds")?;
        if !(self.min_w_iter_s.is_finite() && self.min_w_iter_s >= 0.0) {
            return Err((
                "min_w_iter_s",
                format!("{} must be a number of seconds >= 0", self.min_w_iter_s),
            ));
        }
        for g in &self.groups {
            if g.sigma_s == 0.0 && g.mu_s < self.min_w_iter_s {
                return Err((
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
            return Err(("noise", format!("{} must be in [0, 1]", self.noise)));
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
pub fn generate(spec: &GeneratorSpec, seed: u64) -> Result<Vec<Generated>, (&'static str, String)> {
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
        return Err((
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

/// What one set rule made of a generated workload over a window: one row
/// of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleOutcome {
    pub utilization: f64,
    pub max_stretch: f64,
    /// The mean over the applications of their stretch.
    pub mean_stretch: f64,
    pub io_slowdown: f64,
    /// The largest stretch among each generator group's applications
    /// (index: group; 0 for an empty group).
    pub group_max_stretch: Vec<f64>,
    /// How many sets the rule put the applications in.
    pub sets: usize,
    pub events: u64,
}

/// Runs one generated workload under each rule and measures it over
/// `[begin, end]`: every rule sees the same applications, so rules compare
/// pairwise within a repetition.
pub fn measure(
    generated: &[Generated],
    groups: usize,
    bandwidth: f64,
    rules: &[SetRule],
    begin: f64,
    end: f64,
) -> Result<Vec<RuleOutcome>, String> {
    let apps: Vec<FluidApp> = generated.iter().map(|g| g.app.clone()).collect();
    rules
        .iter()
        .map(|rule| {
            let run = run(&apps, bandwidth, &mut Sets::new(rule.clone()))?;
            let m = window_metrics(&apps, &run, bandwidth, begin, end)?;
            let mut group_max_stretch = vec![0.0f64; groups];
            for (g, s) in generated.iter().zip(&m.stretch) {
                let slot = &mut group_max_stretch[g.group as usize];
                *slot = slot.max(*s);
            }
            let sets: std::collections::BTreeSet<i64> = apps
                .iter()
                .enumerate()
                .map(|(i, a)| rule.place(AppId(i as u32), &a.info).0 .0)
                .collect();
            Ok(RuleOutcome {
                utilization: m.utilization,
                max_stretch: m.max_stretch,
                mean_stretch: m.stretch.iter().sum::<f64>() / m.stretch.len() as f64,
                io_slowdown: m.io_slowdown,
                group_max_stretch,
                sets: sets.len(),
                events: run.events,
            })
        })
        .collect()
}

/// A set rule from TOML text (`kind = "set10"`, ...), checked; an error
/// names the line, column and key.
pub fn rule_from_toml(text: &str) -> Result<SetRule, String> {
    let rule: SetRule = concerto_toml::parse(text).map_err(|e| format!("rule: {e}"))?;
    rule.validate()
        .map_err(|(field, message)| format!("rule.{field}: {message}"))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use concerto_core::job::sets::TableEntry;
    use concerto_core::job::{SetRule, Sets};
    use proptest::prelude::*;

    fn app(release_s: f64, phases: &[(f64, f64)]) -> FluidApp {
        FluidApp {
            release_s,
            phases: phases
                .iter()
                .map(|&(compute_s, io_bytes)| FluidPhase {
                    compute_s,
                    io_bytes,
                })
                .collect(),
            info: PhaseInfo::default(),
        }
    }

    /// io-sets claim 5: priorities 1 and 2, 10 GB each on 10 GB/s. The
    /// second runs at 2/3 of B and ends at 1.5 s, having let the first
    /// write 5 GB; the first then has B alone for its last 5 GB: 2.0 s.
    #[test]
    fn two_priorities_finish_when_the_hand_computation_says() {
        let table = SetRule::Table {
            entries: vec![
                TableEntry {
                    app: 0,
                    set: 0,
                    priority: 1.0,
                },
                TableEntry {
                    app: 1,
                    set: 1,
                    priority: 2.0,
                },
            ],
            default_set: 9,
            default_priority: 1.0,
        };
        let apps = [app(0.0, &[(0.0, 10e9)]), app(0.0, &[(0.0, 10e9)])];
        let r = run(&apps, 10e9, &mut Sets::new(table)).unwrap();
        assert!((r.app_end_s[0] - 2.0).abs() < 1e-12, "{:?}", r.app_end_s);
        assert!((r.app_end_s[1] - 1.5).abs() < 1e-12, "{:?}", r.app_end_s);
    }

    /// Two applications on B = 1, both released at 0, one set:
    /// A computes 1 s, writes 2 (alone: [1, 3]), computes 1 s (ends at 4);
    /// B computes 2 s, asks at 2, waits for A, writes 1 at [3, 4].
    /// Over [0, 4]: e_A = 2 + 2 = 4, e_B = 2 + 1 = 3; utilization 4 / 8;
    /// stretch 4 / 3; I/O slowdown: A 2 / 2, B 2 / 1, geometric mean √2.
    /// Over [2, 4] the phases are cut: A's write counts 1 of its 2, its
    /// second compute 1; B's compute counts 0.
    #[test]
    fn window_metrics_equal_the_hand_computation() {
        let apps = [app(0.0, &[(1.0, 2.0), (1.0, 0.0)]), app(0.0, &[(2.0, 1.0)])];
        let r = run(&apps, 1.0, &mut Sets::new(SetRule::ExclusiveFcfs)).unwrap();
        let m = window_metrics(&apps, &r, 1.0, 0.0, 4.0).unwrap();
        assert!((m.utilization - 0.5).abs() < 1e-12, "{m:?}");
        assert!((m.max_stretch - 4.0 / 3.0).abs() < 1e-12, "{m:?}");
        assert!((m.io_slowdown - 2f64.sqrt()).abs() < 1e-12, "{m:?}");
        let m = window_metrics(&apps, &r, 1.0, 2.0, 4.0).unwrap();
        assert!(window_metrics(&apps, &r, 1.0, 4.0, 4.0)
            .unwrap_err()
            .starts_with("window:"));
        assert!(run(&apps, 0.0, &mut Sets::new(SetRule::FairShare))
            .unwrap_err()
            .starts_with("bandwidth:"));
        // A: compute [3, 4] = 1, I/O 2 x (1 / 2) = 1: e = 2. B: compute 0, I/O 1: e = 1.
        assert_eq!(m.stretch, vec![1.0, 2.0]);
        assert!((m.utilization - 0.25).abs() < 1e-12, "{m:?}");
    }

    #[test]
    fn inside_one_set_phases_take_turns_in_request_order() {
        let apps = [
            app(0.0, &[(1.0, 10.0), (1.0, 10.0)]),
            app(0.0, &[(1.5, 10.0)]),
        ];
        // One set: the second asks at 1.5 while the first writes [1, 2); it goes at 2.
        let r = run(&apps, 10.0, &mut Sets::new(SetRule::ExclusiveFcfs)).unwrap();
        let by = |a: u32, p: u32| {
            *r.phases
                .iter()
                .find(|x| x.app == a && x.phase == p)
                .unwrap()
        };
        assert_eq!((by(0, 0).start_s, by(0, 0).end_s), (1.0, 2.0));
        assert_eq!(
            (by(1, 0).request_s, by(1, 0).start_s, by(1, 0).end_s),
            (1.5, 2.0, 3.0)
        );
        // The first computes [2, 3) and asks at 3, when the set is free again.
        assert_eq!(
            (by(0, 1).request_s, by(0, 1).start_s, by(0, 1).end_s),
            (3.0, 3.0, 4.0)
        );
    }

    fn paper_spec(noise: f64) -> GeneratorSpec {
        GeneratorSpec {
            groups: vec![
                GroupSpec {
                    count: 5,
                    mu_s: 10.0,
                    sigma_s: 1.0,
                },
                GroupSpec {
                    count: 20,
                    mu_s: 100.0,
                    sigma_s: 10.0,
                },
                GroupSpec {
                    count: 35,
                    mu_s: 1000.0,
                    sigma_s: 100.0,
                },
            ],
            horizon_s: 20_000.0,
            io_stress: 0.8,
            noise,
            release: false,
            min_w_iter_s: 0.01,
            bandwidth: Bandwidth(1e9),
        }
    }

    #[test]
    fn same_seed_same_workload_and_run_other_seed_other_workload() {
        let spec = paper_spec(0.3);
        let (a, b) = (generate(&spec, 11).unwrap(), generate(&spec, 11).unwrap());
        assert_eq!(a, b);
        assert_ne!(a, generate(&spec, 12).unwrap());
        let apps: Vec<FluidApp> = a.into_iter().map(|g| g.app).collect();
        let run_once = || run(&apps, 1e9, &mut Sets::new(SetRule::Set10)).unwrap();
        let (first, second) = (run_once(), run_once());
        assert_eq!(first, second);
        let m = |r: &FluidRun| window_metrics(&apps, r, 1e9, 1000.0, 9000.0).unwrap();
        assert_eq!(m(&first), m(&second));
    }

    #[test]
    fn w_iter_is_drawn_above_its_floor_and_huge_workloads_are_refused() {
        let mut spec = paper_spec(0.0);
        spec.groups = vec![GroupSpec {
            count: 200,
            mu_s: 1.0,
            sigma_s: 1.0,
        }];
        spec.min_w_iter_s = 0.5;
        let apps = generate(&spec, 3).unwrap();
        assert!(apps.iter().all(|a| a.w_iter_s >= 0.5));
        assert!(
            apps.iter().any(|a| a.w_iter_s < 0.6),
            "the floor truncates, it does not shift"
        );
        spec.min_w_iter_s = 0.0;
        spec.horizon_s = 1e7;
        let (field, message) = generate(&spec, 3).unwrap_err();
        assert_eq!(field, "min_w_iter_s");
        assert!(
            message.contains("I/O phases") && message.contains("raise min_w_iter_s"),
            "{message}"
        );
        spec.min_w_iter_s = -1.0;
        assert_eq!(generate(&spec, 3).unwrap_err().0, "min_w_iter_s");
    }

    #[test]
    fn the_generator_hits_the_io_stress_and_the_iteration_count() {
        let apps = generate(&paper_spec(0.0), 7).unwrap();
        assert_eq!(apps.len(), 60);
        let stress: f64 = apps.iter().map(|g| g.io_fraction).sum();
        assert!((stress - 0.8).abs() < 1e-12, "{stress}");
        for g in &apps {
            let n = g.app.phases.len() as f64;
            assert_eq!(n, (20_000.0 / g.w_iter_s).round().max(1.0));
            // Periodic: every phase t_cpu + t_io = w_iter.
            let p = g.app.phases[0];
            assert!((p.compute_s + p.io_bytes / 1e9 - g.w_iter_s).abs() < 1e-9);
        }
        assert_eq!(generate(&paper_spec(0.5), 7), generate(&paper_spec(0.5), 7));
    }

    #[test]
    fn a_generated_workload_file_runs_as_generated() {
        let spec = paper_spec(0.2);
        let generated = generate(&spec, 3).unwrap();
        let file = WorkloadFile::generated(&spec, &generated);
        let text = serde_json::to_string(&file).unwrap();
        let back: WorkloadFile = serde_json::from_str(&text).unwrap();
        let apps = back.apps().unwrap();
        let direct: Vec<FluidApp> = generated.into_iter().map(|g| g.app).collect();
        let by_file = run(&apps, back.bandwidth, &mut Sets::new(SetRule::Set10)).unwrap();
        let by_hand = run(&direct, spec.bandwidth.0, &mut Sets::new(SetRule::Set10)).unwrap();
        assert!(
            by_file == by_hand,
            "a workload read back from JSON ran differently"
        );
        let mut broken = back.clone();
        broken.apps[2].phases[1].1 = -1.0;
        assert_eq!(
            broken.apps().unwrap_err(),
            "apps[2].phases[1][1]: -1 must be a finite number >= 0"
        );
    }

    #[test]
    fn a_generator_file_reads_with_units_and_names_bad_keys() {
        let text = "horizon_s = 20000\nio_stress = 0.8\nbandwidth = \"1GB/s\"\n[[groups]]\ncount = 2\nmu_s = 10\nsigma_s = 1\n";
        let spec = GeneratorSpec::from_toml(text).unwrap();
        assert_eq!((spec.bandwidth, spec.groups.len()), (Bandwidth(1e9), 1));
        let err = GeneratorSpec::from_toml(&text.replace("mu_s = 10", "mu_s = -10")).unwrap_err();
        assert!(err.starts_with("groups.mu_s: -10 must be"), "{err}");
        let err = GeneratorSpec::from_toml(&text.replace("io_stress", "io_stres")).unwrap_err();
        assert!(err.starts_with("line 2, column 1: "), "{err}");
    }

    #[test]
    fn a_bad_generator_spec_names_the_field() {
        let mut spec = paper_spec(0.0);
        spec.groups[1].sigma_s = -1.0;
        assert_eq!(generate(&spec, 1).unwrap_err().0, "groups.sigma_s");
        let mut spec = paper_spec(1.5);
        assert_eq!(generate(&spec, 1).unwrap_err().0, "noise");
        spec.noise = 0.0;
        spec.horizon_s = 0.0;
        assert_eq!(generate(&spec, 1).unwrap_err().0, "horizon_s");
    }

    proptest! {
        /// Work conservation and accounting: whatever the rule, every phase
        /// completes once, never before its request, and the bandwidth is
        /// never oversubscribed: the bytes done by any time fit in B times
        /// the time spent with someone doing I/O.
        #[test]
        fn every_phase_completes_and_bandwidth_is_never_oversubscribed(
            shape in prop::collection::vec((0.0f64..5.0, prop::collection::vec((0.0f64..3.0, 0.0f64..50.0), 1..6)), 1..8),
            fair in any::<bool>(),
        ) {
            let apps: Vec<FluidApp> = shape.iter().map(|(r, ph)| app(*r, ph)).collect();
            let rule = if fair { SetRule::FairShare } else { SetRule::ExclusiveFcfs };
            let r = run(&apps, 10.0, &mut Sets::new(rule)).unwrap();
            let total: usize = apps.iter().map(|a| a.phases.len()).sum();
            prop_assert_eq!(r.phases.len(), total);
            for p in &r.phases {
                prop_assert!(p.request_s <= p.start_s + 1e-9 && p.start_s <= p.end_s + 1e-9);
                // A phase alone on the platform is the fastest it can go.
                prop_assert!(p.end_s - p.start_s >= p.bytes / 10.0 - 1e-6);
            }
            // The union of busy intervals carries all the bytes at B at most.
            let mut spans: Vec<(f64, f64)> = r.phases.iter().map(|p| (p.start_s, p.end_s)).collect();
            spans.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut busy = 0.0;
            let mut cur: Option<(f64, f64)> = None;
            for (s, e) in spans {
                cur = match cur {
                    Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
                    Some((cs, ce)) => { busy += ce - cs; Some((s, e)) }
                    None => Some((s, e)),
                };
            }
            if let Some((cs, ce)) = cur { busy += ce - cs; }
            let bytes: f64 = r.phases.iter().map(|p| p.bytes).sum();
            prop_assert!(bytes <= 10.0 * busy + 1e-6);
            // Under FCFS only one phase runs at a time, so the platform is busy exactly bytes / B.
            if !fair {
                prop_assert!((bytes / 10.0 - busy).abs() < 1e-6);
            }
        }
    }
}
