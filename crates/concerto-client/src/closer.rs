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
//!
//! A close says how far its descriptor wrote, and the service takes that
//! as the least size the file has; a truncate this client makes after it
//! must therefore reach the service after it, or the size the close
//! carried (of bytes the truncate cut) outlives the cut. The metadata
//! service serves a connection's requests concurrently, so the order is
//! the client's to keep: [`Closer::told`] waits until every close queued
//! before it was answered, and [`FsClient::truncate`] waits on it.

use std::sync::{Mutex, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use concerto_proto::{Closed, MetaRequest, MAX_CLOSES};

use crate::{FsClient, Identity, Shared};

/// How long a close waits for others to travel with.
const GATHER: Duration = Duration::from_millis(2);

pub(crate) struct Closer {
    /// The sending task's queue, and how many closes were put in it.
    queue: Mutex<(Option<mpsc::UnboundedSender<Closed>>, u64)>,
    /// How many closes were answered (or failed): one task sends them, in
    /// the order they were queued, one batch at a time.
    answered: watch::Sender<u64>,
}

impl Default for Closer {
    fn default() -> Closer {
        Closer {
            queue: Mutex::default(),
            answered: watch::Sender::new(0),
        }
    }
}

impl Closer {
    /// Queues a close; the first starts the task that sends them (on the
    /// caller's runtime: call it from inside one).
    pub fn queue(&self, shared: Weak<Shared>, identity: Identity, closed: Closed) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let (sender, queued) = &mut *queue;
        let sender = sender.get_or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(send_closes(shared, identity, rx));
            tx
        });
        if sender.send(closed).is_ok() {
            *queued += 1;
        }
    }

    /// Returns once every close queued before the call was answered by the
    /// metadata service (or failed). Later closes are not waited for, so a
    /// stream of them never holds a caller up for more than one batch.
    pub async fn told(&self) {
        let queued = self.queue.lock().unwrap_or_else(|p| p.into_inner()).1;
        let mut answered = self.answered.subscribe();
        // An error: the sender is gone with the client (nothing to wait for).
        let _ = answered.wait_for(|&n| n >= queued).await;
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
        let told = files.len() as u64;
        let _ = client.meta(MetaRequest::Close { files }).await;
        client.shared.closer.answered.send_modify(|n| *n += told);
    }
}
