//! ROMIO's two-phase collective I/O (collective buffering).

use super::extents::{cut_at, union_by_range};
use super::{
    check_disjoint, own_lists, pack, span, Batch, CollectivePlan, Direction, Exchange, PlanError,
    Planner,
};
use crate::layout::StripeLayout;
use crate::request::Extent;

/// The range from the lowest requested offset to the highest end is split
/// evenly into one file domain per aggregator (`cb_nodes` of them, spread
/// over the ranks; default every process), optionally with the domain
/// boundaries on stripe-unit multiples (ROMIO's `striping_unit` hint).
/// Each aggregator accesses the requested data in its domain, in rounds of
/// `cb_buffer_size` bytes of the domain (every aggregator does as many
/// rounds as the largest domain needs), each round a batch of list
/// requests of at most `max_segments` extents (no data sieving). Each byte
/// moves between its owner and its domain's aggregator: before the round
/// in a write, after it in a read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TwoPhase {
    pub cb_nodes: Option<u32>,
    pub cb_buffer_size: u64,
    pub align: bool,
    pub max_segments: usize,
}

impl Default for TwoPhase {
    fn default() -> TwoPhase {
        TwoPhase {
            cb_nodes: None,
            cb_buffer_size: 16 << 20,
            align: false,
            max_segments: 64,
        }
    }
}

impl TwoPhase {
    /// The aggregators' ranks, and the file domains' boundaries (one more
    /// than the aggregators) for the requested range `[lo, hi)`.
    pub fn domains(&self, processes: u32, lo: u64, hi: u64, unit: u64) -> (Vec<u32>, Vec<u64>) {
        let aggs = self
            .cb_nodes
            .unwrap_or(processes)
            .clamp(1, processes.max(1)) as u64;
        let ranks = (0..aggs)
            .map(|i| (i * processes as u64 / aggs) as u32)
            .collect();
        let size = (hi - lo).div_ceil(aggs);
        let mut bounds = vec![lo];
        for i in 1..aggs {
            let mut b = (lo + i * size).min(hi);
            if self.align && unit > 0 {
                b = b / unit * unit;
            }
            let prev = *bounds.last().unwrap_or(&lo);
            bounds.push(b.clamp(prev, hi));
        }
        bounds.push(hi);
        (ranks, bounds)
    }
}

impl Planner for TwoPhase {
    fn name(&self) -> &'static str {
        "two-phase"
    }

    fn plan(
        &self,
        direction: Direction,
        accesses: &[Vec<Extent>],
        layout: &StripeLayout,
    ) -> Result<CollectivePlan, PlanError> {
        if self.cb_buffer_size == 0 {
            return Err(PlanError::Invalid("cb_buffer_size must be > 0".into()));
        }
        let own = own_lists(accesses)?;
        let p = own.len() as u32;
        let mut processes: Vec<Vec<Batch>> = vec![Vec::new(); own.len()];
        let Some((lo, hi)) = span(&own) else {
            return Ok(CollectivePlan {
                direction,
                processes,
                exchanges: Vec::new(),
                agents: Vec::new(),
                arrangement: "nothing requested".into(),
            });
        };
        let (ranks, bounds) = self.domains(p, lo, hi, layout.unit());
        let cb = self.cb_buffer_size;
        let (rounds, steps) = round_bounds(&bounds, cb, hi);
        let union = union_by_range(&own, &steps);
        if direction == Direction::Write {
            check_disjoint(&own, &union)?;
        }
        for (d, &agg) in ranks.iter().enumerate() {
            processes[agg as usize] = (0..rounds as usize)
                .map(|r| Batch {
                    requests: pack(union.get(d * rounds as usize + r), self.max_segments),
                    after_previous: r > 0,
                    ..Batch::default()
                })
                .collect();
        }
        let exchanges = exchanges(direction, &own, &steps, &ranks, rounds as usize);
        Ok(CollectivePlan {
            direction,
            processes,
            exchanges,
            agents: Vec::new(),
            arrangement: format!(
                "{} aggregators, domains of {} bytes{}, {rounds} round(s) of {cb} bytes",
                ranks.len(),
                (hi - lo).div_ceil(ranks.len() as u64),
                if self.align {
                    " aligned to the stripe unit"
                } else {
                    ""
                }
            ),
        })
    }
}

/// The domains' bounds cut into rounds of at most `cb` bytes: how many
/// rounds the largest domain takes, and the bounds of every round of
/// every domain (range `d * rounds + r` is round r of domain d).
fn round_bounds(bounds: &[u64], cb: u64, hi: u64) -> (u64, Vec<u64>) {
    let rounds = bounds
        .windows(2)
        .map(|w| (w[1] - w[0]).div_ceil(cb))
        .max()
        .unwrap_or(0)
        .max(1);
    let mut steps: Vec<u64> = Vec::with_capacity(bounds.len() * rounds as usize + 1);
    for w in bounds.windows(2) {
        steps.extend((0..rounds).map(|r| (w[0] + r * cb).min(w[1])));
    }
    steps.push(hi);
    (rounds, steps)
}

/// Each owner's bytes, cut at domain and round boundaries, in order:
/// sent to their aggregator in a write, from it in a read.
fn exchanges(
    direction: Direction,
    own: &[Vec<Extent>],
    steps: &[u64],
    aggregators: &[u32],
    rounds: usize,
) -> Vec<Exchange> {
    // (At most one per piece: reserving that many saves the copies of
    // a growing vector, a tenth of the planning time at a million.)
    let mut exchanges: Vec<Exchange> = Vec::with_capacity(own.iter().map(Vec::len).sum());
    cut_at(own, steps, |owner, range, piece| {
        let agg = aggregators[range / rounds];
        if agg == owner {
            return;
        }
        let batch = (range % rounds) as u32;
        let (from, to) = match direction {
            Direction::Write => (owner, agg),
            Direction::Read => (agg, owner),
        };
        match exchanges.last_mut() {
            Some(x) if (x.from, x.to, x.batch) == (from, to, batch) => {
                x.bytes += piece.len;
                match x.extents.last_mut() {
                    Some(l) if l.end() == piece.offset => l.len += piece.len,
                    _ => x.extents.push(piece),
                }
            }
            _ => exchanges.push(Exchange {
                from,
                to,
                batch,
                extents: smallvec::smallvec![piece],
                bytes: piece.len,
            }),
        }
    });
    exchanges
}
