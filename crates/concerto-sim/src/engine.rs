//! The discrete-event core: an integer-nanosecond clock and a priority queue
//! of events.
//!
//! Kept small and written here rather than taken from a DES library because
//! the model's events are a plain `Copy` enum dispatched by one `match`: a
//! binary heap of 32-byte entries is all the engine needs, and it keeps the
//! event rate in the millions per second (see docs/performance.md).
//!
//! The earliest event is held beside the heap, not in it: an event very
//! often schedules the one that runs next (a completion the dispatch after
//! it, a reply the next call), and that event then never enters the heap.
//!
//! Order is total and deterministic: by time, then class (so that a server
//! decides what to start only after every arrival at the same instant has
//! been queued), then a tie-break the model may randomize with its seeded
//! RNG (simultaneous arrivals at a server land in random order), then
//! insertion order.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use concerto_core::Time;

/// Events of an earlier class run first among events at the same instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    Normal = 0,
    /// Decisions that must see everything else that happened at this instant.
    Late = 1,
}

struct Entry<E> {
    /// Time in the high 64 bits, the order within an instant in the low 64:
    /// one integer comparison orders two events.
    key: u128,
    event: E,
}

impl<E> Entry<E> {
    fn time(&self) -> Time {
        Time::from_nanos((self.key >> 64) as u64)
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    /// Reversed: `BinaryHeap` is a max-heap and the earliest event must surface.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

pub struct EventQueue<E> {
    /// When set, earlier than every event in `heap`.
    first: Option<Entry<E>>,
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    now: Time,
    processed: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            first: None,
            heap: BinaryHeap::new(),
            seq: 0,
            now: Time::ZERO,
            processed: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn now(&self) -> Time {
        self.now
    }

    /// Events popped so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    pub fn len(&self) -> usize {
        self.heap.len() + usize::from(self.first.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none() && self.heap.is_empty()
    }

    /// Schedules `event` at `at` (never before now). `tie` orders events of
    /// the same time and class; equal ties fall back to insertion order.
    pub fn schedule(&mut self, at: Time, class: Class, tie: u32, event: E) {
        let at = at.max(self.now);
        // class (1 bit) | tie (31 bits) | sequence (32 bits, wrapping: it only
        // separates events that agree on everything else).
        let order = ((class as u64) << 63)
            | (((tie & 0x7fff_ffff) as u64) << 32)
            | (self.seq & 0xffff_ffff);
        self.seq = self.seq.wrapping_add(1);
        let entry = Entry {
            key: ((at.as_nanos() as u128) << 64) | order as u128,
            event,
        };
        match self.first.take() {
            Some(first) if first.key < entry.key => {
                self.first = Some(first);
                self.heap.push(entry);
            }
            Some(first) => {
                self.heap.push(first);
                self.first = Some(entry);
            }
            None if self.heap.peek().is_none_or(|top| entry.key < top.key) => {
                self.first = Some(entry);
            }
            None => self.heap.push(entry),
        }
    }

    /// When the earliest scheduled event is due.
    #[inline]
    pub fn next_time(&self) -> Option<Time> {
        match &self.first {
            Some(first) => Some(first.time()),
            None => self.heap.peek().map(Entry::time),
        }
    }

    /// Removes the earliest event and advances the clock to it.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let e = match self.first.take() {
            Some(first) => first,
            None => self.heap.pop()?,
        };
        self.now = e.time();
        self.processed += 1;
        Some((self.now, e.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_time_class_tie_then_insertion() {
        let mut q = EventQueue::new();
        q.schedule(Time::from_nanos(5), Class::Late, 0, "late@5");
        q.schedule(Time::from_nanos(5), Class::Normal, 9, "tie9@5");
        q.schedule(Time::from_nanos(5), Class::Normal, 1, "tie1@5");
        q.schedule(Time::from_nanos(1), Class::Late, 0, "late@1");
        q.schedule(Time::from_nanos(5), Class::Normal, 1, "tie1@5-second");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(
            order,
            vec!["late@1", "tie1@5", "tie1@5-second", "tie9@5", "late@5"]
        );
        assert_eq!(q.now(), Time::from_nanos(5));
        assert_eq!(q.processed(), 5);
    }

    proptest::proptest! {
        /// With the earliest event held beside the heap, events still come
        /// out in exactly the order of (time, class, tie, insertion), however
        /// scheduling and popping interleave, and `next_time` says when the
        /// next one is due.
        #[test]
        fn events_pop_in_key_order_however_they_interleave(
            ops in proptest::collection::vec(
                proptest::option::of((0u64..20, proptest::bool::ANY, 0u32..3)),
                1..200,
            )
        ) {
            let mut q = EventQueue::new();
            // The reference: every scheduled event with its sort key.
            let mut pending: Vec<((u64, bool, u32, usize), usize)> = Vec::new();
            let mut popped = Vec::new();
            let mut expected = Vec::new();
            for (n, op) in ops.into_iter().enumerate() {
                match op {
                    Some((dt, late, tie)) => {
                        let at = q.now().as_nanos() + dt;
                        let class = if late { Class::Late } else { Class::Normal };
                        q.schedule(Time::from_nanos(at), class, tie, n);
                        pending.push(((at, late, tie, n), n));
                    }
                    None => {
                        if let Some(i) = (0..pending.len()).min_by_key(|&i| pending[i].0) {
                            expected.push(pending.swap_remove(i).1);
                        }
                        let due = q.next_time();
                        if let Some((at, e)) = q.pop() {
                            // `next_time` names the time of the event popped next.
                            proptest::prop_assert_eq!(due, Some(at));
                            popped.push(e);
                        } else {
                            proptest::prop_assert_eq!(due, None);
                        }
                    }
                }
            }
            pending.sort();
            expected.extend(pending.into_iter().map(|(_, e)| e));
            popped.extend(std::iter::from_fn(|| q.pop().map(|(_, e)| e)));
            proptest::prop_assert_eq!(popped, expected);
        }
    }

    #[test]
    fn never_schedules_into_the_past() {
        let mut q = EventQueue::new();
        q.schedule(Time::from_nanos(10), Class::Normal, 0, 1);
        q.pop();
        q.schedule(Time::from_nanos(3), Class::Normal, 0, 2);
        assert_eq!(q.pop(), Some((Time::from_nanos(10), 2)));
    }
}
