//! Simulator speed in events per second (criterion's "elements/s"), on the
//! largest Figure 6 configuration and on a scale scenario.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

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

fn events_per_second(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulator_events");
    group.sample_size(10);
    for (name, text) in [("fig6_largest", FIG6_LARGEST), ("scale_1000_servers_6400_procs", SCALE)] {
        for policy in ["fifo", "coordinated"] {
            let sc = Scenario::from_toml(text, &[format!("policy={{kind = \"{policy}\"}}")]).expect("valid benchmark scenario");
            let events = simulate(&sc, 1, None).summary.events;
            group.throughput(Throughput::Elements(events));
            group.bench_function(format!("{name}/{policy}"), |b| b.iter(|| simulate(&sc, 1, None)));
        }
    }
    group.finish();
}

criterion_group!(benches, events_per_second);
criterion_main!(benches);
