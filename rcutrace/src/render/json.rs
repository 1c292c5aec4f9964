//! bpftrace's JSON lines (`-f json`): one object per line, `{"type": ..., "data": ...}`.
//! rcutrace's extra figures go in records of their own types, so that a consumer of
//! bpftrace's JSON keeps working.

use std::fmt::Write as _;

use rcutrace_common::hist::Linear;

use crate::{
    model::{
        Buckets, CallbacksSummary, CountMap, CountSummary, HistMap, KeyedHistMap, LatencyStats,
        LatencySummary, Map, PerGracePeriod, Report, Summary, maps_in_order, shown_slots,
        sparse_in_order,
    },
    stats,
};

pub fn banner(probes: usize) -> String {
    format!("{{\"type\": \"attached_probes\", \"data\": {{\"probes\": {probes}}}}}\n")
}

pub fn report(report: &Report) -> String {
    let mut out = String::new();
    for map in maps_in_order(&report.maps) {
        match map {
            Map::Count(m) => record(&mut out, "map", &count_map(m)),
            Map::Hist(h) => record(&mut out, "hist", &hist_map(h)),
            Map::KeyedHist(h) => record(&mut out, "hist", &keyed_hist_map(h)),
        }
    }
    match &report.summary {
        Summary::Count(s) => record(&mut out, "rcutrace_count_summary", &count_summary(s)),
        Summary::Latency(s) => record(&mut out, "rcutrace_latency_summary", &latency_summary(s)),
        Summary::Callbacks(s) => record(
            &mut out,
            "rcutrace_callbacks_summary",
            &callbacks_summary(s),
        ),
    }
    out
}

fn record(out: &mut String, kind: &str, data: &str) {
    let _ = writeln!(out, "{{\"type\": \"{kind}\", \"data\": {data}}}");
}

fn string(text: &str) -> String {
    let mut quoted = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(quoted, "\\u{:04x}", c as u32);
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// `{"KEY": VALUE, ...}` from already-rendered values.
fn object<'a>(fields: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let fields: Vec<String> = fields
        .into_iter()
        .map(|(key, value)| format!("{}: {value}", string(key)))
        .collect();
    format!("{{{}}}", fields.join(", "))
}

fn number(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => "null".into(),
    }
}

fn integer(value: Option<u64>) -> String {
    value.map_or_else(|| "null".into(), |v| v.to_string())
}

fn count_map(map: &CountMap) -> String {
    let inner = object(
        map.entries_in_order()
            .into_iter()
            .map(|(k, v)| (k.as_str(), v.to_string())),
    );
    object([(map.name.as_str(), inner)])
}

/// One bucket, bounds inclusive; a missing bound is open.
fn bucket(min: Option<i128>, max: Option<i128>, count: u64) -> String {
    let mut fields = Vec::new();
    if let Some(min) = min {
        fields.push(("min", min.to_string()));
    }
    if let Some(max) = max {
        fields.push(("max", max.to_string()));
    }
    fields.push(("count", count.to_string()));
    object(fields)
}

fn log2_bounds(slot: usize) -> (Option<i128>, Option<i128>) {
    match slot {
        0 => (None, Some(-1)),
        1 => (Some(0), Some(0)),
        _ => {
            let low = 1i128 << (slot - 2);
            (
                Some(low),
                Some(low * 2 - 1).filter(|_| slot > 2).or(Some(1)),
            )
        }
    }
}

fn linear_bounds(linear: &Linear, slot: usize) -> (Option<i128>, Option<i128>) {
    let slot = slot as u64;
    if slot == 0 {
        (None, Some(linear.min as i128 - 1))
    } else if slot == linear.buckets() + 1 {
        (Some(linear.max as i128), None)
    } else {
        let low = (linear.min + (slot - 1) * linear.step) as i128;
        (Some(low), Some(low + linear.step as i128 - 1))
    }
}

fn hist_map(map: &HistMap) -> String {
    object([(map.name.as_str(), hist_rows(&map.buckets))])
}

/// `{"@name": {"KEY": [buckets], ...}}`, keys in bpftrace's order.
fn keyed_hist_map(map: &KeyedHistMap) -> String {
    let keys = object(
        map.entries_in_order()
            .into_iter()
            .map(|(key, buckets)| (key.as_str(), hist_rows(buckets))),
    );
    object([(map.name.as_str(), keys)])
}

/// A histogram's buckets as a JSON array, trimmed like the text.
fn hist_rows(buckets: &Buckets) -> String {
    let rows: Vec<String> = match buckets {
        Buckets::Log2(counts) => shown_slots(counts)
            .map(|(slot, count)| {
                let (min, max) = log2_bounds(slot);
                bucket(min, max, count)
            })
            .collect(),
        Buckets::Linear(linear, counts) => shown_slots(counts)
            .map(|(slot, count)| {
                let (min, max) = linear_bounds(linear, slot);
                bucket(min, max, count)
            })
            .collect(),
        Buckets::Sparse { step, buckets } => sparse_in_order(buckets)
            .into_iter()
            .map(|(b, count)| {
                let low = b as i128 * *step as i128;
                bucket(Some(low), Some(low + *step as i128 - 1), count)
            })
            .collect(),
    };
    format!("[{}]", rows.join(", "))
}

fn count_summary(summary: &CountSummary) -> String {
    let ratio = |count| match summary.per_grace_period(count) {
        PerGracePeriod::Ratio(r) => number(Some(r)),
        _ => "null".into(),
    };
    object([
        ("elapsed_s", number(Some(summary.elapsed.as_secs_f64()))),
        ("grace_periods", integer(summary.grace_periods)),
        ("readers_per_grace_period", ratio(summary.readers)),
        ("call_rcu_per_grace_period", ratio(summary.call_rcu)),
        ("callbacks_per_grace_period", ratio(summary.callbacks)),
        (
            "call_rcu_per_second",
            number(summary.per_second(summary.call_rcu)),
        ),
        ("missed_by_kernel", summary.missed.to_string()),
    ])
}

fn latency_summary(summary: &LatencySummary) -> String {
    let names: Vec<String> = summary
        .percentiles
        .iter()
        .map(|&(q, _)| stats::quantile_name(q))
        .collect();
    let percentiles = object(
        names
            .iter()
            .zip(&summary.percentiles)
            .map(|(name, &(_, ns))| (name.as_str(), number(Some(ns)))),
    );
    let losses = &summary.losses;
    let not_measured = object([
        ("in_flight_at_exit", losses.in_flight_at_exit.to_string()),
        (
            "begun_before_tracing",
            losses.began_before_tracing.to_string(),
        ),
        ("missed_by_kernel", losses.missed_by_kernel.to_string()),
        (
            "lost_to_full_map",
            (losses.in_flight_map_full + losses.bucket_map_full).to_string(),
        ),
    ]);
    object([
        ("map", string(&summary.map_name)),
        ("unit", string(summary.unit.suffix())),
        ("count", summary.count.to_string()),
        ("min_ns", integer(summary.min_ns)),
        ("mean_ns", number(summary.mean_ns)),
        ("max_ns", integer(summary.max_ns)),
        ("percentiles_ns", percentiles),
        ("percentile_error", number(Some(summary.percentile_error))),
        ("not_measured", not_measured),
    ])
}

fn latency_stats(stats: Option<&LatencyStats>) -> String {
    let Some(stats) = stats else {
        return "null".into();
    };
    let names: Vec<String> = stats
        .percentiles
        .iter()
        .map(|&(q, _)| stats::quantile_name(q))
        .collect();
    let percentiles = object(
        names
            .iter()
            .zip(&stats.percentiles)
            .map(|(name, &(_, ns))| (name.as_str(), number(Some(ns)))),
    );
    object([
        ("count", stats.count.to_string()),
        ("min_ns", stats.min_ns.to_string()),
        ("mean_ns", number(Some(stats.mean_ns))),
        ("max_ns", stats.max_ns.to_string()),
        ("percentiles_ns", percentiles),
    ])
}

fn callbacks_summary(summary: &CallbacksSummary) -> String {
    let rows: Vec<String> = summary
        .rows
        .iter()
        .map(|row| {
            object([
                ("function", string(&row.function)),
                ("via", string(&row.via)),
                ("queued", row.queued.to_string()),
                ("invoked", row.invoked.to_string()),
                ("pending_at_exit", row.pending_at_exit.to_string()),
                (
                    "queued_before_tracing",
                    row.queued_before_tracing.to_string(),
                ),
                ("not_recorded", row.unrecorded.to_string()),
                ("requeued", row.requeued.to_string()),
                ("latency", latency_stats(row.latency.as_ref())),
            ])
        })
        .collect();
    let totals = &summary.totals;
    let not_traced: Vec<String> = summary
        .entry_points_not_traced
        .iter()
        .map(|name| string(name))
        .collect();
    object([
        ("elapsed_s", number(Some(summary.elapsed.as_secs_f64()))),
        ("unit", string(summary.unit.suffix())),
        ("percentile_error", number(Some(summary.percentile_error))),
        ("rows", format!("[{}]", rows.join(", "))),
        ("rows_not_shown", summary.rows_not_shown.to_string()),
        ("queued_not_shown", summary.queued_not_shown.to_string()),
        ("queued", totals.queued.to_string()),
        ("invoked", totals.invoked.to_string()),
        ("kvfree_queued", integer(totals.kvfree_queued)),
        (
            "not_timed",
            object([
                (
                    "queued_before_tracing",
                    totals.queued_before_tracing.to_string(),
                ),
                ("pending_map_full", totals.pending_map_full.to_string()),
                ("requeued", totals.requeued.to_string()),
                ("missed_by_kernel", totals.missed_by_kernel.to_string()),
                (
                    "row_map_full_queued",
                    totals.rows_map_full_queued.to_string(),
                ),
                (
                    "row_map_full_invoked",
                    totals.rows_map_full_invoked.to_string(),
                ),
            ]),
        ),
        (
            "entry_points_not_traced",
            format!("[{}]", not_traced.join(", ")),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Losses, Unit};
    use rcutrace_common::hist::{LOG2_SLOTS, log2_slot};

    fn hist_record(buckets: Buckets) -> String {
        let mut out = String::new();
        let data = hist_map(&HistMap {
            name: "@h".into(),
            buckets,
        });
        record(&mut out, "hist", &data);
        out
    }

    #[test]
    fn banner_and_maps_follow_bpftrace() {
        assert_eq!(
            banner(3),
            "{\"type\": \"attached_probes\", \"data\": {\"probes\": 3}}\n"
        );
        let mut out = String::new();
        record(
            &mut out,
            "map",
            &count_map(&CountMap {
                name: "@c".into(),
                entries: vec![("7".into(), 2), ("1".into(), 1)],
            }),
        );
        assert_eq!(
            out,
            "{\"type\": \"map\", \"data\": {\"@c\": {\"1\": 1, \"7\": 2}}}\n"
        );
    }

    #[test]
    fn log2_buckets_have_inclusive_bounds_and_are_trimmed() {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        for v in [-1i64, 0, 1, 2, 5, 20] {
            counts[log2_slot(v) as usize] += 1;
        }
        assert_eq!(
            hist_record(Buckets::Log2(counts)),
            "{\"type\": \"hist\", \"data\": {\"@h\": [{\"max\": -1, \"count\": 1}, \
             {\"min\": 0, \"max\": 0, \"count\": 1}, {\"min\": 1, \"max\": 1, \"count\": 1}, \
             {\"min\": 2, \"max\": 3, \"count\": 1}, {\"min\": 4, \"max\": 7, \"count\": 1}, \
             {\"min\": 8, \"max\": 15, \"count\": 0}, {\"min\": 16, \"max\": 31, \"count\": 1}]}}\n"
        );
        let mut top = vec![0; LOG2_SLOTS as usize];
        top[64] = 1;
        assert!(hist_record(Buckets::Log2(top)).contains(&format!(
            "{{\"min\": {}, \"max\": {}, \"count\": 1}}",
            1u64 << 62,
            u64::MAX >> 1
        )));
    }

    #[test]
    fn linear_and_sparse_buckets() {
        let linear = Linear {
            min: 0,
            max: 10,
            step: 5,
        };
        assert_eq!(
            hist_record(Buckets::Linear(linear, vec![1, 0, 2, 3])),
            "{\"type\": \"hist\", \"data\": {\"@h\": [{\"max\": -1, \"count\": 1}, \
             {\"min\": 0, \"max\": 4, \"count\": 0}, {\"min\": 5, \"max\": 9, \"count\": 2}, \
             {\"min\": 10, \"count\": 3}]}}\n"
        );
        assert_eq!(
            hist_record(Buckets::Sparse {
                step: 100,
                buckets: vec![(3, 1), (1, 2)]
            }),
            "{\"type\": \"hist\", \"data\": {\"@h\": [{\"min\": 100, \"max\": 199, \"count\": 2}, \
             {\"min\": 300, \"max\": 399, \"count\": 1}]}}\n"
        );
    }

    #[test]
    fn summaries_are_records_of_their_own() {
        let report = Report {
            maps: vec![],
            summary: Summary::Latency(LatencySummary {
                map_name: "@srlat".into(),
                unit: Unit::Ms,
                count: 2,
                min_ns: Some(5),
                max_ns: Some(9),
                mean_ns: Some(7.0),
                percentiles: vec![(0.5, 5.0), (0.999, 9.0)],
                percentile_error: 0.0078125,
                losses: Losses {
                    in_flight_at_exit: 1,
                    ..Losses::default()
                },
            }),
        };
        assert_eq!(
            super::report(&report),
            "{\"type\": \"rcutrace_latency_summary\", \"data\": {\"map\": \"@srlat\", \
             \"unit\": \"ms\", \"count\": 2, \"min_ns\": 5, \"mean_ns\": 7, \"max_ns\": 9, \
             \"percentiles_ns\": {\"p50\": 5, \"p99.9\": 9}, \"percentile_error\": 0.0078125, \
             \"not_measured\": {\"in_flight_at_exit\": 1, \"begun_before_tracing\": 0, \
             \"missed_by_kernel\": 0, \"lost_to_full_map\": 0}}}\n"
        );
        let count = count_summary(&CountSummary {
            grace_periods: Some(0),
            readers: Some(3),
            ..CountSummary::default()
        });
        assert!(
            count.contains("\"readers_per_grace_period\": null"),
            "{count}"
        );
        assert!(count.contains("\"grace_periods\": 0"), "{count}");
    }

    #[test]
    fn keyed_histograms_nest_buckets_under_their_keys() {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        counts[log2_slot(5) as usize] = 2;
        let data = keyed_hist_map(&KeyedHistMap {
            name: "@h".into(),
            entries: vec![("loadgen".into(), Buckets::Log2(counts))],
        });
        assert_eq!(
            data,
            "{\"@h\": {\"loadgen\": [{\"min\": 4, \"max\": 7, \"count\": 2}]}}"
        );
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
