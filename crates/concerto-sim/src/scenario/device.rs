//! The `[cluster.device]` table: the storage model each server runs
//! (`fixed`, `hdd`, `ssd`, `emulated`) and its validation.

use super::*;

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

pub(crate) fn is_zero_time(t: &Time) -> bool {
    t.is_zero()
}

pub(crate) fn is_zero_bytes(b: &Bytes) -> bool {
    b.0 == 0
}

pub(crate) fn is_default_deadline(t: &Time) -> bool {
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
            .map_err(|e| ConfigError::at(key(&e.field), e.message))?,
    }
    Ok(())
}
