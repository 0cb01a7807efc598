//! Closes of descriptors open for writing, told to the metadata server a
//! few milliseconds' worth at a time.
//!
//! A close is what lets the metadata service know a file's size without
//! asking the data servers (see the server's `metadata::sizes`), so it is
//! worth telling, but nobody waits for it: `close(2)` returns once the data
//! is durable. Gathering the closes of [`GATHER`] into one request spares
//! the metadata server a request per file in a loop that creates many. A
//! close that never arrives (the client dies, the request fails) costs
//! nothing but speed: the service lets go of what a connection held when
//! the connection ends, and asks the data servers for the sizes meanwhile.

use std::sync::{Mutex, Weak};
use std::time::Duration;

use tokio::sync::mpsc;

use concerto_proto::{Closed, MetaRequest, MAX_CLOSES};

use crate::{FsClient, Identity, Shared};

/// How long a close waits for others to travel with.
const GATHER: Duration = Duration::from_millis(2);

#[derive(Default)]
pub(crate) struct Closer {
    queue: Mutex<Option<mpsc::UnboundedSender<Closed>>>,
}

impl Closer {
    /// Queues a close; the first starts the task that sends them (on the
    /// caller's runtime: call it from inside one).
    pub fn queue(&self, shared: Weak<Shared>, identity: Identity, closed: Closed) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let sender = queue.get_or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(send_closes(shared, identity, rx));
            tx
        });
        let _ = sender.send(closed);
    }
}

async fn send_closes(
    shared: Weak<Shared>,
    identity: Identity,
    mut rx: mpsc::UnboundedReceiver<Closed>,
) {
    while let Some(first) = rx.recv().await {
        let mut files = vec![first];
        let gather = tokio::time::sleep(GATHER);
        tokio::pin!(gather);
        while files.len() < MAX_CLOSES {
            tokio::select! {
                next = rx.recv() => match next {
                    Some(c) => files.push(c),
                    None => break,
                },
                _ = &mut gather => break,
            }
        }
        // The client is gone: its connections went with it, and with them
        // what they held open.
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let client = FsClient {
            shared,
            identity,
            user: None,
        };
        // A failure is not reported: it costs nothing but speed (above),
        // and the usual one is a cluster taken down within the gathering's
        // milliseconds of a program's last close (`concerto calibrate`
        // printed it on every successful run). A metadata server that is
        // really gone fails the program's next call, which says so.
        let _ = client.meta(MetaRequest::Close { files }).await;
    }
}
