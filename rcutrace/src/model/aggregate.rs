//! Latency samples into the histograms and exact statistics the report shows, one series per
//! timed function and key. The display slots come from `rcutrace_common::hist`, the same code
//! that labels them, so a sample and its row can never disagree.

use std::collections::{BTreeMap, HashMap};

use rcutrace_common::{
    attribution::Attribution,
    hist::{self, LOG2_SLOTS, Linear},
    latency::{RECORD_SAMPLE, Sample, record_kind},
};

use crate::{
    model::stats::{QUANTILES, nearest_rank, percentile},
    model::{Buckets, SeriesStats},
};

/// The display histogram's layout, as chosen on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// bpftrace's `hist()`.
    Log2,
    /// bpftrace's `lhist()`.
    Linear(Linear),
    /// Exact buckets of this width, only the non-empty ones.
    Sparse(u64),
}

/// One histogram with its exact statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    display: Display,
    /// Fine log-linear slots of the nanosecond values, for percentiles (sparse).
    fine: BTreeMap<u32, u64>,
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
    /// Every sample, ascending, while there are at most `EXACT_SAMPLES`: their percentiles
    /// are exact.
    exact: Option<Vec<u64>>,
}

/// Up to this many samples a series keeps them all. Fewer than 1000 samples cannot tell
/// p99.9 from the maximum, and an estimate there would print beside, and below, the exact
/// maximum.
pub const EXACT_SAMPLES: usize = 1000;

/// The display histogram, with the layout's parameters beside its counts.
#[derive(Clone, Debug, PartialEq)]
enum Display {
    Log2(Vec<u64>),
    Linear(Linear, Vec<u64>),
    Sparse {
        step: u64,
        buckets: BTreeMap<u64, u64>,
    },
}

impl Series {
    pub fn new(layout: Layout) -> Self {
        let display = match layout {
            Layout::Log2 => Display::Log2(vec![0; LOG2_SLOTS as usize]),
            Layout::Linear(linear) => {
                Display::Linear(linear, vec![0; linear.buckets() as usize + 2])
            }
            Layout::Sparse(step) => Display::Sparse {
                step,
                buckets: BTreeMap::new(),
            },
        };
        Series {
            display,
            fine: BTreeMap::new(),
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            exact: Some(Vec::new()),
        }
    }

    /// Adds one call of `nanos`; the display histogram counts it in whole `unit_ns` units,
    /// truncated, as the bpftrace scripts do.
    pub fn record(&mut self, nanos: u64, unit_ns: u64) {
        let value = hist::div(nanos, unit_ns);
        match &mut self.display {
            Display::Log2(slots) => slots[hist::log2_slot(value as i64) as usize] += 1,
            Display::Linear(linear, slots) => slots[linear.slot(value) as usize] += 1,
            Display::Sparse { step, buckets } => {
                *buckets.entry(hist::div(value, *step)).or_default() += 1;
            }
        }
        *self.fine.entry(hist::fine_slot(nanos)).or_default() += 1;
        self.count += 1;
        self.sum_ns += u128::from(nanos);
        self.min_ns = self.min_ns.min(nanos);
        self.max_ns = self.max_ns.max(nanos);
        // Kept in order, so that a series is the same however its samples arrived.
        if let Some(exact) = &mut self.exact {
            let at = exact.partition_point(|&v| v <= nanos);
            exact.insert(at, nanos);
        }
        if self.exact.as_ref().is_some_and(|e| e.len() > EXACT_SAMPLES) {
            self.exact = None;
        }
    }

    /// Adds `other` (same layout) to this series.
    pub fn merge(&mut self, other: Series) {
        match (&mut self.display, other.display) {
            (Display::Log2(mine), Display::Log2(theirs))
            | (Display::Linear(_, mine), Display::Linear(_, theirs)) => {
                for (a, b) in mine.iter_mut().zip(theirs) {
                    *a += b;
                }
            }
            (
                Display::Sparse { buckets: mine, .. },
                Display::Sparse {
                    buckets: theirs, ..
                },
            ) => {
                for (bucket, n) in theirs {
                    *mine.entry(bucket).or_default() += n;
                }
            }
            _ => unreachable!("series of one run share a layout"),
        }
        for (slot, n) in other.fine {
            *self.fine.entry(slot).or_default() += n;
        }
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.exact = match (self.exact.take(), other.exact) {
            (Some(mut mine), Some(theirs)) if mine.len() + theirs.len() <= EXACT_SAMPLES => {
                mine.extend(theirs);
                mine.sort_unstable();
                Some(mine)
            }
            _ => None,
        };
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Every call's nanoseconds added up, exactly.
    pub fn sum_ns(&self) -> u128 {
        self.sum_ns
    }

    pub fn buckets(&self) -> Buckets {
        match &self.display {
            Display::Log2(slots) => Buckets::Log2(slots.clone()),
            Display::Linear(linear, slots) => Buckets::Linear(*linear, slots.clone()),
            Display::Sparse { step, buckets } => Buckets::Sparse {
                step: *step,
                buckets: buckets.iter().map(|(&b, &n)| (b, n)).collect(),
            },
        }
    }

    pub fn stats(&self, key: Option<String>) -> SeriesStats {
        if self.count == 0 {
            return SeriesStats {
                key,
                count: 0,
                min_ns: None,
                max_ns: None,
                mean_ns: None,
                percentiles_exact: false,
                percentiles: Vec::new(),
            };
        }
        if let Some(sorted) = &self.exact {
            return SeriesStats {
                key,
                count: self.count,
                min_ns: Some(self.min_ns),
                max_ns: Some(self.max_ns),
                mean_ns: Some(self.sum_ns as f64 / self.count as f64),
                percentiles: QUANTILES
                    .iter()
                    .filter_map(|&q| nearest_rank(sorted, q).map(|ns| (q, ns as f64)))
                    .collect(),
                percentiles_exact: true,
            };
        }
        let size = self.fine.keys().last().map_or(0, |&slot| slot as usize + 1);
        let mut fine = vec![0; size];
        for (&slot, &n) in &self.fine {
            fine[slot as usize] = n;
        }
        let percentiles = QUANTILES
            .iter()
            .filter_map(|&q| percentile(&fine, q, self.min_ns, self.max_ns).map(|ns| (q, ns)))
            .collect();
        SeriesStats {
            key,
            count: self.count,
            min_ns: Some(self.min_ns),
            max_ns: Some(self.max_ns),
            mean_ns: Some(self.sum_ns as f64 / self.count as f64),
            percentiles,
            percentiles_exact: false,
        }
    }
}

/// Every series of a run, by timed function index and raw key.
#[derive(Debug)]
pub struct Aggregate {
    layout: Layout,
    /// Nanoseconds per display unit, by timed function index.
    unit_ns: Vec<u64>,
    series: HashMap<Attribution, Series>,
    /// Records that were not samples (a size the programs never send).
    pub malformed: u64,
}

impl Aggregate {
    pub fn new(layout: Layout, unit_ns: Vec<u64>) -> Self {
        Aggregate {
            layout,
            unit_ns,
            series: HashMap::new(),
            malformed: 0,
        }
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Adds one ring-buffer record.
    pub fn add(&mut self, record: &[u8]) {
        match decode(record) {
            Some(sample) => self.add_sample(&sample),
            None => self.malformed += 1,
        }
    }

    /// Adds one latency sample.
    pub fn add_sample(&mut self, sample: &Sample) {
        let Some(&unit_ns) = self.unit_ns.get(sample.key.event as usize) else {
            self.malformed += 1;
            return;
        };
        let layout = self.layout;
        self.series
            .entry(sample.key)
            .or_insert_with(|| Series::new(layout))
            .record(sample.nanos, unit_ns);
    }

    /// The series of timed function `index`, by raw key, kept for later.
    pub fn copy(&self, index: u32) -> Vec<(Attribution, Series)> {
        self.series
            .iter()
            .filter(|(k, _)| k.event == index)
            .map(|(k, s)| (*k, s.clone()))
            .collect()
    }

    /// The series of timed function `index`, by raw key, taken out.
    pub fn take(&mut self, index: u32) -> Vec<(Attribution, Series)> {
        let keys: Vec<Attribution> = self
            .series
            .keys()
            .filter(|k| k.event == index)
            .copied()
            .collect();
        keys.into_iter()
            .filter_map(|k| self.series.remove(&k).map(|s| (k, s)))
            .collect()
    }
}

fn decode(record: &[u8]) -> Option<Sample> {
    if record_kind(record) != Some(RECORD_SAMPLE) {
        return None;
    }
    rcutrace_common::latency::read_record(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(event: u32, nanos: u64) -> Vec<u8> {
        let sample = Sample {
            kind: RECORD_SAMPLE,
            nanos,
            key: Attribution {
                event,
                cpu: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        let bytes = unsafe {
            std::slice::from_raw_parts((&raw const sample).cast::<u8>(), size_of::<Sample>())
        };
        bytes.to_vec()
    }

    #[test]
    fn samples_land_in_bpftrace_slots_with_exact_statistics() {
        let mut aggregate = Aggregate::new(Layout::Log2, vec![1_000, 1_000_000]);
        for nanos in [2_500, 3_999, 20_000, 7_000] {
            aggregate.add(&record(0, nanos));
        }
        aggregate.add(&record(1, 5_000_000));
        aggregate.add(&[1, 2, 3]);
        aggregate.add(&record(9, 1));
        // Another program family's record, as long as a sample.
        let mut other = record(0, 5);
        other[8] = 7;
        aggregate.add(&other);
        assert_eq!(aggregate.malformed, 3);
        let series = aggregate.take(0);
        assert_eq!(series.len(), 1);
        let (_, s) = &series[0];
        // 2, 3, 20 and 7 us: [2, 4) twice, [4, 8) once, [16, 32) once.
        let Buckets::Log2(slots) = s.buckets() else {
            panic!("log2");
        };
        assert_eq!((slots[3], slots[4], slots[6]), (2, 1, 1));
        let stats = s.stats(None);
        assert_eq!(
            (stats.count, stats.min_ns, stats.max_ns),
            (4, Some(2_500), Some(20_000))
        );
        assert_eq!(stats.mean_ns, Some(8_374.75));
        assert_eq!(aggregate.take(1)[0].1.count(), 1);
        assert!(aggregate.take(0).is_empty());
    }

    #[test]
    fn linear_and_sparse_layouts() {
        let linear = Linear {
            min: 0,
            max: 10,
            step: 2,
        };
        let mut s = Series::new(Layout::Linear(linear));
        for v in [2, 3, 7, 11] {
            s.record(v, 1);
        }
        assert_eq!(
            s.buckets(),
            Buckets::Linear(linear, vec![0, 0, 2, 0, 1, 0, 1])
        );
        let mut sparse = Series::new(Layout::Sparse(5));
        for v in [1, 4, 12, 13] {
            sparse.record(v, 1);
        }
        assert_eq!(
            sparse.buckets(),
            Buckets::Sparse {
                step: 5,
                buckets: vec![(0, 2), (2, 2)]
            }
        );
    }

    #[test]
    fn merged_series_equal_one_series_of_all_samples() {
        let mut a = Series::new(Layout::Log2);
        let mut b = Series::new(Layout::Log2);
        let mut all = Series::new(Layout::Log2);
        for (i, v) in [5u64, 900, 77, 1 << 40, 3].into_iter().enumerate() {
            if i % 2 == 0 { &mut a } else { &mut b }.record(v, 1);
            all.record(v, 1);
        }
        a.merge(b);
        assert_eq!(a, all);
    }

    /// Count 19: p99 printed 19.792 ms beside a max of 19.893079 ms. Few samples are kept,
    /// and their percentiles are the nearest-rank samples themselves.
    #[test]
    fn few_samples_give_exact_percentiles() {
        let mut s = Series::new(Layout::Log2);
        let samples: Vec<u64> = (1..=19).map(|i| 9_000_000 + i * 571_003).collect();
        for &v in samples.iter().rev() {
            s.record(v, 1_000_000);
        }
        let stats = s.stats(None);
        assert!(stats.percentiles_exact);
        let p = |q: f64| stats.percentiles.iter().find(|(x, _)| *x == q).unwrap().1;
        assert_eq!(p(0.5), samples[9] as f64);
        assert_eq!(p(0.9), samples[17] as f64);
        assert_eq!(p(0.99), *samples.last().unwrap() as f64);
        assert_eq!(Some(p(0.999) as u64), stats.max_ns);
        // Beyond EXACT_SAMPLES: estimates, never above the max and the top rank the max.
        for i in 0..EXACT_SAMPLES as u64 {
            s.record(1_000 + i * 7, 1_000_000);
        }
        let stats = s.stats(None);
        assert!(!stats.percentiles_exact);
        assert!(
            stats
                .percentiles
                .iter()
                .all(|&(_, ns)| ns <= stats.max_ns.unwrap() as f64)
        );
    }
}
