//! The parallel I/O scheduling problem (Jain et al., as the Clusterfile
//! paper states it in its Section 2): clients and I/O servers each do one
//! transfer at a time, and every transfer takes one step; find an order
//! that finishes in as few steps as possible.
//!
//! The transfers form a bipartite multigraph (clients on one side, servers
//! on the other, one edge per unit transfer), and a schedule is a proper
//! edge colouring: the transfers of one step share no endpoint. By König's
//! theorem a bipartite multigraph's edges can always be coloured with Δ
//! colours, Δ its largest degree, and no schedule is shorter than Δ: so,
//! unlike the general problem the paper calls NP-complete, this one has an
//! optimum computed in polynomial time ([`optimal`]), and each heuristic is
//! reported against it.
//!
//! The heuristics: the centralized FCFS, HDF and HCDF of Jain et al., and
//! the distributed randomized UAR and MPASSES of Durand et al.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

mod instances;
#[cfg(test)]
mod tests;

pub use instances::{
    load_bound, parse_counts, random_counts, regular_counts, skewed_counts, split_sizes,
};

/// Unit transfers between `clients` clients and `servers` servers: edge
/// `i` is `edges[i] = (client, server)`, in the order the clients issued
/// them (what FCFS follows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfers {
    clients: u32,
    servers: u32,
    edges: Vec<(u32, u32)>,
}

/// What is wrong with an instance.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    #[error("transfer {index}: client {client} does not exist (there are {clients})")]
    NoSuchClient {
        index: usize,
        client: u32,
        clients: u32,
    },
    #[error("transfer {index}: server {server} does not exist (there are {servers})")]
    NoSuchServer {
        index: usize,
        server: u32,
        servers: u32,
    },
    #[error("row {row}: has {got} columns, the first row has {expected}")]
    Ragged {
        row: usize,
        got: usize,
        expected: usize,
    },
    #[error("the matrix has no rows or no columns")]
    Empty,
    #[error("{count} unit transfers in all; at most {max} are scheduled")]
    TooMany { count: u64, max: u64 },
    #[error("row {row}, column {column}: {text:?} is not a whole number >= 0")]
    BadEntry {
        row: usize,
        column: usize,
        text: String,
    },
}

/// The most unit transfers an instance may hold (memory grows with them).
pub const MAX_TRANSFERS: u64 = 100_000_000;

impl Transfers {
    pub fn new(
        clients: u32,
        servers: u32,
        edges: Vec<(u32, u32)>,
    ) -> Result<Transfers, TransferError> {
        for (index, &(client, server)) in edges.iter().enumerate() {
            if client >= clients {
                return Err(TransferError::NoSuchClient {
                    index,
                    client,
                    clients,
                });
            }
            if server >= servers {
                return Err(TransferError::NoSuchServer {
                    index,
                    server,
                    servers,
                });
            }
        }
        Ok(Transfers {
            clients,
            servers,
            edges,
        })
    }

    /// From a matrix of counts: `rows[c][s]` unit transfers from client `c`
    /// to server `s`. Each client's transfers are issued server by server,
    /// clients taking turns (client 0's first, client 1's first, ...), the
    /// arrival order FCFS follows.
    pub fn from_counts(rows: &[Vec<u64>]) -> Result<Transfers, TransferError> {
        let width = rows.first().map_or(0, Vec::len);
        if rows.is_empty() || width == 0 {
            return Err(TransferError::Empty);
        }
        if let Some((row, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != width) {
            return Err(TransferError::Ragged {
                row,
                got: r.len(),
                expected: width,
            });
        }
        let count: u64 = rows.iter().flatten().sum();
        if count > MAX_TRANSFERS {
            return Err(TransferError::TooMany {
                count,
                max: MAX_TRANSFERS,
            });
        }
        // Each client's own list, server by server; then round robin over the clients.
        let mut own: Vec<std::collections::VecDeque<u32>> = rows
            .iter()
            .map(|r| {
                r.iter()
                    .enumerate()
                    .flat_map(|(s, &n)| std::iter::repeat_n(s as u32, n as usize))
                    .collect()
            })
            .collect();
        let mut edges = Vec::with_capacity(count as usize);
        while edges.len() < count as usize {
            for (c, list) in own.iter_mut().enumerate() {
                if let Some(s) = list.pop_front() {
                    edges.push((c as u32, s));
                }
            }
        }
        Transfers::new(rows.len() as u32, width as u32, edges)
    }

    pub fn clients(&self) -> u32 {
        self.clients
    }
    pub fn servers(&self) -> u32 {
        self.servers
    }
    pub fn edges(&self) -> &[(u32, u32)] {
        &self.edges
    }

    /// Node `client` is node `client`; server `s` is node `clients + s`.
    fn degrees(&self) -> Vec<u32> {
        let mut d = vec![0u32; (self.clients + self.servers) as usize];
        for &(c, s) in &self.edges {
            d[c as usize] += 1;
            d[(self.clients + s) as usize] += 1;
        }
        d
    }

    /// Δ: the largest number of transfers any client or server takes part
    /// in, the length of the shortest schedule (König).
    pub fn max_degree(&self) -> u32 {
        self.degrees().into_iter().max().unwrap_or(0)
    }
}

/// A schedule: the transfers (edge indices) of each step, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Schedule {
    pub steps: Vec<Vec<u32>>,
}

impl Schedule {
    pub fn len(&self) -> usize {
        self.steps.len()
    }
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Checks that no client or server is in two transfers of one step
    /// (proper) and that every transfer is scheduled exactly once (complete).
    pub fn check(&self, t: &Transfers) -> Result<(), String> {
        let mut seen = vec![false; t.edges.len()];
        let mut busy = vec![u32::MAX; (t.clients + t.servers) as usize];
        for (step, edges) in self.steps.iter().enumerate() {
            for &e in edges {
                let Some(&(c, s)) = t.edges.get(e as usize) else {
                    return Err(format!("step {step}: transfer {e} does not exist"));
                };
                if std::mem::replace(&mut seen[e as usize], true) {
                    return Err(format!("step {step}: transfer {e} scheduled twice"));
                }
                for node in [c as usize, (t.clients + s) as usize] {
                    if busy[node] == step as u32 {
                        return Err(format!(
                            "step {step}: transfer {e} shares an endpoint with another"
                        ));
                    }
                    busy[node] = step as u32;
                }
            }
        }
        match seen.iter().position(|&x| !x) {
            Some(e) => Err(format!("transfer {e} is never scheduled")),
            None => Ok(()),
        }
    }
}

/// The scheduling heuristics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Heuristic {
    /// First come, first served: each step takes, in arrival order, every
    /// transfer whose client and server are still free (Jain et al.).
    Fcfs,
    /// Highest degree first: each step visits the clients and servers by
    /// remaining degree, highest first; a free one takes the transfer to
    /// its free partner of highest remaining degree (Jain et al.).
    Hdf,
    /// Highest common degree first: each step takes transfers by the sum of
    /// their endpoints' remaining degrees, highest first (Jain et al.).
    Hcdf,
    /// Uniformly at random: each step, every client bids one of its
    /// transfers at random and every server takes one bid at random
    /// (Durand et al.).
    Uar,
    /// UAR with `passes` rounds of bidding per step: clients whose bid was
    /// refused bid again, for servers still free (Durand et al.'s MPASSES).
    MPasses { passes: u32 },
}

impl Heuristic {
    pub fn name(&self) -> &'static str {
        match self {
            Heuristic::Fcfs => "fcfs",
            Heuristic::Hdf => "hdf",
            Heuristic::Hcdf => "hcdf",
            Heuristic::Uar => "uar",
            Heuristic::MPasses { .. } => "m-passes",
        }
    }
}

/// The schedule `heuristic` makes; `seed` drives the randomized ones.
pub fn schedule(t: &Transfers, heuristic: Heuristic, seed: u64) -> Schedule {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    match heuristic {
        Heuristic::Fcfs => first_fit(t),
        Heuristic::Hdf => step_by_step(t, false, |r| r.hdf_step()),
        Heuristic::Hcdf => step_by_step(t, false, |r| r.hcdf_step()),
        Heuristic::Uar => step_by_step(t, true, |r| r.bidding_step(1, &mut rng)),
        Heuristic::MPasses { passes } => {
            step_by_step(t, true, |r| r.bidding_step(passes.max(1), &mut rng))
        }
    }
}

/// Builds the schedule one step at a time, each step from what is left;
/// `pools` keeps the per-client pools the bidding heuristics draw from.
fn step_by_step(
    t: &Transfers,
    pools: bool,
    mut next: impl FnMut(&mut Remaining) -> Vec<u32>,
) -> Schedule {
    let mut state = Remaining::new(t, pools);
    let mut steps = Vec::new();
    while state.left > 0 {
        let step = next(&mut state);
        state.take(&step);
        steps.push(step);
    }
    Schedule { steps }
}

/// FCFS without building its steps one by one. A step takes, in arrival
/// order, every transfer left whose client and server it has not taken
/// yet; so a transfer lands in the first step where no earlier transfer
/// holds its client or its server: first-fit colouring in arrival order.
/// Each node keeps a bitmap of its steps (grown as needed, at most 2Δ − 1
/// bits), and a transfer's step is the first zero of its two nodes' union.
fn first_fit(t: &Transfers) -> Schedule {
    let nodes = (t.clients + t.servers) as usize;
    let mut used: Vec<Vec<u64>> = vec![Vec::new(); nodes];
    // Per node: the first word that is not full.
    let mut low = vec![0usize; nodes];
    let mut steps: Vec<Vec<u32>> = Vec::new();
    let word = |bits: &[u64], w: usize| bits.get(w).copied().unwrap_or(0);
    for (e, &(c, s)) in t.edges.iter().enumerate() {
        let (u, v) = (c as usize, (t.clients + s) as usize);
        let mut w = low[u].max(low[v]);
        let step = loop {
            let free = !(word(&used[u], w) | word(&used[v], w));
            if free != 0 {
                break w * 64 + free.trailing_zeros() as usize;
            }
            w += 1;
        };
        for n in [u, v] {
            let bits = &mut used[n];
            if bits.len() <= w {
                bits.resize(w + 1, 0);
            }
            bits[w] |= 1 << (step % 64);
            while bits.get(low[n]) == Some(&u64::MAX) {
                low[n] += 1;
            }
        }
        if steps.len() <= step {
            steps.resize_with(step + 1, Vec::new);
        }
        steps[step].push(e as u32);
    }
    Schedule { steps }
}

/// The transfers not yet scheduled.
struct Remaining<'a> {
    t: &'a Transfers,
    /// Per node (clients, then servers): its transfers; the done ones are
    /// dropped when the list is next read.
    incident: Vec<Vec<u32>>,
    /// Per node: how many of its transfers are not done.
    degree: Vec<usize>,
    /// The transfers not done, in arrival order (HCDF's; trimmed when it
    /// reads them).
    order: Vec<u32>,
    /// Per client (only for the bidding heuristics; empty otherwise): its
    /// transfers not done, with their servers so that a draw reads one
    /// place, in no order, and where each transfer sits in its client's
    /// pool, so that a draw is O(1).
    pool: Vec<Vec<(u32, u32)>>,
    slot: Vec<u32>,
    done: Vec<bool>,
    left: usize,
    /// Per node: the step it was last taken in (`busy[n] == stamp`: busy now).
    busy: Vec<u64>,
    stamp: u64,
    /// Clients and servers with transfers left, and how many of each the
    /// step being built has taken: once one side is all taken, no other
    /// transfer fits in the step, and the scan stops.
    active: [usize; 2],
    taken: [usize; 2],
}

impl<'a> Remaining<'a> {
    fn new(t: &'a Transfers, pools: bool) -> Remaining<'a> {
        let nodes = (t.clients + t.servers) as usize;
        let mut incident = vec![Vec::new(); nodes];
        for (e, &(c, s)) in t.edges.iter().enumerate() {
            incident[c as usize].push(e as u32);
            incident[(t.clients + s) as usize].push(e as u32);
        }
        let active = [
            (0..t.clients as usize)
                .filter(|&n| !incident[n].is_empty())
                .count(),
            (t.clients as usize..nodes)
                .filter(|&n| !incident[n].is_empty())
                .count(),
        ];
        let (mut pool, mut slot) = (Vec::new(), Vec::new());
        if pools {
            pool = vec![Vec::new(); t.clients as usize];
            slot.reserve(t.edges.len());
            for (e, &(c, s)) in t.edges.iter().enumerate() {
                slot.push(pool[c as usize].len() as u32);
                pool[c as usize].push((e as u32, s));
            }
        }
        Remaining {
            t,
            degree: incident.iter().map(Vec::len).collect(),
            incident,
            order: (0..t.edges.len() as u32).collect(),
            pool,
            slot,
            done: vec![false; t.edges.len()],
            left: t.edges.len(),
            busy: vec![0; nodes],
            stamp: 0,
            active,
            taken: [0, 0],
        }
    }

    /// No more transfer fits in the step being built.
    fn full(&self) -> bool {
        self.taken[0] == self.active[0] || self.taken[1] == self.active[1]
    }

    fn ends(&self, e: u32) -> (usize, usize) {
        let (c, s) = self.t.edges[e as usize];
        (c as usize, (self.t.clients + s) as usize)
    }

    fn degree(&self, node: usize) -> usize {
        self.degree[node]
    }

    /// A node's transfers not done, in arrival order.
    fn open(&mut self, node: usize) -> &[u32] {
        let done = &self.done;
        self.incident[node].retain(|&e| !done[e as usize]);
        &self.incident[node]
    }

    /// Starts a step: every node free.
    fn begin(&mut self) {
        self.stamp += 1;
        self.taken = [0, 0];
    }

    fn free(&self, node: usize) -> bool {
        self.busy[node] != self.stamp
    }

    /// Takes `e` into the step being built if both its ends are free.
    fn try_take(&mut self, e: u32, step: &mut Vec<u32>) -> bool {
        let (a, b) = self.ends(e);
        if self.done[e as usize] || !self.free(a) || !self.free(b) {
            return false;
        }
        self.busy[a] = self.stamp;
        self.busy[b] = self.stamp;
        self.taken[0] += 1;
        self.taken[1] += 1;
        step.push(e);
        true
    }

    /// Marks a finished step's transfers done.
    fn take(&mut self, step: &[u32]) {
        for &e in step {
            self.done[e as usize] = true;
            let (a, b) = self.ends(e);
            self.degree[a] -= 1;
            self.degree[b] -= 1;
            self.active[0] -= usize::from(self.degree[a] == 0);
            self.active[1] -= usize::from(self.degree[b] == 0);
            if let Some(pool) = self.pool.get_mut(a) {
                let at = self.slot[e as usize] as usize;
                pool.swap_remove(at);
                if let Some(&(moved, _)) = pool.get(at) {
                    self.slot[moved as usize] = at as u32;
                }
            }
        }
        self.left -= step.len();
    }

    fn hdf_step(&mut self) -> Vec<u32> {
        self.begin();
        let mut step = Vec::new();
        let mut nodes: Vec<usize> = (0..self.incident.len())
            .filter(|&n| self.degree(n) > 0)
            .collect();
        // Highest remaining degree first; ties: clients before servers, lower index first.
        nodes.sort_by_key(|&n| (std::cmp::Reverse(self.degree(n)), n));
        for n in nodes {
            if self.full() {
                break;
            }
            if !self.free(n) {
                continue;
            }
            let open = self.open(n).to_vec();
            let best = open
                .into_iter()
                .filter(|&e| {
                    let (a, b) = self.ends(e);
                    self.free(if a == n { b } else { a })
                })
                .max_by_key(|&e| {
                    let (a, b) = self.ends(e);
                    let other = if a == n { b } else { a };
                    (self.degree(other), std::cmp::Reverse(e))
                });
            if let Some(e) = best {
                self.try_take(e, &mut step);
            }
        }
        step
    }

    fn hcdf_step(&mut self) -> Vec<u32> {
        self.begin();
        let mut step = Vec::new();
        // Transfers by the sum of their ends' degrees, highest first, ties in
        // arrival order: a counting sort (the sums are at most 2Δ), so a
        // step costs O(transfers left), not O(transfers left × log).
        let mut order = std::mem::take(&mut self.order);
        let done = &self.done;
        order.retain(|&e| !done[e as usize]);
        let key = |r: &Self, e: u32| {
            let (a, b) = r.ends(e);
            r.degree(a) + r.degree(b)
        };
        let top = order.iter().map(|&e| key(self, e)).max().unwrap_or(0);
        let mut start = vec![0usize; top + 2];
        for &e in &order {
            start[top - key(self, e) + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut sorted = vec![0u32; order.len()];
        for &e in &order {
            let slot = &mut start[top - key(self, e)];
            sorted[*slot] = e;
            *slot += 1;
        }
        for e in sorted {
            if self.full() {
                break;
            }
            self.try_take(e, &mut step);
        }
        self.order = order;
        step
    }

    fn bidding_step(&mut self, passes: u32, rng: &mut ChaCha8Rng) -> Vec<u32> {
        self.begin();
        let mut step = Vec::new();
        let n_clients = self.t.clients as usize;
        let mut bids: Vec<Vec<u32>> = vec![Vec::new(); self.t.servers as usize];
        for _ in 0..passes {
            if self.full() {
                break;
            }
            // Every free client with a transfer to a free server bids one at random.
            let mut any = false;
            for c in 0..n_clients {
                if self.free(c) {
                    if let Some((e, server)) = self.random_open(c, rng) {
                        bids[server as usize].push(e);
                        any = true;
                    }
                }
            }
            if !any {
                break;
            }
            // Every server takes one bid at random.
            for list in &mut bids {
                if !list.is_empty() {
                    let e = list[rng.gen_range(0..list.len())];
                    self.try_take(e, &mut step);
                    list.clear();
                }
            }
        }
        step
    }

    /// One of client `c`'s transfers to a free server, uniformly at random,
    /// with its server.
    /// A draw from all its transfers left is kept if its server is free
    /// (so it is uniform over those); after a few misses the ones to free
    /// servers are listed and one is drawn from them.
    fn random_open(&self, c: usize, rng: &mut ChaCha8Rng) -> Option<(u32, u32)> {
        const TRIES: usize = 4;
        let pool = &self.pool[c];
        if pool.is_empty() {
            return None;
        }
        let open = |&(_, s): &(u32, u32)| self.free((self.t.clients + s) as usize);
        for _ in 0..TRIES {
            let pick = pool[rng.gen_range(0..pool.len())];
            if open(&pick) {
                return Some(pick);
            }
        }
        let fits: Vec<(u32, u32)> = pool.iter().copied().filter(open).collect();
        fits.choose(rng).copied()
    }
}

/// An optimal schedule: a proper colouring of the transfers with exactly Δ
/// colours (König), each colour one step ([`colouring`](super::colouring)).
pub fn optimal(t: &Transfers) -> Schedule {
    let (delta, colour) = super::colouring::colour_edges(t.clients, t.servers, &t.edges);
    let mut steps = vec![Vec::new(); delta as usize];
    for (e, &c) in colour.iter().enumerate() {
        steps[c as usize].push(e as u32);
    }
    Schedule { steps }
}
