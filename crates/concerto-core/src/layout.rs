//! Striping: the one place where file ranges become per-server pieces and back.
//!
//! A file is cut into stripe units of `unit` bytes dealt round-robin over the
//! layout's servers: unit `k` goes to `servers[k % count]` at object offset
//! `(k / count) * unit`. A contiguous file range therefore lands on each
//! server as one contiguous object range, which is why one request per
//! server suffices for contiguous I/O.

use serde::{Deserialize, Serialize};
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
    pub extents: Vec<Extent>,
    pub bytes: u64,
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
        let mut chunks: Vec<Chunk> = extents
            .iter()
            .flat_map(|e| self.chunks(e.offset, e.len))
            .collect();
        chunks.sort_unstable_by_key(|c| (c.slot, c.object_offset));
        let mut pieces: Vec<ServerPiece> = Vec::new();
        for c in chunks {
            match pieces.last_mut() {
                Some(p) if p.slot == c.slot => {
                    p.bytes += c.len;
                    let last = p.extents.last_mut().expect("a piece always has an extent");
                    if last.end() == c.object_offset {
                        last.len += c.len;
                    } else {
                        p.extents.push(Extent::new(c.object_offset, c.len));
                    }
                }
                _ => pieces.push(ServerPiece {
                    slot: c.slot,
                    server: c.server,
                    extents: vec![Extent::new(c.object_offset, c.len)],
                    bytes: c.len,
                }),
            }
        }
        pieces
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
            assert_eq!(p.extents, vec![Extent::new(0, 8192)]);
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
