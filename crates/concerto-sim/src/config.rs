//! Scenario files: the TOML a user writes, its defaults, `--set` overrides,
//! and validation whose errors name the key (`apps[2].request_size: must be > 0`).
//!
//! Every key is documented in `docs/configuration.md`; keep the two in step.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use concerto_core::client::collective::patterns::Pattern as AccessPattern;
use concerto_core::client::collective::PlannerChoice;
use concerto_core::client::ordering::Ordering;
use concerto_core::emulation::EmulationConfig;
use concerto_core::server::{DeviceClass, DeviceDefaults, QosRules};
use concerto_core::units::{Bandwidth, Bytes};
use concerto_core::{MetaOp, PolicyConfig, Time};

/// A configuration problem, with the key path it concerns.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    /// A bad value: its key path, and its line and column when the text holds it.
    #[error("{}{path}: {message}", position.map_or(String::new(), |(l, c)| format!("line {l}, column {c}: ")))]
    Invalid {
        path: String,
        message: String,
        position: Option<(usize, usize)>,
    },
    #[error("{0}")]
    Syntax(String),
}

/// Whether key path `inner` is `outer` or lies inside it (`a.b` in `a`, `a[0]` in `a`).
fn within(outer: &str, inner: &str) -> bool {
    inner == outer
        || inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with(['.', '[']))
}

impl ConfigError {
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: path.into(),
            message: message.into(),
            position: None,
        }
    }

    /// Points a bad value's error at where `text` (the scenario, found at
    /// `table` if given) writes it; a value an override set says so instead.
    /// An unknown key is pointed at itself, not at its table: when an
    /// override changed the table (`--set policy.kind=...` under a file's
    /// `window`), the key still came from the file, and the error names
    /// both.
    pub(crate) fn placed(
        self,
        text: &str,
        table: Option<&str>,
        overrides: &[String],
    ) -> ConfigError {
        let ConfigError::Invalid {
            path,
            message,
            position: None,
        } = self
        else {
            return self;
        };
        // The override that set the value, a table above it, or a key inside it.
        let set_by_override = |key: &str| {
            overrides
                .iter()
                .filter_map(|o| o.split_once('=').map(|(p, _)| p.trim()))
                .find(|p| within(p, key) || within(key, p))
        };
        let unknown_key = concerto_toml::unknown_key(&path, &message);
        let message = match set_by_override(&path) {
            None => message,
            // The table came from an override, the unknown key in it from the file.
            Some(set)
                if unknown_key
                    .as_deref()
                    .is_some_and(|k| set_by_override(k).is_none()) =>
            {
                format!("{message} (with {set} set by --set)")
            }
            Some(_) => {
                return ConfigError::Invalid {
                    path,
                    message: format!("{message} (as set by --set)"),
                    position: None,
                }
            }
        };
        let full = match table {
            Some(t) => format!("{t}.{path}"),
            None => path.clone(),
        };
        let position = concerto_toml::locate_unknown_key(text, &full, &message)
            .or_else(|| concerto_toml::locate(text, &full));
        ConfigError::Invalid {
            path,
            message,
            position,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub cluster: ClusterConfig,
    #[serde(default = "default_policy")]
    pub policy: PolicyConfig,
    #[serde(default)]
    pub app_ids: AppIdRule,
    /// The administrator's QoS rules (weights, and rates as Lustre's TBF), on every server, in
    /// front of the policy.
    #[serde(default, skip_serializing_if = "no_rules")]
    pub qos: QosRules,
    pub apps: Vec<AppSpec>,
    /// Job-level arbitration (IO-SETS): an arbiter gates each
    /// application's operations (its I/O phases) and its priority becomes
    /// the weight of the phase's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobConfig>,
    #[serde(default)]
    pub output: OutputConfig,
}

/// `[job]`: the same arbiter as the fluid mode's, in the request-level
/// simulator. Each operation of an application (its processes' calls up
/// to the barrier) is one I/O phase: it starts when the arbiter grants it,
/// and its requests carry the application's weight times the granted
/// priority, so the SFQ family shares the servers by priority.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobConfig {
    /// The set rule (`kind = "set10"`, ...; as `--rule` takes it).
    pub rule: concerto_core::job::SetRule,
    /// The platform bandwidth B the window metrics take an I/O phase's
    /// time alone from (bytes / B).
    #[serde(default)]
    pub bandwidth: Option<Bandwidth>,
    /// Measure utilization, stretch and I/O slowdown over `[begin, end]`
    /// seconds (needs `bandwidth`).
    #[serde(default)]
    pub window_s: Option<[f64; 2]>,
}

fn default_name() -> String {
    "scenario".into()
}
fn default_seed() -> u64 {
    1
}
fn default_policy() -> PolicyConfig {
    PolicyConfig::Fifo {}
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Number of data servers.
    pub servers: u32,
    #[serde(
        default = "default_stripe_unit",
        deserialize_with = "concerto_core::units::deserialize_stripe_unit"
    )]
    pub stripe_unit: Bytes,
    /// Servers per file; defaults to all of them.
    #[serde(default)]
    pub stripe_count: Option<u32>,
    #[serde(default)]
    pub placement: Placement,
    /// Requests in service at once on each server's device (D).
    #[serde(default = "default_depth")]
    pub depth: u32,
    /// An idle server takes up arriving requests in batches: the first
    /// arrival is dispatched this long after it came, together with all that
    /// arrived meanwhile (a server loop polling its network). Zero dispatches
    /// at once.
    #[serde(default)]
    pub poll_interval: Time,
    pub device: DeviceConfig,
    #[serde(default)]
    pub network: NetworkConfig,
    #[serde(default)]
    pub metadata: MetadataConfig,
}

fn default_stripe_unit() -> Bytes {
    Bytes(64 * 1024)
}
fn default_depth() -> u32 {
    1
}

impl ClusterConfig {
    pub fn stripe_count(&self) -> u32 {
        self.stripe_count.unwrap_or(self.servers)
    }

    /// Number of metadata servers.
    pub fn metadata_servers(&self) -> u32 {
        match self.metadata.placement {
            MetadataPlacement::CoLocated => self.metadata.servers.unwrap_or(self.servers),
            MetadataPlacement::Dedicated => self.metadata.servers.unwrap_or(1),
        }
    }
}

/// Where the metadata service runs and what its operations cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetadataConfig {
    pub placement: MetadataPlacement,
    /// Metadata servers: with `co-located`, how many of the data servers
    /// (spread evenly) also serve metadata (default: all); with `dedicated`,
    /// how many extra servers there are (default 1).
    pub servers: Option<u32>,
    /// Dedicated servers only: operations in service at once (default: cluster.depth).
    pub depth: Option<u32>,
    /// Dedicated servers only: their storage (default: cluster.device).
    pub device: Option<DeviceConfig>,
    /// Every data read is preceded by a getattr to the file's metadata
    /// server, as the PVFS2 client protocol does.
    pub getattr_before_read: bool,
    /// Time each operation keeps the metadata server's storage busy.
    pub costs: MetaCosts,
}

impl Default for MetadataConfig {
    fn default() -> MetadataConfig {
        MetadataConfig {
            placement: MetadataPlacement::CoLocated,
            servers: None,
            depth: None,
            device: None,
            getattr_before_read: false,
            costs: MetaCosts::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetadataPlacement {
    /// Metadata servers run on data servers and share their queue and
    /// storage (the vPFS+ setup): metadata and data compete under one policy.
    #[default]
    CoLocated,
    /// Separate servers, each with its own queue and storage.
    Dedicated,
}

/// Service time of each metadata operation on the metadata server's storage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetaCosts {
    pub mkdir: Time,
    pub create: Time,
    pub getattr: Time,
    pub readdir: Time,
    pub remove: Time,
    pub rmdir: Time,
    pub rename: Time,
    pub setattr: Time,
}

impl Default for MetaCosts {
    fn default() -> MetaCosts {
        // The order of a small database transaction on flash: lookups are
        // cheap, operations that add or drop a directory entry cost more.
        MetaCosts {
            mkdir: Time::from_micros(600),
            create: Time::from_micros(500),
            getattr: Time::from_micros(100),
            readdir: Time::from_micros(300),
            remove: Time::from_micros(500),
            rmdir: Time::from_micros(600),
            rename: Time::from_micros(600),
            setattr: Time::from_micros(300),
        }
    }
}

impl MetaCosts {
    pub fn of(&self, op: MetaOp) -> Time {
        match op {
            MetaOp::Mkdir => self.mkdir,
            MetaOp::Create => self.create,
            MetaOp::Getattr => self.getattr,
            MetaOp::Readdir => self.readdir,
            MetaOp::Remove => self.remove,
            MetaOp::Rmdir => self.rmdir,
            MetaOp::Rename => self.rename,
            MetaOp::Setattr => self.setattr,
        }
    }
}

/// Which server holds a file's first stripe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// File `i` starts on server `i mod servers`.
    #[default]
    RoundRobin,
    /// A seeded random first server per file.
    Random,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DeviceConfig {
    Fixed(FixedConfig),
    Hdd(HddConfig),
    Ssd(SsdConfig),
    /// The device class the real servers' throttle emulates (bandwidth,
    /// latency, seek penalty, channels), so a real run can be simulated
    /// against the same model.
    Emulated(EmulationConfig),
}

impl DeviceConfig {
    /// The device class policy defaults follow (the coordination window).
    pub fn class(&self) -> DeviceClass {
        match self {
            DeviceConfig::Ssd(_) => DeviceClass::Flash,
            DeviceConfig::Emulated(e) => e.class(),
            DeviceConfig::Fixed(_) | DeviceConfig::Hdd(_) => DeviceClass::Rotational,
        }
    }

    /// The streaming bandwidth the device is rated at: what `capped` shares
    /// out when the scenario does not say. A fixed-time device has none.
    pub fn nominal_bandwidth(&self) -> Option<Bandwidth> {
        match self {
            DeviceConfig::Fixed(_) => None,
            DeviceConfig::Hdd(h) => Some(h.transfer_rate),
            DeviceConfig::Ssd(s) => Some(s.bandwidth),
            DeviceConfig::Emulated(e) => Some(e.bandwidth),
        }
    }
}

/// Every request takes the same time, one at a time: the analytical model's device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedConfig {
    pub service_time: Time,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HddConfig {
    pub rpm: f64,
    pub track_to_track: Time,
    pub full_stroke: Time,
    pub transfer_rate: Bandwidth,
    pub capacity: Bytes,
    /// An access starting less than this far past the previous one's end
    /// streams on without a seek (read-ahead / sequential detection).
    pub read_ahead: Bytes,
    /// Distance on disk between consecutive objects.
    pub object_spacing: Bytes,
    /// Where a file's object sits on each server's disk.
    #[serde(skip_serializing_if = "ObjectPlacement::is_spaced")]
    pub object_placement: ObjectPlacement,
    /// With random placement: objects sit in the first this many bytes of
    /// the disk (a young file system allocates near its start); default:
    /// the whole disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_span: Option<Bytes>,
    /// How the disk orders what the server has dispatched to it.
    #[serde(skip_serializing_if = "DiskScheduler::is_none")]
    pub scheduler: DiskScheduler,
    /// With the elevator: a request that has waited this long on the disk
    /// is served next, wherever it is.
    #[serde(skip_serializing_if = "is_default_deadline")]
    pub deadline: Time,
    /// The server's processing of each request before the disk moves
    /// (decoding a list-I/O request, mapping it to blocks).
    #[serde(skip_serializing_if = "is_zero_time")]
    pub request_overhead: Time,
    /// The server's page cache for reads: this many bytes of what the disk
    /// read last stay in memory, and a read of data all in it does not
    /// touch the disk (it waits only for the read that brings the data in).
    /// 0: no cache.
    #[serde(skip_serializing_if = "is_zero_bytes")]
    pub cache: Bytes,
    /// The operating system's read-ahead: a plain read that misses the
    /// cache makes the disk read at least this many bytes from its start,
    /// and the cache keeps them, so the next reads of a sequential stream
    /// are served from memory even when other streams' reads come between.
    /// 0: the disk reads what was asked. Needs a `cache` at least this big.
    #[serde(skip_serializing_if = "is_zero_bytes")]
    pub prefetch: Bytes,
}

fn is_zero_time(t: &Time) -> bool {
    t.is_zero()
}

fn is_zero_bytes(b: &Bytes) -> bool {
    b.0 == 0
}

fn no_rules(r: &QosRules) -> bool {
    r.rules.is_empty()
}

fn is_default_deadline(t: &Time) -> bool {
    *t == HddConfig::default().deadline
}

/// Where each file's object sits on a server's disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ObjectPlacement {
    /// File i's object at i × object_spacing, the same on every server.
    #[default]
    Spaced,
    /// Each object at its own position on each server (a multiple of
    /// object_spacing, drawn from the run's seed, the file and the
    /// server), so the servers' disks are independent.
    Random,
}

impl ObjectPlacement {
    fn is_spaced(&self) -> bool {
        *self == ObjectPlacement::Spaced
    }
}

/// The block layer below the server's queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiskScheduler {
    /// The disk serves requests in the order the server dispatched them.
    #[default]
    None,
    /// Of the requests dispatched and waiting, the disk serves next the one
    /// at the lowest address at or past its head, wrapping to the lowest
    /// (C-LOOK), unless one has waited `deadline`: then the oldest.
    Elevator,
}

impl DiskScheduler {
    fn is_none(&self) -> bool {
        *self == DiskScheduler::None
    }
}

impl Default for HddConfig {
    fn default() -> HddConfig {
        // A 7200 rpm SATA disk of the coordination paper's era.
        HddConfig {
            rpm: 7200.0,
            track_to_track: Time::from_micros(1000),
            full_stroke: Time::from_millis(15),
            transfer_rate: Bandwidth(100e6),
            capacity: Bytes(250_000_000_000),
            read_ahead: Bytes(512 * 1024),
            object_spacing: Bytes(1 << 30),
            object_placement: ObjectPlacement::Spaced,
            placement_span: None,
            scheduler: DiskScheduler::None,
            deadline: Time::from_millis(500),
            request_overhead: Time::ZERO,
            cache: Bytes(0),
            prefetch: Bytes(0),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SsdConfig {
    pub latency: Time,
    pub bandwidth: Bandwidth,
    /// Requests whose latencies overlap (internal channels).
    pub parallelism: u32,
    /// A device that loses throughput when overloaded (off by default:
    /// the channel moves data at `bandwidth` however many requests wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overload: Option<Overload>,
}

/// Throughput lost to overload: each transfer over the channel takes
/// `1 + loss * (n - after)` times as long when `n > after` requests are in
/// the device as it starts (a disk array that seeks between more streams
/// than it can keep sequential). Tried as the cause of the vPFS+ paper's
/// combined-throughput gain, and refuted by its BTIO results
/// (docs/reproductions.md, v5): not a measured property.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overload {
    /// Requests in the device the channel serves at full rate.
    pub after: u32,
    /// Fraction of a transfer's time added per request beyond `after`.
    pub loss: f64,
}

impl Default for SsdConfig {
    fn default() -> SsdConfig {
        SsdConfig {
            latency: Time::from_micros(60),
            bandwidth: Bandwidth(500e6),
            parallelism: 8,
            overload: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkConfig {
    pub latency: Time,
    /// Each message's latency gets a uniform random extra in `[0, jitter]`.
    pub jitter: Time,
    pub client_bandwidth: Bandwidth,
    pub server_bandwidth: Bandwidth,
    /// Bytes of request or reply header on the wire.
    pub header_bytes: Bytes,
    /// How NICs share the wire.
    #[serde(skip_serializing_if = "NetworkMode::is_queued")]
    pub mode: NetworkMode,
    /// A read's reply streams out while the disk reads, this far behind it
    /// (PVFS2's flow buffers): it ends no earlier than one buffer's transfer
    /// after the disk is done. Absent: the reply leaves once the whole
    /// request is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_buffer: Option<Bytes>,
    /// Incast (`queued` mode): a message that reaches a receiver whose
    /// switch port already holds more than `buffer` bytes for it is lost
    /// and arrives again after `timeout`. Absent: ports never drop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incast: Option<Incast>,
}

/// A switch port's buffer in front of each receiver and TCP's retransmission
/// timeout: many servers answering one client at once (or many clients
/// writing to one server) overflow the port, and a lost message is sent
/// again only after the timeout. Tried as the cause of coordination's
/// growth with the server count (docs/reproductions.md, c2b).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Incast {
    /// Bytes a port holds for its receiver beyond the one it is passing on.
    pub buffer: Bytes,
    /// How long a lost message takes to arrive again (TCP's minimum
    /// retransmission timeout, 200 ms in Linux).
    pub timeout: Time,
}

/// How a message uses the two NICs it crosses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// Each NIC serializes at its bandwidth on its own: the sender puts a
    /// message on the wire when its NIC is free, and the receiver takes
    /// messages in as they arrive, one after the other.
    #[default]
    Queued,
    /// A transfer holds the sender's and the receiver's NIC together for its
    /// whole length, at the slower of their bandwidths: every node does one
    /// transfer at a time (the model of Jain et al. that Clusterfile's
    /// scheduling assumes). A sender waits until the receiver is free.
    Exclusive,
    /// No network: a message takes no time and crosses no NIC. A request is
    /// in its server's queue the instant it is sent, in the order sent, and
    /// a reply is back the instant the server is done: the servers and
    /// their devices alone (the model of a disk-only simulator).
    Ideal,
}

impl NetworkMode {
    fn is_queued(&self) -> bool {
        *self == NetworkMode::Queued
    }
}

impl Default for NetworkConfig {
    fn default() -> NetworkConfig {
        NetworkConfig {
            latency: Time::from_micros(50),
            jitter: Time::from_micros(50),
            client_bandwidth: Bandwidth(1.25e9),
            server_bandwidth: Bandwidth(1.25e9),
            header_bytes: Bytes(256),
            mode: NetworkMode::Queued,
            flow_buffer: None,
            incast: None,
        }
    }
}

/// How applications get their ids (the coordination paper orders by them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AppIdRule {
    /// Seeded random ids in `[min, max]`, distinct (the paper draws from [0, 32767]).
    Random {
        #[serde(default)]
        min: u32,
        #[serde(default = "default_max_app_id")]
        max: u32,
    },
    /// `start`, `start + 1`, ... in the order applications are listed.
    Sequential {
        #[serde(default)]
        start: u32,
    },
    /// Every `[[apps]]` entry gives `app_id`; instances count up from it.
    Explicit,
}

fn default_max_app_id() -> u32 {
    32767
}

impl Default for AppIdRule {
    fn default() -> AppIdRule {
        AppIdRule::Random {
            min: 0,
            max: default_max_app_id(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// IOR: `request_size` per call, contiguous (segmented) or strided.
    Ior,
    /// PIO-bench sequential / simple-strided access (the same shapes as IOR).
    PioBench,
    /// MPI-TILE-IO: each process reads or writes one tile of a 2-D dataset.
    MpiTileIo,
    /// noncontig: a vector of small elements interleaved across processes.
    Noncontig,
    /// NPB BTIO: `requests` output steps writing the solution, then as many
    /// verification steps reading it back; each step moves `elements` cells
    /// of `element_size` per process, as tiny I/Os one at a time (subtype
    /// "simple") or aggregated by collective buffering into one I/O ("full").
    Btio,
    /// WRF-like: each call is `getattrs` getattr requests then one small
    /// I/O of `request_size` to the process's own (checkpoint) file.
    Wrf,
    /// md-test: phases mktestdir, create, write, readdir, read, close, rm,
    /// rmtestdir over `items` files per process in a directory per process;
    /// each phase is one call (a barrier between phases when `barrier`).
    MdTest,
    /// Explicit phases (a job-level workload): `phases` lists `[compute
    /// seconds, bytes]`; each call computes, then the processes write the
    /// bytes (an equal share each, contiguous, in requests of at most
    /// `request_size`, default 4 MiB) over the same region of one file.
    Phases,
    /// Collective I/O (resonant-io.txt): each call, every process asks for
    /// what the `access` pattern gives it, and the `collective` planner
    /// decides who sends which requests, in which order, and what the
    /// processes exchange over the network.
    Collective,
    /// An explicit request trace (`trace`, docs/workloads.md): each rank
    /// replays its own requests, one at a time, with no barriers.
    Trace,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataOp {
    #[default]
    Read,
    Write,
}

impl DataOp {
    /// The direction of a collective call that reads or writes.
    pub fn direction(self) -> concerto_core::client::collective::Direction {
        match self {
            DataOp::Read => concerto_core::client::collective::Direction::Read,
            DataOp::Write => concerto_core::client::collective::Direction::Write,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Each process owns a contiguous block and walks it (IOR segmented,
    /// PIO-bench "sequential").
    #[default]
    Contiguous,
    /// Call `k` of process `r` lands at `(k * processes + r) * request_size`
    /// (IOR strided, PIO-bench "simple strided").
    Strided,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BtioSubtype {
    /// Independent I/O: every cell is its own small request.
    #[default]
    Simple,
    /// Collective buffering: a step's cells go out as one request.
    Full,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileMode {
    /// N-to-1: all processes share one file.
    #[default]
    Shared,
    /// N-to-N: a file per process.
    PerProcess,
}

/// One kind of application; `instances` copies of it run concurrently.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default = "one")]
    pub instances: u32,
    #[serde(default = "one")]
    pub processes: u32,
    pub workload: WorkloadKind,
    #[serde(default)]
    pub op: DataOp,
    /// Operations (I/O calls) per process.
    #[serde(default = "one")]
    pub requests: u32,
    /// Bytes per call (ior, pio-bench).
    #[serde(default)]
    pub request_size: Option<Bytes>,
    #[serde(default)]
    pub pattern: Option<Pattern>,
    #[serde(default)]
    pub file: Option<FileMode>,
    /// Process grid `[px, py]` (mpi-tile-io); `px * py` must equal `processes`.
    #[serde(default)]
    pub grid: Option<[u32; 2]>,
    /// Tile size in elements `[x, y]` (mpi-tile-io).
    #[serde(default)]
    pub tile: Option<[u32; 2]>,
    /// Element size (mpi-tile-io, noncontig).
    #[serde(default)]
    pub element_size: Option<Bytes>,
    /// Elements per call (noncontig; btio simple: I/Os per step).
    #[serde(default)]
    pub elements: Option<u32>,
    /// Getattr requests before each I/O (wrf).
    #[serde(default)]
    pub getattrs: Option<u32>,
    /// Files per process (md-test).
    #[serde(default)]
    pub items: Option<u32>,
    /// BTIO subtype (btio).
    #[serde(default)]
    pub subtype: Option<BtioSubtype>,
    /// A barrier across the application's processes after every call, so
    /// each call is one synchronized operation.
    #[serde(default = "yes")]
    pub barrier: bool,
    /// Time between an operation's completion and the next call.
    #[serde(default)]
    pub compute_time: Time,
    /// When the application issues its first call.
    #[serde(default)]
    pub start: Time,
    #[serde(default)]
    pub app_id: Option<u32>,
    /// Proportional-share weight carried by every request (SFQ family).
    #[serde(default = "unit_weight")]
    pub weight: f64,
    /// The user (numeric id) the application runs as, which QoS rules can
    /// match; none when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<u32>,
    /// Servers each of this application's files is striped over (default: cluster.stripe_count).
    #[serde(default)]
    pub stripe_count: Option<u32>,
    /// Server holding the first stripe of this application's files (default: cluster.placement).
    #[serde(default)]
    pub first_server: Option<u32>,
    /// Workload "phases": `[compute seconds, bytes]` per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Vec<[f64; 2]>>,
    /// What a job-level arbiter knows of the application: its
    /// characteristic time (what `set10` maps) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_iter: Option<Time>,
    /// ... and the group it belongs to with the group's characteristic
    /// time (what `clairvoyant` maps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_w_iter: Option<Time>,
    /// mpi-tile-io: with `planes`, the dataset is 3-D, `planes` planes of
    /// the 2-D one, and each process holds its tile in every plane (BTIO's
    /// view: strides nested two deep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planes: Option<u32>,
    /// Clusterfile's client-side ordering: each data access is split into
    /// blocks of at most `schedule_block` bytes of one server's data, sent
    /// one at a time in this order (see `concerto_core::client::ordering`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering: Option<Ordering>,
    /// The schedule block `b` (default: the stripe unit); needs `ordering`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_block: Option<Bytes>,
    /// Collective I/O: what each process asks for per call, as a pattern
    /// of `concerto_core::client::collective::patterns`
    /// (`"demo:segment=64KiB"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
    /// Collective I/O: the planner and its options (default: two-phase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<PlannerChoice>,
    /// IOR's own layout (ior only; IOR's -b): each call is then one whole
    /// IOR operation, in which every process moves `segments` blocks of
    /// this size in transfers of `request_size` (-t), one at a time; block
    /// `s` of process `r` sits at `(s · processes + r) · block_size` of the
    /// shared file, or at `s · block_size` of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<Bytes>,
    /// With `block_size`: IOR's segment count (-s, default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<u32>,
    /// With `block_size`: the operations, in order, a barrier between
    /// (IOR's -w and -r; default `[op]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Vec<DataOp>>,
    /// md-test: the phases to run, in order (default: all eight, as
    /// `workload::MDTEST_PHASES`); mdtest's -C, -T, -E and -r choose some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md_steps: Option<Vec<MdStep>>,
    /// Workload "trace": the trace file (JSON, docs/workloads.md), a path
    /// absolute or relative to the directory the simulator runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// Workload "trace": which of the file's applications (default: its only one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_app: Option<String>,
    /// The trace's application, read when the scenario is loaded.
    #[serde(skip)]
    pub trace_data: Option<std::sync::Arc<crate::trace::TraceApp>>,
}

/// One md-test phase: every process does it for each of its `items` files
/// (or its directory), then the processes meet at a barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MdStep {
    /// Make the process's directory.
    Mktestdir,
    /// Create the files.
    Create,
    /// Write `request_size` bytes to each file (nothing without it).
    Write,
    /// List the directory.
    Readdir,
    /// Read `request_size` bytes of each file (a getattr without it).
    Read,
    /// A getattr of each file (mdtest's stat phase).
    Stat,
    /// PVFS2 has no close request: the phase only synchronizes.
    Close,
    /// Remove the files.
    Rm,
    /// Remove the directory.
    Rmtestdir,
}

fn unit_weight() -> f64 {
    1.0
}

fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}

impl AppSpec {
    pub fn label(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| self.workload_name().to_string())
    }

    pub fn workload_name(&self) -> &'static str {
        match self.workload {
            WorkloadKind::Ior => "ior",
            WorkloadKind::PioBench => "pio-bench",
            WorkloadKind::MpiTileIo => "mpi-tile-io",
            WorkloadKind::Noncontig => "noncontig",
            WorkloadKind::Btio => "btio",
            WorkloadKind::Wrf => "wrf",
            WorkloadKind::MdTest => "md-test",
            WorkloadKind::Phases => "phases",
            WorkloadKind::Collective => "collective",
            WorkloadKind::Trace => "trace",
        }
    }

    /// The compute time before call `call`: after the previous call (or the
    /// start), `compute_time` between calls, or the phase's own.
    /// When process `rank` may issue call `call`, its previous call having
    /// completed (or the application started) at `done`: after the
    /// compute time, and for a trace no earlier than its recorded time.
    pub fn issue_time(&self, rank: u32, call: u32, done: Time) -> Time {
        let traced = self
            .trace_data
            .as_ref()
            .and_then(|t| t.ranks.get(rank as usize)?.get(call as usize));
        match traced {
            Some(q) => q.issue_at(self.start, done),
            None if call == 0 => done,
            None => done + self.compute_before(call),
        }
    }

    /// Calls process `rank` makes (a trace's ranks differ).
    pub fn calls_of(&self, rank: u32) -> u32 {
        match &self.trace_data {
            Some(t) => t.ranks.get(rank as usize).map_or(0, |r| r.len() as u32),
            None => self.calls(),
        }
    }

    pub fn compute_before(&self, call: u32) -> Time {
        match &self.phases {
            Some(p) => Time::from_secs_f64(p[call as usize][0]),
            None if call == 0 => Time::ZERO,
            None => self.compute_time,
        }
    }

    /// The bytes all of one instance's processes move in call `call`.
    pub fn bytes_of_call(&self, call: u32) -> u64 {
        match &self.phases {
            Some(p) => phase_bytes(p[call as usize][1]),
            None if self.workload == WorkloadKind::Collective => {
                self.access_pattern().map_or(0, |p| {
                    p.accesses(self.processes, call as u64)
                        .iter()
                        .map(|a| a.iter().map(|e| e.len).sum::<u64>())
                        .sum()
                })
            }
            None => self.bytes_per_call() * self.processes as u64,
        }
    }

    /// A collective workload's access pattern (validated: `access` parses).
    pub fn access_pattern(&self) -> Option<AccessPattern> {
        AccessPattern::parse(self.access.as_deref()?).ok()
    }

    /// What the application tells a job-level arbiter.
    pub fn phase_info(&self) -> concerto_core::job::PhaseInfo {
        concerto_core::job::PhaseInfo {
            w_iter: self.w_iter,
            group: self
                .group
                .map(|g| (g, self.group_w_iter.unwrap_or(Time::ZERO))),
        }
    }

    /// md-test's phases, in order.
    pub fn md_steps(&self) -> &[MdStep] {
        self.md_steps
            .as_deref()
            .unwrap_or(&crate::workload::MDTEST_PHASES)
    }

    /// The operations of an IOR-layout application, in order.
    pub fn ior_operations(&self) -> Vec<DataOp> {
        self.operations.clone().unwrap_or_else(|| vec![self.op])
    }

    /// Calls each process makes (md-test: one per phase; btio: output then
    /// verification; ior with `block_size`: one per operation).
    pub fn calls(&self) -> u32 {
        match self.workload {
            WorkloadKind::MdTest => self.md_steps().len() as u32,
            WorkloadKind::Btio => self.requests.saturating_mul(2),
            WorkloadKind::Ior if self.block_size.is_some() => self.ior_operations().len() as u32,
            WorkloadKind::Trace => self.trace_data.as_ref().map_or(0, |t| {
                t.ranks.iter().map(Vec::len).max().unwrap_or(0) as u32
            }),
            WorkloadKind::Phases => self.phases.as_ref().map_or(0, |p| p.len() as u32),
            _ => self.requests,
        }
    }

    /// Bytes one process moves per call (md-test: in its write phase).
    pub fn bytes_per_call(&self) -> u64 {
        let elements = || self.elements.unwrap_or(0) as u64 * self.element_size.map_or(0, |b| b.0);
        match self.workload {
            WorkloadKind::Ior if self.block_size.is_some() => {
                self.block_size.map_or(0, |b| b.0) * self.segments.unwrap_or(1) as u64
            }
            WorkloadKind::Ior | WorkloadKind::PioBench | WorkloadKind::Wrf => {
                self.request_size.map_or(0, |b| b.0)
            }
            WorkloadKind::Btio => elements(),
            WorkloadKind::MdTest => {
                self.request_size.map_or(0, |b| b.0) * self.items.unwrap_or(0) as u64
            }
            WorkloadKind::MpiTileIo => {
                let [x, y] = self.tile.unwrap_or([0, 0]);
                x as u64
                    * y as u64
                    * self.planes.unwrap_or(1) as u64
                    * self.element_size.map_or(0, |b| b.0)
            }
            WorkloadKind::Noncontig => elements(),
            // The first call's bytes, per process.
            WorkloadKind::Collective => self.bytes_of_call(0) / self.processes.max(1) as u64,
            // The largest request.
            WorkloadKind::Trace => self.trace_data.as_ref().map_or(0, |t| {
                t.ranks
                    .iter()
                    .flatten()
                    .map(|q| q.length)
                    .max()
                    .unwrap_or(0)
            }),
            // The largest phase's share per process.
            WorkloadKind::Phases => self.phases.as_ref().map_or(0, |p| {
                p.iter().map(|x| phase_bytes(x[1])).max().unwrap_or(0)
                    / self.processes.max(1) as u64
            }),
        }
    }
}

/// A phase's bytes as a whole number (the file gives them as a number, as
/// the fluid mode's workload files do).
pub fn phase_bytes(bytes: f64) -> u64 {
    bytes.round() as u64
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    /// Keep a record of every request for CSV output.
    #[serde(default)]
    pub detail: bool,
    /// Width of the bins of each application's service timeline (bytes and
    /// requests served per bin); no timeline when absent.
    #[serde(default)]
    pub timeline: Option<Time>,
    /// Also keep, on every server, each application's timeline there with
    /// the time it had requests waiting (needs `timeline`).
    #[serde(default)]
    pub server_timeline: bool,
}

/// Upper bound on simulated processes, so a typo cannot exhaust memory.
pub const MAX_PROCESSES: u64 = 1_000_000;
/// Upper bound on one md-test instance's files, for the same reason.
pub const MAX_FILES: u64 = 10_000_000;
/// Upper bound on the transfers of one IOR operation of one process: each
/// is a step held in memory while the operation runs.
pub const MAX_IOR_TRANSFERS: u64 = 1_000_000;

impl Scenario {
    /// Parses TOML text, applies `--set key.path=value` overrides, and validates.
    pub fn from_toml(text: &str, overrides: &[String]) -> Result<Scenario, ConfigError> {
        Scenario::from_toml_table(text, None, overrides)
    }

    /// As [`from_toml`](Self::from_toml), reading the scenario from the table
    /// at `table` (for experiment files that embed a scenario).
    pub fn from_toml_table(
        text: &str,
        table: Option<&str>,
        overrides: &[String],
    ) -> Result<Scenario, ConfigError> {
        Scenario::from_toml_table_warned(text, table, overrides).map(|(scenario, _)| scenario)
    }

    /// As [`from_toml_table`](Self::from_toml_table); with the scenario, a
    /// warning for each value that is valid but almost surely a mistake
    /// (see `concerto_core::traps`), placed as an error would be.
    pub fn from_toml_table_warned(
        text: &str,
        table: Option<&str>,
        overrides: &[String],
    ) -> Result<(Scenario, Vec<ConfigError>), ConfigError> {
        let mut doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            ConfigError::Syntax(format!(
                "invalid TOML: {}",
                concerto_toml::syntax_message(text, &e)
            ))
        })?;
        if let Some(key) = table {
            doc = match doc.remove(key) {
                Some(toml::Value::Table(t)) => t,
                Some(_) => return Err(ConfigError::at(key, "must be a table")),
                None => return Err(ConfigError::at(key, "missing table")),
            };
        }
        for o in overrides {
            crate::overrides::apply(&mut doc, o)?;
        }
        let placed = |e: ConfigError| e.placed(text, table, overrides);
        let read = || {
            serde_path_to_error::deserialize(toml::Value::Table(doc.clone())).map_err(|e| {
                let path = e.path().to_string();
                let message = e.inner().message().trim().to_string();
                if path == "." || path.is_empty() {
                    ConfigError::Syntax(message)
                } else {
                    // A bad value in `[policy]` is reported at the table: name its key.
                    let path = concerto_toml::blame_key_in::<Scenario>(&doc, &path, &message)
                        .unwrap_or(path);
                    placed(ConfigError::at(path, message))
                }
            })
        };
        let (mut scenario, warnings): (Scenario, _) = concerto_core::traps::read_warned(read)?;
        scenario.validate().map_err(placed)?;
        scenario.load_traces().map_err(placed)?;
        Ok((scenario, warnings))
    }

    /// Reads the trace files the applications name (each file once), and
    /// takes each trace's ranks as the application's processes.
    fn load_traces(&mut self) -> Result<(), ConfigError> {
        let mut files: std::collections::HashMap<String, crate::trace::TraceFile> =
            std::collections::HashMap::new();
        for (i, app) in self.apps.iter_mut().enumerate() {
            let Some(path) = app.trace.clone() else {
                continue;
            };
            let key = |field: &str| format!("apps[{i}].{field}");
            if !files.contains_key(&path) {
                let file = crate::trace::load(std::path::Path::new(&path))
                    .map_err(|e| ConfigError::at(key("trace"), e))?;
                files.insert(path.clone(), file);
            }
            let file = &files[&path];
            let chosen = match &app.trace_app {
                Some(name) => file.apps.iter().find(|a| &a.name == name).ok_or_else(|| {
                    ConfigError::at(
                        key("trace_app"),
                        format!("{path} has no application {name:?}"),
                    )
                })?,
                None if file.apps.len() == 1 => &file.apps[0],
                None => {
                    let names: Vec<&str> = file.apps.iter().map(|a| a.name.as_str()).collect();
                    return Err(ConfigError::at(
                        key("trace_app"),
                        format!(
                            "{path} holds {} applications: say which ({})",
                            names.len(),
                            names.join(", ")
                        ),
                    ));
                }
            };
            let ranks = chosen.ranks.len() as u32;
            if app.processes != 1 && app.processes != ranks {
                return Err(ConfigError::at(
                    key("processes"),
                    format!(
                        "{} but the trace has {ranks} ranks (leave it out)",
                        app.processes
                    ),
                ));
            }
            app.processes = ranks;
            // Each rank replays on its own.
            app.barrier = false;
            if app.name.is_none() {
                app.name = Some(chosen.name.clone());
            }
            app.trace_data = Some(std::sync::Arc::new(chosen.clone()));
        }
        Ok(())
    }

    /// Checks values that types alone do not rule out.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let c = &self.cluster;
        positive("cluster.servers", c.servers as u64)?;
        positive("cluster.stripe_unit", c.stripe_unit.0)?;
        positive("cluster.depth", c.depth as u64)?;
        if let Some(count) = c.stripe_count {
            positive("cluster.stripe_count", count as u64)?;
            if count > c.servers {
                return Err(ConfigError::at(
                    "cluster.stripe_count",
                    format!("{count} is larger than cluster.servers ({})", c.servers),
                ));
            }
        }
        validate_device("cluster.device", &c.device)?;
        validate_metadata(c)?;
        if let Some(t) = self.output.timeline {
            if t < Time::from_millis(1) {
                return Err(ConfigError::at(
                    "output.timeline",
                    "bins must be at least 1 ms wide",
                ));
            }
        }
        if self.output.server_timeline && self.output.timeline.is_none() {
            return Err(ConfigError::at(
                "output.server_timeline",
                "needs output.timeline (the bin width)",
            ));
        }
        positive_f(
            "cluster.network.client_bandwidth",
            c.network.client_bandwidth.0,
        )?;
        if c.network.mode == NetworkMode::Ideal {
            // Keys that would change nothing are mistakes, not settings.
            let d = NetworkConfig::default();
            let n = &c.network;
            let unused = [
                ("latency", n.latency != d.latency),
                ("jitter", n.jitter != d.jitter),
                ("client_bandwidth", n.client_bandwidth != d.client_bandwidth),
                ("server_bandwidth", n.server_bandwidth != d.server_bandwidth),
                ("header_bytes", n.header_bytes != d.header_bytes),
                ("flow_buffer", n.flow_buffer.is_some()),
                ("incast", n.incast.is_some()),
            ];
            if let Some((key, _)) = unused.iter().find(|(_, set)| *set) {
                return Err(ConfigError::at(
                    format!("cluster.network.{key}"),
                    "has no effect with mode = \"ideal\", where messages take no time",
                ));
            }
        }
        positive_f(
            "cluster.network.server_bandwidth",
            c.network.server_bandwidth.0,
        )?;
        if let Some(incast) = &c.network.incast {
            if c.network.mode == NetworkMode::Exclusive {
                return Err(ConfigError::at(
                    "cluster.network.incast",
                    "has no effect with mode = \"exclusive\", where a receiver takes one transfer at a time",
                ));
            }
            positive("cluster.network.incast.buffer", incast.buffer.0)?;
            positive("cluster.network.incast.timeout", incast.timeout.as_nanos())?;
        }
        self.policy
            .validate()
            .map_err(|(field, msg)| ConfigError::at(format!("policy.{field}"), msg))?;
        if let PolicyConfig::Capped { capacity: None, .. } = self.policy {
            if self.cluster.device.nominal_bandwidth().is_none() {
                return Err(ConfigError::at(
                    "policy.capacity",
                    "required with the fixed device, which has no rated bandwidth",
                ));
            }
        }
        self.qos
            .validate()
            .map_err(|(field, msg)| ConfigError::at(format!("qos.{field}"), msg))?;
        if let Some(job) = &self.job {
            job.rule
                .validate()
                .map_err(|(field, msg)| ConfigError::at(format!("job.rule.{field}"), msg))?;
            if let Some(b) = job.bandwidth {
                positive_f("job.bandwidth", b.0)?;
            }
            if let Some([begin, end]) = job.window_s {
                if !(begin.is_finite() && end.is_finite() && begin >= 0.0 && end > begin) {
                    return Err(ConfigError::at(
                        "job.window_s",
                        format!("[{begin}, {end}] must be [begin, end] seconds, end after begin"),
                    ));
                }
                if job.bandwidth.is_none() {
                    return Err(ConfigError::at(
                        "job.bandwidth",
                        "required with job.window_s: the metrics take an I/O phase's time alone from it",
                    ));
                }
            }
            if let Some(i) = self.apps.iter().position(|a| !a.barrier) {
                return Err(ConfigError::at(
                    format!("apps[{i}].barrier"),
                    "must be true under [job]: the arbiter gates operations, which need a barrier",
                ));
            }
        }
        for (i, app) in self.apps.iter().enumerate() {
            if !(app.weight.is_finite() && app.weight > 0.0) {
                return Err(ConfigError::at(
                    format!("apps[{i}].weight"),
                    "must be a number > 0",
                ));
            }
            if let Some(count) = app.stripe_count {
                positive(&format!("apps[{i}].stripe_count"), count as u64)?;
                if count > c.servers {
                    return Err(ConfigError::at(
                        format!("apps[{i}].stripe_count"),
                        format!("{count} is larger than cluster.servers ({})", c.servers),
                    ));
                }
            }
            if let Some(first) = app.first_server {
                if first >= c.servers {
                    return Err(ConfigError::at(
                        format!("apps[{i}].first_server"),
                        format!(
                            "server {first} does not exist (cluster.servers is {})",
                            c.servers
                        ),
                    ));
                }
            }
        }

        if self.apps.is_empty() {
            return Err(ConfigError::at(
                "apps",
                "at least one [[apps]] entry is needed",
            ));
        }
        let mut processes = 0u64;
        let mut instances = 0u64;
        for (i, app) in self.apps.iter().enumerate() {
            validate_app(&format!("apps[{i}]"), app, &self.app_ids)?;
            instances += app.instances as u64;
            processes += app.instances as u64 * app.processes as u64;
        }
        if processes > MAX_PROCESSES {
            return Err(ConfigError::at(
                "apps",
                format!("{processes} processes in all; at most {MAX_PROCESSES} are simulated"),
            ));
        }
        if let AppIdRule::Random { min, max } = self.app_ids {
            if min > max {
                return Err(ConfigError::at(
                    "app_ids.max",
                    format!("must be >= app_ids.min ({min})"),
                ));
            }
            if (max - min) as u64 + 1 < instances {
                return Err(ConfigError::at(
                    "app_ids",
                    format!("[{min}, {max}] holds fewer distinct ids than the {instances} application instances"),
                ));
            }
        }
        if let AppIdRule::Sequential { start } = self.app_ids {
            if start as u64 + instances > u32::MAX as u64 {
                return Err(ConfigError::at(
                    "app_ids.start",
                    "too large for the number of applications",
                ));
            }
        }
        Ok(())
    }

    /// What the data servers' policy defaults to on this cluster's device,
    /// with `depth` slots when the policy sets no depth of its own.
    pub fn device_defaults(&self, depth: u32) -> DeviceDefaults {
        DeviceDefaults {
            class: self.cluster.device.class(),
            depth,
            // Validation guarantees a capacity where it is needed; the fallback is never used then.
            capacity: self
                .cluster
                .device
                .nominal_bandwidth()
                .unwrap_or(Bandwidth(100e6)),
        }
    }

    /// The policy with device-dependent defaults filled in.
    pub fn resolved_policy(&self) -> PolicyConfig {
        self.device_defaults(self.cluster.depth)
            .resolve(&self.policy)
    }

    /// Total synchronized operations (barrier mode) or calls (otherwise):
    /// the unit progress is counted in.
    pub fn total_operations(&self) -> u64 {
        self.apps
            .iter()
            .map(|a| {
                let per_instance = match &a.trace_data {
                    Some(t) => t.requests() as u64,
                    None if a.barrier => a.calls() as u64,
                    None => a.calls() as u64 * a.processes as u64,
                };
                per_instance * a.instances as u64
            })
            .sum()
    }
}

pub(crate) fn validate_device(at: &str, device: &DeviceConfig) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    match device {
        DeviceConfig::Fixed(f) => positive(&key("service_time"), f.service_time.as_nanos())?,
        DeviceConfig::Hdd(h) => {
            positive_f(&key("rpm"), h.rpm)?;
            positive_f(&key("transfer_rate"), h.transfer_rate.0)?;
            positive(&key("capacity"), h.capacity.0)?;
            if h.full_stroke < h.track_to_track {
                return Err(ConfigError::at(
                    key("full_stroke"),
                    "must be >= track_to_track",
                ));
            }
            if let Some(span) = h.placement_span {
                if h.object_placement != ObjectPlacement::Random {
                    return Err(ConfigError::at(
                        key("placement_span"),
                        "only for object_placement = \"random\"",
                    ));
                }
                positive(&key("placement_span"), span.0)?;
            }
            if h.prefetch.0 > h.cache.0 {
                return Err(ConfigError::at(
                    key("prefetch"),
                    format!(
                        "{} bytes of read-ahead do not fit in a cache of {} bytes (set cache >= prefetch)",
                        h.prefetch.0, h.cache.0
                    ),
                ));
            }
        }
        DeviceConfig::Ssd(s) => {
            positive_f(&key("bandwidth"), s.bandwidth.0)?;
            positive(&key("parallelism"), s.parallelism as u64)?;
            if let Some(o) = &s.overload {
                if !(o.loss.is_finite() && (0.0..=1.0).contains(&o.loss)) {
                    return Err(ConfigError::at(
                        key("overload.loss"),
                        format!("{} must be between 0 and 1 (a fraction of a transfer's time per request)", o.loss),
                    ));
                }
                if o.after == 0 || o.after > s.parallelism {
                    return Err(ConfigError::at(
                        key("overload.after"),
                        format!(
                            "{} must be from 1 to parallelism ({})",
                            o.after, s.parallelism
                        ),
                    ));
                }
            }
        }
        DeviceConfig::Emulated(e) => e
            .validate()
            .map_err(|(field, msg)| ConfigError::at(key(field), msg))?,
    }
    Ok(())
}

fn validate_metadata(c: &ClusterConfig) -> Result<(), ConfigError> {
    let m = &c.metadata;
    if let Some(n) = m.servers {
        positive("cluster.metadata.servers", n as u64)?;
        if m.placement == MetadataPlacement::CoLocated && n > c.servers {
            return Err(ConfigError::at(
                "cluster.metadata.servers",
                format!(
                    "{n} co-located metadata servers but only {} data servers",
                    c.servers
                ),
            ));
        }
        if n > 4096 {
            return Err(ConfigError::at("cluster.metadata.servers", "at most 4096"));
        }
    }
    if m.placement == MetadataPlacement::CoLocated {
        if m.depth.is_some() {
            return Err(ConfigError::at(
                "cluster.metadata.depth",
                "only for placement = \"dedicated\" (co-located metadata shares cluster.depth)",
            ));
        }
        if m.device.is_some() {
            return Err(ConfigError::at(
                "cluster.metadata.device",
                "only for placement = \"dedicated\" (co-located metadata shares cluster.device)",
            ));
        }
    }
    if let Some(d) = m.depth {
        positive("cluster.metadata.depth", d as u64)?;
    }
    if let Some(device) = &m.device {
        validate_device("cluster.metadata.device", device)?;
    }
    let costs = &m.costs;
    for (name, t) in [
        ("mkdir", costs.mkdir),
        ("create", costs.create),
        ("getattr", costs.getattr),
        ("readdir", costs.readdir),
        ("remove", costs.remove),
        ("rmdir", costs.rmdir),
    ] {
        positive(&format!("cluster.metadata.costs.{name}"), t.as_nanos())?;
    }
    Ok(())
}

fn positive(path: &str, v: u64) -> Result<(), ConfigError> {
    if v == 0 {
        return Err(ConfigError::at(path, "must be > 0"));
    }
    Ok(())
}

fn positive_f(path: &str, v: f64) -> Result<(), ConfigError> {
    if !(v.is_finite() && v > 0.0) {
        return Err(ConfigError::at(path, "must be > 0"));
    }
    Ok(())
}

fn validate_app(at: &str, app: &AppSpec, rule: &AppIdRule) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    positive(&key("instances"), app.instances as u64)?;
    positive(&key("processes"), app.processes as u64)?;
    positive(&key("requests"), app.requests as u64)?;
    if let Some(name) = &app.name {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(ConfigError::at(
                key("name"),
                "use letters, digits, '-', '_' or '.'",
            ));
        }
    }
    let kind = app.workload_name();
    let not_for =
        |field: &str, present: bool, allowed: &[WorkloadKind]| -> Result<(), ConfigError> {
            if present && !allowed.contains(&app.workload) {
                return Err(ConfigError::at(
                    key(field),
                    format!("does not apply to workload \"{kind}\""),
                ));
            }
            Ok(())
        };
    use WorkloadKind::*;
    not_for(
        "request_size",
        app.request_size.is_some(),
        &[Ior, PioBench, Wrf, MdTest, Phases],
    )?;
    not_for("phases", app.phases.is_some(), &[Phases])?;
    not_for("pattern", app.pattern.is_some(), &[Ior, PioBench])?;
    not_for("file", app.file.is_some(), &[Ior, PioBench])?;
    not_for("grid", app.grid.is_some(), &[MpiTileIo])?;
    not_for("tile", app.tile.is_some(), &[MpiTileIo])?;
    not_for("planes", app.planes.is_some(), &[MpiTileIo])?;
    if let Some(planes) = app.planes {
        positive(&key("planes"), planes as u64)?;
    }
    if let Some(b) = app.schedule_block {
        if app.ordering.is_none() {
            return Err(ConfigError::at(
                key("schedule_block"),
                "needs ordering (\"first-ios\", \"random-ios\" or \"hash-ios\")",
            ));
        }
        positive(&key("schedule_block"), b.0)?;
    }
    not_for(
        "element_size",
        app.element_size.is_some(),
        &[MpiTileIo, Noncontig, Btio],
    )?;
    not_for("elements", app.elements.is_some(), &[Noncontig, Btio])?;
    not_for("getattrs", app.getattrs.is_some(), &[Wrf])?;
    not_for("access", app.access.is_some(), &[Collective])?;
    not_for("collective", app.collective.is_some(), &[Collective])?;
    not_for("items", app.items.is_some(), &[MdTest])?;
    not_for("subtype", app.subtype.is_some(), &[Btio])?;
    not_for("block_size", app.block_size.is_some(), &[Ior])?;
    not_for("md_steps", app.md_steps.is_some(), &[MdTest])?;
    not_for("trace", app.trace.is_some(), &[Trace])?;
    not_for("trace_app", app.trace_app.is_some(), &[Trace])?;
    if app.md_steps.as_ref().is_some_and(Vec::is_empty) {
        return Err(ConfigError::at(key("md_steps"), "needs at least one phase"));
    }
    for (field, present) in [
        ("segments", app.segments.is_some()),
        ("operations", app.operations.is_some()),
    ] {
        if present && app.block_size.is_none() {
            return Err(ConfigError::at(
                key(field),
                "goes with block_size (IOR's layout)",
            ));
        }
    }
    let required = |field: &str, present: bool| -> Result<(), ConfigError> {
        if !present {
            return Err(ConfigError::at(
                key(field),
                format!("required for workload \"{kind}\""),
            ));
        }
        Ok(())
    };
    match app.workload {
        Ior | PioBench => {
            required("request_size", app.request_size.is_some())?;
            let transfer = app.request_size.map_or(0, |b| b.0);
            positive(&key("request_size"), transfer)?;
            if let Some(block) = app.block_size {
                positive(&key("block_size"), block.0)?;
                if block.0 % transfer != 0 {
                    return Err(ConfigError::at(
                        key("block_size"),
                        format!("{} bytes is not a whole number of transfers (request_size = {transfer})", block.0),
                    ));
                }
                if !app.barrier {
                    return Err(ConfigError::at(
                        key("barrier"),
                        "IOR's layout has a barrier between its operations",
                    ));
                }
                if app.pattern.is_some() || app.requests != 1 {
                    return Err(ConfigError::at(
                        key(if app.pattern.is_some() {
                            "pattern"
                        } else {
                            "requests"
                        }),
                        "block_size gives IOR's layout: the calls are its operations",
                    ));
                }
                positive(&key("segments"), app.segments.unwrap_or(1) as u64)?;
                if app.operations.as_ref().is_some_and(Vec::is_empty) {
                    return Err(ConfigError::at(
                        key("operations"),
                        "needs at least one operation",
                    ));
                }
                let transfers = block.0 / transfer * app.segments.unwrap_or(1) as u64;
                if transfers > MAX_IOR_TRANSFERS {
                    return Err(ConfigError::at(
                        key("block_size"),
                        format!("{transfers} transfers per process and operation is over {MAX_IOR_TRANSFERS}"),
                    ));
                }
            }
        }
        MpiTileIo => {
            required("grid", app.grid.is_some())?;
            required("tile", app.tile.is_some())?;
            required("element_size", app.element_size.is_some())?;
            let [px, py] = app.grid.unwrap_or_default();
            let [tx, ty] = app.tile.unwrap_or_default();
            for (name, v) in [("grid", px), ("grid", py), ("tile", tx), ("tile", ty)] {
                positive(&key(name), v as u64)?;
            }
            positive(&key("element_size"), app.element_size.map_or(0, |b| b.0))?;
            if px as u64 * py as u64 != app.processes as u64 {
                return Err(ConfigError::at(
                    key("grid"),
                    format!(
                        "{px} x {py} tiles does not match processes = {}",
                        app.processes
                    ),
                ));
            }
        }
        Noncontig | Btio => {
            required("elements", app.elements.is_some())?;
            required("element_size", app.element_size.is_some())?;
            positive(&key("elements"), app.elements.unwrap_or(0) as u64)?;
            positive(&key("element_size"), app.element_size.map_or(0, |b| b.0))?;
        }
        Trace => {
            required("trace", app.trace.is_some())?;
            if app.requests != 1 {
                return Err(ConfigError::at(
                    key("requests"),
                    "does not apply to workload \"trace\" (its calls are the trace's requests)",
                ));
            }
        }
        Wrf => {
            required("request_size", app.request_size.is_some())?;
            positive(&key("request_size"), app.request_size.map_or(0, |b| b.0))?;
        }
        MdTest => {
            required("items", app.items.is_some())?;
            positive(&key("items"), app.items.unwrap_or(0) as u64)?;
            if app.items.unwrap_or(0) as u64 * app.processes as u64 > MAX_FILES {
                return Err(ConfigError::at(
                    key("items"),
                    format!("processes x items is over {MAX_FILES} files"),
                ));
            }
            if let Some(size) = app.request_size {
                positive(&key("request_size"), size.0)?;
            }
        }
        Collective => {
            required("access", app.access.is_some())?;
            AccessPattern::parse(app.access.as_deref().unwrap_or_default())
                .map_err(|e| ConfigError::at(key("access"), e))?;
            let choice = app.collective.clone().unwrap_or_default();
            choice.validate().map_err(|e| {
                let option = e.split_whitespace().next().unwrap_or_default();
                ConfigError::at(key(&format!("collective.{option}")), e)
            })?;
            // Whether the processes' writes overlap does not depend on the
            // layout or the call: plan the first call once, here.
            if let (Some(pattern), Ok(planner)) = (app.access_pattern(), choice.planner()) {
                let layout = concerto_core::StripeLayout::round_robin(1 << 16, 1, 0, 1)
                    .expect("one server, a non-zero unit");
                planner
                    .plan(
                        app.op.direction(),
                        &pattern.accesses(app.processes, 0),
                        &layout,
                    )
                    .map_err(|e| ConfigError::at(key("access"), e.to_string()))?;
            }
            if !app.barrier {
                return Err(ConfigError::at(
                    key("barrier"),
                    "must be true for workload \"collective\" (a collective call synchronizes its processes)",
                ));
            }
            if app.ordering.is_some() {
                return Err(ConfigError::at(
                    key("ordering"),
                    "does not apply to workload \"collective\" (its planner orders the requests)",
                ));
            }
        }
        Phases => {
            required("phases", app.phases.is_some())?;
            let phases = app.phases.as_deref().unwrap_or(&[]);
            if phases.is_empty() {
                return Err(ConfigError::at(key("phases"), "needs at least one phase"));
            }
            for (k, [compute, bytes]) in phases.iter().enumerate() {
                for (j, v) in [(0, compute), (1, bytes)] {
                    if !(v.is_finite() && *v >= 0.0) {
                        return Err(ConfigError::at(
                            format!("{at}.phases[{k}][{j}]"),
                            format!("{v} must be a finite number >= 0"),
                        ));
                    }
                }
            }
            if !app.barrier {
                return Err(ConfigError::at(
                    key("barrier"),
                    "must be true for workload \"phases\" (each phase is one operation)",
                ));
            }
            if let Some(size) = app.request_size {
                positive(&key("request_size"), size.0)?;
            }
        }
    }
    if app.group.is_some() != app.group_w_iter.is_some() {
        return Err(ConfigError::at(
            key(if app.group.is_some() {
                "group_w_iter"
            } else {
                "group"
            }),
            "group and group_w_iter go together (the group and its characteristic time)",
        ));
    }
    if app.workload == MdTest && app.requests != 1 {
        return Err(ConfigError::at(
            key("requests"),
            "does not apply to workload \"md-test\" (its calls are its eight phases; set items)",
        ));
    }
    if app
        .bytes_per_call()
        .checked_mul(app.calls() as u64)
        .and_then(|b| b.checked_mul(app.processes as u64))
        .is_none_or(|b| b > 1 << 50)
    {
        return Err(ConfigError::at(
            at,
            "moves more than 1 PiB; reduce requests or sizes",
        ));
    }
    match (rule, app.app_id) {
        (AppIdRule::Explicit, None) => Err(ConfigError::at(
            key("app_id"),
            "required when app_ids.rule = \"explicit\"",
        )),
        (AppIdRule::Explicit, Some(id)) if id as u64 + app.instances as u64 > u32::MAX as u64 => {
            Err(ConfigError::at(
                key("app_id"),
                "too large for the number of instances",
            ))
        }
        (AppIdRule::Random { .. } | AppIdRule::Sequential { .. }, Some(_)) => Err(ConfigError::at(
            key("app_id"),
            "only used when app_ids.rule = \"explicit\"",
        )),
        _ => Ok(()),
    }
}
