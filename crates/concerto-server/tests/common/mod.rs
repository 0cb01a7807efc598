//! What several of the server's integration tests share.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `ready` every 10 ms until it holds; panics naming `what` after
/// 10 s. For what the servers do in the background (the metadata service
/// removing a removed file's objects, say): the test waits on the
/// condition, never on a fixed sleep.
pub async fn eventually<F: Future<Output = bool>>(what: &str, mut ready: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready().await {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
