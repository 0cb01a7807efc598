//! Rate rules on real servers: put in force on every server only when all
//! accept them, kept across a restart, and holding a capped job to its
//! rate while another job runs free.

use std::sync::Arc;
use std::time::Instant;

use concerto_client::{FsClient, Identity};
use concerto_core::emulation::EmulationConfig;
use concerto_core::units::Bandwidth;
use concerto_core::{PolicyConfig, Time};
use concerto_proto::LayoutRequest;
use concerto_server::local::{LocalCluster, LocalClusterSpec};
use concerto_server::rules::parse_rules;
use concerto_server::server::{self, ServerConfig};

/// Job 7 at 10 MB/s on each server, with a small burst.
const CAP: &str = r#"
[[rules]]
name = "job7"
job = 7
bandwidth = "10MB/s"
burst = "256KiB"
"#;

fn spec() -> LocalClusterSpec {
    LocalClusterSpec {
        servers: 2,
        policy: PolicyConfig::Fifo(Default::default()),
        stripe_unit: 256 * 1024,
        throttle: Some(EmulationConfig {
            bandwidth: Bandwidth(200e6),
            latency: Time::from_micros(100),
            seek: Time::ZERO,
            segment: Time::ZERO,
            parallelism: 4,
        }),
        timeout_ms: 30_000,
        integrity: Default::default(),
    }
}

fn client(c: &LocalCluster, app: u32) -> FsClient {
    FsClient::new(c.cluster.clone(), Identity::new(app, 0), c.admin.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_apply_everywhere_or_nowhere_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let c = LocalCluster::start(dir.path(), spec()).await.unwrap();
    let admin = client(&c, 1);
    admin.set_rules(CAP).await.unwrap();
    for (_, text) in admin.rules().await.unwrap() {
        assert_eq!(parse_rules(&text).unwrap(), parse_rules(CAP).unwrap());
    }
    // A bad rule is refused by every server, and none changes.
    let e = admin
        .set_rules(&CAP.replace("10MB/s", "0MB/s"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("no server changed its rules"), "{e}");
    assert!(e.contains("server 0:") && e.contains("server 1:"), "{e}");
    assert!(e.contains("rules[0].bandwidth: must be > 0"), "{e}");
    for (_, text) in admin.rules().await.unwrap() {
        assert_eq!(parse_rules(&text).unwrap(), parse_rules(CAP).unwrap());
    }
    c.shutdown().await;
    // A server started again on the same data directory has them.
    let cfg = ServerConfig::data(
        dir.path().join("s1"),
        PolicyConfig::Fifo(Default::default()),
    );
    let key = cfg.admin_credential().unwrap();
    let s = server::start(cfg).await.unwrap();
    let conn = concerto_proto::connection::ServerConnection::connect(
        s.addr,
        std::time::Duration::from_secs(10),
        &key,
    )
    .await
    .unwrap();
    assert_eq!(
        parse_rules(&conn.rules().await.unwrap()).unwrap(),
        parse_rules(CAP).unwrap()
    );
    // A damaged rules file stops the server from starting, naming the file.
    s.shutdown().await;
    std::fs::write(
        dir.path().join("s1").join("rules.toml"),
        "[[rules]]\nname = 3\n",
    )
    .unwrap();
    let e = server::start(ServerConfig::data(
        dir.path().join("s1"),
        PolicyConfig::Fifo(Default::default()),
    ))
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("rules.toml: ") && e.contains("name"), "{e}");
}

/// Job 7 (capped at 10 MB/s per server, 20 MB/s on the two) and job 8
/// (free) each write 24 MiB with four writers at once. Job 7 cannot pass
/// its rate: its bytes are at most the bursts plus the rate times the
/// time it took (5% slack for the clocks) — a bound a slow machine only
/// loosens, so it fails only when the cap lets bytes through. Job 8 is not
/// held back by job 7's cap: by the servers' own account (time an
/// application waited while storage slots were free), the cap held job 7
/// and not job 8, whatever the machine's speed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_job_stays_under_its_rate_while_another_runs_free() {
    let dir = tempfile::tempdir().unwrap();
    let c = LocalCluster::start(dir.path(), spec()).await.unwrap();
    client(&c, 1).set_rules(CAP).await.unwrap();
    let total: u64 = 24 << 20;
    let run = |app: u32| {
        let fs = client(&c, app);
        async move {
            let f = Arc::new(
                fs.create(&format!("/job{app}"), LayoutRequest::default(), true)
                    .await
                    .unwrap(),
            );
            let start = Instant::now();
            let writers: Vec<_> = (0..4u64)
                .map(|w| {
                    let (fs, f) = (fs.clone(), f.clone());
                    tokio::spawn(async move {
                        let block = vec![app as u8; 1 << 20];
                        for k in 0..total / 4 / (1 << 20) {
                            let at = (w * total / 4) + k * (1 << 20);
                            fs.write(&f, at, &block).await.unwrap();
                        }
                    })
                })
                .collect();
            for w in writers {
                w.await.unwrap();
            }
            start.elapsed().as_secs_f64()
        }
    };
    let (capped_s, free_s) = tokio::join!(run(7), run(8));
    let rate = total as f64 / capped_s;
    eprintln!(
        "job 7: {rate:.0} B/s (cap 20 MB/s); job 8: {:.0} B/s",
        total as f64 / free_s
    );
    let bursts = 2.0 * (256 * 1024) as f64;
    assert!(
        total as f64 <= bursts + 20e6 * 1.05 * capped_s,
        "job 7 moved {total} bytes in {capped_s:.2} s: {rate:.0} B/s against a cap of 20 MB/s"
    );
    let stats: Vec<_> = client(&c, 1)
        .stats()
        .await
        .into_iter()
        .map(|s| s.unwrap())
        .collect();
    let held = |app: u32| -> f64 {
        stats
            .iter()
            .flat_map(|s| &s.apps)
            .filter(|a| a.app == app)
            .map(|a| a.held_s)
            .sum()
    };
    let (held7, held8) = (held(7), held(8));
    eprintln!("held by the policy: job 7 {held7:.3} s, job 8 {held8:.3} s");
    assert!(held7 > 0.1, "job 7 was held {held7} s: the cap did not act");
    assert!(
        held8 < held7 / 10.0,
        "job 8 was held {held8} s, job 7 {held7} s"
    );
    c.shutdown().await;
}
