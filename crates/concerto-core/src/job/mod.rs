//! Job-level I/O arbitration: which applications may do I/O now, and with
//! what bandwidth priority (the IO-SETS method of io-sets.txt).
//!
//! An application asks to begin an I/O phase and is granted (with a
//! priority) or queued; ending a phase may grant queued applications. The
//! applications granted at any moment share the platform's bandwidth by
//! priority, x_i = p_i / Σ p_j ([`shares`]). The fluid simulator turns the
//! priorities into bandwidth shares; the real servers enforce them as
//! weights. Nothing here knows which of the two it runs in: time comes in
//! as an argument, as for the server policies.

pub mod phases;
pub mod sets;

pub use phases::{PhaseConfig, PhaseDetector, PhaseEnd, SetTracker};
pub use sets::{SetId, SetRule, Sets};

use crate::request::AppId;
use crate::time::Time;

/// What an application says about itself when it asks to do I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseInfo {
    /// Its characteristic time w_iter (the length of one compute + I/O
    /// iteration), when known: given by the user, or estimated online
    /// ([`PhaseDetector`]).
    pub w_iter: Option<Time>,
    /// The group it was generated from and that group's characteristic time
    /// (for the clairvoyant mapping of the paper's Section VI-B2).
    pub group: Option<(u32, Time)>,
}

/// The answer to a request to begin an I/O phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Decision {
    /// Go ahead, with this bandwidth priority.
    Granted { priority: f64 },
    /// Wait: another application of its set is doing I/O. It is granted by a
    /// later [`IoArbiter::end_phase`].
    Queued,
}

/// Job-level arbitration (DESIGN.md's contract).
pub trait IoArbiter {
    /// `app` asks to begin an I/O phase at `now`. Asking again while granted
    /// or queued changes nothing and gives the same answer.
    fn begin_phase(&mut self, app: AppId, now: Time, info: &PhaseInfo) -> Decision;

    /// `app` ends its I/O phase at `now`; returns the applications this
    /// grants, with their priorities, in the order they were granted. Ending
    /// a phase that was not granted (a queued application giving up) removes
    /// it from the queue and grants nothing.
    fn end_phase(&mut self, app: AppId, now: Time) -> Vec<(AppId, f64)>;

    /// The applications doing I/O now and their priorities, by application id.
    fn granted(&self) -> Vec<(AppId, f64)>;
}

/// Each granted application's share of the bandwidth, x_i = p_i / Σ p_j
/// (io-sets.txt Equation (1)); the shares of a non-empty list sum to 1.
pub fn shares(granted: &[(AppId, f64)]) -> Vec<(AppId, f64)> {
    let total: f64 = granted.iter().map(|&(_, p)| p).sum();
    granted
        .iter()
        .map(|&(app, p)| (app, if total > 0.0 { p / total } else { 0.0 }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_priorities_and_sum_to_one() {
        let s = shares(&[(AppId(1), 1.0), (AppId(2), 2.0), (AppId(3), 1.0)]);
        assert_eq!(s, vec![(AppId(1), 0.25), (AppId(2), 0.5), (AppId(3), 0.25)]);
        assert!(shares(&[]).is_empty());
    }
}
