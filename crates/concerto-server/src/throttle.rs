//! The throttle: makes the storage behave like a slower device class, so a
//! fast host forms real queues and policies really matter.
//!
//! Each access asks the shared [`EmulatedDevice`] (concerto-core, the same
//! model the simulator's `emulated` device runs) when it would finish, does
//! the real I/O, then sleeps until that time. The storage executor's threads
//! stand for the requests in flight, so the device sees them in the order the
//! scheduler released them.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use concerto_core::emulation::{EmulatedDevice, EmulationConfig, METADATA_SERVICE};
use concerto_core::Time;

/// Linux lets a sleeping thread wake up to 50 us late by default (its
/// timer slack), which on an emulated SSD (80 us per I/O) would nearly
/// double every access. The throttle's threads ask for 1 us instead, once
/// each.
fn precise_sleeps() {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    DONE.with(|done| {
        if !done.get() {
            // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
            done.set(true);
        }
    });
}

pub struct Throttle {
    device: Mutex<EmulatedDevice>,
    start: Instant,
}

impl Throttle {
    pub fn new(cfg: EmulationConfig) -> Throttle {
        Throttle {
            device: Mutex::new(EmulatedDevice::new(cfg)),
            start: Instant::now(),
        }
    }

    pub fn describe(&self) -> String {
        self.device
            .lock()
            .map(|d| d.config().describe())
            .unwrap_or_default()
    }

    fn now(&self) -> Time {
        Time::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    fn sleep_until(&self, done: Time) {
        let now = self.now();
        if done > now {
            precise_sleeps();
            std::thread::sleep(Duration::from_nanos((done - now).as_nanos()));
        }
    }

    /// Runs a data access of `len` bytes at `offset` of `object`, in
    /// `segments` pieces, at the emulated device's pace.
    pub fn data<T>(
        &self,
        object: u64,
        offset: u64,
        len: u64,
        segments: usize,
        io: impl FnOnce() -> T,
    ) -> T {
        let now = self.now();
        let done = self
            .device
            .lock()
            .map(|mut d| d.start(now, object, offset, len, segments))
            .unwrap_or(now);
        let out = io();
        self.sleep_until(done);
        out
    }

    /// Runs a read of `object` from `offset`, in `segments` pieces, at the
    /// emulated device's pace for the bytes it found (`io`'s second
    /// value): a read that found nothing (past the object's end) takes
    /// none of the device's time.
    pub fn read<T>(
        &self,
        object: u64,
        offset: u64,
        segments: usize,
        io: impl FnOnce() -> (T, u64),
    ) -> T {
        let now = self.now();
        let (out, found) = io();
        if found == 0 {
            return out;
        }
        let done = self
            .device
            .lock()
            .map(|mut d| d.start(now, object, offset, found, segments))
            .unwrap_or(now);
        self.sleep_until(done);
        out
    }

    /// Runs a metadata operation at the emulated device's pace.
    pub fn metadata<T>(&self, op: impl FnOnce() -> T) -> T {
        let now = self.now();
        let done = self
            .device
            .lock()
            .map(|mut d| d.start_metadata(now, METADATA_SERVICE))
            .unwrap_or(now);
        let out = op();
        self.sleep_until(done);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device_state(t: &Throttle) -> String {
        format!("{:?}", *t.device.lock().unwrap())
    }

    #[test]
    fn a_read_that_finds_nothing_leaves_the_device_as_it_was_and_one_that_finds_bytes_occupies_it()
    {
        let fresh = format!("{:?}", EmulatedDevice::new(EmulationConfig::ssd()));
        let t = Throttle::new(EmulationConfig::ssd());
        // Past an object's end: no bytes, no device time, no head moved.
        assert_eq!(t.read(7, 1 << 30, 1, || ("nothing", 0)), "nothing");
        assert_eq!(device_state(&t), fresh);
        assert_eq!(t.read(7, 0, 1, || ("4 KiB", 4096)), "4 KiB");
        assert_ne!(device_state(&t), fresh);
    }
}
