//! The clients' side: applications released by the job arbiter, their
//! processes' calls and steps, the pieces they send, and the replies that
//! complete them.

use super::*;
use smallvec::SmallVec;

use crate::workload::Access;

impl<'a> Simulation<'a> {
    /// The application asks to do its next operation: at once, or when the
    /// job-level arbiter grants it. Its completion time counts from here.
    pub(super) fn release(&mut self, app: u32, now: Time) {
        self.apps[app as usize].op_issue = now;
        let Some(arbiter) = &mut self.arbiter else {
            return self.start_operation(app, now);
        };
        let a = &self.apps[app as usize];
        let info = self.sc.apps[a.spec].phase_info();
        if let Decision::Granted { priority } = arbiter.begin_phase(AppId(app), now, &info) {
            self.grant(app, priority, now);
        }
    }

    /// The arbiter let `app` start its phase at `priority`.
    pub(super) fn grant(&mut self, app: u32, priority: f64, now: Time) {
        let a = &mut self.apps[app as usize];
        a.weight = self.sc.apps[a.spec].weight * priority;
        a.phase_start = now;
        a.phase_priority = priority;
        self.start_operation(app, now);
    }

    pub(super) fn start_operation(&mut self, app: u32, now: Time) {
        let a = &mut self.apps[app as usize];
        let processes = self.sc.apps[a.spec].processes;
        a.ranks_pending = processes;
        if self.planners[a.spec].is_some() {
            return self.start_collective(app, now);
        }
        let first = a.first_rank;
        for r in 0..processes {
            self.issue_call(first + r, now);
        }
    }

    pub(super) fn issue_call(&mut self, rank: u32, now: Time) {
        let rs = &mut self.ranks[rank as usize];
        let a = &self.apps[rs.app as usize];
        let spec = &self.sc.apps[a.spec];
        let call = if spec.barrier { a.next_call } else { rs.call };
        rs.call = call;
        rs.issue = now;
        rs.steps.clear();
        workload::call_steps(
            spec,
            rs.rank,
            call,
            &self.sc.cluster.metadata,
            &mut rs.steps,
        );
        rs.steps.reverse();
        if rs.steps.is_empty() {
            // Nothing to send: the call completes once this instant's other events have run.
            self.events
                .schedule(now, Class::Normal, 0, Event::CallDone { rank });
        } else {
            self.next_step(rank, now);
        }
    }

    /// The rank's next step leaves once its client overhead is spent (at
    /// once without one).
    fn next_step(&mut self, rank: u32, now: Time) {
        let overhead = self.step_overhead();
        if overhead.is_zero() {
            self.issue_step(rank, now);
        } else {
            self.events
                .schedule(now + overhead, Class::Normal, 0, Event::Step { rank });
        }
    }

    /// What this step costs its process: the client overhead, its spread
    /// part drawn (a shifted exponential of the configured mean; no draw
    /// without a spread, so scenarios without one keep their results).
    fn step_overhead(&mut self) -> Time {
        let c = &self.sc.cluster;
        if c.client_overhead_spread.is_zero() {
            return c.client_overhead;
        }
        let spread = c.client_overhead_spread.as_secs_f64();
        let u: f64 = self.rng_client.gen();
        let tail = -spread * (1.0 - u).ln();
        c.client_overhead.saturating_sub(c.client_overhead_spread) + Time::from_secs_f64(tail)
    }

    /// Sends the next step of the rank's current call.
    pub(super) fn issue_step(&mut self, rank: u32, now: Time) {
        let rs = &mut self.ranks[rank as usize];
        let Some(step) = rs.steps.pop() else { return };
        if self.waits_for_kernel_lock(rank, &step) || self.waits_behind(rank, &step, now) {
            self.ranks[rank as usize].steps.push(step);
            return;
        }
        let origin = self.origin(rank, now);
        let rs = &self.ranks[rank as usize];
        let a = &self.apps[rs.app as usize];
        match step {
            Step::Data { op, access } => {
                let op = match op {
                    DataOp::Read => Op::Read,
                    DataOp::Write => Op::Write,
                };
                match self.sc.apps[a.spec].ordering {
                    Some(ordering) => self.issue_ordered(rank, (op, &access), ordering, origin),
                    None => self.issue_data(rank, op, &access, origin),
                }
            }
            Step::Close { file, written } => self.issue_close(rank, file, &written, origin),
            Step::Meta { op, target } => {
                let (app, call, dir_server) = (rs.app, rs.call, rs.dir_server);
                let a = &self.apps[app as usize];
                let (server, file, object) = match target {
                    MetaTarget::File(f) => {
                        let file = a.files[f as usize];
                        (self.files[file as usize].meta_server, file, file as u64)
                    }
                    // Directories are named apart from files: the high bit marks them.
                    MetaTarget::Dir => (dir_server, a.files[0], (1 << 63) | rank as u64),
                    // The application's shared directory: named apart from
                    // its processes' (the next bit), one per application.
                    MetaTarget::Parent => (dir_server, a.files[0], (3 << 62) | app as u64),
                };
                self.ranks[rank as usize].pending = 1;
                let req = origin.request(Op::Meta(op), object);
                let piece = self.new_piece(rank, server, file, call, 0, req, now);
                self.send_request(piece, now);
            }
        }
    }

    /// What every request a rank sends at `now` carries.
    pub(super) fn origin(&self, rank: u32, now: Time) -> Origin {
        let rs = &self.ranks[rank as usize];
        let a = &self.apps[rs.app as usize];
        let spec = &self.sc.apps[a.spec];
        Origin {
            app: a.app_id,
            rank: rs.rank,
            weight: a.weight,
            user: spec.user,
            group: spec.gid,
            nid: Nid::Sim(rs.nic),
            at: now,
        }
    }

    /// Whether a step through the mount must wait for a lock the kernel
    /// holds across its system call, taking the lock when free. The kernel
    /// holds a file's lock across a write(2) to it, so a mount's writes to
    /// one file go one at a time, and across its fsync(2), so they wait for
    /// one process's sync of it; and a directory's across a call that adds
    /// or removes a name in it (a create, mkdir, unlink, rmdir), so the
    /// processes creating files in one directory (IOR's) or their own
    /// directories in one (md-test's) take turns, each round trip in turn.
    /// Such a call locks the directory before it looks the name up
    /// (`filename_create`, `do_rmdir`: the lookup runs under the lock), so
    /// the lookup just before the change takes the change's lock, and the
    /// change keeps it (a kernel FUSE trace of four mkdirs in one
    /// directory: lookup, mkdir, lookup, mkdir, ..., one at a time).
    fn waits_for_kernel_lock(&mut self, rank: u32, step: &Step) -> bool {
        if !self.sc.cluster.metadata.posix_mount {
            return false;
        }
        let Some((held, for_change)) = self.lock_taken(rank, step) else {
            return false;
        };
        if self.ranks[rank as usize].holds == Some(held) {
            // Taken by the lookup before this change.
            return false;
        }
        let lock = self.kernel_lock(rank, held);
        if lock.holder.is_some() {
            lock.waiting.push_back(rank);
            return true;
        }
        lock.holder = Some(rank);
        let rs = &mut self.ranks[rank as usize];
        rs.holds = Some(held);
        rs.held_for_change = for_change;
        false
    }

    /// The kernel lock a step takes, and whether it takes it for the
    /// change after it: its own system call's, or, for the lookup of the
    /// name a change in a shared directory changes, that change's.
    fn lock_taken(&self, rank: u32, step: &Step) -> Option<(Held, bool)> {
        if let Some(held) = self.lock_of(rank, step) {
            return Some((held, false));
        }
        let Step::Meta {
            op: concerto_core::MetaOp::Getattr,
            target,
        } = step
        else {
            return None;
        };
        let next = self.ranks[rank as usize].steps.last()?;
        let Step::Meta {
            target: changed, ..
        } = next
        else {
            return None;
        };
        match self.lock_of(rank, next) {
            Some(held @ Held::Directory(_)) if changed == target => Some((held, true)),
            _ => None,
        }
    }

    /// The kernel lock a step takes for its own system call, if any.
    fn lock_of(&self, rank: u32, step: &Step) -> Option<Held> {
        let app = self.ranks[rank as usize].app;
        let a = &self.apps[app as usize];
        // Asked only of a create or remove: the kind's answer is fixed.
        let own_directories = || {
            self.sc.apps[a.spec]
                .workload
                .workload()
                .files_in_process_directory()
        };
        match step {
            Step::Data {
                op: DataOp::Write,
                access,
            } => Some(Held::File(a.files[access.file as usize])),
            // The close of a written file is its fsync(2), which the
            // kernel makes under the file's lock (`fuse_fsync`: the writes
            // in flight, then the FSYNC request), so the node's other
            // writes to the file wait for the servers' syncs.
            Step::Close { file, written } if !written.is_empty() => {
                Some(Held::File(a.files[*file as usize]))
            }
            Step::Meta {
                op: concerto_core::MetaOp::Mkdir | concerto_core::MetaOp::Rmdir,
                target: MetaTarget::Dir,
            } => Some(Held::Directory(app)),
            Step::Meta {
                op: concerto_core::MetaOp::Create | concerto_core::MetaOp::Remove,
                target: MetaTarget::File(_),
            } if !own_directories() => Some(Held::Directory(app)),
            _ => None,
        }
    }

    /// The lock `held` in the kernel of `rank`'s node.
    fn kernel_lock(&mut self, rank: u32, held: Held) -> &mut KernelLock {
        let node = self.ranks[rank as usize].nic;
        self.kernel_locks.entry((held, node)).or_default()
    }

    /// A data step as the client's data path shapes it: a write held and
    /// sent behind (`cluster.write_behind`), a read served from what was
    /// read ahead (`cluster.read_ahead`), or else split by the layout.
    fn issue_data(&mut self, rank: u32, op: Op, access: &Access, origin: Origin) {
        let app = self.ranks[rank as usize].app;
        let file = self.apps[app as usize].files[access.file as usize];
        if op == Op::Read && self.read_from_page_cache(rank, file, &access.extents, origin.at) {
            return;
        }
        self.page_cache_keeps(rank, file, &access.extents, op == Op::Write);
        let f = &mut self.files[file as usize];
        if op == Op::Write {
            let end = access.extents.last().map_or(0, Extent::end);
            f.written_end = f.written_end.max(end);
        }
        if f.writes.is_some() {
            if op == Op::Write {
                return self.issue_behind(rank, file, access, origin);
            }
            self.send_overlapping_behind(file, access, origin.at);
        }
        if op == Op::Read && self.sc.cluster.read_ahead && access.extents.len() == 1 {
            return self.issue_read_ahead(rank, access, origin);
        }
        self.issue_split(rank, op, access, origin)
    }

    /// A data step as the layout splits it: one piece per server, all
    /// sent at once.
    pub(super) fn issue_split(&mut self, rank: u32, op: Op, access: &Access, origin: Origin) {
        let rs = &self.ranks[rank as usize];
        let (file, call) = (
            self.apps[rs.app as usize].files[access.file as usize],
            rs.call,
        );
        // The buffer of pieces is reused from step to step.
        let mut pieces = std::mem::take(&mut self.split);
        self.files[file as usize]
            .layout
            .split_extents_into(&access.extents, &mut pieces);
        self.ranks[rank as usize].pending = pieces.len() as u32;
        for p in pieces.drain(..) {
            let req = piece_request(origin.request(op, file as u64), &p.extents, p.bytes);
            let piece = self.new_piece(rank, p.server, file, call, p.bytes, req, origin.at);
            self.send_request(piece, origin.at);
        }
        self.split = pieces;
    }

    /// A data step of a process that orders its transfers: its blocks in
    /// the order the application's transfer ordering gives, one at a time.
    fn issue_ordered(
        &mut self,
        rank: u32,
        (op, access): (Op, &Access),
        ordering: concerto_core::client::ordering::Ordering,
        origin: Origin,
    ) {
        let rs = &self.ranks[rank as usize];
        let (app, call) = (rs.app, rs.call);
        let a = &self.apps[app as usize];
        let spec = &self.sc.apps[a.spec];
        let file = a.files[access.file as usize];
        let layout = &self.files[file as usize].layout;
        let b = spec.schedule_block.map_or(layout.unit(), |b| b.0);
        let blocks = ordering::blocks(layout, &access.extents, b);
        // hash-IOS staggers the processes of one application by
        // rank; random-IOS draws each process's order from the
        // run's seed, the application and the rank.
        let sequence = ordering::order(
            &blocks,
            origin.rank,
            self.sc.cluster.servers,
            ordering,
            self.seed ^ (u64::from(app) << 40),
        );
        self.ranks[rank as usize].pending = sequence.len() as u32;
        for &i in sequence.iter().rev() {
            let block = &blocks[i];
            let req = piece_request(origin.request(op, file as u64), &block.extents, block.bytes);
            let piece = self.new_piece(rank, block.server, file, call, block.bytes, req, origin.at);
            self.ranks[rank as usize].blocks.push(piece);
        }
        self.send_block(rank, origin.at);
    }

    /// A close: when something was written, the flush (an fsync to each
    /// server written, a write of no bytes to its scheduler as the real
    /// server queues it, its device charging `fsync`; and the namespace's
    /// sync); then the release's notice, which the process does not wait
    /// for.
    fn issue_close(&mut self, rank: u32, file: u32, written: &[Extent], origin: Origin) {
        let rs = &self.ranks[rank as usize];
        let (file, call) = (self.apps[rs.app as usize].files[file as usize], rs.call);
        let meta_server = self.files[file as usize].meta_server;
        let setattr = Op::Meta(concerto_core::MetaOp::Setattr);
        // (server, op, waited for)
        let mut sends: SmallVec<[(u32, Op, bool); 4]> = SmallVec::new();
        if !written.is_empty() {
            let mut pieces = std::mem::take(&mut self.split);
            self.files[file as usize]
                .layout
                .split_extents_into(written, &mut pieces);
            sends.extend(pieces.iter().map(|p| (p.server, Op::Write, true)));
            sends.push((meta_server, setattr, true));
            self.split = pieces;
        }
        sends.push((meta_server, setattr, false));
        let waited = sends.iter().filter(|s| s.2).count() as u32;
        self.ranks[rank as usize].pending = waited;
        for (server, op, wait) in sends {
            let req = origin.request(op, file as u64);
            let piece = self.new_piece(rank, server, file, call, 0, req, origin.at);
            self.pieces[piece as usize].background = !wait;
            self.send_request(piece, origin.at);
        }
        if waited == 0 {
            self.step_done(rank, origin.at);
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn new_piece(
        &mut self,
        rank: u32,
        server: u32,
        file: u32,
        call: u32,
        bytes: u64,
        req: Request,
        now: Time,
    ) -> u32 {
        self.alloc_piece(Piece {
            rank,
            server,
            file,
            op: req.op,
            call,
            bytes,
            issue: now,
            arrive: Time::ZERO,
            start: Time::ZERO,
            done: Time::ZERO,
            req: Some(req),
            ticket: None,
            batch: collective::NO_BATCH,
            cached: false,
            background: false,
            behind: false,
            fetch: super::NO_FETCH,
            data_in: Time::ZERO,
            objects: 0,
        })
    }

    /// Puts a piece's request (with the data, for a write) on the wire to
    /// its server; returns when the client's NIC has sent it (unknown yet
    /// in `shared` mode, where later messages share the NIC).
    pub(super) fn send_request(&mut self, piece: u32, now: Time) -> Option<Time> {
        let p = &mut self.pieces[piece as usize];
        p.issue = now;
        if self.net.is_instant() {
            // No network: in the server's queue now, in the order sent.
            self.reach_server(piece, now);
            return Some(now);
        }
        let wire = self.net.header_bytes() + if p.op == Op::Write { p.bytes } else { 0 };
        if self.net.is_shared() {
            let (src, dst) = (self.ranks[p.rank as usize].nic, p.server);
            let (src, dst) = (sharing::Nic::Client(src), sharing::Nic::Server(dst));
            self.share_send(src, dst, wire, sharing::Message::Request { piece }, now);
            return None;
        }
        let sent = self.net.send(
            now,
            wire,
            End {
                nic: &mut self.clients[self.ranks[p.rank as usize].nic as usize],
                bandwidth: self.net.client_bandwidth(),
            },
            End {
                nic: &mut self.servers[p.server as usize].nic,
                bandwidth: self.net.server_bandwidth(),
            },
            &mut self.rng_net,
        );
        // A streamed write reaches the server when its first buffer does.
        let reach = match (p.op, self.net.streamed(wire)) {
            (Op::Write, Some(behind)) => sent
                .arrival
                .saturating_sub(self.net.client_bandwidth().transfer_time(behind)),
            _ => sent.arrival,
        };
        // Simultaneous arrivals at a server are taken in random order.
        let tie = self.rng_tie.gen::<u32>();
        self.events
            .schedule(reach, Class::Normal, tie, Event::ReachServer { piece });
        Some(sent.sent)
    }

    /// Sends the next block of a process that orders its blocks. The process
    /// does one transfer at a time: a write block's successor goes once the
    /// block has left the client's NIC; a read block's once its data has
    /// come back (see `response`).
    pub(super) fn send_block(&mut self, rank: u32, now: Time) {
        let Some(piece) = self.ranks[rank as usize].blocks.pop() else {
            return;
        };
        let is_write = self.pieces[piece as usize].op == Op::Write;
        // In `shared` mode the NIC's end of the block sends the next.
        let Some(sent) = self.send_request(piece, now) else {
            return;
        };
        if is_write && !self.ranks[rank as usize].blocks.is_empty() {
            self.events
                .schedule(sent, Class::Normal, 0, Event::SendBlock { rank });
        }
    }

    pub(super) fn alloc_piece(&mut self, p: Piece) -> u32 {
        match self.free_pieces.pop() {
            Some(i) => {
                self.pieces[i as usize] = p;
                i
            }
            None => {
                self.pieces.push(p);
                (self.pieces.len() - 1) as u32
            }
        }
    }

    pub(super) fn reach_client(&mut self, piece: u32, now: Time) {
        let p = &self.pieces[piece as usize];
        let wire = self.net.header_bytes() + if p.op == Op::Read { p.bytes } else { 0 };
        let done = self.net.receive(
            now,
            wire,
            &mut self.clients[self.ranks[p.rank as usize].nic as usize],
            self.net.client_bandwidth(),
        );
        if done == now {
            self.response(piece, now);
        } else {
            self.events
                .schedule(done, Class::Normal, 0, Event::Response { piece });
        }
    }

    pub(super) fn response(&mut self, piece: u32, now: Time) {
        let p = &self.pieces[piece as usize];
        let (rank, bytes, is_meta, is_read) = (p.rank, p.bytes, !p.op.is_data(), p.op == Op::Read);
        let (background, behind, fetch) = (p.background, p.behind, p.fetch);
        let batch = p.batch;
        // A reaper's removal of objects answers its metadata server's reaper.
        let reaper = (p.objects > 0).then(|| self.files[p.file as usize].meta_server);
        if let Some(detail) = self.detail.as_mut() {
            detail.push(PieceRecord {
                app: self.ranks[rank as usize].app,
                rank: self.ranks[rank as usize].rank,
                call: p.call,
                server: p.server,
                op: p.op,
                bytes,
                issue: p.issue,
                arrive: p.arrive,
                start: p.start,
                done: p.done,
                response: now,
            });
        }
        self.free_pieces.push(piece);
        let rs = &mut self.ranks[rank as usize];
        let a = &mut self.apps[rs.app as usize];
        a.pieces += 1;
        if batch != collective::NO_BATCH {
            // A collective call counts the bytes it was asked for when it
            // ends (its plan may read some twice or exchange them).
            return self.batch_piece_done(rank, batch, now);
        }
        a.bytes += bytes;
        a.metadata_ops += is_meta as u64;
        if behind {
            return self.behind_done(rank, bytes, now);
        }
        if fetch != super::NO_FETCH {
            return self.fetch_piece_done(fetch, now);
        }
        if background {
            if let Some(server) = reaper {
                self.reaped(server, now);
            }
            return;
        }
        rs.pending -= 1;
        if rs.pending > 0 {
            if is_read && !rs.blocks.is_empty() {
                self.send_block(rank, now);
            }
            return;
        }
        self.step_done(rank, now);
    }

    /// The rank's step has all its replies: the kernel lock it held passes
    /// to the next rank waiting (unless the step was the lookup before a
    /// change, which keeps it), and the rank goes on to its next step,
    /// or the call's end.
    pub(super) fn step_done(&mut self, rank: u32, now: Time) {
        let rs = &mut self.ranks[rank as usize];
        // A lookup's lock stays with the change after it.
        let kept = std::mem::take(&mut rs.held_for_change);
        if let Some(held) = rs.holds.take_if(|_| !kept) {
            let lock = self.kernel_lock(rank, held);
            lock.holder = None;
            if let Some(next) = lock.waiting.pop_front() {
                self.issue_step(next, now);
            }
        }
        if self.ranks[rank as usize].steps.is_empty() {
            self.call_done(rank, now);
        } else {
            self.next_step(rank, now);
        }
    }

    /// The rank's current call has finished all its steps.
    pub(super) fn call_done(&mut self, rank: u32, now: Time) {
        let rs = &mut self.ranks[rank as usize];
        let app = rs.app;
        let a = &mut self.apps[app as usize];
        let spec = &self.sc.apps[a.spec];
        if spec.barrier {
            a.ranks_pending -= 1;
            if a.ranks_pending == 0 {
                self.operation_done(app, now);
            }
        } else {
            a.completions.push((now - rs.issue).as_secs_f64());
            rs.call += 1;
            if let Some(p) = self.progress {
                p.add(1);
            }
            if rs.call < spec.calls_of(rs.rank) {
                self.events.schedule(
                    spec.issue_time(rs.rank, rs.call, now),
                    Class::Normal,
                    0,
                    Event::Call { rank },
                );
            } else {
                a.ranks_finished += 1;
                if a.ranks_finished == spec.processes {
                    a.end = now;
                }
            }
        }
    }

    pub(super) fn operation_done(&mut self, app: u32, now: Time) {
        let a = &mut self.apps[app as usize];
        let spec = &self.sc.apps[a.spec];
        a.completions.push((now - a.op_issue).as_secs_f64());
        if let Some(call) = a.collective.take() {
            a.bytes += call.requested();
        }
        let issue = a.op_issue;
        // The buffer is reused from operation to operation.
        let mut finishes = std::mem::take(&mut self.finishes);
        finishes.clear();
        finishes.extend(
            a.op_servers
                .iter()
                .map(|&s| (self.servers[s as usize].finish[&app].last - issue).as_secs_f64()),
        );
        if let Some(spread) = finish_spread(&finishes) {
            a.spreads.push(spread);
        }
        self.finishes = finishes;
        a.op_servers.clear();
        let call = a.next_call;
        a.next_call += 1;
        if a.next_call < spec.calls() {
            self.events.schedule(
                now + spec.compute_before(a.next_call),
                Class::Normal,
                0,
                Event::Release { app },
            );
        } else {
            a.end = now;
        }
        self.count_progress();
        if let Some(arbiter) = &mut self.arbiter {
            let a = &self.apps[app as usize];
            self.phases.push(PhaseRecord {
                app,
                phase: call,
                request_s: a.op_issue.as_secs_f64(),
                start_s: a.phase_start.as_secs_f64(),
                end_s: now.as_secs_f64(),
                bytes: spec.bytes_of_call(call) as f64,
                priority: a.phase_priority,
            });
            for (next, priority) in arbiter.end_phase(AppId(app), now) {
                self.grant(next.0, priority, now);
            }
        }
    }
}

/// `req` narrowed to one server's piece of an access (a split piece or an
/// ordered block): its object `extents` of `bytes` in all, as list I/O
/// when there are several.
pub(super) fn piece_request(mut req: Request, extents: &[Extent], bytes: u64) -> Request {
    req.offset = extents[0].offset;
    req.len = bytes;
    if extents.len() > 1 {
        req.segments = extents.to_vec();
    }
    req
}

/// Whose a step's requests are and when they leave: what every request of
/// the step carries.
#[derive(Clone, Copy)]
pub(super) struct Origin {
    app: u32,
    rank: u32,
    weight: f64,
    user: Option<u32>,
    group: Option<u32>,
    /// The rank's node.
    nid: Nid,
    pub(super) at: Time,
}

impl Origin {
    /// A request of this origin for `op` on `object`, covering nothing yet
    /// (see [`piece_request`]).
    pub(super) fn request(&self, op: Op, object: u64) -> Request {
        Request {
            id: RequestId(0),
            app: AppId(self.app),
            rank: self.rank,
            issue_time: self.at,
            op,
            object: ObjectId(object),
            offset: 0,
            len: 0,
            segments: Vec::new(),
            weight: Some(self.weight),
            user: self.user,
            group: self.group,
            nid: Some(self.nid),
        }
    }
}
