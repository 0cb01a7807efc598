//! The `[cluster]` table: servers, striping, metadata placement and costs,
//! and the network between clients and servers.

use super::*;

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
    /// What each step of a call costs its process before the step's
    /// requests leave: the system call, the kernel, FUSE and the client
    /// library, which the servers never see (what `concerto calibrate`
    /// measures). Zero: a step leaves at once.
    #[serde(default)]
    pub client_overhead: Time,
    /// How much of `client_overhead` varies from step to step (drift):
    /// each step costs `client_overhead - spread` plus an exponentially
    /// distributed rest of mean `spread` (a floor and a tail, as the real
    /// calls' latencies have), so the mean stays `client_overhead` and
    /// processes that start in step fall out of it as real ones do. Zero:
    /// every step costs exactly `client_overhead`. At most
    /// `client_overhead`.
    #[serde(default)]
    pub client_overhead_spread: Time,
    /// What a server takes for each data request beyond its device's time
    /// (its hand-off to and from its storage threads, the reply): the
    /// reply leaves this long after the device is done, and the device
    /// serves the next request meanwhile (what `concerto calibrate`
    /// measures). Zero: the reply leaves at once.
    #[serde(default)]
    pub server_data_overhead: Time,
    /// What each process may hold and have in flight behind its writes,
    /// as the mount's `--write-behind`: its writes are held and coalesced
    /// by core's write-behind policy (the real client's) and a write step
    /// ends at once, unless that much is already in flight; a close waits
    /// for what the process sent. Zero: every write step waits for its
    /// requests (the mount's `--write-behind 0`).
    #[serde(default)]
    pub write_behind: Bytes,
    /// Processes read ahead as the real client does (core's read-ahead
    /// policy): a stream read sequentially has the next chunks of whole
    /// stripes fetched before it asks, and its reads wait for those.
    #[serde(default)]
    pub read_ahead: bool,
    /// The kernel's page cache on each client node, at this copy rate:
    /// a read of bytes the node's processes wrote or read before is served
    /// from its memory, no server asked (the mount keeps the page cache;
    /// `concerto twin`'s drivers drop it before each read). Absent: every
    /// read goes to the servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache: Option<Bandwidth>,
    pub device: DeviceConfig,
    #[serde(default)]
    pub network: NetworkConfig,
    #[serde(default)]
    pub metadata: MetadataConfig,
}

pub(crate) fn default_stripe_unit() -> Bytes {
    Bytes(64 * 1024)
}

pub(crate) fn default_depth() -> u32 {
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
    /// The clients are Concerto's FUSE mount, not having seen the names:
    /// each md-test operation comes after the kernel's lookup of its name
    /// (a getattr; it misses for a create or mkdir, and is all a stat
    /// asks), and a read after the file's open too, as docs/filesystem.md
    /// counts them; a written file is closed as the mount closes it; the
    /// mount writes through, under the kernel's lock on the file (one
    /// write step to a file at a time); md-test's files are placed in the
    /// order they are made, as the metadata server places them.
    pub posix_mount: bool,
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
            posix_mount: false,
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
    /// A data server's fsync of an object (the close or fsync of a file
    /// written through the mount, `posix_mount`), on that server's storage.
    pub fsync: Time,
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
            fsync: Time::from_micros(300),
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
    /// Every message is a flow at its max-min fair share of the sender's
    /// and the receiver's NIC (each full duplex), as TCP connections share
    /// the links they cross: messages sent or received side by side,
    /// where `queued` takes them one after the other.
    Shared,
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

pub(crate) fn validate_metadata(c: &ClusterConfig) -> Result<(), ConfigError> {
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

/// The cluster's servers, striping, device and metadata.
pub(crate) fn validate_cluster(c: &ClusterConfig) -> Result<(), ConfigError> {
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
    if let Some(rate) = c.page_cache {
        positive_f("cluster.page_cache", rate.0)?;
    }
    if c.client_overhead_spread > c.client_overhead {
        return Err(ConfigError::at(
            "cluster.client_overhead_spread",
            format!(
                "{} is more than cluster.client_overhead ({}): the spread is the part of the overhead that varies",
                c.client_overhead_spread, c.client_overhead
            ),
        ));
    }
    validate_device("cluster.device", &c.device)?;
    validate_metadata(c)?;
    Ok(())
}

/// The network's bandwidths, and options that would change nothing in its mode.
pub(crate) fn validate_network(n: &NetworkConfig) -> Result<(), ConfigError> {
    positive_f("cluster.network.client_bandwidth", n.client_bandwidth.0)?;
    if n.mode == NetworkMode::Ideal {
        // Keys that would change nothing are mistakes, not settings.
        let d = NetworkConfig::default();
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
    positive_f("cluster.network.server_bandwidth", n.server_bandwidth.0)?;
    if n.mode == NetworkMode::Shared && n.flow_buffer.is_some() {
        return Err(ConfigError::at(
            "cluster.network.flow_buffer",
            "is for mode = \"queued\": in a shared network a message's bytes go side by side with others', not as a stream ahead of them",
        ));
    }
    if let Some(incast) = &n.incast {
        if n.mode == NetworkMode::Exclusive {
            return Err(ConfigError::at(
                "cluster.network.incast",
                "has no effect with mode = \"exclusive\", where a receiver takes one transfer at a time",
            ));
        }
        if n.mode == NetworkMode::Shared {
            return Err(ConfigError::at(
                "cluster.network.incast",
                "has no effect with mode = \"shared\", where a receiver shares its bandwidth among what it takes in",
            ));
        }
        positive("cluster.network.incast.buffer", incast.buffer.0)?;
        positive("cluster.network.incast.timeout", incast.timeout.as_nanos())?;
    }
    Ok(())
}
