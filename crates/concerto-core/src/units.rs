//! Quantities with units in configuration: sizes (`"64KiB"`), durations
//! (`"250ms"`) and bandwidths (`"100MB/s"`).
//!
//! Written here rather than taken from `bytesize`/`humantime` because one
//! parser covers all three kinds with the same grammar (a decimal number and a
//! unit), accepts fractions (`"1.5s"`), and gives the same error wording that
//! the configuration loader reports with the key path in front.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use crate::time::Time;

/// A size in bytes. Deserializes from an integer (bytes) or a string with a
/// unit: `B`, `KB`/`MB`/`GB`/`TB` (powers of 1000), `KiB`/`MiB`/`GiB`/`TiB`
/// (powers of 1024), or `K`/`M`/`G` (powers of 1024, as in IOR and lfs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

/// A bandwidth in bytes per second. Deserializes from a number (bytes per
/// second) or a size with `/s`, such as `"100MB/s"` or `"1GiB/s"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd, Serialize)]
#[serde(transparent)]
pub struct Bandwidth(pub f64);

impl Bandwidth {
    /// Time to move `bytes` at this bandwidth, rounded to the nanosecond.
    pub fn transfer_time(self, bytes: u64) -> Time {
        if self.0 <= 0.0 {
            return Time::MAX;
        }
        if bytes == 0 {
            // Headers of size zero, reads' requests: no division.
            return Time::ZERO;
        }
        Time::from_secs_f64(bytes as f64 / self.0)
    }
}

fn split_number(s: &str) -> Result<(f64, &str), String> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    if num.is_empty() {
        return Err(format!("\"{s}\" does not start with a number"));
    }
    let value: f64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| format!("\"{num}\" is not a number"))?;
    Ok((value, unit.trim()))
}

fn to_integer(value: f64, what: &str, s: &str) -> Result<u64, String> {
    if !value.is_finite() || value < 0.0 {
        return Err(format!("\"{s}\" is not a valid {what}"));
    }
    if value >= u64::MAX as f64 {
        return Err(format!("\"{s}\" is too large"));
    }
    Ok(value.round() as u64)
}

fn size_multiplier(unit: &str) -> Option<f64> {
    Some(match unit {
        "" | "B" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "K" | "KiB" | "k" => 1024.0,
        "M" | "MiB" => 1024.0 * 1024.0,
        "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "T" | "TiB" => 1024.0_f64.powi(4),
        _ => return None,
    })
}

/// Parses a size such as `"64KiB"`, `"4M"`, `"1.5GB"` or `"4096"`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (value, unit) = split_number(s)?;
    let mult = size_multiplier(unit).ok_or_else(|| {
        format!(
            "unknown size unit \"{unit}\" in \"{s}\" (use B, KiB, MiB, GiB, KB, MB, GB, K, M, G)"
        )
    })?;
    to_integer(value * mult, "size", s)
}

/// Parses a duration such as `"250ms"`, `"1.5s"`, `"50us"` or `"120ns"`.
pub fn parse_duration(s: &str) -> Result<Time, String> {
    let (value, unit) = split_number(s)?;
    let ns_per_unit = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" => 60e9,
        "h" => 3600e9,
        "" => return Err(format!("\"{s}\" has no unit (use ns, us, ms, s, min, h)")),
        _ => {
            return Err(format!(
                "unknown time unit \"{unit}\" in \"{s}\" (use ns, us, ms, s, min, h)"
            ))
        }
    };
    to_integer(value * ns_per_unit, "duration", s).map(Time::from_nanos)
}

/// Parses a bandwidth such as `"100MB/s"` or `"1.25GiB/s"` into bytes per second.
pub fn parse_bandwidth(s: &str) -> Result<f64, String> {
    let trimmed = s.trim();
    let Some(size) = trimmed.strip_suffix("/s") else {
        return Err(format!(
            "\"{s}\" is not a bandwidth (write it like \"100MB/s\")"
        ));
    };
    let (value, unit) = split_number(size)?;
    let mult =
        size_multiplier(unit).ok_or_else(|| format!("unknown size unit \"{unit}\" in \"{s}\""))?;
    let bps = value * mult;
    if !bps.is_finite() || bps < 0.0 {
        return Err(format!("\"{s}\" is not a valid bandwidth"));
    }
    Ok(bps)
}

/// The decimal size units, largest first, each with its size and the
/// binary unit it is usually meant as.
pub const DECIMAL_UNITS: [(u64, &str, &str); 4] = [
    (1_000_000_000_000, "TB", "TiB"),
    (1_000_000_000, "GB", "GiB"),
    (1_000_000, "MB", "MiB"),
    (1_000, "KB", "KiB"),
];

/// The binary unit a decimal size unit is usually meant as (`"KB"` for
/// `"KiB"`), or `None` when `unit` is not decimal.
fn binary_for_decimal(unit: &str) -> Option<&'static str> {
    let unit = if unit == "kB" { "KB" } else { unit };
    DECIMAL_UNITS
        .iter()
        .find(|(_, decimal, _)| *decimal == unit)
        .map(|(_, _, binary)| *binary)
}

/// `bytes` as a whole number of the largest decimal unit that divides it
/// (`4000` is 4 KB), with that unit and the binary one usually meant.
pub fn as_decimal(bytes: u64) -> Option<(u64, &'static str, &'static str)> {
    DECIMAL_UNITS
        .iter()
        .find(|(size, _, _)| bytes > 0 && bytes % size == 0)
        .map(|&(size, decimal, binary)| (bytes / size, decimal, binary))
}

/// Stripe units are whole pages on the real servers.
const PAGE: u64 = 4096;

/// What a stripe unit of `bytes` (written as `written` when that was a
/// string) means, when it is almost surely a mistake: a decimal unit
/// (`"4KB"` is 4000 bytes) or a size that is not a whole number of 4 KiB
/// pages (which the real servers refuse).
pub fn stripe_unit_warning(bytes: u64, written: Option<&str>) -> Option<String> {
    let decimal = written.and_then(|s| {
        let (number, unit) = split_number(s).ok()?;
        Some((s.trim(), number, binary_for_decimal(unit)?))
    });
    match decimal {
        Some((s, number, binary)) if bytes % PAGE != 0 => Some(format!(
            "\"{s}\" is {bytes} bytes (KB, MB and GB are powers of 1000), not a whole number of 4 KiB pages; for a stripe unit write \"{number}{binary}\""
        )),
        Some((s, number, binary)) => Some(format!(
            "\"{s}\" is {bytes} bytes (KB, MB and GB are powers of 1000); write \"{number}{binary}\" if a power of two is meant, or {bytes} to keep it"
        )),
        None if bytes % PAGE != 0 => Some(format!(
            "a stripe unit of {bytes} bytes is not a whole number of 4 KiB pages (the real servers refuse it); write a multiple of {PAGE}, e.g. \"{}KiB\"",
            (bytes / PAGE).max(1) * 4
        )),
        None => None,
    }
}

/// Deserializes a stripe unit: a size, as [`Bytes`]; one in decimal
/// units or not a whole number of pages is a trap (see [`crate::traps`]).
pub fn deserialize_stripe_unit<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
    let written = std::cell::RefCell::new(None::<String>);
    let bytes: Bytes = deserialize_quantity(
        d,
        |s| {
            *written.borrow_mut() = Some(s.to_string());
            parse_size(s).map(Bytes)
        },
        "a size such as \"64KiB\" or an integer number of bytes",
    )?;
    if let Some(message) = stripe_unit_warning(bytes.0, written.borrow().as_deref()) {
        crate::traps::spring(|| message).map_err(de::Error::custom)?;
    }
    Ok(bytes)
}

/// Deserializes a quantity given either as a string with a unit (parsed by
/// `parse`) or as a plain non-negative integer in the base unit.
pub(crate) fn deserialize_quantity<'de, D, T, F>(
    d: D,
    parse: F,
    expecting: &'static str,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    F: Fn(&str) -> Result<T, String>,
    T: FromBase,
{
    struct V<F, T> {
        parse: F,
        expecting: &'static str,
        _t: std::marker::PhantomData<T>,
    }
    impl<'de, F: Fn(&str) -> Result<T, String>, T: FromBase> Visitor<'de> for V<F, T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(self.expecting)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            (self.parse)(v).map_err(E::custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            bare_number_trap::<T>(&v.to_string()).map_err(E::custom)?;
            Ok(T::from_base(v as f64))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            if v < 0 {
                return Err(E::custom(format!("{v} is negative")));
            }
            bare_number_trap::<T>(&v.to_string()).map_err(E::custom)?;
            Ok(T::from_base(v as f64))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
            if !v.is_finite() || v < 0.0 {
                return Err(E::custom(format!("{v} is not a valid quantity")));
            }
            let value = T::from_float(v)
                .ok_or_else(|| E::custom(format!("{v} must be a whole number in this unit")))?;
            bare_number_trap::<T>(&v.to_string()).map_err(E::custom)?;
            Ok(value)
        }
    }
    d.deserialize_any(V {
        parse,
        expecting,
        _t: std::marker::PhantomData,
    })
}

/// A bare number (no unit) that is almost surely a mistake for this kind
/// of quantity is a trap (see [`crate::traps`]).
fn bare_number_trap<T: FromBase>(number: &str) -> Result<(), String> {
    match T::bare_number_warning(number) {
        Some(message) => crate::traps::spring(|| message),
        None => Ok(()),
    }
}

/// Builds a quantity from a number in its base unit.
pub(crate) trait FromBase: Sized {
    fn from_base(v: f64) -> Self;
    /// Fractions are only meaningful for some quantities.
    fn from_float(v: f64) -> Option<Self>;
    /// What a bare `number` means, when it is almost surely not what was
    /// meant, with how to write it.
    fn bare_number_warning(_number: &str) -> Option<String> {
        None
    }
}

impl FromBase for Time {
    fn from_base(v: f64) -> Time {
        Time::from_nanos(v as u64)
    }
    fn from_float(v: f64) -> Option<Time> {
        (v.fract() == 0.0).then(|| Time::from_nanos(v as u64))
    }
    /// Integers are nanoseconds, which a reader of `window = 1000` rarely
    /// means; zero is zero in any unit.
    fn bare_number_warning(number: &str) -> Option<String> {
        let ns: f64 = number.parse().ok()?;
        (ns != 0.0).then(|| {
            let scaled = [(1e9, "s"), (1e6, "ms"), (1e3, "µs")]
                .into_iter()
                .find(|(per, _)| ns >= *per)
                .map_or(String::new(), |(per, unit)| {
                    format!(" = {} {unit}", format!("{:.3}", ns / per).trim_end_matches('0').trim_end_matches('.'))
                });
            format!(
                "{number} has no unit and is read as {number} ns{scaled}; write the unit: \"{number}ns\" if that is meant, else e.g. \"{number}us\" or \"{number}ms\""
            )
        })
    }
}

impl FromBase for Bytes {
    fn from_base(v: f64) -> Bytes {
        Bytes(v as u64)
    }
    fn from_float(v: f64) -> Option<Bytes> {
        (v.fract() == 0.0).then_some(Bytes(v as u64))
    }
}

impl FromBase for Bandwidth {
    fn from_base(v: f64) -> Bandwidth {
        Bandwidth(v)
    }
    fn from_float(v: f64) -> Option<Bandwidth> {
        Some(Bandwidth(v))
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        deserialize_quantity(
            d,
            |s| parse_size(s).map(Bytes),
            "a size such as \"64KiB\" or an integer number of bytes",
        )
    }
}

impl<'de> Deserialize<'de> for Bandwidth {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bandwidth, D::Error> {
        deserialize_quantity(
            d,
            |s| parse_bandwidth(s).map(Bandwidth),
            "a bandwidth such as \"100MB/s\" or a number of bytes per second",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1.5MB"), Ok(1_500_000));
        assert_eq!(parse_size(" 4096 "), Ok(4096));
        assert!(parse_size("12 parsecs")
            .unwrap_err()
            .contains("unknown size unit"));
        assert!(parse_size("KiB")
            .unwrap_err()
            .contains("does not start with a number"));
        assert!(parse_size("1.2.3K").unwrap_err().contains("not a number"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Time::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Time::from_millis(1500)));
        assert_eq!(parse_duration("50us"), Ok(Time::from_micros(50)));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("10 fortnights")
            .unwrap_err()
            .contains("unknown time unit"));
    }

    #[test]
    fn bandwidths() {
        assert_eq!(parse_bandwidth("100MB/s"), Ok(1e8));
        assert_eq!(parse_bandwidth("1GiB/s"), Ok(1073741824.0));
        assert!(parse_bandwidth("100MB").is_err());
        assert_eq!(Bandwidth(1e9).transfer_time(1000), Time::from_micros(1));
    }
}
