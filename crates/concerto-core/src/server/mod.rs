//! Per-server scheduling: the [`RequestQueue`] contract and its policies.
//!
//! The owner of a device (the simulator's server model, or a real server's
//! scheduling loop) drives a queue through the one [`Driver`]: it enqueues
//! requests as they arrive, asks for requests to start whenever it may,
//! reports completions, carries service reports between servers, and calls
//! again at `next_wakeup` for policies that wait.

mod adaptbf;
mod capped;
mod coordinated;
mod crr_n;
mod dmclock;
mod driver;
mod epoch_allowance;
mod fifo;
mod gift;
mod orr;
#[cfg(test)]
mod paced_device;
mod per_object;
mod qos;
mod service_sync;
mod sfq;
mod tbf_match;
mod themis;
mod unreported;

pub use adaptbf::{AdapTbf, AdapTbfConfig, AdapTbfRule, JobPriority, Loans};
pub use capped::{Capped, CappedConfig};
pub use coordinated::{Coordinated, CoordinatedConfig, TimeSource};
pub use crr_n::{CrrN, CrrNConfig};
pub use dmclock::{AppQos, DmClock, DmClockConfig, Phase, Rate};
pub use driver::{DeviceClass, DeviceDefaults, Driver, Ticket};
pub use epoch_allowance::{EpochPolicy, EpochRule, EpochUse};
pub use fifo::{Fifo, FifoConfig};
pub use gift::{Coupons, Gift, GiftConfig, GiftRule};
pub use orr::{Orr, OrrConfig};
pub use per_object::{PerObjectConfig, PerObjectFcfs};
pub use qos::{OpClass, QosRule, QosRules, QosStage};
pub use service_sync::{ServiceSync, ServiceSyncConfig};
pub use sfq::{CostRow, Sfq, SfqConfig, SfqDConfig, SfqDPlusConfig, SfqParams, SlotCosts};
pub use tbf_match::{Nid, TbfMatch};
pub use themis::{Fairness, GroupUsers, JobNodes, Themis, ThemisConfig};

use crate::FieldError;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::request::{AppId, Request};
use crate::time::Time;
use crate::units::Bandwidth;

/// How long a metadata server's reaper gathers the objects of removed
/// files before it removes them, so that one removal per data server
/// covers many unlinks (concerto-server's reaper, and the simulator's
/// model of it).
pub const REAPER_GATHER: Time = Time::from_millis(50);

/// How long a namespace change may wait for the commit that makes it
/// durable (many changes share one flush): a metadata server commits
/// this long after the first change since its last commit
/// (concerto-server's store, and the simulator's model of when a removed
/// file's objects become the reaper's).
pub const METADATA_COMMIT_INTERVAL: Time = Time::from_millis(10);

/// Service one server gave one application since its previous report.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Served {
    pub app: AppId,
    /// Bytes (a metadata operation counts its policy's metadata cost).
    pub bytes: u64,
    pub requests: u64,
    /// The part of `bytes` and `requests` a reservation gave (dmClock's
    /// reservation phase: its `rho`); zero where the policy has none.
    pub reserved_bytes: u64,
    pub reserved_requests: u64,
    /// The weight its requests carried.
    pub weight: f64,
}

impl Served {
    /// Nothing served yet to `app` at `weight`.
    pub fn none(app: AppId, weight: f64) -> Served {
        Served {
            app,
            bytes: 0,
            requests: 0,
            reserved_bytes: 0,
            reserved_requests: 0,
            weight,
        }
    }

    /// Adds a later account of the same application: amounts add up and
    /// the later weight holds.
    pub fn add(&mut self, later: &Served) {
        self.bytes = self.bytes.saturating_add(later.bytes);
        self.requests = self.requests.saturating_add(later.requests);
        self.reserved_bytes = self.reserved_bytes.saturating_add(later.reserved_bytes);
        self.reserved_requests = self
            .reserved_requests
            .saturating_add(later.reserved_requests);
        self.weight = later.weight;
    }
}

/// Service one server gave each application since its previous report,
/// ordered by application. Servers running [`ServiceSync`] exchange these
/// to share total service across servers, and [`DmClock`] (distributed)
/// to count service elsewhere against reservations and limits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceReport {
    pub served: Vec<Served>,
}

impl ServiceReport {
    /// Adds a later report from the same server to this one: amounts add
    /// up per application and the later weight holds, so while weights
    /// stay the same one merged report charges a peer what the two would
    /// have.
    pub fn merge(&mut self, later: &ServiceReport) {
        let mut all: BTreeMap<AppId, Served> = self.served.iter().map(|s| (s.app, *s)).collect();
        for s in &later.served {
            all.entry(s.app)
                .or_insert_with(|| Served::none(s.app, s.weight))
                .add(s);
        }
        self.served = all.into_values().collect();
    }
}

/// A per-server scheduler.
///
/// Capacity is counted in slots: the owner has `depth` slots and passes how
/// many are free to [`dispatch`](Self::dispatch); each started request holds
/// [`slot_cost`](Self::slot_cost) of them until it completes.
///
/// Implementations never panic on any request, keep no per-request storage
/// beyond the requests they hold, are `Send`, and are driven from one thread.
pub trait RequestQueue: Send {
    /// The policy's name as used in configuration (`"fifo"`, `"coordinated"`, ...).
    fn name(&self) -> &'static str;

    /// A request arrives at `now`.
    fn enqueue(&mut self, req: Request, now: Time);

    /// Moves the requests to start now into `out`, in start order, using at
    /// most `free_slots` slots in total.
    fn dispatch(&mut self, now: Time, free_slots: u32, out: &mut Vec<Request>);

    /// A started request finished.
    fn complete(&mut self, req: &Request, now: Time);

    /// Slots `req` holds while in service. One for every policy here; the
    /// size-aware policies charge large requests more.
    fn slot_cost(&self, _req: &Request) -> u32 {
        1
    }

    /// When a policy that holds requests back wants `dispatch` called again
    /// even if nothing arrives or completes. `None` for work-conserving policies.
    fn next_wakeup(&self, _now: Time) -> Option<Time> {
        None
    }

    /// The slot capacity (D) the policy is configured for; the owner then
    /// offers this many slots instead of its own default depth.
    fn depth(&self) -> Option<u32> {
        None
    }

    /// For policies that share service across servers: the report to send
    /// to every other server now, if one is due. Owners ask after completions.
    fn service_report(&mut self, _now: Time) -> Option<ServiceReport> {
        None
    }

    /// Another server's report arrived.
    fn absorb_service(&mut self, _report: &ServiceReport) {}

    /// Requests waiting (enqueued, not yet dispatched).
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A policy's configuration: the keys of its `[policy]` table (serde, with
/// its defaults) and how it builds its queue. Each lives beside its queue;
/// [`PolicyConfig`] registers it with one line.
pub trait PolicySpec: Default {
    /// Its name in configuration (`kind = "..."`).
    const NAME: &'static str;
    /// Its queue. Call [`validate`](Self::validate) first; defaults still
    /// unresolved take `default_window`.
    fn build(&self, default_window: Time) -> Box<dyn RequestQueue>;
    /// Checks parameter values; returns (field, problem) on error.
    fn validate(&self) -> Result<(), FieldError> {
        Ok(())
    }
    /// Fills in defaults that depend on the device: the coordination window
    /// for its class, the capacity it shares out.
    fn resolve(&mut self, _default_window: Time, _device_capacity: Bandwidth) {}
}

/// A capacity, when given, is a rate > 0.
pub(crate) fn check_capacity(capacity: Option<Bandwidth>) -> Result<(), FieldError> {
    match capacity {
        Some(c) if !(c.0.is_finite() && c.0 > 0.0) => {
            Err(FieldError::new("capacity", "must be > 0".into()))
        }
        _ => Ok(()),
    }
}

/// A fraction in [0, 1].
pub(crate) fn check_fraction(field: &'static str, v: f64) -> Result<(), FieldError> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("{v} is not between 0 and 1"),
        ))
    }
}

/// A parameter that must not be zero.
pub(crate) fn positive(field: &'static str, v: u64) -> Result<(), FieldError> {
    if v == 0 {
        Err(FieldError::new(field, "must be > 0".to_string()))
    } else {
        Ok(())
    }
}

/// D from the vPFS+ profiling (Section III-B).
pub const DEFAULT_DEPTH: u32 = 14;

/// The bandwidth a server shares out (`capped`) and bounds its peers'
/// service reports by when it is told neither its own capacity nor a
/// throttle's: a documented default (docs/deployment.md), which the
/// server notes at start when its policy uses it.
pub const DEFAULT_CAPACITY: Bandwidth = Bandwidth(100e6);

/// Declares [`PolicyConfig`] from one line per policy: its variant (whose
/// kebab-case name is the policy's `kind`) and its [`PolicySpec`].
macro_rules! policies {
    ($($(#[$doc:meta])* $variant:ident($spec:ty)),* $(,)?) => {
        /// Which policy a server runs, as written in a scenario or server config.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "kebab-case")]
        pub enum PolicyConfig {
            $($(#[$doc])* $variant($spec)),*
        }

        impl PolicyConfig {
            /// Every policy name accepted in configuration.
            pub const NAMES: &'static [&'static str] = &[$(<$spec as PolicySpec>::NAME),*];

            pub fn name(&self) -> &'static str {
                match self {
                    $(PolicyConfig::$variant(_) => <$spec as PolicySpec>::NAME),*
                }
            }

            /// The default configuration of the policy called `name`.
            pub fn from_name(name: &str) -> Option<PolicyConfig> {
                $(if name == <$spec as PolicySpec>::NAME {
                    return Some(PolicyConfig::$variant(<$spec>::default()));
                })*
                None
            }

            /// Fills in defaults that depend on the device: the coordination
            /// window for its class and, for `capped`, the capacity it shares out.
            pub fn resolve(&mut self, default_window: Time, device_capacity: Bandwidth) {
                match self {
                    $(PolicyConfig::$variant(p) => p.resolve(default_window, device_capacity)),*
                }
            }

            /// Builds the queue. Call [`validate`](Self::validate) first;
            /// unresolved defaults take `default_window`.
            pub fn build(&self, default_window: Time) -> Box<dyn RequestQueue> {
                match self {
                    $(PolicyConfig::$variant(p) => p.build(default_window)),*
                }
            }

            /// Checks parameter values; returns (field, problem) on error.
            pub fn validate(&self) -> Result<(), FieldError> {
                match self {
                    $(PolicyConfig::$variant(p) => p.validate()),*
                }
            }
        }
    };
}

policies! {
    /// Arrival order.
    Fifo(FifoConfig),
    /// PVFS2's default: a FIFO per object, objects served round-robin.
    PerObject(PerObjectConfig),
    /// Server-side I/O coordination: time window, then application id.
    Coordinated(CoordinatedConfig),
    /// Start-time fair queuing, one request in service at a time.
    Sfq(SfqConfig),
    /// SFQ(D): SFQ order, up to `depth` requests in service.
    SfqD(SfqDConfig),
    /// SFQ(D)+: size-aware slot costs and backfill.
    SfqDPlus(SfqDPlusConfig),
    /// Non-work-conserving SFQ(D): applications held to their share of `capacity`.
    Capped(CappedConfig),
    /// SFQ(D)+ on every server plus exchanges of per-application service.
    ServiceSync(ServiceSyncConfig),
    /// mClock (Ceph's dmClock): reservations, weights and limits per application.
    Dmclock(DmClockConfig),
    /// Lustre NRS CRR-N: clients (processes) take turns, a quantum each.
    CrrN(CrrNConfig),
    /// Lustre NRS ORR: objects take turns, each a batch in offset order.
    Orr(OrrConfig),
    /// ThemisIO: statistical tokens over job-, user-, size- or group-then-user-fair shares.
    Themisio(ThemisConfig),
    /// GIFT: applications throttled below their share get coupons, redeemed later for more.
    Gift(GiftConfig),
    /// AdapTBF: token buckets by job priority, unused tokens lent and returned.
    Adaptbf(AdapTbfConfig),
}

/// Default time windows from the coordination paper.
pub mod default_window {
    use crate::time::Time;
    pub const HDD: Time = Time::from_millis(1000);
    pub const SSD: Time = Time::from_millis(250);
}

#[cfg(test)]
mod conformance;
