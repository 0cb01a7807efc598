//! Striping: the one place where file ranges become per-server pieces and back.
//!
//! A file is cut into stripe units of `unit` bytes dealt round-robin over the
//! layout's servers: unit `k` goes to `servers[k % count]` at object offset
//! `(k / count) * unit`. A contiguous file range therefore lands on each
//! server as one contiguous object range, which is why one request per
//! server suffices for contiguous I/O.

use serde::{Deserialize, Serialize};
use smallvec::{smallvec, SmallVec};
use thiserror::Error;

use crate::request::Extent;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error("stripe unit must be > 0")]
    ZeroUnit,
    #[error("a layout needs at least one server")]
    NoServers,
    #[error("stripe count {count} is larger than the {total} servers available")]
    CountTooLarge { count: u32, total: u32 },
    #[error("first server {first} does not exist (there are {total} servers)")]
    FirstOutOfRange { first: u32, total: u32 },
    #[error("server {0} appears twice in the layout")]
    DuplicateServer(u32),
}

/// How one file is striped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeLayout {
    unit: u64,
    servers: Vec<u32>,
}

/// The part of a file range that falls in one stripe unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Position of the server in the layout's server list.
    pub slot: u32,
    /// The server's id.
    pub server: u32,
    pub object_offset: u64,
    pub len: u64,
    pub file_offset: u64,
}

/// Everything a file access needs from one server: its object extents,
/// ascending and coalesced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerPiece {
    pub slot: u32,
    pub server: u32,
    /// Inline when there is one (contiguous I/O, the common case): the
    /// simulator splits every request it issues, and a heap allocation per
    /// piece was a large part of its cost.
    pub extents: SmallVec<[Extent; 1]>,
    pub bytes: u64,
}

/// Bounds on one request to one server (a wire protocol's limits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    /// Most bytes one request carries (at least 1).
    pub max_bytes: u64,
    /// Most object extents one request names (at least 1).
    pub max_extents: usize,
}

/// A run of an access's bytes on one server: its object range and where
/// its bytes sit in the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferPart {
    pub object_offset: u64,
    pub len: u64,
    pub buf_offset: u64,
}

/// One request to one server, within [`RequestLimits`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerRequest {
    pub slot: u32,
    pub server: u32,
    /// Object extents, ascending and coalesced.
    pub extents: Vec<Extent>,
    /// The request's bytes in object order, with their buffer places.
    pub parts: Vec<BufferPart>,
    pub bytes: u64,
}

/// Appends an object range, merged into the last extent when it continues
/// it (to a request's `Vec` or a piece's `SmallVec`).
fn push_coalesced<V>(extents: &mut V, offset: u64, len: u64)
where
    V: std::ops::DerefMut<Target = [Extent]> + Extend<Extent>,
{
    match extents.last_mut() {
        Some(last) if last.end() == offset => last.len += len,
        _ => extents.extend(std::iter::once(Extent::new(offset, len))),
    }
}

impl StripeLayout {
    /// A layout over an explicit server list.
    pub fn new(unit: u64, servers: Vec<u32>) -> Result<StripeLayout, LayoutError> {
        if unit == 0 {
            return Err(LayoutError::ZeroUnit);
        }
        if servers.is_empty() {
            return Err(LayoutError::NoServers);
        }
        let mut seen = servers.clone();
        seen.sort_unstable();
        if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
            return Err(LayoutError::DuplicateServer(w[0]));
        }
        Ok(StripeLayout { unit, servers })
    }

    /// `count` consecutive servers out of `total`, starting at `first` and
    /// wrapping around (PVFS2's and Lustre's default placement).
    pub fn round_robin(
        unit: u64,
        count: u32,
        first: u32,
        total: u32,
    ) -> Result<StripeLayout, LayoutError> {
        if total == 0 || count == 0 {
            return Err(LayoutError::NoServers);
        }
        if count > total {
            return Err(LayoutError::CountTooLarge { count, total });
        }
        if first >= total {
            return Err(LayoutError::FirstOutOfRange { first, total });
        }
        StripeLayout::new(unit, (0..count).map(|i| (first + i) % total).collect())
    }

    pub fn unit(&self) -> u64 {
        self.unit
    }

    /// The largest file whose every object ends at or before
    /// `object_bound` (the servers' bound on an object).
    pub fn largest_file(&self, object_bound: u64) -> u64 {
        largest_file(self.unit, self.servers.len() as u64, object_bound)
    }
    pub fn stripe_count(&self) -> u32 {
        self.servers.len() as u32
    }
    pub fn servers(&self) -> &[u32] {
        &self.servers
    }

    /// Where a file byte lives: (slot, object offset).
    pub fn locate(&self, file_offset: u64) -> (u32, u64) {
        let count = self.servers.len() as u64;
        let stripe = file_offset / self.unit;
        let slot = (stripe % count) as u32;
        let object_offset = (stripe / count) * self.unit + file_offset % self.unit;
        (slot, object_offset)
    }

    /// The inverse of [`locate`](Self::locate).
    pub fn file_offset(&self, slot: u32, object_offset: u64) -> u64 {
        let count = self.servers.len() as u64;
        let row = object_offset / self.unit;
        (row * count + slot as u64) * self.unit + object_offset % self.unit
    }

    /// The stripe-unit chunks of `[offset, offset + len)`, in file order.
    pub fn chunks(&self, offset: u64, len: u64) -> Chunks<'_> {
        Chunks {
            layout: self,
            next: offset,
            end: offset.saturating_add(len),
        }
    }

    /// Per-server pieces of one contiguous file range, ordered by slot.
    pub fn split(&self, offset: u64, len: u64) -> Vec<ServerPiece> {
        self.split_extents(&[Extent::new(offset, len)])
    }

    /// Per-server pieces of a list of file extents (list I/O), ordered by
    /// slot, each with its object extents ascending and coalesced.
    pub fn split_extents(&self, extents: &[Extent]) -> Vec<ServerPiece> {
        let mut pieces = Vec::new();
        self.split_extents_into(extents, &mut pieces);
        pieces
    }

    /// [`split_extents`](Self::split_extents) into `pieces` (cleared first),
    /// so that a caller splitting request after request (the simulator)
    /// reuses one buffer.
    #[inline]
    pub fn split_extents_into(&self, extents: &[Extent], pieces: &mut Vec<ServerPiece>) {
        pieces.clear();
        match extents {
            [e] => self.split_contiguous(e.offset, e.len, pieces),
            _ => self.split_general(extents, pieces),
        }
    }

    /// One contiguous range in O(stripe count) rather than one step per
    /// stripe unit: the range lands on each server it touches as one
    /// contiguous object range, from the first of the range's units on
    /// that server to the last. (The simulator splits every request; this
    /// is its common case.)
    #[inline]
    fn split_contiguous(&self, offset: u64, len: u64, pieces: &mut Vec<ServerPiece>) {
        if len == 0 {
            return;
        }
        let count = self.servers.len() as u64;
        let end = offset.saturating_add(len);
        let (first_unit, last_unit) = (offset / self.unit, (end - 1) / self.unit);
        let touched = count.min(last_unit - first_unit + 1);
        // The i-th unit of the range is the first on slot (first + i) mod
        // count. Slot order starts where that wraps round to slot 0.
        let first_slot = first_unit % count;
        let wrap = (count - first_slot).min(touched);
        for i in (wrap..touched).chain(0..wrap) {
            let first = first_unit + i;
            let last = first + (last_unit - first) / count * count;
            let start = (first / count) * self.unit + if i == 0 { offset % self.unit } else { 0 };
            let stop = (last / count) * self.unit
                + if last == last_unit {
                    (end - 1) % self.unit + 1
                } else {
                    self.unit
                };
            let slot = ((first_slot + i) % count) as u32;
            pieces.push(ServerPiece {
                slot,
                server: self.servers[slot as usize],
                extents: smallvec![Extent::new(start, stop - start)],
                bytes: stop - start,
            });
        }
    }

    fn split_general(&self, extents: &[Extent], pieces: &mut Vec<ServerPiece>) {
        for (slot, part) in self.parts_by_server(extents) {
            match pieces.last_mut() {
                Some(p) if p.slot == slot => {
                    p.bytes += part.len;
                    push_coalesced(&mut p.extents, part.object_offset, part.len);
                }
                _ => pieces.push(ServerPiece {
                    slot,
                    server: self.servers[slot as usize],
                    extents: smallvec![Extent::new(part.object_offset, part.len)],
                    bytes: part.len,
                }),
            }
        }
    }

    /// The requests a client sends for an access to the file `extents`
    /// (list I/O; their bytes are concatenated in the caller's buffer): per
    /// server, object extents ascending and coalesced, cut so that no request
    /// carries more than `limits` allow. Each request also says where its
    /// bytes sit in the caller's buffer.
    pub fn requests(&self, extents: &[Extent], limits: RequestLimits) -> Vec<ServerRequest> {
        // Limits of zero would never let a byte through: read them as one.
        let (max_bytes, max_extents) = (limits.max_bytes.max(1), limits.max_extents.max(1));
        let mut requests: Vec<ServerRequest> = Vec::new();
        for (slot, mut part) in self.parts_by_server(extents) {
            while part.len > 0 {
                let fits = requests.last().is_some_and(|r| {
                    r.slot == slot
                        && r.bytes < max_bytes
                        && (r.extents.len() < max_extents
                            || r.extents
                                .last()
                                .is_some_and(|e| e.end() == part.object_offset))
                });
                if !fits {
                    requests.push(ServerRequest {
                        slot,
                        server: self.servers[slot as usize],
                        extents: Vec::new(),
                        parts: Vec::new(),
                        bytes: 0,
                    });
                }
                let r = requests.last_mut().expect("a request was just ensured");
                // A part larger than the room left is itself cut.
                let take = part.len.min(max_bytes - r.bytes);
                push_coalesced(&mut r.extents, part.object_offset, take);
                r.parts.push(BufferPart { len: take, ..part });
                r.bytes += take;
                part.object_offset += take;
                part.buf_offset += take;
                part.len -= take;
            }
        }
        requests
    }

    /// Every stripe-unit chunk of an access with its place in the caller's
    /// buffer, grouped by slot and ascending by object offset: the grouping
    /// and sorting both [`split_extents`](Self::split_extents) and
    /// [`requests`](Self::requests) coalesce from.
    fn parts_by_server(&self, extents: &[Extent]) -> Vec<(u32, BufferPart)> {
        let mut parts = Vec::new();
        let mut buf_offset = 0u64;
        for e in extents {
            parts.extend(self.chunks(e.offset, e.len).map(|c| {
                let part = BufferPart {
                    object_offset: c.object_offset,
                    len: c.len,
                    buf_offset: buf_offset + (c.file_offset - e.offset),
                };
                (c.slot, part)
            }));
            buf_offset += e.len;
        }
        parts.sort_unstable_by_key(|&(slot, p)| (slot, p.object_offset));
        parts
    }

    /// Bytes of a file of `size` bytes that `slot`'s object holds.
    pub fn object_len(&self, slot: u32, size: u64) -> u64 {
        let row = self.unit * self.servers.len() as u64;
        let rest = size % row;
        (size / row) * self.unit + rest.saturating_sub(slot as u64 * self.unit).min(self.unit)
    }

    /// A file's size from its objects' lengths (layout order): one past the
    /// furthest file byte any object holds. The inverse of
    /// [`object_len`](Self::object_len) for files without holes at the end.
    pub fn size_from_objects(&self, object_lens: &[u64]) -> u64 {
        object_lens
            .iter()
            .enumerate()
            .filter(|&(_, &len)| len > 0)
            .map(|(slot, &len)| self.file_offset(slot as u32, len - 1) + 1)
            .max()
            .unwrap_or(0)
    }

    /// The file ranges a server piece covers, coalesced, in file order: the
    /// merge half of the split/merge round trip.
    pub fn merge(&self, pieces: &[ServerPiece]) -> Vec<Extent> {
        let mut file: Vec<Extent> = Vec::new();
        for p in pieces {
            for e in &p.extents {
                // Walk the object extent unit by unit: each unit maps to a different file place.
                let mut off = e.offset;
                let end = e.end();
                while off < end {
                    let unit_end = (off / self.unit + 1) * self.unit;
                    let len = unit_end.min(end) - off;
                    file.push(Extent::new(self.file_offset(p.slot, off), len));
                    off += len;
                }
            }
        }
        file.sort_unstable();
        let mut merged: Vec<Extent> = Vec::with_capacity(file.len());
        for e in file {
            match merged.last_mut() {
                Some(last) if last.end() == e.offset => last.len += e.len,
                _ => merged.push(e),
            }
        }
        merged
    }
}

/// Iterator over the stripe-unit chunks of a file range.
pub struct Chunks<'a> {
    layout: &'a StripeLayout,
    next: u64,
    end: u64,
}

impl Iterator for Chunks<'_> {
    type Item = Chunk;
    fn next(&mut self) -> Option<Chunk> {
        if self.next >= self.end {
            return None;
        }
        let unit = self.layout.unit;
        let unit_end = (self.next / unit).saturating_add(1).saturating_mul(unit);
        let len = unit_end.min(self.end) - self.next;
        let (slot, object_offset) = self.layout.locate(self.next);
        let chunk = Chunk {
            slot,
            server: self.layout.servers[slot as usize],
            object_offset,
            len,
            file_offset: self.next,
        };
        self.next += len;
        Some(chunk)
    }
}

/// The largest file of `stripe_count` objects of `unit`-byte stripe units
/// whose every object ends at or before `object_bound`: whole rows of
/// stripes up to the bound.
pub fn largest_file(unit: u64, stripe_count: u64, object_bound: u64) -> u64 {
    (object_bound / unit.max(1))
        .saturating_mul(unit)
        .saturating_mul(stripe_count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn contiguous_range_is_one_extent_per_server() {
        let l = StripeLayout::round_robin(4096, 16, 0, 16).unwrap();
        let pieces = l.split(0, 128 * 1024);
        assert_eq!(pieces.len(), 16);
        for p in &pieces {
            assert_eq!(p.bytes, 8192);
            assert_eq!(p.extents.as_slice(), [Extent::new(0, 8192)]);
        }
    }

    #[test]
    fn unaligned_range() {
        let l = StripeLayout::round_robin(100, 3, 1, 4).unwrap();
        assert_eq!(l.servers(), &[1, 2, 3]);
        let chunks: Vec<_> = l.chunks(150, 200).collect();
        assert_eq!(chunks.len(), 3);
        assert_eq!(
            (chunks[0].server, chunks[0].object_offset, chunks[0].len),
            (2, 50, 50)
        );
        assert_eq!(
            (chunks[1].server, chunks[1].object_offset, chunks[1].len),
            (3, 0, 100)
        );
        assert_eq!(
            (chunks[2].server, chunks[2].object_offset, chunks[2].len),
            (1, 100, 50)
        );
    }

    #[test]
    fn invalid_layouts_are_rejected() {
        assert_eq!(
            StripeLayout::round_robin(0, 1, 0, 1),
            Err(LayoutError::ZeroUnit)
        );
        assert_eq!(
            StripeLayout::round_robin(1, 5, 0, 4),
            Err(LayoutError::CountTooLarge { count: 5, total: 4 })
        );
        assert_eq!(
            StripeLayout::round_robin(1, 1, 4, 4),
            Err(LayoutError::FirstOutOfRange { first: 4, total: 4 })
        );
        assert_eq!(
            StripeLayout::new(1, vec![0, 1, 0]),
            Err(LayoutError::DuplicateServer(0))
        );
        assert_eq!(StripeLayout::new(1, vec![]), Err(LayoutError::NoServers));
    }

    fn layout_strategy() -> impl Strategy<Value = StripeLayout> {
        (1u64..=70_000, 1u32..=12, 0u32..12).prop_flat_map(|(unit, count, first)| {
            (count..=16).prop_map(move |total| {
                StripeLayout::round_robin(unit, count, first % total, total).unwrap()
            })
        })
    }

    proptest! {
        #[test]
        fn locate_and_file_offset_are_inverse(l in layout_strategy(), off in 0u64..1 << 40) {
            let (slot, obj) = l.locate(off);
            prop_assert_eq!(l.file_offset(slot, obj), off);
        }

        #[test]
        fn split_then_merge_round_trips(l in layout_strategy(),
                                        gaps in prop::collection::vec((0u64..1 << 24, 1u64..300_000), 1..6),
                                        seed in any::<u64>()) {
            // Disjoint file extents (list I/O never names a byte twice), given in a scrambled order.
            let mut offset = 0u64;
            let mut extents: Vec<Extent> = gaps.iter().map(|&(gap, len)| {
                let e = Extent::new(offset + gap, len);
                offset = e.end();
                e
            }).collect();
            let mut expected = extents.clone();
            let n = extents.len();
            extents.rotate_left((seed % n as u64) as usize);
            let pieces = l.split_extents(&extents);
            // Bytes are conserved and no server appears twice.
            let total: u64 = extents.iter().map(|e| e.len).sum();
            let piece_bytes: u64 = pieces.iter().map(|p| p.bytes).sum();
            prop_assert_eq!(piece_bytes, total);
            let mut slots: Vec<u32> = pieces.iter().map(|p| p.slot).collect();
            slots.dedup();
            prop_assert_eq!(slots.len(), pieces.len());
            for p in &pieces {
                // Ascending and coalesced: strictly apart, never touching.
                prop_assert!(p.extents.windows(2).all(|w| w[0].end() < w[1].offset));
                prop_assert_eq!(p.extents.iter().map(|e| e.len).sum::<u64>(), p.bytes);
                prop_assert_eq!(p.server, l.servers()[p.slot as usize]);
            }
            // Adjacent input extents come back as one.
            expected.dedup_by(|next, prev| {
                if prev.end() == next.offset { prev.len += next.len; true } else { false }
            });
            prop_assert_eq!(l.merge(&pieces), expected);
        }

        #[test]
        fn overlapping_extents_keep_every_byte(l in layout_strategy(),
                                               ranges in prop::collection::vec((0u64..1 << 20, 1u64..300_000), 1..6)) {
            // Overlap is the caller's business (a read may name a byte twice); split must not lose any.
            let extents: Vec<Extent> = ranges.iter().map(|&(o, n)| Extent::new(o, n)).collect();
            let pieces = l.split_extents(&extents);
            let total: u64 = extents.iter().map(|e| e.len).sum();
            prop_assert_eq!(pieces.iter().map(|p| p.bytes).sum::<u64>(), total);
            for p in &pieces {
                prop_assert!(p.extents.windows(2).all(|w| w[0].offset <= w[1].offset));
            }
        }

        /// Every byte of an access lands in exactly one request part, at the
        /// object offset the layout gives it and at its place in the buffer,
        /// and no request exceeds the limits.
        #[test]
        fn requests_cover_every_byte_once_within_the_limits(
            l in layout_strategy(),
            gaps in prop::collection::vec((0u64..20_000, 1u64..20_000), 1..5),
            max_bytes in 1u64..50_000,
            max_extents in 1usize..5,
        ) {
            let mut at = 0u64;
            let extents: Vec<Extent> = gaps.iter().map(|&(gap, len)| {
                let e = Extent::new(at + gap, len);
                at = e.end();
                e
            }).collect();
            let file_of: Vec<u64> = extents.iter().flat_map(|e| e.offset..e.end()).collect();
            let mut seen = vec![false; file_of.len()];
            let limits = RequestLimits { max_bytes, max_extents };
            for r in l.requests(&extents, limits) {
                prop_assert!(r.bytes <= max_bytes && r.bytes > 0);
                prop_assert!(r.extents.len() <= max_extents);
                prop_assert!(r.extents.windows(2).all(|w| w[0].end() < w[1].offset));
                prop_assert_eq!(r.extents.iter().map(|e| e.len).sum::<u64>(), r.bytes);
                prop_assert_eq!(r.parts.iter().map(|p| p.len).sum::<u64>(), r.bytes);
                prop_assert_eq!(r.server, l.servers()[r.slot as usize]);
                for p in &r.parts {
                    for k in 0..p.len {
                        let i = (p.buf_offset + k) as usize;
                        prop_assert!(!seen[i]);
                        seen[i] = true;
                        prop_assert_eq!(l.locate(file_of[i]), (r.slot, p.object_offset + k));
                    }
                }
            }
            prop_assert!(seen.iter().all(|&s| s));
        }

        /// One contiguous range's fast split is the general split.
        #[test]
        fn a_contiguous_split_is_the_general_split(l in layout_strategy(), off in 0u64..1 << 32, len in 0u64..2_000_000) {
            let (mut contiguous, mut general) = (Vec::new(), Vec::new());
            l.split_contiguous(off, len, &mut contiguous);
            l.split_general(&[Extent::new(off, len)], &mut general);
            prop_assert_eq!(contiguous, general);
        }

        /// Without limits, requests are exactly the pieces of `split_extents`.
        #[test]
        fn unlimited_requests_are_the_split_pieces(
            l in layout_strategy(),
            gaps in prop::collection::vec((0u64..1 << 20, 1u64..300_000), 1..5),
        ) {
            let mut at = 0u64;
            let extents: Vec<Extent> = gaps.iter().map(|&(gap, len)| {
                let e = Extent::new(at + gap, len);
                at = e.end();
                e
            }).collect();
            let unlimited = RequestLimits { max_bytes: u64::MAX, max_extents: usize::MAX };
            let requests: Vec<(u32, Vec<Extent>, u64)> = l.requests(&extents, unlimited)
                .into_iter().map(|r| (r.slot, r.extents, r.bytes)).collect();
            let pieces: Vec<(u32, Vec<Extent>, u64)> = l.split_extents(&extents)
                .into_iter().map(|p| (p.slot, p.extents.into_vec(), p.bytes)).collect();
            prop_assert_eq!(requests, pieces);
        }

        /// The largest file under an object bound keeps every object
        /// within it, and one byte more does not.
        #[test]
        fn the_largest_file_under_an_object_bound_fits_and_one_more_byte_does_not(
            l in layout_strategy(), bound in 1u64..100_000_000,
        ) {
            let largest = l.largest_file(bound);
            let longest = |size| (0..l.stripe_count()).map(|s| l.object_len(s, size)).max().unwrap_or(0);
            prop_assert!(longest(largest) <= bound);
            if largest >= l.unit() {
                // A byte more needs a row past the bound, unless the bound
                // ends inside a unit (then the last unit is not whole).
                prop_assert!(longest(largest + 1) > bound || bound % l.unit() != 0);
            }
        }

        /// Object lengths add up to the size and give it back.
        #[test]
        fn object_lengths_give_back_the_size(l in layout_strategy(), size in 0u64..10_000_000) {
            let lens: Vec<u64> = (0..l.stripe_count()).map(|s| l.object_len(s, size)).collect();
            prop_assert_eq!(lens.iter().sum::<u64>(), size);
            prop_assert_eq!(l.size_from_objects(&lens), size);
        }

        #[test]
        fn every_chunk_stays_inside_one_stripe_unit(l in layout_strategy(), off in 0u64..1 << 32, len in 1u64..1_000_000) {
            let mut next = off;
            for c in l.chunks(off, len) {
                prop_assert_eq!(c.file_offset, next);
                prop_assert!(c.len >= 1 && c.len <= l.unit());
                prop_assert_eq!(c.file_offset / l.unit(), (c.file_offset + c.len - 1) / l.unit());
                next += c.len;
            }
            prop_assert_eq!(next, off + len);
        }
    }
}
