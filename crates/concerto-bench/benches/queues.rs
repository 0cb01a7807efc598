//! Cost of one request through a queue (enqueue + dispatch + complete) with
//! N requests already waiting: the per-request overhead a server pays.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use concerto_core::{Op, PolicyConfig, Request, Time};

fn request(i: u64) -> Request {
    // 16 applications, 64 objects, issue times spread over 8 s. All requests
    // are small (one slot), so that with one free slot per round every policy
    // takes one request in and one out and the queue stays at its size.
    Request::data(
        i,
        (i % 16) as u32,
        (i % 32) as u32,
        Time::from_micros((i * 7919) % 8_000_000),
        Op::Read,
        i % 64,
        i * 4096,
        4096,
    )
}

fn steady_state(c: &mut Criterion) {
    let mut group = c.benchmark_group("queue_enqueue_dispatch_complete");
    group.throughput(Throughput::Elements(1));
    for name in PolicyConfig::NAMES {
        for &queued in &[10u64, 1_000, 100_000] {
            let policy = PolicyConfig::from_name(name).expect("known policy");
            let mut q = policy.build(Time::from_millis(1000));
            for i in 0..queued {
                q.enqueue(request(i), Time::ZERO);
            }
            let mut next = queued;
            let mut out = Vec::with_capacity(4);
            group.bench_with_input(BenchmarkId::new(*name, queued), &queued, |b, _| {
                b.iter(|| {
                    let now = Time::from_micros(next);
                    q.enqueue(request(next), now);
                    next += 1;
                    out.clear();
                    q.dispatch(now, 1, &mut out);
                    for r in out.drain(..) {
                        q.complete(black_box(&r), now);
                    }
                })
            });
        }
    }
    group.finish();
}

/// One service-sync exchange: a server builds its report (16 applications)
/// and another absorbs it.
fn service_sync_exchange(c: &mut Criterion) {
    let policy = PolicyConfig::from_name("service-sync").expect("known policy");
    let mut sender = policy.build(Time::ZERO);
    let mut receiver = policy.build(Time::ZERO);
    let mut i = 0u64;
    c.bench_function("service_sync_exchange_16_apps", |b| {
        b.iter(|| {
            // 16 completions of 1 MiB pass the default 4 MiB threshold.
            for _ in 0..16 {
                let served =
                    Request::data(i, (i % 16) as u32, 0, Time::ZERO, Op::Write, 0, 0, 1 << 20);
                sender.complete(&served, Time::from_micros(i));
                i += 1;
            }
            let report = sender
                .service_report(Time::from_micros(i))
                .expect("threshold passed");
            receiver.absorb_service(black_box(&report));
        })
    });
}

criterion_group!(benches, steady_state, service_sync_exchange);
criterion_main!(benches);
