//! Storage profiling (vPFS+ Section III-B): how throughput grows with the
//! number of outstanding I/Os for several sizes, and how latency grows with
//! size, and what that says about SFQ(D)+'s parameters.
//!
//! The procedure is written against [`Probe`], not a device: the simulator
//! drives a modelled device with it, and a real server can drive real
//! storage with the same sweep and the same recommendation.

use crate::FieldError;
use serde::{Deserialize, Serialize};

use crate::units::Bytes;

/// What one measurement point found: `depth` I/Os of `size` bytes kept
/// outstanding until `count` had completed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub size: u64,
    pub depth: u32,
    /// Bytes completed per second over the measurement.
    #[serde(rename = "throughput_Bps")]
    pub throughput_bps: f64,
    /// Mean time from submission to completion of one I/O.
    pub mean_latency_s: f64,
}

impl Sample {
    /// The point `done` I/Os of `size` bytes make, completed `elapsed_s`
    /// seconds after the first was issued, their latencies summing to
    /// `latency_sum_s`.
    pub fn from_totals(
        size: u64,
        depth: u32,
        done: u32,
        latency_sum_s: f64,
        elapsed_s: f64,
    ) -> Sample {
        Sample {
            size,
            depth,
            throughput_bps: if elapsed_s > 0.0 {
                done as f64 * size as f64 / elapsed_s
            } else {
                0.0
            },
            mean_latency_s: latency_sum_s / done.max(1) as f64,
        }
    }
}

/// Something the procedure can keep `depth` I/Os of `size` bytes outstanding on.
pub trait Probe {
    /// Measures `count` I/Os of `size` bytes with `depth` outstanding at all times.
    fn measure(&mut self, size: u64, depth: u32, count: u32) -> Sample;

    /// Time every I/O's latency includes that the device does not spend:
    /// the round trip to a server, say. Zero for a probe at the device.
    fn overhead_s(&self) -> f64 {
        0.0
    }
}

/// The sweep to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfileSpec {
    /// I/O sizes, ascending.
    pub sizes: Vec<Bytes>,
    /// Outstanding I/Os to try, ascending.
    pub depths: Vec<u32>,
    /// I/Os completed per measurement point.
    pub count: u32,
    /// A size saturates the device at the smallest depth reaching this
    /// fraction of its best throughput.
    pub saturation: f64,
    /// The typical large I/O the servers see (one of `sizes`): PVFS2 sends
    /// large I/O to its servers in 256 KiB pieces. L is its slot cost.
    pub large_size: Bytes,
}

impl Default for ProfileSpec {
    fn default() -> ProfileSpec {
        ProfileSpec {
            sizes: [4u64, 16, 64, 128, 256, 512, 1024, 4096]
                .iter()
                .map(|k| Bytes(k * 1024))
                .collect(),
            depths: (1..=32).collect(),
            count: 2000,
            saturation: 0.95,
            large_size: Bytes(256 * 1024),
        }
    }
}

impl ProfileSpec {
    /// Checks the sweep; the error names the field.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.sizes.is_empty() || self.sizes.contains(&Bytes(0)) {
            return Err(FieldError::new(
                "sizes",
                "needs at least one size, all > 0".into(),
            ));
        }
        if self.depths.is_empty() || self.depths.contains(&0) {
            return Err(FieldError::new(
                "depths",
                "needs at least one depth, all > 0".into(),
            ));
        }
        if self.sizes.windows(2).any(|w| w[0] >= w[1]) {
            return Err(FieldError::new(
                "sizes",
                "must be strictly ascending".into(),
            ));
        }
        if self.depths.windows(2).any(|w| w[0] >= w[1]) {
            return Err(FieldError::new(
                "depths",
                "must be strictly ascending".into(),
            ));
        }
        if self.count == 0 {
            return Err(FieldError::new("count", "must be > 0".into()));
        }
        if !(self.saturation > 0.0 && self.saturation <= 1.0) {
            return Err(FieldError::new("saturation", "must be in (0, 1]".into()));
        }
        if !self.sizes.contains(&self.large_size) {
            return Err(FieldError::new(
                "large_size",
                format!(
                    "{} bytes is not one of the profiled sizes",
                    self.large_size.0
                ),
            ));
        }
        Ok(())
    }
}

/// One size's curve and where it saturates.
#[derive(Clone, Debug, Serialize)]
pub struct SizeProfile {
    pub size: u64,
    pub samples: Vec<Sample>,
    /// Smallest depth reaching `saturation` of this size's best throughput.
    pub saturation_depth: u32,
    #[serde(rename = "peak_throughput_Bps")]
    pub peak_throughput_bps: f64,
    /// Latency with one I/O outstanding.
    pub latency_s: f64,
    /// What the device itself spends on one I/O: `latency_s` less the
    /// probe's overhead.
    pub device_latency_s: f64,
    /// How many I/Os the device serves at once, by Little's law: the peak
    /// rate of I/Os times the device's time for one.
    pub parallelism: f64,
}

/// SFQ(D)+ parameters derived from a profile, with the reasoning's inputs.
#[derive(Clone, Debug, Serialize)]
pub struct Recommendation {
    /// D: the depth the smallest I/Os need to saturate the device.
    pub depth: u32,
    /// Below this size an I/O costs one slot: the largest profiled size
    /// whose latency at depth 1 is at most twice the smallest size's (its
    /// cost is still dominated by the per-I/O overhead, not the transfer).
    pub small_threshold: u64,
    /// L: how many small-I/O slots one large I/O is worth: D over the depth
    /// at which I/Os of `large_size` saturate the device, rounded (the
    /// device holds D small I/Os or that many large ones).
    pub large_slots: u32,
    pub large_size: u64,
    /// Latency growth with size at depth 1 (seconds per byte), least squares.
    pub latency_slope_s_per_byte: f64,
    /// Latency at depth 1 extrapolated to size 0.
    pub latency_intercept_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Profile {
    pub spec: ProfileSpec,
    /// The probe's overhead per I/O ([`Probe::overhead_s`]).
    pub overhead_s: f64,
    pub sizes: Vec<SizeProfile>,
    pub recommendation: Recommendation,
}

/// Runs the sweep on `probe` and derives the recommendation. `spec` must be valid.
pub fn run(probe: &mut dyn Probe, spec: &ProfileSpec) -> Profile {
    let overhead_s = probe.overhead_s();
    let sizes: Vec<SizeProfile> = spec
        .sizes
        .iter()
        .map(|&Bytes(size)| {
            let samples: Vec<Sample> = spec
                .depths
                .iter()
                .map(|&d| probe.measure(size, d, spec.count))
                .collect();
            let peak = samples.iter().map(|s| s.throughput_bps).fold(0.0, f64::max);
            let saturation_depth = samples
                .iter()
                .find(|s| s.throughput_bps >= spec.saturation * peak)
                .map_or(spec.depths[spec.depths.len() - 1], |s| s.depth);
            let latency_s = samples[0].mean_latency_s;
            let device_latency_s = (latency_s - overhead_s).max(0.0);
            SizeProfile {
                size,
                samples,
                saturation_depth,
                peak_throughput_bps: peak,
                latency_s,
                device_latency_s,
                parallelism: peak / size as f64 * device_latency_s,
            }
        })
        .collect();
    let recommendation = recommend(&sizes, spec.large_size.0);
    Profile {
        spec: spec.clone(),
        overhead_s,
        sizes,
        recommendation,
    }
}

fn recommend(sizes: &[SizeProfile], large_size: u64) -> Recommendation {
    let smallest = &sizes[0];
    // Validation guarantees large_size is profiled; the fallback is never used then.
    let large = sizes
        .iter()
        .find(|s| s.size == large_size)
        .unwrap_or(&sizes[sizes.len() - 1]);
    let depth = smallest.saturation_depth;
    let small_threshold = sizes
        .iter()
        .take_while(|s| s.latency_s <= 2.0 * smallest.latency_s)
        .last()
        .map_or(smallest.size, |s| s.size);
    let large_slots =
        ((depth as f64 / large.saturation_depth as f64).round() as u32).clamp(1, depth.max(1));
    let (slope, intercept) = least_squares(sizes.iter().map(|s| (s.size as f64, s.latency_s)));
    Recommendation {
        depth,
        small_threshold,
        large_slots,
        large_size: large.size,
        latency_slope_s_per_byte: slope,
        latency_intercept_s: intercept,
    }
}

/// Slope and intercept of the least-squares line through the points.
fn least_squares(points: impl Iterator<Item = (f64, f64)>) -> (f64, f64) {
    let pts: Vec<(f64, f64)> = points.collect();
    let n = pts.len() as f64;
    let (sx, sy) = pts
        .iter()
        .fold((0.0, 0.0), |(a, b), &(x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = pts.iter().map(|&(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = pts.iter().map(|&(x, y)| (x - mx) * (y - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (slope, my - slope * mx)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An analytic device: `units` I/Os overlap a fixed access time, and one
    /// channel moves the data at `bw` bytes per second.
    struct Analytic {
        access: f64,
        bw: f64,
        units: u32,
    }

    impl Probe for Analytic {
        fn measure(&mut self, size: u64, depth: u32, _count: u32) -> Sample {
            let transfer = size as f64 / self.bw;
            let per_io = self.access + transfer;
            let overlap = depth.min(self.units) as f64;
            let throughput = (overlap * size as f64 / per_io).min(self.bw);
            Sample {
                size,
                depth,
                throughput_bps: throughput,
                mean_latency_s: depth as f64 * size as f64 / throughput,
            }
        }
    }

    #[test]
    fn recommends_the_papers_shape_for_a_flash_like_device() {
        let mut dev = Analytic {
            access: 0.002,
            bw: 120e6,
            units: 14,
        };
        let p = run(&mut dev, &ProfileSpec::default());
        let r = &p.recommendation;
        assert_eq!(
            r.depth, 14,
            "small I/Os saturate only when all units are busy"
        );
        assert!(
            r.small_threshold >= 64 * 1024 && r.small_threshold <= 256 * 1024,
            "{}",
            r.small_threshold
        );
        assert!((3..=7).contains(&r.large_slots), "L = {}", r.large_slots);
        assert!((r.latency_slope_s_per_byte - 1.0 / 120e6).abs() < 1e-9);
        // Little's law gives the units back for small I/Os, which one
        // channel's bandwidth does not cap.
        assert!(
            (p.sizes[0].parallelism - 14.0).abs() < 0.01,
            "{}",
            p.sizes[0].parallelism
        );
        // Larger I/Os saturate at no greater depth.
        assert!(p
            .sizes
            .windows(2)
            .all(|w| w[1].saturation_depth <= w[0].saturation_depth));
    }

    #[test]
    fn bad_specs_name_the_field() {
        let bad = [
            (
                ProfileSpec {
                    sizes: vec![],
                    ..Default::default()
                },
                "sizes",
            ),
            (
                ProfileSpec {
                    sizes: vec![Bytes(8), Bytes(4)],
                    ..Default::default()
                },
                "sizes",
            ),
            (
                ProfileSpec {
                    depths: vec![0, 1],
                    ..Default::default()
                },
                "depths",
            ),
            (
                ProfileSpec {
                    count: 0,
                    ..Default::default()
                },
                "count",
            ),
            (
                ProfileSpec {
                    saturation: 1.5,
                    ..Default::default()
                },
                "saturation",
            ),
            (
                ProfileSpec {
                    large_size: Bytes(3000),
                    ..Default::default()
                },
                "large_size",
            ),
        ];
        for (spec, field) in bad {
            assert_eq!(spec.validate().unwrap_err().field, field);
        }
    }
}
