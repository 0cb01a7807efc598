//! AdapTBF (Rashid and Dai, "AdapTBF: Decentralized Bandwidth Control via
//! Adaptive Token Borrowing for HPC Storage", 2026): Lustre's token bucket
//! filter with each job's rate in proportion to its **priority** (its
//! compute allocation: node count), and tokens **lent** by jobs that do
//! not need them to jobs that do, and **returned** when the lender needs
//! them again. Each server decides alone, from what it saw.
//!
//! Each epoch (`epoch`), from what each job did in the last one:
//! - a job's base is `capacity × epoch × priority / (sum of the
//!   priorities of the jobs active here)`, the capacity `capacity` or
//!   what the server delivered in its recent busy epochs;
//! - a job that did not want more than it got lends what it did not use
//!   of its base (it keeps what it started, at least `floor` of its base);
//! - a job that wants more and is owed tokens reclaims them: each job
//!   that owes it pays back, at most `repay` of the debtor's base an
//!   epoch, out of what the debtor would have lent first;
//! - the tokens lent go to the jobs that want more, in proportion to
//!   their priorities, and each borrower then owes each lender its part;
//! - a debt whose lender or borrower has been gone (inactive here) for
//!   `forget` is written off: a lender that left needs nothing back, a
//!   borrower that left has nothing to pay with.
//!
//! The loan ledger ([`Loans`]) is kept so that tokens are conserved:
//! borrowed = repaid + forgiven + outstanding, at every epoch.
//!
//! The paper's text was not reachable when this was written (its abstract
//! and summary only): the epoch, the floor, the repayment cap and the
//! write-off are this file's choices, documented in docs/concepts.md. A
//! job's priority is the administrator's (`jobs`), never a request's claim;
//! a job not listed has priority 1.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::epoch_allowance::{set_capacity, EpochPolicy, EpochRule, EpochUse};
use super::sfq::default_metadata_cost;
use super::{check_capacity, check_fraction, positive, PolicySpec, RequestQueue, DEFAULT_DEPTH};
use crate::request::AppId;
use crate::time::Time;
use crate::units::{Bandwidth, Bytes};
use crate::FieldError;

/// A job's priority (its node count, say).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobPriority {
    pub app: u32,
    pub priority: f64,
}

/// `kind = "adaptbf"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdapTbfConfig {
    pub depth: u32,
    /// The bandwidth shared out; when not given, what the server delivered
    /// in its recent busy epochs.
    pub capacity: Option<Bandwidth>,
    pub epoch: Time,
    /// The least part of its base a lender keeps.
    pub floor: f64,
    /// The most of its base a debtor pays back in one epoch.
    pub repay: f64,
    /// How long a party to a loan may be gone before the loan is written off.
    pub forget: Time,
    pub jobs: Vec<JobPriority>,
    pub metadata_cost: Bytes,
}

impl Default for AdapTbfConfig {
    fn default() -> AdapTbfConfig {
        AdapTbfConfig {
            depth: DEFAULT_DEPTH,
            capacity: None,
            epoch: Time::from_millis(100),
            floor: 0.1,
            repay: 0.5,
            forget: Time::from_secs(2),
            jobs: Vec::new(),
            metadata_cost: default_metadata_cost(),
        }
    }
}

impl PolicySpec for AdapTbfConfig {
    const NAME: &'static str = "adaptbf";
    fn build(&self, _default_window: Time) -> Box<dyn RequestQueue> {
        Box::new(AdapTbf::new(self))
    }
    fn validate(&self) -> Result<(), FieldError> {
        positive("depth", self.depth as u64)?;
        positive("metadata_cost", self.metadata_cost.0)?;
        positive("epoch", self.epoch.as_nanos())?;
        positive("forget", self.forget.as_nanos())?;
        check_capacity(self.capacity)?;
        check_fraction("floor", self.floor)?;
        check_fraction("repay", self.repay)?;
        let mut seen = BTreeSet::new();
        for (i, j) in self.jobs.iter().enumerate() {
            if !(j.priority.is_finite() && j.priority > 0.0) {
                return Err(FieldError::new(
                    format!("jobs[{i}].priority"),
                    format!("{} is not a number > 0", j.priority),
                ));
            }
            if !seen.insert(j.app) {
                return Err(FieldError::new(
                    format!("jobs[{i}].app"),
                    format!("job {} has two entries", j.app),
                ));
            }
        }
        Ok(())
    }
}

/// The loans of one server, in bytes of tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Loans {
    pub borrowed: f64,
    pub repaid: f64,
    pub forgiven: f64,
    pub outstanding: f64,
}

/// AdapTBF's state at one server: its settings, the debts and their ledger.
pub struct AdapTbfRule {
    /// Set by the administrator, else measured.
    capacity: Option<f64>,
    floor: f64,
    repay: f64,
    forget: Time,
    priority: BTreeMap<AppId, f64>,
    /// (borrower, lender) -> bytes owed.
    debts: BTreeMap<(AppId, AppId), f64>,
    /// When each job was last active here.
    seen: BTreeMap<AppId, Time>,
    ledger: Loans,
}

/// The policy: allowances per epoch, as [`AdapTbfRule`] decides them.
pub type AdapTbf = EpochPolicy<AdapTbfRule>;

/// One epoch's decisions, as they are built.
struct Epoch {
    base: BTreeMap<AppId, f64>,
    allowance: BTreeMap<AppId, f64>,
    /// What each job not wanting more lends this epoch.
    lends: BTreeMap<AppId, f64>,
}

impl AdapTbf {
    pub fn new(config: &AdapTbfConfig) -> AdapTbf {
        let rule = AdapTbfRule {
            capacity: set_capacity(config.capacity),
            floor: config.floor.clamp(0.0, 1.0),
            repay: config.repay.clamp(0.0, 1.0),
            forget: config.forget,
            priority: config
                .jobs
                .iter()
                .map(|j| (AppId(j.app), j.priority))
                .collect(),
            debts: BTreeMap::new(),
            seen: BTreeMap::new(),
            ledger: Loans::default(),
        };
        EpochPolicy::with_rule(config.epoch, config.metadata_cost.0, config.depth, rule)
    }

    /// The loan ledger so far.
    pub fn loans(&self) -> Loans {
        self.rule().ledger
    }

    /// What `borrower` owes `lender`, in bytes.
    pub fn owed(&self, borrower: AppId, lender: AppId) -> f64 {
        self.rule()
            .debts
            .get(&(borrower, lender))
            .copied()
            .unwrap_or(0.0)
    }
}

impl EpochRule for AdapTbfRule {
    const NAME: &'static str = "adaptbf";

    fn capacity(&self) -> Option<f64> {
        self.capacity
    }

    fn decide(&mut self, uses: &[EpochUse], now: Time, budget: Option<f64>) -> Vec<(AppId, f64)> {
        for u in uses.iter().filter(|u| u.active()) {
            self.seen.insert(u.app, now);
        }
        self.write_off(now);
        // Nothing to share out before the server has measured what it delivers.
        match budget {
            Some(budget) => self.share(uses, budget),
            None => Vec::new(),
        }
    }
}

impl AdapTbfRule {
    fn priority_of(&self, app: AppId) -> f64 {
        self.priority.get(&app).copied().unwrap_or(1.0)
    }

    /// Writes off the debts one of whose parties has been gone for `forget`.
    fn write_off(&mut self, now: Time) {
        let gone = |app: &AppId| {
            self.seen
                .get(app)
                .is_none_or(|&t| now.saturating_sub(t) >= self.forget)
        };
        let mut forgiven = 0.0;
        self.debts.retain(|(b, l), owed| {
            let keep = !gone(b) && !gone(l);
            if !keep {
                forgiven += *owed;
            }
            keep
        });
        self.ledger.forgiven += forgiven;
        self.ledger.outstanding -= forgiven;
        let forget = self.forget;
        self.seen.retain(|_, t| now.saturating_sub(*t) < forget);
    }

    /// Each job's bytes out of `budget`: bases by priority, lending,
    /// reclaiming and borrowing.
    fn share(&mut self, uses: &[EpochUse], budget: f64) -> Vec<(AppId, f64)> {
        let active: Vec<&EpochUse> = uses.iter().filter(|u| u.active()).collect();
        let total: f64 = active.iter().map(|u| self.priority_of(u.app)).sum();
        if active.is_empty() || total <= 0.0 {
            return Vec::new();
        }
        let per_priority = budget / total;
        let mut e = Epoch {
            base: BTreeMap::new(),
            allowance: BTreeMap::new(),
            lends: BTreeMap::new(),
        };
        for u in &active {
            let base = per_priority * self.priority_of(u.app);
            e.base.insert(u.app, base);
            if u.hungry {
                e.allowance.insert(u.app, base);
            } else {
                let kept = (u.served as f64).clamp(self.floor * base, base);
                e.allowance.insert(u.app, kept);
                e.lends.insert(u.app, base - kept);
            }
        }
        let wanting: Vec<AppId> = active.iter().filter(|u| u.hungry).map(|u| u.app).collect();
        self.reclaim(&wanting, &mut e);
        self.lend(&wanting, &mut e);
        e.allowance.into_iter().collect()
    }

    /// Jobs that want more take back what they are owed, up to each
    /// debtor's repayment cap, out of what the debtor would lend first.
    fn reclaim(&mut self, wanting: &[AppId], e: &mut Epoch) {
        let mut paid: BTreeMap<AppId, f64> = BTreeMap::new();
        for &lender in wanting {
            let debtors: Vec<(AppId, f64)> = self
                .debts
                .iter()
                .filter(|((_, l), _)| *l == lender)
                .map(|((b, _), &owed)| (*b, owed))
                .collect();
            for (debtor, owed) in debtors {
                let Some(&base) = e.base.get(&debtor) else {
                    continue; // not here this epoch: nothing to pay with
                };
                let room = self.repay * base - paid.get(&debtor).copied().unwrap_or(0.0);
                let pay = owed.min(room).max(0.0);
                if pay <= 0.0 {
                    continue;
                }
                *paid.entry(debtor).or_default() += pay;
                let from_lend = e.lends.get(&debtor).copied().unwrap_or(0.0).min(pay);
                if from_lend > 0.0 {
                    *e.lends.get_mut(&debtor).expect("lends") -= from_lend;
                }
                let from_own = pay - from_lend;
                *e.allowance.get_mut(&debtor).expect("active") -= from_own;
                *e.allowance.get_mut(&lender).expect("wanting") += pay;
                self.settle(debtor, lender, pay);
            }
        }
    }

    fn settle(&mut self, borrower: AppId, lender: AppId, bytes: f64) {
        let owed = self.debts.entry((borrower, lender)).or_default();
        *owed -= bytes;
        if *owed <= 1e-9 {
            self.debts.remove(&(borrower, lender));
        }
        self.ledger.repaid += bytes;
        self.ledger.outstanding -= bytes;
    }

    /// What the others lend goes to the jobs that want more, by priority;
    /// each borrower owes each lender in proportion to what it lent.
    fn lend(&mut self, wanting: &[AppId], e: &mut Epoch) {
        let pool: f64 = e.lends.values().sum();
        let weights: f64 = wanting.iter().map(|&a| self.priority_of(a)).sum();
        if pool <= 0.0 || weights <= 0.0 {
            return;
        }
        for &borrower in wanting {
            let share = pool * self.priority_of(borrower) / weights;
            *e.allowance.get_mut(&borrower).expect("wanting") += share;
            for (&lender, &lent) in e.lends.iter().filter(|(_, &l)| l > 0.0) {
                let owed = share * lent / pool;
                *self.debts.entry((borrower, lender)).or_default() += owed;
                self.ledger.borrowed += owed;
                self.ledger.outstanding += owed;
            }
        }
    }
}

#[cfg(test)]
mod tests;
