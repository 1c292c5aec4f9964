//! Histogram slot arithmetic, identical in the kernel and in user space.
//!
//! The functions avoid loops and library calls so that the BPF verifier accepts them.

/// `numerator / divisor`, and 0 for a zero divisor (as BPF's own division behaves), so the
/// compiler emits no division-by-zero panic, which the verifier would reject.
#[inline(always)]
pub fn div(numerator: u64, divisor: u64) -> u64 {
    numerator.checked_div(divisor).unwrap_or(0)
}

/// Slots of a bpftrace `hist()`: negatives, 0, 1, then one per power of two up to 2^63.
pub const LOG2_SLOTS: u32 = 65;

/// The values one histogram slot holds, from which both renderers label it: the text as
/// `[low, high)`, the JSON with inclusive bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotBounds {
    /// Every value below the bound: the underflow slot (`(..., 0)` holds log2's negatives).
    Below(u64),
    /// `low..high`, `high` excluded.
    Range { low: u64, high: u64 },
    /// The bound and every value above it: a linear histogram's overflow slot.
    From(u64),
}

/// The values in `hist()` slot `slot` (see `log2_slot`).
pub fn log2_bounds(slot: u32) -> SlotBounds {
    match slot {
        0 => SlotBounds::Below(0),
        _ => {
            // Slot 1 holds 0, slot 2 holds 1, slot k the powers 2^(k-2) up to 2^(k-1).
            let low = if slot == 1 {
                0
            } else {
                1u64 << (slot - 2).min(63)
            };
            let high = if slot <= 2 { low + 1 } else { low << 1 };
            SlotBounds::Range { low, high }
        }
    }
}

/// Integer base-2 logarithm of `v` (`v` >= 1), by binary search on the bits.
#[inline(always)]
pub fn ilog2(mut v: u64) -> u32 {
    let mut log = 0;
    if v >> 32 != 0 {
        v >>= 32;
        log += 32;
    }
    if v >> 16 != 0 {
        v >>= 16;
        log += 16;
    }
    if v >> 8 != 0 {
        v >>= 8;
        log += 8;
    }
    if v >> 4 != 0 {
        v >>= 4;
        log += 4;
    }
    if v >> 2 != 0 {
        v >>= 2;
        log += 2;
    }
    if v >> 1 != 0 {
        log += 1;
    }
    log
}

/// bpftrace's `hist()` slot for `value` taken as a signed 64-bit integer: slot 0 holds negative
/// values, 1 holds 0, 2 holds 1, and `v >= 2` goes to `floor(log2 v) + 2`.
#[inline(always)]
pub fn log2_slot(value: i64) -> u32 {
    if value < 0 {
        0
    } else if value == 0 {
        1
    } else {
        ilog2(value as u64) + 2
    }
}

/// Parameters of a bpftrace `lhist(v, min, max, step)`, already validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Linear {
    pub min: u64,
    pub max: u64,
    pub step: u64,
}

impl Linear {
    /// Number of in-range buckets; the histogram has two more (underflow and overflow).
    #[inline(always)]
    pub fn buckets(&self) -> u64 {
        div(self.max - self.min, self.step)
    }

    /// Slot of `value`: 0 below `min`, `buckets() + 1` above `max`, else `1 + (v - min) / step`
    /// (so that, as in bpftrace, a value equal to `max` lands in the overflow slot).
    #[inline(always)]
    pub fn slot(&self, value: u64) -> u64 {
        if value < self.min {
            0
        } else if value > self.max {
            self.buckets() + 1
        } else {
            1 + div(value - self.min, self.step)
        }
    }

    /// The values in slot `slot` (see `slot`).
    pub fn bounds(&self, slot: u64) -> SlotBounds {
        if slot == 0 {
            SlotBounds::Below(self.min)
        } else if slot > self.buckets() {
            SlotBounds::From(self.max)
        } else {
            let low = self.min + (slot - 1) * self.step;
            SlotBounds::Range {
                low,
                high: low + self.step,
            }
        }
    }
}

/// The values in bucket `bucket` of `--buckets STEP` (kept in the kernel as `value / step`).
pub fn sparse_bounds(bucket: u64, step: u64) -> SlotBounds {
    let low = bucket.saturating_mul(step);
    SlotBounds::Range {
        low,
        high: low.saturating_add(step),
    }
}

/// Fine log-linear histogram used for percentiles: values below 2^FINE_BITS have a slot each;
/// above, every power of two is split into 2^FINE_BITS equal sub-buckets, so a bucket is never
/// wider than 1/64 of its lower bound.
pub const FINE_BITS: u32 = 6;
/// Slots needed for every u64 value.
pub const FINE_SLOTS: u32 = fine_slots(FINE_BITS);

/// Slots a fine histogram with `bits` sub-bucket bits needs for every u64 value.
pub const fn fine_slots(bits: u32) -> u32 {
    (64 - bits + 1) << bits
}

/// Fine slot of a nanosecond value.
#[inline(always)]
pub fn fine_slot(value: u64) -> u32 {
    fine_slot_bits(value, FINE_BITS)
}

/// Fine slot of `value` in a histogram with `bits` sub-bucket bits.
#[inline(always)]
pub fn fine_slot_bits(value: u64, bits: u32) -> u32 {
    if value < 1 << bits {
        return value as u32;
    }
    let exp = ilog2(value);
    let shift = exp - bits;
    let sub = ((value >> shift) & ((1 << bits) - 1)) as u32;
    ((shift + 1) << bits) + sub
}

/// Smallest value of a fine slot and the width of the slot (values `lo..lo + width`).
pub fn fine_slot_range(slot: u32) -> (u64, u64) {
    fine_slot_range_bits(slot, FINE_BITS)
}

/// `fine_slot_range` for a histogram with `bits` sub-bucket bits.
pub fn fine_slot_range_bits(slot: u32, bits: u32) -> (u64, u64) {
    let sub_buckets = 1u64 << bits;
    if (slot as u64) < sub_buckets {
        return (slot as u64, 1);
    }
    let shift = (slot >> bits) - 1;
    let sub = (slot as u64) & (sub_buckets - 1);
    ((sub_buckets + sub) << shift, 1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_slots_follow_bpftrace() {
        assert_eq!(log2_slot(-1), 0);
        assert_eq!(log2_slot(i64::MIN), 0);
        assert_eq!(log2_slot(0), 1);
        assert_eq!(log2_slot(1), 2);
        assert_eq!(log2_slot(2), 3);
        assert_eq!(log2_slot(3), 3);
        assert_eq!(log2_slot(4), 4);
        assert_eq!(log2_slot(7), 4);
        assert_eq!(log2_slot(20), 6);
        assert_eq!(log2_slot(1 << 31), 33);
        assert_eq!(log2_slot((1 << 32) + 5), 34);
        assert_eq!(log2_slot(i64::MAX), 64);
        assert_eq!(LOG2_SLOTS, 65);
    }

    fn contains(bounds: SlotBounds, value: u64) -> bool {
        match bounds {
            SlotBounds::Below(bound) => value < bound,
            SlotBounds::Range { low, high } => low <= value && value < high,
            SlotBounds::From(bound) => value >= bound,
        }
    }

    /// bpftrace's JSON bounds (inclusive) of the log2 test vector, as half-open ranges.
    #[test]
    fn log2_bounds_follow_bpftrace() {
        use SlotBounds::*;
        assert_eq!(log2_bounds(0), Below(0));
        assert_eq!(log2_bounds(1), Range { low: 0, high: 1 });
        assert_eq!(log2_bounds(2), Range { low: 1, high: 2 });
        assert_eq!(log2_bounds(3), Range { low: 2, high: 4 });
        assert_eq!(log2_bounds(4), Range { low: 4, high: 8 });
        assert_eq!(log2_bounds(6), Range { low: 16, high: 32 });
        assert_eq!(
            log2_bounds(12),
            Range {
                low: 1024,
                high: 2048
            }
        );
        assert_eq!(
            log2_bounds(64),
            Range {
                low: 1 << 62,
                high: 1 << 63
            }
        );
        // Every value lies in the slot that log2_slot gives it.
        for v in (0..5000i64).chain([i64::MAX, (1 << 62) - 1, 1 << 62, 1 << 40]) {
            let slot = log2_slot(v);
            assert!(contains(log2_bounds(slot), v as u64), "{v} in slot {slot}");
        }
        assert_eq!(log2_bounds(log2_slot(-5)), Below(0));
    }

    /// `lhist(v, 0, 10, 2)`: `(..., 0)`, `[0, 2)` .. `[8, 10)`, `[10, ...)`.
    #[test]
    fn linear_bounds_follow_bpftrace() {
        use SlotBounds::*;
        let l = Linear {
            min: 0,
            max: 10,
            step: 2,
        };
        assert_eq!(l.bounds(0), Below(0));
        assert_eq!(l.bounds(1), Range { low: 0, high: 2 });
        assert_eq!(l.bounds(5), Range { low: 8, high: 10 });
        assert_eq!(l.bounds(6), From(10));
        // lhist(v, 5, 15, 3): a partial last bucket is the overflow slot, which bpftrace
        // labels from MAX all the same.
        let l = Linear {
            min: 5,
            max: 15,
            step: 3,
        };
        assert_eq!(l.bounds(0), Below(5));
        assert_eq!(l.bounds(3), Range { low: 11, high: 14 });
        assert_eq!(l.bounds(4), From(15));
        for v in 0..40 {
            assert!(l.slot(v) == 4 || contains(l.bounds(l.slot(v)), v), "{v}");
        }
        assert_eq!(
            sparse_bounds(3, 100),
            Range {
                low: 300,
                high: 400
            }
        );
    }

    #[test]
    fn ilog2_matches_std() {
        for v in [1u64, 2, 3, 255, 256, 1 << 40, u64::MAX, (1 << 63) + 1] {
            assert_eq!(ilog2(v), v.ilog2(), "{v}");
        }
    }

    #[test]
    fn linear_slots_follow_bpftrace() {
        let l = Linear {
            min: 0,
            max: 10,
            step: 2,
        };
        assert_eq!(l.buckets(), 5);
        let slots: [u64; 6] = [2, 3, 7, 11, 9, 10].map(|v| l.slot(v));
        assert_eq!(slots, [2, 2, 4, 6, 5, 6]);
        // max not a multiple of step: the last partial bucket is the overflow slot.
        let l = Linear {
            min: 5,
            max: 15,
            step: 3,
        };
        assert_eq!(l.slot(4), 0);
        assert_eq!(l.slot(5), 1);
        assert_eq!(l.slot(13), 3);
        assert_eq!(l.slot(14), 4);
        assert_eq!(l.slot(15), 4);
        assert_eq!(l.slot(u64::MAX), 4);
        // A value equal to max lands in overflow.
        let l = Linear {
            min: 0,
            max: 1,
            step: 1,
        };
        assert_eq!(l.slot(1), 2);
        assert_eq!(l.slot(0), 1);
    }

    #[test]
    fn fine_slots_cover_every_value_and_stay_narrow() {
        assert_eq!(FINE_SLOTS, 59 * 64);
        let mut previous = 0;
        for v in (0..5000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let slot = fine_slot(v);
            assert!(slot < FINE_SLOTS);
            let (lo, width) = fine_slot_range(slot);
            assert!(
                lo <= v && v - lo < width,
                "{v} in slot {slot} = {lo}+{width}"
            );
            assert!(lo < 64 || width * 64 <= lo, "slot {slot} too wide");
            if v < 5000 {
                assert!(slot >= previous, "slots must grow with values");
                previous = slot;
            }
        }
        assert_eq!(fine_slot(u64::MAX), FINE_SLOTS - 1);
        for bits in [3, 4] {
            for v in (0..3000u64).chain([1 << 40, u64::MAX]) {
                let slot = fine_slot_bits(v, bits);
                assert!(slot < fine_slots(bits), "{v} with {bits} bits");
                let (lo, width) = fine_slot_range_bits(slot, bits);
                assert!(lo <= v && v - lo < width, "{v} with {bits} bits");
            }
        }
        // Consecutive slots tile the number line without gaps.
        for slot in 1..FINE_SLOTS {
            let (lo, _) = fine_slot_range(slot);
            let (plo, pw) = fine_slot_range(slot - 1);
            assert_eq!(plo + pw, lo, "gap before slot {slot}");
        }
    }
}
