//! Per-server scheduling: the [`RequestQueue`] contract and its policies.
//!
//! The owner of a device (the simulator's server model, or a real server's
//! scheduling loop) drives a queue: it enqueues requests as they arrive,
//! asks for requests to start whenever slots are free, reports completions,
//! and wakes the queue up at `next_wakeup` for policies that wait.

mod coordinated;
mod fifo;
mod per_object;

pub use coordinated::{Coordinated, TimeSource};
pub use fifo::Fifo;
pub use per_object::PerObjectFcfs;

use serde::{Deserialize, Serialize};

use crate::request::Request;
use crate::time::Time;

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
    /// Arrival order.
    Fifo,
    /// PVFS2's default: a FIFO per object, objects served round-robin.
    PerObject,
    /// Server-side I/O coordination: time window, then application id.
    Coordinated {
        /// Time window width; `None` means the device class default
        /// (1000 ms for HDD-class devices, 250 ms for SSD-class).
        #[serde(default)]
        window: Option<Time>,
        #[serde(default)]
        time_source: TimeSource,
    },
}

impl PolicyConfig {
    /// Every policy name accepted in configuration.
    pub const NAMES: &'static [&'static str] = &["fifo", "per-object", "coordinated"];

    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::Fifo => "fifo",
            PolicyConfig::PerObject => "per-object",
            PolicyConfig::Coordinated { .. } => "coordinated",
        }
    }

    /// The default configuration of the policy called `name`.
    pub fn from_name(name: &str) -> Option<PolicyConfig> {
        Some(match name {
            "fifo" => PolicyConfig::Fifo,
            "per-object" => PolicyConfig::PerObject,
            "coordinated" => PolicyConfig::Coordinated { window: None, time_source: TimeSource::default() },
            _ => return None,
        })
    }

    /// Fills in defaults that depend on the device class.
    pub fn resolve(&mut self, default_window: Time) {
        if let PolicyConfig::Coordinated { window, .. } = self {
            window.get_or_insert(default_window);
        }
    }

    /// Builds the queue. Unresolved windows take `default_window`.
    pub fn build(&self, default_window: Time) -> Box<dyn RequestQueue> {
        match self {
            PolicyConfig::Fifo => Box::new(Fifo::new()),
            PolicyConfig::PerObject => Box::new(PerObjectFcfs::new()),
            PolicyConfig::Coordinated { window, time_source } => {
                Box::new(Coordinated::new(window.unwrap_or(default_window), *time_source))
            }
        }
    }

    /// Checks parameter values; returns (field, problem) on error.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if let PolicyConfig::Coordinated { window: Some(w), .. } = self {
            if w.is_zero() {
                return Err(("window", "must be > 0".into()));
            }
        }
        Ok(())
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
