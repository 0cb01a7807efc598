//! Simulator speed in events per second (criterion's "elements/s"), on the
//! largest Figure 6 configuration and on a scale scenario; and in request
//! completions per second on the workload `benches/simgrid/` runs in
//! SimGrid, for the ratio between the two engines (docs/performance.md).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use concerto_core::job::{SetRule, Sets};
use concerto_sim::fluid::{self, GeneratorSpec};
use concerto_sim::{simulate, Scenario};

const FIG6_LARGEST: &str = r#"
name = "fig6-largest"
[cluster]
servers = 16
stripe_unit = "4KiB"
poll_interval = "50us"
[cluster.device]
kind = "hdd"
[policy]
kind = "coordinated"
[[apps]]
workload = "ior"
instances = 16
processes = 32
requests = 8
request_size = "128KiB"
pattern = "strided"
"#;

const SCALE: &str = r#"
name = "scale"
[cluster]
servers = 1000
stripe_unit = "64KiB"
stripe_count = 8
[cluster.device]
kind = "ssd"
[policy]
kind = "coordinated"
[[apps]]
workload = "ior"
instances = 200
processes = 32
requests = 4
request_size = "512KiB"
"#;

/// The workload of `benches/simgrid/`: `apps` applications of one process,
/// each reading 100 MiB from one disk in 100 sequential 1 MiB requests, all
/// starting at once. Over Concerto's default network it is the workload of
/// `remote_reads.cpp`; with `ideal` (no network) that of `disk_reads.cpp`.
const SIMGRID_EQUIVALENT: &str = include_str!("../../../benches/simgrid/disk_reads.toml");

/// Time per request completion (criterion's "elements" are completions).
fn completions_per_second(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulator_simgrid_equivalent");
    group.sample_size(10);
    for (suffix, network) in [("", "queued"), ("_ideal_network", "ideal")] {
        for apps in [10, 100, 1000] {
            let sets = [
                format!("apps[0].instances={apps}"),
                format!("cluster.network.mode=\"{network}\""),
            ];
            let sc =
                Scenario::from_toml(SIMGRID_EQUIVALENT, &sets).expect("valid benchmark scenario");
            let completions = simulate(&sc, 1, None).summary.requests;
            group.throughput(Throughput::Elements(completions));
            group.bench_function(format!("{apps}_apps{suffix}"), |b| {
                b.iter(|| simulate(&sc, 1, None))
            });
        }
    }
    group.finish();
}

fn events_per_second(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulator_events");
    group.sample_size(10);
    for (name, text) in [
        ("fig6_largest", FIG6_LARGEST),
        ("scale_1000_servers_6400_procs", SCALE),
    ] {
        for policy in ["fifo", "coordinated"] {
            let sc = Scenario::from_toml(text, &[format!("policy={{kind = \"{policy}\"}}")])
                .expect("valid benchmark scenario");
            let events = simulate(&sc, 1, None).summary.events;
            group.throughput(Throughput::Elements(events));
            group.bench_function(format!("{name}/{policy}"), |b| {
                b.iter(|| simulate(&sc, 1, None))
            });
        }
    }
    group.finish();
}

/// Collective I/O on a larger cluster than the paper's: 64 processes over
/// 16 HDD servers (the resonance experiments' disks, cache and flows),
/// 200 collective calls of mpi-io-test with 256 KiB segments.
const COLLECTIVE: &str = include_str!("../../../benches/collective.toml");

/// The simulator's event rate when it runs collective plans: planning every
/// call, batches, exchanges and the read cache included.
fn collective_events_per_second(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulator_collective_events");
    group.sample_size(10);
    for (name, sets) in [
        ("mpi_io_test_two_phase_read", vec![]),
        (
            "mpi_io_test_two_phase_write",
            vec!["apps[0].op=\"write\"".to_string()],
        ),
        (
            "mpi_io_test_resonant_read",
            vec!["apps[0].collective={strategy = \"resonant\"}".to_string()],
        ),
        (
            "demo_resonant_read",
            vec![
                "apps[0].collective={strategy = \"resonant\"}".to_string(),
                "apps[0].access=\"demo:segment=32KiB\"".to_string(),
            ],
        ),
        (
            "noncontig_resonant_write",
            vec![
                "apps[0].collective={strategy = \"resonant\"}".to_string(),
                "apps[0].access=\"noncontig:elmtcount=4096\"".to_string(),
                "apps[0].op=\"write\"".to_string(),
                "apps[0].requests=100".to_string(),
            ],
        ),
    ] {
        let sc = Scenario::from_toml(COLLECTIVE, &sets).expect("valid benchmark scenario");
        let events = simulate(&sc, 1, None).summary.events;
        group.throughput(Throughput::Elements(events));
        group.bench_function(name, |b| b.iter(|| simulate(&sc, 1, None)));
    }
    group.finish();
}

const SHARED_16: &str = r#"
name = "shared-16"
[cluster]
servers = 16
stripe_unit = "64KiB"
depth = 14
[cluster.device]
kind = "ssd"
latency = "2ms"
bandwidth = "120MB/s"
parallelism = 14
[policy]
kind = "sfq-d-plus"
[[apps]]
workload = "ior"
instances = 8
processes = 16
requests = 40
request_size = "256KiB"
barrier = false
stripe_count = 4
"#;

/// What total-service sharing costs the simulator: the same run under
/// per-server SFQ(D)+ and under service-sync at two thresholds. Throughput
/// is in request pieces served, the same for all three, so the figures
/// compare directly.
fn service_sync_effect(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulator_service_sync");
    group.sample_size(10);
    let cases = [
        ("sfq-d-plus", "policy={kind = \"sfq-d-plus\"}"),
        (
            "service-sync_4MiB",
            "policy={kind = \"service-sync\", threshold = \"4MiB\"}",
        ),
        (
            "service-sync_256KiB",
            "policy={kind = \"service-sync\", threshold = \"256KiB\"}",
        ),
    ];
    for (name, set) in cases {
        let sc =
            Scenario::from_toml(SHARED_16, &[set.to_string()]).expect("valid benchmark scenario");
        let pieces = simulate(&sc, 1, None).summary.requests;
        group.throughput(Throughput::Elements(pieces));
        group.bench_function(name, |b| b.iter(|| simulate(&sc, 1, None)));
    }
    group.finish();
}

/// The applications a generator file draws with seed 1, after `overrides`.
fn generated(spec: &str, overrides: &[String]) -> Vec<fluid::FluidApp> {
    let spec =
        GeneratorSpec::from_toml_table(spec, None, overrides).expect("a valid generator file");
    fluid::generate(&spec, 1)
        .expect("a valid generator spec")
        .into_iter()
        .map(|g| g.app)
        .collect()
}

/// The fluid mode on io-sets.txt's workload size, the workload the SimGrid
/// side runs too (benches/simgrid/iosets_60.toml, seed 1): 60 applications
/// (20 of w_iter about 10 s, 100 s and 1,000 s each) over h = 20,000 s at
/// I/O stress 0.8, 45,437 I/O phases. Elements are I/O phases.
fn fluid_phases_per_second(c: &mut Criterion) {
    let mut group = c.benchmark_group("fluid_iosets_60_apps");
    group.sample_size(20);
    let apps = generated(include_str!("../../../benches/simgrid/iosets_60.toml"), &[]);
    for (name, rule) in [
        ("set10", SetRule::Set10),
        ("fair-share", SetRule::FairShare),
        ("exclusive-fcfs", SetRule::ExclusiveFcfs),
    ] {
        let phases = fluid::run(&apps, 1e9, &mut Sets::new(rule.clone()))
            .expect("valid bandwidth")
            .phases
            .len();
        group.throughput(Throughput::Elements(phases as u64));
        group.bench_function(name, |b| {
            b.iter(|| fluid::run(&apps, 1e9, &mut Sets::new(rule.clone())))
        });
    }
    group.finish();
}

/// How a fluid run's time grows with the number of applications: 125 to
/// 1,000 applications of about 100 phases each (w_iter ~ N(100, 10) over
/// h = 10,000 s, I/O stress 0.8), SET-10 and FAIR-SHARE. The exponent is
/// the slope of log(time) against log(applications); docs/performance.md
/// gives it.
fn fluid_scaling(c: &mut Criterion) {
    const SPEC: &str = r#"
horizon_s = 10000
io_stress = 0.8
bandwidth = "1GB/s"
[[groups]]
count = 1
mu_s = 100
sigma_s = 10
"#;
    let mut group = c.benchmark_group("fluid_scaling");
    group.sample_size(10);
    for n in [125u32, 250, 500, 1000] {
        let apps = generated(SPEC, &[format!("groups[0].count={n}")]);
        let phases: usize = apps.iter().map(|a| a.phases.len()).sum();
        group.throughput(Throughput::Elements(phases as u64));
        for (name, rule) in [
            ("set10", SetRule::Set10),
            ("fair-share", SetRule::FairShare),
        ] {
            group.bench_function(format!("{name}/{n}"), |b| {
                b.iter(|| fluid::run(&apps, 1e9, &mut Sets::new(rule.clone())))
            });
        }
    }
    group.finish();
}

criterion_group!(
    benches,
    fluid_phases_per_second,
    fluid_scaling,
    completions_per_second,
    events_per_second,
    service_sync_effect,
    collective_events_per_second
);
criterion_main!(benches);
