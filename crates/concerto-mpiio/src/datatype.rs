//! MPI derived datatypes flattened into their blocks: where each byte of a
//! datatype's data lies, relative to its start, in the order MPI defines
//! (the type map).
//!
//! The MPI side (c/concerto_mpiio.c) reads a datatype with
//! `MPI_Type_get_envelope`/`MPI_Type_get_contents`, recursively, and writes
//! it as a flat list of integers (its *description*, below); everything
//! that gives the bytes their places is here, where it can be tested
//! without MPI. Written by hand because this is the product: ROMIO's
//! flattening is C inside ROMIO, and no Rust crate reads MPI's combiners.
//!
//! A description is a tree, each node
//! `[combiner, lb, extent, ...]`: a predefined type (`NAMED`) is followed
//! by its size; any other by `ni, na, nt`, the `ni` integers and `na`
//! addresses `MPI_Type_get_contents` gave, then its `nt` children. The lower
//! bound and extent are MPI's own (`MPI_Type_get_extent`), so alignment
//! padding and resized types are as the MPI library says. Constants that
//! differ between MPI libraries are translated on the MPI side: order C 0,
//! Fortran 1; distributions block 0, cyclic 1, none 2; the default
//! distribution argument -1.

/// The combiners, numbered as the MPI side writes them.
pub mod combiner {
    pub const NAMED: i64 = 0;
    pub const DUP: i64 = 1;
    pub const CONTIGUOUS: i64 = 2;
    pub const VECTOR: i64 = 3;
    pub const HVECTOR: i64 = 4;
    pub const INDEXED: i64 = 5;
    pub const HINDEXED: i64 = 6;
    pub const INDEXED_BLOCK: i64 = 7;
    pub const HINDEXED_BLOCK: i64 = 8;
    pub const STRUCT: i64 = 9;
    pub const SUBARRAY: i64 = 10;
    pub const DARRAY: i64 = 11;
    pub const RESIZED: i64 = 12;
}

/// More blocks than this in one datatype is refused rather than held (a
/// type map of 64 Mi blocks is 1 GiB).
pub const MAX_BLOCKS: usize = 1 << 26;

/// A contiguous run of a datatype's data: `len` bytes at `disp` from the
/// datatype's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub disp: i64,
    pub len: u64,
}

/// A datatype's blocks in type-map order (adjacent ones joined), its size
/// (bytes of data) and MPI's lower bound and extent (the stride at which
/// consecutive elements are laid out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Typemap {
    pub blocks: Vec<Block>,
    pub size: u64,
    pub lb: i64,
    pub extent: i64,
}

impl Typemap {
    /// A contiguous type of `size` bytes (a predefined type, or `MPI_BYTE`s).
    pub fn bytes(size: u64) -> Typemap {
        Typemap {
            blocks: if size > 0 {
                vec![Block { disp: 0, len: size }]
            } else {
                Vec::new()
            },
            size,
            lb: 0,
            extent: size as i64,
        }
    }

    /// Whether `count` elements are one run of bytes from the start.
    pub fn is_contiguous(&self) -> bool {
        self.blocks.len() <= 1
            && self.blocks.first().is_none_or(|b| b.disp == 0)
            && self.extent == self.size as i64
    }

    /// Reads a description (see the module's documentation).
    pub fn decode(description: &[i64]) -> Result<Typemap, String> {
        let mut reader = Reader {
            words: description,
            at: 0,
        };
        let map = reader.node(0)?;
        if reader.at != description.len() {
            return Err(format!(
                "datatype description has {} words after its end",
                description.len() - reader.at
            ));
        }
        Ok(map)
    }
}

/// Appends blocks, joining one to the previous when it continues it.
#[derive(Default)]
struct Builder {
    blocks: Vec<Block>,
    size: u64,
}

impl Builder {
    fn push(&mut self, disp: i64, len: u64) -> Result<(), String> {
        if len == 0 {
            return Ok(());
        }
        self.size += len;
        if let Some(last) = self.blocks.last_mut() {
            if last.disp + last.len as i64 == disp {
                last.len += len;
                return Ok(());
            }
        }
        if self.blocks.len() >= MAX_BLOCKS {
            return Err(format!(
                "the datatype has more than {MAX_BLOCKS} separate blocks"
            ));
        }
        self.blocks.push(Block { disp, len });
        Ok(())
    }

    /// `count` copies of `child`, the first at `at`, each `child.extent`
    /// after the previous.
    fn place(&mut self, child: &Typemap, count: u64, at: i64) -> Result<(), String> {
        if child.is_contiguous() && child.size > 0 {
            return self.push(at, child.size * count);
        }
        for i in 0..count {
            let base = at + i as i64 * child.extent;
            for b in &child.blocks {
                self.push(base + b.disp, b.len)?;
            }
        }
        Ok(())
    }
}

struct Reader<'a> {
    words: &'a [i64],
    at: usize,
}

/// A count or length read from a description: never negative.
fn count(v: i64, what: &str) -> Result<u64, String> {
    u64::try_from(v).map_err(|_| format!("datatype: negative {what} ({v})"))
}

impl Reader<'_> {
    fn word(&mut self) -> Result<i64, String> {
        let w = *self
            .words
            .get(self.at)
            .ok_or("datatype description ends early")?;
        self.at += 1;
        Ok(w)
    }

    fn words(&mut self, n: usize) -> Result<&[i64], String> {
        let s = self
            .words
            .get(self.at..self.at + n)
            .ok_or("datatype description ends early")?;
        self.at += n;
        Ok(s)
    }

    fn node(&mut self, depth: u32) -> Result<Typemap, String> {
        if depth > 64 {
            return Err("datatype nested more than 64 deep".into());
        }
        let kind = self.word()?;
        let lb = self.word()?;
        let extent = self.word()?;
        if kind == combiner::NAMED {
            let size = count(self.word()?, "size")?;
            let mut map = Typemap::bytes(size);
            map.lb = lb;
            map.extent = extent;
            return Ok(map);
        }
        let ni = count(self.word()?, "integer count")? as usize;
        let na = count(self.word()?, "address count")? as usize;
        let nt = count(self.word()?, "type count")? as usize;
        let ints = self.words(ni)?.to_vec();
        let addrs = self.words(na)?.to_vec();
        let children = (0..nt)
            .map(|_| self.node(depth + 1))
            .collect::<Result<Vec<_>, _>>()?;
        let made = Combined {
            kind,
            ints,
            addrs,
            children,
        };
        let mut out = Builder::default();
        made.place_into(&mut out)?;
        Ok(Typemap {
            blocks: out.blocks,
            size: out.size,
            lb,
            extent,
        })
    }
}

/// A derived datatype as its description gives it: the combiner that
/// made it, with its integers, addresses and component types (as
/// MPI_Type_get_contents returns them).
struct Combined {
    kind: i64,
    ints: Vec<i64>,
    addrs: Vec<i64>,
    children: Vec<Typemap>,
}

impl Combined {
    fn int(&self, i: usize) -> Result<i64, String> {
        self.ints
            .get(i)
            .copied()
            .ok_or_else(|| format!("datatype: combiner {} lacks integer {i}", self.kind))
    }

    fn addr(&self, i: usize) -> Result<i64, String> {
        self.addrs
            .get(i)
            .copied()
            .ok_or_else(|| format!("datatype: combiner {} lacks address {i}", self.kind))
    }

    fn child(&self, i: usize) -> Result<&Typemap, String> {
        self.children
            .get(i)
            .ok_or_else(|| format!("datatype: combiner {} lacks type {i}", self.kind))
    }

    /// Places the datatype's blocks, in its type map's order.
    fn place_into(&self, out: &mut Builder) -> Result<(), String> {
        use combiner::*;
        let kind = self.kind;
        match kind {
            DUP | RESIZED => out.place(self.child(0)?, 1, 0),
            CONTIGUOUS => out.place(self.child(0)?, count(self.int(0)?, "count")?, 0),
            VECTOR | HVECTOR => {
                let t = self.child(0)?;
                let n = count(self.int(0)?, "count")?;
                let blocklen = count(self.int(1)?, "block length")?;
                let stride = if kind == VECTOR {
                    self.int(2)? * t.extent
                } else {
                    self.addr(0)?
                };
                (0..n).try_for_each(|i| out.place(t, blocklen, i as i64 * stride))
            }
            INDEXED | HINDEXED => {
                let t = self.child(0)?;
                let n = count(self.int(0)?, "count")? as usize;
                (0..n).try_for_each(|i| {
                    let blocklen = count(self.int(1 + i)?, "block length")?;
                    let disp = if kind == INDEXED {
                        self.int(1 + n + i)? * t.extent
                    } else {
                        self.addr(i)?
                    };
                    out.place(t, blocklen, disp)
                })
            }
            INDEXED_BLOCK | HINDEXED_BLOCK => {
                let t = self.child(0)?;
                let n = count(self.int(0)?, "count")? as usize;
                let blocklen = count(self.int(1)?, "block length")?;
                (0..n).try_for_each(|i| {
                    let disp = if kind == INDEXED_BLOCK {
                        self.int(2 + i)? * t.extent
                    } else {
                        self.addr(i)?
                    };
                    out.place(t, blocklen, disp)
                })
            }
            STRUCT => {
                let n = count(self.int(0)?, "count")? as usize;
                (0..n).try_for_each(|i| {
                    let blocklen = count(self.int(1 + i)?, "block length")?;
                    out.place(self.child(i)?, blocklen, self.addr(i)?)
                })
            }
            SUBARRAY => self.subarray(out),
            DARRAY => self.darray(out),
            other => Err(format!("datatype combiner {other} is not known")),
        }
    }

    /// MPI_Type_create_subarray: sizes, subsizes, starts, order.
    fn subarray(&self, out: &mut Builder) -> Result<(), String> {
        let nd = count(self.int(0)?, "dimensions")? as usize;
        let dims = |k: usize| -> Result<Vec<u64>, String> {
            (0..nd)
                .map(|d| count(self.int(1 + k * nd + d)?, "subarray size"))
                .collect()
        };
        let (sizes, subsizes, starts) = (dims(0)?, dims(1)?, dims(2)?);
        let fortran = self.int(1 + 3 * nd)? == 1;
        for d in 0..nd {
            if starts[d] + subsizes[d] > sizes[d] {
                return Err(format!(
                    "subarray: dimension {d} starts at {} with {} of {} elements",
                    starts[d], subsizes[d], sizes[d]
                ));
            }
        }
        let ranges: Vec<Vec<(u64, u64)>> = (0..nd)
            .map(|d| vec![(starts[d], starts[d] + subsizes[d])])
            .collect();
        grid(out, self.child(0)?, &sizes, &ranges, fortran)
    }

    /// MPI_Type_create_darray: size, rank, global sizes, distributions,
    /// distribution arguments, process grid, order.
    fn darray(&self, out: &mut Builder) -> Result<(), String> {
        let size = count(self.int(0)?, "processes")?;
        let rank = count(self.int(1)?, "rank")?;
        let nd = count(self.int(2)?, "dimensions")? as usize;
        let arr = |k: usize| -> Result<Vec<i64>, String> {
            (0..nd).map(|d| self.int(3 + k * nd + d)).collect()
        };
        let gsizes: Vec<u64> = arr(0)?
            .into_iter()
            .map(|v| count(v, "global size"))
            .collect::<Result<_, _>>()?;
        let (distribs, dargs) = (arr(1)?, arr(2)?);
        let psizes: Vec<u64> = arr(3)?
            .into_iter()
            .map(|v| count(v, "process grid size"))
            .collect::<Result<_, _>>()?;
        let fortran = self.int(3 + 4 * nd)? == 1;
        if psizes.iter().product::<u64>() != size || rank >= size.max(1) {
            return Err(format!(
                "darray: process grid {psizes:?} does not hold {size} processes (rank {rank})"
            ));
        }
        // The process grid is row-major whatever the array's order.
        let mut coords = vec![0u64; nd];
        let mut r = rank;
        for d in (0..nd).rev() {
            coords[d] = r % psizes[d].max(1);
            r /= psizes[d].max(1);
        }
        let ranges = (0..nd)
            .map(|d| owned(gsizes[d], distribs[d], dargs[d], psizes[d], coords[d]))
            .collect::<Result<Vec<_>, _>>()?;
        grid(out, self.child(0)?, &gsizes, &ranges, fortran)
    }
}

/// The index ranges of one dimension of a distributed array that process
/// coordinate `coord` owns.
fn owned(
    gsize: u64,
    distrib: i64,
    darg: i64,
    psize: u64,
    coord: u64,
) -> Result<Vec<(u64, u64)>, String> {
    match distrib {
        // none
        2 => Ok(vec![(0, gsize)]),
        // block
        0 => {
            let b = if darg < 0 {
                gsize.div_ceil(psize.max(1))
            } else {
                darg as u64
            };
            if b * psize < gsize {
                return Err(format!(
                    "darray: blocks of {b} over {psize} processes do not cover {gsize} elements"
                ));
            }
            let lo = (coord * b).min(gsize);
            Ok(vec![(lo, (lo + b).min(gsize))])
        }
        // cyclic
        1 => {
            let b = if darg < 0 { 1 } else { darg.max(1) as u64 };
            let mut out = Vec::new();
            let mut lo = coord * b;
            while lo < gsize {
                out.push((lo, (lo + b).min(gsize)));
                lo += b * psize.max(1);
            }
            Ok(out)
        }
        other => Err(format!("darray: distribution {other} is not known")),
    }
}

/// The elements of an array of `sizes` (of `child`) whose index in each
/// dimension lies in that dimension's `ranges`, in array order (C: the
/// last dimension fastest; Fortran: the first).
fn grid(
    out: &mut Builder,
    child: &Typemap,
    sizes: &[u64],
    ranges: &[Vec<(u64, u64)>],
    fortran: bool,
) -> Result<(), String> {
    let nd = sizes.len();
    if nd == 0 {
        return Ok(());
    }
    // Dimensions from slowest to fastest, with their strides in elements.
    let order: Vec<usize> = if fortran {
        (0..nd).rev().collect()
    } else {
        (0..nd).collect()
    };
    let mut stride = vec![1u64; nd];
    for w in (0..nd - 1).rev() {
        stride[order[w]] = stride[order[w + 1]] * sizes[order[w + 1]];
    }
    let fastest = order[nd - 1];
    // An odometer over the outer dimensions' indices.
    let outer = &order[..nd - 1];
    let mut idx: Vec<(usize, u64)> = Vec::with_capacity(outer.len()); // (range number, index)
    for &d in outer {
        match ranges[d].first() {
            Some(&(lo, hi)) if lo < hi => idx.push((0, lo)),
            _ => return Ok(()),
        }
    }
    loop {
        let base: u64 = outer
            .iter()
            .zip(&idx)
            .map(|(&d, &(_, i))| i * stride[d])
            .sum();
        for &(lo, hi) in &ranges[fastest] {
            out.place(child, hi - lo, (base + lo) as i64 * child.extent)?;
        }
        // Advance the odometer, fastest outer dimension first.
        let mut w = outer.len();
        loop {
            if w == 0 {
                return Ok(());
            }
            w -= 1;
            let d = outer[w];
            let (r, i) = idx[w];
            if i + 1 < ranges[d][r].1 {
                idx[w].1 = i + 1;
                break;
            }
            if let Some(&(lo, _)) = ranges[d].get(r + 1) {
                idx[w] = (r + 1, lo);
                break;
            }
            idx[w] = (0, ranges[d][0].0);
        }
    }
}

#[cfg(test)]
mod tests;
