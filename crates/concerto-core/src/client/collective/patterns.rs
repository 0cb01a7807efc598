//! The access patterns of resonant-io.txt's programs: what each process
//! asks for in one collective call. Shared by `concerto plan collective`,
//! the simulator and the MPI-IO layer, so all three plan the same calls.
//!
//! A pattern is written `name:key=value,...`, sizes with units
//! (`demo:segment=64KiB`).

use crate::request::Extent;
use crate::units::parse_size;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// The demonstration program (Section 1.2): process i asks for
    /// segments k·P + i, k = 0..3, of the call's range.
    Demo { segment: u64 },
    /// mpi-io-test: in each call the P processes ask for P consecutive
    /// segments, process i for the i-th.
    MpiIoTest { segment: u64 },
    /// ior-mpi-io: the file is cut into P equal blocks, one per process;
    /// in call k every process asks for the k-th segment of its block.
    IorMpiIo { segment: u64, file: u64 },
    /// IOR's shared file with collective I/O (`ior -a MPIIO -c`): segment
    /// s holds one block per process, process i's at (s·P + i)·block; each
    /// call moves one transfer of every process's block, in order, so call
    /// c is transfer c mod (block / transfer) of segment c div it.
    Ior { block: u64, transfer: u64 },
    /// noncontig: a vector datatype over P columns; each row holds one
    /// block of `elmtcount` 4-byte elements per process; a call covers
    /// `call_bytes` of the file.
    Noncontig { elmtcount: u64, call_bytes: u64 },
    /// HPIO (non-contiguous in the file): `count` regions of `size` bytes
    /// per process, `spacing` bytes apart, the processes' regions taking
    /// turns: region r of process i at (r·P + i)·(size + spacing).
    Hpio { count: u64, size: u64, spacing: u64 },
    /// coll_perf: an n × n × n array of 4-byte integers, block-distributed
    /// over a 3-D grid of the processes (as balanced as P allows, as
    /// MPI_Dims_create makes it); each process asks for its block, one
    /// contiguous run per (z, y) row.
    CollPerf { n: u64 },
    /// mpi-tile-io, and BTIO's view with `planes` > 1: see [`tile_extents`].
    /// Ranks beyond the `px × py` grid ask for nothing.
    Tiles {
        grid: [u64; 2],
        tile: [u64; 2],
        planes: u64,
        element: u64,
    },
}

const NAMES: &str = "demo, mpi-io-test, ior-mpi-io, ior, noncontig, hpio, coll-perf, tiles";

/// `p` as three factors, largest first, as close to each other as possible.
pub fn dims3(p: u64) -> [u64; 3] {
    let mut best = [p.max(1), 1, 1];
    for a in 1..=p {
        if p % a != 0 || a * a * a < p {
            continue;
        }
        for b in 1..=a {
            if (p / a) % b != 0 {
                continue;
            }
            let c = p / a / b;
            if c > b {
                continue;
            }
            if a - c < best[0] - best[2] {
                best = [a, b, c];
            }
        }
    }
    best
}

/// A dataset of (px·tx) × (py·ty) elements of `element` bytes, row-major,
/// in `planes` planes (3-D); process `rank` holds tile (rank mod px,
/// rank div px) of every plane, so its extents nest two strides deep when
/// there are several planes (BTIO's view). Call k works on the k-th
/// dataset, stored after the previous ones. The simulator's mpi-tile-io
/// workload and the planners both read tiles from here.
pub fn tile_extents(
    grid: [u64; 2],
    tile: [u64; 2],
    planes: u64,
    element: u64,
    rank: u64,
    call: u64,
) -> Vec<Extent> {
    let ([px, py], [tx, ty]) = (grid, tile);
    let row_elems = px * tx;
    let plane_elems = row_elems * py * ty;
    let dataset = plane_elems * planes * element;
    let (col, row) = (rank % px.max(1), rank / px.max(1));
    (0..planes)
        .flat_map(|z| {
            (0..ty).map(move |y| {
                let elem = z * plane_elems + (row * ty + y) * row_elems + col * tx;
                Extent::new(call * dataset + elem * element, tx * element)
            })
        })
        .collect()
}

/// A pattern's `key=value` list, checked against the keys its pattern
/// knows; errors name the pattern and the key.
struct PatternKeys<'a> {
    name: &'a str,
    keys: Vec<(&'a str, &'a str)>,
}

impl<'a> PatternKeys<'a> {
    fn parse(name: &'a str, rest: &'a str) -> Result<PatternKeys<'a>, String> {
        let mut keys: Vec<(&str, &str)> = Vec::new();
        for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: write key=value"))?;
            keys.push((k.trim(), v.trim()));
        }
        let known: &[&str] = match name {
            "demo" | "mpi-io-test" => &["segment"],
            "ior-mpi-io" => &["segment", "file"],
            "ior" => &["block", "transfer"],
            "noncontig" => &["elmtcount", "call"],
            "tiles" => &["grid", "tile", "planes", "element"],
            "hpio" => &["count", "size", "spacing"],
            "coll-perf" => &["n"],
            _ => return Err(format!("unknown pattern {name:?} (known: {NAMES})")),
        };
        if let Some((k, _)) = keys.iter().find(|(k, _)| !known.contains(k)) {
            return Err(format!(
                "{name}: unknown key {k:?} (known: {})",
                known.join(", ")
            ));
        }
        Ok(PatternKeys { name, keys })
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.keys.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
    }

    /// A size above 0 (`64KiB`), or `default` when not given.
    fn size(&self, key: &str, default: Option<u64>) -> Result<u64, String> {
        let name = self.name;
        match self.get(key) {
            Some(v) => match parse_size(v) {
                Ok(0) => Err(format!("{name}: {key} must be > 0")),
                Ok(n) => Ok(n),
                Err(e) => Err(format!("{name}: {key}: {e}")),
            },
            None => default.ok_or_else(|| format!("{name}: give {key}=...")),
        }
    }

    /// `AxB`: two positive whole numbers.
    fn pair(&self, key: &str) -> Result<[u64; 2], String> {
        let name = self.name;
        let v = self
            .get(key)
            .ok_or_else(|| format!("{name}: give {key}=AxB"))?;
        let parsed: Option<Vec<u64>> = v.split('x').map(|n| n.trim().parse().ok()).collect();
        match parsed.as_deref() {
            Some(&[a, b]) if a > 0 && b > 0 => Ok([a, b]),
            _ => Err(format!("{name}: {key}={v:?} is not AxB with A, B > 0")),
        }
    }
}

impl Pattern {
    /// Reads `name:key=value,...`; an error names the key.
    pub fn parse(spec: &str) -> Result<Pattern, String> {
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let keys = PatternKeys::parse(name, rest)?;
        Ok(match name {
            "tiles" => {
                Pattern::Tiles {
                    grid: keys.pair("grid")?,
                    tile: keys.pair("tile")?,
                    planes: match keys.get("planes") {
                        Some(v) => v.parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| {
                            format!("{name}: planes={v:?} is not a whole number > 0")
                        })?,
                        None => 1,
                    },
                    element: keys.size("element", None)?,
                }
            }
            "demo" => Pattern::Demo {
                segment: keys.size("segment", None)?,
            },
            "mpi-io-test" => Pattern::MpiIoTest {
                segment: keys.size("segment", None)?,
            },
            "ior-mpi-io" => Pattern::IorMpiIo {
                segment: keys.size("segment", None)?,
                file: keys.size("file", Some(1 << 30))?,
            },
            "ior" => {
                let transfer = keys.size("transfer", None)?;
                let block = keys.size("block", Some(transfer))?;
                if block % transfer != 0 {
                    return Err(format!(
                        "{name}: block={block} is not a whole number of transfers of {transfer} bytes"
                    ));
                }
                Pattern::Ior { block, transfer }
            }
            "hpio" => Pattern::Hpio {
                count: keys.size("count", None)?,
                size: keys.size("size", None)?,
                spacing: match keys.get("spacing") {
                    Some(v) => parse_size(v).map_err(|e| format!("{name}: spacing: {e}"))?,
                    None => 0,
                },
            },
            "coll-perf" => Pattern::CollPerf {
                n: keys.size("n", None)?,
            },
            _ => Pattern::Noncontig {
                elmtcount: keys.size("elmtcount", None)?,
                call_bytes: keys.size("call", Some(16 << 20))?,
            },
        })
    }

    /// How far each call's accesses lie past the previous call's, when
    /// every call asks for the same as the first, shifted: then call k's
    /// lists are call 0's moved by k times this. None for ior-mpi-io, whose
    /// calls run out at the end of each process's block.
    pub fn call_shift(&self, procs: u32) -> Option<u64> {
        let p = procs as u64;
        match *self {
            Pattern::Demo { segment } => Some(4 * p * segment),
            Pattern::MpiIoTest { segment } => Some(p * segment),
            Pattern::IorMpiIo { .. } => None,
            // Calls within a block move by a transfer, to the next segment by more.
            Pattern::Ior { block, transfer } => (block == transfer).then_some(p * block),
            Pattern::Noncontig {
                elmtcount,
                call_bytes,
            } => {
                let row = elmtcount * 4 * p;
                Some((call_bytes / row).max(1) * row)
            }
            Pattern::Hpio {
                count,
                size,
                spacing,
            } => Some(count * p * (size + spacing)),
            Pattern::CollPerf { n } => Some(n * n * n * 4),
            Pattern::Tiles {
                grid,
                tile,
                planes,
                element,
            } => Some(grid[0] * tile[0] * grid[1] * tile[1] * planes * element),
        }
    }

    /// What each of `procs` processes asks for in call `call`.
    pub fn accesses(&self, procs: u32, call: u64) -> Vec<Vec<Extent>> {
        let p = procs as u64;
        (0..p)
            .map(|i| match *self {
                Pattern::Demo { segment } => (0..4)
                    .map(|k| Extent::new((call * 4 * p + k * p + i) * segment, segment))
                    .collect(),
                Pattern::MpiIoTest { segment } => {
                    vec![Extent::new((call * p + i) * segment, segment)]
                }
                Pattern::IorMpiIo { segment, file } => {
                    let block = file / p.max(1);
                    let at = call * segment;
                    if at + segment > block {
                        Vec::new()
                    } else {
                        vec![Extent::new(i * block + at, segment)]
                    }
                }
                Pattern::Ior { block, transfer } => {
                    let per_block = block / transfer;
                    let (segment, k) = (call / per_block, call % per_block);
                    vec![Extent::new(
                        (segment * p + i) * block + k * transfer,
                        transfer,
                    )]
                }
                Pattern::Hpio {
                    count,
                    size,
                    spacing,
                } => {
                    let stride = size + spacing;
                    let base = call * count * p * stride;
                    (0..count)
                        .map(|r| Extent::new(base + (r * p + i) * stride, size))
                        .collect()
                }
                Pattern::CollPerf { n } => {
                    // Process i's block: its coordinates in the grid, x fastest.
                    let [dx, dy, dz] = dims3(p);
                    let (cx, cy, cz) = (i % dx, (i / dx) % dy, i / (dx * dy));
                    let span = |c: u64, d: u64| (c * n / d, (c + 1) * n / d);
                    let ((x0, x1), (y0, y1), (z0, z1)) = (span(cx, dx), span(cy, dy), span(cz, dz));
                    let base = call * n * n * n * 4;
                    (z0..z1)
                        .flat_map(|z| {
                            (y0..y1).map(move |y| {
                                Extent::new(base + ((z * n + y) * n + x0) * 4, (x1 - x0) * 4)
                            })
                        })
                        .filter(|e| e.len > 0)
                        .collect()
                }
                Pattern::Tiles {
                    grid,
                    tile,
                    planes,
                    element,
                } => {
                    if i < grid[0] * grid[1] {
                        tile_extents(grid, tile, planes, element, i, call)
                    } else {
                        Vec::new()
                    }
                }
                Pattern::Noncontig {
                    elmtcount,
                    call_bytes,
                } => {
                    let piece = elmtcount * 4;
                    let row = piece * p;
                    let rows = (call_bytes / row).max(1);
                    (0..rows)
                        .map(|r| Extent::new(call * rows * row + r * row + i * piece, piece))
                        .collect()
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_read_from_their_specs() {
        assert_eq!(
            Pattern::parse("demo:segment=64KiB"),
            Ok(Pattern::Demo { segment: 65536 })
        );
        assert_eq!(
            Pattern::parse("ior-mpi-io:segment=1MiB"),
            Ok(Pattern::IorMpiIo {
                segment: 1 << 20,
                file: 1 << 30
            })
        );
        let a = Pattern::parse("demo:segment=10").unwrap().accesses(2, 0);
        assert_eq!(
            a[1],
            vec![
                Extent::new(10, 10),
                Extent::new(30, 10),
                Extent::new(50, 10),
                Extent::new(70, 10)
            ]
        );
        let n = Pattern::parse("noncontig:elmtcount=2,call=64")
            .unwrap()
            .accesses(2, 1);
        // Rows of 2 x 8 bytes; 4 rows per call; call 1 starts at 64.
        assert_eq!(n[1][0], Extent::new(64 + 8, 8));
        assert_eq!(n[1].len(), 4);
    }

    #[test]
    fn every_call_is_the_first_shifted_by_the_call_shift() {
        for spec in [
            "demo:segment=48KiB",
            "mpi-io-test:segment=100",
            "noncontig:elmtcount=3,call=1000",
            "hpio:count=5,size=7,spacing=3",
            "coll-perf:n=6",
            "tiles:grid=3x2,tile=2x3,planes=2,element=5",
        ] {
            let p = Pattern::parse(spec).unwrap();
            for procs in [1, 4, 6] {
                let shift = p.call_shift(procs).unwrap();
                let first = p.accesses(procs, 0);
                for k in [1u64, 7] {
                    let moved: Vec<Vec<Extent>> = first
                        .iter()
                        .map(|es| {
                            es.iter()
                                .map(|e| Extent::new(e.offset + k * shift, e.len))
                                .collect()
                        })
                        .collect();
                    assert_eq!(
                        p.accesses(procs, k),
                        moved,
                        "{spec}, {procs} processes, call {k}"
                    );
                }
            }
        }
        assert_eq!(
            Pattern::parse("ior-mpi-io:segment=1")
                .unwrap()
                .call_shift(4),
            None
        );
    }

    #[test]
    fn hpio_and_coll_perf_cover_what_they_should() {
        let h = Pattern::parse("hpio:count=3,size=100,spacing=28")
            .unwrap()
            .accesses(2, 0);
        assert_eq!(
            h[1],
            vec![
                Extent::new(128, 100),
                Extent::new(384, 100),
                Extent::new(640, 100)
            ]
        );
        assert_eq!(dims3(8), [2, 2, 2]);
        assert_eq!(dims3(12), [3, 2, 2]);
        assert_eq!(dims3(7), [7, 1, 1]);
        for p in [1u32, 4, 6, 8, 12] {
            let c = Pattern::parse("coll-perf:n=12").unwrap().accesses(p, 1);
            let mut all: Vec<Extent> = c.concat();
            all.sort();
            // The blocks tile the whole array (call 1: the second array) exactly once.
            let covered: u64 = all.iter().map(|e| e.len).sum();
            assert_eq!(covered, 12 * 12 * 12 * 4, "p = {p}");
            assert!(all.windows(2).all(|w| w[0].end() <= w[1].offset), "p = {p}");
            assert!(all[0].offset >= 12 * 12 * 12 * 4);
        }
    }

    #[test]
    fn btio_class_c_as_tiles() {
        let btio = Pattern::parse("tiles:grid=3x3,tile=1x44,planes=132,element=3240").unwrap();
        let a = btio.accesses(9, 0);
        assert_eq!(a[4].len(), 44 * 132);
        assert_eq!(
            a.iter().flatten().map(|e| e.len).sum::<u64>(),
            3 * 132 * 132 * 3240
        );
        assert!(Pattern::parse("tiles:grid=3,tile=1x1,element=8")
            .unwrap_err()
            .contains("not AxB"));
    }

    /// IOR's layout: block s·P + i of the file is process i's s-th, moved a
    /// transfer per call; the calls of one block are contiguous per process.
    #[test]
    fn the_ior_pattern_lays_blocks_out_as_ior_does() {
        let ior = Pattern::parse("ior:block=4KiB,transfer=1KiB").unwrap();
        assert_eq!(
            ior,
            Pattern::Ior {
                block: 4096,
                transfer: 1024
            }
        );
        // Call 5 = segment 1, transfer 1; process 2 of 3: block 1·3 + 2 = 5.
        assert_eq!(
            ior.accesses(3, 5)[2],
            vec![Extent::new(5 * 4096 + 1024, 1024)]
        );
        // Every byte of two segments, once.
        let mut all: Vec<Extent> = (0..8).flat_map(|c| ior.accesses(3, c)).flatten().collect();
        all.sort_by_key(|e| e.offset);
        assert!(all
            .windows(2)
            .all(|w| w[0].offset + w[0].len == w[1].offset));
        assert_eq!(all.iter().map(|e| e.len).sum::<u64>(), 2 * 3 * 4096);
        assert_eq!(ior.call_shift(3), None);
        let whole = Pattern::parse("ior:transfer=1MiB").unwrap();
        assert_eq!(whole.call_shift(4), Some(4 << 20));
        assert_eq!(
            whole.accesses(4, 2)[1],
            vec![Extent::new((2 * 4 + 1) << 20, 1 << 20)]
        );
        assert!(Pattern::parse("ior:block=3KiB,transfer=2KiB")
            .unwrap_err()
            .contains("not a whole number of transfers"));
    }

    #[test]
    fn bad_specs_name_the_problem() {
        for (spec, says) in [
            ("tilez", "unknown pattern \"tilez\""),
            ("demo", "demo: give segment"),
            ("demo:segment=0", "segment must be > 0"),
            ("demo:segmnt=4", "unknown key \"segmnt\""),
            ("demo:segment", "write key=value"),
            ("demo:segment=lots", "demo: segment:"),
        ] {
            let e = Pattern::parse(spec).unwrap_err();
            assert!(e.contains(says), "{spec}: {e}");
        }
    }
}
