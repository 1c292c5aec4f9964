//! Text output exactly as bpftrace 0.17 prints maps and histograms (`maps`), plus rcutrace's
//! own summary lines, one file per kind of output. `report` puts them together.

mod callbacks;
mod count;
mod detach;
mod gp;
mod latency;
mod maps;
mod run;
mod stages;
mod stall;

use crate::model::{
    Report, SeriesStats, Summary, Unit,
    checks::{self, CrossCheck},
};

use callbacks::callbacks_summary;
use count::count_summary;
use gp::grace_periods_summary;
use latency::latency_summary;
use maps::maps;
use run::run_summary;
use stall::stall_summary;

pub use detach::detach_line;
pub use maps::banner;
pub(super) use maps::{linear_label, log2_label};
pub use stall::stall_event;

pub fn report(report: &Report) -> String {
    // At the end of a run bpftrace prints two newlines, then every map; an interval's
    // `time(); print(@)` prints the time, then the maps.
    let mut out = match &report.time {
        Some(stamp) => format!("{}\n", stamp.time),
        None => String::from("\n\n"),
    };
    // Exact buckets print their bounds, which need the unit their summary states.
    let unit_of = |name: &str| {
        report
            .summary
            .latency()?
            .iter()
            .find(|s| s.map_name == name)
            .map(|s| s.unit)
    };
    out.push_str(&maps(&report.maps, &unit_of));
    match &report.summary {
        Summary::Count(summary) => out.push_str(&count_summary(summary)),
        Summary::Latency(summaries) => {
            for summary in summaries {
                out.push_str(&latency_summary(summary));
            }
        }
        Summary::Callbacks(summary) => out.push_str(&callbacks_summary(summary)),
        Summary::GracePeriods(summary) => out.push_str(&grace_periods_summary(summary)),
        Summary::Stall(summary) => out.push_str(&stall_summary(summary)),
        Summary::Run(summary) => {
            for latency in &summary.latency {
                out.push_str(&latency_summary(latency));
            }
            out.push_str(&run_summary(&summary.figures));
        }
    }
    out
}

/// A warning line for each cross-check whose two counts disagree.
fn disagreements(checks: &[CrossCheck]) -> String {
    checks::disagreeing(checks)
        .map(|check| format!("  WARNING: {}\n", check.warning()))
        .collect()
}

/// A key on one line, for rcutrace's own summary lines: a kernel stack's frames (one per
/// line in bpftrace's key) joined by `; `.
/// What a tick sample found a holdout CPU running: `running pid PID COMM in MODE`.
fn running(sample: &crate::model::anatomy::Sample) -> String {
    format!(
        "running pid {} {} in {}",
        sample.task.pid,
        sample.task.comm,
        sample.mode.name()
    )
}

/// Quantile `q` of `stats` in a table's column, `-` where it was not computed.
fn percentile_column(stats: &SeriesStats, q: f64, unit: Unit) -> String {
    stats
        .percentiles
        .iter()
        .find(|(pq, _)| *pq == q)
        .map_or("-".to_string(), |&(_, ns)| {
            super::figure::fixed_number(ns, unit)
        })
}

/// A key of several lines on one: its frames joined by `; `, after a leading field of its
/// own (`DOMAIN, ` before a stack) by its comma.
pub(super) fn one_line(key: &str) -> String {
    let mut line = String::new();
    for part in key.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !line.is_empty() {
            line.push_str(if line.ends_with(',') { " " } else { "; " });
        }
        line.push_str(part);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CountMap, Map};

    /// bpftrace's `interval:s:1 { time(); print(@); }`: the time, then the map, with no
    /// blank lines before it.
    #[test]
    fn an_interval_starts_with_its_time() {
        let interval = Report {
            environment: None,
            time: Some(crate::model::Stamp::interval("12:00:05")),
            maps: vec![Map::Count(CountMap {
                name: "@".into(),
                entries: vec![("call_rcu".into(), 3)],
            })],
            summary: Summary::Latency(Vec::new()),
        };
        assert_eq!(report(&interval), "12:00:05\n@[call_rcu]: 3\n");
        let end = Report {
            time: None,
            ..interval
        };
        assert_eq!(report(&end), "\n\n@[call_rcu]: 3\n");
    }

    #[test]
    fn stack_keys_fit_one_summary_line() {
        assert_eq!(
            one_line("\n    rcu_barrier+5\n    cleanup_net+463\n"),
            "rcu_barrier+5; cleanup_net+463"
        );
        assert_eq!(one_line("kworker/1:1"), "kworker/1:1");
        assert_eq!(
            one_line("tracepoint_srcu, \n    synchronize_srcu+5\n    perf_kprobe_destroy+60\n"),
            "tracepoint_srcu, synchronize_srcu+5; perf_kprobe_destroy+60"
        );
    }
}
