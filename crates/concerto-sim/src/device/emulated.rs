//! The emulated device: the model the real servers' throttle runs
//! (concerto-core's `emulation`), so a real run can be simulated against
//! the same device.

use rand_chacha::ChaCha8Rng;

use concerto_core::emulation::{EmulatedDevice, EmulationConfig};
use concerto_core::server::DeviceClass;
use concerto_core::units::Bandwidth;
use concerto_core::{Request, Time};

use super::{DeviceKind, StorageModel};
use crate::config_error::ConfigError;

impl DeviceKind for EmulationConfig {
    fn class(&self) -> DeviceClass {
        EmulationConfig::class(self)
    }

    fn nominal_bandwidth(&self) -> Option<Bandwidth> {
        Some(self.bandwidth)
    }

    fn check(&self, at: &str) -> Result<(), ConfigError> {
        self.validate()
            .map_err(|e| ConfigError::at(format!("{at}.{}", e.field), e.message))
    }

    fn model(&self) -> Box<dyn StorageModel> {
        Box::new(EmulatedDevice::new(self.clone()))
    }
}

impl StorageModel for EmulatedDevice {
    fn start(&mut self, now: Time, _base: u64, req: &Request, _rng: &mut ChaCha8Rng) -> Time {
        EmulatedDevice::start(
            self,
            now,
            req.object.0,
            req.offset,
            req.len,
            req.segments.len().max(1),
        )
    }

    fn start_metadata(&mut self, now: Time, service: Time) -> Time {
        EmulatedDevice::start_metadata(self, now, service)
    }
}
