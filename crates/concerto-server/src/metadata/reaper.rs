//! Removing the objects of removed files, off the client's path.
//!
//! An unlink (or a rename that replaces a file) records the file's data
//! servers in the `orphans` table in the same transaction that removes its
//! name, and answers. Once that transaction is committed, the reaper
//! gathers what a short while ([`GATHER`]) brings and sends each data
//! server one removal for many files (at most [`MAX_REMOVE`] objects), then
//! forgets the orphans it removed (durable with the next commit). So an
//! unlink is one round trip to the metadata server, a data server does one
//! directory flush for many objects, and after a crash the orphans still
//! recorded are removed again (removal is idempotent). Only committed
//! orphans are removed: a crash that loses an unlink loses nothing else
//! with it. A data server that does not answer keeps its orphans until it
//! does.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use concerto_proto::MAX_REMOVE;

use super::namespace;
use super::store::{Store, Wait};
use crate::members::{own_tags, Members};

/// How long the reaper gathers orphans before it removes them, so that
/// one removal per server covers many unlinks (the simulator's reaper
/// gathers as long).
const GATHER: Duration = Duration::from_nanos(concerto_core::server::REAPER_GATHER.as_nanos());
/// How long the reaper waits before it tries again when a server failed
/// (or looks again when no commit woke it).
const RETRY: Duration = Duration::from_secs(1);

/// Orphans removed and forgotten, but whose forgetting is not committed
/// yet (so the committed table still lists them): by the change number
/// that forgot them.
#[derive(Default)]
struct Forgotten(Vec<(u64, Vec<u64>)>, HashSet<u64>);

impl Forgotten {
    fn add(&mut self, change: u64, inodes: Vec<u64>) {
        self.1.extend(&inodes);
        self.0.push((change, inodes));
    }

    /// Drops what is durably forgotten now.
    fn settle(&mut self, durable: u64) {
        let (done, pending): (Vec<_>, Vec<_>) = std::mem::take(&mut self.0)
            .into_iter()
            .partition(|(change, _)| *change <= durable);
        for (_, inodes) in done {
            for i in inodes {
                self.1.remove(&i);
            }
        }
        self.0 = pending;
    }
}

pub(super) async fn run(
    store: Weak<Store>,
    members: Arc<Members>,
    mut stopped: watch::Receiver<bool>,
) {
    let Some(orphaned) = store.upgrade().map(|s| s.orphaned.clone()) else {
        return;
    };
    let mut forgotten = Forgotten::default();
    loop {
        tokio::select! {
            _ = orphaned.notified() => {
                tokio::select! {
                    _ = tokio::time::sleep(GATHER) => {}
                    _ = stopped.changed() => return,
                }
            }
            _ = tokio::time::sleep(RETRY) => {}
            _ = stopped.changed() => return,
        }
        while let Some(store) = store.upgrade() {
            if !reap_once(store, &members, &mut forgotten).await {
                break;
            }
        }
    }
}

/// Removes one batch of committed orphans; false when there was nothing
/// to do or nothing could be done now.
async fn reap_once(store: Arc<Store>, members: &Members, forgotten: &mut Forgotten) -> bool {
    let Some(map) = members.map() else {
        return false;
    };
    forgotten.settle(store.durable());
    let skip = forgotten.1.clone();
    let listed = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || {
            let read = store.committed()?;
            namespace::orphans(&read, MAX_REMOVE, |inode| skip.contains(&inode))
        })
        .await
    };
    let batch = match listed {
        Ok(Ok(batch)) if !batch.is_empty() => batch,
        Ok(Err(e)) => {
            eprintln!("concerto-server: cannot list the objects of removed files: {e}");
            return false;
        }
        _ => return false,
    };
    let mut by_server: HashMap<u32, Vec<u64>> = HashMap::new();
    for (inode, servers) in &batch {
        for &s in servers {
            by_server.entry(s).or_default().push(*inode);
        }
    }
    let outcomes = futures::future::join_all(by_server.into_iter().map(|(server, objects)| {
        let pool = &map.pool;
        async move {
            let result = async { pool.get(server).await?.remove_objects(own_tags(), objects).await }.await;
            if let Err(e) = &result {
                eprintln!("concerto-server: removing objects of removed files on server {server}: {e} (will retry)");
            }
            (server, result.is_ok())
        }
    }))
    .await;
    let failed: Vec<u32> = outcomes
        .into_iter()
        .filter(|(_, ok)| !ok)
        .map(|(s, _)| s)
        .collect();
    let done: Vec<u64> = batch
        .iter()
        .filter(|(_, servers)| !servers.iter().any(|s| failed.contains(s)))
        .map(|(inode, _)| *inode)
        .collect();
    if done.is_empty() {
        return false;
    }
    let forgot = {
        let done = done.clone();
        tokio::task::spawn_blocking(move || {
            store.change(Wait::Yes, false, |ops, _| ops.forget_orphans(&done))
        })
        .await
    };
    match forgot {
        Ok(Ok(((), change))) => forgotten.add(change, done),
        Ok(Err(e)) => eprintln!("concerto-server: cannot forget removed files' objects: {e}"),
        Err(_) => return false,
    }
    failed.is_empty()
}
