//! Write-behind on real bytes: core's coalescing policy
//! ([`concerto_core::client::write_behind`]: what a writer holds, how its
//! adjacent writes merge into stripe-aligned requests, when they must go)
//! executed with the bytes. The simulator's client runs the same policy.
//!
//! A write the policy holds is answered at once; its bytes wait in the
//! writer's run (one per open handle and file) until the run reaches the
//! flush size, comes of age, or something needs it sent: a read of its
//! range, a write through or by another handle over it, an fsync, a
//! close, a stat or a truncation ([`FsClient::settle`]). What is sent goes
//! through the in-flight ledger (`pending`): later overlapping sends wait
//! for it, and its error is the next call's. Each file's held writes are
//! changed under one lock, taken after the bytes found room in the
//! client's write-behind budget, so sends register in the order the
//! policy made them and no task waits for room while holding any.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio::sync::OwnedSemaphorePermit;

use concerto_core::client::write_behind::{FileWrites, Flush, WriteBehindConfig};
use concerto_core::Extent;

use concerto_proto::auth::Principal;

use crate::identity::Identity;
use crate::readahead::now;
use crate::{ClientError, FileHandle, FsClient};

/// Who wrote a run: its handle, and the identity and user it was written as.
#[derive(Clone)]
struct Writer {
    file: FileHandle,
    identity: Identity,
    user: Option<Arc<Principal>>,
}

/// A run's bytes: from `start`, and the budget they hold.
struct RunBytes {
    start: u64,
    bytes: BytesMut,
    room: Option<OwnedSemaphorePermit>,
    writer: Writer,
}

/// What one file's handles hold.
struct FileHeld {
    policy: FileWrites<u64>,
    runs: HashMap<u64, RunBytes>,
    /// Whether a task waits to send the runs that come of age.
    timer: bool,
}

/// What the client's handles hold unsent, per file.
pub(crate) struct Held {
    config: WriteBehindConfig,
    files: Mutex<HashMap<u64, Arc<tokio::sync::Mutex<FileHeld>>>>,
}

impl Default for Held {
    fn default() -> Held {
        Held {
            config: WriteBehindConfig::default(),
            files: Mutex::new(HashMap::new()),
        }
    }
}

impl Held {
    /// What a client bounded to `bound` bytes holds by (the policy's
    /// sending size fits the bound: `WriteBehindConfig::bounded`).
    pub(crate) fn bounded(bound: u64) -> Held {
        Held {
            config: WriteBehindConfig::bounded(bound),
            files: Mutex::new(HashMap::new()),
        }
    }

    fn files(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<tokio::sync::Mutex<FileHeld>>>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the file holds, if it holds anything (or a task looks at it).
    fn file(&self, inode: u64) -> Option<Arc<tokio::sync::Mutex<FileHeld>>> {
        self.files().get(&inode).cloned()
    }

    /// What the file holds, made when nothing is.
    fn file_or_new(&self, inode: u64) -> Arc<tokio::sync::Mutex<FileHeld>> {
        let config = self.config;
        self.files()
            .entry(inode)
            .or_insert_with(|| {
                Arc::new(tokio::sync::Mutex::new(FileHeld {
                    policy: FileWrites::new(config),
                    runs: HashMap::new(),
                    timer: false,
                }))
            })
            .clone()
    }

    /// Forgets a file that holds nothing and that no task is looking at.
    fn tidy(&self, inode: u64) {
        let mut files = self.files();
        if let Some(f) = files.get(&inode) {
            let idle = Arc::strong_count(f) == 1
                && f.try_lock().is_ok_and(|h| h.policy.is_idle() && !h.timer);
            if idle {
                files.remove(&inode);
            }
        }
    }

    /// Whether the file holds unsent writes.
    pub(crate) fn holds(&self, inode: u64) -> bool {
        self.file(inode)
            .is_some_and(|f| f.try_lock().map_or(true, |h| !h.policy.is_empty()))
    }
}

impl FsClient {
    /// Writes `data` at `offset` behind: held and coalesced with the
    /// handle's adjacent writes (see the module), sent once the policy
    /// says so. Waits for room when the client's bound on what it holds
    /// and has in flight is reached (`with_write_behind`); returns the
    /// error an earlier write of the file met, if one did.
    pub async fn write_behind(
        &self,
        file: &FileHandle,
        offset: u64,
        data: Bytes,
    ) -> Result<(), ClientError> {
        if !file.writable {
            return Err(ClientError::Invalid(format!(
                "{}: opened for reading only",
                file.path
            )));
        }
        let pending = &self.shared.pending;
        pending.take_failure(file.inode)?;
        let len = data.len() as u64;
        let room = pending.room(len).await?;
        let held = self.shared.held.file_or_new(file.inode);
        let mut h = held.lock().await;
        let plan = h
            .policy
            .write(file.handle, offset, len, now(), &file.layout);
        for flush in plan.before {
            self.send_run(&mut h, flush);
        }
        let writer = Writer {
            file: file.clone(),
            identity: self.identity,
            user: self.user.clone(),
        };
        match h.runs.get_mut(&file.handle) {
            Some(run) => {
                let at = (offset - run.start) as usize;
                let end = at + data.len();
                if run.bytes.len() < end {
                    run.bytes.resize(end, 0);
                }
                run.bytes[at..end].copy_from_slice(&data);
                match &mut run.room {
                    Some(r) => r.merge(room),
                    None => run.room = Some(room),
                }
            }
            None => {
                h.runs.insert(
                    file.handle,
                    RunBytes {
                        start: offset,
                        bytes: BytesMut::from(data),
                        room: Some(room),
                        writer,
                    },
                );
            }
        }
        if let Some(flush) = plan.after {
            self.send_run(&mut h, flush);
        }
        if !h.policy.is_empty() && !h.timer {
            h.timer = true;
            tokio::spawn(self.clone().send_when_due(file.inode, held.clone()));
        }
        Ok(())
    }

    /// Sends a flushed part of a run: registered in flight now (so later
    /// overlapping sends follow it), sent by a task.
    fn send_run(&self, h: &mut FileHeld, flush: Flush<u64>) {
        let Some(run) = h.runs.get_mut(&flush.key) else {
            return;
        };
        debug_assert_eq!(run.start, flush.extent.offset);
        let n = flush.extent.len as usize;
        let bytes = run.bytes.split_to(n.min(run.bytes.len())).freeze();
        run.start += bytes.len() as u64;
        let writer = run.writer.clone();
        let room = if run.bytes.is_empty() {
            h.runs.remove(&flush.key).and_then(|r| r.room)
        } else {
            // The part sent takes its share of the run's room with it.
            let kib = (bytes.len() / 1024) as u32;
            run.room.as_mut().and_then(|r| r.split(kib as usize))
        };
        let client = FsClient {
            shared: self.shared.clone(),
            identity: writer.identity,
            user: writer.user,
        };
        let extent = [Extent::new(flush.extent.offset, bytes.len() as u64)];
        let prepared = match client.prepare_write(&writer.file, &extent, &bytes) {
            Ok(p) => p,
            Err(e) => {
                self.shared.pending.failed(writer.file.inode, e);
                return;
            }
        };
        let registered = self.shared.pending.register_now(
            writer.file.inode,
            extent[0].offset,
            extent[0].end(),
            room,
        );
        tokio::spawn(async move {
            crate::pending::Pending::wait_earlier(registered.earlier.clone()).await;
            let result = client.send_write(prepared).await;
            client.shared.pending.finish(registered, result);
        });
    }

    /// Sends each run of the file as it comes of age, while it holds any.
    async fn send_when_due(self, inode: u64, held: Arc<tokio::sync::Mutex<FileHeld>>) {
        loop {
            let due = {
                let mut h = held.lock().await;
                let due = h.policy.next_due();
                if due.is_none() {
                    h.timer = false;
                }
                due
            };
            let Some(due) = due else { break };
            let wait = due.saturating_sub(now());
            tokio::time::sleep(std::time::Duration::from_nanos(wait.as_nanos())).await;
            let mut h = held.lock().await;
            for flush in h.policy.due(now()) {
                self.send_run(&mut h, flush);
            }
        }
        drop(held);
        self.shared.held.tidy(inode);
    }

    /// Sends everything this client holds of `file`'s writes and waits for
    /// its writes in flight: what an MPI-IO collective call does first, so
    /// that the other ranks' agents read what this rank wrote. Returns the
    /// error one of them met, if any.
    pub async fn settle_writes(&self, file: &FileHandle) -> Result<(), ClientError> {
        self.settle(file.inode, None).await
    }

    /// Sends what the file holds over `range` (all of it when `None`),
    /// then waits for its writes in flight there: what a read, a stat, a
    /// truncation, an fsync or a close does first. Returns the error one
    /// of them met, if any.
    pub(crate) async fn settle(
        &self,
        inode: u64,
        range: Option<(u64, u64)>,
    ) -> Result<(), ClientError> {
        if let Some(held) = self.shared.held.file(inode) {
            let mut h = held.lock().await;
            for flush in h.policy.flush(range) {
                self.send_run(&mut h, flush);
            }
        }
        self.shared.pending.settle(inode, range).await
    }
}
