//! A modelled device as a profiling target: concerto-core's profiling
//! procedure drives it through [`Probe`] exactly as it would drive real
//! storage.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use concerto_core::profile::{Probe, Sample};
use concerto_core::{Op, Request, Time};

use crate::device::Device;
use crate::scenario::{ConfigError, DeviceConfig};

/// Span of the device the profiled I/Os are spread over (random, aligned
/// offsets, as independent applications' I/Os land).
const REGION: u64 = 1 << 30;

pub struct DeviceProbe {
    cfg: DeviceConfig,
    seed: u64,
}

impl DeviceProbe {
    pub fn new(cfg: DeviceConfig, seed: u64) -> DeviceProbe {
        DeviceProbe { cfg, seed }
    }

    /// Reads a device description from TOML text (the keys of `[cluster.device]`).
    pub fn from_toml(text: &str, seed: u64) -> Result<DeviceProbe, ConfigError> {
        let value: toml::Value = text
            .parse::<toml::Table>()
            .map(toml::Value::Table)
            .map_err(|e| {
                ConfigError::Syntax(format!(
                    "invalid TOML: {}",
                    concerto_toml::syntax_message(text, &e)
                ))
            })?;
        let cfg: DeviceConfig = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let message = e.inner().message().trim().to_string();
            ConfigError::at(
                if path == "." {
                    "device".to_string()
                } else {
                    format!("device.{path}")
                },
                message,
            )
        })?;
        crate::scenario::validate_device("device", &cfg)?;
        Ok(DeviceProbe::new(cfg, seed))
    }
}

impl Probe for DeviceProbe {
    fn measure(&mut self, size: u64, depth: u32, count: u32) -> Sample {
        let mut device = Device::new(&self.cfg);
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ size.rotate_left(17) ^ depth as u64);
        let slots = (REGION / size).max(1);
        let mut in_flight: BinaryHeap<Reverse<(Time, Time)>> = BinaryHeap::new();
        let (mut issued, mut done, mut latency_sum, mut last) = (0u32, 0u32, 0.0, Time::ZERO);
        let submit = |now: Time,
                      device: &mut Device,
                      rng: &mut ChaCha8Rng,
                      heap: &mut BinaryHeap<Reverse<(Time, Time)>>| {
            let offset = rng.gen_range(0..slots) * size;
            let req = Request::data(0, 0, 0, now, Op::Read, 0, offset, size);
            heap.push(Reverse((device.start(now, 0, &req, rng), now)));
        };
        while issued < depth.min(count) {
            submit(Time::ZERO, &mut device, &mut rng, &mut in_flight);
            issued += 1;
        }
        while let Some(Reverse((at, started))) = in_flight.pop() {
            done += 1;
            latency_sum += (at - started).as_secs_f64();
            last = at;
            if issued < count {
                submit(at, &mut device, &mut rng, &mut in_flight);
                issued += 1;
            }
        }
        Sample::from_totals(size, depth, done, latency_sum, last.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use concerto_core::profile::{run, ProfileSpec};

    #[test]
    fn the_vpfs_device_profiles_to_d14_and_l7() {
        // The device of experiments/vpfs: 14 units of 2 ms, one 120 MB/s channel.
        let mut probe = DeviceProbe::from_toml(
            "kind = \"ssd\"\nlatency = \"2ms\"\nbandwidth = \"120MB/s\"\nparallelism = 14",
            1,
        )
        .unwrap();
        let spec = ProfileSpec {
            count: 500,
            ..ProfileSpec::default()
        };
        let p = run(&mut probe, &spec);
        let r = &p.recommendation;
        assert_eq!(r.depth, 14);
        assert_eq!(r.small_threshold, 128 * 1024);
        // 256 KiB pieces saturate it at 2 outstanding: each is worth 14 / 2 slots.
        assert_eq!(r.large_slots, 7);
        let again = run(&mut probe, &spec);
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            serde_json::to_string(&again).unwrap(),
            "deterministic"
        );
    }

    #[test]
    fn a_disk_needs_no_depth() {
        let mut probe = DeviceProbe::from_toml("kind = \"hdd\"", 1).unwrap();
        let p = run(
            &mut probe,
            &ProfileSpec {
                count: 300,
                depths: vec![1, 2, 4, 8],
                ..ProfileSpec::default()
            },
        );
        // One actuator: more outstanding I/Os add queueing, not throughput
        // (the curve is flat up to the noise of random seeks).
        for s in &p.sizes {
            let d1 = s.samples[0].throughput_bps;
            assert!(
                s.samples
                    .iter()
                    .all(|x| (x.throughput_bps / d1 - 1.0).abs() < 0.1),
                "{}: {:?}",
                s.size,
                s.samples
            );
            assert!(
                s.samples
                    .windows(2)
                    .all(|w| w[1].mean_latency_s > w[0].mean_latency_s),
                "latency grows with depth"
            );
        }
        assert!(p.recommendation.depth <= 2);
    }

    #[test]
    fn bad_device_text_names_the_key() {
        let e = DeviceProbe::from_toml("kind = \"ssd\"\nparallelism = 0", 1)
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "device.parallelism: must be > 0");
        let e = DeviceProbe::from_toml("kind = \"tape\"", 1).err().unwrap();
        assert!(e.to_string().contains("unknown variant `tape`"), "{e}");
        let e = DeviceProbe::from_toml("kind = \"ssd\"\nlatncy = \"1ms\"", 1)
            .err()
            .unwrap();
        assert!(e.to_string().contains("unknown field `latncy`"), "{e}");
    }
}
