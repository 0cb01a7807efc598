//! Writes on their way to the servers after the caller was told they are
//! done (write-behind, as NFS clients and GlusterFS's write-behind do):
//! what a FUSE mount gives `write(2)` so that a program's next write does
//! not wait for the last one's round trip — and, above all, so that the
//! kernel's lock on a file, which it holds across a write that extends the
//! file, is held for a moment rather than for a server's service time:
//! the writes of many processes to one shared file then run together.
//!
//! The rules that keep it a file system: per file, the ranges in flight
//! are known; a later write that overlaps an earlier one waits for it (the
//! servers see them in program order); a read of a range waits for the
//! writes in flight over it, and an fsync, a close or a stat for all of
//! the file's (so this client always reads what it wrote); and a write's
//! error is returned by the next write, fsync or close of the file. What
//! may be in flight is bounded (bytes, per client); past it a write waits
//! for room. Other clients see a write once it is sent (milliseconds), and
//! at once after the writer's fsync or close.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use concerto_proto::ErrorKind;

use crate::ClientError;

/// One write in flight.
struct InFlight {
    id: u64,
    start: u64,
    end: u64,
    done: watch::Receiver<bool>,
}

#[derive(Default)]
struct FilePending {
    writes: Vec<InFlight>,
    /// The first error of a write already answered, for the next call.
    failed: Option<(Option<ErrorKind>, String)>,
}

pub(crate) struct Pending {
    files: Mutex<HashMap<u64, FilePending>>,
    next_id: Mutex<u64>,
    /// Bytes that may be in flight, in KiB (the semaphore's unit).
    budget: Arc<Semaphore>,
    budget_kib: u32,
}

/// A write registered as in flight: what it must wait for first, and how
/// it reports its end.
pub(crate) struct Registered {
    pub inode: u64,
    pub id: u64,
    pub earlier: Vec<watch::Receiver<bool>>,
    pub done: watch::Sender<bool>,
    /// The room it holds in the client's bound, given back when it ends.
    _room: Option<OwnedSemaphorePermit>,
}

fn overlaps(w: &InFlight, start: u64, end: u64) -> bool {
    w.start < end && start < w.end
}

/// Waits until every receiver says done (or its sender is gone).
async fn all_done(mut waits: Vec<watch::Receiver<bool>>) {
    for w in &mut waits {
        let _ = w.wait_for(|done| *done).await;
    }
}

impl Pending {
    pub fn new(budget: u64) -> Pending {
        let kib = (budget / 1024).clamp(1, Semaphore::MAX_PERMITS as u64) as u32;
        Pending {
            files: Mutex::new(HashMap::new()),
            next_id: Mutex::new(0),
            budget: Arc::new(Semaphore::new(kib as usize)),
            budget_kib: kib,
        }
    }

    fn files(&self) -> std::sync::MutexGuard<'_, HashMap<u64, FilePending>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the file has writes in flight, or an error not yet told.
    pub fn holds(&self, inode: u64) -> bool {
        self.files().contains_key(&inode)
    }

    /// The error a write of the file met after it was answered, once.
    pub fn take_failure(&self, inode: u64) -> Result<(), ClientError> {
        let mut files = self.files();
        let Some(file) = files.get_mut(&inode) else {
            return Ok(());
        };
        let failed = file.failed.take();
        if file.writes.is_empty() {
            files.remove(&inode);
        }
        match failed {
            Some((kind, message)) => Err(deferred(kind, message)),
            None => Ok(()),
        }
    }

    /// Room for `bytes` in the client's bound, waiting for it.
    pub async fn room(&self, bytes: u64) -> Result<OwnedSemaphorePermit, ClientError> {
        let cost = ((bytes / 1024) as u32 + 1).min(self.budget_kib);
        self.budget
            .clone()
            .acquire_many_owned(cost)
            .await
            .map_err(|_| ClientError::Invalid("the client is closing".into()))
    }

    /// Registers a write of `start..end` of the file as in flight, behind
    /// the writes in flight it overlaps, holding `room` until it ends.
    pub fn register_now(
        &self,
        inode: u64,
        start: u64,
        end: u64,
        room: Option<OwnedSemaphorePermit>,
    ) -> Registered {
        let id = {
            let mut n = self.next_id.lock().unwrap_or_else(|p| p.into_inner());
            *n += 1;
            *n
        };
        let (done, rx) = watch::channel(false);
        let mut files = self.files();
        let file = files.entry(inode).or_default();
        let earlier = file
            .writes
            .iter()
            .filter(|w| overlaps(w, start, end))
            .map(|w| w.done.clone())
            .collect();
        file.writes.push(InFlight {
            id,
            start,
            end,
            done: rx,
        });
        Registered {
            inode,
            id,
            earlier,
            done,
            _room: room,
        }
    }

    /// A write failed before it could be sent: the next call says so.
    pub fn failed(&self, inode: u64, e: ClientError) {
        self.files()
            .entry(inode)
            .or_default()
            .failed
            .get_or_insert((e.kind(), e.to_string()));
    }

    /// A registered write ended; its error (if any) waits for the next call.
    pub fn finish(&self, write: Registered, result: Result<(), ClientError>) {
        let mut files = self.files();
        if let Some(file) = files.get_mut(&write.inode) {
            file.writes.retain(|w| w.id != write.id);
            if let Err(e) = result {
                file.failed.get_or_insert((e.kind(), e.to_string()));
            }
            if file.writes.is_empty() && file.failed.is_none() {
                files.remove(&write.inode);
            }
        }
        let _ = write.done.send(true);
    }

    /// Waits for the file's writes in flight over `start..end` (all of
    /// them when `None`); then the error one of them met, if any.
    pub async fn settle(&self, inode: u64, range: Option<(u64, u64)>) -> Result<(), ClientError> {
        let waits: Vec<watch::Receiver<bool>> = {
            let files = self.files();
            files.get(&inode).map_or_else(Vec::new, |f| {
                f.writes
                    .iter()
                    .filter(|w| range.is_none_or(|(s, e)| overlaps(w, s, e)))
                    .map(|w| w.done.clone())
                    .collect()
            })
        };
        all_done(waits).await;
        self.take_failure(inode)
    }

    /// Waits for the writes a registered one must follow.
    pub async fn wait_earlier(earlier: Vec<watch::Receiver<bool>>) {
        all_done(earlier).await
    }
}

/// An error a write met after it was answered, as the call that reports it returns it.
fn deferred(kind: Option<ErrorKind>, message: String) -> ClientError {
    ClientError::Deferred { kind, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Pending {
        async fn register(
            &self,
            inode: u64,
            start: u64,
            end: u64,
            bytes: u64,
        ) -> Result<Registered, ClientError> {
            let room = self.room(bytes).await?;
            Ok(self.register_now(inode, start, end, Some(room)))
        }
    }

    #[tokio::test]
    async fn overlapping_writes_follow_each_other_and_errors_wait_for_the_next_call() {
        let p = Pending::new(1 << 20);
        let a = p.register(1, 0, 100, 100).await.unwrap();
        let b = p.register(1, 200, 300, 100).await.unwrap();
        let c = p.register(1, 50, 250, 200).await.unwrap();
        assert!(a.earlier.is_empty() && b.earlier.is_empty());
        assert_eq!(c.earlier.len(), 2, "the third overlaps both");
        let other = p.register(2, 0, 100, 100).await.unwrap();
        assert!(other.earlier.is_empty(), "another file's writes are apart");
        p.finish(a, Ok(()));
        p.finish(b, Err(ClientError::Invalid("disk on fire".into())));
        Pending::wait_earlier(c.earlier.clone()).await;
        p.finish(c, Ok(()));
        let e = p.settle(1, None).await.unwrap_err();
        assert_eq!(e.to_string(), "an earlier write failed: disk on fire");
        p.settle(1, None).await.unwrap();
        p.finish(other, Ok(()));
        assert!(p.files().is_empty(), "nothing kept once settled");
    }

    #[tokio::test]
    async fn writes_wait_for_room_in_the_budget() {
        let p = Arc::new(Pending::new(8 * 1024));
        let big = p.register(1, 0, 6 * 1024, 6 * 1024).await.unwrap();
        let waiting = {
            let p = p.clone();
            tokio::spawn(async move {
                p.register(1, 1 << 20, (1 << 20) + 6 * 1024, 6 * 1024)
                    .await
                    .map(|r| r.id)
            })
        };
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "no room for a second 6 KiB in 8 KiB"
        );
        p.finish(big, Ok(()));
        assert!(waiting.await.unwrap().is_ok());
    }
}
