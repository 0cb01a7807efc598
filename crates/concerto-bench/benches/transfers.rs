//! The parallel I/O scheduling problem (concerto-core `client::transfers`):
//! the optimal edge colouring and each heuristic on one random instance of
//! 1,000 clients and 100 servers (density 0.5, 1 to 4 transfers per pair:
//! 124,571 unit transfers, Δ = 1,410); and the optimal colouring and FCFS
//! on 10,000 clients and 1,000 servers (density 0.36, 1 to 5 per pair:
//! 10,796,558 unit transfers, Δ = 11,316). The other heuristics take from
//! 18 s to many minutes there, too long for ten samples: the example
//! `transfer_schedule` times them once. docs/performance.md gives the
//! figures.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use concerto_core::client::transfers::{optimal, random_counts, schedule, Heuristic, Transfers};

fn transfers(c: &mut Criterion) {
    let rows = random_counts(1000, 100, 0.5, 4, 1);
    let t = Transfers::from_counts(&rows).expect("a valid instance");
    let mut group = c.benchmark_group("transfers_1000x100");
    group.sample_size(10);
    group.throughput(Throughput::Elements(t.edges().len() as u64));
    group.bench_function("optimal", |b| b.iter(|| optimal(&t)));
    for h in [
        Heuristic::Fcfs,
        Heuristic::Hdf,
        Heuristic::Hcdf,
        Heuristic::Uar,
        Heuristic::MPasses { passes: 3 },
    ] {
        group.bench_function(h.name(), |b| b.iter(|| schedule(&t, h, 1)));
    }
    group.finish();

    let rows = random_counts(10_000, 1_000, 0.36, 5, 1);
    let t = Transfers::from_counts(&rows).expect("a valid instance");
    let mut group = c.benchmark_group("transfers_10000x1000");
    group.sample_size(10);
    group.throughput(Throughput::Elements(t.edges().len() as u64));
    group.bench_function("optimal", |b| b.iter(|| optimal(&t)));
    group.bench_function("fcfs", |b| b.iter(|| schedule(&t, Heuristic::Fcfs, 1)));
    group.finish();
}

criterion_group!(benches, transfers);
criterion_main!(benches);
