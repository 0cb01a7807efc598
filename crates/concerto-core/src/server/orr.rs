//! Lustre NRS ORR, object-based round-robin (the Lustre Operations Manual,
//! "Network Request Scheduler"): requests are grouped by the object they
//! are for, the objects with requests take turns, and each turn serves a
//! batch of up to `quantum` of that object's requests (Lustre's
//! `nrs_orr_quantum`, 256 by default) in offset order, so that a disk
//! reads an object's pieces in one sweep.
//!
//! A batch is the object's requests queued when its turn begins; requests
//! that arrive during it wait for the object's next turn. Lustre sorts by
//! logical offset by default (`nrs_orr_offset_type = logical`, or the
//! physical disk offset); Concerto sorts by the offset in the object.
//! Lustre's ORR handles bulk reads by default (`nrs_orr_supported`); here
//! every request, writes and metadata included, so that it can replace the
//! other policies whole.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::{positive, PolicySpec, RequestQueue};
use crate::request::{ObjectId, Request};
use crate::time::Time;
use crate::FieldError;

/// `kind = "orr"`: the most requests of one object in a batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OrrConfig {
    pub quantum: u32,
}

impl Default for OrrConfig {
    fn default() -> OrrConfig {
        OrrConfig { quantum: 256 }
    }
}

impl PolicySpec for OrrConfig {
    const NAME: &'static str = "orr";
    fn build(&self, _default_window: Time) -> Box<dyn RequestQueue> {
        Box::new(Orr::new(self.quantum))
    }
    fn validate(&self) -> Result<(), FieldError> {
        positive("quantum", self.quantum as u64)
    }
}

pub struct Orr {
    quantum: usize,
    /// Each object's requests not in a batch yet, in arrival order.
    queues: HashMap<ObjectId, VecDeque<Request>>,
    /// Objects with requests outside the batch, in turn order.
    turns: VecDeque<ObjectId>,
    /// The batch being served, in offset order.
    batch: VecDeque<Request>,
    waiting: usize,
}

impl Orr {
    pub fn new(quantum: u32) -> Orr {
        Orr {
            quantum: quantum.max(1) as usize,
            queues: HashMap::new(),
            turns: VecDeque::new(),
            batch: VecDeque::new(),
            waiting: 0,
        }
    }

    /// The next object's batch: up to a quantum of its oldest requests,
    /// sorted by offset (arrival order among equal offsets).
    fn next_batch(&mut self) {
        while self.batch.is_empty() {
            let Some(object) = self.turns.pop_front() else {
                return;
            };
            let Some(queue) = self.queues.get_mut(&object) else {
                continue;
            };
            let take = queue.len().min(self.quantum);
            let mut batch: Vec<Request> = queue.drain(..take).collect();
            if queue.is_empty() {
                self.queues.remove(&object);
            } else {
                self.turns.push_back(object);
            }
            // Stable: equal offsets keep their arrival order.
            batch.sort_by_key(|r| r.offset);
            self.batch = batch.into();
        }
    }
}

impl RequestQueue for Orr {
    fn name(&self) -> &'static str {
        "orr"
    }

    fn enqueue(&mut self, req: Request, _now: Time) {
        let queue = self.queues.entry(req.object).or_default();
        if queue.is_empty() {
            self.turns.push_back(req.object);
        }
        queue.push_back(req);
        self.waiting += 1;
    }

    fn dispatch(&mut self, _now: Time, free_slots: u32, out: &mut Vec<Request>) {
        for _ in 0..free_slots {
            self.next_batch();
            let Some(req) = self.batch.pop_front() else {
                return;
            };
            self.waiting -= 1;
            out.push(req);
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
        /// Requests queued before dispatch come out as batches: one object
        /// at a time, objects in the order they first arrived (then again
        /// in turn), at most a quantum each, offsets ascending inside.
        #[test]
        fn batches_are_one_objects_requests_in_offset_order(
            arrivals in prop::collection::vec((0u64..4, 0u64..1000), 1..120),
            quantum in 1u32..10,
            slots in 1u32..5,
        ) {
            let mut q = Orr::new(quantum);
            for (id, &(object, offset)) in arrivals.iter().enumerate() {
                q.enqueue(Request::data(id as u64, 1, 0, Time::ZERO, Op::Read, object, offset, 1), Time::ZERO);
            }
            let mut order = Vec::new();
            let mut out = Vec::new();
            while !q.is_empty() {
                q.dispatch(Time::ZERO, slots, &mut out);
                order.append(&mut out);
            }
            // The expected batches: objects in first-arrival order, each
            // turn its next quantum of requests by arrival, sorted.
            let mut first_seen = Vec::new();
            let mut per_object: HashMap<u64, VecDeque<(u64, u64)>> = HashMap::new();
            for (id, &(object, offset)) in arrivals.iter().enumerate() {
                if !first_seen.contains(&object) {
                    first_seen.push(object);
                }
                per_object.entry(object).or_default().push_back((offset, id as u64));
            }
            let mut expected = Vec::new();
            let mut turns: VecDeque<u64> = first_seen.into();
            while let Some(object) = turns.pop_front() {
                let queue = per_object.get_mut(&object).unwrap();
                let take = queue.len().min(quantum as usize);
                let mut batch: Vec<(u64, u64)> = queue.drain(..take).collect();
                batch.sort_by_key(|&(offset, _)| offset);
                expected.extend(batch.into_iter().map(|(_, id)| id));
                if !queue.is_empty() {
                    turns.push_back(object);
                }
            }
            let got: Vec<u64> = order.iter().map(|r| r.id.0).collect();
            prop_assert_eq!(got, expected);
        }
    }

    #[test]
    fn requests_arriving_during_a_batch_wait_for_the_objects_next_turn() {
        let mut q = Orr::new(8);
        let mut out = Vec::new();
        for (id, object, offset) in [(0, 0, 300), (1, 0, 100), (2, 1, 0)] {
            q.enqueue(
                Request::data(id, 1, 0, Time::ZERO, Op::Read, object, offset, 1),
                Time::ZERO,
            );
        }
        q.dispatch(Time::ZERO, 1, &mut out); // object 0's batch: offset 100 first
        q.enqueue(
            Request::data(3, 1, 0, Time::ZERO, Op::Read, 0, 0, 1),
            Time::ZERO,
        );
        q.dispatch(Time::ZERO, 4, &mut out);
        let ids: Vec<u64> = out.iter().map(|r| r.id.0).collect();
        assert_eq!(ids, [1, 0, 2, 3]);
    }
}
