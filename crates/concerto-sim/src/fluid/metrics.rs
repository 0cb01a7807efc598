//! What a fluid run measures: io-sets.txt's window metrics, and a set
//! rule's outcome on a generated workload (one row of a sweep).

use super::*;
use concerto_core::job::{SetRule, Sets};

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
    /// B, bytes per second: the platform's bandwidth an application gets
    /// alone, which the I/O times alone above are measured at — the
    /// bandwidth given, or the fastest rate any phase reached if that was
    /// faster (see [`window_metrics`]).
    pub alone_bandwidth: f64,
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
///
/// B is a lower bound on what an application gets alone: no phase can run
/// faster than it would alone, so a phase that moved its bytes faster than
/// `bandwidth` shows B was measured low (on a real cluster, at a moment
/// when the host was busier than during the run; in a simulator given a
/// platform other than the one B was measured on) and B is raised to that
/// phase's rate. So no application's I/O takes less than its time alone,
/// and neither a slowdown nor a stretch can fall below 1 in any world.
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
    let bandwidth = run
        .phases
        .iter()
        .filter(|p| p.end_s > p.start_s)
        .map(|p| p.bytes / (p.end_s - p.start_s))
        .fold(bandwidth, f64::max);
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
        alone_bandwidth: bandwidth,
    })
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
