//! Figures as saved runs write them, read back: units by their suffix, percentiles by their
//! names, windows in seconds. Shared by every reader of saved records (`saved`, and the
//! `gp` and `srlat --stages` records it hands to `grace_periods` and `stages`).

use std::time::Duration;

use rcutrace_common::records;

use crate::model::{
    Unit,
    stats::{QUANTILES, quantile_name},
};

/// `(quantile, ns)` pairs from a record's `{"p50": ns, ...}`; names not understood are left out.
pub fn percentiles(by_name: &records::Members<f64>) -> Vec<(f64, f64)> {
    by_name
        .0
        .iter()
        .filter_map(|(name, ns)| Some((quantile(name)?, *ns)))
        .collect()
}

/// A window in seconds from a file, which may say anything: no panic on a negative or
/// absurd figure, just no window.
pub fn seconds(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or_default()
}

/// The unit whose suffix (`ms`, `us`, `ns`) a record names.
pub fn unit(suffix: &str) -> Option<Unit> {
    [Unit::Ms, Unit::Us, Unit::Ns]
        .into_iter()
        .find(|u| u.suffix() == suffix)
}

/// `p99.9` back to 0.999 (the inverse of `stats::quantile_name`): the very constant of
/// `stats::QUANTILES` where one has the name (99.9 / 100 is not the same double as 0.999).
fn quantile(name: &str) -> Option<f64> {
    if let Some(&q) = QUANTILES.iter().find(|&&q| quantile_name(q) == name) {
        return Some(q);
    }
    let percent: f64 = name.strip_prefix('p')?.parse().ok()?;
    Some(percent / 100.0)
}
