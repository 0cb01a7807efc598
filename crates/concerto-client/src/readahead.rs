//! Read-ahead on real bytes: core's policy
//! ([`concerto_core::client::readahead`]: when a handle's reads are
//! sequential, how far ahead, in which chunks, and when fetched data is
//! stale), executed with real fetches. One place, used by the library's
//! `read` and so by the FUSE mount and MPI-IO alike; the simulator's
//! client runs the same policy.
//!
//! Each chunk's fetch is a task whose bytes arrive on a channel; a read
//! waits for the chunks it is served from. The file's write generation
//! (this client's writes and truncations, see `open_files`) tells the
//! policy when what was fetched is stale. What is held is bounded per
//! client ([`BUDGET`]): past it, reads go without read-ahead.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use concerto_core::client::readahead::ReadAhead as Policy;
use concerto_core::Time;

use crate::{ClientError, FileHandle, FsClient};

/// What one client may hold read ahead, over all its handles.
pub const BUDGET: u64 = 128 << 20;

/// A chunk being fetched or fetched: its bytes (short at the end of the
/// file) or the error, when done.
type Fetched = Option<Result<Bytes, String>>;

/// What stands for a chunk's fetch: where its bytes arrive, and the room
/// it takes in the client's budget (given back when the chunk is dropped).
struct Fetch {
    done: watch::Receiver<Fetched>,
    _room: OwnedSemaphorePermit,
}

/// A handle's read-ahead.
#[derive(Default)]
pub struct ReadAhead {
    policy: Mutex<Policy<Fetch>>,
}

impl std::fmt::Debug for ReadAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadAhead")
    }
}

impl ReadAhead {
    fn policy(&self) -> std::sync::MutexGuard<'_, Policy<Fetch>> {
        self.policy.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The policies' clock: monotonic time since the client library's first
/// use of it.
pub(crate) fn now() -> Time {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    Time::from_nanos(epoch.elapsed().as_nanos() as u64)
}

/// The client's bound on what is read ahead.
pub(crate) fn budget() -> Arc<Semaphore> {
    Arc::new(Semaphore::new((BUDGET >> 10) as usize))
}

impl FsClient {
    /// Serves `offset..offset+len` from what `file` read ahead, as far as
    /// it holds it from `offset` on, and reads further ahead when the read
    /// is sequential. Returns the bytes served (from `offset`, possibly
    /// fewer than `len`, possibly none): the rest is the caller's to read.
    /// A read inside one fetched chunk is a slice of it (no copy).
    pub(crate) async fn read_ahead(
        &self,
        file: &FileHandle,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ClientError> {
        let generation = self.shared.files.generation(file.inode);
        let waits: Vec<(u64, u64, watch::Receiver<Fetched>)> = {
            let mut policy = file.readahead.policy();
            let fetch = policy.read(offset, len, now(), generation);
            let waits = policy
                .serving(offset, len)
                .map(|c| (c.start, c.len, c.fetch.done.clone()))
                .collect();
            if fetch {
                self.fetch_ahead(&mut policy, file, offset + len, generation);
            }
            waits
        };
        // The chunks in order from `offset`, as long as they join up.
        let mut pieces: Vec<Bytes> = Vec::new();
        let mut at = offset;
        for (start, chunk_len, mut done) in waits {
            if start > at {
                break;
            }
            let fetched = match done.wait_for(|d| d.is_some()).await {
                Ok(d) => d.clone(),
                Err(_) => None,
            };
            let Some(Ok(bytes)) = fetched else {
                break;
            };
            let from = (at - start) as usize;
            let upto = ((offset + len).min(start + chunk_len) - start) as usize;
            let have = bytes.len().min(upto);
            if have > from {
                pieces.push(bytes.slice(from..have));
                at = start + have as u64;
            }
            // A short chunk is the end of what the servers held then.
            if have < upto || at >= offset + len {
                break;
            }
        }
        Ok(match pieces.len() {
            0 => Bytes::new(),
            1 => pieces.remove(0),
            _ => {
                let mut out = BytesMut::with_capacity((at - offset) as usize);
                for p in &pieces {
                    out.extend_from_slice(p);
                }
                out.freeze()
            }
        })
    }

    /// Where a fetch of this handle found the file's data to end, if one did.
    pub(crate) fn end_seen(&self, file: &FileHandle) -> Option<u64> {
        file.readahead.policy().end_seen()
    }

    /// A read found data past where a fetch saw the file end: it grew.
    pub(crate) fn grew(&self, file: &FileHandle) {
        file.readahead.policy().grew()
    }

    /// Starts the fetches the policy asks for after `from`, each a task,
    /// as long as the client's budget has room.
    fn fetch_ahead(
        &self,
        policy: &mut Policy<Fetch>,
        file: &FileHandle,
        from: u64,
        generation: u64,
    ) {
        policy.fetch_ahead(from, now(), generation, &file.layout, |chunk| {
            let room = self
                .shared
                .readahead_budget
                .clone()
                .try_acquire_many_owned((chunk.len >> 10) as u32)
                .ok()?;
            let (tx, done) = watch::channel(None);
            let (client, file) = (self.clone(), file.clone());
            tokio::spawn(async move {
                let got = client
                    .read_extents(&file, &[chunk])
                    .await
                    .map(|(mut bytes, complete)| {
                        if !complete {
                            // Some object ended early (a hole, or the end
                            // of the file): the bytes up to the last one
                            // written are the file's for sure; past it, the
                            // reader reads for itself and learns the size.
                            let keep = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                            bytes.truncate(keep);
                        }
                        bytes
                    })
                    .map_err(|e| e.to_string());
                if let Ok(bytes) = &got {
                    file.readahead
                        .policy()
                        .fetched(chunk.offset, chunk.len, bytes.len() as u64);
                }
                let _ = tx.send(Some(got));
            });
            Some(Fetch { done, _room: room })
        });
    }
}
