//! Planning one collective call (concerto-core `client::collective`):
//! noncontig's pattern over 1,024 processes and 64 servers with 64 KiB
//! stripes, 64-byte pieces (16 four-byte elements) per process per row,
//! at 262,144 and 1,048,576 segments (16 and 64 MiB per call), with each
//! planner. docs/performance.md gives the figures.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use concerto_core::client::collective::patterns::Pattern;
use concerto_core::client::collective::{Direction, Independent, Planner, Resonant, TwoPhase};
use concerto_core::StripeLayout;

fn collective(c: &mut Criterion) {
    let layout = StripeLayout::round_robin(65536, 64, 0, 64).expect("a valid layout");
    let mut group = c.benchmark_group("collective_plan_1024x64");
    group.sample_size(10);
    for mib in [16u64, 64] {
        let pattern = Pattern::Noncontig {
            elmtcount: 16,
            call_bytes: mib << 20,
        };
        let accesses = pattern.accesses(1024, 0);
        let segments: usize = accesses.iter().map(Vec::len).sum();
        group.throughput(Throughput::Elements(segments as u64));
        let planners: [Box<dyn Planner>; 3] = [
            Box::new(Independent::default()),
            Box::new(TwoPhase::default()),
            Box::new(Resonant::default()),
        ];
        for planner in planners {
            for direction in [Direction::Read, Direction::Write] {
                let id = format!("{}-{direction:?}", planner.name()).to_lowercase();
                group.bench_with_input(BenchmarkId::new(id, segments), &accesses, |b, acc| {
                    b.iter(|| planner.plan(direction, acc, &layout).expect("a plan"))
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, collective);
criterion_main!(benches);
