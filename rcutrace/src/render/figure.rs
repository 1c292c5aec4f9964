//! How a latency prints in its unit, so that every printed figure is as precise as stated:
//! exact values (integer nanoseconds) with every decimal they need, estimates with enough
//! significant digits to keep their error bound, and bounds rounded up, never down.

use crate::model::Unit;

/// Significant digits of an estimate. Rounding to five digits moves a value by at most half a
/// unit in the fifth digit, 0.005% of it, so a percentile within 0.78% still prints within 0.8%.
const ESTIMATE_DIGITS: i32 = 5;

/// The largest relative error that printing an estimate adds to it: half a unit in the last
/// of five digits of a number of at least 10000 such units.
pub const ROUNDING_ERROR: f64 = 0.5 / 1e4;
const _: () = assert!(ESTIMATE_DIGITS == 5, "ROUNDING_ERROR is for five digits");

/// Decimals a unit's value has when it is a whole number of nanoseconds.
fn decimals(unit: Unit) -> usize {
    match unit {
        Unit::Ms => 6,
        Unit::Us => 3,
        Unit::Ns => 0,
    }
}

/// An exact number of nanoseconds in `unit`, with at least three decimals in ms and us and as
/// many more as it needs: `0.0203 ms`, `20.300 us`, `20300 ns`.
pub fn exact(nanos: u64, unit: Unit) -> String {
    format!("{} {}", exact_number(nanos, unit), unit.suffix())
}

/// `exact` without the unit, for tables whose header names it.
pub fn exact_number(nanos: u64, unit: Unit) -> String {
    let places = decimals(unit);
    let whole = nanos / unit.nanos();
    if places == 0 {
        return whole.to_string();
    }
    let fraction = format!("{:0places$}", nanos % unit.nanos());
    let needed = fraction.trim_end_matches('0').len().max(3);
    format!("{whole}.{}", &fraction[..needed])
}

/// Nanoseconds in `unit` with three decimals in ms and us (none in ns), rounded: for the
/// columns of a table, which take one precision each.
pub fn fixed_number(nanos: f64, unit: Unit) -> String {
    let places = decimals(unit).min(3);
    format!("{:.places$}", nanos / unit.nanos() as f64)
}

/// The decimals of the most precise of `values` (exact nanoseconds) in `unit`, at least three
/// (none in ns): one precision for a column of them.
pub fn places_needed(values: impl IntoIterator<Item = u64>, unit: Unit) -> usize {
    values
        .into_iter()
        .map(|ns| match exact_number(ns, unit).split_once('.') {
            Some((_, fraction)) => fraction.len(),
            None => 0,
        })
        .max()
        .unwrap_or(0)
}

/// An exact number of nanoseconds in `unit` with exactly `places` decimals (at least as many
/// as it needs: a larger `places` only adds zeros).
pub fn exact_number_places(nanos: u64, unit: Unit, places: usize) -> String {
    let all = decimals(unit);
    let whole = nanos / unit.nanos();
    let places = places.min(all);
    if places == 0 {
        return exact_number(nanos, unit);
    }
    let fraction = format!("{:0all$}", nanos % unit.nanos());
    let needed = fraction.trim_end_matches('0').len();
    format!("{whole}.{}", &fraction[..places.max(needed)])
}

/// The fewest significant digits (from 2 to 5) whose rounding leaves the printed bound of an
/// estimate within `error` as it is with five.
pub fn digits_for(error: f64) -> i32 {
    let stated = percent_bound(error + rounding_error(ESTIMATE_DIGITS));
    (2..ESTIMATE_DIGITS)
        .find(|&digits| percent_bound(error + rounding_error(digits)) == stated)
        .unwrap_or(ESTIMATE_DIGITS)
}

/// The largest relative error that rounding to `digits` significant digits adds.
pub fn rounding_error(digits: i32) -> f64 {
    0.5 / 10f64.powi(digits - 1)
}

/// `estimate_number` with `digits` significant digits.
pub fn estimate_digits(nanos: f64, unit: Unit, digits: i32) -> String {
    let value = nanos / unit.nanos() as f64;
    let magnitude = if value > 0.0 {
        value.log10().floor() as i32
    } else {
        0
    };
    let places = (digits - 1 - magnitude).max(0) as usize;
    format!("{value:.places$}")
}

/// An estimate in nanoseconds, in `unit` with five significant digits: `296.96 us`,
/// `0.020297 ms`, `12124 ms`.
pub fn estimate(nanos: f64, unit: Unit) -> String {
    format!("{} {}", estimate_number(nanos, unit), unit.suffix())
}

/// `estimate` without the unit, for tables whose header names it.
pub fn estimate_number(nanos: f64, unit: Unit) -> String {
    estimate_digits(nanos, unit, ESTIMATE_DIGITS)
}

/// A relative error bound as a percentage with one decimal, rounded up: 0.786% prints 0.8.
pub fn percent_bound(fraction: f64) -> String {
    // The small margin keeps a bound like 0.8% exactly from rounding up to 0.9 through float noise.
    let tenths = (fraction * 1000.0 - 1e-9).ceil() as u64;
    format!("{}.{}", tenths / 10, tenths % 10)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::stats::PERCENTILE_ERROR;

    #[test]
    fn exact_values_keep_every_decimal() {
        assert_eq!(exact(20_300, Unit::Ms), "0.0203 ms");
        assert_eq!(exact(20_300, Unit::Us), "20.300 us");
        assert_eq!(exact(20_300, Unit::Ns), "20300 ns");
        assert_eq!(exact(2_447_000, Unit::Ms), "2.447 ms");
        assert_eq!(exact(2_447_123, Unit::Ms), "2.447123 ms");
        assert_eq!(exact(5_177_774, Unit::Us), "5177.774 us");
        assert_eq!(exact(1, Unit::Ms), "0.000001 ms");
        assert_eq!(exact(0, Unit::Us), "0.000 us");
        assert_eq!(exact(u64::MAX, Unit::Ms), "18446744073709.551615 ms");
    }

    #[test]
    fn estimates_have_five_significant_digits() {
        assert_eq!(estimate(20_300.0, Unit::Ms), "0.020300 ms");
        assert_eq!(estimate(296_959.0, Unit::Us), "296.96 us");
        assert_eq!(estimate(8_028_000.0, Unit::Ms), "8.0280 ms");
        assert_eq!(estimate(12_124_000_000.0, Unit::Ms), "12124 ms");
        assert_eq!(estimate(123_456_789_000.0, Unit::Ms), "123457 ms");
        assert_eq!(estimate(150.5, Unit::Ns), "150.50 ns");
        assert_eq!(estimate(0.0, Unit::Ms), "0.0000 ms");
    }

    /// The issue that set the rule: every sample at 20,300 ns printed as `0.020 ms`, 1.5% off
    /// although "each within 0.8%" was printed beside it.
    #[test]
    fn printed_estimates_keep_the_stated_bound() {
        let stated: f64 = percent_bound(PERCENTILE_ERROR + ROUNDING_ERROR)
            .parse()
            .unwrap();
        assert_eq!(stated, 0.8);
        let mut truth = 1.0;
        while truth < 1e13 {
            for unit in [Unit::Ms, Unit::Us, Unit::Ns] {
                for estimated in [
                    truth * (1.0 - PERCENTILE_ERROR),
                    truth * (1.0 + PERCENTILE_ERROR),
                ] {
                    let text = estimate(estimated, unit);
                    let printed: f64 = text.split(' ').next().unwrap().parse().unwrap();
                    let error = (printed * unit.nanos() as f64 - truth).abs() / truth;
                    assert!(error <= stated / 100.0, "{truth} ns printed as {text}");
                }
            }
            truth *= 1.37;
        }
    }

    #[test]
    fn bounds_round_up() {
        assert_eq!(percent_bound(0.0078625), "0.8");
        assert_eq!(percent_bound(0.008), "0.8");
        assert_eq!(percent_bound(0.0081), "0.9");
        assert_eq!(percent_bound(0.0), "0.0");
    }

    /// Callbacks' percentiles are within 3.2%: four digits keep that bound, five add nothing.
    #[test]
    fn digits_follow_the_bound() {
        let callbacks = crate::model::stats::percentile_error(4);
        assert_eq!(digits_for(callbacks), 4);
        assert_eq!(percent_bound(callbacks + rounding_error(4)), "3.2");
        assert_eq!(digits_for(PERCENTILE_ERROR), 5);
        assert_eq!(rounding_error(5), ROUNDING_ERROR);
        assert_eq!(estimate_digits(14_942_000.0, Unit::Ms, 4), "14.94");
    }

    /// `5.81602` beside `10.492136` in one column: one precision for all.
    #[test]
    fn a_column_of_exact_values_has_one_precision() {
        let column = [5_816_020, 10_492_136, 7_000_000];
        let places = places_needed(column, Unit::Ms);
        let printed: Vec<String> = column
            .iter()
            .map(|&ns| exact_number_places(ns, Unit::Ms, places))
            .collect();
        assert_eq!(printed, ["5.816020", "10.492136", "7.000000"]);
        assert_eq!(exact_number_places(20_300, Unit::Ns, 0), "20300");
    }
}
