//! A server's statistics as they cross the wire (`Stats` reply): per
//! application, per operation latency histograms, and service reports. The
//! server's recorder that fills them lives in concerto-server.

use serde::{Deserialize, Serialize};

use crate::Role;

/// Upper bounds of the latency buckets: 50 us doubling to about 6.5 s.
fn bucket_bounds() -> Vec<f64> {
    (0..18).map(|k| 50e-6 * f64::from(1u32 << k)).collect()
}

/// Requests a server's arrival log keeps: the latest ones, about 0.5 MiB.
pub const ARRIVAL_LOG: usize = 8192;

/// What kind of request arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArrivalOp {
    Read,
    Write,
    /// Making an object durable.
    Sync,
    /// Anything else: object sizes, truncates and removals on a data
    /// server, namespace operations on a metadata server.
    Metadata,
}

/// One request as it arrived at a server's queue, from its arrival log:
/// in what order requests reach the servers is what transfer orderings
/// and coordination are about, and this is where it can be seen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Arrival {
    /// Arrival order at this server, from 1.
    pub seq: u64,
    /// When, by the server machine's monotonic clock (`CLOCK_MONOTONIC`,
    /// nanoseconds): arrivals at the servers of one machine compare with
    /// each other (a wall clock, set apart in each server at its start,
    /// differed by milliseconds between servers here).
    pub at_ns: u64,
    pub app: u32,
    pub rank: u32,
    /// The issue time the client stamped (its clock, as sent): with the
    /// application and rank, it names the call the request is a piece of.
    pub issue_ns: u64,
    pub op: ArrivalOp,
    pub object: u64,
    /// The first object byte and how many bytes (over every extent).
    pub offset: u64,
    pub bytes: u64,
    /// The order in which the server's policy started it, from 1; 0 while
    /// it waits. Arrival and start orders side by side show what the
    /// policy did (CRR-N's turns, ORR's offset order).
    pub started: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AppStats {
    pub app: u32,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub data_ops: u64,
    pub metadata_ops: u64,
    /// Requests of this application waiting in the queue now.
    pub queued: u64,
    /// Time this application had requests waiting in the queue.
    pub waiting_s: f64,
    /// Time it had requests waiting while the storage had free slots: the
    /// policy held it back (a coordinated window, a cap, a share) rather
    /// than the storage being full.
    pub held_s: f64,
}

/// Time from arrival at the server to the reply, queueing included.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyHistogram {
    pub op: String,
    /// Upper bound of each bucket, seconds; one more bucket counts the rest.
    pub bounds_s: Vec<f64>,
    pub counts: Vec<u64>,
    pub sum_s: f64,
    pub count: u64,
}

impl LatencyHistogram {
    /// An empty histogram over the standard buckets.
    pub fn new(op: &str) -> LatencyHistogram {
        let bounds_s = bucket_bounds();
        let counts = vec![0; bounds_s.len() + 1];
        LatencyHistogram {
            op: op.into(),
            bounds_s,
            counts,
            sum_s: 0.0,
            count: 0,
        }
    }

    /// Counts one sample.
    pub fn record(&mut self, seconds: f64) {
        let i = self
            .bounds_s
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(self.bounds_s.len());
        self.counts[i] += 1;
        self.sum_s += seconds;
        self.count += 1;
    }

    /// The bound below which `q` of the samples fall (the bucket's upper bound).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        // Saturating: a histogram read from the wire may hold any counts.
        for (i, c) in self.counts.iter().enumerate() {
            seen = c.saturating_add(seen);
            if seen >= target {
                return Some(self.bounds_s.get(i).copied().unwrap_or(f64::INFINITY));
            }
        }
        None
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    pub address: String,
    pub roles: Vec<Role>,
    pub policy: String,
    /// The throttle's description, or `None` when the storage runs at full speed.
    pub throttle: Option<String>,
    pub uptime_s: f64,
    /// Requests waiting in the policy's queue.
    pub queued: u64,
    /// Requests on the storage now.
    pub in_flight: u64,
    /// The applications the server tracks: at most [`MAX_TRACKED_APPS`]
    /// idle ones, plus any with requests at the server.
    pub apps: Vec<AppStats>,
    /// What applications dropped from `apps` (idle the longest when the
    /// table was full) had been served: totals stay right on a long-lived
    /// server while the table stays bounded.
    pub retired: RetiredApps,
    pub latency: Vec<LatencyHistogram>,
    /// Service reports exchanged with the peers (total-service sharing).
    pub reports: ReportCounts,
    /// Connections authenticated since the server started.
    pub connections: ConnectionCounts,
    /// The data directory's file system, bytes.
    pub space_total: u64,
    pub space_free: u64,
    /// The coordinator's grants in force here (a data server): the
    /// applications doing I/O now and their priorities.
    pub grants: Vec<(u32, f64)>,
    /// What the coordinator role holds, on the server that has it.
    pub coordinator: Option<CoordinatorStats>,
}

/// The job-level arbiter's state: who does I/O, who waits, in which set,
/// for how long.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CoordinatorStats {
    /// The set rule in force (`set10`, `exclusive-fcfs`, ...).
    pub policy: String,
    /// Applications granted, in the order they were granted.
    pub granted: Vec<PhaseEntry>,
    /// Applications waiting, in request order within each set.
    pub waiting: Vec<PhaseEntry>,
    /// Grants and leases that lapsed since the server started.
    pub grants_total: u64,
    pub leases_expired: u64,
    /// Every job whose phases the coordinator remembers: how many it
    /// began, and its w_iter as measured between their starts.
    pub measured: Vec<MeasuredJob>,
}

/// A job's phases as the coordinator counted them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MeasuredJob {
    pub app: u32,
    pub phases: u64,
    pub w_iter_s: Option<f64>,
}

/// One application at the coordinator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseEntry {
    pub app: u32,
    pub set: i64,
    pub priority: f64,
    /// Since it was granted, or since it asked.
    pub for_s: f64,
    /// Its characteristic time as the coordinator measures it, seconds.
    pub w_iter_s: Option<f64>,
}

/// How many applications a server keeps statistics for by id. When a new
/// one arrives and the table is full, the application idle the longest
/// (nothing queued or in flight) is folded into [`RetiredApps`].
pub const MAX_TRACKED_APPS: usize = 4096;

/// The sum of the applications a server stopped tracking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RetiredApps {
    pub apps: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub data_ops: u64,
    pub metadata_ops: u64,
    pub waiting_s: f64,
    pub held_s: f64,
}

impl RetiredApps {
    /// Adds one application's counters.
    pub fn absorb(&mut self, a: &AppStats) {
        self.apps += 1;
        self.read_bytes += a.read_bytes;
        self.write_bytes += a.write_bytes;
        self.data_ops += a.data_ops;
        self.metadata_ops += a.metadata_ops;
        self.waiting_s += a.waiting_s;
        self.held_s += a.held_s;
    }

    /// The retired applications' sum as one pseudo-application (id 0).
    pub fn as_app(&self) -> AppStats {
        AppStats {
            app: 0,
            read_bytes: self.read_bytes,
            write_bytes: self.write_bytes,
            data_ops: self.data_ops,
            metadata_ops: self.metadata_ops,
            queued: 0,
            waiting_s: self.waiting_s,
            held_s: self.held_s,
        }
    }
}

/// Connections a server let in since it started: how many carry a MAC on
/// every frame ([`crate::integrity`]), how many it closed because a frame
/// failed its check, and how many it refused or cut off, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionCounts {
    pub authenticated: u64,
    pub with_integrity: u64,
    pub integrity_failures: u64,
    /// Refusals by cause, in [`REFUSAL_CAUSES`]' order.
    pub refused: [u64; REFUSAL_CAUSES.len()],
}

/// Why a server refuses a connection or cuts one off outside its
/// requests' answers: the causes its refusal counts and log lines name.
pub const REFUSAL_CAUSES: [&str; 7] = [
    "handshake pool full",
    "key refused",
    "protocol error",
    "address busy",
    "key revoked",
    "integrity failure",
    "frame stalled",
];

/// Service reports a server sent (each to every peer) and received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportCounts {
    pub sent: u64,
    pub received: u64,
    /// Bytes of peers' reports dropped as more than their servers could
    /// serve, and weights moved into the range this server knows.
    pub trimmed_bytes: u64,
    pub clamped_weights: u64,
}
