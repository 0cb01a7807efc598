//! Lustre NRS CRR-N, client round-robin over NIDs (the Lustre Operations
//! Manual, "Network Request Scheduler"): each client has a FIFO of its
//! requests, and the clients with requests take turns, `quantum` requests
//! a turn (Lustre's `nrs_crrn_quantum`, 16 by default).
//!
//! A Lustre NID is a client node's network address, shared by the
//! processes of that node. A client here is one process, an (application,
//! rank) pair, not the request's NID: on a one-host cluster every process
//! shares one NID, and turns among NIDs would be FIFO there. On a cluster
//! with one rank per node the two are the same.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::{positive, PolicySpec, RequestQueue};
use crate::request::{AppId, Request};
use crate::time::Time;
use crate::FieldError;

/// `kind = "crr-n"`: requests a client sends in one turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CrrNConfig {
    pub quantum: u32,
}

impl Default for CrrNConfig {
    fn default() -> CrrNConfig {
        CrrNConfig { quantum: 16 }
    }
}

impl PolicySpec for CrrNConfig {
    const NAME: &'static str = "crr-n";
    fn build(&self, _default_window: Time) -> Box<dyn RequestQueue> {
        Box::new(CrrN::new(self.quantum))
    }
    fn validate(&self) -> Result<(), FieldError> {
        positive("quantum", self.quantum as u64)
    }
}

/// A client: the process that sent a request.
type Client = (AppId, u32);

pub struct CrrN {
    quantum: u32,
    queues: HashMap<Client, VecDeque<Request>>,
    /// Clients with requests, in turn order (the one in its turn first).
    turns: VecDeque<Client>,
    /// Requests the client in its turn may still send in it.
    left: u32,
    waiting: usize,
}

impl CrrN {
    pub fn new(quantum: u32) -> CrrN {
        let quantum = quantum.max(1);
        CrrN {
            quantum,
            queues: HashMap::new(),
            turns: VecDeque::new(),
            left: quantum,
            waiting: 0,
        }
    }
}

impl RequestQueue for CrrN {
    fn name(&self) -> &'static str {
        "crr-n"
    }

    fn enqueue(&mut self, req: Request, _now: Time) {
        let client = (req.app, req.rank);
        let queue = self.queues.entry(client).or_default();
        if queue.is_empty() {
            self.turns.push_back(client);
        }
        queue.push_back(req);
        self.waiting += 1;
    }

    fn dispatch(&mut self, _now: Time, free_slots: u32, out: &mut Vec<Request>) {
        for _ in 0..free_slots {
            let Some(&client) = self.turns.front() else {
                return;
            };
            let Some(queue) = self.queues.get_mut(&client) else {
                self.turns.pop_front();
                continue;
            };
            let Some(req) = queue.pop_front() else {
                self.turns.pop_front();
                continue;
            };
            out.push(req);
            self.waiting -= 1;
            self.left -= 1;
            if queue.is_empty() {
                // Out of requests: its turn ends, and it leaves the ring
                // until it sends again.
                self.queues.remove(&client);
                self.turns.pop_front();
                self.left = self.quantum;
            } else if self.left == 0 {
                self.turns.rotate_left(1);
                self.left = self.quantum;
            }
        }
    }

    fn complete(&mut self, _req: &Request, _now: Time) {}

    fn len(&self) -> usize {
        self.waiting
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::request::Op;

    proptest! {
        /// With every client's requests queued, the dispatch order is the
        /// clients in turn, `quantum` each (fewer when a client runs out),
        /// and each client's requests in arrival order.
        #[test]
        fn clients_take_turns_of_a_quantum(
            counts in prop::collection::vec(1usize..40, 1..6),
            quantum in 1u32..8,
            slots in 1u32..5,
        ) {
            let mut q = CrrN::new(quantum);
            let mut id = 0;
            // Interleaved arrivals: client c's k-th request after every
            // client's (k-1)-th.
            let most = *counts.iter().max().unwrap();
            for k in 0..most {
                for (c, &n) in counts.iter().enumerate() {
                    if k < n {
                        q.enqueue(Request::data(id, 7, c as u32, Time::ZERO, Op::Read, 0, k as u64, 1), Time::ZERO);
                        id += 1;
                    }
                }
            }
            let mut order = Vec::new();
            let mut out = Vec::new();
            while !q.is_empty() {
                q.dispatch(Time::ZERO, slots, &mut out);
                order.extend(out.drain(..).map(|r| (r.rank, r.offset)));
            }
            // The expected order, turn by turn.
            let mut left = counts.clone();
            let mut next = vec![0u64; counts.len()];
            let mut expected = Vec::new();
            while left.iter().any(|&n| n > 0) {
                for c in 0..counts.len() {
                    let take = left[c].min(quantum as usize);
                    for _ in 0..take {
                        expected.push((c as u32, next[c]));
                        next[c] += 1;
                    }
                    left[c] -= take;
                }
            }
            prop_assert_eq!(order, expected);
        }
    }

    #[test]
    fn a_client_that_comes_back_joins_the_end_of_the_ring() {
        let mut q = CrrN::new(1);
        let mut out = Vec::new();
        for (id, rank) in [(0, 0), (1, 1), (2, 1)] {
            q.enqueue(
                Request::data(id, 1, rank, Time::ZERO, Op::Read, 0, 0, 1),
                Time::ZERO,
            );
        }
        q.dispatch(Time::ZERO, 1, &mut out); // rank 0, which then has none
        q.enqueue(
            Request::data(3, 1, 0, Time::ZERO, Op::Read, 0, 0, 1),
            Time::ZERO,
        );
        q.dispatch(Time::ZERO, 3, &mut out);
        let ranks: Vec<u32> = out.iter().map(|r| r.rank).collect();
        assert_eq!(ranks, [0, 1, 0, 1]);
    }
}
