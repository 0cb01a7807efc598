//! Integer-nanosecond time, used both for instants and for spans.
//!
//! Integers rather than floats so that simulated runs are bit-for-bit
//! reproducible and event order never depends on rounding.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

use serde::{Deserialize, Deserializer, Serialize};

/// A point in time or a span of time, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Time(u64);

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Time {
        Time(ns)
    }
    pub const fn from_micros(us: u64) -> Time {
        Time(us.saturating_mul(1_000))
    }
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(1_000_000))
    }
    pub const fn from_secs(s: u64) -> Time {
        Time(s.saturating_mul(1_000_000_000))
    }
    /// Rounds to the nearest nanosecond; negative or NaN inputs give zero and
    /// values beyond the range saturate.
    ///
    /// Rounds half away from zero, as `f64::round`, but without its libm
    /// call: the simulator converts every transfer time, and the call was
    /// a noticeable part of a run. Exact: below 2^53 nanoseconds the
    /// fraction `ns - whole` is representable, above it `ns` is whole.
    pub fn from_secs_f64(s: f64) -> Time {
        let ns = s * 1e9;
        if ns.is_nan() || ns <= 0.0 {
            Time::ZERO
        } else if ns >= u64::MAX as f64 {
            Time::MAX
        } else {
            let whole = ns as u64;
            Time(whole + u64::from(ns - whole as f64 >= 0.5))
        }
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub const fn saturating_sub(self, other: Time) -> Time {
        Time(self.0.saturating_sub(other.0))
    }
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Add for Time {
    type Output = Time;
    fn add(self, rhs: Time) -> Time {
        Time(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Time {
    fn add_assign(&mut self, rhs: Time) {
        *self = *self + rhs;
    }
}

impl Sub for Time {
    type Output = Time;
    /// Saturating: a span never goes negative.
    fn sub(self, rhs: Time) -> Time {
        self.saturating_sub(rhs)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns >= 1_000_000_000 {
            write!(f, "{:.3} s", ns as f64 / 1e9)
        } else if ns >= 1_000_000 {
            write!(f, "{:.3} ms", ns as f64 / 1e6)
        } else if ns >= 1_000 {
            write!(f, "{:.3} us", ns as f64 / 1e3)
        } else {
            write!(f, "{ns} ns")
        }
    }
}

/// Accepts either an integer number of nanoseconds or a string with a unit
/// such as `"250ms"`, `"1.5s"` or `"50us"`.
impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Time, D::Error> {
        crate::units::deserialize_quantity(
            d,
            crate::units::parse_duration,
            "a duration such as \"250ms\" or an integer number of nanoseconds",
        )
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The conversion rounds exactly as `f64::round` would.
        #[test]
        fn seconds_round_to_the_nearest_nanosecond_as_f64_round_does(
            s in prop_oneof![
                -1.0f64..1e-6,
                0.0f64..1e3,
                // Exact halves of a nanosecond, and values past 2^53 ns.
                (0u64..1 << 40).prop_map(|n| (n as f64 + 0.5) / 1e9),
                1e6f64..1e11,
                Just(f64::NAN),
                Just(f64::INFINITY),
            ]
        ) {
            let r = (s * 1e9).round();
            let expected = if r.is_nan() || r <= 0.0 {
                0
            } else if r >= u64::MAX as f64 {
                u64::MAX
            } else {
                r as u64
            };
            prop_assert_eq!(Time::from_secs_f64(s).as_nanos(), expected);
        }
    }

    #[test]
    fn conversions_round_trip() {
        assert_eq!(Time::from_millis(250).as_nanos(), 250_000_000);
        assert_eq!(Time::from_secs_f64(1.5), Time::from_millis(1500));
        assert_eq!(Time::from_secs_f64(-1.0), Time::ZERO);
        assert_eq!(Time::from_secs_f64(f64::NAN), Time::ZERO);
        assert_eq!(Time::from_micros(3) - Time::from_micros(5), Time::ZERO);
        assert_eq!(Time::MAX + Time::from_nanos(1), Time::MAX);
        assert_eq!(Time::from_millis(2).to_string(), "2.000 ms");
    }
}
