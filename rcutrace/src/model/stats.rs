//! Percentiles from the kernel's fine log-linear histogram.

use rcutrace_common::hist::{FINE_BITS, fine_slot_range_bits};

/// The quantiles rcutrace reports.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// How a quantile is named in the output: `0.5` -> `p50`, `0.999` -> `p99.9`.
pub fn quantile_name(q: f64) -> String {
    let percent = format!("{:.3}", q * 100.0);
    format!("p{}", percent.trim_end_matches('0').trim_end_matches('.'))
}

/// Largest relative error of an estimate: half a bucket, and a bucket is at most
/// 1/2^FINE_BITS of its lower bound.
pub const PERCENTILE_ERROR: f64 = percentile_error(FINE_BITS);

/// `PERCENTILE_ERROR` for a fine histogram with `bits` sub-bucket bits.
pub const fn percentile_error(bits: u32) -> f64 {
    1.0 / (2u64 << bits) as f64
}

/// The `q` quantile of samples sorted ascending, by nearest rank: exactly one of them.
pub fn nearest_rank(sorted: &[u64], q: f64) -> Option<u64> {
    let total = sorted.len();
    let rank = ((q * total as f64).ceil() as usize).clamp(1, total.max(1));
    sorted.get(rank - 1).copied()
}

/// Estimates the `q` quantile (nearest rank) from fine slot counts: the middle of the bucket
/// that holds it, clamped to the exact extremes.
pub fn percentile(fine: &[u64], q: f64, min: u64, max: u64) -> Option<f64> {
    percentile_bits(fine, FINE_BITS, q, min, max)
}

/// `percentile` over a fine histogram with `bits` sub-bucket bits.
pub fn percentile_bits(fine: &[u64], bits: u32, q: f64, min: u64, max: u64) -> Option<f64> {
    let total: u64 = fine.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    // The first and last ranks are the exact extremes, which an estimate would only round.
    if rank == total {
        return Some(max as f64);
    }
    if rank == 1 {
        return Some(min as f64);
    }
    let mut seen = 0;
    for (slot, &count) in fine.iter().enumerate() {
        seen += count;
        if seen >= rank {
            let (low, width) = fine_slot_range_bits(slot as u32, bits);
            let middle = low as f64 + (width - 1) as f64 / 2.0;
            return Some(middle.clamp(min as f64, max as f64));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcutrace_common::hist::{FINE_SLOTS, fine_slot};

    fn fine_of(values: &[u64]) -> Vec<u64> {
        let mut fine = vec![0; FINE_SLOTS as usize];
        for &v in values {
            fine[fine_slot(v) as usize] += 1;
        }
        fine
    }

    /// A deterministic spread of latencies from 1 ns to about 100 s.
    fn values() -> Vec<u64> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        (0..20_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let exponent = state % 37;
                1 + (state >> 20) % (1u64 << exponent)
            })
            .collect()
    }

    #[test]
    fn estimates_stay_within_the_stated_error() {
        let mut sorted = values();
        let fine = fine_of(&sorted);
        sorted.sort();
        let (min, max) = (sorted[0], *sorted.last().unwrap());
        for q in QUANTILES.into_iter().chain([0.0, 0.25, 0.75, 1.0]) {
            let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            let exact = sorted[rank - 1] as f64;
            let estimate = percentile(&fine, q, min, max).unwrap();
            let error = (estimate - exact).abs() / exact;
            assert!(error <= PERCENTILE_ERROR, "q {q}: {estimate} vs {exact}");
        }
        const { assert!(PERCENTILE_ERROR < 0.008) };
        // The callbacks' coarser histogram keeps its own, larger bound.
        let bits = 4;
        let mut coarse = vec![0; rcutrace_common::hist::fine_slots(bits) as usize];
        for &v in &sorted {
            coarse[rcutrace_common::hist::fine_slot_bits(v, bits) as usize] += 1;
        }
        for q in QUANTILES {
            let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            let exact = sorted[rank - 1] as f64;
            let estimate = percentile_bits(&coarse, bits, q, min, max).unwrap();
            assert!((estimate - exact).abs() / exact <= percentile_error(bits));
        }
    }

    #[test]
    fn quantile_names() {
        let names: Vec<String> = QUANTILES.iter().map(|&q| quantile_name(q)).collect();
        assert_eq!(names, ["p50", "p90", "p99", "p99.9"]);
    }

    #[test]
    fn extremes_are_exact() {
        let fine = fine_of(&[1_000_003, 5, 77_777_777]);
        assert_eq!(percentile(&fine, 1.0, 5, 77_777_777), Some(77_777_777.0));
        assert_eq!(percentile(&fine, 0.0, 5, 77_777_777), Some(5.0));
        assert_eq!(percentile(&[0; 10], 0.5, 0, 0), None);
    }
}
