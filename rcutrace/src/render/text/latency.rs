//! The statistics and percentiles after a latency histogram (`gplat`, `srlat`, `gp`), and
//! what could not be measured.

use std::fmt::Write as _;

use super::{gp::slowest_of_flavours, one_line, stages::stages_summary};
use crate::{
    model::checks,
    model::stats,
    model::{LatencySummary, SeriesStats, Unit},
    render::figure,
};

/// rcutrace's lines after a function's latency histograms: exact statistics and percentiles
/// per histogram (per key), then what could not be measured.
/// A percentile as precise as it is: exact samples (and the exact extremes an estimate is
/// clamped to) with every decimal, so that none prints below the maximum beside it.
fn percentile(series: &SeriesStats, ns: f64, unit: Unit) -> String {
    let extreme = [series.min_ns, series.max_ns]
        .into_iter()
        .flatten()
        .find(|&e| e as f64 == ns);
    match extreme {
        Some(exact) => figure::exact(exact, unit),
        None if series.percentiles_exact => figure::exact(ns as u64, unit),
        None => figure::estimate(ns, unit),
    }
}

pub(super) fn latency_summary(summary: &LatencySummary) -> String {
    let unit = summary.unit;
    let mut out = String::new();
    if summary.series.is_empty() {
        let _ = writeln!(out, "{} count 0", summary.map_name);
    }
    for series in &summary.series {
        let name = match &series.key {
            Some(key) => format!("{}[{}]", summary.map_name, one_line(key)),
            None => summary.map_name.clone(),
        };
        match (series.min_ns, series.mean_ns, series.max_ns) {
            (Some(min), Some(mean), Some(max)) => {
                let _ = writeln!(
                    out,
                    "{name} count {}, min {}, mean {}, max {}",
                    series.count,
                    figure::exact(min, unit),
                    figure::estimate(mean, unit),
                    figure::exact(max, unit),
                );
                let percentiles: Vec<String> = series
                    .percentiles
                    .iter()
                    .map(|&(q, ns)| {
                        format!(
                            "{} {}",
                            stats::quantile_name(q),
                            percentile(series, ns, unit)
                        )
                    })
                    .collect();
                let bound = match (series.percentiles_exact, series.count) {
                    (true, 1) => "exact: its one sample".to_string(),
                    (true, n) => format!("exact: nearest rank of the {n} samples"),
                    (false, _) => format!(
                        "each within {}%",
                        figure::percent_bound(summary.percentile_error + figure::ROUNDING_ERROR)
                    ),
                };
                let _ = writeln!(out, "{name} {} ({bound})", percentiles.join(", "));
            }
            _ => {
                let _ = writeln!(out, "{name} count 0");
            }
        }
    }
    let losses = &summary.losses;
    let stacks = losses
        .stacks_lost
        .map_or(String::new(), |n| format!(", {n} stacks lost"));
    let _ = writeln!(
        out,
        "{} not measured: {} in flight at exit, {} returns lost, {} begun before tracing, \
         {} missed by the kernel, {} lost to a full map{stacks}",
        summary.map_name,
        losses.in_flight_at_exit,
        losses.returns_lost,
        losses.began_before_tracing,
        losses.missed_by_kernel,
        losses.lost_to_full_map,
    );
    if losses.own_calls_left_out > 0 {
        let _ = writeln!(
            out,
            "{} not timed, as rcutrace's own doing: {} calls other threads made for its \
             attaching and detaching (tasks-RCU kthreads, SRCU workers)",
            summary.map_name, losses.own_calls_left_out
        );
    }
    for check in checks::disagreeing(&summary.cross_checks) {
        let _ = writeln!(out, "{} WARNING: {}", summary.map_name, check.warning());
    }
    if let Some(stages) = &summary.stages {
        out.push_str(&stages_summary(stages));
    }
    out.push_str(&slowest_of_flavours(&summary.grace_periods, unit));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Losses;

    #[test]
    fn summary_lines() {
        let summary = LatencySummary {
            map_name: "@srlat".into(),
            unit: Unit::Ms,
            series: vec![SeriesStats {
                key: None,
                count: 3,
                min_ns: Some(4_000_000),
                max_ns: Some(28_777_001),
                mean_ns: Some(10_500_000.0),
                percentiles_exact: false,
                percentiles: vec![(0.5, 9_900_000.0), (0.999, 28_777_001.0)],
            }],
            percentile_error: 0.0078,
            losses: Losses {
                in_flight_at_exit: 1,
                ..Losses::default()
            },
            stages: None,
            cross_checks: Vec::new(),
            grace_periods: Vec::new(),
        };
        assert_eq!(
            latency_summary(&summary),
            "@srlat count 3, min 4.000 ms, mean 10.500 ms, max 28.777001 ms\n\
             @srlat p50 9.9000 ms, p99.9 28.777001 ms (each within 0.8%)\n\
             @srlat not measured: 1 in flight at exit, 0 returns lost, 0 begun before tracing, 0 missed by the kernel, 0 lost to a full map\n"
        );
        // What was left out as rcutrace's own doing is said, when there was any.
        let own = LatencySummary {
            losses: Losses {
                own_calls_left_out: 2,
                ..Losses::default()
            },
            ..summary
        };
        assert!(latency_summary(&own).ends_with(
            "@srlat not timed, as rcutrace's own doing: 2 calls other threads made for its \
             attaching and detaching (tasks-RCU kthreads, SRCU workers)\n"
        ));
    }

    #[test]
    fn exact_percentiles_print_every_decimal_and_say_so() {
        let summary = LatencySummary {
            map_name: "@rcu_barrier".into(),
            unit: Unit::Ms,
            series: vec![SeriesStats {
                key: None,
                count: 19,
                min_ns: Some(9_061_050),
                max_ns: Some(19_893_079),
                mean_ns: Some(15_317_000.0),
                percentiles: vec![(0.5, 15_008_000.0), (0.99, 19_893_079.0)],
                percentiles_exact: true,
            }],
            percentile_error: crate::model::stats::PERCENTILE_ERROR,
            losses: crate::model::Losses::default(),
            stages: None,
            cross_checks: Vec::new(),
            grace_periods: Vec::new(),
        };
        let text = latency_summary(&summary);
        assert!(
            text.contains(
                "@rcu_barrier p50 15.008 ms, p99 19.893079 ms (exact: nearest rank of the 19 \
                 samples)\n"
            ),
            "{text}"
        );
    }
}
