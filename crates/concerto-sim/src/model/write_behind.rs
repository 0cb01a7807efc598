//! The simulated client's write-behind: core's policy
//! (`concerto_core::client::write_behind`), the one the real client runs,
//! with simulated requests (`cluster.write_behind` > 0).
//!
//! A write step hands its extents to the file's policy, keyed by the
//! process; what the policy sends (a run that reached the flush size, cut
//! at a stripe-unit boundary; a run the write did not continue; another
//! process's run the write overlaps) leaves as pieces no step waits for,
//! counted in the process's `behind`. The step then ends once its bytes
//! are copied into the client (`copy_in`), unless the process has
//! `cluster.write_behind` bytes or more in flight: then it ends when
//! enough came back. A file's runs that come due (idle, or at
//! the age bound) are sent by a `FlushDue` event. A read first sends the
//! held writes it overlaps (it does not wait for them: the servers take
//! them first, as they arrive first). A close first sends the process's
//! run and its node-mates' runs of the file (one client per node) and
//! waits for all it has in flight, then closes as a written file closes.
//!
//! Per process, where the real client bounds what a mount holds over all
//! its processes: with one process per node they are the same.

use super::client::Origin;
use super::*;
use crate::workload::Access;

/// What a process's current step waits for among its writes behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wait {
    Nothing,
    /// Room: its write step ends once less than the bound is in flight.
    Room,
    /// All of them: its close goes on once none is in flight.
    Settled,
    /// All of them: its part of a collective application's last call
    /// (the program's sync and close) ends once none is in flight.
    SettledCall,
}

impl<'a> Simulation<'a> {
    /// A read of a file written behind first sends the held writes it
    /// overlaps (all processes').
    pub(super) fn send_overlapping_behind(&mut self, file: u32, access: &Access, now: Time) {
        let (Some(first), Some(last)) = (access.extents.first(), access.extents.last()) else {
            return;
        };
        let flushes = self.policy(file).flush(Some((first.offset, last.end())));
        for f in flushes {
            self.send_behind(f.key, file, f.extent, now);
        }
    }

    /// A write step on a file written behind.
    pub(super) fn issue_behind(&mut self, rank: u32, file: u32, access: &Access, origin: Origin) {
        let now = origin.at;
        self.hold(rank, file, access, now);
        if self.ranks[rank as usize].behind_bytes >= self.sc.cluster.write_behind.0 {
            self.ranks[rank as usize].behind_wait = Wait::Room;
        } else {
            self.events.schedule(
                now + self.copy_in(access),
                Class::Normal,
                0,
                Event::StepDone { rank },
            );
        }
    }

    /// Hands `access` to the file's policy as `rank`'s writes and sends
    /// what the policy says must leave now; the file's next due run is
    /// then armed.
    fn hold(&mut self, rank: u32, file: u32, access: &Access, now: Time) {
        let layout = self.files[file as usize].layout.clone();
        for e in &access.extents {
            let plan = self.policy(file).write(rank, e.offset, e.len, now, &layout);
            for f in plan.before.into_iter().chain(plan.after) {
                self.send_behind(f.key, file, f.extent, now);
            }
        }
        self.arm_flush(file);
    }

    /// A collective write that runs as each process's independent call
    /// (romio_cb's rule, `Buffering::runs_independent`) on a file written
    /// behind: each process's part is held and coalesced as its
    /// independent writes are, as the MPI-IO library holds it and as ROMIO's
    /// independent writes through the mount are; a part ends as a held
    /// write step does. In the application's last call each process then
    /// sends its run and waits for all it sent (the program's sync and
    /// close, which the real run times).
    pub(super) fn collective_behind(
        &mut self,
        app: u32,
        file: u32,
        accesses: Vec<Vec<Extent>>,
        last: bool,
        now: Time,
    ) {
        let processes = accesses.len() as u32;
        let a = &mut self.apps[app as usize];
        a.collective = Some(super::collective::CollectiveCall::held(
            concerto_core::client::collective::Direction::Write,
            processes,
        ));
        let first = a.first_rank;
        for (r, extents) in accesses.into_iter().enumerate() {
            let rank = first + r as u32;
            let access = Access {
                file,
                extents: extents.into_iter().collect(),
            };
            if !last {
                self.issue_behind(rank, file, &access, self.origin(rank, now));
                continue;
            }
            self.hold(rank, file, &access, now);
            if let Some(f) = self.policy(file).flush_key(&rank) {
                self.send_behind(f.key, file, f.extent, now);
            }
            if self.ranks[rank as usize].behind == 0 {
                self.step_done(rank, now);
            } else {
                self.ranks[rank as usize].behind_wait = Wait::SettledCall;
            }
        }
    }

    /// Every process's held writes of `file` leave (they are not waited for:
    /// the servers take them first, as they arrive first).
    pub(super) fn send_all_behind(&mut self, file: u32, now: Time) {
        for f in self.policy(file).flush(None) {
            self.send_behind(f.key, file, f.extent, now);
        }
    }

    /// What a held write costs its process: its bytes copied into the
    /// client (the kernel's and FUSE's copies into the mount), at the
    /// client node's data path, `cluster.network.client_bandwidth` (which
    /// `concerto calibrate` measures as the mount's); nothing with an
    /// ideal network. The real write(2) returns once the copy is done, so
    /// the process's next write comes that much later, and two processes'
    /// writes reach the servers interleaved, as they do through the mount.
    /// (The policy takes the bytes at the copy's start rather than its end:
    /// a run is sent up to one copy early.)
    fn copy_in(&self, access: &Access) -> Time {
        if self.net.is_instant() {
            return Time::ZERO;
        }
        let bytes = access.extents.iter().map(|e| e.len).sum();
        self.net.client_bandwidth().transfer_time(bytes)
    }

    fn policy(&mut self, file: u32) -> &mut concerto_core::client::write_behind::FileWrites<u32> {
        self.files[file as usize]
            .writes
            .as_mut()
            .expect("asked only of files written behind")
    }

    /// Sends `extent` of `file`, held by process `rank`, as pieces it
    /// does not wait for.
    fn send_behind(&mut self, rank: u32, file: u32, extent: Extent, now: Time) {
        let origin = self.origin(rank, now);
        let call = self.ranks[rank as usize].call;
        let mut pieces = std::mem::take(&mut self.split);
        self.files[file as usize]
            .layout
            .split_extents_into(&[extent], &mut pieces);
        for p in pieces.drain(..) {
            let req = piece_request(origin.request(Op::Write, file as u64), &p.extents, p.bytes);
            let piece = self.new_piece(rank, p.server, file, call, p.bytes, req, now);
            self.pieces[piece as usize].behind = true;
            let rs = &mut self.ranks[rank as usize];
            rs.behind += 1;
            rs.behind_bytes += p.bytes;
            self.send_request(piece, now);
        }
        self.split = pieces;
    }

    /// Schedules the file's next `FlushDue`, unless one as early is.
    fn arm_flush(&mut self, file: u32) {
        let f = &mut self.files[file as usize];
        let Some(due) = f.writes.as_ref().and_then(|w| w.next_due()) else {
            return;
        };
        if f.flush_at.is_some_and(|at| at <= due) {
            return;
        }
        f.flush_at = Some(due);
        self.events
            .schedule(due, Class::Normal, 0, Event::FlushDue { file });
    }

    /// The file's runs that came due leave.
    pub(super) fn flush_due(&mut self, file: u32, now: Time) {
        let f = &mut self.files[file as usize];
        if f.flush_at == Some(now) {
            f.flush_at = None;
        }
        for flush in self.policy(file).due(now) {
            self.send_behind(flush.key, file, flush.extent, now);
        }
        if self.files[file as usize].flush_at.is_none() {
            self.arm_flush(file);
        }
    }

    /// A piece sent behind came back.
    pub(super) fn behind_done(&mut self, rank: u32, bytes: u64, now: Time) {
        let bound = self.sc.cluster.write_behind.0;
        let rs = &mut self.ranks[rank as usize];
        rs.behind -= 1;
        rs.behind_bytes -= bytes;
        match rs.behind_wait {
            Wait::Room if rs.behind_bytes < bound => {
                rs.behind_wait = Wait::Nothing;
                self.step_done(rank, now);
            }
            Wait::Settled if rs.behind == 0 => {
                rs.behind_wait = Wait::Nothing;
                self.issue_step(rank, now);
            }
            Wait::SettledCall if rs.behind == 0 => {
                rs.behind_wait = Wait::Nothing;
                self.step_done(rank, now);
            }
            _ => {}
        }
    }

    /// Whether a close must first wait for the process's writes behind:
    /// the file's runs held on the process's node are sent (its own and
    /// its node-mates': the processes of a node share one client, whose
    /// close and fsync settle the whole file, as POSIX's fsync does and
    /// the mount's does), and it waits while any of its own is in flight.
    pub(super) fn waits_behind(&mut self, rank: u32, step: &Step, now: Time) -> bool {
        let Step::Close { file, .. } = step else {
            return false;
        };
        let app = self.ranks[rank as usize].app;
        let file = self.apps[app as usize].files[*file as usize];
        if self.files[file as usize].writes.is_none() {
            return false;
        }
        let node = self.ranks[rank as usize].nic;
        // Its own run first, then its node-mates' in rank order.
        let mates = (0..self.ranks.len() as u32)
            .filter(|&q| q != rank && self.ranks[q as usize].nic == node);
        for q in std::iter::once(rank).chain(mates.collect::<smallvec::SmallVec<[u32; 8]>>()) {
            if let Some(f) = self.policy(file).flush_key(&q) {
                self.send_behind(f.key, file, f.extent, now);
            }
        }
        let rs = &mut self.ranks[rank as usize];
        if rs.behind == 0 {
            return false;
        }
        rs.behind_wait = Wait::Settled;
        true
    }
}
