//! A collective call on one rank: core's plan for every rank's accesses,
//! executed as this rank's share of it.
//!
//! Every rank computes the same [`CollectivePlan`] from the same gathered
//! access lists (the planner is deterministic), then walks its own part
//! (see core's "How a plan runs"): its batches of list I/O in order, the
//! data exchanges into them (a write) or out of them (a read), and the
//! order between ranks' batches. The MPI side moves the bytes between
//! ranks; this side says which bytes, from and into which buffers, and
//! does the file I/O itself, through the client library. It is a list of
//! [`Op`]s; [`Execution::step`] runs those that are this side's and hands
//! the MPI side the next one that is its ([`Step`]).
//!
//! How exchanges meet: every rank sorts the plan's exchanges by the batch
//! they belong to (stable), and a sender posts its sends to a receiver in
//! that order, the receiver its receives from that sender in that order;
//! MPI's messages between two ranks on one tag do not overtake, so each
//! receive gets its exchange. "Batch `i` of rank `r` has been sent" is a
//! zero-byte note on a tag of its own, sent once the batch's requests are
//! on their way.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use futures::future::try_join_all;

use concerto_core::client::collective::{intersect, normalize, CollectivePlan, Direction};
use concerto_core::Extent;

use crate::access::Access;
use crate::session::Session;
use crate::view::Positions;

/// The tag of the exchanges' data.
pub const DATA_TAG: i32 = 7;
/// Notes carry `NOTE_TAG + batch % NOTE_TAGS` (MPI guarantees tags up to 32767).
const NOTE_TAG: i32 = 100;
const NOTE_TAGS: u32 = 30_000;

/// What the MPI side does next, as the C side reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Step {
    pub kind: i32,
    pub peer: i32,
    pub tag: i32,
    pub ptr: *mut u8,
    pub len: u64,
    /// `WAIT`: the requests `[first, first + count)` (numbered in the
    /// order the steps started them).
    pub first: u64,
    pub count: u64,
}

/// [`Step::kind`]s.
pub mod kind {
    /// Nothing more: wait for every request started, then finish.
    pub const DONE: i32 = 0;
    /// `MPI_Isend` of `len` bytes at `ptr` to `peer` (a request).
    pub const ISEND: i32 = 1;
    /// `MPI_Irecv` of `len` bytes into `ptr` from `peer` (a request).
    pub const IRECV: i32 = 2;
    /// `MPI_Waitall` on requests `[first, first + count)`.
    pub const WAIT: i32 = 3;
    /// A blocking zero-byte `MPI_Recv` from `peer`.
    pub const RECV_NOTE: i32 = 4;
    /// A zero-byte `MPI_Isend` to `peer` (a request).
    pub const SEND_NOTE: i32 = 5;
}

impl Step {
    fn mpi(kind: i32, peer: u32, tag: i32, ptr: *mut u8, len: u64) -> Step {
        Step {
            kind,
            peer: peer as i32,
            tag,
            ptr,
            len,
            first: 0,
            count: 0,
        }
    }
}

/// The buffer a step's bytes are in.
#[derive(Clone, Copy, Debug)]
enum Buffer {
    Send(usize),
    Recv(usize),
}

#[derive(Debug)]
enum Op {
    Isend {
        to: u32,
        buffer: Buffer,
    },
    Irecv {
        from: u32,
        buffer: Buffer,
    },
    Wait {
        first: u64,
        count: u64,
    },
    RecvNote {
        from: u32,
        batch: u32,
    },
    SendNote {
        to: u32,
        batch: u32,
    },
    /// A write's batch buffer, from this rank's data and what it received.
    Assemble(usize),
    Sleep(Duration),
    /// Starts a batch's requests.
    Io(usize),
    /// Waits for a batch's requests (all batches: `None`).
    AwaitIo(Option<usize>),
    /// Copies a read batch's bytes for exchange `x` into its send buffer.
    Pack {
        exchange: usize,
        buffer: usize,
    },
}

type IoTask = tokio::task::JoinHandle<Result<(Bytes, bool), String>>;

/// This rank's part of a plan, and the buffers it runs on (which stay
/// where they are until the call ends: the MPI side holds their addresses).
pub struct Execution {
    plan: CollectivePlan,
    ops: std::collections::VecDeque<Op>,
    sends: Vec<Vec<u8>>,
    recvs: Vec<Vec<u8>>,
    /// For each receive buffer, its exchange.
    recv_exchange: Vec<usize>,
    /// Per batch: its requests' extents, where each file byte of them is in
    /// the batch's bytes, and those bytes once assembled (a write) or read
    /// (a read).
    batches: Vec<Vec<Vec<Extent>>>,
    at: Vec<Positions>,
    data: Vec<Option<Bytes>>,
    tasks: Vec<Option<IoTask>>,
    pub error: Option<String>,
}

/// Who waits for each of `me`'s batches to be sent: batch -> ranks.
fn waiters(plan: &CollectivePlan, me: u32) -> HashMap<u32, Vec<u32>> {
    let mut waiters: HashMap<u32, Vec<u32>> = HashMap::new();
    for (r, batches) in plan.processes.iter().enumerate() {
        for b in batches {
            for &(s, i) in &b.after_sent {
                if s == me {
                    waiters.entry(i).or_default().push(r as u32);
                }
            }
        }
    }
    waiters
}

fn note_tag(batch: u32) -> i32 {
    NOTE_TAG + (batch % NOTE_TAGS) as i32
}

impl Execution {
    /// Rank `me`'s part of `plan`, for its `access`.
    pub fn new(plan: CollectivePlan, me: u32, access: &Access) -> Execution {
        let mut order: Vec<usize> = (0..plan.exchanges.len()).collect();
        order.sort_by_key(|&i| plan.exchanges[i].batch);
        let mine = &plan.processes[me as usize];
        let batches: Vec<Vec<Vec<Extent>>> = mine
            .iter()
            .map(|b| b.requests.iter().map(|r| r.extents.to_vec()).collect())
            .collect();
        let waiters = waiters(&plan, me);
        let mut e = Execution {
            ops: Default::default(),
            sends: Vec::new(),
            recvs: Vec::new(),
            recv_exchange: Vec::new(),
            data: vec![None; batches.len()],
            tasks: (0..batches.len()).map(|_| None).collect(),
            at: batches.iter().map(|b| Positions::of(&b.concat())).collect(),
            batches,
            error: None,
            plan,
        };
        let received = e.post_exchanges(me, &order, access);
        e.run_batches(me, &order, &waiters, &received);
        e.ops.push_back(Op::AwaitIo(None));
        e
    }

    /// The exchanges posted first: a write's sends of its own data, all at
    /// once; then every receive. Requests are numbered in the order their
    /// steps start them; returns, per batch, the number of its first
    /// receive and how many it has (a write waits for a batch's).
    fn post_exchanges(
        &mut self,
        me: u32,
        order: &[usize],
        access: &Access,
    ) -> HashMap<usize, (u64, u64)> {
        let mut requests = 0u64;
        if self.plan.direction == Direction::Write {
            for &x in order {
                let ex = &self.plan.exchanges[x];
                if ex.from == me {
                    let mut data = Vec::with_capacity(ex.bytes as usize);
                    access.gather(&ex.extents, &mut data);
                    self.sends.push(data);
                    self.ops.push_back(Op::Isend {
                        to: ex.to,
                        buffer: Buffer::Send(self.sends.len() - 1),
                    });
                    requests += 1;
                }
            }
        }
        let mut received: HashMap<usize, (u64, u64)> = HashMap::new();
        for &x in order {
            let ex = &self.plan.exchanges[x];
            if ex.to == me {
                let first = received.entry(ex.batch as usize).or_insert((requests, 0));
                first.1 += 1;
                self.recvs.push(vec![0; ex.bytes as usize]);
                self.recv_exchange.push(x);
                self.ops.push_back(Op::Irecv {
                    from: ex.from,
                    buffer: Buffer::Recv(self.recvs.len() - 1),
                });
                requests += 1;
            }
        }
        received
    }

    /// Each of my batches in turn: wait for what it waits for, assemble a
    /// write's data, its I/O, then tell its waiters; a read's batch then
    /// sends the others their bytes.
    fn run_batches(
        &mut self,
        me: u32,
        order: &[usize],
        waiters: &HashMap<u32, Vec<u32>>,
        received: &HashMap<usize, (u64, u64)>,
    ) {
        let direction = self.plan.direction;
        for (b, batch) in self.plan.processes[me as usize].clone().iter().enumerate() {
            for &(s, i) in &batch.after_sent {
                self.ops.push_back(Op::RecvNote { from: s, batch: i });
            }
            if batch.after_previous && b > 0 {
                self.ops.push_back(Op::AwaitIo(Some(b - 1)));
            }
            if direction == Direction::Write {
                if let Some(&(first, count)) = received.get(&b) {
                    self.ops.push_back(Op::Wait { first, count });
                }
                self.ops.push_back(Op::Assemble(b));
            }
            if !batch.delay.is_zero() {
                self.ops
                    .push_back(Op::Sleep(Duration::from_nanos(batch.delay.as_nanos())));
            }
            self.ops.push_back(Op::Io(b));
            for &r in waiters.get(&(b as u32)).into_iter().flatten() {
                self.ops.push_back(Op::SendNote {
                    to: r,
                    batch: b as u32,
                });
            }
            if direction == Direction::Read {
                self.send_read_bytes(me, order, b);
            }
        }
    }

    /// After a read's batch `b`: the bytes it read for others, packed and
    /// sent.
    fn send_read_bytes(&mut self, me: u32, order: &[usize], b: usize) {
        for &x in order {
            let ex = &self.plan.exchanges[x];
            if ex.from == me && ex.batch as usize == b {
                self.ops.push_back(Op::AwaitIo(Some(b)));
                self.sends.push(vec![0; ex.bytes as usize]);
                let buffer = self.sends.len() - 1;
                let to = ex.to;
                self.ops.push_back(Op::Pack {
                    exchange: x,
                    buffer,
                });
                self.ops.push_back(Op::Isend {
                    to,
                    buffer: Buffer::Send(buffer),
                });
            }
        }
    }

    fn pointer(&mut self, b: Buffer) -> (*mut u8, u64) {
        let v = match b {
            Buffer::Send(i) => &mut self.sends[i],
            Buffer::Recv(i) => &mut self.recvs[i],
        };
        (v.as_mut_ptr(), v.len() as u64)
    }

    /// Runs this side's operations up to the next one for the MPI side.
    pub fn step(&mut self, session: &Session, access: &mut Access) -> Step {
        while let Some(op) = self.ops.pop_front() {
            match op {
                Op::Isend { to, buffer } => {
                    let (ptr, len) = self.pointer(buffer);
                    return Step::mpi(kind::ISEND, to, DATA_TAG, ptr, len);
                }
                Op::Irecv { from, buffer } => {
                    let (ptr, len) = self.pointer(buffer);
                    return Step::mpi(kind::IRECV, from, DATA_TAG, ptr, len);
                }
                Op::Wait { first, count } => {
                    let mut s = Step::mpi(kind::WAIT, 0, 0, std::ptr::null_mut(), 0);
                    (s.first, s.count) = (first, count);
                    return s;
                }
                Op::RecvNote { from, batch } => {
                    return Step::mpi(
                        kind::RECV_NOTE,
                        from,
                        note_tag(batch),
                        std::ptr::null_mut(),
                        0,
                    )
                }
                Op::SendNote { to, batch } => {
                    return Step::mpi(
                        kind::SEND_NOTE,
                        to,
                        note_tag(batch),
                        std::ptr::null_mut(),
                        0,
                    )
                }
                Op::Assemble(b) => self.assemble(b, access),
                Op::Sleep(d) => std::thread::sleep(d),
                Op::Io(b) => self.start_io(b, session, access),
                Op::AwaitIo(which) => match which {
                    Some(b) => self.await_io(b, session, access),
                    None => {
                        for b in 0..self.tasks.len() {
                            self.await_io(b, session, access);
                        }
                    }
                },
                Op::Pack { exchange, buffer } => self.pack(exchange, buffer),
            }
        }
        Step::mpi(kind::DONE, 0, 0, std::ptr::null_mut(), 0)
    }

    fn fail(&mut self, e: String) {
        self.error.get_or_insert(e);
    }

    fn assemble(&mut self, b: usize, access: &Access) {
        let at = &self.at[b];
        let mut buf = vec![0u8; at.total as usize];
        let mut own = Vec::new();
        for piece in intersect(&normalize(&self.batches[b].concat()), &access.own) {
            own.clear();
            access.gather(&[piece], &mut own);
            at.copy_in(piece, &own, &mut buf);
        }
        for (k, &x) in self.recv_exchange.iter().enumerate() {
            let ex = &self.plan.exchanges[x];
            if ex.batch as usize == b {
                let from = Positions::of(&ex.extents);
                for &piece in ex.extents.iter() {
                    let mut bytes = Vec::with_capacity(piece.len as usize);
                    from.copy_out(piece, &self.recvs[k], &mut bytes);
                    at.copy_in(piece, &bytes, &mut buf);
                }
            }
        }
        self.data[b] = Some(Bytes::from(buf));
    }

    fn start_io(&mut self, b: usize, session: &Session, access: &Access) {
        if self.error.is_some() {
            return;
        }
        let client = session.client.clone();
        let handle = access.handle.clone();
        let requests = self.batches[b].clone();
        let task: IoTask = match self.plan.direction {
            Direction::Write => {
                let data = self.data[b].clone().unwrap_or_default();
                session.spawn(async move {
                    let mut at = 0usize;
                    let writes = requests.iter().map(|r| {
                        let n: u64 = r.iter().map(|e| e.len).sum();
                        let slice = data.slice(at..at + n as usize);
                        at += n as usize;
                        let (client, handle) = (&client, &handle);
                        async move { client.write_list(handle, r, &slice).await }
                    });
                    try_join_all(writes)
                        .await
                        .map(|_| (Bytes::new(), true))
                        .map_err(|e| e.to_string())
                })
            }
            Direction::Read => session.spawn(async move {
                let reads = requests
                    .iter()
                    .map(|r| client.read_list_complete(&handle, r));
                let parts = try_join_all(reads).await.map_err(|e| e.to_string())?;
                let complete = parts.iter().all(|p| p.1);
                let mut out = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
                for (bytes, _) in &parts {
                    out.extend_from_slice(bytes);
                }
                Ok((Bytes::from(out), complete))
            }),
        };
        self.tasks[b] = Some(task);
    }

    fn await_io(&mut self, b: usize, session: &Session, access: &mut Access) {
        let Some(task) = self.tasks[b].take() else {
            return;
        };
        match session.wait(task).and_then(|r| r) {
            Ok((bytes, complete)) => {
                if self.plan.direction == Direction::Read {
                    self.data[b] = Some(bytes);
                    access.incomplete |= !complete;
                }
            }
            Err(e) => self.fail(e),
        }
    }

    fn pack(&mut self, x: usize, buffer: usize) {
        let ex = &self.plan.exchanges[x];
        let from = &self.at[ex.batch as usize];
        let data = self.data[ex.batch as usize].clone().unwrap_or_default();
        if data.len() as u64 != from.total {
            // The batch failed; what is sent does not matter, the call fails.
            return;
        }
        let mut out = Vec::with_capacity(ex.bytes as usize);
        for &piece in ex.extents.iter() {
            from.copy_out(piece, &data, &mut out);
        }
        self.sends[buffer] = out;
    }

    /// After every request has completed: a read's bytes into the
    /// caller's buffer (its own from the batches it read, the rest from
    /// what it received).
    pub fn finish(&mut self, access: &Access) -> Result<(), String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.plan.direction == Direction::Write {
            return Ok(());
        }
        for (b, requests) in self.batches.iter().enumerate() {
            let from = &self.at[b];
            let data = self.data[b].clone().unwrap_or_default();
            for piece in intersect(&normalize(&requests.concat()), &access.own) {
                let mut bytes = Vec::with_capacity(piece.len as usize);
                from.copy_out(piece, &data, &mut bytes);
                access.scatter(&[piece], &bytes);
            }
        }
        for (k, &x) in self.recv_exchange.iter().enumerate() {
            let ex = &self.plan.exchanges[x];
            access.scatter(&ex.extents, &self.recvs[k]);
        }
        Ok(())
    }
}
