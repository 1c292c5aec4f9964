//! What grows with the CPU count: the same measurements (`rcu-bench --scaling`) in a guest of
//! few CPUs and in one of many, side by side, with the targets judged on the larger guest:
//! rcutrace's start-up and peak RSS keep their ratios to bpftrace's (within 5 %), reading
//! the per-CPU maps for an `--interval` report costs at most 1 ms of CPU, and the always-on
//! commands stay within their shares of a CPU. rcutrace's start-up phases say where any growth went.

use std::fmt::Write as _;

use crate::sample::{Config, Job, Load, Metric, Samples, Tracer, Watcher};

/// The CPU reading the per-CPU maps for one `--interval` report may cost, in ms.
pub const INTERVAL_ARRAYS_MS: f64 = 1.0;
/// How far a ratio to bpftrace's may grow with the CPU count and still count as kept.
const RATIO_TOLERANCE: f64 = 1.05;

/// A figure with few CPUs and with many.
type Pair = (Option<f64>, Option<f64>);

/// One measure in both guests.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingRow {
    pub label: String,
    /// rcutrace's figure with few CPUs, with many.
    pub rcutrace: Pair,
    /// bpftrace's, where it has one.
    pub bpftrace: Option<Pair>,
    pub decimals: usize,
    pub target: Option<ScalingTarget>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScalingTarget {
    pub text: String,
    pub met: bool,
}

impl ScalingRow {
    /// rcutrace's figure over bpftrace's, with few CPUs and with many.
    pub fn ratios(&self) -> Pair {
        let ratio = |r: Option<f64>, b: Option<f64>| Some(r? / b?).filter(|q| q.is_finite());
        match self.bpftrace {
            Some((few, many)) => (ratio(self.rcutrace.0, few), ratio(self.rcutrace.1, many)),
            None => (None, None),
        }
    }

    /// Every figure the row shows was measured.
    pub fn is_complete(&self) -> bool {
        let (few, many) = self.rcutrace;
        few.is_some()
            && many.is_some()
            && self
                .bpftrace
                .is_none_or(|(few, many)| few.is_some() && many.is_some())
    }
}

/// The table of one scaling run.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingSummary {
    pub cpus: (u32, u32),
    pub rows: Vec<ScalingRow>,
}

impl ScalingSummary {
    pub fn new(few: &Samples, many: &Samples, cpus: (u32, u32)) -> Self {
        let both = |metric: Metric, config: Config| {
            (few.median(metric, config), many.median(metric, config))
        };
        let count = |tracer| Config::Running(tracer, Job::Count);
        let mib =
            |(a, b): (Option<f64>, Option<f64>)| (a.map(|k| k / 1024.0), b.map(|k| k / 1024.0));
        let compared = |label: &str, metric: Metric, scale: &dyn Fn(Pair) -> Pair, decimals| {
            let mut row = ScalingRow {
                label: label.into(),
                rcutrace: scale(both(metric, count(Tracer::RCUTRACE))),
                bpftrace: Some(scale(both(metric, count(Tracer::Bpftrace)))),
                decimals,
                target: None,
            };
            let (few, many) = row.ratios();
            row.target = Some(ScalingTarget {
                text: format!("ratio with {} CPUs ≤ with {} (± 5 %)", cpus.1, cpus.0),
                met: matches!((few, many), (Some(f), Some(m)) if m <= f * RATIO_TOLERANCE),
            });
            row
        };
        let plain = |label: &str, metric: Metric, config: Config, decimals| ScalingRow {
            label: label.into(),
            rcutrace: both(metric, config),
            bpftrace: None,
            decimals,
            target: None,
        };
        let at_most = |mut row: ScalingRow, limit: f64, text: &str| {
            row.target = Some(ScalingTarget {
                text: format!("{text} with {} CPUs", cpus.1),
                met: row.rcutrace.1.is_some_and(|v| v <= limit),
            });
            row
        };
        let rcutrace_count = count(Tracer::RCUTRACE);
        let mut rows = vec![
            compared(
                "Start-up to attached, count (ms)",
                Metric::StartupMs,
                &|v| v,
                0,
            ),
            plain(
                "of which rcutrace's BTF pass (ms)",
                Metric::StartupBtfPassMs,
                rcutrace_count,
                0,
            ),
            plain(
                "of which loading its object, creating the maps (ms)",
                Metric::StartupObjectMs,
                rcutrace_count,
                0,
            ),
            plain(
                "of which attaching (ms)",
                Metric::StartupAttachingMs,
                rcutrace_count,
                0,
            ),
            compared("Peak RSS, count (MiB)", Metric::RssKib, &mib, 1),
            plain(
                "CPU per `count --interval 1` report (ms)",
                Metric::IntervalCpuMs,
                rcutrace_count,
                3,
            ),
            plain(
                "of which reading the counters (ms)",
                Metric::IntervalReadMs,
                rcutrace_count,
                3,
            ),
            at_most(
                plain(
                    "of which the per-CPU maps (ms)",
                    Metric::IntervalArraysMs,
                    rcutrace_count,
                    3,
                ),
                INTERVAL_ARRAYS_MS,
                "≤ 1 ms",
            ),
        ];
        for watcher in Watcher::ALL {
            let config = Config::Watching(watcher, Load::Idle);
            let row = plain(
                &format!("`{}` added CPU, idle guest (% of a CPU)", watcher.name()),
                Metric::AddedCpuPct,
                config,
                3,
            );
            let (limit, text) = match watcher {
                Watcher::Gp => (0.5, "≤ 0.5 %"),
                Watcher::Stall => (0.1, "≤ 0.1 %"),
            };
            rows.push(at_most(row, limit, text));
        }
        ScalingSummary { cpus, rows }
    }

    /// The table in Markdown.
    pub fn table(&self) -> String {
        let (few, many) = self.cpus;
        let mut out = format!(
            "| Median of the runs | rcutrace, {few} CPUs | rcutrace, {many} CPUs | bpftrace, {few} \
             CPUs | bpftrace, {many} CPUs | ratio, {few} CPUs | ratio, {many} CPUs | target | met |\n\
             |---|--:|--:|--:|--:|--:|--:|---|---|\n"
        );
        for row in &self.rows {
            let figure = |v: Option<f64>, decimals| match v {
                Some(v) => format!("{v:.decimals$}"),
                None => "n/a".into(),
            };
            let (bpf_few, bpf_many) = match row.bpftrace {
                Some((few, many)) => (figure(few, row.decimals), figure(many, row.decimals)),
                None => (String::new(), String::new()),
            };
            let (ratio_few, ratio_many) = match (row.bpftrace, row.ratios()) {
                (Some(_), (few, many)) => (figure(few, 2), figure(many, 2)),
                (None, _) => (String::new(), String::new()),
            };
            let (target, met) = match &row.target {
                Some(t) => (
                    t.text.clone(),
                    if t.met { "yes" } else { "**no**" }.to_string(),
                ),
                None => (String::new(), String::new()),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {bpf_few} | {bpf_many} | {ratio_few} | {ratio_many} | {target} | {met} |",
                row.label,
                figure(row.rcutrace.0, row.decimals),
                figure(row.rcutrace.1, row.decimals),
            );
        }
        out
    }

    /// The targets missed, one line each; empty when all are met.
    pub fn misses(&self) -> Vec<String> {
        self.rows
            .iter()
            .filter(|r| r.target.as_ref().is_some_and(|t| !t.met))
            .map(|r| format!("{}: {}", r.label, r.target.as_ref().map_or("", |t| &t.text)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(lines: &str) -> Samples {
        Samples::parse(lines)
    }

    const FEW: &str = "\
sample startup_ms rcutrace-count 400
sample startup_ms bpftrace-count 1000
sample startup_btf_pass_ms rcutrace-count 100
sample startup_object_ms rcutrace-count 50
sample startup_attaching_ms rcutrace-count 200
sample rss_kib rcutrace-count 10240
sample rss_kib bpftrace-count 102400
sample interval_cpu_ms rcutrace-count 0.2
sample interval_read_ms rcutrace-count 0.1
sample interval_arrays_ms rcutrace-count 0.05
sample added_cpu_pct rcutrace-gp-idle 0.2
sample added_cpu_pct rcutrace-stall-idle 0.05
";

    const MANY: &str = "\
sample startup_ms rcutrace-count 700
sample startup_ms bpftrace-count 1100
sample startup_btf_pass_ms rcutrace-count 100
sample startup_object_ms rcutrace-count 300
sample startup_attaching_ms rcutrace-count 250
sample rss_kib rcutrace-count 10240
sample rss_kib bpftrace-count 102400
sample interval_cpu_ms rcutrace-count 1.5
sample interval_read_ms rcutrace-count 1.4
sample interval_arrays_ms rcutrace-count 1.2
sample added_cpu_pct rcutrace-gp-idle 0.3
sample added_cpu_pct rcutrace-stall-idle 0.08
";

    #[test]
    fn judges_each_target_on_the_larger_guest() {
        let summary = ScalingSummary::new(&samples(FEW), &samples(MANY), (2, 64));
        assert!(
            summary.rows.iter().all(ScalingRow::is_complete),
            "{summary:#?}"
        );
        let row = |label: &str| {
            summary
                .rows
                .iter()
                .find(|r| r.label.starts_with(label))
                .unwrap()
        };
        // 0.40 of bpftrace's at 2 CPUs, 0.64 at 64: the ratio grew.
        let startup = row("Start-up");
        assert_eq!(startup.ratios(), (Some(0.4), Some(700.0 / 1100.0)));
        assert!(!startup.target.as_ref().unwrap().met);
        let rss = row("Peak RSS");
        assert_eq!(rss.rcutrace, (Some(10.0), Some(10.0)));
        assert!(rss.target.as_ref().unwrap().met);
        assert!(row("CPU per").target.is_none());
        assert!(row("of which reading").target.is_none());
        assert!(
            !row("of which the per-CPU maps")
                .target
                .as_ref()
                .unwrap()
                .met
        );
        assert!(row("`gp`").target.as_ref().unwrap().met);
        assert!(row("`stall`").target.as_ref().unwrap().met);
        assert_eq!(summary.misses().len(), 2, "{:?}", summary.misses());

        let table = summary.table();
        assert!(
            table.contains("| Start-up to attached, count (ms) | 400 | 700 | 1000 | 1100 | 0.40 | 0.64 | ratio with 64 CPUs ≤ with 2 (± 5 %) | **no** |"),
            "{table}"
        );
        assert!(
            table.contains("| of which loading its object, creating the maps (ms) | 50 | 300 |  |  |  |  |  |  |"),
            "{table}"
        );
        assert_eq!(table.lines().count(), summary.rows.len() + 2);
    }

    #[test]
    fn a_measure_missing_in_one_guest_is_incomplete_and_unmet() {
        let summary = ScalingSummary::new(&samples(FEW), &samples(""), (2, 64));
        assert!(summary.rows.iter().all(|r| !r.is_complete()));
        assert!(
            summary
                .rows
                .iter()
                .filter_map(|r| r.target.as_ref())
                .all(|t| !t.met)
        );
    }
}
