//! `srlat --stages`: each call's latency taken apart into the stages of its grace period.

use std::fmt::Write as _;

use crate::{
    model::stages::{self, Path, PathStages, StagesSummary},
    render::figure,
};

/// `srlat --stages`' lines after a function's statistics: per path, each stage's statistics
/// (their means add up to the mean latency), then what could not be taken apart.
pub(super) fn stages_summary(summary: &StagesSummary) -> String {
    let unit = summary.unit;
    let name = &summary.map_name;
    let taken_apart: u64 = summary.paths.iter().map(|p| p.calls).sum();
    let not = summary.not_taken_apart;
    let mut out = format!(
        "\n{name} stages: {taken_apart} calls taken apart, each into stages that add up to its \
         latency\n"
    );
    for path in &summary.paths {
        let mut heading = match path.path {
            Path::Normal => format!("Normal grace period, {} calls", path.calls),
            Path::Expedited => format!("Expedited grace period, {} calls", path.calls),
        };
        let _ = write!(heading, " ({})", unit.suffix());
        let _ = writeln!(
            out,
            "{heading:<62}{:>6}  {:>10}  {:>10}  {:>10}  {:>10}",
            "count", "mean", "p50", "p99", "max"
        );
        for stage in path.stages.iter().filter(|s| s.stats.count > 0) {
            let stats = &stage.stats;
            let percentile = |q: f64| super::percentile_column(stats, q, unit);
            let _ = writeln!(
                out,
                "  {:<60}{:>6}  {:>10}  {:>10}  {:>10}  {:>10}",
                stage.name,
                stats.count,
                stats
                    .mean_ns
                    .map_or("-".to_string(), |ns| figure::fixed_number(ns, unit)),
                percentile(0.5),
                percentile(0.99),
                stats
                    .max_ns
                    .map_or("-".to_string(), |ns| figure::fixed_number(ns as f64, unit)),
            );
        }
        match path.path {
            Path::Normal => out.push_str(&wake_from_gp_line(summary, path)),
            Path::Expedited => {
                // A saved run read back may say anything: no panic on one that does not add up.
                let unknown = path
                    .calls
                    .saturating_sub(path.own.saturating_add(path.piggy_backed));
                let mut line = format!(
                    "  {} ran their own expedited grace period, {} rode on another caller's",
                    path.own, path.piggy_backed
                );
                if unknown > 0 {
                    let _ = write!(line, ", {unknown} unknown (the request was not seen)");
                }
                if path.expedited_grace_periods > 0 {
                    let _ = write!(
                        line,
                        "; {} IPIs handled (rcu_exp_handler) over {} expedited grace periods",
                        path.ipis, path.expedited_grace_periods
                    );
                }
                let _ = writeln!(out, "{line}");
            }
        }
    }
    if summary.adjusted > 0 {
        let _ = writeln!(
            out,
            "{name} stages: {} calls came while their grace period was being initialised, or \
             were woken before its cleanup returned: that milestone is taken where the call \
             began or was woken",
            summary.adjusted
        );
    }
    if summary.out_of_order > 0 {
        let _ = writeln!(
            out,
            "{name} stages: {} calls' records came in an order no call has (the callback invoked \
             before the grace period began): each milestone out of order is moved up to the one \
             before it (these calls are among the adjusted)",
            summary.out_of_order
        );
    }
    if summary.calls_not_listed > 0 {
        let _ = writeln!(
            out,
            "{name} stages: {} calls are in the statistics but not listed one by one (-f json \
             lists {})",
            summary.calls_not_listed,
            stages::MAX_LISTED_CALLS
        );
    }
    let _ = writeln!(
        out,
        "{name} stages not taken apart: {} entry not seen, {} grace period not seen whole; \
         {} grace-period and stage events of the run lost to a full ring",
        not.entry_not_seen, not.grace_period_not_seen, summary.events_lost
    );
    out
}

/// What waking callers from the grace-period kthread (`rcu_normal_wake_from_gp=1`,
/// Uladzislau Rezki's path) would have saved these calls: at most their callbacks' wait.
fn wake_from_gp_line(summary: &StagesSummary, path: &PathStages) -> String {
    let unit = summary.unit;
    // A saved run read back may list fewer stages than this build names.
    let Some(callback) = path.stages.get(stages::CALLBACK_WAIT) else {
        return String::new();
    };
    if summary.wake_from_gp == Some(true) {
        return "  this kernel wakes callers from the grace-period kthread \
                (rcutree.rcu_normal_wake_from_gp=1): no callback waits behind others\n"
            .to_string();
    }
    if callback.stats.count == 0 || path.latency_sum_ns == 0 {
        return String::new();
    }
    let per_call = |ns: u128| ns as f64 / path.calls as f64;
    let setting = match summary.wake_from_gp {
        Some(_) => "0 here",
        None => "this kernel has no such parameter",
    };
    format!(
        "  rcutree.rcu_normal_wake_from_gp=1 ({setting}) would have saved at most the \
         callbacks' wait: {} of {} {} per call ({:.1}%)\n",
        figure::fixed_number(per_call(callback.sum_ns), unit),
        figure::fixed_number(per_call(path.latency_sum_ns), unit),
        unit.suffix(),
        callback.sum_ns as f64 * 100.0 / path.latency_sum_ns as f64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the saved-run fuzz test: a path read back with fewer stages than this build
    /// names printed through a panic.
    #[test]
    fn a_saved_path_short_of_stages_prints_without_its_callback_line() {
        use crate::model::stages::{NotTakenApart, Path, PathStages, StagesSummary};
        let summary = StagesSummary {
            map_name: "@srlat".into(),
            unit: crate::model::Unit::Ms,
            paths: vec![PathStages {
                path: Path::Normal,
                calls: 3,
                latency_sum_ns: 30_000_000,
                stages: Vec::new(),
                own: 0,
                piggy_backed: 0,
                ipis: 0,
                expedited_grace_periods: 0,
            }],
            not_taken_apart: NotTakenApart::default(),
            adjusted: 0,
            out_of_order: 0,
            events_lost: 0,
            wake_from_gp: Some(false),
            calls: Vec::new(),
            calls_not_listed: 0,
        };
        let text = stages_summary(&summary);
        assert!(!text.contains("would have saved"), "{text}");
    }
}
