//! The fluid mode's tests: exact event times, the generator, the window
//! metrics and the workload files.

use super::*;
use concerto_core::job::sets::TableEntry;
use concerto_core::job::{SetRule, Sets};
use concerto_core::units::Bandwidth;
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

/// A phase that moved its bytes faster than the B given (B measured low)
/// raises B to its rate: A writes 2 at [1, 2] (rate 2) on a B of 1, so
/// its I/O alone takes 1 s and its slowdown is 1, not 0.5.
#[test]
fn a_phase_faster_than_the_bandwidth_given_raises_it() {
    let apps = [app(0.0, &[(1.0, 2.0)])];
    let phase = PhaseRecord {
        app: 0,
        phase: 0,
        request_s: 1.0,
        start_s: 1.0,
        end_s: 2.0,
        bytes: 2.0,
        priority: 1.0,
    };
    let ran = FluidRun {
        phases: vec![phase],
        app_end_s: vec![2.0],
        events: 0,
    };
    let m = window_metrics(&apps, &ran, 1.0, 0.0, 2.0).unwrap();
    assert_eq!(m.alone_bandwidth, 2.0);
    assert!((m.io_slowdown - 1.0).abs() < 1e-12, "{m:?}");
    assert!((m.max_stretch - 1.0).abs() < 1e-12, "{m:?}");
    let m = window_metrics(&apps, &ran, 4.0, 0.0, 2.0).unwrap();
    assert_eq!(
        m.alone_bandwidth, 4.0,
        "a B above every phase's rate stands"
    );
}

proptest! {
    /// Whatever phases ran (each asked for after its application's last
    /// one ended, granted at or after its request), in whatever world and
    /// with whatever B was measured, no slowdown or stretch is below 1.
    #[test]
    fn no_slowdown_or_stretch_is_below_one_in_any_world(
        b in 0.1f64..10.0,
        gaps in prop::collection::vec(
            prop::collection::vec((0.0f64..2.0, 0.0f64..2.0, 0.0f64..2.0, 0.0f64..5.0), 1..6), 1..4),
        window in (0.0f64..5.0, 0.1f64..20.0),
    ) {
        let mut apps = Vec::new();
        let mut phases = Vec::new();
        for (a, steps) in gaps.iter().enumerate() {
            let mut t = 0.0;
            let mut spec = Vec::new();
            for (k, &(compute, wait, transfer, bytes)) in steps.iter().enumerate() {
                let request = t + compute;
                let start = request + wait;
                let end = start + transfer;
                spec.push((compute, bytes));
                phases.push(PhaseRecord {
                    app: a as u32, phase: k as u32, request_s: request, start_s: start, end_s: end,
                    bytes, priority: 1.0,
                });
                t = end;
            }
            apps.push(app(0.0, &spec));
        }
        let ran = FluidRun { phases, app_end_s: vec![0.0; apps.len()], events: 0 };
        let (begin, len) = window;
        let m = window_metrics(&apps, &ran, b, begin, begin + len).unwrap();
        prop_assert!(m.io_slowdown >= 1.0 - 1e-9, "{:?}", m);
        prop_assert!(m.max_stretch >= 1.0 - 1e-9, "{:?}", m);
        prop_assert!(m.alone_bandwidth >= b);
    }
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
    let concerto_core::FieldError { field, message } = generate(&spec, 3).unwrap_err();
    assert_eq!(field, "min_w_iter_s");
    assert!(
        message.contains("I/O phases") && message.contains("raise min_w_iter_s"),
        "{message}"
    );
    spec.min_w_iter_s = -1.0;
    assert_eq!(generate(&spec, 3).unwrap_err().field, "min_w_iter_s");
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
    assert_eq!(generate(&spec, 1).unwrap_err().field, "groups.sigma_s");
    let mut spec = paper_spec(1.5);
    assert_eq!(generate(&spec, 1).unwrap_err().field, "noise");
    spec.noise = 0.0;
    spec.horizon_s = 0.0;
    assert_eq!(generate(&spec, 1).unwrap_err().field, "horizon_s");
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
