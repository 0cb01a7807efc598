//! Arrival order: the baseline every paper compares against.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::{PolicySpec, RequestQueue};
use crate::request::Request;
use crate::time::Time;

/// `kind = "fifo"`: no parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FifoConfig {}

impl PolicySpec for FifoConfig {
    const NAME: &'static str = "fifo";
    fn build(&self, _default_window: Time) -> Box<dyn RequestQueue> {
        Box::new(Fifo::new())
    }
}

#[derive(Default)]
pub struct Fifo {
    queue: VecDeque<Request>,
}

impl Fifo {
    pub fn new() -> Fifo {
        Fifo::default()
    }
}

impl RequestQueue for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }
    fn enqueue(&mut self, req: Request, _now: Time) {
        self.queue.push_back(req);
    }
    fn dispatch(&mut self, _now: Time, free_slots: u32, out: &mut Vec<Request>) {
        for _ in 0..free_slots {
            match self.queue.pop_front() {
                Some(r) => out.push(r),
                None => break,
            }
        }
    }
    fn complete(&mut self, _req: &Request, _now: Time) {}
    fn len(&self) -> usize {
        self.queue.len()
    }
}
