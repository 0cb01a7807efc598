//! A fixed-time device: every request takes the same time, one at a time
//! (the analytical model's device).

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use concerto_core::server::DeviceClass;
use concerto_core::units::Bandwidth;
use concerto_core::{Request, Time};

use super::{DeviceKind, StorageModel};
use crate::config_error::{positive, ConfigError};

/// Every request takes the same time, one at a time: the analytical model's device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedConfig {
    pub service_time: Time,
}

impl DeviceKind for FixedConfig {
    fn class(&self) -> DeviceClass {
        DeviceClass::Rotational
    }

    fn nominal_bandwidth(&self) -> Option<Bandwidth> {
        None
    }

    fn check(&self, at: &str) -> Result<(), ConfigError> {
        positive(&format!("{at}.service_time"), self.service_time.as_nanos())
    }

    fn model(&self) -> Box<dyn StorageModel> {
        Box::new(Fixed {
            cfg: self.clone(),
            busy_until: Time::ZERO,
        })
    }
}

/// Constant service time, one request at a time.
pub struct Fixed {
    cfg: FixedConfig,
    busy_until: Time,
}

impl Fixed {
    fn serve(&mut self, now: Time) -> Time {
        let done = now.max(self.busy_until) + self.cfg.service_time;
        self.busy_until = done;
        done
    }
}

impl StorageModel for Fixed {
    fn start(&mut self, now: Time, _base: u64, _req: &Request, _rng: &mut ChaCha8Rng) -> Time {
        self.serve(now)
    }

    fn start_metadata(&mut self, now: Time, service: Time) -> Time {
        let done = now.max(self.busy_until) + service;
        self.busy_until = done;
        done
    }
}
