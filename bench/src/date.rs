//! The date BENCHMARKS.md is stamped with, without a calendar crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        / 86_400;
    date_of_day(days)
}

/// The proleptic Gregorian date `days` days after 1970-01-01.
fn date_of_day(mut days: u64) -> String {
    let leap = |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let mut year = 1970;
    loop {
        let len = if leap(year) { 366 } else { 365 };
        if days < len {
            break;
        }
        days -= len;
        year += 1;
    }
    let february = if leap(year) { 29 } else { 28 };
    let mut month = 1;
    for len in [31, february, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] {
        if days < len {
            break;
        }
        days -= len;
        month += 1;
    }
    format!("{year:04}-{month:02}-{:02}", days + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(date_of_day(0), "1970-01-01");
        assert_eq!(date_of_day(31 + 28), "1970-03-01");
        // 2000 is a leap year, 2100 will not be.
        assert_eq!(date_of_day(11_016), "2000-02-29");
        assert_eq!(date_of_day(20_454), "2026-01-01");
        assert_eq!(date_of_day(47_540), "2100-02-28");
        assert_eq!(date_of_day(47_541), "2100-03-01");
    }
}
