//! The simulated client's read-ahead: core's policy
//! (`concerto_core::client::readahead`), the one the real client runs,
//! with simulated fetches (`cluster.read_ahead = true`).
//!
//! Each process has a stream per file. A read of one extent asks the
//! policy what it holds (chunks fetched or being fetched) and whether to
//! fetch ahead; each chunk it starts is one fetch, split by the layout
//! into one piece per server, which no step waits for as such. The read
//! waits for the held chunks it is served from, as far as they join up
//! from its start, and reads the rest itself. A chunk is cut at the end of
//! what was written to the file, and one that starts past it is not
//! fetched: the policy then sees the data's end, as a short fetch shows
//! the real client. List reads (several extents) go without read-ahead,
//! as the real client's list reads do.

use super::client::Origin;
use super::*;
use crate::workload::Access;

use concerto_core::client::readahead::ReadAhead;
use smallvec::SmallVec;

/// A chunk being fetched: its pieces still out, what it holds, and the
/// processes whose reads wait for it.
pub(super) struct Fetch {
    pending: u32,
    start: u64,
    len: u64,
    /// The policy's chunk length (what `len` falls short of at the end).
    chunk: u64,
    file: u32,
    rank: u32,
    waiters: Vec<u32>,
}

/// A process's streams, by file.
pub(super) type Streams = FxHashMap<u32, ReadAhead<u32>>;

impl<'a> Simulation<'a> {
    /// A read of one extent by a process that reads ahead.
    pub(super) fn issue_read_ahead(&mut self, rank: u32, access: &Access, origin: Origin) {
        let app = self.ranks[rank as usize].app;
        let file = self.apps[app as usize].files[access.file as usize];
        let e = access.extents[0];
        let now = origin.at;
        let mut stream = self.ranks[rank as usize]
            .streams
            .remove(&file)
            .unwrap_or_default();
        let fetch_ahead = stream.read(e.offset, e.len, now, 0);
        // The chunks the read is served from, as far as they join up.
        let mut at = e.offset;
        let mut waits: SmallVec<[u32; 4]> = SmallVec::new();
        for c in stream.serving(e.offset, e.len) {
            let f = &self.fetches[c.fetch as usize];
            if f.start > at || f.len == 0 {
                break;
            }
            waits.push(c.fetch);
            at = f.start + f.len;
            if at >= e.end() || f.len < f.chunk {
                break;
            }
        }
        if fetch_ahead {
            let layout = self.files[file as usize].layout.clone();
            stream.fetch_ahead(e.end(), now, 0, &layout, |chunk| {
                self.start_fetch(rank, file, chunk, origin)
            });
        }
        self.ranks[rank as usize].streams.insert(file, stream);
        let mut pending = 0;
        for f in waits {
            let fetch = &mut self.fetches[f as usize];
            if fetch.pending > 0 {
                fetch.waiters.push(rank);
                pending += 1;
            }
        }
        let at = at.min(e.end());
        self.ranks[rank as usize].pending = pending;
        if at < e.end() {
            let rest = Access::one(access.file, at, e.end() - at);
            let waited = pending;
            self.issue_split(rank, Op::Read, &rest, origin);
            self.ranks[rank as usize].pending += waited;
        } else if pending == 0 {
            self.events
                .schedule(now, Class::Normal, 0, Event::StepDone { rank });
        }
    }

    /// Starts fetching `chunk` of `file` for `rank`'s stream: its token,
    /// or `None` past what was written (the policy then stops).
    fn start_fetch(&mut self, rank: u32, file: u32, chunk: Extent, origin: Origin) -> Option<u32> {
        let written = self.files[file as usize].written_end;
        if chunk.offset >= written {
            return None;
        }
        let len = chunk.len.min(written - chunk.offset);
        let id = self.fetches.len() as u32;
        let call = self.ranks[rank as usize].call;
        let mut pieces = std::mem::take(&mut self.split);
        self.files[file as usize]
            .layout
            .split_extents_into(&[Extent::new(chunk.offset, len)], &mut pieces);
        self.fetches.push(Fetch {
            pending: pieces.len() as u32,
            start: chunk.offset,
            len,
            chunk: chunk.len,
            file,
            rank,
            waiters: Vec::new(),
        });
        for p in pieces.drain(..) {
            let req = piece_request(origin.request(Op::Read, file as u64), &p.extents, p.bytes);
            let piece = self.new_piece(rank, p.server, file, call, p.bytes, req, origin.at);
            self.pieces[piece as usize].fetch = id;
            self.send_request(piece, origin.at);
        }
        self.split = pieces;
        Some(id)
    }

    /// A piece of a fetch came back; the last one ends the fetch, and the
    /// reads waiting for it may go on.
    pub(super) fn fetch_piece_done(&mut self, fetch: u32, now: Time) {
        let f = &mut self.fetches[fetch as usize];
        f.pending -= 1;
        if f.pending > 0 {
            return;
        }
        let (rank, file, start, chunk, len) = (f.rank, f.file, f.start, f.chunk, f.len);
        let waiters = std::mem::take(&mut f.waiters);
        if let Some(stream) = self.ranks[rank as usize].streams.get_mut(&file) {
            stream.fetched(start, chunk, len);
        }
        for r in waiters {
            let rs = &mut self.ranks[r as usize];
            rs.pending -= 1;
            if rs.pending == 0 {
                self.step_done(r, now);
            }
        }
    }
}
