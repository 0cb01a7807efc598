//! The job-level arbiter (IO-SETS) in the request-level simulator: it gates
//! operations, its priorities reach the servers as SFQ weights, and the
//! window metrics are the fluid mode's.

mod common;
use common::{error_of, scenario};
use concerto_sim::fluid::{self, FluidApp, FluidPhase};
use concerto_sim::{simulate, Scenario};

use concerto_core::job::{PhaseInfo, SetRule, Sets};

/// Three single-process applications, each two phases of 8 MiB (compute 0
/// then 1 s), on four SSD servers of 125 MB/s (0.5 GB/s in all).
const PHASES: &str = r#"
name = "phases"
[cluster]
servers = 4
stripe_unit = "1MiB"
[cluster.device]
kind = "ssd"
latency = "50us"
bandwidth = "125MB/s"
parallelism = 4
[policy]
kind = "sfq-d"
depth = 4
[job]
rule = { kind = "exclusive-fcfs" }
[[apps]]
name = "a"
workload = "phases"
op = "write"
phases = [[0.0, 8388608], [1.0, 8388608]]
[[apps]]
name = "b"
workload = "phases"
op = "write"
phases = [[0.0, 8388608], [1.0, 8388608]]
[[apps]]
name = "c"
workload = "phases"
op = "write"
phases = [[0.0, 8388608], [1.0, 8388608]]
"#;

#[test]
fn exclusive_fcfs_runs_one_phase_at_a_time_in_request_order() {
    let r = simulate(&scenario(PHASES, &[]), 1, None);
    let job = r.job.as_ref().expect("a [job] run reports its phases");
    let mut phases = job.phase_records.clone();
    assert_eq!(phases.len(), 6);
    phases.sort_by(|x, y| x.start_s.total_cmp(&y.start_s));
    for w in phases.windows(2) {
        assert!(w[1].start_s >= w[0].end_s, "phases overlap: {w:?}");
    }
    // All three ask at 0: they go one after another, and two of them waited.
    let first: Vec<_> = phases.iter().filter(|p| p.phase == 0).collect();
    assert_eq!(first.iter().filter(|p| p.start_s > p.request_s).count(), 2);
    assert!(job.mean_wait_s > 0.0);
    // Each operation's completion counts from its request: waiting included.
    let slowest = r
        .apps
        .iter()
        .map(|a| a.completion_s.max)
        .fold(0.0, f64::max);
    let longest_wait = phases
        .iter()
        .map(|p| p.end_s - p.request_s)
        .fold(0.0, f64::max);
    assert!(
        (slowest - longest_wait).abs() < 1e-9,
        "{slowest} vs {longest_wait}"
    );
}

#[test]
fn fair_share_lets_every_phase_start_at_once() {
    let r = simulate(
        &scenario(PHASES, &["job.rule={ kind = \"fair-share\" }"]),
        1,
        None,
    );
    let job = r.job.as_ref().unwrap();
    assert_eq!(job.mean_wait_s, 0.0);
    assert!(job.phase_records.iter().all(|p| p.start_s == p.request_s));
}

#[test]
fn granted_priorities_become_request_weights_on_the_servers() {
    // a at priority 1 and b at priority 3, each alone in its set, both
    // writing 64 MiB at once with eight processes (enough requests waiting
    // at every server for SFQ(D) to choose). The run equals one without the
    // arbiter where b is configured with weight 3: the priority reaches the
    // servers as exactly that weight. b finishes well before a; with equal
    // priorities they finish together.
    let table = "job.rule={ kind = \"table\", default_set = 9, default_priority = 1.0, entries = [\
                 { app = 0, set = 0, priority = 1.0 }, { app = 1, set = 1, priority = 3.0 }] }";
    let two = PHASES.replace(
        "[[apps]]\nname = \"c\"\nworkload = \"phases\"\nop = \"write\"\nphases = [[0.0, 8388608], [1.0, 8388608]]\n",
        "",
    );
    let common = [
        "apps[0].phases=[[0.0, 67108864]]",
        "apps[1].phases=[[0.0, 67108864]]",
        "apps[0].processes=8",
        "apps[1].processes=8",
    ];
    let run = |extra: &[&str], text: &str| {
        let sets: Vec<&str> = common.iter().chain(extra).copied().collect();
        let r = simulate(&scenario(text, &sets), 1, None);
        (r.apps[0].end_s, r.apps[1].end_s)
    };
    let arbitrated = run(&[table], &two);
    let plain = two.replace("[job]\nrule = { kind = \"exclusive-fcfs\" }\n", "");
    assert_eq!(arbitrated, run(&["apps[1].weight=3"], &plain));
    let (a, b) = arbitrated;
    assert!(b / a < 0.8, "priority 3 against 1: b / a = {}", b / a);
    let (fa, fb) = run(&["job.rule={ kind = \"fair-share\" }"], &two);
    assert!(
        (fb / fa - 1.0).abs() < 0.05,
        "equal priorities: {}",
        fb / fa
    );
}

#[test]
fn window_metrics_are_the_fluid_modes_on_the_same_phases() {
    // Twenty phases each of 20 ms compute then 8 MiB; measured over [0.2 s, 0.8 s].
    let phases: Vec<String> = (0..20).map(|_| "[0.02, 8388608]".to_string()).collect();
    let list = format!("[{}]", phases.join(", "));
    let sets: Vec<String> = (0..3)
        .map(|i| format!("apps[{i}].phases={list}"))
        .chain([
            "job.bandwidth=\"500MB/s\"".to_string(),
            "job.window_s=[0.2, 0.8]".to_string(),
        ])
        .collect();
    let sc = Scenario::from_toml(PHASES, &sets).unwrap();
    let r = simulate(&sc, 1, None);
    let job = r.job.as_ref().unwrap();
    let m = job.metrics.as_ref().expect("a window gives metrics");
    // The same computation, by hand from the run's own phases.
    let apps: Vec<FluidApp> = (0..3)
        .map(|_| FluidApp {
            release_s: 0.0,
            phases: vec![
                FluidPhase {
                    compute_s: 0.02,
                    io_bytes: 8388608.0
                };
                20
            ],
            info: PhaseInfo::default(),
        })
        .collect();
    let run = fluid::FluidRun {
        phases: job.phase_records.clone(),
        app_end_s: r.apps.iter().map(|a| a.end_s).collect(),
        events: 0,
    };
    let expected = fluid::window_metrics(&apps, &run, 500e6, 0.2, 0.8).unwrap();
    assert_eq!(m, &expected);
    // And the fluid mode on the same workload: the request-level run pays
    // latencies and request boundaries the fluid model does not have, so
    // it does no better, and not far worse on this small case.
    let fluid_run = fluid::run(&apps, 500e6, &mut Sets::new(SetRule::ExclusiveFcfs)).unwrap();
    let fluid_m = fluid::window_metrics(&apps, &fluid_run, 500e6, 0.2, 0.8).unwrap();
    assert!(
        fluid_m.max_stretch > 1.1,
        "the I/O is contended: {fluid_m:?}"
    );
    assert!(
        fluid_m.max_stretch <= m.max_stretch * (1.0 + 1e-9),
        "{fluid_m:?} vs {m:?}"
    );
    assert!(
        m.max_stretch < 1.5 * fluid_m.max_stretch,
        "{m:?} vs {fluid_m:?}"
    );
    assert!(fluid_m.utilization >= m.utilization * (1.0 - 1e-9));
}

#[test]
fn a_scenario_without_a_job_table_has_no_job_results() {
    let plain = PHASES.replace("[job]\nrule = { kind = \"exclusive-fcfs\" }\n", "");
    let r = simulate(&scenario(&plain, &[]), 1, None);
    assert!(r.job.is_none());
    // No gate: the three first phases start together.
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("job").is_none());
}

#[test]
fn job_and_phases_errors_name_their_key() {
    let err = |sets: &[&str]| error_of(PHASES, sets);
    assert!(err(&["apps[0].barrier=false"]).contains("apps[0].barrier"));
    assert!(
        err(&["job.window_s=[0.0, 10.0]"]).contains("job.bandwidth: required with job.window_s")
    );
    assert!(err(&["job.bandwidth=\"1GB/s\"", "job.window_s=[5.0, 1.0]"]).contains("job.window_s"));
    assert!(err(&["job.rule={ kind = \"log\", base = 1.0 }"]).contains("job.rule.base"));
    assert!(err(&["apps[1].phases=[[0.0, -1.0]]"])
        .contains("apps[1].phases[0][1]: -1 must be a finite number >= 0"));
    assert!(err(&["apps[1].phases=[]"]).contains("apps[1].phases: needs at least one phase"));
    assert!(err(&["apps[2].group=1"]).contains("apps[2].group_w_iter"));
    assert!(err(&["apps[2].pattern=\"strided\""]).contains("apps[2].pattern: does not apply"));
}
