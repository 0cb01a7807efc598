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
