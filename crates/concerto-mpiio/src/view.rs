//! Where an access's bytes are: in the file, through the file's view
//! (`MPI_File_set_view`: a displacement, an elementary type, a filetype
//! tiled over the file), and in memory (a buffer of `count` elements of a
//! datatype). Both are read as a *stream*: the access's data in order,
//! byte `k` of the memory stream going to byte `k` of the file stream.

use concerto_core::Extent;

use crate::datatype::Typemap;

/// A typemap's blocks with the bytes of data before each (for finding
/// the block that holds stream byte `k` by binary search).
#[derive(Clone, Debug)]
struct Runs {
    /// (displacement, length, data bytes before it)
    runs: Vec<(i64, u64, u64)>,
    size: u64,
}

impl Runs {
    fn of(map: &Typemap) -> Runs {
        let mut before = 0;
        let runs = map
            .blocks
            .iter()
            .map(|b| {
                let r = (b.disp, b.len, before);
                before += b.len;
                r
            })
            .collect();
        Runs { runs, size: before }
    }

    /// The block holding data byte `k` (< size) and the offset in it.
    fn find(&self, k: u64) -> (usize, u64) {
        let i = self.runs.partition_point(|r| r.2 + r.1 <= k);
        (i, k - self.runs[i].2)
    }

    /// The pieces (displacement from the element's start, length) of data
    /// bytes `[pos, pos + len)` of elements tiled every `stride`, joined
    /// where adjacent, passed to `out` in stream order.
    fn walk(&self, stride: i64, pos: u64, len: u64, mut out: impl FnMut(i64, u64)) {
        if len == 0 || self.size == 0 {
            return;
        }
        let (mut tile, within) = (pos / self.size, pos % self.size);
        // Elements of one block each, tiled edge to edge (MPI_BYTE, any
        // contiguous type): the range is one piece. Walking it element by
        // element cost 5 ms per 1 MiB write of MPI_BYTEs.
        if let [(disp, blen, _)] = self.runs[..] {
            if blen as i64 == stride {
                out(tile as i64 * stride + disp + within as i64, len);
                return;
            }
        }
        let (mut i, mut skip) = self.find(within);
        let mut left = len;
        let mut pending: Option<(i64, u64)> = None;
        while left > 0 {
            let (disp, blen, _) = self.runs[i];
            let take = (blen - skip).min(left);
            let at = tile as i64 * stride + disp + skip as i64;
            pending = match pending {
                Some((p, l)) if p + l as i64 == at => Some((p, l + take)),
                Some((p, l)) => {
                    out(p, l);
                    Some((at, take))
                }
                None => Some((at, take)),
            };
            left -= take;
            skip = 0;
            i += 1;
            if i == self.runs.len() {
                i = 0;
                tile += 1;
            }
        }
        if let Some((p, l)) = pending {
            out(p, l);
        }
    }
}

/// A file view. The default view is the file's bytes from offset 0.
#[derive(Clone, Debug)]
pub struct View {
    pub disp: u64,
    pub etype_size: u64,
    lb: i64,
    extent: i64,
    runs: Runs,
}

impl Default for View {
    fn default() -> View {
        View::new(0, &Typemap::bytes(1), &Typemap::bytes(1)).expect("the byte view is valid")
    }
}

impl View {
    /// A view as `MPI_File_set_view` sets it; the error says why it is not
    /// one (MPI's rules: a filetype's displacements are not negative and do
    /// not decrease, and it is made of whole elementary types).
    pub fn new(disp: u64, etype: &Typemap, filetype: &Typemap) -> Result<View, String> {
        if etype.size == 0 {
            return Err("the elementary type has no data".into());
        }
        if filetype.size == 0 || filetype.extent <= 0 {
            return Err("the filetype has no data".into());
        }
        if filetype.size % etype.size != 0 {
            return Err(format!(
                "the filetype holds {} bytes, not a whole number of {}-byte elementary types",
                filetype.size, etype.size
            ));
        }
        let mut end = 0i64;
        for b in &filetype.blocks {
            if b.disp < end {
                return Err(if b.disp < 0 {
                    format!("the filetype has a negative displacement ({})", b.disp)
                } else {
                    format!(
                        "the filetype's displacements decrease (a block at {} after one ending at {end}); MPI requires them monotonically nondecreasing",
                        b.disp
                    )
                });
            }
            end = b.disp + b.len as i64;
        }
        // Tile k spans [lb, lb + extent) + k * extent (displacements are
        // from the type's origin, which need not be its lower bound).
        if end > filetype.lb + filetype.extent {
            return Err(format!(
                "the filetype's data ends at {end}, past its upper bound {}: its tiles would overlap",
                filetype.lb + filetype.extent
            ));
        }
        Ok(View {
            disp,
            etype_size: etype.size,
            lb: filetype.lb,
            extent: filetype.extent,
            runs: Runs::of(filetype),
        })
    }

    /// The file extents of stream bytes `[pos, pos + len)`, ascending.
    pub fn extents(&self, pos: u64, len: u64) -> Vec<Extent> {
        let mut out = Vec::new();
        self.runs.walk(self.extent, pos, len, |at, l| {
            out.push(Extent::new(self.disp + at as u64, l))
        });
        out
    }

    /// How many stream bytes lie below file offset `offset`: where a file
    /// of that size ends, as a position in the view.
    pub fn position_of(&self, offset: u64) -> u64 {
        let rel = offset as i64 - self.disp as i64 - self.lb;
        if rel <= 0 {
            return 0;
        }
        let tile = rel as u64 / self.extent as u64;
        let within = (rel as u64 % self.extent as u64) as i64 + self.lb;
        let below: u64 = self
            .runs
            .runs
            .iter()
            .map(|&(d, l, _)| (within - d).clamp(0, l as i64) as u64)
            .sum();
        tile * self.runs.size + below
    }
}

/// A memory buffer of `count` elements of a datatype: its pieces
/// (offset from the buffer's address, length) in stream order.
#[derive(Clone, Debug)]
pub struct Memory {
    pieces: Vec<(isize, usize)>,
    /// Stream bytes before each piece.
    before: Vec<u64>,
    pub size: u64,
}

impl Memory {
    pub fn new(datatype: &Typemap, count: u64) -> Memory {
        let runs = Runs::of(datatype);
        let mut pieces = Vec::new();
        runs.walk(datatype.extent, 0, datatype.size * count, |at, l| {
            pieces.push((at as isize, l as usize))
        });
        let mut before = Vec::with_capacity(pieces.len());
        let mut size = 0u64;
        for p in &pieces {
            before.push(size);
            size += p.1 as u64;
        }
        Memory {
            pieces,
            before,
            size,
        }
    }

    /// Whether the stream is one run from the buffer's address.
    pub fn contiguous(&self) -> bool {
        self.pieces.len() <= 1 && self.pieces.first().is_none_or(|p| p.0 == 0)
    }

    /// The pieces of stream bytes `[pos, pos + len)`: (offset from the
    /// buffer, length).
    fn range(&self, pos: u64, len: u64, mut f: impl FnMut(isize, usize)) {
        let mut i = self.before.partition_point(|&b| b <= pos).saturating_sub(1);
        let (mut at, end) = (pos, pos + len);
        while at < end && i < self.pieces.len() {
            let (off, plen) = self.pieces[i];
            let skip = at - self.before[i];
            let take = (plen as u64 - skip).min(end - at);
            f(off + skip as isize, take as usize);
            at += take;
            i += 1;
        }
    }

    /// Copies stream bytes `[pos, pos + len)` out of the buffer at `base`.
    ///
    /// # Safety
    /// `base` must hold the elements this stream describes (MPI's contract
    /// with the caller of the I/O call).
    pub unsafe fn gather(&self, base: *const u8, pos: u64, len: u64, out: &mut Vec<u8>) {
        self.range(pos, len, |off, l| {
            // SAFETY: the caller's buffer holds every piece of its stream.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(base.offset(off), l) });
        });
    }

    /// Copies `data` into stream bytes `[pos, pos + data.len())` of the
    /// buffer at `base`.
    ///
    /// # Safety
    /// As [`Memory::gather`], and the buffer must be writable.
    pub unsafe fn scatter(&self, base: *mut u8, pos: u64, data: &[u8]) {
        let mut from = 0usize;
        self.range(pos, data.len() as u64, |off, l| {
            // SAFETY: as in gather; `data` has the bytes of this range.
            unsafe {
                std::ptr::copy_nonoverlapping(data[from..].as_ptr(), base.offset(off), l);
            }
            from += l;
        });
    }
}

/// Where each file byte of a list of extents is in their concatenation.
pub(crate) struct Positions {
    /// (offset, length, position), by offset.
    runs: Vec<(u64, u64, u64)>,
    pub(crate) total: u64,
}

impl Positions {
    pub(crate) fn of(extents: &[Extent]) -> Positions {
        let mut pos = 0;
        let mut runs: Vec<(u64, u64, u64)> = extents
            .iter()
            .map(|e| {
                let r = (e.offset, e.len, pos);
                pos += e.len;
                r
            })
            .collect();
        runs.sort_unstable_by_key(|r| r.0);
        Positions { runs, total: pos }
    }

    /// The runs of `piece` (all of it within these extents): (position, length).
    pub(crate) fn each(&self, piece: Extent, mut f: impl FnMut(usize, usize)) {
        let (mut off, end) = (piece.offset, piece.end());
        let mut i = self.runs.partition_point(|r| r.0 + r.1 <= off);
        while off < end && i < self.runs.len() {
            let (o, l, p) = self.runs[i];
            let take = (o + l).min(end) - off;
            f((p + off - o) as usize, take as usize);
            off += take;
            i += 1;
        }
    }

    pub(crate) fn copy_in(&self, piece: Extent, bytes: &[u8], into: &mut [u8]) {
        let mut from = 0;
        self.each(piece, |at, n| {
            into[at..at + n].copy_from_slice(&bytes[from..from + n]);
            from += n;
        });
    }

    pub(crate) fn copy_out(&self, piece: Extent, from: &[u8], out: &mut Vec<u8>) {
        self.each(piece, |at, n| out.extend_from_slice(&from[at..at + n]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::Block;

    fn map(blocks: &[(i64, u64)], extent: i64) -> Typemap {
        Typemap {
            blocks: blocks
                .iter()
                .map(|&(disp, len)| Block { disp, len })
                .collect(),
            size: blocks.iter().map(|b| b.1).sum(),
            lb: 0,
            extent,
        }
    }

    fn pairs(e: &[Extent]) -> Vec<(u64, u64)> {
        e.iter().map(|e| (e.offset, e.len)).collect()
    }

    #[test]
    fn a_strided_view_tiles_its_filetype_after_the_displacement() {
        // 4 bytes of every 16, from offset 100
        let v = View::new(100, &Typemap::bytes(1), &map(&[(4, 4)], 16)).unwrap();
        assert_eq!(pairs(&v.extents(0, 10)), vec![(104, 4), (120, 4), (136, 2)]);
        assert_eq!(pairs(&v.extents(6, 4)), vec![(122, 2), (136, 2)]);
        assert_eq!(v.position_of(100), 0);
        assert_eq!(v.position_of(106), 2);
        assert_eq!(v.position_of(117), 4);
        assert_eq!(v.position_of(124), 8);
    }

    #[test]
    fn adjacent_tiles_join_into_one_extent() {
        let v = View::new(0, &Typemap::bytes(4), &map(&[(0, 8)], 8)).unwrap();
        assert_eq!(pairs(&v.extents(4, 20)), vec![(4, 20)]);
    }

    #[test]
    fn a_dense_type_of_any_count_is_one_piece() {
        // MPI_BYTE × 1 MiB, as IOR writes: one piece, in memory and file.
        let m = Memory::new(&Typemap::bytes(1), 1 << 20);
        assert!(m.contiguous() && m.size == 1 << 20);
        assert_eq!(
            pairs(&View::default().extents(5, 1 << 20)),
            vec![(5, 1 << 20)]
        );
        // One block edge to edge but displaced (lb at its start).
        let mut t = map(&[(4, 8)], 8);
        t.lb = 4;
        let v = View::new(0, &Typemap::bytes(1), &t).unwrap();
        assert_eq!(pairs(&v.extents(2, 10)), vec![(6, 10)]);
        // A gap between elements keeps them apart.
        let v = View::new(0, &Typemap::bytes(1), &map(&[(0, 8)], 12)).unwrap();
        assert_eq!(pairs(&v.extents(6, 4)), vec![(6, 2), (12, 2)]);
    }

    #[test]
    fn views_mpi_forbids_are_refused_with_the_reason() {
        let e = View::new(0, &Typemap::bytes(1), &map(&[(8, 4), (0, 4)], 16)).unwrap_err();
        assert!(e.contains("decrease"), "{e}");
        let e = View::new(0, &Typemap::bytes(1), &map(&[(-4, 4)], 16)).unwrap_err();
        assert!(e.contains("negative"), "{e}");
        let e = View::new(0, &Typemap::bytes(8), &map(&[(0, 12)], 16)).unwrap_err();
        assert!(e.contains("elementary"), "{e}");
        let e = View::new(0, &Typemap::bytes(1), &map(&[(0, 12)], 8)).unwrap_err();
        assert!(e.contains("upper bound"), "{e}");
    }

    #[test]
    fn a_filetype_whose_lower_bound_is_not_its_origin_tiles_from_its_bounds() {
        // HDF5's chunk fills: blocks at absolute offsets, lb at the first
        let mut t = map(&[(1000, 10), (1020, 12)], 32);
        t.lb = 1000;
        let v = View::new(0, &Typemap::bytes(1), &t).unwrap();
        assert_eq!(pairs(&v.extents(0, 22)), vec![(1000, 10), (1020, 12)]);
        // the next tile is one extent on
        assert_eq!(pairs(&v.extents(22, 5)), vec![(1032, 5)]);
        assert_eq!(v.position_of(1000), 0);
        assert_eq!(v.position_of(1015), 10);
        assert_eq!(v.position_of(1033), 23);
    }

    #[test]
    fn positions_find_file_bytes_in_a_concatenation_of_extents_in_any_order() {
        // two extents, the later one first in the concatenation
        let p = Positions::of(&[Extent::new(100, 10), Extent::new(0, 4)]);
        assert_eq!(p.total, 14);
        let mut runs = Vec::new();
        p.each(Extent::new(2, 2), |at, n| runs.push((at, n)));
        p.each(Extent::new(105, 5), |at, n| runs.push((at, n)));
        assert_eq!(runs, vec![(12, 2), (5, 5)]);
        let data: Vec<u8> = (0..14).collect();
        let mut out = Vec::new();
        p.copy_out(Extent::new(0, 4), &data, &mut out);
        assert_eq!(out, vec![10, 11, 12, 13]);
    }

    #[test]
    fn memory_gathers_and_scatters_its_pieces_in_stream_order() {
        // two elements of {bytes 2..4, bytes 0..1}, extent 5
        let m = Memory::new(&map(&[(2, 2), (0, 1)], 5), 2);
        let buf: Vec<u8> = (0..10).collect();
        let mut out = Vec::new();
        unsafe { m.gather(buf.as_ptr(), 0, m.size, &mut out) };
        assert_eq!(out, vec![2, 3, 0, 7, 8, 5]);
        let mut part = Vec::new();
        unsafe { m.gather(buf.as_ptr(), 1, 3, &mut part) };
        assert_eq!(part, vec![3, 0, 7]);
        let mut back = vec![0u8; 10];
        unsafe { m.scatter(back.as_mut_ptr(), 1, &[30, 40, 70]) };
        assert_eq!(back, vec![40, 0, 0, 30, 0, 0, 0, 70, 0, 0]);
    }
}
