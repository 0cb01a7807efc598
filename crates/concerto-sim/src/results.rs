//! What a run produces: per-application, per-server and summary figures
//! (JSON), and optionally one CSV row per request piece.
//!
//! Times are in seconds (`_s`), bandwidths in bytes per second (`_Bps`).

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use crate::fluid::{PhaseRecord, WindowMetrics};

use concerto_core::metrics::{bandwidth, mean_sd, Distribution};
use concerto_core::{Op, PolicyConfig, Time};

use crate::scenario::Scenario;
pub use crate::timeline::Timeline;
pub use crate::workload::{IorOperation, KindReport, MdPhase};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Clone, Debug, Serialize)]
pub struct AppResult {
    pub name: String,
    pub workload: String,
    pub instance: u32,
    pub app_id: u32,
    pub processes: u32,
    /// Synchronized operations (with a barrier) or calls (without).
    pub operations: u64,
    /// Completion time of each operation, from issue to the last reply.
    pub completion_s: Distribution,
    /// Mean over operations of (last / first) per-server finish time.
    pub finish_spread: Option<f64>,
    pub bytes: u64,
    /// Request pieces served, data and metadata.
    pub requests: u64,
    /// Metadata operations among `requests`.
    pub metadata_ops: u64,
    #[serde(rename = "bandwidth_Bps")]
    pub bandwidth_bps: f64,
    pub start_s: f64,
    pub end_s: f64,
    /// Service over time, when `output.timeline` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
    /// IOR's layout (`block_size`): each operation as IOR reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ior: Option<Vec<IorOperation>>,
    /// md-test: each phase as mdtest reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mdtest: Option<Vec<MdPhase>>,
}

impl AppResult {
    pub(crate) fn with_timeline(mut self, timeline: Option<Timeline>) -> AppResult {
        self.timeline = timeline;
        self
    }

    /// The workload kind's own rows, as its program reports them.
    pub(crate) fn with_report(mut self, report: Option<KindReport>) -> AppResult {
        match report {
            Some(KindReport::Ior(operations)) => self.ior = Some(operations),
            Some(KindReport::MdTest(phases)) => self.mdtest = Some(phases),
            None => {}
        }
        self
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        name: String,
        workload: &str,
        instance: u32,
        app_id: u32,
        processes: u32,
        mut completions: Vec<f64>,
        spreads: &[f64],
        bytes: u64,
        requests: u64,
        metadata_ops: u64,
        start: Time,
        end: Time,
    ) -> AppResult {
        let operations = completions.len() as u64;
        AppResult {
            name,
            workload: workload.to_string(),
            instance,
            app_id,
            processes,
            operations,
            completion_s: Distribution::from_samples(&mut completions),
            finish_spread: (!spreads.is_empty()).then(|| mean_sd(spreads).0),
            bytes,
            requests,
            metadata_ops,
            bandwidth_bps: bandwidth(bytes, (end - start).as_secs_f64()),
            start_s: start.as_secs_f64(),
            end_s: end.as_secs_f64(),
            timeline: None,
            ior: None,
            mdtest: None,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ServerAppResult {
    /// Index into `apps`.
    pub app: u32,
    pub first_finish_s: f64,
    pub last_finish_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ServerResult {
    pub index: u32,
    /// "data", "metadata" (a dedicated metadata server) or "data+metadata".
    pub role: &'static str,
    pub requests: u64,
    /// Metadata operations among `requests`.
    pub metadata_ops: u64,
    pub bytes: u64,
    pub busy_s: f64,
    pub utilization: f64,
    pub max_queue: u64,
    /// Service reports this server sent to the others (service-sync).
    pub service_reports: u64,
    pub apps: Vec<ServerAppResult>,
    /// Per application (by index), its service and waiting time on this
    /// server over time, when `output.server_timeline` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Vec<Timeline>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Mean over applications of their mean operation completion time.
    pub avg_completion_s: f64,
    /// 95th percentile over all operations of all applications.
    pub p95_completion_s: f64,
    /// All bytes moved divided by the makespan.
    #[serde(rename = "aggregate_bandwidth_Bps")]
    pub aggregate_bandwidth_bps: f64,
    pub makespan_s: f64,
    /// Mean over applications of their finish spread (1 = all servers finish together).
    pub finish_spread: Option<f64>,
    pub operations: u64,
    pub requests: u64,
    pub bytes: u64,
    pub events: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub concerto_version: &'static str,
    pub scenario: String,
    pub seed: u64,
    pub policy: PolicyConfig,
    pub summary: Summary,
    pub apps: Vec<AppResult>,
    pub servers: Vec<ServerResult>,
    /// Under `[job]`: the I/O phases as the arbiter let them run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<JobResult>,
    #[serde(skip)]
    pub detail: Option<Vec<PieceRecord>>,
}

/// Job-level arbitration in a request-level run.
#[derive(Clone, Debug, Serialize)]
pub struct JobResult {
    pub phases: u64,
    /// Mean over the phases of the wait for the arbiter's grant, seconds.
    pub mean_wait_s: f64,
    /// With `job.window_s`: utilization, stretch and I/O slowdown, computed
    /// exactly as the fluid mode computes them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<WindowMetrics>,
    /// Every phase (application instance, phase, request, grant and end
    /// times, bytes, priority).
    #[serde(skip)]
    pub phase_records: Vec<PhaseRecord>,
}

impl RunResult {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        sc: &Scenario,
        seed: u64,
        policy: PolicyConfig,
        apps: Vec<AppResult>,
        servers: Vec<ServerResult>,
        makespan: Time,
        events: u64,
        mut all_completions: Vec<f64>,
        detail: Option<Vec<PieceRecord>>,
    ) -> RunResult {
        let means: Vec<f64> = apps
            .iter()
            .filter(|a| a.operations > 0)
            .map(|a| a.completion_s.mean)
            .collect();
        let spreads: Vec<f64> = apps.iter().filter_map(|a| a.finish_spread).collect();
        let bytes: u64 = apps.iter().map(|a| a.bytes).sum();
        let start = apps.iter().map(|a| a.start_s).fold(f64::INFINITY, f64::min);
        let span = makespan.as_secs_f64() - if start.is_finite() { start } else { 0.0 };
        let summary = Summary {
            avg_completion_s: mean_sd(&means).0,
            p95_completion_s: Distribution::from_samples(&mut all_completions).p95,
            aggregate_bandwidth_bps: bandwidth(bytes, span),
            makespan_s: makespan.as_secs_f64(),
            finish_spread: (!spreads.is_empty()).then(|| mean_sd(&spreads).0),
            operations: apps.iter().map(|a| a.operations).sum(),
            requests: apps.iter().map(|a| a.requests).sum(),
            bytes,
            events,
        };
        RunResult {
            concerto_version: VERSION,
            scenario: sc.name.clone(),
            seed,
            policy,
            summary,
            apps,
            servers,
            job: None,
            detail,
        }
    }

    /// Writes one CSV row per request piece (needs `output.detail = true`).
    pub fn write_detail_csv(&self, out: &mut dyn Write, header: bool) -> std::io::Result<()> {
        if header {
            writeln!(out, "seed,app,app_name,instance,rank,call,server,op,bytes,issue_ns,arrive_ns,start_ns,done_ns,response_ns")?;
        }
        for r in self.detail.iter().flatten() {
            let a = &self.apps[r.app as usize];
            writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                self.seed,
                r.app,
                a.name,
                a.instance,
                r.rank,
                r.call,
                r.server,
                r.op.name(),
                r.bytes,
                r.issue.as_nanos(),
                r.arrive.as_nanos(),
                r.start.as_nanos(),
                r.done.as_nanos(),
                r.response.as_nanos()
            )?;
        }
        Ok(())
    }
}

/// One request piece's timeline.
#[derive(Clone, Debug)]
pub struct PieceRecord {
    pub app: u32,
    pub rank: u32,
    pub call: u32,
    pub server: u32,
    pub op: Op,
    pub bytes: u64,
    pub issue: Time,
    pub arrive: Time,
    pub start: Time,
    pub done: Time,
    pub response: Time,
}

/// Mean, sample standard deviation, min and max of one summary figure over repetitions.
#[derive(Clone, Debug, Serialize)]
pub struct Stat {
    pub mean: f64,
    pub sd: f64,
    pub min: f64,
    pub max: f64,
}

impl Stat {
    pub fn of(xs: &[f64]) -> Stat {
        let (mean, sd) = mean_sd(xs);
        Stat {
            mean,
            sd,
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// Several repetitions of one scenario (seeds `seed`, `seed + 1`, ...).
#[derive(Clone, Debug, Serialize)]
pub struct RunSet {
    pub concerto_version: &'static str,
    pub config: Scenario,
    pub policy: PolicyConfig,
    pub seeds: Vec<u64>,
    pub aggregate: BTreeMap<&'static str, Stat>,
    pub runs: Vec<RunResult>,
}

impl RunSet {
    pub fn new(config: Scenario, runs: Vec<RunResult>) -> RunSet {
        let pick = |f: fn(&Summary) -> Option<f64>| -> Vec<f64> {
            runs.iter().filter_map(|r| f(&r.summary)).collect()
        };
        let mut aggregate = BTreeMap::new();
        aggregate.insert(
            "avg_completion_s",
            Stat::of(&pick(|s| Some(s.avg_completion_s))),
        );
        aggregate.insert(
            "p95_completion_s",
            Stat::of(&pick(|s| Some(s.p95_completion_s))),
        );
        aggregate.insert(
            "aggregate_bandwidth_Bps",
            Stat::of(&pick(|s| Some(s.aggregate_bandwidth_bps))),
        );
        aggregate.insert("makespan_s", Stat::of(&pick(|s| Some(s.makespan_s))));
        let spreads = pick(|s| s.finish_spread);
        if !spreads.is_empty() {
            aggregate.insert("finish_spread", Stat::of(&spreads));
        }
        let policy = config.resolved_policy();
        RunSet {
            concerto_version: VERSION,
            seeds: runs.iter().map(|r| r.seed).collect(),
            config,
            policy,
            aggregate,
            runs,
        }
    }
}
