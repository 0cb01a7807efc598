//! GIFT (Patel, Garg and Tiwari, "GIFT: A Coupon Based Throttle-and-Reward
//! Mechanism for Fair and Efficient I/O Bandwidth Management on Parallel
//! Storage Systems", FAST 2020): **throttle and reward**. Every
//! application active at a server is owed an equal share of its capacity.
//! One that cannot use its share here (its I/O is held back elsewhere: at
//! another server, or by its own computation) is throttled to what it
//! uses, the bandwidth it gives up goes to the applications that want
//! more, and it is given **coupons** for it. When it later wants more than
//! its share, it redeems its coupons for bandwidth beyond the share, taken
//! from what throttled applications give up, before anyone without coupons
//! gets that bandwidth.
//!
//! Each epoch (`epoch`), from what each application did in the last one:
//! - the fair share is `capacity × epoch / n` over the `n` applications
//!   active at this server (`capacity`, or what the server delivered in
//!   its recent busy epochs);
//! - an application that did not want more than it got is throttled to
//!   what it started (at least `floor` of the share, so that one that
//!   starts again is not shut out), and the rest of its share is given up;
//! - the bytes given up go first to the applications that want more and
//!   hold coupons, in proportion to their coupons, each up to its coupons
//!   (redeemed), then evenly to every application that wants more;
//! - an application that gave up bytes another one took is issued that
//!   many coupons. Coupons not redeemed within `coupon_lifetime` expire.
//!
//! The ledger ([`Coupons`]) is kept so that coupons are conserved: issued
//! = redeemed + expired + outstanding, at every epoch.
//!
//! Where this differs from the paper, and why: the paper's controller sees
//! every server and chooses throttles and redemptions with a linear
//! program maximising the system's throughput; here each server decides
//! alone from what it saw (as Lustre's per-server TBF enforces them), and
//! an application's use at this server stands for the bottleneck
//! elsewhere that held it back. The paper's text was not reachable when
//! this was written (only its abstract): the epoch, the floor, the
//! proportional redemption and the coupons' lifetime are this file's
//! choices, documented in docs/concepts.md.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::epoch_allowance::{set_capacity, EpochPolicy, EpochRule, EpochUse};
use super::sfq::default_metadata_cost;
use super::{check_capacity, check_fraction, positive, PolicySpec, RequestQueue, DEFAULT_DEPTH};
use crate::request::AppId;
use crate::time::Time;
use crate::units::{Bandwidth, Bytes};
use crate::FieldError;

/// `kind = "gift"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GiftConfig {
    pub depth: u32,
    /// The bandwidth shared out; when not given, what the server delivered
    /// in its recent busy epochs.
    pub capacity: Option<Bandwidth>,
    /// How often throttles and rewards are decided.
    pub epoch: Time,
    /// The least part of its share a throttled application keeps.
    pub floor: f64,
    /// How long a coupon may wait to be redeemed.
    pub coupon_lifetime: Time,
    pub metadata_cost: Bytes,
}

impl Default for GiftConfig {
    fn default() -> GiftConfig {
        GiftConfig {
            depth: DEFAULT_DEPTH,
            capacity: None,
            epoch: Time::from_millis(100),
            floor: 0.1,
            coupon_lifetime: Time::from_secs(10),
            metadata_cost: default_metadata_cost(),
        }
    }
}

impl PolicySpec for GiftConfig {
    const NAME: &'static str = "gift";
    fn build(&self, _default_window: Time) -> Box<dyn RequestQueue> {
        Box::new(Gift::new(self))
    }
    fn validate(&self) -> Result<(), FieldError> {
        positive("depth", self.depth as u64)?;
        positive("metadata_cost", self.metadata_cost.0)?;
        positive("epoch", self.epoch.as_nanos())?;
        positive("coupon_lifetime", self.coupon_lifetime.as_nanos())?;
        check_capacity(self.capacity)?;
        check_fraction("floor", self.floor)
    }
}

/// The coupons of one server, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Coupons {
    pub issued: f64,
    pub redeemed: f64,
    pub expired: f64,
    pub outstanding: f64,
}

/// One application's coupons, oldest first: (issued at, bytes left).
type Lots = VecDeque<(Time, f64)>;

/// GIFT's state at one server: its settings, the coupons and their ledger.
pub struct GiftRule {
    /// Set by the administrator, else measured.
    capacity: Option<f64>,
    floor: f64,
    lifetime: Time,
    coupons: BTreeMap<AppId, Lots>,
    ledger: Coupons,
}

/// The policy: allowances per epoch, as [`GiftRule`] decides them.
pub type Gift = EpochPolicy<GiftRule>;

impl Gift {
    pub fn new(config: &GiftConfig) -> Gift {
        let rule = GiftRule {
            capacity: set_capacity(config.capacity),
            floor: config.floor.clamp(0.0, 1.0),
            lifetime: config.coupon_lifetime,
            coupons: BTreeMap::new(),
            ledger: Coupons::default(),
        };
        EpochPolicy::with_rule(config.epoch, config.metadata_cost.0, config.depth, rule)
    }

    /// The coupon ledger so far.
    pub fn coupons(&self) -> Coupons {
        self.rule().ledger
    }

    /// Coupons `app` holds, in bytes.
    pub fn coupons_of(&self, app: AppId) -> f64 {
        self.rule().coupons_of(app)
    }
}

impl EpochRule for GiftRule {
    const NAME: &'static str = "gift";

    fn capacity(&self) -> Option<f64> {
        self.capacity
    }

    /// Throttles, redemptions and rewards for the epoch beginning at `now`.
    fn decide(&mut self, uses: &[EpochUse], now: Time, budget: Option<f64>) -> Vec<(AppId, f64)> {
        self.expire(now);
        let active: Vec<&EpochUse> = uses.iter().filter(|u| u.active()).collect();
        // Nothing to share out before the server has measured what it delivers.
        let Some(budget) = budget else {
            return Vec::new();
        };
        if active.is_empty() {
            return Vec::new();
        }
        self.share(&active, budget, now)
    }
}

impl GiftRule {
    fn coupons_of(&self, app: AppId) -> f64 {
        self.coupons
            .get(&app)
            .map_or(0.0, |lots| lots.iter().map(|l| l.1).sum())
    }

    fn expire(&mut self, now: Time) {
        for lots in self.coupons.values_mut() {
            while let Some(&(at, bytes)) = lots.front() {
                if now.saturating_sub(at) < self.lifetime {
                    break;
                }
                self.ledger.expired += bytes;
                self.ledger.outstanding -= bytes;
                lots.pop_front();
            }
        }
        self.coupons.retain(|_, lots| !lots.is_empty());
    }

    /// Each application's bytes out of `budget`: equal shares, throttles,
    /// redemptions and rewards.
    fn share(&mut self, active: &[&EpochUse], budget: f64, now: Time) -> Vec<(AppId, f64)> {
        let fair = budget / active.len() as f64;
        let mut allowance: BTreeMap<AppId, f64> = BTreeMap::new();
        let mut given_up: Vec<(AppId, f64)> = Vec::new();
        for u in active {
            if u.hungry {
                allowance.insert(u.app, fair);
            } else {
                let kept = (u.served as f64).clamp(self.floor * fair, fair);
                allowance.insert(u.app, kept);
                given_up.push((u.app, fair - kept));
            }
        }
        let spare: f64 = given_up.iter().map(|g| g.1).sum();
        let wanting: Vec<AppId> = active.iter().filter(|u| u.hungry).map(|u| u.app).collect();
        if spare <= 0.0 || wanting.is_empty() {
            return allowance.into_iter().collect();
        }
        let redeemed = self.redeem(&wanting, spare);
        let left = spare - redeemed.iter().map(|r| r.1).sum::<f64>();
        for (app, r) in redeemed {
            *allowance.get_mut(&app).expect("a wanting application") += r;
        }
        for app in &wanting {
            *allowance.get_mut(app).expect("a wanting application") += left / wanting.len() as f64;
        }
        for (app, bytes) in given_up.into_iter().filter(|g| g.1 > 0.0) {
            self.coupons.entry(app).or_default().push_back((now, bytes));
            self.ledger.issued += bytes;
            self.ledger.outstanding += bytes;
        }
        allowance.into_iter().collect()
    }

    /// Coupons the wanting applications redeem out of `spare` bytes: in
    /// proportion to what they hold, each at most what it holds; the
    /// oldest coupons go first.
    fn redeem(&mut self, wanting: &[AppId], spare: f64) -> Vec<(AppId, f64)> {
        let held: Vec<(AppId, f64)> = wanting.iter().map(|&a| (a, self.coupons_of(a))).collect();
        let total: f64 = held.iter().map(|h| h.1).sum();
        if total <= 0.0 {
            return Vec::new();
        }
        let scale = (spare / total).min(1.0);
        let mut out = Vec::new();
        for (app, has) in held.into_iter().filter(|h| h.1 > 0.0) {
            let take = has * scale;
            let lots = self.coupons.get_mut(&app).expect("holds coupons");
            let mut owed = take;
            while owed > 0.0 {
                let Some(lot) = lots.front_mut() else { break };
                let used = lot.1.min(owed);
                lot.1 -= used;
                owed -= used;
                if lot.1 <= 1e-9 {
                    lots.pop_front();
                }
            }
            self.ledger.redeemed += take;
            self.ledger.outstanding -= take;
            out.push((app, take));
        }
        self.coupons.retain(|_, lots| !lots.is_empty());
        out
    }
}

#[cfg(test)]
mod tests;
