//! The mount's integration tests, one binary (each file a module, what it
//! proves in its opening comment): the client library, the server and
//! tokio linked once rather than once per file (docs/contributing.md).

mod fuse_mount;
mod requests;
mod two_nodes;

/// The runtime each test's cluster and mount run on.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A cluster started in `root` and its admin client, acting as application 1.
fn cluster_with_admin(
    rt: &tokio::runtime::Runtime,
    root: &std::path::Path,
    spec: concerto_server::local::LocalClusterSpec,
) -> (
    concerto_server::local::LocalCluster,
    concerto_client::FsClient,
) {
    let cluster = rt
        .block_on(concerto_server::local::LocalCluster::start(root, spec))
        .unwrap();
    let admin = concerto_client::FsClient::new(
        cluster.cluster.clone(),
        concerto_client::Identity::new(1, 0),
        cluster.admin.clone(),
    );
    (cluster, admin)
}

/// Reads at `at` until `buf` is full or the file ends; the bytes read.
fn read_at(f: &std::fs::File, buf: &mut [u8], at: u64) -> usize {
    use std::os::unix::fs::FileExt;
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], at + n as u64).unwrap() {
            0 => break,
            k => n += k,
        }
    }
    n
}
