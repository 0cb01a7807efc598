//! Storage device models. Each serves requests in the order it receives
//! them (the server's queue decides that order) and says, at dispatch, when
//! a request will finish.
//!
//! A device kind is one file here: its `[cluster.device]` table (a
//! [`DeviceKind`]: the class policy defaults follow, its rated bandwidth,
//! the checks of its keys, and the model it builds) and its model (a
//! [`StorageModel`]), plus one line in [`device_kinds!`]'s list below.

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use concerto_core::emulation::EmulationConfig;
use concerto_core::server::DeviceClass;
use concerto_core::units::Bandwidth;
use concerto_core::{Request, Time};

use crate::config_error::ConfigError;

mod emulated;
mod fixed;
mod hdd;
mod ssd;
#[cfg(test)]
mod tests;

pub use fixed::FixedConfig;
pub use hdd::{elevator_pick, DiskScheduler, DiskWait, HddConfig, ObjectPlacement};
pub use ssd::{Overload, SsdConfig};

/// A device kind's table: what the rest of the simulator asks of it.
pub trait DeviceKind {
    /// The device class policy defaults follow (the coordination window).
    fn class(&self) -> DeviceClass;

    /// The streaming bandwidth the device is rated at: what `capped` shares
    /// out when the scenario does not say; none for a fixed-time device.
    fn nominal_bandwidth(&self) -> Option<Bandwidth>;

    /// The checks of the table's values; `at` is its path
    /// (`cluster.device`), for the errors' key.
    fn check(&self, at: &str) -> Result<(), ConfigError>;

    /// A new model of the device, idle.
    fn model(&self) -> Box<dyn StorageModel>;

    /// Where file `file`'s object starts on server `server`'s device
    /// (only a disk has positions).
    fn object_base(&self, _seed: u64, _file: u32, _server: u32) -> u64 {
        0
    }

    /// The elevator's deadline when the device itself orders what the
    /// server dispatched to it (a disk's C-LOOK); none when it serves
    /// requests in the order given.
    fn elevator_deadline(&self) -> Option<Time> {
        None
    }
}

/// A device as it runs.
pub trait StorageModel: Send {
    /// Starts `req` at `now`; `base` is where its object begins on the
    /// device. Returns the completion time.
    fn start(&mut self, now: Time, base: u64, req: &Request, rng: &mut ChaCha8Rng) -> Time;

    /// Starts a metadata operation that keeps the storage busy for
    /// `service` (a small database transaction); returns its completion.
    fn start_metadata(&mut self, now: Time, service: Time) -> Time;

    /// When a read of data all in the server's cache can be answered, if
    /// it is in the cache (see [`HddConfig::cache`]).
    fn cached_until(&self, _now: Time, _base: u64, _req: &Request) -> Option<Time> {
        None
    }

    /// Where the head is (a disk: just past the last access).
    fn head(&self) -> u64 {
        0
    }
}

/// The registry: each kind's variant of [`DeviceConfig`], the name its
/// `kind` key takes, and its table.
macro_rules! device_kinds {
    ($($(#[$doc:meta])* $variant:ident = $name:literal => $config:ty,)*) => {
        /// The `[cluster.device]` table: the storage model each server runs.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind")]
        pub enum DeviceConfig {
            $($(#[$doc])* #[serde(rename = $name)] $variant($config),)*
        }

        impl DeviceConfig {
            /// What the kind's table answers.
            pub fn kind(&self) -> &dyn DeviceKind {
                match self {
                    $(DeviceConfig::$variant(c) => c,)*
                }
            }
        }
    };
}

device_kinds! {
    /// Every request takes the same time, one at a time.
    Fixed = "fixed" => FixedConfig,
    /// A single-actuator disk (seek, rotation, transfer, read-ahead, cache).
    Hdd = "hdd" => HddConfig,
    /// Flash: latency overlapped across channels, one shared data bus.
    Ssd = "ssd" => SsdConfig,
    /// The device class the real servers' throttle emulates (bandwidth,
    /// latency, seek penalty, channels), so a real run can be simulated
    /// against the same model.
    Emulated = "emulated" => EmulationConfig,
}

impl DeviceConfig {
    /// The device class policy defaults follow (the coordination window).
    pub fn class(&self) -> DeviceClass {
        self.kind().class()
    }

    /// The streaming bandwidth the device is rated at (see [`DeviceKind`]).
    pub fn nominal_bandwidth(&self) -> Option<Bandwidth> {
        self.kind().nominal_bandwidth()
    }
}

/// The checks of a `[... .device]` table at `at`.
pub(crate) fn validate_device(at: &str, device: &DeviceConfig) -> Result<(), ConfigError> {
    device.kind().check(at)
}

/// A server's storage.
pub struct Device(Box<dyn StorageModel>);

impl Device {
    pub fn new(cfg: &DeviceConfig) -> Device {
        Device(cfg.kind().model())
    }

    /// Starts `req` at `now`; `base` is where its object begins on the
    /// device. Returns the completion time.
    pub fn start(&mut self, now: Time, base: u64, req: &Request, rng: &mut ChaCha8Rng) -> Time {
        self.0.start(now, base, req, rng)
    }

    /// When a read of data all in the server's cache can be answered.
    pub fn cached_until(&self, now: Time, base: u64, req: &Request) -> Option<Time> {
        self.0.cached_until(now, base, req)
    }

    /// Starts a metadata operation that keeps the storage busy for `service`.
    pub fn start_metadata(&mut self, now: Time, service: Time) -> Time {
        self.0.start_metadata(now, service)
    }

    /// Where the head is.
    pub fn head(&self) -> u64 {
        self.0.head()
    }
}

/// Where file `file`'s object starts on server `server`'s device.
pub fn object_base(device: &DeviceConfig, seed: u64, file: u32, server: u32) -> u64 {
    device.kind().object_base(seed, file, server)
}
