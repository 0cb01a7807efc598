//! The numbers users compare: completion-time statistics, the spread of an
//! application's finish times across servers, bandwidth, and fairness.

use serde::Serialize;

/// Summary statistics of a sample (seconds, bytes, whatever the caller uses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub count: u64,
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Distribution {
    /// Reorders `samples` in place (the order statistics are found by
    /// selection, in linear time: the simulator summarises every
    /// application's operations and all of them pooled, and sorting them
    /// was a tenth of a run's time). NaNs are ignored. An empty sample
    /// gives all zeros.
    pub fn from_samples(samples: &mut Vec<f64>) -> Distribution {
        samples.retain(|x| !x.is_nan());
        if samples.is_empty() {
            return Distribution::default();
        }
        let n = samples.len();
        let mean = samples.iter().sum::<f64>() / n as f64;
        let [p50, p95, p99] = percentiles(samples, [0.50, 0.95, 0.99]);
        Distribution {
            count: n as u64,
            mean,
            min: samples.iter().copied().fold(f64::INFINITY, f64::min),
            p50,
            p95,
            p99,
            max: samples.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// Linear-interpolation percentiles (`qs` ascending, in [0, 1]) of a
/// non-empty sample without NaNs, which this reorders. Each needs the
/// sample's values of two ranks; they are selected in ascending order,
/// each in what lies above the previous one.
fn percentiles<const N: usize>(samples: &mut [f64], qs: [f64; N]) -> [f64; N] {
    let last = samples.len() - 1;
    let mut from = 0;
    let mut value_at = |rank: usize| {
        if rank >= from {
            samples[from..].select_nth_unstable_by(rank - from, f64::total_cmp);
            from = rank + 1;
        }
        samples[rank]
    };
    qs.map(|q| {
        let pos = q.clamp(0.0, 1.0) * last as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        let (a, b) = (value_at(lo), value_at(hi));
        a + (b - a) * (pos - lo as f64)
    })
}

/// Mean and sample standard deviation.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// Jain's fairness index in its weighted form (as in vPFS+): with
/// `x_i = service_i / weight_i`, `J = (Σ x_i)² / (n · Σ x_i²)`. One means
/// service exactly proportional to the weights; `1/n` means one application
/// got everything. Entries with a non-positive weight are skipped.
pub fn jain_index(service: &[f64], weights: &[f64]) -> f64 {
    let xs: Vec<f64> = service
        .iter()
        .zip(weights)
        .filter(|(_, &w)| w > 0.0)
        .map(|(&s, &w)| s / w)
        .collect();
    let n = xs.len() as f64;
    let sum: f64 = xs.iter().sum();
    let sum_sq: f64 = xs.iter().map(|x| x * x).sum();
    if n == 0.0 || sum_sq == 0.0 {
        return 1.0;
    }
    sum * sum / (n * sum_sq)
}

/// Bytes per second over a span; zero for an empty span.
pub fn bandwidth(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / seconds
    } else {
        0.0
    }
}

/// For one application: the ratio of its last to its first per-server finish
/// time (the coordination paper's MAX/MIN, Figures 3 and 5). `finishes` holds
/// each server's finish time measured from the application's issue time.
pub fn finish_spread(finishes: &[f64]) -> Option<f64> {
    let min = finishes
        .iter()
        .copied()
        .filter(|x| !x.is_nan())
        .fold(f64::INFINITY, f64::min);
    let max = finishes
        .iter()
        .copied()
        .filter(|x| !x.is_nan())
        .fold(f64::NEG_INFINITY, f64::max);
    (min.is_finite() && min > 0.0).then(|| max / min)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The textbook definition the selection must agree with: sort, then
    /// interpolate between the two ranks around q · (n - 1).
    fn percentile_of_sorted(sorted: &[f64], q: f64) -> f64 {
        let pos = q * (sorted.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
    }

    proptest! {
        /// Selection finds exactly the order statistics sorting finds,
        /// ties, repeats and NaNs included.
        #[test]
        fn selected_percentiles_are_the_sorted_ones(
            xs in prop::collection::vec(prop_oneof![
                8 => (0u32..50).prop_map(f64::from),
                8 => -1e6f64..1e6,
                1 => Just(f64::NAN),
            ], 0..300)
        ) {
            let mut sorted: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
            sorted.sort_by(f64::total_cmp);
            let d = Distribution::from_samples(&mut xs.clone());
            prop_assert_eq!(d.count, sorted.len() as u64);
            if let (Some(&min), Some(&max)) = (sorted.first(), sorted.last()) {
                prop_assert_eq!((d.min, d.max), (min, max));
                prop_assert_eq!(d.p50, percentile_of_sorted(&sorted, 0.50));
                prop_assert_eq!(d.p95, percentile_of_sorted(&sorted, 0.95));
                prop_assert_eq!(d.p99, percentile_of_sorted(&sorted, 0.99));
                let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
                prop_assert!((d.mean - mean).abs() <= 1e-9 * mean.abs().max(1.0));
            }
        }
    }

    #[test]
    fn distribution_of_a_known_sample() {
        let mut xs: Vec<f64> = (1..=101).map(f64::from).rev().collect();
        let d = Distribution::from_samples(&mut xs);
        assert_eq!(d.count, 101);
        assert_eq!(d.mean, 51.0);
        assert_eq!(
            (d.min, d.p50, d.p95, d.p99, d.max),
            (1.0, 51.0, 96.0, 100.0, 101.0)
        );
        assert_eq!(
            Distribution::from_samples(&mut vec![]),
            Distribution::default()
        );
    }

    #[test]
    fn jain_index_extremes() {
        assert!((jain_index(&[2.0, 1.0], &[2.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain_index(&[1.0, 0.0, 0.0, 0.0], &[1.0; 4]) - 0.25).abs() < 1e-12);
        assert!(jain_index(&[1.0, 1.0], &[2.0, 1.0]) < 1.0);
    }

    #[test]
    fn spread_and_sd() {
        assert_eq!(finish_spread(&[1.0, 4.4, 2.0]), Some(4.4));
        assert_eq!(finish_spread(&[]), None);
        let (m, sd) = mean_sd(&[1.0, 2.0, 3.0]);
        assert_eq!((m, sd), (2.0, 1.0));
        assert_eq!(bandwidth(10, 0.0), 0.0);
    }
}
