//! `[cluster] client_overhead` and its spread: what each step costs its
//! process before its requests leave, and how much of it varies from step
//! to step, so that processes started in step fall out of it (drift).

#[allow(dead_code)]
mod common;
use common::{error_of, scenario};
use concerto_sim::simulate;

/// A device that costs almost nothing and no network: each process's time
/// is its steps' client overhead. Four single-process applications, each
/// writing 1,000 transfers of 4 KiB to its own file on its own server.
const FOUR_WRITERS: &str = r#"
name = "client-overhead"
[cluster]
servers = 4
stripe_unit = "4KiB"
stripe_count = 1
client_overhead = "100us"
[cluster.device]
kind = "fixed"
service_time = "1us"
[cluster.network]
mode = "ideal"
[[apps]]
workload = "ior"
instances = 4
processes = 1
requests = 1000
request_size = "4KiB"
barrier = false
"#;

/// Each application's end, seconds.
fn ends(sets: &[&str], seed: u64) -> Vec<f64> {
    simulate(&scenario(FOUR_WRITERS, sets), seed, None)
        .apps
        .iter()
        .map(|a| a.end_s)
        .collect()
}

const SPREAD: &str = "cluster.client_overhead_spread=\"80us\"";

#[test]
fn without_a_spread_processes_started_together_stay_in_step() {
    let e = ends(&[], 1);
    assert!(e.iter().all(|&x| x == e[0]), "{e:?}");
    // 1,000 steps of 100 us, and the device's microsecond each.
    assert!((e[0] - 0.101).abs() < 0.001, "{e:?}");
}

#[test]
fn a_spread_keeps_the_mean_overhead_and_lets_processes_drift_apart() {
    let e = ends(&[SPREAD], 1);
    // The mean stays 100 us a step: each 1,000-step run within 5% of
    // 0.101 s (the draws' sum has a standard deviation of 2.5 ms).
    for &x in &e {
        assert!((x / 0.101 - 1.0).abs() < 0.05, "{e:?}");
    }
    // No two processes end together any more.
    let mut sorted = e.clone();
    sorted.sort_by(f64::total_cmp);
    assert!(sorted.windows(2).all(|w| w[1] - w[0] > 1e-6), "{e:?}");
    // Seeded: the same seed draws the same, another seed other values.
    assert_eq!(e, ends(&[SPREAD], 1));
    assert_ne!(e, ends(&[SPREAD], 2));
}

#[test]
fn a_spread_above_the_overhead_is_named() {
    let err = error_of(FOUR_WRITERS, &["cluster.client_overhead_spread=\"150us\""]);
    assert!(err.contains("cluster.client_overhead_spread"), "{err}");
    assert!(err.contains("more than cluster.client_overhead"), "{err}");
}
