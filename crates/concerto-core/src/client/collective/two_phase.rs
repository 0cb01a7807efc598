//! ROMIO's two-phase collective I/O (collective buffering).

use super::extents::window;
use super::{pack, prepare, Batch, CollectivePlan, Direction, Exchange, PlanError, Planner};
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
        let super::Prepared { own, all } = prepare(direction, accesses, true)?;
        let p = own.len() as u32;
        let mut processes: Vec<Vec<Batch>> = vec![Vec::new(); own.len()];
        let (Some(first), Some(last)) = (all.first(), all.last()) else {
            return Ok(CollectivePlan {
                direction,
                processes,
                exchanges: Vec::new(),
                agents: Vec::new(),
                arrangement: "nothing requested".into(),
            });
        };
        let (ranks, bounds) = self.domains(p, first.offset, last.end(), layout.unit());
        let cb = self.cb_buffer_size;
        let rounds = bounds
            .windows(2)
            .map(|w| (w[1] - w[0]).div_ceil(cb))
            .max()
            .unwrap_or(0)
            .max(1);
        for (i, &agg) in ranks.iter().enumerate() {
            let (start, end) = (bounds[i], bounds[i + 1]);
            processes[agg as usize] = (0..rounds)
                .map(|r| {
                    let from = (start + r * cb).min(end);
                    let to = (start + (r + 1) * cb).min(end);
                    Batch {
                        requests: pack(&window(&all, from, to), self.max_segments),
                        after_previous: r > 0,
                        ..Batch::default()
                    }
                })
                .collect();
        }
        // Each owner's bytes, cut at domain and round boundaries, in order.
        let mut exchanges: Vec<Exchange> = Vec::new();
        for (owner, extents) in own.iter().enumerate() {
            let owner = owner as u32;
            for e in extents {
                let mut at = e.offset;
                while at < e.end() {
                    let d = bounds
                        .partition_point(|&b| b <= at)
                        .saturating_sub(1)
                        .min(ranks.len() - 1);
                    let r = (at - bounds[d]) / cb;
                    let stop = e.end().min(bounds[d + 1]).min(bounds[d] + (r + 1) * cb);
                    let agg = ranks[d];
                    if agg != owner {
                        let (from, to) = match direction {
                            Direction::Write => (owner, agg),
                            Direction::Read => (agg, owner),
                        };
                        let piece = Extent::new(at, stop - at);
                        match exchanges.last_mut() {
                            Some(x) if (x.from, x.to, x.batch) == (from, to, r as u32) => {
                                x.bytes += piece.len;
                                match x.extents.last_mut() {
                                    Some(l) if l.end() == at => l.len += piece.len,
                                    _ => x.extents.push(piece),
                                }
                            }
                            _ => exchanges.push(Exchange {
                                from,
                                to,
                                batch: r as u32,
                                extents: smallvec::smallvec![piece],
                                bytes: piece.len,
                            }),
                        }
                    }
                    at = stop;
                }
            }
        }
        Ok(CollectivePlan {
            direction,
            processes,
            exchanges,
            agents: Vec::new(),
            arrangement: format!(
                "{} aggregators, domains of {} bytes{}, {rounds} round(s) of {cb} bytes",
                ranks.len(),
                (last.end() - first.offset).div_ceil(ranks.len() as u64),
                if self.align {
                    " aligned to the stripe unit"
                } else {
                    ""
                }
            ),
        })
    }
}
