//! The metadata server's reaper, as Concerto's file system has it
//! (concerto-server's `metadata::reaper`), under `posix_mount`: a removed
//! file's objects are removed off the client's path. A removal's orphans
//! (the objects on the data servers its written bytes reached) are the
//! reaper's once the metadata server commits it, which it does
//! [`METADATA_COMMIT_INTERVAL`] after the first change since its last
//! commit. An idle reaper told of committed orphans gathers what
//! [`REAPER_GATHER`] brings, then sends each data server one removal for
//! all its committed orphans, which no process waits for; once every
//! data server has answered it looks again at once, and sends the orphans
//! committed meanwhile, so that under a stream of removals its batches
//! follow one another (a File removal of 400 files: a batch every 15 ms at
//! the data servers, `concerto cluster arrivals`), and the last one lands
//! just after the stream ends. On its data server a removal of n objects
//! keeps the device n removes long: a kernel FUSE trace of mdtest's File
//! removal had batches of 10-14 objects taking 2.5-4.2 ms, and the Tree
//! removal's lookups and rmdirs at server 0 waiting behind them (1.1-4.1
//! ms instead of 0.55; docs/reproductions.md).
//!
//! A batch is scheduled as the application whose removal orphaned its
//! last object (the real one carries the server's own identity: under a
//! proportional-share policy the two can differ), and it crosses the
//! network as that process's request would.

use std::collections::BTreeMap;

use concerto_core::request::{Extent, Op};
use concerto_core::server::{METADATA_COMMIT_INTERVAL, REAPER_GATHER};
use concerto_core::{MetaOp, Time};

use super::{Class, Event, Simulation};

/// Orphans by data server, and the rank whose removal orphaned the last of
/// them, with its file.
#[derive(Default)]
struct Orphans {
    objects: BTreeMap<u32, u32>,
    last: Option<(u32, u32)>,
}

impl Orphans {
    fn absorb(&mut self, other: Orphans) {
        for (server, n) in other.objects {
            *self.objects.entry(server).or_default() += n;
        }
        if other.last.is_some() {
            self.last = other.last;
        }
    }
}

/// What the reaper is doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Doing {
    #[default]
    Idle,
    /// Gathering before its batch (an event is scheduled).
    Gathering,
    /// A batch is at the data servers: this many have not answered.
    Removing(u32),
}

/// One metadata server's store commits and reaper (metadata servers' only ever gather).
#[derive(Default)]
pub(super) struct Reaper {
    /// Orphans of removals not committed yet.
    uncommitted: Orphans,
    /// A commit is scheduled.
    commit_due: bool,
    /// Orphans committed, not yet sent.
    committed: Orphans,
    doing: Doing,
}

impl Simulation<'_> {
    /// A removal of `file` by `rank` is made at metadata server `server`:
    /// the data servers its written bytes reach each hold one orphan more,
    /// the reaper's once the server commits (the first change since the
    /// last commit schedules the next).
    pub(super) fn orphaned(&mut self, server: u32, file: u32, rank: u32, now: Time) {
        let f = &self.files[file as usize];
        if f.written_end == 0 {
            return;
        }
        let mut pieces = std::mem::take(&mut self.split);
        f.layout
            .split_extents_into(&[Extent::new(0, f.written_end)], &mut pieces);
        let r = &mut self.reapers[server as usize];
        let mut holders: Vec<u32> = pieces.iter().map(|p| p.server).collect();
        holders.sort_unstable();
        holders.dedup();
        for s in holders {
            *r.uncommitted.objects.entry(s).or_default() += 1;
        }
        self.split = pieces;
        r.uncommitted.last = Some((rank, file));
        if !r.commit_due {
            r.commit_due = true;
            self.events.schedule(
                now + METADATA_COMMIT_INTERVAL,
                Class::Normal,
                0,
                Event::Commit { server },
            );
        }
    }

    /// Metadata server `server` commits: what was removed is durable, its
    /// orphans the reaper's; an idle reaper starts gathering.
    pub(super) fn commit(&mut self, server: u32, now: Time) {
        let r = &mut self.reapers[server as usize];
        r.commit_due = false;
        let made = std::mem::take(&mut r.uncommitted);
        r.committed.absorb(made);
        if r.doing == Doing::Idle && r.committed.last.is_some() {
            r.doing = Doing::Gathering;
            self.events.schedule(
                now + REAPER_GATHER,
                Class::Normal,
                0,
                Event::Reap { server },
            );
        }
    }

    /// The batch of metadata server `server`: one removal per data server
    /// for every committed orphan.
    pub(super) fn reap(&mut self, server: u32, now: Time) {
        let r = &mut self.reapers[server as usize];
        let batch = std::mem::take(&mut r.committed);
        let Some((rank, file)) = batch.last else {
            r.doing = Doing::Idle;
            return;
        };
        r.doing = Doing::Removing(batch.objects.len() as u32);
        let origin = self.origin(rank, now);
        let call = self.ranks[rank as usize].call;
        for (data_server, objects) in batch.objects {
            let req = origin.request(Op::Meta(MetaOp::Remove), file as u64);
            let piece = self.new_piece(rank, data_server, file, call, 0, req, now);
            let p = &mut self.pieces[piece as usize];
            p.background = true;
            p.objects = objects;
            self.send_request(piece, now);
        }
    }

    /// A data server answered the reaper of metadata server `server`: once
    /// all have, it looks again at once (what was committed meanwhile).
    pub(super) fn reaped(&mut self, server: u32, now: Time) {
        let r = &mut self.reapers[server as usize];
        match r.doing {
            Doing::Removing(left) if left > 1 => r.doing = Doing::Removing(left - 1),
            Doing::Removing(_) => self.reap(server, now),
            Doing::Idle | Doing::Gathering => {}
        }
    }
}
