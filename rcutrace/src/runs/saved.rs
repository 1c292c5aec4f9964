//! A saved `-f json` run read back into the report model, so that `rcutrace report` prints it
//! with the very renderer the live run used. rcutrace's runs carry every figure the text
//! shows; bpftrace's own JSON carries its maps and histograms (a histogram's layout is then
//! told from its bucket bounds).

use std::{path::Path, time::Duration};

use anyhow::{Context as _, Result, anyhow, bail};
use rcutrace_common::{
    hist::{LOG2_SLOTS, Linear, SlotBounds, log2_bounds},
    records::{self, Bucket, HistLayout, HistValue, MapValue, Record},
};

use crate::{
    model::stats::{PERCENTILE_ERROR, QUANTILES, quantile_name},
    model::{
        Buckets, CallbackRow, CallbackTotals, CallbacksSummary, CountMap, CountSummary, HistMap,
        KeyedLosses, LatencySummary, Losses, Map, ReadersEstimate, Report, ScalarMap, SeriesStats,
        Summary, Unit,
    },
};

/// A run as it was saved.
#[derive(Debug)]
pub struct Saved {
    /// From the `attached_probes` record: the text's banner.
    pub probes: Option<u64>,
    pub report: Report,
}

pub fn read(path: &Path) -> Result<Saved> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| format!("reading the saved run {}", path.display()))
}

/// Reads the JSON lines of one run. Records of types rcutrace does not know (bpftrace's
/// `printf`, `time`, ...) carry nothing the report shows and are skipped.
pub fn parse(text: &str) -> Result<Saved> {
    let mut records = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            Ok(record) => records.push(record),
            Err(error) => {
                let value: serde_json::Value = serde_json::from_str(line)
                    .with_context(|| format!("line {} is not JSON", number + 1))?;
                match value.get("type").and_then(|t| t.as_str()) {
                    Some(kind) if !KNOWN_TYPES.contains(&kind) => {
                        log::info!("line {}: record type {kind:?} skipped", number + 1)
                    }
                    _ => bail!("line {}: {error}", number + 1),
                }
            }
        }
    }
    from_records(&records)
}

const KNOWN_TYPES: [&str; 13] = [
    "attached_probes",
    "map",
    "hist",
    "rcutrace_count_summary",
    "rcutrace_latency_summary",
    "rcutrace_not_measured",
    "rcutrace_environment",
    "rcutrace_empty_map",
    "rcutrace_callbacks_summary",
    "rcutrace_gp_summary",
    "rcutrace_grace_period",
    "rcutrace_stages_summary",
    "rcutrace_call_stages",
];

fn from_records(records: &[Record]) -> Result<Saved> {
    let mut probes = None;
    let mut environment = None;
    let mut maps = Vec::new();
    let mut count_summary = None;
    let mut callbacks_summary = None;
    let mut gp_summary = None;
    let mut grace_periods = Vec::new();
    let mut stages = Vec::new();
    let mut staged_calls = Vec::new();
    let mut latency = Vec::new();
    // Histograms wait for their layout, which the summaries after them carry.
    let mut hists: Vec<(String, Option<String>, &[Bucket])> = Vec::new();
    let mut series: Vec<&records::LatencySummary> = Vec::new();
    for record in records {
        match record {
            Record::AttachedProbes { probes: n } => probes = Some(*n),
            Record::Environment(e) => environment = Some(e.clone()),
            // Each interval is a report of its own; their maps would mix into one here.
            Record::Time(_) => anyhow::bail!(
                "this run was saved with --interval; report reads runs of one window only"
            ),
            // It printed as one empty line, whatever kind of map it was.
            Record::EmptyMap { map } => maps.push(Map::Count(CountMap {
                name: map.clone(),
                entries: Vec::new(),
            })),
            Record::CallbacksSummary(s) => callbacks_summary = Some(callbacks(s)),
            Record::GracePeriodsSummary(s) => gp_summary = Some(s),
            Record::GracePeriod(g) => grace_periods.push(g),
            Record::StagesSummary(s) => stages.push(s),
            Record::CallStages(c) => staged_calls.push(c),
            Record::Map(members) => {
                for (name, value) in &members.0 {
                    maps.push(match value {
                        MapValue::Keyed(entries) => Map::Count(CountMap {
                            name: name.clone(),
                            entries: entries.0.clone(),
                        }),
                        MapValue::Scalar(value) => Map::Scalar(ScalarMap {
                            name: name.clone(),
                            value: *value,
                        }),
                    });
                }
            }
            Record::Hist(members) => {
                for (name, value) in &members.0 {
                    match value {
                        HistValue::Buckets(buckets) => hists.push((name.clone(), None, buckets)),
                        HistValue::Keyed(keys) => {
                            for (key, buckets) in &keys.0 {
                                hists.push((name.clone(), Some(key.clone()), buckets));
                            }
                        }
                    }
                }
            }
            Record::CountSummary(s) => count_summary = Some(count(s)),
            Record::LatencySummary(s) => series.push(s),
            Record::NotMeasured(losses) => {
                let (mine, others) = series.into_iter().partition(|s| s.map == losses.map);
                series = others;
                latency.push(latency_summary(&mine, losses));
            }
        }
    }
    let all_series: Vec<&records::LatencySummary> = records
        .iter()
        .filter_map(|r| match r {
            Record::LatencySummary(s) => Some(s),
            _ => None,
        })
        .collect();
    for (name, key, buckets) in &hists {
        let layout = all_series
            .iter()
            .find(|s| &s.map == name)
            .and_then(|s| s.layout)
            .map_or_else(|| infer_layout(buckets), Ok)
            .with_context(|| format!("histogram {name}"))?;
        maps.push(Map::Hist(HistMap {
            name: name.clone(),
            key: key.clone(),
            buckets: model_buckets(layout, buckets).with_context(|| format!("histogram {name}"))?,
        }));
    }
    for s in stages {
        let summary: &mut LatencySummary = latency
            .iter_mut()
            .find(|l: &&mut LatencySummary| l.map_name == s.map)
            .with_context(|| format!("stages of {} without its latency summary", s.map))?;
        summary.stages = Some(Box::new(super::stages::summary(s, &staged_calls)?));
    }
    let summary = match (count_summary, callbacks_summary, gp_summary) {
        (Some(summary), _, _) => Summary::Count(summary),
        (None, Some(summary), _) => Summary::Callbacks(summary),
        (None, None, Some(summary)) => Summary::GracePeriods(Box::new(
            super::grace_periods::summary(summary, &grace_periods, latency)?,
        )),
        (None, None, None) => Summary::Latency(latency),
    };
    Ok(Saved {
        probes,
        report: Report {
            time: None,
            maps,
            summary,
            environment,
        },
    })
}

fn count(s: &records::CountSummary) -> CountSummary {
    // Files from before the counts were recorded: back from the ratios.
    let from_ratio = |ratio: Option<f64>| {
        ratio
            .zip(s.grace_periods)
            .map(|(r, gps)| (r * gps as f64).round() as u64)
    };
    CountSummary {
        elapsed: s
            .elapsed_ns
            .map_or_else(|| seconds(s.elapsed_s), Duration::from_nanos),
        readers: s.readers.or_else(|| from_ratio(s.readers_per_grace_period)),
        call_rcu: s
            .call_rcu
            .or_else(|| from_ratio(s.call_rcu_per_grace_period)),
        callbacks: s
            .callbacks
            .or_else(|| from_ratio(s.callbacks_per_grace_period)),
        grace_periods: s.grace_periods,
        missed: s.missed_by_kernel,
        keyed_losses: s.keys_lost_to_full_map.map(|map_full| KeyedLosses {
            map_full,
            stacks_lost: s.stacks_lost.unwrap_or(0),
        }),
        readers_estimate: s.readers_estimated.as_ref().map(|e| ReadersEstimate {
            readers: s.readers,
            counted: e.counted,
            sampled: Duration::from_nanos(e.sampled_ns),
            windows: e.windows,
            margin: e.margin_95,
            switching_grace_periods: e.switching_grace_periods,
            switching_calls_left_out: e.switching_calls_left_out,
        }),
    }
}

fn callbacks(s: &records::CallbacksSummary) -> CallbacksSummary {
    let unit = unit(&s.unit).unwrap_or(Unit::Ms);
    CallbacksSummary {
        elapsed: s
            .elapsed_ns
            .map_or_else(|| seconds(s.elapsed_s), Duration::from_nanos),
        unit,
        rows: s
            .rows
            .iter()
            .map(|row| CallbackRow {
                function: row.function.clone(),
                via: row.via.clone(),
                queued: row.queued,
                invoked: row.invoked,
                pending_at_exit: row.pending_at_exit,
                queued_before_tracing: row.queued_before_tracing,
                unrecorded: row.not_recorded,
                requeued: row.requeued,
                latency: SeriesStats {
                    key: None,
                    count: row.invoked,
                    min_ns: row.min_ns,
                    max_ns: row.max_ns,
                    mean_ns: row.mean_ns,
                    percentiles: percentiles(&row.percentiles_ns),
                },
            })
            .collect(),
        rows_not_shown: s.rows_not_shown as usize,
        queued_not_shown: s.queued_not_shown,
        percentile_error: s.percentile_error,
        totals: CallbackTotals {
            queued: s.queued,
            invoked: s.invoked,
            queued_before_tracing: s.not_timed.queued_before_tracing,
            requeued: s.not_timed.requeued,
            kvfree_queued: s.kvfree_queued,
            pending_map_full: s.not_timed.pending_map_full,
            rows_map_full_queued: s.not_timed.row_map_full_queued,
            rows_map_full_invoked: s.not_timed.row_map_full_invoked,
            missed_by_kernel: s.not_timed.missed_by_kernel,
        },
        entry_points_not_traced: s.entry_points_not_traced.clone(),
    }
}

pub(super) fn percentiles(by_name: &records::Members<f64>) -> Vec<(f64, f64)> {
    by_name
        .0
        .iter()
        .filter_map(|(name, ns)| Some((quantile(name)?, *ns)))
        .collect()
}

fn latency_summary(
    series: &[&records::LatencySummary],
    losses: &records::NotMeasured,
) -> LatencySummary {
    LatencySummary {
        map_name: losses.map.clone(),
        unit: series
            .first()
            .and_then(|s| unit(&s.unit))
            .unwrap_or(Unit::Ms),
        series: series
            .iter()
            .map(|s| SeriesStats {
                key: s.key.clone(),
                count: s.count,
                min_ns: s.min_ns,
                max_ns: s.max_ns,
                mean_ns: s.mean_ns,
                percentiles: percentiles(&s.percentiles_ns),
            })
            .collect(),
        percentile_error: series
            .first()
            .map_or(PERCENTILE_ERROR, |s| s.percentile_error),
        losses: Losses {
            in_flight_at_exit: losses.in_flight_at_exit,
            returns_lost: losses.returns_lost,
            began_before_tracing: losses.begun_before_tracing,
            missed_by_kernel: losses.missed_by_kernel,
            lost_to_full_map: losses.lost_to_full_map,
            stacks_lost: losses.stacks_lost,
        },
        stages: None,
    }
}

/// A window in seconds from a file, which may say anything: no panic on a negative or
/// absurd figure, just no window.
pub(super) fn seconds(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or_default()
}

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

/// A bucket's values, as the slot arithmetic states them.
fn bounds(bucket: &Bucket) -> Result<SlotBounds> {
    let u64_of = |v: i128| u64::try_from(v).map_err(|_| anyhow!("bucket bound {v} out of range"));
    Ok(match (bucket.min, bucket.max) {
        (None, Some(max)) => SlotBounds::Below(u64_of(max + 1)?),
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
fn infer_layout(buckets: &[Bucket]) -> Result<HistLayout> {
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
fn model_buckets(layout: HistLayout, buckets: &[Bucket]) -> Result<Buckets> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{self, Format};
    use rcutrace_common::{hist::log2_slot, records::Environment};

    /// What a live run printed in `format`: banner, then its report.
    fn live(format: Format, report: &Report) -> String {
        render::banner(format, 2) + &render::report(format, report)
    }

    fn replayed(report: &Report) -> String {
        let saved = parse(&live(Format::Json, report)).unwrap();
        assert_eq!(saved.probes, Some(2));
        render::banner(Format::Text, 2) + &render::report(Format::Text, &saved.report)
    }

    fn log2(values: &[i64]) -> Buckets {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        for &v in values {
            counts[log2_slot(v) as usize] += 1;
        }
        Buckets::Log2(counts)
    }

    fn series(key: Option<&str>, count: u64) -> SeriesStats {
        SeriesStats {
            key: key.map(String::from),
            count,
            min_ns: (count > 0).then_some(1_234_567),
            max_ns: (count > 0).then_some(23_456_789),
            mean_ns: (count > 0).then_some(12_345_678.9),
            percentiles: if count > 0 {
                vec![
                    (0.5, 11_111_111.1),
                    (0.9, 2e7),
                    (0.99, 2.3e7),
                    (0.999, 2.3e7),
                ]
            } else {
                vec![]
            },
        }
    }

    fn latency(maps: Vec<Map>, series: Vec<SeriesStats>, unit: Unit) -> Report {
        Report {
            time: None,
            maps,
            summary: Summary::Latency(vec![LatencySummary {
                map_name: "@srlat".into(),
                unit,
                series,
                percentile_error: PERCENTILE_ERROR,
                losses: Losses {
                    in_flight_at_exit: 1,
                    returns_lost: 2,
                    stacks_lost: Some(3),
                    ..Losses::default()
                },
                stages: None,
            }]),
            environment: Some(Environment {
                kernel_release: "6.12.57+deb13-cloud-amd64".into(),
                cpus: 2,
                ..Environment::default()
            }),
        }
    }

    fn hist(key: Option<&str>, buckets: Buckets) -> Map {
        Map::Hist(HistMap {
            name: "@srlat".into(),
            key: key.map(String::from),
            buckets,
        })
    }

    #[test]
    fn every_layout_prints_again_byte_for_byte() {
        let linear = Linear {
            min: 0,
            max: 10240,
            step: 1024,
        };
        let mut linear_counts = vec![0; 12];
        linear_counts[0] = 1;
        linear_counts[3] = 4;
        linear_counts[11] = 2;
        for report in [
            latency(
                vec![hist(None, log2(&[-1, 0, 5, 20, 1 << 40]))],
                vec![series(None, 5)],
                Unit::Ms,
            ),
            latency(
                vec![hist(None, Buckets::Linear(linear, linear_counts))],
                vec![series(None, 7)],
                Unit::Us,
            ),
            latency(
                vec![hist(
                    None,
                    Buckets::Sparse {
                        step: 100,
                        buckets: vec![(7, 1), (2, 3)],
                    },
                )],
                vec![series(None, 4)],
                Unit::Ns,
            ),
        ] {
            assert_eq!(replayed(&report), live(Format::Text, &report));
        }
    }

    #[test]
    fn stages_print_again_byte_for_byte() {
        let mut report = latency(
            vec![hist(None, log2(&[6, 0]))],
            vec![series(None, 2)],
            Unit::Ms,
        );
        let stages = crate::model::stages::tests::both_paths();
        assert_eq!(stages.paths.len(), 2);
        assert_eq!(stages.calls.len(), 2);
        if let Summary::Latency(summaries) = &mut report.summary {
            summaries[0].stages = Some(Box::new(stages));
        }
        let text = live(Format::Text, &report);
        assert!(
            text.contains("Expedited grace period, 1 calls (ms)"),
            "{text}"
        );
        assert!(
            text.contains(
                "0 ran their own expedited grace period, 1 rode on another caller's; 1 IPIs handled (rcu_exp_handler) over 1 expedited grace periods"
            ),
            "{text}"
        );
        assert!(text.contains("rcutree.rcu_normal_wake_from_gp=1 (0 here) would have saved at most the callbacks' wait: 0.100 of 6.399 ms per call (1.6%)"), "{text}");
        assert_eq!(replayed(&report), text);
        // And the calls, one by one, come back too.
        let json = live(Format::Json, &report);
        let saved = parse(&json).unwrap();
        assert_eq!(
            render::banner(Format::Json, 2) + &render::report(Format::Json, &saved.report),
            json
        );
    }

    #[test]
    fn keyed_and_empty_histograms_print_again() {
        let keyed = latency(
            vec![
                hist(Some("kworker/0:1"), log2(&[5, 6])),
                hist(
                    Some("\n    synchronize_rcu+5\n    do_syscall_64+135\n"),
                    log2(&[100]),
                ),
            ],
            vec![
                series(Some("\n    synchronize_rcu+5\n    do_syscall_64+135\n"), 1),
                series(Some("kworker/0:1"), 2),
            ],
            Unit::Ms,
        );
        assert_eq!(replayed(&keyed), live(Format::Text, &keyed));
        let empty = latency(vec![hist(None, log2(&[]))], vec![series(None, 0)], Unit::Ms);
        let text = live(Format::Text, &empty);
        assert!(text.contains("\n\n\n\n@srlat count 0\n"), "{text:?}");
        assert_eq!(replayed(&empty), text);
        let no_key = latency(vec![], vec![], Unit::Ms);
        assert_eq!(replayed(&no_key), live(Format::Text, &no_key));
    }

    #[test]
    fn count_prints_again_with_its_ratios() {
        for entries in [
            vec![
                ("call_rcu".to_string(), 6697),
                ("__rcu_read_lock".into(), 1_400_220),
            ],
            vec![],
        ] {
            for readers_estimate in [
                None,
                Some(ReadersEstimate {
                    readers: Some(1_400_220),
                    counted: 140_000,
                    sampled: Duration::from_nanos(501_012_345),
                    windows: 5,
                    margin: Some(20_000),
                    switching_grace_periods: 12,
                    switching_calls_left_out: 9,
                }),
            ] {
                let report = Report {
                    time: None,
                    maps: vec![Map::Count(CountMap {
                        name: "@".into(),
                        entries: entries.clone(),
                    })],
                    summary: Summary::Count(CountSummary {
                        elapsed: Duration::from_nanos(5_010_123_456),
                        readers: Some(1_400_220),
                        call_rcu: Some(6697),
                        callbacks: Some(8777),
                        grace_periods: Some(462),
                        missed: 3,
                        keyed_losses: Some(KeyedLosses {
                            map_full: 1,
                            stacks_lost: 2,
                        }),
                        readers_estimate,
                    }),
                    environment: None,
                };
                assert_eq!(replayed(&report), live(Format::Text, &report));
            }
        }
    }

    #[test]
    fn callbacks_print_again() {
        let row = |function: &str, invoked| CallbackRow {
            function: function.into(),
            via: "call_rcu".into(),
            queued: invoked + 2,
            invoked,
            pending_at_exit: 2,
            queued_before_tracing: 1,
            unrecorded: 0,
            requeued: 0,
            latency: if invoked > 0 {
                series(None, invoked)
            } else {
                series(None, 0)
            },
        };
        let report = Report {
            time: None,
            maps: vec![
                Map::Hist(HistMap {
                    name: "@cblat".into(),
                    key: Some("rcu_work_rcufn".into()),
                    buckets: log2(&[3_000_000, 20_000_000]),
                }),
                Map::Count(CountMap {
                    name: "@cpu_pending".into(),
                    entries: Vec::new(),
                }),
                Map::Count(CountMap {
                    name: "@cpu_queued".into(),
                    entries: vec![("0".into(), 4), ("1".into(), 2)],
                }),
            ],
            summary: Summary::Callbacks(CallbacksSummary {
                elapsed: Duration::from_nanos(5_004_999_999),
                unit: Unit::Ms,
                rows: vec![row("rcu_work_rcufn", 2), row("delayed_put_task_struct", 0)],
                rows_not_shown: 3,
                queued_not_shown: 9,
                percentile_error: 0.0039,
                totals: CallbackTotals {
                    queued: 20,
                    invoked: 12,
                    kvfree_queued: Some(7),
                    missed_by_kernel: 1,
                    ..CallbackTotals::default()
                },
                entry_points_not_traced: vec!["call_rcu_hurry".into()],
            }),
            environment: None,
        };
        let text = live(Format::Text, &report);
        assert!(text.contains("rcu_work_rcufn"), "{text}");
        assert_eq!(replayed(&report), text);
    }

    /// bpftrace 0.17's own JSON of the keyed-map run in docs (kstack, comm, pid keys).
    #[test]
    fn bpftrace_json_prints_as_bpftrace_printed_it() {
        let json = r#"{"type": "attached_probes", "data": {"probes": 2}}
{"type": "map", "data": {"@": {"\n    synchronize_rcu+5\n    __x64_sys_membarrier+490\n    do_syscall_64+135\n    entry_SYSCALL_64_after_hwframe+118\n": 3}}}
{"type": "map", "data": {"@c": {"kworker/1:2": 1, "loadgen": 3}}}
{"type": "hist", "data": {"@h": {"loadgen": [{"min": 4, "max": 7, "count": 3}]}}}
{"type": "map", "data": {"@p": {"152, loadgen": 3}}}
{"type": "lost_events", "data": {"events": 0}}
{"type": "hist", "data": {"@l": [{"max": -1, "count": 1}, {"min": 0, "max": 1, "count": 0}, {"min": 2, "max": 3, "count": 2}, {"min": 4, "max": 5, "count": 0}, {"min": 6, "max": 7, "count": 0}, {"min": 8, "max": 9, "count": 0}, {"min": 10, "count": 1}]}}
"#;
        let saved = parse(json).unwrap();
        let text = render::banner(Format::Text, saved.probes.unwrap() as usize)
            + &render::report(Format::Text, &saved.report);
        let bars = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@";
        let half = "@@@@@@@@@@@@@@@@@@@@@@@@@@                          ";
        let none = "                                                    ";
        assert_eq!(
            text,
            format!(
                "Attaching 2 probes...\n\n\n\
                 @[\n    synchronize_rcu+5\n    __x64_sys_membarrier+490\n    do_syscall_64+135\n    \
                 entry_SYSCALL_64_after_hwframe+118\n]: 3\n\
                 @c[kworker/1:2]: 1\n@c[loadgen]: 3\n\
                 @h[loadgen]: \n[4, 8)                 3 |{bars}|\n\n\
                 @l: \n(..., 0)               1 |{half}|\n[0, 2)                 0 |{none}|\n\
                 [2, 4)                 2 |{bars}|\n[4, 6)                 0 |{none}|\n\
                 [6, 8)                 0 |{none}|\n[8, 10)                0 |{none}|\n\
                 [10, ...)              1 |{half}|\n\n\
                 @p[152, loadgen]: 3\n"
            )
        );
    }

    /// The seed scripts' `@ = count()`, as bpftrace 0.17 saves it.
    #[test]
    fn bpftrace_scalars_print_as_bpftrace_printed_them() {
        let json = "{\"type\": \"attached_probes\", \"data\": {\"probes\": 1}}\n\
                    {\"type\": \"map\", \"data\": {\"@\": 1400220}}\n\
                    {\"type\": \"map\", \"data\": {\"@b\": 1}}\n";
        let saved = parse(json).unwrap();
        let text = render::banner(Format::Text, 1) + &render::report(Format::Text, &saved.report);
        assert_eq!(text, "Attaching 1 probe...\n\n\n@: 1400220\n@b: 1\n");
        assert_eq!(
            render::banner(Format::Json, 1) + &render::report(Format::Json, &saved.report),
            json
        );
    }

    #[test]
    fn what_cannot_be_read_is_said() {
        let err = parse("{\"type\": \"hist\", \"data\": {\"@h\": 3}}\nnot json\n").unwrap_err();
        assert!(format!("{err:#}").contains("line 1"), "{err:#}");
        let huge = "{\"type\": \"hist\", \"data\": {\"@h\": [{\"min\": 0, \"max\": 0, \"count\": 1}, \
                    {\"min\": 18446744073709551614, \"count\": 1}]}}\n";
        let err = parse(huge).unwrap_err();
        assert!(
            format!("{err:#}").contains("not one lhist() accepts"),
            "{err:#}"
        );
        let err = parse("{}\nnot json\n").unwrap_err();
        assert!(format!("{err:#}").contains("line 1"), "{err:#}");
    }
}
