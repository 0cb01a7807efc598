//! PVFS2's default server scheduling: one FIFO per object (file handle).
//! Only the head of each object's queue is eligible, so at most one request
//! per object is in service; objects with work take turns round-robin.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::{PolicySpec, RequestQueue};
use crate::request::{ObjectId, Request};
use crate::time::Time;

/// `kind = "per-object"`: no parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerObjectConfig {}

impl PolicySpec for PerObjectConfig {
    const NAME: &'static str = "per-object";
    fn build(&self, _default_window: Time) -> Box<dyn RequestQueue> {
        Box::new(PerObjectFcfs::new())
    }
}

#[derive(Default)]
struct ObjectQueue {
    waiting: VecDeque<Request>,
    in_service: bool,
}

#[derive(Default)]
pub struct PerObjectFcfs {
    objects: HashMap<ObjectId, ObjectQueue>,
    /// Objects whose head may start, in round-robin order.
    ready: VecDeque<ObjectId>,
    waiting: usize,
}

impl PerObjectFcfs {
    pub fn new() -> PerObjectFcfs {
        PerObjectFcfs::default()
    }
}

impl RequestQueue for PerObjectFcfs {
    fn name(&self) -> &'static str {
        "per-object"
    }

    fn enqueue(&mut self, req: Request, _now: Time) {
        let object = req.object;
        let q = self.objects.entry(object).or_default();
        if q.waiting.is_empty() && !q.in_service {
            self.ready.push_back(object);
        }
        q.waiting.push_back(req);
        self.waiting += 1;
    }

    fn dispatch(&mut self, _now: Time, free_slots: u32, out: &mut Vec<Request>) {
        let mut free = free_slots;
        while free > 0 {
            let Some(object) = self.ready.pop_front() else {
                break;
            };
            let Some(q) = self.objects.get_mut(&object) else {
                continue;
            };
            if let Some(req) = q.waiting.pop_front() {
                q.in_service = true;
                self.waiting -= 1;
                free -= 1;
                out.push(req);
            }
        }
    }

    fn complete(&mut self, req: &Request, _now: Time) {
        let Some(q) = self.objects.get_mut(&req.object) else {
            return;
        };
        if !q.in_service {
            return; // not ours, or reported twice: ignore rather than corrupt state
        }
        q.in_service = false;
        if q.waiting.is_empty() {
            self.objects.remove(&req.object);
        } else {
            self.ready.push_back(req.object);
        }
    }

    fn len(&self) -> usize {
        self.waiting
    }
}
