//! Collective I/O planning: who accesses which data, in which order, and
//! what the processes exchange (resonant-io.txt, Sections 1.2 and 3).
//!
//! A [`Planner`] takes every process's access list (file extents) and the
//! file's layout and returns a [`CollectivePlan`]. The planners know nothing
//! of who executes the plan: the simulator turns it into simulated requests
//! and messages, the MPI-IO layer into real calls.
//!
//! **How a plan runs.** Each process has a list of [`Batch`]es, each a set
//! of list-I/O requests sent together, in order. A batch is sent once the
//! process's previous batch has completed (all its replies in) if it says
//! `after_previous`, and once every batch in its `after_sent` has been
//! sent, then after its `delay`. [`Exchange`]s
//! move data between processes: in a write, the exchanges into a batch come
//! before it; in a read, the exchanges out of a batch follow it.
//!
//! - [`Independent`]: each process reads or writes its own data, one
//!   contiguous piece per call, in ascending offsets (non-collective I/O).
//! - [`TwoPhase`]: ROMIO's collective buffering (file domains per aggregator,
//!   rounds of `cb_buffer_size`).
//! - [`Resonant`]: one agent per I/O server accesses that server's data in
//!   ascending offsets; or, when the processes' data is ordered by rank,
//!   timed groups with no exchange.

mod buffering;
mod choice;
mod extents;
mod independent;
pub mod patterns;
mod resonant;
mod two_phase;

pub use buffering::{share_no_unit, spans, Buffering, INDEPENDENT_CALL_EXTENTS};
pub use choice::{PlannerChoice, Strategy};
pub use extents::{bytes_of, intersect, normalize, subtract};
use extents::{union_by_range, RangeLists};
pub use independent::Independent;
pub use resonant::Resonant;
pub use two_phase::TwoPhase;

use serde::Serialize;
pub use smallvec::SmallVec;

use crate::layout::StripeLayout;
use crate::request::Extent;
use crate::time::Time;

/// Whether the collective call reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    Read,
    Write,
}

/// One list-I/O request: file extents, ascending and disjoint. The client
/// library splits it over the servers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ListRequest {
    pub extents: SmallVec<[Extent; 1]>,
}

/// Requests a process sends together (see the module's "How a plan runs").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Batch {
    pub requests: SmallVec<[ListRequest; 1]>,
    /// Waits for the process's previous batch to complete (a blocking call).
    pub after_previous: bool,
    /// (rank, batch index) that must have been sent first.
    pub after_sent: Vec<(u32, u32)>,
    pub delay: Time,
}

impl Batch {
    pub fn bytes(&self) -> u64 {
        self.requests.iter().map(|r| bytes_of(&r.extents)).sum()
    }
}

/// Data moved between two processes around batch `batch` of the process
/// that does the I/O (the receiver in a write, the sender in a read).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Exchange {
    pub from: u32,
    pub to: u32,
    pub batch: u32,
    pub extents: SmallVec<[Extent; 1]>,
    pub bytes: u64,
}

/// What a planner decided for one collective call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CollectivePlan {
    pub direction: Direction,
    /// Per rank, its batches in the order it sends them.
    pub processes: Vec<Vec<Batch>>,
    pub exchanges: Vec<Exchange>,
    /// Resonant I/O's agents: per server with requested data, the ranks
    /// that access it (in the order they send); empty for the other
    /// arrangements.
    pub agents: Vec<(u32, Vec<u32>)>,
    /// The planner's own account of what it did (e.g. "agents" or "timed
    /// groups"), for people reading the plan.
    pub arrangement: String,
}

/// Chooses, for every process's access list, who accesses what.
pub trait Planner {
    fn name(&self) -> &'static str;
    /// `accesses[rank]` is the file extents that process asks for.
    fn plan(
        &self,
        direction: Direction,
        accesses: &[Vec<Extent>],
        layout: &StripeLayout,
    ) -> Result<CollectivePlan, PlanError>;
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("no processes")]
    NoProcesses,
    #[error("processes {0} and {1} write the same bytes (at offset {2})")]
    OverlappingWrites(u32, u32, u64),
    #[error("{0}")]
    Invalid(String),
}

/// Each process's access list, normalized; for a write, also checked
/// for overlaps between processes (the result would depend on who writes
/// last).
pub(crate) fn prepare(
    direction: Direction,
    accesses: &[Vec<Extent>],
) -> Result<Vec<Vec<Extent>>, PlanError> {
    let own = own_lists(accesses)?;
    if direction == Direction::Write {
        if let Some((lo, hi)) = span(&own) {
            let union = union_by_range(&own, &even_split(lo, hi, own.len() as u64));
            check_disjoint(&own, &union)?;
        }
    }
    Ok(own)
}

/// The lowest offset and the highest end in the lists (each ascending).
pub(crate) fn span(own: &[Vec<Extent>]) -> Option<(u64, u64)> {
    let lo = own
        .iter()
        .filter_map(|l| l.first())
        .map(|e| e.offset)
        .min()?;
    let hi = own.iter().filter_map(|l| l.last()).map(Extent::end).max()?;
    Some((lo, hi))
}

/// `[lo, hi)` split into `parts` ranges of (nearly) equal size: their
/// `parts + 1` bounds.
pub(crate) fn even_split(lo: u64, hi: u64, parts: u64) -> Vec<u64> {
    let parts = parts.max(1);
    let size = (hi - lo).div_ceil(parts);
    (0..=parts).map(|i| (lo + i * size).min(hi)).collect()
}

/// Overlaps make the union smaller than the sum of its parts; only then
/// is the first one looked for, to name it.
pub(crate) fn check_disjoint(own: &[Vec<Extent>], union: &RangeLists) -> Result<(), PlanError> {
    let total: u64 = own.iter().map(|e| bytes_of(e)).sum();
    if union.bytes() < total {
        first_overlap(own)?;
    }
    Ok(())
}

/// Each process's access list, normalized.
pub(crate) fn own_lists(accesses: &[Vec<Extent>]) -> Result<Vec<Vec<Extent>>, PlanError> {
    if accesses.is_empty() {
        return Err(PlanError::NoProcesses);
    }
    Ok(accesses.iter().map(|a| normalize(a)).collect())
}

/// The first two processes whose lists overlap, as an error (a planner that
/// found the union smaller than the sum of its parts asks).
pub(crate) fn first_overlap(own: &[Vec<Extent>]) -> Result<(), PlanError> {
    let mut all: Vec<(Extent, u32)> = own
        .iter()
        .enumerate()
        .flat_map(|(r, es)| es.iter().map(move |&e| (e, r as u32)))
        .collect();
    all.sort_unstable_by_key(|&(e, r)| (e.offset, r));
    for w in all.windows(2) {
        let ((a, ra), (b, rb)) = (w[0], w[1]);
        if b.offset < a.end() {
            return Err(PlanError::OverlappingWrites(ra, rb, b.offset));
        }
    }
    Ok(())
}

/// Packs ascending extents into list requests of at most `max_segments`.
pub(crate) fn pack(extents: &[Extent], max_segments: usize) -> SmallVec<[ListRequest; 1]> {
    extents
        .chunks(max_segments.max(1))
        .map(|c| ListRequest {
            extents: SmallVec::from_slice(c),
        })
        .collect()
}

/// Each process's extents cut at stripe-unit boundaries and sorted into
/// the servers that hold them: `[server][rank]`, file extents ascending.
pub(crate) fn by_server(own: &[Vec<Extent>], layout: &StripeLayout) -> Vec<Vec<Vec<Extent>>> {
    let servers = layout
        .servers()
        .iter()
        .copied()
        .max()
        .map_or(0, |m| m as usize + 1);
    let mut out = vec![vec![Vec::new(); own.len()]; servers];
    for (rank, es) in own.iter().enumerate() {
        for e in es {
            for c in layout.chunks(e.offset, e.len) {
                let list: &mut Vec<Extent> = &mut out[c.server as usize][rank];
                match list.last_mut() {
                    Some(last) if last.end() == c.file_offset => last.len += c.len,
                    _ => list.push(Extent::new(c.file_offset, c.len)),
                }
            }
        }
    }
    out
}

/// Whether no byte of `list` is in it twice.
fn once(list: &[Extent]) -> bool {
    bytes_of(list) == bytes_of(&normalize(list))
}

/// A write's plan: every requested byte written exactly once, by its owner
/// or by a process the owner sent it to.
fn check_written(
    own: &[Vec<Extent>],
    io: &[Vec<Extent>],
    received: &[Vec<Extent>],
) -> Result<(), String> {
    let written: Vec<Extent> = io.iter().flatten().copied().collect();
    let all: Vec<Extent> = own.iter().flatten().copied().collect();
    if !once(&written) {
        return Err("some bytes are written twice".into());
    }
    if normalize(&written) != normalize(&all) {
        return Err("the bytes written are not the bytes requested".into());
    }
    for rank in 0..own.len() {
        let mine: Vec<Extent> = own[rank].iter().chain(&received[rank]).copied().collect();
        if bytes_of(&subtract(&normalize(&io[rank]), &normalize(&mine))) > 0 {
            return Err(format!(
                "rank {rank} writes bytes it neither owns nor received"
            ));
        }
    }
    Ok(())
}

/// A read's plan: every process ends up with each of its bytes exactly
/// once, read by itself or sent by a process that read it.
fn check_read(
    own: &[Vec<Extent>],
    io: &[Vec<Extent>],
    received: &[Vec<Extent>],
) -> Result<(), String> {
    for rank in 0..own.len() {
        // What it read of its own, plus what it was sent.
        let mut got: Vec<Extent> = extents::intersect(&normalize(&io[rank]), &own[rank]);
        got.extend_from_slice(&received[rank]);
        if !once(&got) {
            return Err(format!("rank {rank} gets some of its bytes twice"));
        }
        if normalize(&got) != own[rank] {
            return Err(format!("rank {rank} does not get exactly its bytes"));
        }
    }
    Ok(())
}

impl CollectivePlan {
    /// Checks that the plan does what the call asks: in a write, every
    /// requested byte is written exactly once, by its owner or by a process
    /// the owner sent it to; in a read, every process ends up with each of
    /// its bytes exactly once, read by itself or sent by a process that
    /// read it. Also checks that dependencies name batches that exist.
    pub fn check(&self, accesses: &[Vec<Extent>]) -> Result<(), String> {
        let own: Vec<Vec<Extent>> = accesses.iter().map(|a| normalize(a)).collect();
        let n = own.len();
        if self.processes.len() != n {
            return Err(format!(
                "{} processes planned for {n}",
                self.processes.len()
            ));
        }
        self.check_batches()?;
        let io: Vec<Vec<Extent>> = self
            .processes
            .iter()
            .map(|bs| {
                bs.iter()
                    .flat_map(|b| b.requests.iter().flat_map(|r| r.extents.iter().copied()))
                    .collect()
            })
            .collect();
        let received = self.check_exchanges(&own, &io)?;
        match self.direction {
            Direction::Write => check_written(&own, &io, &received),
            Direction::Read => check_read(&own, &io, &received),
        }
    }

    /// Every batch waits only for batches that exist, and its requests'
    /// extents are ascending and disjoint.
    fn check_batches(&self) -> Result<(), String> {
        for (rank, batches) in self.processes.iter().enumerate() {
            for (b, batch) in batches.iter().enumerate() {
                if batch.after_previous && b == 0 {
                    return Err(format!("rank {rank} batch 0 waits for a previous batch"));
                }
                for &(r, i) in &batch.after_sent {
                    if self
                        .processes
                        .get(r as usize)
                        .is_none_or(|p| p.len() <= i as usize)
                    {
                        return Err(format!(
                            "rank {rank} batch {b} waits for a missing batch ({r}, {i})"
                        ));
                    }
                }
                for req in &batch.requests {
                    if normalize(&req.extents).len() != req.extents.len() {
                        return Err(format!("rank {rank} batch {b}: a request's extents are not ascending and disjoint"));
                    }
                }
            }
        }
        Ok(())
    }

    /// Every exchange goes between two processes and sends what its sender
    /// has (its own data in a write, what it read in a read): what each
    /// process receives.
    fn check_exchanges(
        &self,
        own: &[Vec<Extent>],
        io: &[Vec<Extent>],
    ) -> Result<Vec<Vec<Extent>>, String> {
        let n = own.len();
        let mut received: Vec<Vec<Extent>> = vec![Vec::new(); n];
        for x in &self.exchanges {
            let (from, to) = (x.from as usize, x.to as usize);
            if from >= n || to >= n || from == to {
                return Err(format!("exchange from {from} to {to}"));
            }
            if bytes_of(&x.extents) != x.bytes {
                return Err(format!(
                    "exchange from {from} to {to} says {} bytes",
                    x.bytes
                ));
            }
            let has = match self.direction {
                Direction::Write => &own[from],
                Direction::Read => &io[from],
            };
            if bytes_of(&subtract(&normalize(&x.extents), &normalize(has))) > 0 {
                return Err(format!("rank {from} sends data it does not have to {to}"));
            }
            received[to].extend_from_slice(&x.extents);
        }
        Ok(received)
    }

    /// Bytes the processes send to the servers or get from them.
    pub fn io_bytes(&self) -> u64 {
        self.processes.iter().flatten().map(Batch::bytes).sum()
    }

    /// Bytes moved between processes.
    pub fn exchanged_bytes(&self) -> u64 {
        self.exchanges.iter().map(|x| x.bytes).sum()
    }
}

#[cfg(test)]
mod tests;
