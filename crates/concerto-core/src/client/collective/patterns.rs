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
    /// noncontig: a vector datatype over P columns; each row holds one
    /// block of `elmtcount` 4-byte elements per process; a call covers
    /// `call_bytes` of the file.
    Noncontig { elmtcount: u64, call_bytes: u64 },
}

const NAMES: &str = "demo, mpi-io-test, ior-mpi-io, noncontig";

impl Pattern {
    /// Reads `name:key=value,...`; an error names the key.
    pub fn parse(spec: &str) -> Result<Pattern, String> {
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
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
            "noncontig" => &["elmtcount", "call"],
            _ => return Err(format!("unknown pattern {name:?} (known: {NAMES})")),
        };
        if let Some((k, _)) = keys.iter().find(|(k, _)| !known.contains(k)) {
            return Err(format!(
                "{name}: unknown key {k:?} (known: {})",
                known.join(", ")
            ));
        }
        let size = |key: &str, default: Option<u64>| -> Result<u64, String> {
            match keys.iter().find(|(k, _)| *k == key) {
                Some((_, v)) => match parse_size(v) {
                    Ok(0) => Err(format!("{name}: {key} must be > 0")),
                    Ok(n) => Ok(n),
                    Err(e) => Err(format!("{name}: {key}: {e}")),
                },
                None => default.ok_or_else(|| format!("{name}: give {key}=...")),
            }
        };
        Ok(match name {
            "demo" => Pattern::Demo {
                segment: size("segment", None)?,
            },
            "mpi-io-test" => Pattern::MpiIoTest {
                segment: size("segment", None)?,
            },
            "ior-mpi-io" => Pattern::IorMpiIo {
                segment: size("segment", None)?,
                file: size("file", Some(1 << 30))?,
            },
            _ => Pattern::Noncontig {
                elmtcount: size("elmtcount", None)?,
                call_bytes: size("call", Some(16 << 20))?,
            },
        })
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
    fn bad_specs_name_the_problem() {
        for (spec, says) in [
            ("tiles", "unknown pattern \"tiles\""),
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
