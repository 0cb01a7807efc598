//! Flash: per-request latency overlapped across `parallelism` channels,
//! data moved over one shared internal bus at `bandwidth`.

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use concerto_core::server::DeviceClass;
use concerto_core::units::Bandwidth;
use concerto_core::{Request, Time};

use super::{DeviceKind, StorageModel};
use crate::config_error::{positive, positive_f, ConfigError};

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

impl DeviceKind for SsdConfig {
    fn class(&self) -> DeviceClass {
        DeviceClass::Flash
    }

    fn nominal_bandwidth(&self) -> Option<Bandwidth> {
        Some(self.bandwidth)
    }

    fn check(&self, at: &str) -> Result<(), ConfigError> {
        let key = |k: &str| format!("{at}.{k}");
        positive_f(&key("bandwidth"), self.bandwidth.0)?;
        positive(&key("parallelism"), self.parallelism as u64)?;
        if let Some(o) = &self.overload {
            if !(o.loss.is_finite() && (0.0..=1.0).contains(&o.loss)) {
                return Err(ConfigError::at(
                    key("overload.loss"),
                    format!(
                        "{} must be between 0 and 1 (a fraction of a transfer's time per request)",
                        o.loss
                    ),
                ));
            }
            if o.after == 0 || o.after > self.parallelism {
                return Err(ConfigError::at(
                    key("overload.after"),
                    format!(
                        "{} must be from 1 to parallelism ({})",
                        o.after, self.parallelism
                    ),
                ));
            }
        }
        Ok(())
    }

    fn model(&self) -> Box<dyn StorageModel> {
        Box::new(Ssd::new(self.clone()))
    }
}

/// Flash: per-request latency overlapped across `parallelism` channels, data
/// moved over one shared internal bus at `bandwidth`. Small requests are
/// latency-bound and need depth; large ones are bandwidth-bound.
pub struct Ssd {
    cfg: SsdConfig,
    channels: Vec<Time>,
    bus_free: Time,
}

impl Ssd {
    pub(super) fn new(cfg: SsdConfig) -> Ssd {
        let channels = vec![Time::ZERO; cfg.parallelism.max(1) as usize];
        Ssd {
            cfg,
            channels,
            bus_free: Time::ZERO,
        }
    }

    fn occupy_channel(&mut self, now: Time, service: Time) -> Time {
        let (i, free) = self.earliest_channel();
        let done = now.max(free) + service;
        if let Some(c) = self.channels.get_mut(i) {
            *c = done;
        }
        done
    }

    /// `transfer` as it takes with the requests in the device at `begin`
    /// (this one included), under the configured overload.
    fn overloaded(&self, begin: Time, transfer: Time) -> Time {
        let Some(o) = &self.cfg.overload else {
            return transfer;
        };
        let in_device = 1 + self.channels.iter().filter(|&&busy| busy > begin).count() as u32;
        let beyond = in_device.saturating_sub(o.after);
        if beyond == 0 {
            return transfer;
        }
        Time::from_secs_f64(transfer.as_secs_f64() * (1.0 + o.loss * beyond as f64))
    }

    fn earliest_channel(&self) -> (usize, Time) {
        self.channels
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, t)| t)
            .unwrap_or((0, Time::ZERO))
    }

    /// Moves `bytes` from `now`; returns when done.
    pub(super) fn serve(&mut self, now: Time, bytes: u64) -> Time {
        let (i, free) = self.earliest_channel();
        let begin = now.max(free);
        let data_start = (begin + self.cfg.latency).max(self.bus_free);
        let transfer = self.cfg.bandwidth.transfer_time(bytes);
        let done = data_start + self.overloaded(begin, transfer);
        self.bus_free = done;
        if let Some(c) = self.channels.get_mut(i) {
            *c = done;
        }
        done
    }
}

impl StorageModel for Ssd {
    fn start(&mut self, now: Time, _base: u64, req: &Request, _rng: &mut ChaCha8Rng) -> Time {
        self.serve(now, req.len)
    }

    /// Latency-bound: it takes an internal unit, not the data bus.
    fn start_metadata(&mut self, now: Time, service: Time) -> Time {
        self.occupy_channel(now, service)
    }
}
