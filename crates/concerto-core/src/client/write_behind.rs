//! Write-behind with coalescing: which written ranges a client holds
//! before sending them, how adjacent writes merge, and when what is held
//! must go. The policy, pure and time-injected: the real client runs it
//! with the bytes, the simulator's client with simulated requests, so a
//! program's small writes reach the servers as the same few large requests
//! in both worlds.
//!
//! Per file, each writer (a key: a handle, a simulated rank) has at most
//! one *run*, a contiguous range it wrote and nobody sent yet. A write that
//! starts inside its writer's run or right at its end joins it (appending,
//! or overwriting what the run holds); any other write sends the run first
//! and starts a new one. Once a run holds
//! [`WriteBehindConfig::flush_per_server`] for each server of the file's
//! layout (a quarter of that at its first cut, half at its second:
//! [`RAMP`]), it is sent up to its last stripe-unit boundary, so every server
//! gets whole units, contiguous on its object: one request per server for
//! the lot (4 KiB writes to four servers cost one request per MiB, not
//! 256; a write the kernel cut in two because the buffer was not
//! page-aligned is sent as one). A run is also sent when its writer left it
//! alone for [`WriteBehindConfig::idle`], or at the latest
//! [`WriteBehindConfig::max_age`] after its oldest byte was written (a
//! writer that keeps appending is not cut short by the clock, so how many
//! requests its writes cost does not depend on how fast they come); and
//! whatever overlaps a range is sent
//! before that range is read, written through (`O_DIRECT`, `O_SYNC`) or
//! written by another writer (so overlapping bytes reach the servers in
//! the program's order), and everything before an fsync, a close, a stat
//! or a truncation.
//!
//! What the executor must keep: once a range is flushed, its send is
//! ordered after the sends of earlier flushes it overlaps (the client's
//! in-flight ledger does this), and a writer's flushes go in the order
//! this policy returns them.

use smallvec::SmallVec;

use crate::{Extent, StripeLayout, Time};

/// How long and how much a client holds before sending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteBehindConfig {
    /// A run is sent once it holds this much per server of its file's
    /// layout (up to its last unit boundary): each server then gets about
    /// this much in one request, as a Lustre client fills an RPC per
    /// object storage target. With 1 MiB on four 100 MB/s disks that seek
    /// 8 ms, two or four processes writing 16 MiB each in 1 MiB calls
    /// went from 92 to 175-197 MiB/s (the seek between the processes'
    /// regions paid per 1 MiB, not per 256 KiB, request).
    pub flush_per_server: u64,
    /// A run is sent at the latest once it holds this much, whatever its
    /// layout: a client bounded to B bytes (held and in flight) sets B/4,
    /// so that four writers' runs reach their sending size before the
    /// bound makes any of them wait for room.
    pub max_flush: u64,
    /// A run its writer left alone this long is sent (the writer paused
    /// or stopped; a writer that keeps appending is not cut short).
    pub idle: Time,
    /// The longest a written byte waits before it is sent, however busy
    /// its writer.
    pub max_age: Time,
    /// The most runs one file holds at once (one per writer); a writer
    /// past it sends the oldest run.
    pub max_runs: usize,
}

impl WriteBehindConfig {
    /// The default policy for a client that holds at most `bound` bytes
    /// (held and in flight).
    pub fn bounded(bound: u64) -> WriteBehindConfig {
        WriteBehindConfig {
            max_flush: (bound / 4).max(1),
            ..WriteBehindConfig::default()
        }
    }
}

impl Default for WriteBehindConfig {
    fn default() -> WriteBehindConfig {
        WriteBehindConfig {
            flush_per_server: 1 << 20,
            max_flush: 4 << 20,
            idle: Time::from_millis(50),
            max_age: Time::from_secs(1),
            max_runs: 64,
        }
    }
}

/// A range to send now, and whose it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flush<K> {
    pub key: K,
    pub extent: Extent,
}

/// What a write does: the runs to send before its bytes join the held
/// ones (`before`, in order), and what to send once they did (`after`: the
/// writer's run, cut at a unit boundary, when it reached the flush size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritePlan<K> {
    pub before: SmallVec<[Flush<K>; 2]>,
    pub after: Option<Flush<K>>,
}

#[derive(Clone, Debug)]
struct Run<K> {
    key: K,
    start: u64,
    end: u64,
    /// When its oldest byte was written.
    since: Time,
    /// When it was last written.
    last: Time,
    /// How many times it was cut and sent (up to [`RAMP`]): its sending
    /// size grows with them.
    cuts: u32,
}

/// A run's first cut is sent at a quarter of the full sending size, its
/// second at half, the rest at the full size: a writer's first bytes leave
/// early, so sending overlaps its writing (one process writing 4 MiB in
/// 64 KiB calls through the MPI-IO library wrote 75-85 MiB/s when nothing
/// left before 4 MiB, 125 when the sending size was 1 MiB), while a long
/// stream is still sent a MiB per server at a time.
const RAMP: u32 = 2;

/// What one file's writers hold unsent.
#[derive(Clone, Debug)]
pub struct FileWrites<K> {
    config: WriteBehindConfig,
    runs: Vec<Run<K>>,
    /// Writers whose run was sent whole at a cut: where it ended and how
    /// far its ramp had come, so that the writer's next write there
    /// continues the ramp rather than starting it over (at most
    /// `max_runs`, the oldest forgotten).
    ramps: Vec<(K, u64, u32)>,
}

impl<K: Clone + PartialEq> FileWrites<K> {
    pub fn new(config: WriteBehindConfig) -> FileWrites<K> {
        FileWrites {
            config,
            runs: Vec::new(),
            ramps: Vec::new(),
        }
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Whether it holds nothing and remembers no writer's ramp: its
    /// owner may forget it.
    pub fn is_idle(&self) -> bool {
        self.runs.is_empty() && self.ramps.is_empty()
    }

    /// The range `key` holds, if any.
    pub fn held(&self, key: &K) -> Option<Extent> {
        self.runs
            .iter()
            .find(|r| r.key == *key)
            .map(|r| Extent::new(r.start, r.end - r.start))
    }

    /// The furthest byte held, if any (the file reaches at least there).
    pub fn end(&self) -> Option<u64> {
        self.runs.iter().map(|r| r.end).max()
    }

    /// `key` writes `offset..offset+len` at `now` on a file laid out as
    /// `layout`.
    pub fn write(
        &mut self,
        key: K,
        offset: u64,
        len: u64,
        now: Time,
        layout: &StripeLayout,
    ) -> WritePlan<K> {
        let end = offset.saturating_add(len);
        let mut before = SmallVec::new();
        // The writer's run, if the write does not continue it, and other
        // writers' runs it overlaps: sent first.
        let mut i = 0;
        while i < self.runs.len() {
            let r = &self.runs[i];
            let continues = r.key == key && r.start <= offset && offset <= r.end;
            let overlaps = r.start < end && offset < r.end;
            if (r.key == key && !continues) || (r.key != key && overlaps) {
                before.push(self.take(i));
            } else {
                i += 1;
            }
        }
        let at = match self.runs.iter().position(|r| r.key == key) {
            Some(i) => {
                self.runs[i].end = self.runs[i].end.max(end);
                self.runs[i].last = now;
                i
            }
            None => {
                if self.runs.len() >= self.config.max_runs.max(1) {
                    let oldest = (0..self.runs.len())
                        .min_by_key(|&i| self.runs[i].since)
                        .unwrap_or(0);
                    before.push(self.take(oldest));
                }
                let cuts = match self.ramps.iter().position(|(k, _, _)| *k == key) {
                    Some(j) => {
                        let (_, at, cuts) = self.ramps.remove(j);
                        if at == offset {
                            cuts
                        } else {
                            0
                        }
                    }
                    None => 0,
                };
                self.runs.push(Run {
                    key,
                    start: offset,
                    end,
                    since: now,
                    last: now,
                    cuts,
                });
                self.runs.len() - 1
            }
        };
        let after = self.cut(at, layout, now);
        WritePlan { before, after }
    }

    /// The run at `i`, once it holds the flush size: its part up to the
    /// last unit boundary (all of it when that is none).
    fn cut(&mut self, i: usize, layout: &StripeLayout, now: Time) -> Option<Flush<K>> {
        let r = &mut self.runs[i];
        let full = (self.config.flush_per_server * layout.stripe_count().max(1) as u64)
            .min(self.config.max_flush);
        if r.end - r.start < (full >> (RAMP - r.cuts)).max(1) {
            return None;
        }
        let unit = layout.unit().max(1);
        let boundary = r.end - r.end % unit;
        let cut = if boundary > r.start { boundary } else { r.end };
        let flush = Flush {
            key: r.key.clone(),
            extent: Extent::new(r.start, cut - r.start),
        };
        r.start = cut;
        r.cuts = (r.cuts + 1).min(RAMP);
        // What is left was written last, not when the run began.
        r.since = now;
        if r.start == r.end {
            let r = self.runs.remove(i);
            if self.ramps.len() >= self.config.max_runs.max(1) {
                self.ramps.remove(0);
            }
            self.ramps.push((r.key, r.end, r.cuts));
        }
        Some(flush)
    }

    fn take(&mut self, i: usize) -> Flush<K> {
        let r = self.runs.remove(i);
        Flush {
            key: r.key,
            extent: Extent::new(r.start, r.end - r.start),
        }
    }

    /// Sends what overlaps `offset..offset+len` (before a read of it or a
    /// write through over it); everything when `None`.
    pub fn flush(&mut self, range: Option<(u64, u64)>) -> Vec<Flush<K>> {
        if range.is_none() {
            self.ramps.clear();
        }
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.runs.len() {
            let r = &self.runs[i];
            if range.is_none_or(|(s, e)| r.start < e && s < r.end) {
                out.push(self.take(i));
            } else {
                i += 1;
            }
        }
        out
    }

    /// Sends what `key` holds (its handle is closing or syncing).
    pub fn flush_key(&mut self, key: &K) -> Option<Flush<K>> {
        self.ramps.retain(|(k, _, _)| k != key);
        let i = self.runs.iter().position(|r| r.key == *key)?;
        Some(self.take(i))
    }

    /// When a run comes due: left idle, or at the age bound.
    fn due_at(&self, r: &Run<K>) -> Time {
        (r.last + self.config.idle).min(r.since + self.config.max_age)
    }

    /// Sends the runs due at `now` (idle, or at the age bound).
    pub fn due(&mut self, now: Time) -> Vec<Flush<K>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.runs.len() {
            if self.due_at(&self.runs[i]) <= now {
                out.push(self.take(i));
            } else {
                i += 1;
            }
        }
        out
    }

    /// When the first run comes due, if any is held.
    pub fn next_due(&self) -> Option<Time> {
        self.runs.iter().map(|r| self.due_at(r)).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn layout(unit: u64, servers: u32) -> StripeLayout {
        StripeLayout::new(unit, (0..servers).collect()).unwrap()
    }

    fn all(plan: WritePlan<u8>) -> Vec<Extent> {
        plan.before
            .into_iter()
            .chain(plan.after)
            .map(|f| f.extent)
            .collect()
    }

    #[test]
    fn small_sequential_writes_leave_in_runs_growing_to_a_mib_per_server() {
        let l = layout(64 << 10, 4);
        let mut w = FileWrites::new(WriteBehindConfig::default());
        let mut sent = Vec::new();
        for i in 0..2048u64 {
            sent.extend(all(w.write(0u8, i * 4096, 4096, Time::ZERO, &l)));
        }
        sent.extend(w.flush(None).into_iter().map(|f| f.extent));
        // A run is sent at 1 MiB per server of the layout (4 MiB here),
        // after a first cut at a quarter of that and a second at half.
        assert_eq!(
            sent,
            vec![
                Extent::new(0, 1 << 20),
                Extent::new(1 << 20, 2 << 20),
                Extent::new(3 << 20, 4 << 20),
                Extent::new(7 << 20, 1 << 20)
            ]
        );
        let requests: usize = sent
            .iter()
            .map(|e| {
                l.requests(
                    &[*e],
                    crate::RequestLimits {
                        max_bytes: 64 << 20,
                        max_extents: 64,
                    },
                )
                .len()
            })
            .sum();
        assert_eq!(requests, 16, "8 MiB on four servers: two requests per MiB");
    }

    #[test]
    fn a_write_cut_in_two_by_an_unaligned_buffer_is_sent_whole() {
        // Four servers: a run's first cut is at 1 MiB.
        let l = layout(64 << 10, 4);
        let mut w = FileWrites::new(WriteBehindConfig::default());
        assert!(all(w.write(0u8, 0, (1 << 20) - 4096, Time::ZERO, &l)).is_empty());
        assert_eq!(
            all(w.write(0u8, (1 << 20) - 4096, 4096, Time::ZERO, &l)),
            vec![Extent::new(0, 1 << 20)]
        );
        assert!(w.is_empty());
    }

    #[test]
    fn a_jump_sends_the_run_and_another_writer_overlapping_sends_it_first() {
        let l = layout(64 << 10, 4);
        let mut w = FileWrites::new(WriteBehindConfig::default());
        w.write(0u8, 0, 1000, Time::ZERO, &l);
        assert_eq!(
            all(w.write(0u8, 5000, 10, Time::ZERO, &l)),
            vec![Extent::new(0, 1000)]
        );
        w.write(1u8, 100_000, 10, Time::ZERO, &l);
        let plan = w.write(1u8, 5005, 2, Time::ZERO, &l);
        let mut before: Vec<(u8, Extent)> = plan.before.iter().map(|f| (f.key, f.extent)).collect();
        before.sort_by_key(|f| f.0);
        assert_eq!(
            before,
            vec![(0, Extent::new(5000, 10)), (1, Extent::new(100_000, 10))],
            "writer 0's run, which the write overlaps, and writer 1's own (it jumped)"
        );
        assert_eq!(w.held(&1), Some(Extent::new(5005, 2)));
    }

    #[test]
    fn a_run_comes_due_when_left_idle_or_at_the_age_bound() {
        let l = layout(64 << 10, 4);
        let mut w = FileWrites::new(WriteBehindConfig::default());
        let ms = Time::from_millis;
        w.write(0u8, 0, 10, ms(0), &l);
        w.write(0u8, 10, 10, ms(40), &l);
        assert_eq!(w.next_due(), Some(ms(90)), "50 ms after the last write");
        assert!(w.due(ms(89)).is_empty());
        assert_eq!(w.due(ms(90)).len(), 1);
        for t in 0..30u64 {
            w.write(0u8, 1000 + t * 10, 10, ms(1000 + t * 40), &l);
        }
        assert_eq!(
            w.next_due(),
            Some(ms(2000)),
            "a busy writer's run goes at the age bound"
        );
    }

    #[test]
    fn runs_come_due_after_the_age_bound_and_many_writers_are_bounded() {
        let l = layout(64 << 10, 4);
        let config = WriteBehindConfig {
            max_runs: 2,
            ..WriteBehindConfig::default()
        };
        let mut w = FileWrites::new(config);
        w.write(0u8, 0, 10, Time::from_millis(1), &l);
        w.write(1u8, 100, 10, Time::from_millis(2), &l);
        assert_eq!(w.next_due(), Some(Time::from_millis(51)));
        let plan = w.write(2u8, 200, 10, Time::from_millis(3), &l);
        assert_eq!(
            plan.before.iter().map(|f| f.key).collect::<Vec<_>>(),
            vec![0],
            "the oldest goes"
        );
        assert!(w.due(Time::from_millis(51)).is_empty());
        assert_eq!(w.due(Time::from_millis(52)).len(), 1);
        assert_eq!(w.flush(Some((0, 1000))).len(), 1);
        assert!(w.is_empty());
    }

    /// A model of the executor: bytes held per writer, sends applied to a
    /// file in order.
    fn apply(file: &mut Vec<u8>, held: &mut Vec<(u8, u64, Vec<u8>)>, f: &Flush<u8>) {
        let i = held
            .iter()
            .position(|h| h.0 == f.key)
            .expect("a flush of a run held");
        let (_, start, bytes) = &mut held[i];
        assert_eq!(*start, f.extent.offset, "a flush starts where the run does");
        let n = f.extent.len as usize;
        let end = f.extent.end() as usize;
        if file.len() < end {
            file.resize(end, 0);
        }
        file[f.extent.offset as usize..end].copy_from_slice(&bytes[..n]);
        bytes.drain(..n);
        *start += n as u64;
        if bytes.is_empty() {
            held.remove(i);
        }
    }

    proptest! {
        /// Every byte reaches the file, the last write of a byte wins (for
        /// one writer, and across writers since overlapping runs go first),
        /// and every flush but a run's last piece ends on a unit boundary.
        #[test]
        fn coalescing_keeps_every_byte_and_the_program_order(
            unit in 1u64..(128 << 10),
            writes in prop::collection::vec((0u8..3, 0u64..(3 << 20), 1u64..(300 << 10)), 1..80),
        ) {
            let l = layout(unit, 3);
            let mut w = FileWrites::new(WriteBehindConfig { max_runs: 2, ..WriteBehindConfig::default() });
            let (mut file, mut direct) = (Vec::<u8>::new(), Vec::<u8>::new());
            let mut held: Vec<(u8, u64, Vec<u8>)> = Vec::new();
            for (n, (key, offset, len)) in writes.into_iter().enumerate() {
                let fill = (n % 251) as u8 + 1;
                let end = (offset + len) as usize;
                if direct.len() < end { direct.resize(end, 0); }
                direct[offset as usize..end].fill(fill);
                let plan = w.write(key, offset, len, Time::from_millis(n as u64), &l);
                for f in &plan.before { apply(&mut file, &mut held, f); }
                match held.iter_mut().find(|h| h.0 == key) {
                    Some((_, start, bytes)) => {
                        let at = (offset - *start) as usize;
                        if bytes.len() < at + len as usize { bytes.resize(at + len as usize, 0); }
                        bytes[at..at + len as usize].fill(fill);
                    }
                    None => held.push((key, offset, vec![fill; len as usize])),
                }
                if let Some(f) = &plan.after {
                    prop_assert!(f.extent.end() % unit == 0 || w.held(&key).is_none());
                    apply(&mut file, &mut held, f);
                }
                for h in &held {
                    prop_assert_eq!(w.held(&h.0), Some(Extent::new(h.1, h.2.len() as u64)));
                }
            }
            for f in w.flush(None) { apply(&mut file, &mut held, &f); }
            prop_assert!(held.is_empty());
            file.resize(direct.len(), 0);
            prop_assert_eq!(file, direct);
        }
    }
}
