//! Online I/O-phase detection, for applications that do not say when their
//! phases begin and end (the coordinator service watches their requests).
//!
//! A phase is a run of requests; it ends when no request comes for longer
//! than a gap threshold: `gap_ratio` times the phase's length so far, but
//! never less than `gap_floor` (so the first requests of a phase do not end
//! it). An application that has closed every file it had open has said
//! more than its silence can: its phase ends after the much shorter
//! `close_gap` (a program that opens its next file and writes on at once
//! stays in its phase), so the next job's turn does not wait out the gap
//! threshold on idle devices. The characteristic time w_iter is estimated from the starts of
//! consecutive phases and smoothed (exponentially weighted). A
//! [`SetTracker`] turns the estimates into a set, with hysteresis so that
//! one odd iteration does not move an application, and a conservative
//! low-priority set before the first estimate.

use crate::FieldError;
use serde::{Deserialize, Serialize};

use super::sets::{SetId, SetRule, UNKNOWN_PRIORITY, UNKNOWN_SET};
use super::PhaseInfo;
use crate::request::AppId;
use crate::time::Time;

/// How phases are told apart and w_iter is smoothed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PhaseConfig {
    /// A phase ends after a gap longer than this fraction of its length so far ...
    pub gap_ratio: f64,
    /// ... and never shorter than this.
    pub gap_floor: Time,
    /// Weight of a new w_iter sample in the estimate (1: only the last sample counts).
    pub smoothing: f64,
    /// A phase ends this long after the application closed its last open
    /// file, unless a request comes first ([`PhaseDetector::files_closed`]).
    pub close_gap: Time,
}

impl Default for PhaseConfig {
    fn default() -> PhaseConfig {
        PhaseConfig {
            gap_ratio: 0.5,
            gap_floor: Time::from_secs_f64(1.0),
            smoothing: 0.3,
            close_gap: Time::from_secs_f64(0.05),
        }
    }
}

impl PhaseConfig {
    /// Checks the numbers; the error names the field.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !(self.gap_ratio.is_finite() && self.gap_ratio >= 0.0) {
            return Err(FieldError::new(
                "gap_ratio",
                format!("{} must be a number >= 0", self.gap_ratio),
            ));
        }
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return Err(FieldError::new(
                "smoothing",
                format!("{} must be in (0, 1]", self.smoothing),
            ));
        }
        Ok(())
    }
}

/// A phase the detector saw end: its first and last request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseEnd {
    pub start: Time,
    pub end: Time,
}

/// Phases and w_iter of one application, from its request times.
#[derive(Clone, Debug)]
pub struct PhaseDetector {
    cfg: PhaseConfig,
    /// The phase in progress: first and last request.
    current: Option<(Time, Time)>,
    /// When the application closed its last open file, if no request came since.
    closed: Option<Time>,
    /// Where the previous phase started.
    previous_start: Option<Time>,
    /// Smoothed w_iter, seconds.
    w_iter: Option<f64>,
    samples: u64,
}

impl PhaseDetector {
    pub fn new(cfg: PhaseConfig) -> PhaseDetector {
        PhaseDetector {
            cfg,
            current: None,
            closed: None,
            previous_start: None,
            w_iter: None,
            samples: 0,
        }
    }

    /// The smoothed characteristic time, once two phase starts were seen.
    pub fn w_iter(&self) -> Option<Time> {
        self.w_iter.map(Time::from_secs_f64)
    }

    /// How many w_iter samples the estimate holds.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Whether a phase is in progress.
    pub fn in_phase(&self) -> bool {
        self.current.is_some()
    }

    fn threshold(&self, start: Time, last: Time) -> Time {
        let relative =
            Time::from_secs_f64(last.saturating_sub(start).as_secs_f64() * self.cfg.gap_ratio);
        relative.max(self.cfg.gap_floor)
    }

    /// A request at `t` (times never go back). Returns the phase that a gap
    /// before `t` ended, if it did.
    pub fn request(&mut self, t: Time) -> Option<PhaseEnd> {
        let ended = self.poll(t);
        self.closed = None;
        match self.current.as_mut() {
            Some((_, last)) => *last = (*last).max(t),
            None => self.begin(t),
        }
        ended
    }

    /// Ends the phase in progress if no request came for longer than its
    /// gap threshold by `now`.
    pub fn poll(&mut self, now: Time) -> Option<PhaseEnd> {
        let (start, last) = self.current?;
        let closed_long_enough = self
            .closed
            .is_some_and(|at| now.saturating_sub(at.max(last)) >= self.cfg.close_gap);
        if closed_long_enough || now.saturating_sub(last) > self.threshold(start, last) {
            self.current = None;
            self.closed = None;
            Some(PhaseEnd { start, end: last })
        } else {
            None
        }
    }

    /// An application said its I/O phase begins at `t` (explicit phases,
    /// the coordinator's `begin_phase`): a phase in progress ends, and the
    /// time since the previous start is a w_iter sample, smoothed as a
    /// detected one is.
    pub fn phase_began(&mut self, t: Time) {
        self.current = None;
        self.begin(t);
    }

    /// An application said its I/O phase ended.
    pub fn phase_ended(&mut self) {
        self.current = None;
        self.closed = None;
    }

    /// The application closed the last file it had open at `t`: its phase
    /// ends at the first [`poll`](Self::poll) `close_gap` later, unless a
    /// request comes before. Outside a phase it means nothing.
    pub fn files_closed(&mut self, t: Time) {
        if self.current.is_some() {
            self.closed = Some(t);
        }
    }

    /// When a [`poll`](Self::poll) will end the phase for the closed files,
    /// if nothing comes first.
    pub fn closed_phase_ends_at(&self) -> Option<Time> {
        let (_, last) = self.current?;
        self.closed.map(|at| at.max(last) + self.cfg.close_gap)
    }

    fn begin(&mut self, t: Time) {
        if let Some(prev) = self.previous_start {
            let sample = t.saturating_sub(prev).as_secs_f64();
            let a = self.cfg.smoothing;
            self.w_iter = Some(match self.w_iter {
                Some(w) => w + a * (sample - w),
                None => sample,
            });
            self.samples += 1;
        }
        self.previous_start = Some(t);
        self.current = Some((t, t));
        self.closed = None;
    }
}

/// An application's set as its w_iter estimates come in: placed at once by
/// the first estimate, moved only after `hysteresis` estimates in a row
/// point to the same other set, and in the conservative low-priority set
/// before any estimate.
#[derive(Clone, Debug)]
pub struct SetTracker {
    rule: SetRule,
    hysteresis: u32,
    current: Option<(SetId, f64)>,
    /// Another set the estimates point to, and for how many in a row.
    candidate: Option<(SetId, f64, u32)>,
}

impl SetTracker {
    pub fn new(rule: SetRule, hysteresis: u32) -> SetTracker {
        SetTracker {
            rule,
            hysteresis: hysteresis.max(1),
            current: None,
            candidate: None,
        }
    }

    /// The set and priority to use, given the latest estimate in `info`.
    pub fn update(&mut self, app: AppId, info: &PhaseInfo) -> (SetId, f64) {
        let Some(target) = self.rule.assign(app, info) else {
            return self.current.unwrap_or((UNKNOWN_SET, UNKNOWN_PRIORITY));
        };
        match self.current {
            None => self.current = Some(target),
            Some((set, _)) if set == target.0 => {
                self.current = Some(target);
                self.candidate = None;
            }
            Some(_) => {
                let seen = match self.candidate {
                    Some((set, _, n)) if set == target.0 => n + 1,
                    _ => 1,
                };
                if seen >= self.hysteresis {
                    self.current = Some(target);
                    self.candidate = None;
                } else {
                    self.candidate = Some((target.0, target.1, seen));
                }
            }
        }
        self.current.expect("set above")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn s(x: f64) -> Time {
        Time::from_secs_f64(x)
    }

    /// Phases an application announces: w_iter from their starts,
    /// smoothed as detected ones are, whatever their lengths.
    #[test]
    fn announced_phase_starts_give_w_iter() {
        let cfg = PhaseConfig {
            smoothing: 0.5,
            ..PhaseConfig::default()
        };
        let mut d = PhaseDetector::new(cfg);
        d.phase_began(s(0.0));
        assert!(d.in_phase());
        d.phase_ended();
        assert!(!d.in_phase() && d.w_iter().is_none());
        d.phase_began(s(10.0));
        assert_eq!(d.w_iter(), Some(s(10.0)));
        // The next starts 20 s later, without an end said in between.
        d.phase_began(s(30.0));
        assert_eq!((d.w_iter(), d.samples()), (Some(s(15.0)), 2));
    }

    #[test]
    fn a_gap_ends_a_phase_and_phase_starts_give_w_iter() {
        let mut d = PhaseDetector::new(PhaseConfig::default());
        for t in [0.0, 0.5, 1.0, 1.5, 2.0] {
            assert_eq!(d.request(s(t)), None, "{t}");
        }
        // 8 s without a request: past max(1 s, 0.5 x 2 s).
        assert_eq!(
            d.request(s(10.0)),
            Some(PhaseEnd {
                start: s(0.0),
                end: s(2.0)
            })
        );
        assert_eq!(d.w_iter(), Some(s(10.0)));
        d.request(s(10.5));
        assert_eq!(d.poll(s(11.0)), None);
        assert_eq!(
            d.poll(s(12.0)),
            Some(PhaseEnd {
                start: s(10.0),
                end: s(10.5)
            })
        );
        d.request(s(22.0));
        // EWMA: 10 + 0.3 x (12 - 10).
        assert!((d.w_iter().unwrap().as_secs_f64() - 10.6).abs() < 1e-6);
    }

    #[test]
    fn closing_every_file_ends_the_phase_after_the_close_gap_not_the_gap_threshold() {
        let mut d = PhaseDetector::new(PhaseConfig::default());
        for t in [0.0, 1.0, 2.0, 3.0, 4.0] {
            d.request(s(t));
        }
        // The gap threshold here is 2 s (half of 4 s); closed at 4.01 s,
        // the phase ends 50 ms later.
        d.files_closed(s(4.01));
        assert_eq!(d.closed_phase_ends_at(), Some(s(4.06)));
        assert_eq!(d.poll(s(4.05)), None);
        assert_eq!(
            d.poll(s(4.06)),
            Some(PhaseEnd {
                start: s(0.0),
                end: s(4.0)
            })
        );
        assert!(!d.in_phase() && d.closed_phase_ends_at().is_none());
        // Closing outside a phase says nothing of the next one.
        d.files_closed(s(5.0));
        d.request(s(10.0));
        assert_eq!(d.poll(s(10.5)), None);
        assert_eq!(d.w_iter(), Some(s(10.0)));
    }

    #[test]
    fn a_request_soon_after_the_last_close_keeps_the_phase_and_its_gap_threshold() {
        let mut d = PhaseDetector::new(PhaseConfig::default());
        for t in [0.0, 1.0, 2.0] {
            d.request(s(t));
        }
        // The program opens its next file and writes on, 10 ms after the close.
        d.files_closed(s(2.0));
        assert_eq!(d.request(s(2.01)), None);
        assert!(d.closed_phase_ends_at().is_none());
        // Now only the gap threshold (1.005 s) ends it.
        assert_eq!(d.poll(s(2.5)), None);
        assert_eq!(d.poll(s(3.0)), None);
        assert_eq!(
            d.poll(s(3.1)),
            Some(PhaseEnd {
                start: s(0.0),
                end: s(2.01)
            })
        );
        assert_eq!(d.samples(), 0);
    }

    #[test]
    fn the_set_moves_only_after_hysteresis() {
        let mut t = SetTracker::new(SetRule::Set10, 2);
        let info = |w: f64| PhaseInfo {
            w_iter: Some(s(w)),
            group: None,
        };
        assert_eq!(
            t.update(AppId(1), &PhaseInfo::default()),
            (UNKNOWN_SET, UNKNOWN_PRIORITY)
        );
        assert_eq!(t.update(AppId(1), &info(10.0)).0, SetId(1));
        assert_eq!(t.update(AppId(1), &info(100.0)).0, SetId(1));
        assert_eq!(t.update(AppId(1), &info(10.0)).0, SetId(1));
        assert_eq!(t.update(AppId(1), &info(100.0)).0, SetId(1));
        assert_eq!(t.update(AppId(1), &info(100.0)).0, SetId(2));
    }

    proptest! {
        /// On periodic streams with noise (each iteration ±5% of w_iter,
        /// I/O phases of dense requests), the estimate is within 5% of
        /// w_iter after 20 iterations.
        #[test]
        fn detection_recovers_w_iter_within_five_percent(
            w in 10.0f64..2000.0,
            io_fraction in 0.05f64..0.5,
            seed in any::<u64>(),
        ) {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut d = PhaseDetector::new(PhaseConfig::default());
            let mut start = 0.0;
            for _ in 0..20 {
                let period = w * (1.0 + rng.gen_range(-0.05..0.05));
                let io = period * io_fraction;
                let mut t = start;
                while t < start + io {
                    d.request(s(t));
                    t += rng.gen_range(0.001..0.5);
                }
                start += period;
            }
            d.request(s(start));
            let est = d.w_iter().unwrap().as_secs_f64();
            prop_assert!((est / w - 1.0).abs() < 0.05, "estimate {est} for w_iter {w}");
            prop_assert_eq!(d.samples(), 20);
        }
    }
}
