//! Read-ahead: a stream read sequentially has what comes next fetched
//! before it is asked for, so that a program reading a file from start to
//! end keeps every server of the layout busy instead of waiting a round
//! trip per read. The policy, pure and time-injected: the real client
//! (library, mount and MPI-IO) runs it with real fetches, the simulator's
//! client with simulated ones, so both read ahead alike.
//!
//! How: a stream remembers where its reads have reached. A read that
//! starts there is sequential (or near it, [`ReadAheadConfig::reorder`]:
//! reads a kernel has in flight at once arrive in any order); from the stream's second sequential read on (not
//! its first: a program that opens a small file and reads it whole, as
//! mdtest's read phase does, would otherwise have a chunk fetched from
//! every server for nothing), the next `window` bytes are fetched in
//! chunks of whole stripes (each chunk one request per server, all at
//! once), the window doubling from [`ReadAheadConfig::first_window`] up to
//! [`ReadAheadConfig::max_window`] while the reads stay sequential. Any
//! other read drops what was fetched and starts over. Where a fetch finds
//! the file's data to end, fetching stops until a read is seen past it.
//!
//! Coherence, as NFS's close-to-open: what was fetched is served only to
//! the stream that fetched it, for at most [`ReadAheadConfig::max_age`],
//! and never after the file's write generation (a counter the executor
//! keeps per file: its own writes and truncations) moved on. What is held
//! is bounded by whoever starts fetches: it may refuse one (no room).
//!
//! The caller keeps, with each chunk, whatever stands for its fetch (`T`:
//! a channel the fetched bytes arrive on, a simulated request's id).

use std::collections::VecDeque;

use crate::{Extent, StripeLayout, Time};

/// How far and in what pieces a stream reads ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadAheadConfig {
    /// The window after the first sequential read.
    pub first_window: u64,
    /// The largest window.
    pub max_window: u64,
    /// The least a chunk holds; chunks are whole stripes, so each is one
    /// request per server.
    pub min_chunk: u64,
    /// How long fetched data may be served.
    pub max_age: Time,
    /// How far from where the last read ended a read may start and still
    /// continue the stream: a kernel's page cache reads ahead with several
    /// reads in flight, which reach the client in any order.
    pub reorder: u64,
}

impl Default for ReadAheadConfig {
    fn default() -> ReadAheadConfig {
        ReadAheadConfig {
            first_window: 2 << 20,
            max_window: 16 << 20,
            // A request of 1 MiB or more per server of a four-server layout.
            min_chunk: 4 << 20,
            max_age: Time::from_secs(1),
            reorder: 1 << 20,
        }
    }
}

impl ReadAheadConfig {
    /// The length of one chunk on `layout`: whole stripes, at least
    /// [`ReadAheadConfig::min_chunk`].
    pub fn chunk_len(&self, layout: &StripeLayout) -> u64 {
        let stripe = stripe_width(layout);
        stripe * self.min_chunk.max(1).div_ceil(stripe)
    }
}

fn stripe_width(layout: &StripeLayout) -> u64 {
    layout.unit() * layout.stripe_count() as u64
}

/// A chunk fetched or being fetched, and the caller's token for its fetch.
#[derive(Clone, Debug)]
pub struct HeldChunk<T> {
    pub start: u64,
    pub len: u64,
    /// The file's write generation when the fetch began.
    generation: u64,
    began: Time,
    pub fetch: T,
}

impl<T> HeldChunk<T> {
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// One stream's read-ahead (a file handle's, a simulated rank's file).
#[derive(Clone, Debug)]
pub struct ReadAhead<T> {
    config: ReadAheadConfig,
    /// Where the last read ended.
    next: u64,
    window: u64,
    chunks: VecDeque<HeldChunk<T>>,
    /// Where a fetch found the file's data to end: nothing is fetched from
    /// there on, until a read is seen past it (the file grew).
    end_seen: Option<u64>,
    /// After chunks went stale before the reads reached them, the stream
    /// reads on its own until here.
    quiet_until: u64,
}

impl<T> Default for ReadAhead<T> {
    fn default() -> ReadAhead<T> {
        ReadAhead::new(ReadAheadConfig::default())
    }
}

impl<T> ReadAhead<T> {
    pub fn new(config: ReadAheadConfig) -> ReadAhead<T> {
        ReadAhead {
            config,
            next: 0,
            window: 0,
            chunks: VecDeque::new(),
            end_seen: None,
            quiet_until: 0,
        }
    }

    pub fn config(&self) -> &ReadAheadConfig {
        &self.config
    }

    /// The stream reads `offset..offset+len` at `now`, the file at write
    /// generation `generation`. Drops what is stale (older than the age
    /// bound, fetched before the file changed) or no longer wanted (behind
    /// the read, or everything when the read is not sequential). Returns
    /// whether to fetch ahead from the read's end ([`ReadAhead::fetch_ahead`]),
    /// which the caller does after taking what it serves from
    /// ([`ReadAhead::serving`]): a chunk started now is not waited for.
    pub fn read(&mut self, offset: u64, len: u64, now: Time, generation: u64) -> bool {
        let sequential = offset.abs_diff(self.next) <= self.config.reorder
            && (offset == self.next || self.next > 0);
        let max_age = self.config.max_age;
        let expired_ahead = self
            .chunks
            .iter()
            .any(|c| now.saturating_sub(c.began) >= max_age && c.end() > offset);
        self.chunks.retain(|c| {
            c.generation == generation && now.saturating_sub(c.began) < max_age && c.end() > offset
        });
        if !sequential {
            self.chunks.clear();
            self.window = 0;
        }
        let end = offset.saturating_add(len);
        if sequential && expired_ahead {
            // Fetched further ahead than the reads reached before it grew
            // stale (the servers were slow, or the program is): fetching
            // again at once would waste the servers' time again (a stream
            // read by 8 ranks beside heavy writers fetched 3.3x the bytes
            // it read, and 7x when the host was busy). The stream reads a
            // chunk's length on its own, then starts over with the first
            // window.
            self.window = 0;
            self.quiet_until = end.saturating_add(self.config.min_chunk);
        }
        self.next = if sequential { self.next.max(end) } else { end };
        sequential && offset > 0 && end > self.quiet_until
    }

    /// The chunks held over `offset..offset+len`, in file order: what the
    /// read is served from as far as they join up from `offset`.
    pub fn serving(&self, offset: u64, len: u64) -> impl Iterator<Item = &HeldChunk<T>> {
        let end = offset.saturating_add(len);
        self.chunks
            .iter()
            .filter(move |c| c.start < end && c.end() > offset)
    }

    /// Fetches the window after `from` that is not held yet, a chunk at a
    /// time: `start` is asked to begin each chunk's fetch and returns its
    /// token, or `None` when there is no room (fetching then stops).
    pub fn fetch_ahead(
        &mut self,
        from: u64,
        now: Time,
        generation: u64,
        layout: &StripeLayout,
        mut start: impl FnMut(Extent) -> Option<T>,
    ) {
        let chunk = self.config.chunk_len(layout);
        // Reads that arrived out of order may have reached further.
        let from = from.max(self.next);
        // The window grows as the reads use what was fetched: while half
        // of it is still held ahead of them, nothing more is fetched.
        let held_ahead = self
            .chunks
            .back()
            .map_or(0, |c| c.end().saturating_sub(from));
        if self.window > 0 && held_ahead >= self.window / 2 {
            return;
        }
        self.window = (self.window * 2).clamp(self.config.first_window, self.config.max_window);
        let end = from
            .saturating_add(self.window)
            .min(self.end_seen.unwrap_or(u64::MAX));
        // Fetches start past what is held, or at the stripe where the
        // reads are (whole stripes: one request per server per chunk);
        // not at a chunk boundary, which would fetch again what the
        // stream's first reads read.
        let stripe = stripe_width(layout);
        let mut at = self
            .chunks
            .back()
            .map_or(from - from % stripe, HeldChunk::end);
        while at < end {
            let Some(fetch) = start(Extent::new(at, chunk)) else {
                break;
            };
            self.chunks.push_back(HeldChunk {
                start: at,
                len: chunk,
                generation,
                began: now,
                fetch,
            });
            at += chunk;
        }
    }

    /// The fetch of the chunk at `start` returned `got` bytes: fewer than
    /// the chunk means the file's data ends there.
    pub fn fetched(&mut self, start: u64, chunk_len: u64, got: u64) {
        if got < chunk_len {
            let end = start + got;
            self.end_seen = Some(self.end_seen.map_or(end, |e| e.min(end)));
        }
    }

    /// Where a fetch found the file's data to end, if one did.
    pub fn end_seen(&self) -> Option<u64> {
        self.end_seen
    }

    /// A read found data past where a fetch saw the file end: it grew.
    pub fn grew(&mut self) {
        self.end_seen = None;
    }

    /// How many chunks are held.
    pub fn held(&self) -> usize {
        self.chunks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn layout(unit: u64, servers: u32) -> StripeLayout {
        StripeLayout::new(unit, (0..servers).collect()).unwrap()
    }

    /// Reads `len` at a time from 0 to `total`, fetching whatever the
    /// policy asks: the extents fetched, in order.
    fn sequential(layout: &StripeLayout, len: u64, total: u64) -> Vec<Extent> {
        let mut ra = ReadAhead::<()>::default();
        let mut fetched = Vec::new();
        let mut at = 0;
        while at < total {
            if ra.read(at, len, Time::ZERO, 0) {
                ra.fetch_ahead(at + len, Time::ZERO, 0, layout, |e| {
                    fetched.push(e);
                    Some(())
                });
            }
            at += len;
        }
        fetched
    }

    #[test]
    fn a_first_read_fetches_nothing_and_the_second_fetches_whole_stripes() {
        let l = layout(64 << 10, 4);
        let mut ra = ReadAhead::<u32>::default();
        assert!(!ra.read(0, 4096, Time::ZERO, 0), "a first read alone");
        assert!(ra.read(4096, 4096, Time::ZERO, 0));
        let mut n = 0;
        ra.fetch_ahead(8192, Time::ZERO, 0, &l, |e| {
            assert_eq!(e.offset % (256 << 10), 0, "chunks start on a stripe");
            assert_eq!(e.len, 4 << 20);
            n += 1;
            Some(n)
        });
        assert_eq!(n, 1, "a 2 MiB first window is one 4 MiB chunk");
        assert_eq!(ra.serving(8192, 4096).count(), 1);
    }

    #[test]
    fn the_window_doubles_up_to_its_bound_and_a_random_read_drops_everything() {
        let l = layout(1 << 20, 4);
        let fetched = sequential(&l, 1 << 20, 64 << 20);
        let ends: Vec<u64> = fetched.iter().map(|e| e.end()).collect();
        assert!(
            ends.windows(2).all(|w| w[0] < w[1]),
            "each chunk once, in order"
        );
        assert!(fetched.iter().all(|e| e.len == 4 << 20));
        let mut ra = ReadAhead::<()>::default();
        ra.read(0, 1 << 20, Time::ZERO, 0);
        ra.read(1 << 20, 1 << 20, Time::ZERO, 0);
        ra.fetch_ahead(2 << 20, Time::ZERO, 0, &l, |_| Some(()));
        assert!(ra.held() > 0);
        assert!(!ra.read(40 << 20, 1 << 20, Time::ZERO, 0));
        assert_eq!(ra.held(), 0, "a read elsewhere drops what was fetched");
    }

    #[test]
    fn reads_a_kernel_had_in_flight_at_once_continue_the_stream_in_any_order() {
        let l = layout(64 << 10, 4);
        let mut ra = ReadAhead::<()>::default();
        let k = 128 << 10;
        assert!(!ra.read(0, k, Time::ZERO, 0));
        // The third piece arrives before the second.
        assert!(ra.read(2 * k, k, Time::ZERO, 0), "near: the stream goes on");
        let mut from = Vec::new();
        ra.fetch_ahead(3 * k, Time::ZERO, 0, &l, |e| {
            from.push(e.offset);
            Some(())
        });
        assert!(ra.read(k, k, Time::ZERO, 0), "the second, late");
        assert_eq!(ra.held(), 1, "what was fetched is kept");
        assert!(
            !ra.read(64 << 20, k, Time::ZERO, 0),
            "far away: a new stream"
        );
        assert_eq!(ra.held(), 0);
    }

    #[test]
    fn stale_chunks_are_never_served() {
        let l = layout(64 << 10, 2);
        let mut ra = ReadAhead::<()>::default();
        ra.read(0, 4096, Time::ZERO, 7);
        ra.read(4096, 4096, Time::ZERO, 7);
        ra.fetch_ahead(8192, Time::ZERO, 7, &l, |_| Some(()));
        assert_eq!(ra.held(), 1);
        ra.read(8192, 4096, Time::from_millis(10), 8);
        assert_eq!(ra.held(), 0, "the file was written since");
        ra.fetch_ahead(12288, Time::from_millis(10), 8, &l, |_| Some(()));
        ra.read(12288, 4096, Time::from_secs(2), 8);
        assert_eq!(ra.held(), 0, "past the age bound");
    }

    #[test]
    fn a_stream_slower_than_the_age_bound_does_not_refetch_its_window_at_every_read() {
        // 256 KiB reads 300 ms apart: the 4 MiB chunks grow stale before
        // the reads reach them. Each time, the window starts over and this
        // read fetches nothing, so over 64 MiB read the stream fetches at
        // most twice what it reads, not its whole window again per read.
        let l = layout(64 << 10, 4);
        let mut ra = ReadAhead::<()>::default();
        let (len, mut fetched) = (256 << 10, 0u64);
        for k in 0..256u64 {
            let now = Time::from_millis(300 * k);
            if ra.read(k * len, len, now, 0) {
                ra.fetch_ahead((k + 1) * len, now, 0, &l, |e| {
                    fetched += e.len;
                    Some(())
                });
            }
        }
        assert!(
            fetched <= 2 * 256 * len,
            "fetched {} MiB for 64",
            fetched >> 20
        );
        assert!(fetched > 0, "it still reads ahead");
    }

    #[test]
    fn no_room_stops_fetching_and_the_end_of_the_data_bounds_it() {
        let l = layout(64 << 10, 4);
        let mut ra = ReadAhead::<()>::new(ReadAheadConfig {
            first_window: 16 << 20,
            ..ReadAheadConfig::default()
        });
        ra.read(0, 4096, Time::ZERO, 0);
        ra.read(4096, 4096, Time::ZERO, 0);
        let mut room = 2;
        ra.fetch_ahead(8192, Time::ZERO, 0, &l, |_| {
            room -= 1;
            (room >= 0).then_some(())
        });
        assert_eq!(ra.held(), 2, "two chunks fitted");
        ra.fetched(4 << 20, 4 << 20, 1000);
        assert_eq!(ra.end_seen(), Some((4 << 20) + 1000));
        ra.read(8192, 4096, Time::ZERO, 0);
        let mut asked = 0;
        ra.fetch_ahead(12288, Time::ZERO, 0, &l, |_| {
            asked += 1;
            Some(())
        });
        assert_eq!(asked, 0, "nothing past the end of the data");
        ra.grew();
        assert_eq!(ra.end_seen(), None);
    }

    proptest! {
        /// Whatever the reads, nothing is fetched twice while held, every
        /// chunk is whole stripes, and no fetch starts past the data's end.
        #[test]
        fn fetches_are_whole_stripes_never_overlapping_and_never_past_the_end(
            unit_kib in 1u64..512,
            servers in 1u32..8,
            reads in prop::collection::vec((0u64..(64 << 20), 1u64..(2 << 20), any::<bool>()), 1..60),
            end in prop::option::of(0u64..(64 << 20)),
        ) {
            let l = layout(unit_kib << 10, servers);
            let stripe = (unit_kib << 10) * servers as u64;
            let mut ra = ReadAhead::<()>::default();
            let mut at = 0u64;
            for (jump, len, seq) in reads {
                let offset = if seq { at } else { jump };
                if ra.read(offset, len, Time::ZERO, 0) {
                    let held: Vec<(u64, u64)> = ra.chunks.iter().map(|c| (c.start, c.end())).collect();
                    let end_seen = ra.end_seen();
                    let mut asked = Vec::new();
                    ra.fetch_ahead(offset + len, Time::ZERO, 0, &l, |e| {
                        asked.push(e);
                        Some(())
                    });
                    for e in asked {
                        prop_assert!(e.offset % stripe == 0 && e.len % stripe == 0, "{e:?} is not whole stripes");
                        prop_assert!(held.iter().all(|&(s, t)| e.end() <= s || e.offset >= t), "{e:?} fetched again");
                        prop_assert!(end_seen.is_none_or(|end| e.offset < end), "{e:?} starts past the end {end_seen:?}");
                    }
                }
                if let Some(end) = end {
                    let starts: Vec<(u64, u64)> = ra.chunks.iter().map(|c| (c.start, c.len)).collect();
                    for (s, len) in starts {
                        ra.fetched(s, len, end.saturating_sub(s).min(len));
                    }
                }
                at = offset + len;
            }
        }
    }
}
