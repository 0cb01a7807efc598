//! ROMIO's `romio_cb_write` and `romio_cb_read`: whether a collective call
//! goes through its planner (collective buffering) or runs as each rank's
//! independent call. One rule for the MPI-IO library and the simulator's
//! collective applications, so that both worlds decide alike.
//!
//! `automatic` is ROMIO's rule at stripe-unit grain: when no two ranks'
//! data share a stripe unit, each server already gets every rank's
//! requests apart and whole, as independent calls send them, so a plan
//! would cost its exchanges and agreement and save nothing (IOR's `-c`
//! pattern: measured 25-34 MiB/s planned against 98 run independently,
//! docs/performance.md).

use serde::{Deserialize, Serialize};

/// File extents one independent call's request names at most (the MPI-IO
/// library cuts a longer access into calls of this many; the simulator's
/// collective applications do the same when a call runs independently).
pub const INDEPENDENT_CALL_EXTENTS: usize = 4096;

/// The three settings of `romio_cb_write`/`romio_cb_read`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Buffering {
    /// Independent when no two ranks' data share a stripe unit (ROMIO's
    /// default, and the MPI-IO library's).
    #[default]
    Automatic,
    /// Every call goes through the planner.
    Enable,
    /// Every call runs as each rank's independent call.
    Disable,
}

impl Buffering {
    pub const ALL: [Buffering; 3] = [Buffering::Automatic, Buffering::Enable, Buffering::Disable];

    /// Its name, as the hint and a scenario give it.
    pub fn name(self) -> &'static str {
        match self {
            Buffering::Automatic => "automatic",
            Buffering::Enable => "enable",
            Buffering::Disable => "disable",
        }
    }

    pub fn parse(name: &str) -> Result<Buffering, String> {
        Self::ALL
            .into_iter()
            .find(|b| b.name() == name)
            .ok_or_else(|| format!("{name:?} is not automatic, enable or disable"))
    }

    /// Whether a call whose ranks access `spans` (each rank's first byte
    /// and the end of its last extent; ranks with no data left out) runs
    /// as each rank's independent call, on a file of stripe unit `unit`.
    pub fn runs_independent(self, spans: &mut [(u64, u64)], unit: u64) -> bool {
        match self {
            Buffering::Disable => true,
            Buffering::Enable => false,
            Buffering::Automatic => share_no_unit(spans, unit),
        }
    }
}

/// Whether no two of `spans` (`[start, end)`, put in order here) overlap
/// or touch one stripe unit of `unit` bytes. Empty spans hold no unit.
pub fn share_no_unit(spans: &mut [(u64, u64)], unit: u64) -> bool {
    let unit = unit.max(1);
    spans.sort_unstable();
    let mut held = spans.iter().filter(|(lo, hi)| hi > lo);
    let Some(&(_, mut end)) = held.next() else {
        return true;
    };
    for &(lo, hi) in held {
        // The previous span's last unit is (end - 1) / unit.
        if lo < end || (end - 1) / unit >= lo / unit {
            return false;
        }
        end = hi;
    }
    true
}

/// Each rank's span (first byte, end of its last byte) of its extents,
/// ascending lists as the planners take them; a rank with none gives an
/// empty span.
pub fn spans(accesses: &[Vec<crate::request::Extent>]) -> Vec<(u64, u64)> {
    accesses
        .iter()
        .map(|extents| match (extents.first(), extents.last()) {
            (Some(first), Some(last)) => (first.offset, last.offset + last.len),
            _ => (0, 0),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const UNIT: u64 = 64 << 10;

    #[test]
    fn iors_collective_blocks_share_no_unit_and_a_strided_row_does() {
        // IOR -c -t 64k -b 64k: rank r writes [r, r+1) units of each segment.
        let mut blocks: Vec<(u64, u64)> = (0..4).map(|r| (r * UNIT, (r + 1) * UNIT)).collect();
        assert!(share_no_unit(&mut blocks, UNIT));
        // Ranks writing halves of units meet inside one.
        let mut halves: Vec<(u64, u64)> =
            (0..4).map(|r| (r * UNIT / 2, (r + 1) * UNIT / 2)).collect();
        assert!(!share_no_unit(&mut halves, UNIT));
        // Interleaved spans overlap even where their bytes would not.
        let mut interleaved = vec![(0, 3 * UNIT), (UNIT, 4 * UNIT)];
        assert!(!share_no_unit(&mut interleaved, UNIT));
    }

    #[test]
    fn the_settings_decide_as_romio_does() {
        let apart = || vec![(0, UNIT), (UNIT, 2 * UNIT)];
        let shared = || vec![(0, UNIT + 1), (UNIT + 1, 2 * UNIT)];
        assert!(Buffering::Automatic.runs_independent(&mut apart(), UNIT));
        assert!(!Buffering::Automatic.runs_independent(&mut shared(), UNIT));
        assert!(!Buffering::Enable.runs_independent(&mut apart(), UNIT));
        assert!(Buffering::Disable.runs_independent(&mut shared(), UNIT));
        assert_eq!(Buffering::parse("enable"), Ok(Buffering::Enable));
        assert!(Buffering::parse("on")
            .unwrap_err()
            .contains("automatic, enable or disable"));
    }

    proptest! {
        /// The rule agrees with its definition: no stripe unit holds bytes of two spans.
        #[test]
        fn share_no_unit_means_no_unit_holds_two_ranks_bytes(
            raw in prop::collection::vec((0u64..40, 0u64..12), 0..6),
            unit in 1u64..8,
        ) {
            let mut spans: Vec<(u64, u64)> = raw.iter().map(|&(lo, len)| (lo, lo + len)).collect();
            let units_of = |(lo, hi): (u64, u64)| (lo..hi).map(|b| b / unit).collect::<std::collections::BTreeSet<_>>();
            let mut seen = std::collections::BTreeSet::new();
            let mut clash = false;
            for &s in &spans {
                let mine = units_of(s);
                clash |= !seen.is_disjoint(&mine);
                seen.extend(mine);
            }
            prop_assert_eq!(share_no_unit(&mut spans, unit), !clash);
        }
    }
}
