//! Per-server scheduling: the [`RequestQueue`] contract and its policies.
//!
//! The owner of a device (the simulator's server model, or a real server's
//! scheduling loop) drives a queue through the one [`Driver`]: it enqueues
//! requests as they arrive, asks for requests to start whenever it may,
//! reports completions, carries service reports between servers, and calls
//! again at `next_wakeup` for policies that wait.

mod capped;
mod coordinated;
mod driver;
mod fifo;
mod per_object;
mod qos;
mod service_sync;
mod sfq;

pub use capped::Capped;
pub use coordinated::{Coordinated, TimeSource};
pub use driver::{DeviceClass, DeviceDefaults, Driver, Ticket};
pub use fifo::Fifo;
pub use per_object::PerObjectFcfs;
pub use qos::{OpClass, QosRule, QosRules, QosStage};
pub use service_sync::ServiceSync;
pub use sfq::{Sfq, SfqParams, SlotCosts};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::request::{AppId, Request};
use crate::time::Time;
use crate::units::{Bandwidth, Bytes};

/// Service one server gave each application since its previous report:
/// `(application, bytes, weight)`, ordered by application. Servers running
/// [`ServiceSync`] exchange these to share total service across servers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceReport {
    pub served: Vec<(AppId, u64, f64)>,
}

impl ServiceReport {
    /// Adds a later report from the same server to this one: bytes add up
    /// per application and the later weight holds, so while weights stay
    /// the same one merged report charges a peer what the two would have.
    pub fn merge(&mut self, later: &ServiceReport) {
        let mut all: BTreeMap<AppId, (u64, f64)> = self
            .served
            .iter()
            .map(|&(app, b, w)| (app, (b, w)))
            .collect();
        for &(app, bytes, weight) in &later.served {
            let e = all.entry(app).or_insert((0, weight));
            e.0 = e.0.saturating_add(bytes);
            e.1 = weight;
        }
        self.served = all.into_iter().map(|(app, (b, w))| (app, b, w)).collect();
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

/// Which policy a server runs, as written in a scenario or server config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PolicyConfig {
    /// Arrival order. (Empty struct variants, not unit ones: serde's
    /// `deny_unknown_fields` refuses a stray key only in a struct variant.)
    Fifo {},
    /// PVFS2's default: a FIFO per object, objects served round-robin.
    PerObject {},
    /// Server-side I/O coordination: time window, then application id.
    Coordinated {
        /// Time window width; `None` means the device class default
        /// (1000 ms for HDD-class devices, 250 ms for SSD-class).
        #[serde(default)]
        window: Option<Time>,
        #[serde(default)]
        time_source: TimeSource,
    },
    /// Start-time fair queuing, one request in service at a time.
    Sfq {
        #[serde(default = "default_metadata_cost")]
        metadata_cost: Bytes,
    },
    /// SFQ(D): SFQ order, up to `depth` requests in service.
    SfqD {
        #[serde(default = "default_depth")]
        depth: u32,
        #[serde(default = "default_metadata_cost")]
        metadata_cost: Bytes,
    },
    /// SFQ(D)+: size-aware slot costs and backfill.
    SfqDPlus {
        #[serde(default = "default_depth")]
        depth: u32,
        /// Requests of at least this size are large.
        #[serde(default = "default_small_threshold")]
        small_threshold: Bytes,
        /// Slots a large request holds (L).
        #[serde(default = "default_large_slots")]
        large_slots: u32,
        /// Overrides the two above: rows of `{ size, slots }`.
        #[serde(default)]
        cost_table: Option<Vec<CostRow>>,
        #[serde(default = "default_true")]
        backfill: bool,
        #[serde(default = "default_metadata_cost")]
        metadata_cost: Bytes,
    },
    /// Non-work-conserving SFQ(D): applications are held to their share of `capacity`.
    Capped {
        #[serde(default = "default_depth")]
        depth: u32,
        capacity: Option<Bandwidth>,
        #[serde(default = "default_metadata_cost")]
        metadata_cost: Bytes,
    },
    /// SFQ(D)+ on every server plus exchanges of per-application service,
    /// so that total service across servers follows the weights.
    ServiceSync {
        #[serde(default = "default_depth")]
        depth: u32,
        /// Requests of at least this size are large.
        #[serde(default = "default_small_threshold")]
        small_threshold: Bytes,
        /// Slots a large request holds (L).
        #[serde(default = "default_large_slots")]
        large_slots: u32,
        /// Overrides the two above: rows of `{ size, slots }`.
        #[serde(default)]
        cost_table: Option<Vec<CostRow>>,
        #[serde(default = "default_true")]
        backfill: bool,
        #[serde(default = "default_metadata_cost")]
        metadata_cost: Bytes,
        /// Report after serving this many bytes since the last report.
        #[serde(default = "default_sync_threshold")]
        threshold: Bytes,
        /// Also report at least this often (when there is news).
        #[serde(default)]
        interval: Option<Time>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostRow {
    pub size: Bytes,
    pub slots: u32,
}

/// SFQ(D)+'s slot costs from its configuration: an explicit table when
/// given, else one slot below `small_threshold` and `large_slots` from it.
fn slot_costs(
    small_threshold: Bytes,
    large_slots: u32,
    table: &Option<Vec<CostRow>>,
) -> Result<SlotCosts, String> {
    match table {
        Some(rows) => SlotCosts::table(rows.iter().map(|r| (r.size.0, r.slots)).collect()),
        None => Ok(SlotCosts::two_class(small_threshold.0, large_slots)),
    }
}

/// SFQ(D)+'s queue parameters, shared by `sfq-d-plus` and `service-sync`.
fn sfq_d_plus_params(
    depth: u32,
    costs: SlotCosts,
    backfill: bool,
    metadata_cost: Bytes,
) -> SfqParams {
    SfqParams {
        metadata_cost: metadata_cost.0,
        ..SfqParams::sfq_d_plus(depth, costs, backfill)
    }
}

/// D from the vPFS+ profiling (Section III-B).
pub const DEFAULT_DEPTH: u32 = 14;

fn default_depth() -> u32 {
    DEFAULT_DEPTH
}
fn default_true() -> bool {
    true
}
fn default_metadata_cost() -> Bytes {
    SfqParams::DEFAULT_METADATA_COST
}
fn default_small_threshold() -> Bytes {
    SfqParams::DEFAULT_SMALL_THRESHOLD
}
fn default_large_slots() -> u32 {
    SfqParams::DEFAULT_LARGE_SLOTS
}
fn default_sync_threshold() -> Bytes {
    Bytes(4 << 20)
}

impl PolicyConfig {
    /// Every policy name accepted in configuration.
    pub const NAMES: &'static [&'static str] = &[
        "fifo",
        "per-object",
        "coordinated",
        "sfq",
        "sfq-d",
        "sfq-d-plus",
        "capped",
        "service-sync",
    ];

    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::Fifo {} => "fifo",
            PolicyConfig::PerObject {} => "per-object",
            PolicyConfig::Coordinated { .. } => "coordinated",
            PolicyConfig::Sfq { .. } => "sfq",
            PolicyConfig::SfqD { .. } => "sfq-d",
            PolicyConfig::SfqDPlus { .. } => "sfq-d-plus",
            PolicyConfig::Capped { .. } => "capped",
            PolicyConfig::ServiceSync { .. } => "service-sync",
        }
    }

    /// The default configuration of the policy called `name`.
    pub fn from_name(name: &str) -> Option<PolicyConfig> {
        Some(match name {
            "fifo" => PolicyConfig::Fifo {},
            "per-object" => PolicyConfig::PerObject {},
            "coordinated" => PolicyConfig::Coordinated {
                window: None,
                time_source: TimeSource::default(),
            },
            "sfq" => PolicyConfig::Sfq {
                metadata_cost: default_metadata_cost(),
            },
            "sfq-d" => PolicyConfig::SfqD {
                depth: DEFAULT_DEPTH,
                metadata_cost: default_metadata_cost(),
            },
            "sfq-d-plus" => PolicyConfig::SfqDPlus {
                depth: DEFAULT_DEPTH,
                small_threshold: default_small_threshold(),
                large_slots: default_large_slots(),
                cost_table: None,
                backfill: true,
                metadata_cost: default_metadata_cost(),
            },
            "capped" => PolicyConfig::Capped {
                depth: DEFAULT_DEPTH,
                capacity: None,
                metadata_cost: default_metadata_cost(),
            },
            "service-sync" => PolicyConfig::ServiceSync {
                depth: DEFAULT_DEPTH,
                small_threshold: default_small_threshold(),
                large_slots: default_large_slots(),
                cost_table: None,
                backfill: true,
                metadata_cost: default_metadata_cost(),
                threshold: default_sync_threshold(),
                interval: None,
            },
            _ => return None,
        })
    }

    /// Fills in defaults that depend on the device: the coordination window
    /// for its class and, for `capped`, the capacity it shares out.
    pub fn resolve(&mut self, default_window: Time, device_capacity: Bandwidth) {
        match self {
            PolicyConfig::Coordinated { window, .. } => {
                window.get_or_insert(default_window);
            }
            PolicyConfig::Capped { capacity, .. } => {
                capacity.get_or_insert(device_capacity);
            }
            _ => {}
        }
    }

    /// Builds the queue. Call [`validate`](Self::validate) first; unresolved
    /// defaults take `default_window`, and an invalid cost table falls back
    /// to unit costs rather than panicking.
    pub fn build(&self, default_window: Time) -> Box<dyn RequestQueue> {
        let costs = |t: &Bytes, l: &u32, table: &Option<Vec<CostRow>>| {
            slot_costs(*t, *l, table).unwrap_or_else(|_| SlotCosts::unit())
        };
        match self {
            PolicyConfig::Fifo {} => Box::new(Fifo::new()),
            PolicyConfig::PerObject {} => Box::new(PerObjectFcfs::new()),
            PolicyConfig::Coordinated {
                window,
                time_source,
            } => Box::new(Coordinated::new(
                window.unwrap_or(default_window),
                *time_source,
            )),
            PolicyConfig::Sfq { metadata_cost } => Box::new(Sfq::new(
                "sfq",
                SfqParams {
                    metadata_cost: metadata_cost.0,
                    ..SfqParams::sfq()
                },
            )),
            PolicyConfig::SfqD {
                depth,
                metadata_cost,
            } => Box::new(Sfq::new(
                "sfq-d",
                SfqParams {
                    metadata_cost: metadata_cost.0,
                    ..SfqParams::sfq_d(*depth)
                },
            )),
            PolicyConfig::SfqDPlus {
                depth,
                small_threshold,
                large_slots,
                cost_table,
                backfill,
                metadata_cost,
            } => {
                let c = costs(small_threshold, large_slots, cost_table);
                Box::new(Sfq::new(
                    "sfq-d-plus",
                    sfq_d_plus_params(*depth, c, *backfill, *metadata_cost),
                ))
            }
            PolicyConfig::Capped {
                depth,
                capacity,
                metadata_cost,
            } => Box::new(Capped::new(
                capacity.unwrap_or(Bandwidth(100e6)),
                *depth,
                metadata_cost.0,
            )),
            PolicyConfig::ServiceSync {
                depth,
                small_threshold,
                large_slots,
                cost_table,
                backfill,
                metadata_cost,
                threshold,
                interval,
            } => {
                let c = costs(small_threshold, large_slots, cost_table);
                Box::new(ServiceSync::new(
                    sfq_d_plus_params(*depth, c, *backfill, *metadata_cost),
                    threshold.0,
                    *interval,
                ))
            }
        }
    }

    /// Checks parameter values; returns (field, problem) on error.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let positive = |field: &'static str, v: u64| {
            if v == 0 {
                Err((field, "must be > 0".to_string()))
            } else {
                Ok(())
            }
        };
        let check_costs = |t: &Bytes,
                           l: &u32,
                           table: &Option<Vec<CostRow>>|
         -> Result<(), (&'static str, String)> {
            positive("small_threshold", t.0)?;
            positive("large_slots", *l as u64)?;
            slot_costs(*t, *l, table)
                .map(|_| ())
                .map_err(|m| ("cost_table", m))
        };
        match self {
            PolicyConfig::Fifo {} | PolicyConfig::PerObject {} => Ok(()),
            PolicyConfig::Coordinated { window, .. } => match window {
                Some(w) if w.is_zero() => Err(("window", "must be > 0".into())),
                _ => Ok(()),
            },
            PolicyConfig::Sfq { metadata_cost } => positive("metadata_cost", metadata_cost.0),
            PolicyConfig::SfqD {
                depth,
                metadata_cost,
            } => {
                positive("depth", *depth as u64)?;
                positive("metadata_cost", metadata_cost.0)
            }
            PolicyConfig::SfqDPlus {
                depth,
                small_threshold,
                large_slots,
                cost_table,
                metadata_cost,
                ..
            } => {
                positive("depth", *depth as u64)?;
                positive("metadata_cost", metadata_cost.0)?;
                check_costs(small_threshold, large_slots, cost_table)
            }
            PolicyConfig::Capped {
                depth,
                capacity,
                metadata_cost,
            } => {
                positive("depth", *depth as u64)?;
                positive("metadata_cost", metadata_cost.0)?;
                match capacity {
                    Some(c) if !(c.0.is_finite() && c.0 > 0.0) => {
                        Err(("capacity", "must be > 0".into()))
                    }
                    _ => Ok(()),
                }
            }
            PolicyConfig::ServiceSync {
                depth,
                small_threshold,
                large_slots,
                cost_table,
                metadata_cost,
                threshold,
                interval,
                ..
            } => {
                positive("depth", *depth as u64)?;
                positive("metadata_cost", metadata_cost.0)?;
                positive("threshold", threshold.0)?;
                if interval.is_some_and(|i| i.is_zero()) {
                    return Err(("interval", "must be > 0".into()));
                }
                check_costs(small_threshold, large_slots, cost_table)
            }
        }
    }
}

/// Default time windows from the coordination paper.
pub mod default_window {
    use crate::time::Time;
    pub const HDD: Time = Time::from_millis(1000);
    pub const SSD: Time = Time::from_millis(250);
}

#[cfg(test)]
mod conformance;
