//! The metadata server's reaper, as Concerto's file system has it
//! (concerto-server's `metadata::reaper`), under `posix_mount`: a removed
//! file's objects are removed off the client's path. Once a removal is
//! committed, its file's objects (on the data servers its written bytes
//! reached) are orphans; the reaper gathers what [`REAPER_GATHER`] brings
//! and sends each data server one removal for all its orphans, which no
//! process waits for. On its data server a removal of n objects keeps the
//! device n removes long: a kernel FUSE trace of mdtest's File removal had
//! batches of 10-14 objects taking 2.5-4.2 ms, and the Tree removal's
//! lookups and rmdirs at server 0 waiting behind them (1.1-4.1 ms instead
//! of 0.55; docs/reproductions.md).
//!
//! A batch is scheduled as the application whose removal orphaned its
//! last object (the real one carries the server's own identity: under a
//! proportional-share policy the two can differ), and it crosses the
//! network as that process's request would.

use std::collections::BTreeMap;

use concerto_core::request::{Extent, Op};
use concerto_core::server::REAPER_GATHER;
use concerto_core::{MetaOp, Time};

use super::{Class, Event, Simulation};

/// One metadata server's orphans since its last batch.
#[derive(Default)]
pub(super) struct Reaper {
    /// Objects by data server.
    orphans: BTreeMap<u32, u32>,
    /// The rank whose removal orphaned the last of them, and its file.
    last: Option<(u32, u32)>,
    /// A batch is scheduled.
    due: bool,
}

impl Simulation<'_> {
    /// A removal of `file` by `rank` is committed at metadata server
    /// `server`: the data servers its written bytes reach each hold one
    /// orphan more; the first orphan since the last batch schedules the
    /// next.
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
            *r.orphans.entry(s).or_default() += 1;
        }
        self.split = pieces;
        r.last = Some((rank, file));
        if !r.due {
            r.due = true;
            self.events.schedule(
                now + REAPER_GATHER,
                Class::Normal,
                0,
                Event::Reap { server },
            );
        }
    }

    /// The batch of metadata server `server`: one removal per data server.
    pub(super) fn reap(&mut self, server: u32, now: Time) {
        let r = &mut self.reapers[server as usize];
        r.due = false;
        let orphans = std::mem::take(&mut r.orphans);
        let Some((rank, file)) = r.last.take() else {
            return;
        };
        let origin = self.origin(rank, now);
        let call = self.ranks[rank as usize].call;
        for (data_server, objects) in orphans {
            let req = origin.request(Op::Meta(MetaOp::Remove), file as u64);
            let piece = self.new_piece(rank, data_server, file, call, 0, req, now);
            let p = &mut self.pieces[piece as usize];
            p.background = true;
            p.objects = objects;
            self.send_request(piece, now);
        }
    }
}
