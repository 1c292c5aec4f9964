//! Histograms read back from their buckets: bpftrace's JSON gives only each bucket's bounds,
//! from which the layout (log2, linear, or rcutrace's fine log2 slots) is told.

use anyhow::{Result, anyhow, bail};
use rcutrace_common::{
    hist::{LOG2_SLOTS, Linear, SlotBounds, log2_bounds},
    records::{Bucket, HistLayout},
};

use crate::model::Buckets;

/// A bucket's values, as the slot arithmetic states them.
fn bounds(bucket: &Bucket) -> Result<SlotBounds> {
    let u64_of = |v: i128| u64::try_from(v).map_err(|_| anyhow!("bucket bound {v} out of range"));
    Ok(match (bucket.min, bucket.max) {
        (None, Some(max)) => SlotBounds::Below(u64_of(max + 1)?),
        // bpftrace 0.17 writes the bounds of a log2 bucket at or above 2^31 as 32-bit numbers
        // that wrapped (`"min": -2147483648, "max": 0` for [2G, 4G)): the lower bound, read
        // back as unsigned, places the bucket in the log2 sequence, which gives its upper one.
        (Some(min), Some(_)) if min < 0 => {
            let low = i32::try_from(min)
                .map(|wrapped| u64::from(wrapped as u32))
                .map_err(|_| anyhow!("bucket bound {min} out of range"))?;
            if !low.is_power_of_two() || low < 1 << 31 {
                bail!("bucket bound {min} is neither a value nor a wrapped log2 bound");
            }
            SlotBounds::Range { low, high: low * 2 }
        }
        (Some(min), Some(max)) => SlotBounds::Range {
            low: u64_of(min)?,
            high: u64_of(max + 1)?,
        },
        (Some(min), None) => SlotBounds::From(u64_of(min)?),
        (None, None) => bail!("a bucket with neither bound"),
    })
}

/// bpftrace's JSON does not say how a histogram was made: log2 if every bucket is a log2
/// bucket, else linear with the step of its buckets and the bounds they show.
pub(super) fn infer_layout(buckets: &[Bucket]) -> Result<HistLayout> {
    let all = buckets.iter().map(bounds).collect::<Result<Vec<_>>>()?;
    if all
        .iter()
        .all(|b| (0..LOG2_SLOTS).any(|slot| log2_bounds(slot) == *b))
    {
        return Ok(HistLayout::Log2);
    }
    let ranges = || {
        all.iter().filter_map(|b| match b {
            SlotBounds::Range { low, high } => Some((*low, *high)),
            _ => None,
        })
    };
    let (low, high) = ranges()
        .next()
        .ok_or_else(|| anyhow!("its buckets show neither a log2 nor a linear layout"))?;
    let min = all
        .iter()
        .find_map(|b| match b {
            SlotBounds::Below(bound) => Some(*bound),
            _ => None,
        })
        .unwrap_or(low);
    let max = all
        .iter()
        .find_map(|b| match b {
            SlotBounds::From(bound) => Some(*bound),
            _ => None,
        })
        .or_else(|| ranges().next_back().map(|(_, high)| high))
        .unwrap_or(high);
    Ok(HistLayout::Linear {
        min,
        max,
        step: high - low,
    })
}

/// The model's slots for `buckets` laid out as `layout`; every bucket must be one of its slots.
pub(super) fn model_buckets(layout: HistLayout, buckets: &[Bucket]) -> Result<Buckets> {
    let mismatch = |b: &Bucket| anyhow!("bucket {b:?} is not a bucket of its {layout:?} layout");
    match layout {
        HistLayout::Log2 => {
            let mut counts = vec![0; LOG2_SLOTS as usize];
            for bucket in buckets {
                let b = bounds(bucket)?;
                let slot = (0..LOG2_SLOTS)
                    .find(|&slot| log2_bounds(slot) == b)
                    .ok_or_else(|| mismatch(bucket))?;
                counts[slot as usize] += bucket.count;
            }
            // A file may hold a million small histograms: each keeps only the slots up to
            // its last non-empty one.
            let end = counts
                .iter()
                .rposition(|&c| c != 0)
                .map_or(0, |last| last + 1);
            counts.truncate(end);
            counts.shrink_to_fit();
            Ok(Buckets::Log2(counts))
        }
        HistLayout::Linear { min, max, step } => {
            let linear = Linear { min, max, step };
            // bpftrace's own limits, which also keep a file from asking for a huge histogram.
            if step == 0 || min >= max || linear.buckets() > 1000 {
                bail!("linear layout {min},{max},{step} is not one lhist() accepts");
            }
            let slots = linear.buckets() + 2;
            let mut counts = vec![0; slots as usize];
            for bucket in buckets {
                let b = bounds(bucket)?;
                let slot = (0..slots)
                    .find(|&slot| linear.bounds(slot) == b)
                    .ok_or_else(|| mismatch(bucket))?;
                counts[slot as usize] += bucket.count;
            }
            Ok(Buckets::Linear(linear, counts))
        }
        HistLayout::Sparse { step } => {
            let buckets = buckets
                .iter()
                .map(|bucket| match bounds(bucket)? {
                    SlotBounds::Range { low, high } if step > 0 && high - low == step => {
                        Ok((low / step, bucket.count))
                    }
                    _ => Err(mismatch(bucket)),
                })
                .collect::<Result<_>>()?;
            Ok(Buckets::Sparse { step, buckets })
        }
    }
}
