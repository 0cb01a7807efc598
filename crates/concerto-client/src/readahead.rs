//! Read-ahead: a handle read sequentially fetches what comes next before
//! it is asked for, so that a program reading a file from start to end
//! keeps every server of the layout busy instead of waiting a round trip
//! per read. One place, used by the library's `read` and so by the FUSE
//! mount (and MPI-IO) alike.
//!
//! How: each handle remembers where its last read ended. A read that starts
//! there is sequential; the next `window` bytes are then fetched in chunks
//! of whole stripes (each chunk one request per server, all at once), the
//! window doubling from [`FIRST_WINDOW`] up to [`MAX_WINDOW`] while the
//! reads stay sequential. Any other read drops what was fetched and starts
//! over. Where a fetch finds the file's data to end, fetching stops, and a
//! read from there on first asks the file's size (one metadata request
//! rather than one per server) until the file is seen to have grown.
//!
//! Coherence, as NFS's close-to-open: what was read ahead is served only to
//! the handle that fetched it, for at most [`MAX_AGE`], and never after this
//! client wrote to or truncated the file (a counter per file says so). A
//! reader therefore sees another client's writes once they are on the
//! servers, except in data it fetched in the last second; opening the file
//! again (a new handle) always sees them. What is held is bounded per
//! client ([`BUDGET`]): past it, reads go without read-ahead.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use concerto_core::{Extent, StripeLayout};

use crate::{ClientError, FileHandle, FsClient};

/// The window after the first sequential read.
pub const FIRST_WINDOW: u64 = 2 << 20;
/// The largest window.
pub const MAX_WINDOW: u64 = 16 << 20;
/// How long fetched data may be served.
pub const MAX_AGE: Duration = Duration::from_secs(1);
/// What one client may hold read ahead, over all its handles.
pub const BUDGET: u64 = 128 << 20;

/// A chunk being fetched or fetched: its bytes (short at the end of the
/// file) or the error, when done.
type Fetched = Option<Result<Bytes, String>>;

struct Chunk {
    start: u64,
    len: u64,
    /// The file's write counter when the fetch began.
    generation: u64,
    began: Instant,
    done: watch::Receiver<Fetched>,
    _room: OwnedSemaphorePermit,
}

impl Chunk {
    fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// A handle's read-ahead.
#[derive(Default)]
pub struct ReadAhead {
    state: Mutex<State>,
}

impl std::fmt::Debug for ReadAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadAhead")
    }
}

#[derive(Default)]
struct State {
    /// Where the last read ended.
    next: u64,
    window: u64,
    chunks: VecDeque<Chunk>,
    /// Where a fetch found the file's data to end: nothing is fetched from
    /// there on, until a read asks past it (the file may have grown).
    end_seen: Option<u64>,
}

/// The client's bound on what is read ahead.
pub(crate) fn budget() -> Arc<Semaphore> {
    Arc::new(Semaphore::new((BUDGET >> 10) as usize))
}

/// Chunks of whole stripes, at least 4 MiB (a request of 1 MiB or more
/// per server of a four-server layout).
fn chunk_len(layout: &StripeLayout) -> u64 {
    let stripe = layout.unit() * layout.stripe_count() as u64;
    stripe * (4u64 << 20).div_ceil(stripe)
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
        let (waits, sequential) = {
            let mut s = file
                .readahead
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let sequential = offset == s.next;
            let now = Instant::now();
            // Stale or no longer wanted: dropped.
            s.chunks.retain(|c| {
                c.generation == generation && now - c.began < MAX_AGE && c.end() > offset
            });
            if !sequential {
                s.chunks.clear();
                s.window = 0;
            }
            s.next = offset + len;
            let waits: Vec<(u64, u64, watch::Receiver<Fetched>)> = s
                .chunks
                .iter()
                .filter(|c| c.start < offset + len)
                .map(|c| (c.start, c.len, c.done.clone()))
                .collect();
            (waits, sequential)
        };
        // Fetching starts at a handle's second sequential read, not its
        // first: a program that opens a small file and reads it whole
        // (mdtest's read phase) would otherwise have a chunk fetched from
        // every server of the layout for nothing.
        if sequential && offset > 0 {
            self.fetch_ahead(file, offset + len, generation);
        }
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
        file.readahead
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .end_seen
    }

    /// A read found data past where a fetch saw the file end: it grew.
    pub(crate) fn grew(&self, file: &FileHandle) {
        file.readahead
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .end_seen = None;
    }

    /// Starts fetching the window after `from` that is not fetched yet.
    fn fetch_ahead(&self, file: &FileHandle, from: u64, generation: u64) {
        let chunk = chunk_len(&file.layout);
        let mut s = file
            .readahead
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        s.window = (s.window * 2).clamp(FIRST_WINDOW, MAX_WINDOW);
        let end = (from + s.window).min(s.end_seen.unwrap_or(u64::MAX));
        // Fetches start past what is held, or at the stripe where the
        // reads are (whole stripes: one request per server per chunk);
        // not at a chunk boundary, which would fetch again what the
        // handle's first reads read.
        let stripe = file.layout.unit() * file.layout.stripe_count() as u64;
        let mut start = s.chunks.back().map_or(from - from % stripe, |c| c.end());
        while start < end {
            let Ok(room) = self
                .shared
                .readahead_budget
                .clone()
                .try_acquire_many_owned((chunk >> 10) as u32)
            else {
                break;
            };
            let (tx, rx) = watch::channel(None);
            s.chunks.push_back(Chunk {
                start,
                len: chunk,
                generation,
                began: Instant::now(),
                done: rx,
                _room: room,
            });
            let (client, file) = (self.clone(), file.clone());
            tokio::spawn(async move {
                let readahead = file.readahead.clone();
                let got = client
                    .read_extents(&file, &[Extent::new(start, chunk)])
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
                    if (bytes.len() as u64) < chunk {
                        let mut s = readahead.state.lock().unwrap_or_else(|p| p.into_inner());
                        let end = start + bytes.len() as u64;
                        s.end_seen = Some(s.end_seen.map_or(end, |e| e.min(end)));
                    }
                }
                let _ = tx.send(Some(got));
            });
            start += chunk;
        }
    }
}
