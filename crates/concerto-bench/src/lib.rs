//! Benchmarks live in `benches/`; this is what several of them share.

use std::path::Path;

use concerto_client::{FsClient, Identity};
use concerto_core::PolicyConfig;
use concerto_server::local::{LocalCluster, LocalClusterSpec};
use concerto_server::server::Integrity;

/// A runtime for the benchmarks' clients and in-process servers.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Four unthrottled FIFO servers on loopback under `dir`, 256 KiB stripes
/// (so a 1 MiB call goes to all four at once), and a client of application 1.
pub fn loopback_cluster(rt: &tokio::runtime::Runtime, dir: &Path) -> (LocalCluster, FsClient) {
    loopback_cluster_with(rt, dir, Integrity::default())
}

/// The same, with the servers' `integrity` setting (`Always`: every
/// frame carries a MAC even on loopback).
pub fn loopback_cluster_with(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    integrity: Integrity,
) -> (LocalCluster, FsClient) {
    let spec = LocalClusterSpec {
        servers: 4,
        policy: PolicyConfig::Fifo(Default::default()),
        stripe_unit: 256 * 1024,
        throttle: None,
        timeout_ms: 30_000,
        integrity,
    };
    let cluster = rt
        .block_on(LocalCluster::start(dir, spec))
        .expect("cluster");
    let client = FsClient::new(
        cluster.cluster.clone(),
        Identity::new(1, 0),
        cluster.admin.clone(),
    );
    (cluster, client)
}
