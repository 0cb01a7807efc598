//! What integrity on the wire costs (docs/security.md): two loopback
//! clusters of four servers in one run, one as deployed on one host (no
//! MACs) and one whose servers require a MAC on every frame
//! (`integrity = "always"`), with the same 1 MiB sequential writes and
//! reads and the same metadata operations through the client library,
//! side by side; and the MAC alone on a 4 KiB and a 1 MiB frame.

use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use concerto_proto::auth::Secret;
use concerto_proto::integrity::Session;
use concerto_proto::LayoutRequest;
use concerto_server::server::Integrity;

const MIB: u64 = 1 << 20;
/// Bytes one iteration moves: 32 calls of 1 MiB.
const FILE: u64 = 32 * MIB;

fn integrity(c: &mut Criterion) {
    let rt = concerto_bench::runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    let sides = [("off", Integrity::WhenAsked), ("on", Integrity::Always)].map(|(name, i)| {
        let (cluster, client) =
            concerto_bench::loopback_cluster_with(&rt, &dir.path().join(name), i);
        let file = rt
            .block_on(client.create("/seq", LayoutRequest::default(), true))
            .expect("create");
        (name, cluster, client, file)
    });
    let block = vec![7u8; MIB as usize];

    let mut g = c.benchmark_group("integrity_sequential_1MiB");
    g.throughput(Throughput::Bytes(FILE));
    for (name, _, client, file) in &sides {
        g.bench_function(format!("write/{name}"), |b| {
            b.iter(|| {
                rt.block_on(async {
                    for k in 0..FILE / MIB {
                        client.write(file, k * MIB, &block).await.expect("write");
                    }
                })
            })
        });
    }
    for (name, _, client, file) in &sides {
        g.bench_function(format!("read/{name}"), |b| {
            b.iter(|| {
                rt.block_on(async {
                    for k in 0..FILE / MIB {
                        let data = client.read(file, k * MIB, MIB).await.expect("read");
                        assert_eq!(data.len() as u64, MIB);
                    }
                })
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("integrity_metadata");
    g.throughput(Throughput::Elements(1));
    for (name, _, client, _) in &sides {
        g.bench_function(format!("stat/{name}"), |b| {
            b.iter(|| rt.block_on(client.stat("/seq")).expect("stat"))
        });
    }
    let next = AtomicU64::new(0);
    for (name, _, client, _) in &sides {
        g.bench_function(format!("create_unlink/{name}"), |b| {
            b.iter(|| {
                let path = format!("/m{}", next.fetch_add(1, Ordering::Relaxed));
                rt.block_on(async {
                    client
                        .create(&path, LayoutRequest::default(), true)
                        .await
                        .expect("create");
                    client.unlink(&path).await.expect("unlink");
                })
            })
        });
    }
    g.finish();

    // The MAC alone (HMAC-SHA256 under the session key).
    let mut g = c.benchmark_group("integrity_mac");
    let secret = Secret::generate().expect("secret");
    let mut session = Session::client(&secret, "k", &[1; 32], &[2; 32]);
    for size in [4096usize, MIB as usize] {
        let frame = vec![5u8; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(format!("seal/{size}"), |b| {
            b.iter(|| session.seal.seal(&[&frame]))
        });
    }
    g.finish();

    for (_, cluster, _, _) in sides {
        rt.block_on(cluster.shutdown());
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = integrity
}
criterion_main!(benches);
