//! The intervals of an `--interval` run as one report of its whole window, for `report A B`
//! to compare runs as a whole: counts and histograms add up; exact minimum and maximum are
//! the extremes of the intervals', the mean their weighted mean. Percentiles of intervals do
//! not add up, so a whole run made of several intervals has none. A `--cumulative` run's last
//! interval already is the whole run. A map's counts that add up past 64 bits are refused (no
//! run counts that many); a summary's figures stop at the largest they hold.

use anyhow::{Result, anyhow, bail};
use rcutrace_common::hist::{LOG2_SLOTS, Linear, SlotBounds, log2_bounds, sparse_bounds};

use crate::model::{
    Buckets, CountMap, CountSummary, HistMap, KeyedLosses, LatencySummary, Losses, Map,
    ReadersEstimate, Report, ScalarMap, SeriesStats, Summary,
};

/// One report of the whole run from its intervals, in order: none (a bpftrace run whose maps
/// all stayed empty has no report) is a run without a map. A histogram whose intervals have
/// layouts no one layout holds exactly is refused, naming it.
pub fn whole(mut reports: Vec<Report>) -> Result<Report> {
    let environment = reports.iter().find_map(|r| r.environment.clone());
    let cumulative = reports
        .last()
        .and_then(|r| r.time.as_ref())
        .is_some_and(|t| t.cumulative);
    let whole = if cumulative {
        reports.pop()
    } else {
        reports
            .into_iter()
            .zip(1..)
            .try_fold(None, |whole, (interval, number)| match whole {
                None => Ok(Some(interval)),
                Some(whole) => add(whole, interval, number).map(Some),
            })?
    };
    let mut whole = whole.unwrap_or_else(|| Report {
        time: None,
        maps: Vec::new(),
        summary: Summary::Latency(Vec::new()),
        environment: None,
    });
    whole.time = None;
    whole.environment = environment;
    Ok(whole)
}

/// Interval `b` (the `number`th, from 1) added to what came before it, `a`.
fn add(mut a: Report, b: Report, number: usize) -> Result<Report> {
    for map in b.maps {
        add_map(&mut a.maps, map, number)?;
    }
    a.summary = match (a.summary, b.summary) {
        (Summary::Count(x), Summary::Count(y)) => Summary::Count(add_count(x, y)),
        (Summary::Latency(x), Summary::Latency(y)) => Summary::Latency(add_latency(x, y)),
        // Callbacks have no intervals; a run that mixes kinds keeps the last.
        (_, y) => y,
    };
    Ok(a)
}

/// Whether `map` is what a map printed empty reads back as (`rcutrace_empty_map`): a count
/// map without an entry, whatever kind of map it was.
fn printed_empty(map: &Map) -> bool {
    matches!(map, Map::Count(CountMap { entries, .. }) if entries.is_empty())
}

fn add_map(maps: &mut Vec<Map>, map: Map, number: usize) -> Result<()> {
    // A map printed empty in one interval adds nothing to the same map's samples in another,
    // whatever its kind there.
    if printed_empty(&map) && maps.iter().any(|m| m.name() == map.name()) {
        return Ok(());
    }
    if !printed_empty(&map) {
        maps.retain(|m| {
            !(printed_empty(m) && m.name() == map.name() && !matches!(map, Map::Count(_)))
        });
    }
    let same = maps.iter_mut().find(|m| match (&**m, &map) {
        (Map::Count(x), Map::Count(y)) => x.name == y.name,
        (Map::Scalar(x), Map::Scalar(y)) => x.name == y.name,
        (Map::Hist(x), Map::Hist(y)) => x.name == y.name && x.key == y.key,
        _ => false,
    });
    let Some(same) = same else {
        maps.push(map);
        return Ok(());
    };
    let too_large = |name: &str| {
        anyhow!(
            "{name}: its counts add up past 2^64 - 1 at interval {number}: no run counts that \
             many, so the file is not one a run wrote"
        )
    };
    match (same, map) {
        (Map::Count(CountMap { name, entries }), Map::Count(y)) => {
            for (key, n) in y.entries {
                match entries.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, total)) => add_to(total, n).map_err(|_| too_large(name))?,
                    None => entries.push((key, n)),
                }
            }
        }
        (Map::Scalar(ScalarMap { name, value }), Map::Scalar(y)) => {
            add_to(value, y.value).map_err(|_| too_large(name))?;
        }
        (Map::Hist(HistMap { name, key, buckets }), Map::Hist(y)) => {
            let key = key.as_ref().map_or(String::new(), |k| format!("[{k}]"));
            match add_buckets(buckets, y.buckets) {
                Ok(()) => {}
                Err(NotAdded::TooLarge) => return Err(too_large(&format!("{name}{key}"))),
                Err(NotAdded::Layouts(before, this)) => bail!(
                    "{name}{key}: interval {number}'s buckets ({this}) and those of the \
                     intervals before it ({before}) have no one layout that holds both exactly \
                     (a sample is known only by its bucket), so its intervals cannot be added \
                     up: compare them one at a time with --interval-index N"
                ),
            }
        }
        (_, map) => maps.push(map),
    }
    Ok(())
}

/// `n` added to `total`; an error where the sum is past 64 bits.
fn add_to(total: &mut u64, n: u64) -> Result<(), NotAdded> {
    *total = total.checked_add(n).ok_or(NotAdded::TooLarge)?;
    Ok(())
}

/// Why one histogram's buckets could not be added to another's.
#[derive(Debug)]
enum NotAdded {
    /// No one layout holds both: theirs, described.
    Layouts(String, String),
    /// A count past 64 bits.
    TooLarge,
}

/// Adds `b`'s samples to `a`'s. Buckets of one layout add slot by slot; buckets of two (as
/// bpftrace's `lhist()` intervals read back: each shows only its non-empty range, from
/// which its layout is told) go into one layout where every non-empty bucket of both is a
/// bucket of it. Where there is none, `a` is left as it was and both layouts are returned.
fn add_buckets(a: &mut Buckets, b: Buckets) -> Result<(), NotAdded> {
    match (&mut *a, &b) {
        (Buckets::Log2(x), Buckets::Log2(y)) => return add_slots(x, y),
        (Buckets::Linear(lx, x), Buckets::Linear(ly, y)) if lx == ly => return add_slots(x, y),
        (
            Buckets::Sparse { step, buckets },
            Buckets::Sparse {
                step: sy,
                buckets: y,
            },
        ) if step == sy => {
            for &(bucket, n) in y {
                match buckets.iter_mut().find(|(b, _)| *b == bucket) {
                    Some((_, total)) => add_to(total, n)?,
                    None => buckets.push((bucket, n)),
                }
            }
            return Ok(());
        }
        _ => {}
    }
    let layouts = || NotAdded::Layouts(describe_layout(a), describe_layout(&b));
    let (Some(filled_a), Some(filled_b)) = (filled(a), filled(&b)) else {
        return Err(layouts());
    };
    let all: Vec<(SlotBounds, u64)> = filled_a.iter().chain(&filled_b).copied().collect();
    let mut too_large = false;
    let merged = candidates(a, &b, &all)
        .into_iter()
        .find_map(|target| match target.place(&all) {
            Placed::All(merged) => Some(merged),
            Placed::TooLarge => {
                too_large = true;
                None
            }
            Placed::NotABucket => None,
        });
    match merged {
        Some(merged) => {
            *a = merged;
            Ok(())
        }
        None if too_large => Err(NotAdded::TooLarge),
        None => Err(layouts()),
    }
}

/// A layout two histograms' buckets may both fit: each one's own, a linear one widened to
/// every bucket of both.
#[derive(Clone, Copy, Debug)]
enum Target {
    Log2,
    Linear(Linear),
    Sparse(u64),
}

/// bpftrace's own limit on an `lhist()`'s buckets, which keeps a widened layout small.
const MAX_LINEAR_BUCKETS: u64 = 1000;

fn candidates(a: &Buckets, b: &Buckets, all: &[(SlotBounds, u64)]) -> Vec<Target> {
    [a, b]
        .into_iter()
        .filter_map(|buckets| match buckets {
            Buckets::Log2(_) => Some(Target::Log2),
            Buckets::Sparse { step, .. } => Some(Target::Sparse(*step)),
            Buckets::Linear(linear, _) => widened(*linear, a, b, all).map(Target::Linear),
        })
        .collect()
}

/// `linear` widened to the linear layouts of `a` and `b` of its step and every bucket in
/// `all`; `None` where that is not a layout `lhist()` could have.
fn widened(linear: Linear, a: &Buckets, b: &Buckets, all: &[(SlotBounds, u64)]) -> Option<Linear> {
    let step = linear.step;
    let (mut min, mut max) = (linear.min, linear.max);
    for buckets in [a, b] {
        if let Buckets::Linear(other, _) = buckets
            && other.step == step
        {
            min = min.min(other.min);
            max = max.max(other.max);
        }
    }
    for (bounds, _) in all {
        match *bounds {
            SlotBounds::Below(bound) | SlotBounds::From(bound) => {
                min = min.min(bound);
                max = max.max(bound);
            }
            SlotBounds::Range { low, high } => {
                min = min.min(low);
                max = max.max(high);
            }
        }
    }
    let widened = Linear { min, max, step };
    let exact =
        step > 0 && min < max && (max - min) % step == 0 && widened.buckets() <= MAX_LINEAR_BUCKETS;
    exact.then_some(widened)
}

/// What became of the buckets put into one layout.
enum Placed {
    All(Buckets),
    /// One is not a bucket of the layout.
    NotABucket,
    /// A bucket's count went past 64 bits.
    TooLarge,
}

impl Target {
    /// Every bucket of `all` in this layout, added up.
    fn place(self, all: &[(SlotBounds, u64)]) -> Placed {
        match self.counts(all) {
            Some(Ok(buckets)) => Placed::All(buckets),
            Some(Err(_)) => Placed::TooLarge,
            None => Placed::NotABucket,
        }
    }

    /// `None` if a bucket of `all` is not one of this layout.
    fn counts(self, all: &[(SlotBounds, u64)]) -> Option<Result<Buckets, NotAdded>> {
        let mut sum = Ok(());
        let mut add = |total: &mut u64, n: u64| {
            if sum.is_ok() {
                sum = add_to(total, n);
            }
        };
        let buckets = match self {
            Target::Log2 => {
                let mut counts = vec![0; LOG2_SLOTS as usize];
                for &(bounds, n) in all {
                    let slot = (0..LOG2_SLOTS).find(|&slot| log2_bounds(slot) == bounds)?;
                    add(&mut counts[slot as usize], n);
                }
                Buckets::Log2(counts)
            }
            Target::Linear(linear) => {
                let mut counts = vec![0; linear.buckets() as usize + 2];
                for &(bounds, n) in all {
                    let slot = match bounds {
                        SlotBounds::Below(_) => 0,
                        SlotBounds::From(_) => linear.buckets() + 1,
                        SlotBounds::Range { low, .. } => {
                            1 + low.checked_sub(linear.min)? / linear.step
                        }
                    };
                    if slot > linear.buckets() + 1 || linear.bounds(slot) != bounds {
                        return None;
                    }
                    add(&mut counts[slot as usize], n);
                }
                Buckets::Linear(linear, counts)
            }
            Target::Sparse(step) => {
                let mut buckets: Vec<(u64, u64)> = Vec::new();
                for &(bounds, n) in all {
                    let SlotBounds::Range { low, .. } = bounds else {
                        return None;
                    };
                    let bucket = low.checked_div(step)?;
                    if sparse_bounds(bucket, step) != bounds {
                        return None;
                    }
                    match buckets.iter_mut().find(|(b, _)| *b == bucket) {
                        Some((_, total)) => add(total, n),
                        None => buckets.push((bucket, n)),
                    }
                }
                Buckets::Sparse { step, buckets }
            }
        };
        Some(sum.map(|()| buckets))
    }
}

/// A histogram's non-empty buckets by the values each holds; `None` where a bucket's values
/// cannot be stated (a bucket number beyond what 64 bits hold).
fn filled(buckets: &Buckets) -> Option<Vec<(SlotBounds, u64)>> {
    match buckets {
        Buckets::Log2(counts) => counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n != 0)
            .map(|(slot, &n)| Some((log2_bounds(u32::try_from(slot).ok()?), n)))
            .collect(),
        Buckets::Linear(linear, counts) => counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n != 0)
            .map(|(slot, &n)| Some((linear.bounds(slot as u64), n)))
            .collect(),
        Buckets::Sparse { step, buckets } => buckets
            .iter()
            .filter(|(_, n)| *n != 0)
            .map(|&(bucket, n)| {
                bucket.checked_mul(*step)?.checked_add(*step)?;
                Some((sparse_bounds(bucket, *step), n))
            })
            .collect(),
    }
}

/// A layout as `--linear` and `--buckets` write it.
fn describe_layout(buckets: &Buckets) -> String {
    match buckets {
        Buckets::Log2(_) => "log2".into(),
        Buckets::Linear(Linear { min, max, step }, _) => format!("linear {min},{max},{step}"),
        Buckets::Sparse { step, .. } => format!("exact buckets of width {step}"),
    }
}

fn add_slots(a: &mut Vec<u64>, b: &[u64]) -> Result<(), NotAdded> {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (total, n) in a.iter_mut().zip(b) {
        add_to(total, *n)?;
    }
    Ok(())
}

fn add_option(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

fn add_count(a: CountSummary, b: CountSummary) -> CountSummary {
    CountSummary {
        elapsed: a.elapsed.saturating_add(b.elapsed),
        readers: add_option(a.readers, b.readers),
        call_rcu: add_option(a.call_rcu, b.call_rcu),
        callbacks: add_option(a.callbacks, b.callbacks),
        callbacks_of: a.callbacks_of,
        grace_periods: add_option(a.grace_periods, b.grace_periods),
        missed: a.missed.saturating_add(b.missed),
        own_calls_left_out: a.own_calls_left_out.saturating_add(b.own_calls_left_out),
        keyed_losses: match (a.keyed_losses, b.keyed_losses) {
            (Some(x), Some(y)) => Some(KeyedLosses {
                map_full: x.map_full.saturating_add(y.map_full),
                stacks_lost: x.stacks_lost.saturating_add(y.stacks_lost),
            }),
            (x, y) => x.or(y),
        },
        readers_estimate: match (a.readers_estimate, b.readers_estimate) {
            (Some(x), Some(y)) => Some(ReadersEstimate {
                readers: add_option(x.readers, y.readers),
                counted: x.counted.saturating_add(y.counted),
                sampled: x.sampled.saturating_add(y.sampled),
                windows: x.windows.saturating_add(y.windows),
                // Margins of separate estimates do not add; none is claimed for the sum.
                margin: None,
                switching_grace_periods: x
                    .switching_grace_periods
                    .saturating_add(y.switching_grace_periods),
                switching_calls_left_out: x
                    .switching_calls_left_out
                    .saturating_add(y.switching_calls_left_out),
            }),
            (x, y) => x.or(y),
        },
        cross_checks: {
            let mut checks = a.cross_checks;
            crate::model::checks::add_all(&mut checks, &b.cross_checks);
            checks
        },
    }
}

fn add_latency(mut a: Vec<LatencySummary>, b: Vec<LatencySummary>) -> Vec<LatencySummary> {
    for summary in b {
        let Some(same) = a.iter_mut().find(|s| s.map_name == summary.map_name) else {
            a.push(summary);
            continue;
        };
        for series in summary.series {
            match same.series.iter_mut().find(|s| s.key == series.key) {
                Some(s) => *s = add_series(s, &series),
                None => same.series.push(series),
            }
        }
        same.losses = Losses {
            // Still in flight at the end of an interval is not lost: only the last counts.
            in_flight_at_exit: summary.losses.in_flight_at_exit,
            returns_lost: same
                .losses
                .returns_lost
                .saturating_add(summary.losses.returns_lost),
            began_before_tracing: (same.losses.began_before_tracing)
                .saturating_add(summary.losses.began_before_tracing),
            missed_by_kernel: (same.losses.missed_by_kernel)
                .saturating_add(summary.losses.missed_by_kernel),
            lost_to_full_map: (same.losses.lost_to_full_map)
                .saturating_add(summary.losses.lost_to_full_map),
            stacks_lost: add_option(same.losses.stacks_lost, summary.losses.stacks_lost),
            own_calls_left_out: (same.losses.own_calls_left_out)
                .saturating_add(summary.losses.own_calls_left_out),
        };
    }
    for summary in &mut a {
        for series in &mut summary.series {
            series.percentiles.clear();
        }
    }
    a
}

fn add_series(a: &SeriesStats, b: &SeriesStats) -> SeriesStats {
    let count = a.count.saturating_add(b.count);
    let sum = |s: &SeriesStats| s.mean_ns.map_or(0.0, |m| m * s.count as f64);
    SeriesStats {
        key: a.key.clone(),
        count,
        min_ns: a.min_ns.into_iter().chain(b.min_ns).min(),
        max_ns: a.max_ns.into_iter().chain(b.max_ns).max(),
        mean_ns: (count > 0).then(|| (sum(a) + sum(b)) / count as f64),
        percentiles_exact: false,
        percentiles: Vec::new(),
    }
}

/// How many intervals a run has, for the heading of a comparison.
pub fn describe(intervals: usize) -> String {
    match intervals {
        // bpftrace's record of the probes and nothing else: its maps all stayed empty.
        0 => " (no map recorded)".into(),
        1 => String::new(),
        n => format!(" (its {n} intervals as one)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Stamp, Unit};
    use rcutrace_common::hist::LOG2_SLOTS;

    fn slots(filled: &[(usize, u64)]) -> Buckets {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        for &(slot, n) in filled {
            counts[slot] = n;
        }
        Buckets::Log2(counts)
    }

    fn interval(
        cumulative: bool,
        calls: u64,
        samples: &[(usize, u64)],
        min: u64,
        max: u64,
    ) -> Report {
        let count = samples.iter().map(|(_, n)| n).sum();
        Report {
            time: Some(Stamp {
                time: "10:00:01".into(),
                cumulative,
            }),
            maps: vec![
                Map::Count(CountMap {
                    name: "@".into(),
                    entries: vec![("call_rcu".into(), calls)],
                }),
                Map::Hist(HistMap {
                    name: "@srlat".into(),
                    key: None,
                    buckets: slots(samples),
                }),
            ],
            summary: Summary::Latency(vec![LatencySummary {
                map_name: "@srlat".into(),
                unit: Unit::Ms,
                series: vec![SeriesStats {
                    key: None,
                    count,
                    min_ns: Some(min),
                    max_ns: Some(max),
                    mean_ns: Some(((min + max) / 2) as f64),
                    percentiles_exact: false,
                    percentiles: vec![(0.5, max as f64)],
                }],
                percentile_error: 0.01,
                losses: Losses {
                    in_flight_at_exit: calls,
                    returns_lost: 1,
                    ..Losses::default()
                },
                stages: None,
                cross_checks: Vec::new(),
                grace_periods: Vec::new(),
            }]),
            environment: None,
        }
    }

    #[test]
    fn intervals_add_up_to_the_whole_run() {
        let whole = whole(vec![
            interval(false, 3, &[(4, 2)], 10, 30),
            interval(false, 4, &[(4, 1), (5, 1)], 5, 25),
        ])
        .unwrap();
        assert_eq!(whole.time, None);
        let Map::Count(calls) = &whole.maps[0] else {
            panic!("{whole:?}")
        };
        assert_eq!(calls.entries, [("call_rcu".to_string(), 7)]);
        let Map::Hist(hist) = &whole.maps[1] else {
            panic!("{whole:?}")
        };
        assert_eq!(hist.buckets, slots(&[(4, 3), (5, 1)]));
        let Summary::Latency(summaries) = &whole.summary else {
            panic!("{whole:?}")
        };
        let series = &summaries[0].series[0];
        assert_eq!(
            (series.count, series.min_ns, series.max_ns, series.mean_ns),
            (4, Some(5), Some(30), Some(17.5))
        );
        // Percentiles of intervals do not add up: none is claimed.
        assert!(series.percentiles.is_empty());
        // In flight at the end of an interval is not lost: only the last interval's counts.
        assert_eq!(
            (
                summaries[0].losses.in_flight_at_exit,
                summaries[0].losses.returns_lost
            ),
            (4, 2)
        );
    }

    #[test]
    fn a_cumulative_run_is_its_last_interval() {
        let last = interval(true, 9, &[(4, 5)], 5, 30);
        let mut expected = last.clone();
        expected.time = None;
        assert_eq!(
            whole(vec![interval(true, 4, &[(4, 2)], 10, 30), last]).unwrap(),
            expected
        );
    }

    /// A bpftrace run whose maps all stayed empty has no report: as a whole, a run of no map.
    #[test]
    fn a_run_without_a_report_is_a_run_without_a_map() {
        let whole = whole(Vec::new()).unwrap();
        assert!(whole.maps.is_empty());
        assert_eq!(whole.summary, Summary::Latency(Vec::new()));
    }

    fn hist_interval(buckets: Buckets) -> Report {
        Report {
            time: Some(Stamp::interval("10:00:01")),
            maps: vec![Map::Hist(HistMap {
                name: "@l".into(),
                key: None,
                buckets,
            })],
            summary: Summary::Latency(Vec::new()),
            environment: None,
        }
    }

    fn whole_buckets(intervals: Vec<Buckets>) -> Result<Buckets> {
        let whole = whole(intervals.into_iter().map(hist_interval).collect())?;
        match &whole.maps[..] {
            [Map::Hist(hist)] => Ok(hist.buckets.clone()),
            maps => panic!("{maps:?}"),
        }
    }

    fn linear(min: u64, max: u64, step: u64, counts: &[u64]) -> Buckets {
        Buckets::Linear(Linear { min, max, step }, counts.to_vec())
    }

    /// bpftrace's `lhist(x, 0, 100, 10)` printed at each interval shows only its non-empty
    /// range, from which each interval's layout is told: they go into one layout that holds
    /// them all, bucket by bucket, nothing left out.
    #[test]
    fn linear_intervals_of_different_ranges_add_up_bucket_by_bucket() {
        let merged = whole_buckets(vec![
            // [10, 20) 2, [20, 30) 1
            linear(10, 30, 10, &[0, 2, 1, 0]),
            // (..., 0) 4, [0, 10) 1
            linear(0, 10, 10, &[4, 1, 0]),
            // [90, 100) 3, [100, ...) 5
            linear(90, 100, 10, &[0, 3, 5]),
            // [20, 30) 6
            linear(20, 30, 10, &[0, 6, 0]),
        ])
        .unwrap();
        let mut counts = vec![0; 12];
        counts[0] = 4; // below 0
        counts[1] = 1; // [0, 10)
        counts[2] = 2; // [10, 20)
        counts[3] = 7; // [20, 30)
        counts[10] = 3; // [90, 100)
        counts[11] = 5; // 100 and above
        assert_eq!(merged, linear(0, 100, 10, &counts));
        // An interval whose buckets all happen to be log2 buckets ([0, 1) and [1, 2) of a
        // step of 1) was told to be log2: its buckets are still the linear ones.
        let mut log2 = vec![0; 3];
        log2[1] = 2;
        log2[2] = 1;
        let merged = whole_buckets(vec![
            Buckets::Log2(log2.clone()),
            linear(5, 6, 1, &[0, 4, 0]),
        ])
        .unwrap();
        assert_eq!(merged, linear(0, 6, 1, &[0, 2, 1, 0, 0, 0, 4, 0]));
        // And the other way round: the linear ones all log2 buckets.
        let merged =
            whole_buckets(vec![Buckets::Log2(log2), linear(4, 12, 4, &[0, 3, 0, 0])]).unwrap();
        let mut slots = vec![0; LOG2_SLOTS as usize];
        (slots[1], slots[2], slots[4]) = (2, 1, 3);
        assert_eq!(merged, Buckets::Log2(slots));
    }

    /// Buckets no one layout holds exactly are refused, with both layouts and the way out;
    /// never dropped.
    #[test]
    fn intervals_whose_buckets_fit_no_one_layout_are_refused() {
        let error = whole_buckets(vec![
            // Below 10: the values under it cannot be placed in [0, 10) or below 0.
            linear(10, 30, 10, &[3, 2, 1, 0]),
            linear(0, 10, 10, &[0, 1, 0]),
        ])
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "@l: interval 2's buckets (linear 0,10,10) and those of the intervals before it \
             (linear 10,30,10) have no one layout that holds both exactly (a sample is known \
             only by its bucket), so its intervals cannot be added up: compare them one at a \
             time with --interval-index N"
        );
        // Steps that do not line up, and --buckets of two widths.
        assert!(
            whole_buckets(vec![
                linear(0, 30, 10, &[0, 1]),
                linear(0, 30, 15, &[0, 0, 1])
            ])
            .is_err()
        );
        let sparse = |step, buckets: &[(u64, u64)]| Buckets::Sparse {
            step,
            buckets: buckets.to_vec(),
        };
        assert!(whole_buckets(vec![sparse(3, &[(1, 1)]), sparse(4, &[(1, 1)])]).is_err());
        // Empty buckets need no place.
        assert_eq!(
            whole_buckets(vec![
                sparse(3, &[(1, 1)]),
                linear(0, 9, 3, &[0, 0, 2, 0, 0])
            ])
            .unwrap(),
            sparse(3, &[(1, 3)])
        );
    }

    /// Counts that add up past 64 bits over the intervals are refused, naming the map: no
    /// run counts that many.
    #[test]
    fn counts_past_64_bits_are_refused() {
        let calls = |n| Report {
            time: Some(Stamp::interval("10:00:01")),
            ..Report::of_counts(&[("call_rcu", n)], None)
        };
        let error = whole(vec![calls(u64::MAX - 1), calls(2)]).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("@: its counts add up past 2^64 - 1 at interval 2"),
            "{error}"
        );
        let error = whole_buckets(vec![slots(&[(4, u64::MAX)]), slots(&[(4, 1)])]).unwrap_err();
        assert!(
            error.to_string().starts_with("@l: its counts add up"),
            "{error}"
        );
        let error = whole_buckets(vec![
            Buckets::Log2(vec![0, u64::MAX]),
            linear(0, 4, 1, &[0, 1, 0, 0, 0, 0]),
        ])
        .unwrap_err();
        assert!(
            error.to_string().starts_with("@l: its counts add up"),
            "{error}"
        );
    }

    /// A map printed empty in one interval (`rcutrace_empty_map`) is not a second map beside
    /// the same map's samples in another.
    #[test]
    fn a_map_printed_empty_in_one_interval_adds_nothing() {
        let empty = |name: &str| Report {
            time: Some(Stamp::interval("10:00:01")),
            maps: vec![Map::Count(CountMap {
                name: name.into(),
                entries: Vec::new(),
            })],
            summary: Summary::Latency(Vec::new()),
            environment: None,
        };
        let scalar = Report {
            maps: vec![Map::Scalar(ScalarMap {
                name: "@s".into(),
                value: 3,
            })],
            ..empty("@s")
        };
        for intervals in [
            vec![empty("@s"), scalar.clone(), empty("@s")],
            vec![scalar.clone(), empty("@s")],
        ] {
            assert_eq!(whole(intervals).unwrap().maps, scalar.maps);
        }
        let hist = hist_interval(slots(&[(4, 2)]));
        let whole = whole(vec![empty("@l"), hist.clone()]).unwrap();
        assert_eq!(whole.maps, hist.maps);
    }
}
