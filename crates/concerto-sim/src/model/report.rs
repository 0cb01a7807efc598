//! The results of a run: per application, per server, and the job level.

use super::*;

impl<'a> Simulation<'a> {
    pub(super) fn results(mut self) -> RunResult {
        let makespan = self.apps.iter().map(|a| a.end).max().unwrap_or(Time::ZERO);
        let apps: Vec<AppResult> = self.apps.iter().map(|a| self.app_result(a)).collect();
        let servers: Vec<ServerResult> = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| server_result(i as u32, s, makespan))
            .collect();
        let pooled: Vec<f64> = self
            .apps
            .iter()
            .flat_map(|a| a.completions.iter().copied())
            .collect();
        let sc = self.sc;
        let job = sc.job.as_ref().map(|job| self.job_result(job));
        let mut result = RunResult::new(
            self.sc,
            self.seed,
            self.sc.resolved_policy(),
            apps,
            servers,
            makespan,
            self.events.processed(),
            pooled,
            self.detail,
        );
        result.job = job;
        result
    }

    /// One application's figures, with its IOR operations or mdtest
    /// phases when it ran one of those.
    fn app_result(&self, a: &AppState) -> AppResult {
        let spec = &self.sc.apps[a.spec];
        AppResult::new(
            spec.label(),
            spec.workload_name(),
            a.instance,
            a.app_id,
            spec.processes,
            a.completions.clone(),
            &a.spreads,
            a.bytes,
            a.pieces,
            a.metadata_ops,
            a.start,
            a.end,
        )
        .with_timeline(a.timeline.as_ref().map(|t| t.to_timeline(false)))
        .with_report(spec.workload.workload().report(spec, &a.completions))
    }

    /// The phases as they ran, and the window metrics the fluid mode
    /// computes, over the same applications seen as compute and I/O phases.
    pub(super) fn job_result(&mut self, job: &JobConfig) -> JobResult {
        let run = FluidRun {
            phases: std::mem::take(&mut self.phases),
            app_end_s: self.apps.iter().map(|a| a.end.as_secs_f64()).collect(),
            events: self.events.processed(),
        };
        let waited: f64 = run.phases.iter().map(|p| p.start_s - p.request_s).sum();
        let metrics = job
            .window_s
            .zip(job.bandwidth)
            .map(|([begin, end], bandwidth)| {
                let apps: Vec<FluidApp> = self
                    .apps
                    .iter()
                    .map(|a| {
                        let spec = &self.sc.apps[a.spec];
                        FluidApp {
                            release_s: spec.start.as_secs_f64(),
                            phases: (0..spec.calls())
                                .map(|k| FluidPhase {
                                    compute_s: spec.compute_before(k).as_secs_f64(),
                                    io_bytes: spec.bytes_of_call(k) as f64,
                                })
                                .collect(),
                            info: spec.phase_info(),
                        }
                    })
                    .collect();
                window_metrics(&apps, &run, bandwidth.0, begin, end).expect(
                    "validated: the window ends after it begins, and there are applications",
                )
            });
        JobResult {
            phases: run.phases.len() as u64,
            mean_wait_s: if run.phases.is_empty() {
                0.0
            } else {
                waited / run.phases.len() as f64
            },
            metrics,
            phase_records: run.phases,
        }
    }
}

/// One server's figures over a run of `makespan`.
fn server_result(index: u32, s: &ServerState, makespan: Time) -> ServerResult {
    let mut apps: Vec<ServerAppResult> = s
        .finish
        .iter()
        .map(|(&app, f)| ServerAppResult {
            app,
            first_finish_s: f.first.as_secs_f64(),
            last_finish_s: f.last.as_secs_f64(),
        })
        .collect();
    apps.sort_unstable_by_key(|a| a.app);
    ServerResult {
        index,
        role: s.role.name(),
        requests: s.requests,
        metadata_ops: s.metadata_ops,
        bytes: s.bytes,
        busy_s: s.busy.as_secs_f64(),
        utilization: if makespan.is_zero() {
            0.0
        } else {
            s.busy.as_secs_f64() / makespan.as_secs_f64()
        },
        max_queue: s.max_queue as u64,
        service_reports: s.reports_sent,
        timeline: s
            .timeline
            .as_ref()
            .map(|per_app| per_app.iter().map(|t| t.bins.to_timeline(true)).collect()),
        apps,
    }
}
