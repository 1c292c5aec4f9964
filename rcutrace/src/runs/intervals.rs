//! The intervals of an `--interval` run as one report of its whole window, for `report A B`
//! to compare runs as a whole: counts and histograms add up; exact minimum and maximum are
//! the extremes of the intervals', the mean their weighted mean. Percentiles of intervals do
//! not add up, so a whole run made of several intervals has none. A `--cumulative` run's last
//! interval already is the whole run.

use crate::model::{
    Buckets, CountMap, CountSummary, HistMap, KeyedLosses, LatencySummary, Losses, Map,
    ReadersEstimate, Report, ScalarMap, SeriesStats, Summary,
};

/// One report of the whole run from its intervals, in order (at least one).
pub fn whole(mut reports: Vec<Report>) -> Report {
    let environment = reports.iter().find_map(|r| r.environment.clone());
    let cumulative = reports
        .last()
        .and_then(|r| r.time.as_ref())
        .is_some_and(|t| t.cumulative);
    let mut whole = if cumulative || reports.len() == 1 {
        reports.pop().expect("a run has at least one report")
    } else {
        let mut intervals = reports.into_iter();
        let first = intervals.next().expect("a run has at least one report");
        intervals.fold(first, add)
    };
    whole.time = None;
    whole.environment = environment;
    whole
}

/// Interval `b` added to what came before it, `a`.
fn add(mut a: Report, b: Report) -> Report {
    for map in b.maps {
        add_map(&mut a.maps, map);
    }
    a.summary = match (a.summary, b.summary) {
        (Summary::Count(x), Summary::Count(y)) => Summary::Count(add_count(x, y)),
        (Summary::Latency(x), Summary::Latency(y)) => Summary::Latency(add_latency(x, y)),
        // Callbacks have no intervals; a run that mixes kinds keeps the last.
        (_, y) => y,
    };
    a
}

fn add_map(maps: &mut Vec<Map>, map: Map) {
    let same = maps.iter_mut().find(|m| match (&**m, &map) {
        (Map::Count(x), Map::Count(y)) => x.name == y.name,
        (Map::Scalar(x), Map::Scalar(y)) => x.name == y.name,
        (Map::Hist(x), Map::Hist(y)) => x.name == y.name && x.key == y.key,
        _ => false,
    });
    let Some(same) = same else {
        maps.push(map);
        return;
    };
    match (same, map) {
        (Map::Count(CountMap { entries, .. }), Map::Count(y)) => {
            for (key, n) in y.entries {
                match entries.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, total)) => *total += n,
                    None => entries.push((key, n)),
                }
            }
        }
        (Map::Scalar(ScalarMap { value, .. }), Map::Scalar(y)) => *value += y.value,
        (Map::Hist(HistMap { buckets, .. }), Map::Hist(y)) => add_buckets(buckets, y.buckets),
        (_, map) => maps.push(map),
    }
}

fn add_buckets(a: &mut Buckets, b: Buckets) {
    match (a, b) {
        (Buckets::Log2(x), Buckets::Log2(y)) => add_slots(x, &y),
        (Buckets::Linear(lx, x), Buckets::Linear(ly, y)) if *lx == ly => add_slots(x, &y),
        (
            Buckets::Sparse { step, buckets },
            Buckets::Sparse {
                step: sy,
                buckets: y,
            },
        ) if *step == sy => {
            for (bucket, n) in y {
                match buckets.iter_mut().find(|(b, _)| *b == bucket) {
                    Some((_, total)) => *total += n,
                    None => buckets.push((bucket, n)),
                }
            }
        }
        // One run has one layout per map; anything else is left as the first interval's.
        _ => {}
    }
}

fn add_slots(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (total, n) in a.iter_mut().zip(b) {
        *total += n;
    }
}

fn add_option(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

fn add_count(a: CountSummary, b: CountSummary) -> CountSummary {
    CountSummary {
        elapsed: a.elapsed + b.elapsed,
        readers: add_option(a.readers, b.readers),
        call_rcu: add_option(a.call_rcu, b.call_rcu),
        callbacks: add_option(a.callbacks, b.callbacks),
        callbacks_of: a.callbacks_of,
        grace_periods: add_option(a.grace_periods, b.grace_periods),
        missed: a.missed + b.missed,
        own_calls_left_out: a.own_calls_left_out + b.own_calls_left_out,
        keyed_losses: match (a.keyed_losses, b.keyed_losses) {
            (Some(x), Some(y)) => Some(KeyedLosses {
                map_full: x.map_full + y.map_full,
                stacks_lost: x.stacks_lost + y.stacks_lost,
            }),
            (x, y) => x.or(y),
        },
        readers_estimate: match (a.readers_estimate, b.readers_estimate) {
            (Some(x), Some(y)) => Some(ReadersEstimate {
                readers: add_option(x.readers, y.readers),
                counted: x.counted + y.counted,
                sampled: x.sampled + y.sampled,
                windows: x.windows + y.windows,
                // Margins of separate estimates do not add; none is claimed for the sum.
                margin: None,
                switching_grace_periods: x.switching_grace_periods + y.switching_grace_periods,
                switching_calls_left_out: x.switching_calls_left_out + y.switching_calls_left_out,
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
            returns_lost: same.losses.returns_lost + summary.losses.returns_lost,
            began_before_tracing: same.losses.began_before_tracing
                + summary.losses.began_before_tracing,
            missed_by_kernel: same.losses.missed_by_kernel + summary.losses.missed_by_kernel,
            lost_to_full_map: same.losses.lost_to_full_map + summary.losses.lost_to_full_map,
            stacks_lost: add_option(same.losses.stacks_lost, summary.losses.stacks_lost),
            own_calls_left_out: same.losses.own_calls_left_out + summary.losses.own_calls_left_out,
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
    let count = a.count + b.count;
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
            }]),
            environment: None,
        }
    }

    #[test]
    fn intervals_add_up_to_the_whole_run() {
        let whole = whole(vec![
            interval(false, 3, &[(4, 2)], 10, 30),
            interval(false, 4, &[(4, 1), (5, 1)], 5, 25),
        ]);
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
            whole(vec![interval(true, 4, &[(4, 2)], 10, 30), last]),
            expected
        );
    }
}
