//! Non-collective I/O: each process accesses its own data.

use super::{prepare, Batch, CollectivePlan, Direction, ListRequest, PlanError, Planner, SmallVec};
use crate::layout::StripeLayout;
use crate::request::Extent;

/// Each process sends its own extents, ascending, one request at a time
/// (each waits for the previous one's replies), with at most
/// `max_segments` extents per request: 1 makes one call per contiguous
/// piece, as a program that calls read or write per segment does. Where
/// a process's requests to one server line up with another's by accident,
/// the server sees ascending offsets: the paper's resonance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Independent {
    pub max_segments: usize,
}

impl Default for Independent {
    fn default() -> Independent {
        Independent { max_segments: 1 }
    }
}

impl Planner for Independent {
    fn name(&self) -> &'static str {
        "independent"
    }

    fn plan(
        &self,
        direction: Direction,
        accesses: &[Vec<Extent>],
        _layout: &StripeLayout,
    ) -> Result<CollectivePlan, PlanError> {
        let own = prepare(direction, accesses)?;
        let processes = own
            .iter()
            .map(|extents| {
                extents
                    .chunks(self.max_segments.max(1))
                    .enumerate()
                    .map(|(i, chunk)| Batch {
                        requests: smallvec::smallvec![ListRequest {
                            extents: SmallVec::from_slice(chunk),
                        }],
                        after_previous: i > 0,
                        ..Batch::default()
                    })
                    .collect()
            })
            .collect();
        Ok(CollectivePlan {
            direction,
            processes,
            exchanges: Vec::new(),
            agents: Vec::new(),
            arrangement: format!(
                "each process alone, {} segment(s) per request",
                self.max_segments.max(1)
            ),
        })
    }
}
