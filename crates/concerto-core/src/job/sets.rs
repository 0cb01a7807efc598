//! The IO-SETS method (io-sets.txt Section IV): every application doing I/O
//! belongs to a set; inside a set one application does I/O at a time, first
//! come first served; sets share the bandwidth by priority.
//!
//! A [`SetRule`] says which set an application goes to and the set's
//! priority: the paper's heuristics (FAIR-SHARE, EXCLUSIVE-FCFS, SET-10,
//! CLAIRVOYANT), the two ablations that separate SET-10's sets from its
//! priorities, and mappings a user writes (any log base, thresholds, a
//! table). [`Sets`] is the arbiter that applies one.

use crate::FieldError;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::{Decision, IoArbiter, PhaseInfo};
use crate::request::AppId;
use crate::time::Time;

/// A set. SET-10's sets are orders of magnitude of w_iter in seconds, so
/// they may be negative (S₋₁ for w_iter about 0.1 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SetId(pub i64);

/// The set for applications whose w_iter a rule needs but nobody knows yet:
/// one set (so they take turns) at [`UNKNOWN_PRIORITY`], a conservative low
/// priority, until an estimate places them.
pub const UNKNOWN_SET: SetId = SetId(i64::MAX);
/// SET-10's priority for w_iter of 10⁴ s: below every usual class.
pub const UNKNOWN_PRIORITY: f64 = 1e-4;

/// One application's place in a [`SetRule::Table`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableEntry {
    pub app: u32,
    pub set: i64,
    pub priority: f64,
}

/// Which set an application goes to, and that set's priority.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SetRule {
    /// One set per application, equal priorities: the bandwidth is shared
    /// equally among the applications doing I/O.
    FairShare,
    /// One set for everyone: one application does I/O at a time, in request order.
    ExclusiveFcfs,
    /// SET-10: set ⌊log₁₀ w_iter⌉, priority 10^-set.
    Set10,
    /// The set of the group the application was generated from, with the
    /// priority SET-10 gives the group's characteristic time (the paper's
    /// baseline for Section VI-B2).
    Clairvoyant,
    /// Ablation: SET-10's sets, equal priorities.
    SetFairShare,
    /// Ablation: one set per application (no exclusive access), SET-10's priorities.
    SharePriority,
    /// SET-10 with another base: set ⌊log_base w_iter⌉, priority base^-set.
    Log { base: f64 },
    /// Set i for w_iter below `bounds[i]` (ascending) and not below the ones
    /// before; set `bounds.len()` above them all. `priorities[i]` is set i's.
    Thresholds {
        bounds: Vec<Time>,
        priorities: Vec<f64>,
    },
    /// An explicit table; applications it does not list go to `default_set`.
    Table {
        entries: Vec<TableEntry>,
        default_set: i64,
        default_priority: f64,
    },
}

impl SetRule {
    /// Checks the rule's own numbers; the error names the field.
    pub fn validate(&self) -> Result<(), FieldError> {
        let positive = |field: &'static str, p: f64| {
            if p.is_finite() && p > 0.0 {
                Ok(())
            } else {
                Err(FieldError::new(
                    field,
                    format!("{p} must be a positive number"),
                ))
            }
        };
        match self {
            SetRule::Log { base } if !(base.is_finite() && *base > 1.0) => Err(FieldError::new(
                "base",
                format!("{base} must be a number above 1"),
            )),
            SetRule::Thresholds { bounds, priorities } => {
                if priorities.len() != bounds.len() + 1 {
                    return Err(FieldError::new(
                        "priorities",
                        format!(
                            "{} bounds make {} sets, but {} priorities are given",
                            bounds.len(),
                            bounds.len() + 1,
                            priorities.len()
                        ),
                    ));
                }
                if bounds.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(FieldError::new(
                        "bounds",
                        "must be strictly ascending".into(),
                    ));
                }
                priorities
                    .iter()
                    .try_for_each(|&p| positive("priorities", p))
            }
            SetRule::Table {
                entries,
                default_priority,
                ..
            } => {
                positive("default_priority", *default_priority)?;
                entries
                    .iter()
                    .try_for_each(|e| positive("entries.priority", e.priority))
            }
            _ => Ok(()),
        }
    }

    /// Where application `app` goes: [`assign`](Self::assign)'s set and
    /// priority, or the conservative set when the rule cannot place it yet.
    pub fn place(&self, app: AppId, info: &PhaseInfo) -> (SetId, f64) {
        self.assign(app, info)
            .unwrap_or((UNKNOWN_SET, UNKNOWN_PRIORITY))
    }

    /// The set and priority of application `app`; `None` when the rule needs
    /// a w_iter (or a group) that `info` does not give.
    pub fn assign(&self, app: AppId, info: &PhaseInfo) -> Option<(SetId, f64)> {
        let own = SetId(i64::from(app.0));
        let log = |base: f64, w: Time| -> (SetId, f64) {
            let set = magnitude(base, w);
            (SetId(set), base.powf(-(set as f64)))
        };
        Some(match self {
            SetRule::FairShare => (own, 1.0),
            SetRule::ExclusiveFcfs => (SetId(0), 1.0),
            SetRule::Set10 => log(10.0, info.w_iter?),
            SetRule::Log { base } => log(*base, info.w_iter?),
            SetRule::Clairvoyant => {
                let (group, w) = info.group?;
                (SetId(i64::from(group)), log(10.0, w).1)
            }
            SetRule::SetFairShare => (log(10.0, info.w_iter?).0, 1.0),
            SetRule::SharePriority => (own, log(10.0, info.w_iter?).1),
            SetRule::Thresholds { bounds, priorities } => {
                let w = info.w_iter?;
                let set = bounds.iter().take_while(|&&b| w >= b).count();
                (SetId(set as i64), priorities[set.min(priorities.len() - 1)])
            }
            SetRule::Table {
                entries,
                default_set,
                default_priority,
            } => entries
                .iter()
                .find(|e| e.app == app.0)
                .map_or((SetId(*default_set), *default_priority), |e| {
                    (SetId(e.set), e.priority)
                }),
        })
    }
}

/// ⌊log_base w⌉ with w in seconds (nearest integer; an exact half rounds up).
fn magnitude(base: f64, w: Time) -> i64 {
    let s = w.as_secs_f64().max(1e-9);
    (s.ln() / base.ln()).round() as i64
}

/// The IO-SETS arbiter: exclusive, first-come-first-served access inside a
/// set; every set with an application doing I/O shares the bandwidth by its
/// priority.
#[derive(Clone, Debug)]
pub struct Sets {
    rule: SetRule,
    /// Per set: the application doing I/O, with its priority.
    running: BTreeMap<SetId, (AppId, f64)>,
    /// Per set: the applications waiting, in request order.
    waiting: BTreeMap<SetId, VecDeque<(AppId, f64)>>,
    /// Every application granted or waiting, and its set.
    member: BTreeMap<AppId, SetId>,
}

impl Sets {
    pub fn new(rule: SetRule) -> Sets {
        Sets {
            rule,
            running: BTreeMap::new(),
            waiting: BTreeMap::new(),
            member: BTreeMap::new(),
        }
    }

    pub fn rule(&self) -> &SetRule {
        &self.rule
    }

    /// How many applications wait.
    pub fn queued(&self) -> usize {
        self.waiting.values().map(VecDeque::len).sum()
    }

    /// The applications waiting, set by set (in set order), in request
    /// order within each, with their priorities.
    pub fn queue(&self) -> Vec<(SetId, AppId, f64)> {
        self.waiting
            .iter()
            .flat_map(|(&set, q)| q.iter().map(move |&(app, p)| (set, app, p)))
            .collect()
    }

    /// The set an application granted or waiting is in.
    pub fn set_of(&self, app: AppId) -> Option<SetId> {
        self.member.get(&app).copied()
    }
}

impl IoArbiter for Sets {
    fn begin_phase(&mut self, app: AppId, _now: Time, info: &PhaseInfo) -> Decision {
        if let Some(&set) = self.member.get(&app) {
            return match self.running.get(&set) {
                Some(&(a, priority)) if a == app => Decision::Granted { priority },
                _ => Decision::Queued,
            };
        }
        let (set, priority) = self.rule.place(app, info);
        self.member.insert(app, set);
        match self.running.entry(set) {
            Entry::Occupied(_) => {
                self.waiting
                    .entry(set)
                    .or_default()
                    .push_back((app, priority));
                Decision::Queued
            }
            Entry::Vacant(slot) => {
                slot.insert((app, priority));
                Decision::Granted { priority }
            }
        }
    }

    fn end_phase(&mut self, app: AppId, _now: Time) -> Vec<(AppId, f64)> {
        let Some(set) = self.member.remove(&app) else {
            return Vec::new();
        };
        if self.running.get(&set).is_some_and(|&(a, _)| a == app) {
            self.running.remove(&set);
            let next = self.waiting.get_mut(&set).and_then(VecDeque::pop_front);
            if self.waiting.get(&set).is_some_and(VecDeque::is_empty) {
                self.waiting.remove(&set);
            }
            match next {
                Some((next, priority)) => {
                    self.running.insert(set, (next, priority));
                    vec![(next, priority)]
                }
                None => Vec::new(),
            }
        } else {
            // A queued application giving up its turn.
            if let Some(q) = self.waiting.get_mut(&set) {
                q.retain(|&(a, _)| a != app);
                if q.is_empty() {
                    self.waiting.remove(&set);
                }
            }
            Vec::new()
        }
    }

    fn granted(&self) -> Vec<(AppId, f64)> {
        let mut granted: Vec<(AppId, f64)> = self.running.values().copied().collect();
        granted.sort_unstable_by_key(|&(app, _)| app);
        granted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::shares;
    use proptest::prelude::*;

    fn w(seconds: f64) -> PhaseInfo {
        PhaseInfo {
            w_iter: Some(Time::from_secs_f64(seconds)),
            group: None,
        }
    }

    #[test]
    fn set10_maps_orders_of_magnitude_to_sets_and_priorities() {
        let rule = SetRule::Set10;
        assert_eq!(rule.assign(AppId(1), &w(10.0)), Some((SetId(1), 0.1)));
        assert_eq!(rule.assign(AppId(1), &w(100.0)), Some((SetId(2), 0.01)));
        // ⌊log10 30⌉ = ⌊1.48⌉ = 1; ⌊log10 40⌉ = ⌊1.60⌉ = 2.
        assert_eq!(rule.assign(AppId(1), &w(30.0)).unwrap().0, SetId(1));
        assert_eq!(rule.assign(AppId(1), &w(40.0)).unwrap().0, SetId(2));
        assert_eq!(rule.assign(AppId(1), &w(0.1)), Some((SetId(-1), 10.0)));
        assert_eq!(rule.assign(AppId(1), &PhaseInfo::default()), None);
    }

    #[test]
    fn the_ablations_keep_one_half_of_set10_each() {
        assert_eq!(
            SetRule::SetFairShare.assign(AppId(7), &w(1000.0)),
            Some((SetId(3), 1.0))
        );
        let (set, p) = SetRule::SharePriority.assign(AppId(7), &w(1000.0)).unwrap();
        assert_eq!(set, SetId(7));
        assert!((p - 1e-3).abs() < 1e-15);
    }

    #[test]
    fn user_rules_place_applications_as_written() {
        let log2 = SetRule::Log { base: 2.0 };
        assert_eq!(log2.assign(AppId(1), &w(8.0)), Some((SetId(3), 0.125)));
        let t = SetRule::Thresholds {
            bounds: vec![Time::from_secs_f64(30.0), Time::from_secs_f64(300.0)],
            priorities: vec![1.0, 0.5, 0.25],
        };
        assert_eq!(t.assign(AppId(1), &w(10.0)), Some((SetId(0), 1.0)));
        assert_eq!(t.assign(AppId(1), &w(30.0)), Some((SetId(1), 0.5)));
        assert_eq!(t.assign(AppId(1), &w(5000.0)), Some((SetId(2), 0.25)));
        let table = SetRule::Table {
            entries: vec![TableEntry {
                app: 4,
                set: 9,
                priority: 3.0,
            }],
            default_set: 0,
            default_priority: 1.0,
        };
        assert_eq!(
            table.assign(AppId(4), &PhaseInfo::default()),
            Some((SetId(9), 3.0))
        );
        assert_eq!(
            table.assign(AppId(5), &PhaseInfo::default()),
            Some((SetId(0), 1.0))
        );
        let clairvoyant = PhaseInfo {
            w_iter: None,
            group: Some((2, Time::from_secs_f64(100.0))),
        };
        assert_eq!(
            SetRule::Clairvoyant.assign(AppId(1), &clairvoyant),
            Some((SetId(2), 0.01))
        );
    }

    #[test]
    fn bad_rules_name_the_field() {
        assert_eq!(
            SetRule::Log { base: 1.0 }.validate().unwrap_err().field,
            "base"
        );
        let t = SetRule::Thresholds {
            bounds: vec![Time::from_secs_f64(30.0)],
            priorities: vec![1.0],
        };
        assert_eq!(t.validate().unwrap_err().field, "priorities");
        let t = SetRule::Thresholds {
            bounds: vec![Time::from_secs_f64(30.0), Time::from_secs_f64(3.0)],
            priorities: vec![1.0, 1.0, 1.0],
        };
        assert_eq!(t.validate().unwrap_err().field, "bounds");
    }

    #[test]
    fn rules_read_from_toml() {
        let r: SetRule = toml::from_str(
            "kind = \"thresholds\"\nbounds = [\"30s\", \"5min\"]\npriorities = [1, 0.1, 0.01]",
        )
        .unwrap();
        assert!(matches!(r, SetRule::Thresholds { .. }));
        let r: SetRule = toml::from_str("kind = \"set10\"").unwrap();
        assert_eq!(r, SetRule::Set10);
    }

    #[test]
    fn one_application_per_set_does_io_and_the_next_is_the_earliest() {
        let mut a = Sets::new(SetRule::Set10);
        let now = Time::ZERO;
        assert_eq!(
            a.begin_phase(AppId(1), now, &w(10.0)),
            Decision::Granted { priority: 0.1 }
        );
        assert_eq!(a.begin_phase(AppId(2), now, &w(12.0)), Decision::Queued);
        assert_eq!(a.begin_phase(AppId(3), now, &w(9.0)), Decision::Queued);
        assert_eq!(
            a.begin_phase(AppId(4), now, &w(100.0)),
            Decision::Granted { priority: 0.01 }
        );
        // Asking again changes nothing.
        assert_eq!(a.begin_phase(AppId(2), now, &w(12.0)), Decision::Queued);
        assert_eq!(a.granted(), vec![(AppId(1), 0.1), (AppId(4), 0.01)]);
        assert_eq!(a.end_phase(AppId(1), now), vec![(AppId(2), 0.1)]);
        assert_eq!(a.end_phase(AppId(2), now), vec![(AppId(3), 0.1)]);
        assert_eq!(a.end_phase(AppId(3), now), vec![]);
        assert_eq!(a.granted(), vec![(AppId(4), 0.01)]);
    }

    #[test]
    fn an_application_without_an_estimate_waits_in_the_conservative_set() {
        let mut a = Sets::new(SetRule::Set10);
        let d = a.begin_phase(AppId(1), Time::ZERO, &PhaseInfo::default());
        assert_eq!(
            d,
            Decision::Granted {
                priority: UNKNOWN_PRIORITY
            }
        );
        assert_eq!(a.set_of(AppId(1)), Some(UNKNOWN_SET));
        assert_eq!(
            a.begin_phase(AppId(2), Time::ZERO, &PhaseInfo::default()),
            Decision::Queued
        );
    }

    #[test]
    fn fcfs_and_fair_share_are_the_two_extremes() {
        let mut fcfs = Sets::new(SetRule::ExclusiveFcfs);
        let mut fair = Sets::new(SetRule::FairShare);
        for app in 0..4 {
            fcfs.begin_phase(AppId(app), Time::ZERO, &PhaseInfo::default());
            fair.begin_phase(AppId(app), Time::ZERO, &PhaseInfo::default());
        }
        assert_eq!(fcfs.granted().len(), 1);
        assert_eq!(fcfs.queued(), 3);
        assert_eq!(
            shares(&fair.granted())
                .iter()
                .map(|s| s.1)
                .collect::<Vec<_>>(),
            vec![0.25; 4]
        );
    }

    #[derive(Clone, Debug)]
    enum Step {
        Begin(u32, f64),
        End(u32),
    }

    fn steps() -> impl Strategy<Value = Vec<Step>> {
        prop::collection::vec(
            prop_oneof![
                (0u32..12, 0.05f64..20_000.0).prop_map(|(a, w)| Step::Begin(a, w)),
                (0u32..12).prop_map(Step::End),
            ],
            1..200,
        )
    }

    fn rules() -> impl Strategy<Value = SetRule> {
        prop_oneof![
            Just(SetRule::FairShare),
            Just(SetRule::ExclusiveFcfs),
            Just(SetRule::Set10),
            Just(SetRule::SetFairShare),
            Just(SetRule::SharePriority),
            (1.5f64..20.0).prop_map(|base| SetRule::Log { base }),
        ]
    }

    proptest! {
        /// Inside a set at most one application does I/O, and the next one
        /// granted is the set's earliest waiting request; the shares of
        /// whoever does I/O sum to 1 (work-conserving); nobody waits in a
        /// set where nobody runs.
        #[test]
        fn sets_are_exclusive_fcfs_inside_and_work_conserving(rule in rules(), steps in steps()) {
            let mut a = Sets::new(rule.clone());
            // The model: per set, the requests in order (the first one runs).
            let mut model: BTreeMap<SetId, Vec<u32>> = BTreeMap::new();
            let mut known: BTreeMap<u32, SetId> = BTreeMap::new();
            for (i, step) in steps.iter().enumerate() {
                let now = Time::from_nanos(i as u64);
                match *step {
                    Step::Begin(app, wi) => {
                        let d = a.begin_phase(AppId(app), now, &w(wi));
                        let set = *known.entry(app).or_insert_with(|| {
                            rule.assign(AppId(app), &w(wi)).unwrap().0
                        });
                        let q = model.entry(set).or_default();
                        if !q.contains(&app) {
                            q.push(app);
                        }
                        prop_assert_eq!(matches!(d, Decision::Granted { .. }), q[0] == app);
                    }
                    Step::End(app) => {
                        let granted = a.end_phase(AppId(app), now);
                        let mut expected = Vec::new();
                        if let Some(set) = known.remove(&app) {
                            let q = model.get_mut(&set).unwrap();
                            let was_first = q[0] == app;
                            q.retain(|&x| x != app);
                            if was_first && !q.is_empty() {
                                expected.push(q[0]);
                            }
                        }
                        prop_assert_eq!(granted.iter().map(|g| g.0 .0).collect::<Vec<_>>(), expected);
                    }
                }
                let running: Vec<u32> = model.values().filter_map(|q| q.first().copied()).collect();
                let mut granted: Vec<u32> = a.granted().iter().map(|g| g.0 .0).collect();
                granted.sort_unstable();
                let mut running_sorted = running.clone();
                running_sorted.sort_unstable();
                prop_assert_eq!(granted, running_sorted);
                let total: f64 = shares(&a.granted()).iter().map(|s| s.1).sum();
                if !a.granted().is_empty() {
                    prop_assert!((total - 1.0).abs() < 1e-9);
                }
                prop_assert_eq!(a.queued(), model.values().map(|q| q.len().saturating_sub(1)).sum::<usize>());
                let listed: usize = a.queue().len();
                prop_assert_eq!(listed, a.queued());
            }
        }

        /// The same events give the same decisions, every time: what lets
        /// the coordinator service and the simulators be compared.
        #[test]
        fn the_same_events_give_the_same_decisions(rule in rules(), steps in steps()) {
            let run = || {
                let mut a = Sets::new(rule.clone());
                steps
                    .iter()
                    .enumerate()
                    .map(|(i, step)| {
                        let now = Time::from_nanos(i as u64);
                        match *step {
                            Step::Begin(app, wi) => format!("{:?}", a.begin_phase(AppId(app), now, &w(wi))),
                            Step::End(app) => format!("{:?}", a.end_phase(AppId(app), now)),
                        }
                    })
                    .collect::<Vec<_>>()
            };
            prop_assert_eq!(run(), run());
        }
    }
}
