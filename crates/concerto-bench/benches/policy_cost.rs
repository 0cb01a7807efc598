//! What scheduling costs on the real file system, measured so that drift on
//! a shared machine cancels: the same 1 MiB write workload under FIFO,
//! coordinated and SFQ(D)+, switched live on the same four servers, in
//! interleaved rounds (each round runs every policy once, in a rotating
//! order). Reported per policy: the median throughput over the rounds, and
//! the median of the per-round ratios to FIFO (paired, so a slow minute
//! hurts both sides of a ratio alike).
//!
//! Not a criterion benchmark: criterion measures one function at a time,
//! and running the policies one after the other is what lets drift in.
//! `cargo bench -p concerto-bench --bench policy_cost [-- --rounds N]` (41 by default).

use std::time::Instant;

use concerto_proto::LayoutRequest;

const MIB: u64 = 1 << 20;
/// Bytes one measurement writes: 64 calls of 1 MiB.
const FILE: u64 = 64 * MIB;
const POLICIES: [&str; 3] = ["fifo", "coordinated", "sfq-d-plus"];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    // `cargo bench` passes its own flags (and criterion's, when run with
    // the other benchmarks); only `--rounds N` is ours.
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args
        .windows(2)
        .find(|w| w[0] == "--rounds")
        .map(|w| match w[1].parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("policy_cost: --rounds {}: not a whole number > 0", w[1]);
                std::process::exit(2);
            }
        })
        .unwrap_or(41);
    let rt = concerto_bench::runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    let (cluster, client) = concerto_bench::loopback_cluster(&rt, &dir.path().join("cluster"));
    let file = rt
        .block_on(client.create("/cost", LayoutRequest::default(), true))
        .expect("create");
    let block = vec![7u8; MIB as usize];
    let measure = |policy: &str| -> f64 {
        rt.block_on(async {
            client
                .set_policy(&format!("kind = \"{policy}\""))
                .await
                .expect("set policy");
            let start = Instant::now();
            for k in 0..FILE / MIB {
                client.write(&file, k * MIB, &block).await.expect("write");
            }
            FILE as f64 / start.elapsed().as_secs_f64()
        })
    };
    // Warm-up: the object files exist and the page cache holds them.
    for p in POLICIES {
        measure(p);
    }
    let mut speeds: Vec<Vec<f64>> = vec![Vec::new(); POLICIES.len()];
    for round in 0..rounds {
        for k in 0..POLICIES.len() {
            let i = (round + k) % POLICIES.len();
            speeds[i].push(measure(POLICIES[i]));
        }
    }
    println!(
        "policy_cost: {rounds} interleaved rounds of {} MiB of 1 MiB writes per policy, 4 servers",
        FILE / MIB
    );
    println!(
        "{:<12} {:>16} {:>22}",
        "policy", "median MiB/s", "median ratio to fifo"
    );
    for (i, p) in POLICIES.iter().enumerate() {
        let ratios: Vec<f64> = speeds[i]
            .iter()
            .zip(&speeds[0])
            .map(|(s, f)| s / f)
            .collect();
        println!(
            "{:<12} {:>16.0} {:>22.3}",
            p,
            median(speeds[i].clone()) / MIB as f64,
            median(ratios)
        );
    }
    rt.block_on(cluster.shutdown());
}
