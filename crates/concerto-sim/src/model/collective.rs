//! Collective calls: a planner's [`CollectivePlan`] run as simulated
//! requests and messages (the plan contract is in
//! `concerto_core::client::collective`).
//!
//! At the barrier release the application's planner plans the call from
//! every process's accesses. Each process then sends its batches in order,
//! a batch once its conditions hold (its previous batch complete if it
//! says so, the batches it waits for sent, in a write the data exchanged
//! into it arrived) and its delay has passed. A batch's list requests are
//! split over the servers like any access and go through the same wire,
//! queues and disks. Exchanges are messages between the processes' NICs:
//! in a write the owners send when the aggregator's batch is otherwise
//! ready (ROMIO's exchange starts the round), in a read the process that
//! did the I/O sends once its batch is complete. A process's part of the
//! call is done when its batches are complete and its exchanges delivered;
//! the call ends, as every barrier operation does, when all parts are.

use std::rc::Rc;

use concerto_core::client::collective::{
    CollectivePlan, Direction, Independent, Planner, INDEPENDENT_CALL_EXTENTS,
};
use concerto_core::{Op, Time};

use super::{Event, Simulation};
use crate::engine::Class;
use crate::network::End;

/// Marks a piece that belongs to no collective batch (else a piece's
/// `batch` is the flat number of its batch in the call).
pub(super) const NO_BATCH: u32 = u32::MAX;

/// What a plan fixes about a call: the plan, its batches numbered flat
/// (rank by rank, in order), who waits for whom as adjacency lists in one
/// array each, and the state every call starts from. A pattern that
/// repeats itself shifted shares one shape among all its calls.
pub(super) struct CallShape {
    plan: CollectivePlan,
    /// The bytes the processes asked for (what the call counts as moved).
    requested: u64,
    /// Per rank: the flat number of its first batch (and one past the last).
    first: Vec<u32>,
    /// The batches that wait for batch i to be sent:
    /// `waiting[waiting_at[i]..waiting_at[i + 1]]`.
    waiting_at: Vec<u32>,
    waiting: Vec<u32>,
    /// The exchanges into batch i (write) or out of it (read), likewise.
    exchanges_at: Vec<u32>,
    exchanges: Vec<u32>,
    /// Every batch's and every rank's state when a call starts.
    batches: Vec<BatchState>,
    left: Vec<u32>,
}

/// The collective call an application is running.
pub(super) struct CollectiveCall {
    shape: Rc<CallShape>,
    /// How far this call's extents lie past the plan's (a plan made for an
    /// earlier call of a pattern whose calls are shifted copies).
    shift: u64,
    /// Per rank: its next batch to send (flat).
    next: Vec<u32>,
    batches: Vec<BatchState>,
    /// Per rank: batches not complete plus exchanges not delivered that its
    /// part of the call waits for.
    left: Vec<u32>,
}

#[derive(Clone, Copy, Default)]
struct BatchState {
    /// Batches it waits for that have not been sent yet.
    unsent: u32,
    /// Its send is scheduled (after its delay) or done.
    scheduled: bool,
    complete: bool,
    /// Pieces not yet answered.
    outstanding: u32,
    /// Write: exchanged data not yet arrived; `pulled` once asked for.
    inbound: u32,
    pulled: bool,
}

/// Adjacency lists from (from, to) pairs over `n` nodes: offsets and
/// targets, each node's targets in the order given (a counting pass, no
/// sort: this runs every call). A pair given twice is listed twice, which
/// the counts built from the lists then also count twice.
fn adjacency(n: usize, edges: &[(u32, u32)]) -> (Vec<u32>, Vec<u32>) {
    let mut at = vec![0u32; n + 1];
    for &(from, _) in edges {
        at[from as usize + 1] += 1;
    }
    for i in 0..n {
        at[i + 1] += at[i];
    }
    let mut fill = at.clone();
    let mut to = vec![0u32; edges.len()];
    for &(from, target) in edges {
        to[fill[from as usize] as usize] = target;
        fill[from as usize] += 1;
    }
    (at, to)
}

impl CallShape {
    pub(super) fn new(plan: CollectivePlan, requested: u64) -> CallShape {
        let mut first = Vec::with_capacity(plan.processes.len() + 1);
        let mut total = 0u32;
        for bs in &plan.processes {
            first.push(total);
            total += bs.len() as u32;
        }
        first.push(total);
        let flat = |rank: u32, b: u32| first[rank as usize] + b;
        let mut batches = vec![BatchState::default(); total as usize];
        let mut left: Vec<u32> = plan.processes.iter().map(|bs| bs.len() as u32).collect();
        let mut edges = Vec::new();
        for (rank, bs) in plan.processes.iter().enumerate() {
            for (b, batch) in bs.iter().enumerate() {
                let me = flat(rank as u32, b as u32);
                for &(r, i) in &batch.after_sent {
                    edges.push((flat(r, i), me));
                }
            }
        }
        let (waiting_at, waiting) = adjacency(total as usize, &edges);
        for &w in &waiting {
            batches[w as usize].unsent += 1;
        }
        let mut edges = Vec::with_capacity(plan.exchanges.len());
        for (i, x) in plan.exchanges.iter().enumerate() {
            match plan.direction {
                // The aggregator's batch waits for the data; the owner's
                // part is done once it has delivered it.
                Direction::Write => {
                    let to = flat(x.to, x.batch);
                    edges.push((to, i as u32));
                    batches[to as usize].inbound += 1;
                    left[x.from as usize] += 1;
                }
                // The owner's part waits for the data.
                Direction::Read => {
                    edges.push((flat(x.from, x.batch), i as u32));
                    left[x.to as usize] += 1;
                }
            }
        }
        let (exchanges_at, exchanges) = adjacency(total as usize, &edges);
        CallShape {
            first,
            plan,
            requested,
            batches,
            waiting_at,
            waiting,
            exchanges_at,
            exchanges,
            left,
        }
    }

    /// The rank whose batch flat batch `i` is.
    fn rank_of(&self, i: u32) -> u32 {
        self.first.partition_point(|&f| f <= i) as u32 - 1
    }

    fn exchanges_of(&self, i: u32) -> std::ops::Range<usize> {
        self.exchanges_at[i as usize] as usize..self.exchanges_at[i as usize + 1] as usize
    }
}

impl CollectiveCall {
    /// The bytes this call counts as moved.
    pub(super) fn requested(&self) -> u64 {
        self.shape.requested
    }

    /// A call whose processes' parts are held behind
    /// (`Simulation::collective_behind`): no batches, and nothing it
    /// counts as moved (its pieces count their bytes when they return).
    pub(super) fn held(direction: Direction, processes: u32) -> CollectiveCall {
        let plan = CollectivePlan {
            direction,
            processes: vec![Vec::new(); processes as usize],
            exchanges: Vec::new(),
            agents: Vec::new(),
            arrangement: "held behind".into(),
        };
        CollectiveCall::start(Rc::new(CallShape::new(plan, 0)), 0)
    }

    fn start(shape: Rc<CallShape>, shift: u64) -> CollectiveCall {
        CollectiveCall {
            next: shape.first[..shape.first.len() - 1].to_vec(),
            batches: shape.batches.clone(),
            left: shape.left.clone(),
            shape,
            shift,
        }
    }
}

impl Simulation<'_> {
    /// The barrier has released a collective call: plan it and start every
    /// process's first batches.
    pub(super) fn start_collective(&mut self, app: u32, now: Time) {
        if self.hold_collective(app, now) {
            return;
        }
        let a = &self.apps[app as usize];
        let spec = &self.sc.apps[a.spec];
        let processes = spec.processes;
        let (Some(pattern), Some(planner)) = (&self.patterns[a.spec], &self.planners[a.spec])
        else {
            return;
        };
        let call_no = a.next_call as u64;
        let layout = &self.files[a.files[0] as usize].layout;
        // A pattern whose calls are shifted copies of each other, by whole
        // stripes over all the file's servers, has shifted copies of one
        // plan: plan once.
        let shift = pattern
            .call_shift(processes)
            .filter(|s| s % (layout.unit() * layout.stripe_count() as u64) == 0);
        let (shape, moved) = match (&a.plan_cache, shift) {
            (Some((shape, base)), Some(s)) => (shape.clone(), (call_no - base) * s),
            _ => {
                let accesses = pattern.accesses(processes, call_no);
                // ROMIO's romio_cb rule, as the MPI-IO library applies it:
                // a call whose processes' data share no stripe unit runs as
                // each one's independent call.
                let independent = Independent {
                    max_segments: INDEPENDENT_CALL_EXTENTS,
                };
                let alone = spec
                    .collective
                    .as_ref()
                    .is_some_and(|c| c.runs_independent(&accesses, layout.unit()));
                let chosen: &dyn Planner = if alone {
                    &independent
                } else {
                    planner.as_ref()
                };
                let plan = chosen.plan(spec.op.direction(), &accesses, layout).expect(
                    "validated: the access patterns never have two processes write the same bytes",
                );
                let requested = accesses.iter().flatten().map(|e| e.len).sum();
                (Rc::new(CallShape::new(plan, requested)), 0)
            }
        };
        if shift.is_some() && a.plan_cache.is_none() {
            self.apps[app as usize].plan_cache = Some((shape.clone(), call_no));
        }
        let a = &self.apps[app as usize];
        let call = CollectiveCall::start(shape, moved);
        let first = a.first_rank;
        let done: Vec<u32> = (0..processes)
            .filter(|&r| call.left[r as usize] == 0)
            .collect();
        self.apps[app as usize].collective = Some(call);
        for r in done {
            self.call_done(first + r, now);
        }
        for r in 0..processes {
            self.try_batch(app, r, now);
        }
    }

    /// On a file written behind: a write call that runs as each process's
    /// independent call (romio_cb's rule) is held behind
    /// (`collective_behind`), and whether it was is the answer; before
    /// any other call every process's held writes leave, as the MPI-IO
    /// library settles them before a planned call (an agent may read them).
    fn hold_collective(&mut self, app: u32, now: Time) -> bool {
        let a = &self.apps[app as usize];
        let file = a.files[0];
        if self.files[file as usize].writes.is_none() {
            return false;
        }
        let spec = &self.sc.apps[a.spec];
        let call_no = a.next_call as u64;
        let held = match (&self.patterns[a.spec], spec.op.direction()) {
            (Some(pattern), Direction::Write) => {
                let accesses = pattern.accesses(spec.processes, call_no);
                let unit = self.files[file as usize].layout.unit();
                let alone = spec
                    .collective
                    .as_ref()
                    .is_some_and(|c| c.runs_independent(&accesses, unit));
                alone.then_some(accesses)
            }
            _ => None,
        };
        match held {
            Some(accesses) => {
                let last = call_no + 1 == spec.calls() as u64;
                self.collective_behind(app, file, accesses, last, now);
                true
            }
            None => {
                self.send_all_behind(file, now);
                false
            }
        }
    }

    /// Sends `rank`'s next batch if its conditions hold (after its delay);
    /// in a write, first asks the owners for the data it needs.
    fn try_batch(&mut self, app: u32, rank: u32, now: Time) {
        let Some(call) = self.apps[app as usize].collective.as_mut() else {
            return;
        };
        let b = call.next[rank as usize];
        if b == call.shape.first[rank as usize + 1] {
            return;
        }
        let st = call.batches[b as usize];
        if st.scheduled || st.unsent > 0 {
            return;
        }
        let index = (b - call.shape.first[rank as usize]) as usize;
        let batch = &call.shape.plan.processes[rank as usize][index];
        if batch.after_previous && index > 0 && !call.batches[b as usize - 1].complete {
            return;
        }
        if st.inbound > 0 {
            if !st.pulled {
                call.batches[b as usize].pulled = true;
                self.send_exchanges_of(app, b, now);
            }
            return;
        }
        call.batches[b as usize].scheduled = true;
        let delay = batch.delay;
        if delay.is_zero() {
            self.send_batch(app, rank, b, now);
        } else {
            self.events.schedule(
                now + delay,
                Class::Normal,
                0,
                Event::SendBatch {
                    app,
                    rank,
                    batch: b,
                },
            );
        }
    }

    /// Puts a batch's requests on the wire, each split over the servers.
    pub(super) fn send_batch(&mut self, app: u32, rank: u32, b: u32, now: Time) {
        let a = &self.apps[app as usize];
        let (file, global, call_index) = (a.files[0], a.first_rank + rank, a.next_call);
        // Whose the requests are: as every other step of this rank's.
        let origin = self.origin(global, now);
        let Some(call) = self.apps[app as usize].collective.as_ref() else {
            return;
        };
        let op = match call.shape.plan.direction {
            Direction::Read => Op::Read,
            Direction::Write => Op::Write,
        };
        let index = (b - call.shape.first[rank as usize]) as usize;
        let layout = &self.files[file as usize].layout;
        let mut sends = std::mem::take(&mut self.sends);
        let mut shifted = Vec::new();
        for request in &call.shape.plan.processes[rank as usize][index].requests {
            let extents = if call.shift == 0 {
                &request.extents[..]
            } else {
                shifted.clear();
                shifted.extend(
                    request
                        .extents
                        .iter()
                        .map(|e| concerto_core::Extent::new(e.offset + call.shift, e.len)),
                );
                &shifted[..]
            };
            for p in layout.split_extents(extents) {
                let req = origin.request(op, file as u64);
                let req = super::piece_request(req, &p.extents, p.bytes);
                sends.push((p.server, file, p.bytes, req));
            }
        }
        let count = sends.len() as u32;
        for (server, file, bytes, req) in sends.drain(..) {
            let piece = self.new_piece(global, server, file, call_index, bytes, req, now);
            self.pieces[piece as usize].batch = b;
            self.send_request(piece, now);
        }
        self.sends = sends;
        let Some(call) = self.apps[app as usize].collective.as_mut() else {
            return;
        };
        let st = &mut call.batches[b as usize];
        st.outstanding = count;
        call.next[rank as usize] = b + 1;
        let (from, to) = (
            call.shape.waiting_at[b as usize] as usize,
            call.shape.waiting_at[b as usize + 1] as usize,
        );
        let mut ready = Vec::new();
        for k in from..to {
            let w = call.shape.waiting[k];
            let st = &mut call.batches[w as usize];
            st.unsent -= 1;
            if st.unsent == 0 {
                ready.push(call.shape.rank_of(w));
            }
        }
        if count == 0 {
            self.batch_complete(app, rank, b, now);
        }
        self.try_batch(app, rank, now);
        for r in ready {
            self.try_batch(app, r, now);
        }
    }

    /// A reply for one of (flat) batch `b`'s pieces has arrived.
    pub(super) fn batch_piece_done(&mut self, rank: u32, b: u32, now: Time) {
        let app = self.ranks[rank as usize].app;
        let local = self.ranks[rank as usize].rank;
        let Some(call) = self.apps[app as usize].collective.as_mut() else {
            return;
        };
        let st = &mut call.batches[b as usize];
        st.outstanding -= 1;
        if st.outstanding == 0 {
            self.batch_complete(app, local, b, now);
        }
    }

    fn batch_complete(&mut self, app: u32, rank: u32, b: u32, now: Time) {
        let Some(call) = self.apps[app as usize].collective.as_mut() else {
            return;
        };
        call.batches[b as usize].complete = true;
        if call.shape.plan.direction == Direction::Read {
            self.send_exchanges_of(app, b, now);
        }
        self.part_done(app, rank, now);
        self.try_batch(app, rank, now);
    }

    /// One thing `rank`'s part of the call waited for has happened.
    fn part_done(&mut self, app: u32, rank: u32, now: Time) {
        let first_rank = self.apps[app as usize].first_rank;
        let Some(call) = self.apps[app as usize].collective.as_mut() else {
            return;
        };
        call.left[rank as usize] -= 1;
        if call.left[rank as usize] == 0 {
            self.call_done(first_rank + rank, now);
        }
    }

    /// Sends the exchanges into (write) or out of (read) flat batch `b`.
    fn send_exchanges_of(&mut self, app: u32, b: u32, now: Time) {
        let Some(call) = self.apps[app as usize].collective.as_ref() else {
            return;
        };
        for k in call.shape.exchanges_of(b) {
            self.send_exchange(app, k, now);
        }
    }

    /// Sends the exchange at position `k` of the call's exchange lists.
    fn send_exchange(&mut self, app: u32, k: usize, now: Time) {
        let first_rank = self.apps[app as usize].first_rank;
        let Some(call) = self.apps[app as usize].collective.as_ref() else {
            return;
        };
        let x = call.shape.exchanges[k];
        let e = &call.shape.plan.exchanges[x as usize];
        let (from, to) = (first_rank + e.from, first_rank + e.to);
        let wire = self.net.header_bytes() + e.bytes;
        let (from, to) = (self.ranks[from as usize].nic, self.ranks[to as usize].nic);
        if from == to {
            // Processes of one node exchange through its memory, not its NIC.
            self.events.schedule(
                now,
                Class::Normal,
                0,
                Event::ExchangeArrive { app, exchange: x },
            );
            return;
        }
        if self.net.is_shared() {
            let message = super::sharing::Message::Exchange { app, exchange: x };
            let (src, dst) = (
                super::sharing::Nic::Client(from),
                super::sharing::Nic::Client(to),
            );
            return self.share_send(src, dst, wire, message, now);
        }
        let (src, dst) = pair_mut(&mut self.clients, from as usize, to as usize);
        let sent = self.net.send(
            now,
            wire,
            End {
                nic: src,
                bandwidth: self.net.client_bandwidth(),
            },
            End {
                nic: dst,
                bandwidth: self.net.client_bandwidth(),
            },
            &mut self.rng_net,
        );
        self.events.schedule(
            sent.arrival,
            Class::Normal,
            0,
            Event::ExchangeReach { app, exchange: x },
        );
    }

    /// An exchange message reaches its receiver's NIC.
    pub(super) fn exchange_reach(&mut self, app: u32, x: u32, now: Time) {
        let a = &self.apps[app as usize];
        let Some(call) = a.collective.as_ref() else {
            return;
        };
        let e = &call.shape.plan.exchanges[x as usize];
        let wire = self.net.header_bytes() + e.bytes;
        let to = a.first_rank + e.to;
        let done = self.net.receive(
            now,
            wire,
            &mut self.clients[self.ranks[to as usize].nic as usize],
            self.net.client_bandwidth(),
        );
        self.events.schedule(
            done,
            Class::Normal,
            0,
            Event::ExchangeArrive { app, exchange: x },
        );
    }

    /// An exchange has fully arrived.
    pub(super) fn exchange_arrive(&mut self, app: u32, x: u32, now: Time) {
        let Some(call) = self.apps[app as usize].collective.as_mut() else {
            return;
        };
        let e = &call.shape.plan.exchanges[x as usize];
        let (from, to, b) = (e.from, e.to, e.batch);
        match call.shape.plan.direction {
            Direction::Write => {
                let flat = call.shape.first[to as usize] + b;
                call.batches[flat as usize].inbound -= 1;
                self.part_done(app, from, now);
                self.try_batch(app, to, now);
            }
            Direction::Read => self.part_done(app, to, now),
        }
    }
}

/// Two distinct elements of one slice, both mutable.
fn pair_mut<T>(v: &mut [T], i: usize, j: usize) -> (&mut T, &mut T) {
    assert_ne!(i, j, "an exchange between a process and itself");
    if i < j {
        let (a, b) = v.split_at_mut(j);
        (&mut a[i], &mut b[0])
    } else {
        let (a, b) = v.split_at_mut(i);
        (&mut b[0], &mut a[j])
    }
}
