//! A device class described by three numbers — streaming bandwidth, a
//! per-request latency, and a seek penalty when an access does not continue
//! the previous one — served over `parallelism` channels.
//!
//! The real servers' throttle uses it to make a fast host behave like an HDD
//! or an SSD (it computes when a request would finish and the server sleeps
//! until then), and the simulator offers it as the `emulated` device, so a
//! real run and its simulation face the same device model.

use crate::FieldError;
use serde::{Deserialize, Serialize};

use crate::server::DeviceClass;
use crate::time::Time;
use crate::units::Bandwidth;

/// What a metadata operation costs a throttled server's device, whatever
/// the operation: the real servers' throttle charges it, and the
/// simulator's twin of a throttled cluster gives every operation this cost
/// (`concerto twin`, `concerto demo`), so both worlds pay the same.
pub const METADATA_SERVICE: Time = Time::from_micros(300);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmulationConfig {
    pub bandwidth: Bandwidth,
    pub latency: Time,
    /// Added when an access is not the continuation of the previous one on the device.
    pub seek: Time,
    /// Requests served at once (1 for a disk arm, several for flash channels).
    #[serde(default = "one")]
    pub parallelism: u32,
    /// Added for each segment after the first of a list request: scattering
    /// (or gathering) its pieces into file blocks.
    #[serde(default, skip_serializing_if = "no_time")]
    pub segment: Time,
}

fn one() -> u32 {
    1
}

fn no_time(t: &Time) -> bool {
    t.is_zero()
}

impl EmulationConfig {
    /// A 7200 rpm disk: 100 MB/s streaming, 8 ms to reposition (seek plus
    /// half a revolution), one request at a time.
    pub fn hdd() -> EmulationConfig {
        EmulationConfig {
            bandwidth: Bandwidth(100e6),
            latency: Time::from_micros(100),
            seek: Time::from_millis(8),
            parallelism: 1,
            segment: Time::ZERO,
        }
    }

    /// A SATA SSD: 500 MB/s, 80 us per request, 8 channels, no seeks.
    pub fn ssd() -> EmulationConfig {
        EmulationConfig {
            bandwidth: Bandwidth(500e6),
            latency: Time::from_micros(80),
            seek: Time::ZERO,
            parallelism: 8,
            segment: Time::ZERO,
        }
    }

    /// `hdd` or `ssd`.
    pub fn preset(name: &str) -> Option<EmulationConfig> {
        match name {
            "hdd" => Some(EmulationConfig::hdd()),
            "ssd" => Some(EmulationConfig::ssd()),
            _ => None,
        }
    }

    /// Several channels make it flash-like for policy defaults; one, a disk arm.
    pub fn class(&self) -> DeviceClass {
        if self.parallelism > 1 {
            DeviceClass::Flash
        } else {
            DeviceClass::Rotational
        }
    }

    pub fn validate(&self) -> Result<(), FieldError> {
        if !(self.bandwidth.0.is_finite() && self.bandwidth.0 > 0.0) {
            return Err(FieldError::new("bandwidth", "must be > 0".into()));
        }
        if self.parallelism == 0 {
            return Err(FieldError::new("parallelism", "must be > 0".into()));
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        let segment = if self.segment.is_zero() {
            String::new()
        } else {
            format!(", {} per extra segment", self.segment)
        };
        format!(
            "{:.0} MB/s, {} per request, {} seek, {} at a time{segment}",
            self.bandwidth.0 / 1e6,
            self.latency,
            self.seek,
            self.parallelism
        )
    }
}

/// The device's state: when each channel frees up, and where the last access ended.
#[derive(Clone, Debug)]
pub struct EmulatedDevice {
    cfg: EmulationConfig,
    channels: Vec<Time>,
    /// (object, end offset) of the last access started.
    last: Option<(u64, u64)>,
}

impl EmulatedDevice {
    pub fn new(cfg: EmulationConfig) -> EmulatedDevice {
        let channels = vec![Time::ZERO; cfg.parallelism.max(1) as usize];
        EmulatedDevice {
            cfg,
            channels,
            last: None,
        }
    }

    pub fn config(&self) -> &EmulationConfig {
        &self.cfg
    }

    /// Starts an access of `len` bytes at `offset` of `object`, in
    /// `segments` pieces (1 unless it is list I/O), at `now`; returns when
    /// it finishes.
    pub fn start(
        &mut self,
        now: Time,
        object: u64,
        offset: u64,
        len: u64,
        segments: usize,
    ) -> Time {
        let continues = self.last == Some((object, offset));
        let seek = if continues { Time::ZERO } else { self.cfg.seek };
        let scatter = Time::from_nanos(
            self.cfg
                .segment
                .as_nanos()
                .saturating_mul(segments.saturating_sub(1) as u64),
        );
        let service = self.cfg.latency + seek + scatter + self.cfg.bandwidth.transfer_time(len);
        self.last = Some((object, offset.saturating_add(len)));
        self.occupy(now, service)
    }

    /// Keeps one channel busy for `service` from `now` (or when one frees up).
    pub fn occupy(&mut self, now: Time, service: Time) -> Time {
        let (i, free) = self
            .channels
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, t)| t)
            .unwrap_or((0, Time::ZERO));
        let done = now.max(free) + service;
        if let Some(c) = self.channels.get_mut(i) {
            *c = done;
        }
        done
    }

    /// A metadata operation of `service` on this device: the next data access must seek back.
    pub fn start_metadata(&mut self, now: Time, service: Time) -> Time {
        self.last = None;
        self.occupy(now, service)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_access_skips_the_seek_and_interleaving_pays_it() {
        let mut d = EmulatedDevice::new(EmulationConfig::hdd());
        let mb = 1_000_000;
        let t1 = d.start(Time::ZERO, 1, 0, mb, 1);
        assert_eq!(t1, Time::from_micros(100 + 8000 + 10_000));
        let t2 = d.start(Time::ZERO, 1, mb, mb, 1);
        assert_eq!(
            t2 - t1,
            Time::from_micros(100 + 10_000),
            "a continuation does not seek"
        );
        let t3 = d.start(Time::ZERO, 2, 0, mb, 1);
        let t4 = d.start(Time::ZERO, 1, 2 * mb, mb, 1);
        assert_eq!(
            t4 - t3,
            Time::from_micros(100 + 8000 + 10_000),
            "another stream in between costs a seek"
        );
    }

    #[test]
    fn list_requests_pay_for_each_extra_segment() {
        let cfg = EmulationConfig {
            segment: Time::from_micros(30),
            ..EmulationConfig::ssd()
        };
        let mut d = EmulatedDevice::new(cfg);
        let one = d.start(Time::ZERO, 1, 0, 4096, 1);
        let mut d = EmulatedDevice::new(d.config().clone());
        let five = d.start(Time::ZERO, 1, 0, 4096, 5);
        assert_eq!(five - one, Time::from_micros(4 * 30));
    }

    #[test]
    fn channels_overlap_requests() {
        let mut d = EmulatedDevice::new(EmulationConfig::ssd());
        let ends: Vec<Time> = (0..9).map(|i| d.start(Time::ZERO, i, 0, 4096, 1)).collect();
        assert!(
            ends[..8].iter().all(|&t| t == ends[0]),
            "8 channels serve 8 requests at once"
        );
        assert_eq!(ends[8], ends[0] + ends[0], "the ninth waits for a channel");
    }
}
