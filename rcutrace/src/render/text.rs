//! Text output exactly as bpftrace 0.17 prints maps and histograms, plus rcutrace's own
//! summary lines.

use std::{fmt::Write as _, time::Duration};

use rcutrace_common::hist::{Linear, SlotBounds, log2_bounds, sparse_bounds};

use crate::{
    model::checks::{self, CrossCheck},
    model::stages::{self, Path, PathStages, StagesSummary},
    model::stats,
    model::tree::cpu_list,
    model::{
        Buckets, CallbackCounts, CallbacksSummary, CountMap, CountSummary, CpuHoldouts,
        GracePeriodsSummary, HistMap, LatencySummary, MIN_RATE_WINDOW_SECS, Map, PerGracePeriod,
        ReadersEstimate, Report, SeriesStats, Summary, Unit, maps_in_order, shown_slots,
        sparse_in_order,
    },
    render::figure,
};

pub fn report(report: &Report) -> String {
    // At the end of a run bpftrace prints two newlines, then every map; an interval's
    // `time(); print(@)` prints the time, then the maps.
    let mut out = match &report.time {
        Some(stamp) => format!("{}\n", stamp.time),
        None => String::from("\n\n"),
    };
    // Exact buckets print their bounds, which need the unit their summary states.
    let unit_of = |name: &str| match &report.summary {
        Summary::Latency(summaries) => summaries
            .iter()
            .find(|s| s.map_name == name)
            .map(|s| s.unit),
        _ => None,
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
    }
    out
}

/// Seconds with two decimals: `1.02 s`.
fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// One of `rcutrace stall`'s events as a block of lines, readable in a terminal and a log.
pub fn stall_event(event: &crate::model::StallEvent) -> String {
    use crate::model::StallEvent;
    let mut out = String::new();
    match event {
        StallEvent::Warning {
            time,
            warning: w,
            cpu_stacks,
            blocked_stacks,
        } => {
            let _ = writeln!(
                out,
                "{time} RCU STALL WARNING: grace period {} is {} old (past {})",
                w.gp_seq as i64,
                seconds(w.age),
                seconds(w.threshold)
            );
            let stack_line = |out: &mut String, stack: &[String]| {
                if !stack.is_empty() {
                    let _ = writeln!(out, "    stack: {}", stack.join("; "));
                }
            };
            for (cpu, stack) in w.cpus.iter().zip(cpu_stacks) {
                let running = cpu.sample.as_ref().map_or(
                    "not sampled (no tick seen while it held out)".to_string(),
                    |s| {
                        format!(
                            "running pid {} {} in {}",
                            s.task.pid,
                            s.task.comm,
                            s.mode.name()
                        )
                    },
                );
                let tick = match cpu.tick_arriving {
                    Some(true) => ", its tick arriving",
                    Some(false) => ", no tick for over 500 ms",
                    None => "",
                };
                let _ = writeln!(
                    out,
                    "  CPU {} has not reported a quiescent state: {running}{tick}",
                    cpu.cpu
                );
                stack_line(&mut out, stack);
            }
            for ((reader, blocked_for), stack) in w.blocked.iter().zip(blocked_stacks) {
                let _ = writeln!(
                    out,
                    "  blocked reader pid {} {} (switched out on CPU {}), blocked {}",
                    reader.task.pid,
                    reader.task.comm,
                    reader.cpu,
                    seconds(*blocked_for)
                );
                stack_line(&mut out, stack);
            }
            if w.cpus.is_empty() && w.blocked.is_empty() {
                let _ = writeln!(
                    out,
                    "  every CPU has reported and no blocked reader holds it: the grace-period \
                     kthread has yet to end it"
                );
            }
            if let Some((pid, idle)) = w.kthread_starved {
                let _ = writeln!(
                    out,
                    "  the grace-period kthread (pid {pid}) has not run for {}: starved?",
                    seconds(idle)
                );
            }
        }
        StallEvent::KernelWarning {
            time,
            rcuname,
            msg,
            cpu,
            rcutrace_earlier,
        } => {
            let earlier = rcutrace_earlier.map_or(
                "; rcutrace had not warned about this grace period".to_string(),
                |d| format!("; rcutrace warned {} earlier", seconds(d)),
            );
            let _ = writeln!(
                out,
                "{time} KERNEL RCU STALL WARNING: {rcuname} {msg} (on CPU {cpu}){earlier}"
            );
        }
        StallEvent::ExpeditedWarning { time, warning } => {
            let _ = writeln!(
                out,
                "{time} RCU STALL WARNING: the expedited grace period in progress is {} old \
                 (past {}); its CPUs' reports are not followed: the CPUs that hold it up also \
                 hold up any normal grace period warned about",
                seconds(warning.age),
                seconds(warning.threshold)
            );
        }
        StallEvent::ExpeditedEnded { time, ended } => {
            let plural = if ended.warnings == 1 { "" } else { "s" };
            let bound = if ended.exact { "" } else { "at most " };
            let _ = writeln!(
                out,
                "{time} RCU STALL ENDED: the expedited grace period took {bound}{} ({} \
                 warning{plural})",
                seconds(ended.duration),
                ended.warnings
            );
        }
        StallEvent::Ended { time, ended } => {
            let plural = if ended.warnings == 1 { "" } else { "s" };
            let _ = writeln!(
                out,
                "{time} RCU STALL ENDED: grace period {} took {} ({} warning{plural})",
                ended.gp_seq as i64,
                seconds(ended.duration),
                ended.warnings
            );
        }
    }
    out
}

fn stall_summary(s: &crate::model::StallSummary) -> String {
    let thresholds: Vec<String> = s.thresholds.iter().map(|t| seconds(*t)).collect();
    let counted =
        |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let stopped = if s.stopped_at_warning {
        "; stopped at the first warning"
    } else {
        ""
    };
    let expedited = if s.expedited_warnings > 0 {
        format!(" ({} about expedited ones)", s.expedited_warnings)
    } else {
        String::new()
    };
    format!(
        "Watched {} (warning at a grace period's age of {}): {}{expedited}, {}, {} \
         ended{stopped}\n",
        seconds(s.elapsed),
        thresholds.join(", "),
        counted(s.warnings, "warning", "warnings"),
        counted(
            s.kernel_warnings,
            "kernel stall warning",
            "kernel stall warnings"
        ),
        counted(
            s.stalls_ended,
            "grace period warned about",
            "grace periods warned about"
        ),
    )
}

const BAR_WIDTH: f32 = 52.0;

/// The line bpftrace prints once its probes are attached.
pub fn banner(probes: usize) -> String {
    let plural = if probes == 1 { "probe" } else { "probes" };
    format!("Attaching {probes} {plural}...\n")
}

/// All maps, ordered by name as bytes (`@` included).
fn maps(maps: &[Map], unit_of: &dyn Fn(&str) -> Option<Unit>) -> String {
    let mut out = String::new();
    for map in maps_in_order(maps) {
        match map {
            Map::Count(m) => count_map(&mut out, m),
            Map::Hist(h) => hist_map(&mut out, h, unit_of(&h.name)),
            Map::Scalar(s) => {
                let _ = writeln!(out, "{}: {}", s.name, s.value);
            }
        }
    }
    out
}

/// bpftrace prints a map that was never written as one empty line.
const EMPTY_MAP: &str = "\n";

fn count_map(out: &mut String, map: &CountMap) {
    if map.entries.is_empty() {
        out.push_str(EMPTY_MAP);
    }
    for (key, value) in map.entries_in_order() {
        let _ = writeln!(out, "{}[{key}]: {value}", map.name);
    }
}

fn hist_map(out: &mut String, map: &HistMap, unit: Option<Unit>) {
    if map.is_empty() {
        out.push_str(EMPTY_MAP);
        return;
    }
    match &map.key {
        Some(key) => {
            let _ = writeln!(out, "{}[{key}]: ", map.name);
        }
        None => {
            let _ = writeln!(out, "{}: ", map.name);
        }
    }
    match &map.buckets {
        Buckets::Log2(counts) => rows(out, counts, log2_label),
        Buckets::Linear(linear, counts) => rows(out, counts, |slot| linear_label(linear, slot)),
        Buckets::Sparse { step, buckets } => {
            for (bucket, count) in sparse_in_order(buckets) {
                if let SlotBounds::Range { low, high } = sparse_bounds(bucket, *step) {
                    let unit = unit.map_or(String::new(), |u| format!(" {}", u.suffix()));
                    let _ = writeln!(out, "[{low}, {high}){unit}: {count}");
                }
            }
        }
    }
    out.push('\n');
}

/// Rows from the first to the last non-empty slot; bars relative to the largest count.
fn rows(out: &mut String, counts: &[u64], label: impl Fn(usize) -> String) {
    let max = counts.iter().copied().max().unwrap_or(0);
    for (slot, count) in shown_slots(counts) {
        let _ = writeln!(
            out,
            "{:<16}{:>8} |{:<52}|",
            label(slot),
            count,
            "@".repeat(bar_width(count, max))
        );
    }
}

/// bpftrace computes the bar in single precision; f64 gives different widths (26 vs 15).
fn bar_width(count: u64, max: u64) -> usize {
    if max == 0 {
        return 0;
    }
    (count as f32 / max as f32 * BAR_WIDTH) as usize
}

/// A power of two with bpftrace's binary suffixes: 1K, 512K, 4G, 8E.
fn power_of_two(value: u64) -> String {
    const SUFFIXES: [&str; 7] = ["", "K", "M", "G", "T", "P", "E"];
    let power = value.max(1).ilog2();
    format!(
        "{}{}",
        1u64 << (power % 10),
        SUFFIXES[(power / 10) as usize]
    )
}

pub(super) fn log2_label(slot: usize) -> String {
    match log2_bounds(slot as u32) {
        SlotBounds::Below(bound) => format!("(..., {bound})"),
        // 0 and 1 have a slot each.
        SlotBounds::Range { low, high } if high == low + 1 => format!("[{low}]"),
        SlotBounds::Range { low, high } => {
            format!("[{}, {})", power_of_two(low), power_of_two(high))
        }
        SlotBounds::From(bound) => format!("[{}, ...)", power_of_two(bound)),
    }
}

/// Linear bounds print with K/M suffixes only when the step is a multiple of 1024.
fn linear_number(value: u64, step: u64) -> String {
    if step.is_multiple_of(1024) && value != 0 {
        if value.is_multiple_of(1 << 20) {
            return format!("{}M", value >> 20);
        }
        if value.is_multiple_of(1024) {
            return format!("{}K", value >> 10);
        }
    }
    value.to_string()
}

pub(super) fn linear_label(linear: &Linear, slot: usize) -> String {
    let number = |v| linear_number(v, linear.step);
    match linear.bounds(slot as u64) {
        SlotBounds::Below(bound) => format!("(..., {})", number(bound)),
        SlotBounds::Range { low, high } => format!("[{}, {})", number(low), number(high)),
        SlotBounds::From(bound) => format!("[{}, ...)", number(bound)),
    }
}

/// The ratios after `count`'s map.
fn count_summary(summary: &CountSummary) -> String {
    let mut out = String::new();
    let secs = summary.elapsed.as_secs_f64();
    if secs < MIN_RATE_WINDOW_SECS {
        let _ = writeln!(out, "\nOver {secs:.3} s (too short a window for rates):");
    } else {
        let _ = writeln!(out, "\nOver {secs:.2} s:");
    }
    if let Some(estimate) = &summary.readers_estimate {
        out.push_str(&readers_estimate(estimate, summary.elapsed));
    }
    match summary.grace_periods {
        None => {
            let _ = writeln!(
                out,
                "  grace periods: not traced (rcu_gp_fqs_loop unavailable)"
            );
        }
        Some(gps) => {
            let rate = summary
                .per_second(Some(gps))
                .map_or(String::new(), |r| format!(" ({r:.1}/s)"));
            let _ = writeln!(out, "  grace periods:                {gps}{rate}");
            if let Some(estimate) = &summary.readers_estimate {
                let _ = writeln!(
                    out,
                    "    up to {} of them ended while rcutrace switched its reader probe;\n    \
                     {} updater calls the tasks-RCU kthreads made for its detaching are not counted",
                    estimate.switching_grace_periods, estimate.switching_calls_left_out
                );
            }
            let estimated = if summary.readers_estimate.is_some() {
                " (estimated)"
            } else {
                ""
            };
            // Only the functions that were traced are named.
            let queuers = match summary.callbacks_of.as_slice() {
                [] => String::new(),
                names => format!(" ({})", names.join(", ")),
            };
            for (label, count, note) in [
                ("RCU readers per grace period: ", summary.readers, estimated),
                ("call_rcu() per grace period:  ", summary.call_rcu, ""),
                (
                    "callbacks per grace period:   ",
                    summary.callbacks,
                    queuers.as_str(),
                ),
            ] {
                let ratio = match summary.per_grace_period(count) {
                    PerGracePeriod::NotTraced => "not traced".to_string(),
                    PerGracePeriod::NoGracePeriod => "n/a (no grace period completed)".to_string(),
                    PerGracePeriod::Ratio(r) => format!("{r:.1}"),
                };
                let rate = summary
                    .per_second(count)
                    .map_or(String::new(), |r| format!(" ({r:.1}/s)"));
                let _ = writeln!(out, "  {label}{ratio}{rate}{note}");
            }
        }
    }
    let _ = writeln!(
        out,
        "  updater and grace-period calls missed by the kernel: {}",
        summary.missed
    );
    if summary.own_calls_left_out > 0 {
        let _ = writeln!(
            out,
            "  not counted, as rcutrace's own doing: {} calls other threads made for its \
             attaching and detaching (tasks-RCU kthreads, SRCU workers)",
            summary.own_calls_left_out
        );
    }
    if let Some(losses) = summary.keyed_losses {
        let _ = writeln!(
            out,
            "  calls lost to a full key map: {}, kernel stacks lost: {}",
            losses.map_full, losses.stacks_lost
        );
    }
    out.push_str(&disagreements(&summary.cross_checks));
    out
}

/// A warning line for each cross-check whose two counts disagree.
fn disagreements(checks: &[CrossCheck]) -> String {
    checks::disagreeing(checks)
        .map(|check| format!("  WARNING: {}\n", check.warning()))
        .collect()
}

/// How `--sample-readers` estimated the readers: never passed off as a count.
fn readers_estimate(estimate: &ReadersEstimate, elapsed: Duration) -> String {
    let share = if elapsed.is_zero() {
        100.0
    } else {
        100.0 * estimate.sampled.as_secs_f64() / elapsed.as_secs_f64()
    };
    let sampled = format!(
        "counted {} in {} window{} of the reader probe, {:.3} s ({share:.1}% of the time),",
        estimate.counted,
        estimate.windows,
        if estimate.windows == 1 { "" } else { "s" },
        estimate.sampled.as_secs_f64(),
    );
    let figure = match (estimate.readers, estimate.margin) {
        (None, _) => "not estimated (no window was sampled)".to_string(),
        (Some(n), None) => format!("~{n}, margin unknown (one window)"),
        (Some(n), Some(margin)) => {
            let percent = if n == 0 {
                String::new()
            } else {
                format!(" ({:.1}%)", 100.0 * margin as f64 / n as f64)
            };
            format!("~{n} \u{b1}{margin}{percent} at 95% confidence")
        }
    };
    format!(
        "  RCU readers, estimated:       {figure}\n    {sampled}\n    \
         assuming the load was the same while it was detached\n"
    )
}

/// A key on one line, for rcutrace's own summary lines: a kernel stack's frames (one per
/// line in bpftrace's key) joined by `; `.
pub(super) fn one_line(key: &str) -> String {
    let lines: Vec<&str> = key
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines.join("; ")
}

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

fn latency_summary(summary: &LatencySummary) -> String {
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
    out
}

/// `srlat --stages`' lines after a function's statistics: per path, each stage's statistics
/// (their means add up to the mean latency), then what could not be taken apart.
fn stages_summary(summary: &StagesSummary) -> String {
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
            let percentile = |q: f64| {
                stats
                    .percentiles
                    .iter()
                    .find(|(pq, _)| *pq == q)
                    .map_or("-".to_string(), |&(_, ns)| figure::fixed_number(ns, unit))
            };
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
                let unknown = path.calls - path.own - path.piggy_backed;
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
    let callback = &path.stages[stages::CALLBACK_WAIT];
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

/// `rcutrace gp`'s lines after the duration histogram: its statistics, each phase's, the
/// last holdouts by CPU and by task, the slowest grace periods, and what was not seen.
fn grace_periods_summary(summary: &GracePeriodsSummary) -> String {
    let unit = summary.latency.unit;
    let mut out = latency_summary(&summary.latency);
    let count = summary.latency.series.first().map_or(0, |s| s.count);
    let secs = summary.elapsed.as_secs_f64();
    let rate = if secs >= MIN_RATE_WINDOW_SECS {
        format!(" ({:.1}/s)", count as f64 / secs)
    } else {
        String::new()
    };
    let by_gp_seq = match summary.by_gp_seq {
        Some(n) if n == count => "; rcu_state.gp_seq advanced by as many".to_string(),
        Some(n) => format!(
            "; warning: rcu_state.gp_seq says {n} from the first to the last, so {} were not seen",
            n.saturating_sub(count)
        ),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "\nGrace periods: {count} in {secs:.2} s{rate}{by_gp_seq}"
    );
    if summary.rcu_node_leaves.len() > 1 {
        let _ = writeln!(
            out,
            "rcu_node tree: {} leaves of CPUs {}",
            summary.rcu_node_leaves.len(),
            summary.rcu_node_leaves.join(" ")
        );
    }
    if summary.without_report > 0 {
        let _ = writeln!(
            out,
            "warning: {} grace periods ended without a quiescent-state report seen from every \
             CPU (rcu_report_qs_rnp's hook did not fire, or the kernel skipped it while another \
             BPF program ran on that CPU): their last holdout is unknown",
            summary.without_report
        );
    }
    let suffix = unit.suffix();
    let fixed = |ns: u64| figure::fixed_number(ns as f64, unit);
    let _ = writeln!(
        out,
        "\n{:<46}{:>6}  {:>10}  {:>10}  {:>10}",
        format!("Phases ({suffix})"),
        "count",
        "p50",
        "p99",
        "max",
    );
    for phase in &summary.phases {
        let stats = &phase.stats;
        let percentile = |q: f64| {
            stats
                .percentiles
                .iter()
                .find(|(pq, _)| *pq == q)
                .map_or("-".to_string(), |&(_, ns)| figure::fixed_number(ns, unit))
        };
        let _ = writeln!(
            out,
            "  {:<44}{:>6}  {:>10}  {:>10}  {:>10}",
            phase.name,
            stats.count,
            percentile(0.5),
            percentile(0.99),
            stats.max_ns.map_or("-".to_string(), fixed),
        );
    }
    let _ = writeln!(
        out,
        "  (the last four add up to each grace period's duration; the first is known only \
         where the request that woke the kthread was seen)"
    );
    out.push_str(&holdouts_by_cpu(
        &summary.holdouts_by_cpu,
        summary.holdout_cpus_shown,
        unit,
    ));
    if !summary.holdouts_by_task.is_empty() {
        let _ = writeln!(
            out,
            "\nLast holdouts, by blocked reader:\n  {:>7}  {:<16}  {:>13}  {:>12}",
            "PID",
            "COMM",
            "GRACE PERIODS",
            format!("HELD ({suffix})"),
        );
        for row in &summary.holdouts_by_task {
            let _ = writeln!(
                out,
                "  {:>7}  {:<16}  {:>13}  {:>12}",
                row.pid,
                row.comm,
                row.grace_periods,
                fixed(row.held_ns)
            );
        }
    }
    if !summary.slowest.is_empty() {
        let _ = writeln!(
            out,
            "\nSlowest {} grace periods ({suffix}):\n  {:>12}  {:>10}  {:>8}  {:>10}  {:>8}  {:>8}  {:>4}  LAST HOLDOUT",
            summary.slowest.len(),
            "GP_SEQ",
            "DURATION",
            "INIT",
            "QS WAIT",
            "WAKE",
            "CLEANUP",
            "FQS",
        );
        for row in &summary.slowest {
            let gp = &row.grace_period;
            let p = gp.phases;
            let _ = writeln!(
                out,
                "  {:>12}  {:>10}  {:>8}  {:>10}  {:>8}  {:>8}  {:>4}  {}",
                gp.gp_seq as i64,
                fixed(gp.duration_ns),
                fixed(p.init_ns),
                fixed(p.quiescent_wait_ns),
                fixed(p.kthread_wake_ns),
                fixed(p.cleanup_ns),
                gp.fqs_passes,
                holdout_text(gp.last_holdout.as_ref(), unit),
            );
            if !row.stack.is_empty() {
                let _ = writeln!(out, "      stack: {}", row.stack.join("; "));
            }
        }
    }
    let u = &summary.unassembled;
    let l = &summary.lost;
    let _ = writeln!(
        out,
        "\nNot assembled: {} begun before tracing, {} incomplete, {} inits for nothing{}; lost: \
         {} events, {} stacks, {} blocked readers not followed, {} kernel reads failed, {} \
         missed by the kernel",
        u.began_before_tracing,
        u.incomplete,
        u.spurious_inits,
        match u.undecoded_reports {
            0 => String::new(),
            n => format!(", {n} reports from no rcu_node of the tree"),
        },
        l.events,
        l.stacks,
        l.blocked_readers,
        l.kernel_reads,
        l.missed_by_kernel
    );
    out
}

/// `gp`'s last holdouts by CPU, most grace periods first (as the model sorts them): the first
/// `shown`, then the rest added up on one line, so that hundreds of CPUs take a dozen lines.
/// One row left over is listed, not summed: its line would take as much room.
fn holdouts_by_cpu(rows: &[CpuHoldouts], shown: usize, unit: Unit) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let shown = if rows.len() <= shown + 1 {
        rows.len()
    } else {
        shown
    };
    let (listed, rest) = rows.split_at(shown);
    // A row is one holdout: a CPU, or the CPUs a pass found at once (a whole idle leaf).
    let cpus_of = |rows: &[CpuHoldouts]| {
        rows.iter()
            .flat_map(|r| &r.cpus)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    let fixed = |ns: u64| figure::fixed_number(ns as f64, unit);
    let of = if rest.is_empty() {
        String::new()
    } else {
        format!(" ({} of {} CPUs, --top)", cpus_of(listed), cpus_of(rows))
    };
    let _ = writeln!(
        out,
        "\nLast holdouts, by CPU, most grace periods first{of}:"
    );
    let lists: Vec<String> = listed.iter().map(|row| cpu_list(&row.cpus)).collect();
    // As wide as the longest list of CPUs.
    let width = lists.iter().map(String::len).max().unwrap_or(0).max(5);
    if !listed.is_empty() {
        let _ = writeln!(
            out,
            "  {:>width$}  {:>13}  {:>15}  {:>12}",
            "CPU",
            "GRACE PERIODS",
            "FOUND BY A PASS",
            format!("HELD ({})", unit.suffix()),
        );
    }
    for (row, list) in listed.iter().zip(&lists) {
        let _ = writeln!(
            out,
            "  {:>width$}  {:>13}  {:>15}  {:>12}",
            list,
            row.grace_periods,
            row.found_by_pass,
            fixed(row.held_ns)
        );
    }
    if !rest.is_empty() {
        let cpus = if listed.is_empty() {
            format!("{} CPUs", cpus_of(rest))
        } else {
            format!("... {} more CPUs", cpus_of(rest))
        };
        let _ = writeln!(
            out,
            "  {cpus}: {} grace periods, {} found by a pass, held {} {} (-f json lists every CPU)",
            rest.iter().map(|r| r.grace_periods).sum::<u64>(),
            rest.iter().map(|r| r.found_by_pass).sum::<u64>(),
            fixed(rest.iter().map(|r| r.held_ns).sum()),
            unit.suffix(),
        );
    }
    out
}

/// A grace period's last holdout in a few words.
fn holdout_text(
    holdout: Option<&crate::model::anatomy::Holdout>,
    unit: crate::model::Unit,
) -> String {
    use crate::model::anatomy::Holdout;
    match holdout {
        None => "unknown (no report seen)".into(),
        Some(Holdout::Cpu {
            cpus,
            found_by_pass,
            sample,
        }) => {
            let which = match cpus.as_slice() {
                [] => "no CPU".to_string(),
                [cpu] => format!("CPU {cpu}"),
                _ => format!("CPUs {} ({})", cpu_list(cpus), cpus.len()),
            };
            let how = if *found_by_pass {
                "found quiescent by a pass"
            } else {
                "reported itself"
            };
            let running = sample.as_ref().map_or(String::new(), |s| {
                format!(
                    ", running pid {} {} in {}",
                    s.task.pid,
                    s.task.comm,
                    s.mode.name()
                )
            });
            format!("{which} ({how}{running})")
        }
        Some(Holdout::Task {
            task,
            cpu,
            blocked_ns,
            ..
        }) => format!(
            "blocked reader pid {} {} (on CPU {cpu}, blocked {})",
            task.pid,
            task.comm,
            figure::exact(*blocked_ns, unit)
        ),
        Some(Holdout::Readers { task, cpus }) => format!(
            "blocked readers of CPUs {}, the last pid {} {} (blocked before tracing began)",
            cpu_list(cpus),
            task.pid,
            task.comm
        ),
    }
}

/// `rcutrace callbacks`' table: one row per callback function and entry point, most queued
/// first, then the totals and everything that could not be timed.
fn callbacks_summary(summary: &CallbacksSummary) -> String {
    let unit = summary.unit;
    let mut out = String::new();
    // The percentiles have as many digits as their bound needs, and no more.
    let digits = figure::digits_for(summary.percentile_error);
    let _ = writeln!(
        out,
        "Callbacks over {:.2} s (latency: queued to invoked, in {}; percentiles within {}%):",
        summary.elapsed.as_secs_f64(),
        unit.suffix(),
        figure::percent_bound(summary.percentile_error + figure::rounding_error(digits))
    );
    let estimate = |ns: f64| figure::estimate_number(ns, unit);
    // One precision per column: the exact extremes with the decimals the most precise needs.
    let places = figure::places_needed(
        summary
            .rows
            .iter()
            .flat_map(|r| [r.latency.min_ns, r.latency.max_ns])
            .flatten(),
        unit,
    );
    let exact = |ns: u64| figure::exact_number_places(ns, unit, places);
    let header = [
        "FUNCTION", "VIA", "QUEUED", "INVOKED", "PENDING", "BEFORE", "MIN", "MEAN", "MAX", "P50",
        "P90", "P99",
    ];
    let mut table: Vec<Vec<String>> = vec![header.map(String::from).to_vec()];
    for row in &summary.rows {
        let latency = &row.latency;
        let percentile = |q: f64| {
            let found = latency.percentiles.iter().find(|(p, _)| *p == q);
            found.map_or("-".into(), |&(_, ns)| {
                // An exact extreme prints as its column does, never rounded below it.
                match [latency.min_ns, latency.max_ns]
                    .into_iter()
                    .flatten()
                    .find(|&e| e as f64 == ns)
                {
                    Some(extreme) => exact(extreme),
                    None => figure::estimate_digits(ns, unit, digits),
                }
            })
        };
        table.push(vec![
            row.function.clone(),
            row.via.clone(),
            row.queued.to_string(),
            row.invoked.to_string(),
            row.pending_at_exit.to_string(),
            row.queued_before_tracing.to_string(),
            latency.min_ns.map_or("-".into(), exact),
            latency.mean_ns.map_or("-".into(), estimate),
            latency.max_ns.map_or("-".into(), exact),
            percentile(0.5),
            percentile(0.9),
            percentile(0.99),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|column| table.iter().map(|r| r[column].len()).max().unwrap_or(0))
        .collect();
    for cells in &table {
        let mut line = String::from(" ");
        for (column, cell) in cells.iter().enumerate() {
            let width = widths[column];
            // Names left-aligned, numbers right-aligned.
            if column < 2 {
                let _ = write!(line, " {cell:<width$}");
            } else {
                let _ = write!(line, " {cell:>width$}");
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    // Each total is its column added up over every row, the rows not shown included.
    let counts = |c: &CallbackCounts| {
        format!(
            "{} queued, {} invoked, {} pending, {} before",
            c.queued, c.invoked, c.pending_at_exit, c.queued_before_tracing
        )
    };
    if summary.rows_not_shown > 0 {
        let _ = writeln!(
            out,
            "  ... {} more rows: {}; --top 0 shows all",
            summary.rows_not_shown,
            counts(&summary.not_shown)
        );
    }
    let totals = &summary.totals;
    let _ = writeln!(
        out,
        "  all rows: {}",
        counts(&CallbackCounts {
            queued: totals.queued,
            invoked: totals.invoked,
            pending_at_exit: totals.pending_at_exit,
            queued_before_tracing: totals.queued_before_tracing,
        })
    );
    if let Some(kvfree) = totals.kvfree_queued {
        let _ = writeln!(
            out,
            "  kvfree_call_rcu: {kvfree} objects queued (kfree_rcu(), kvfree_rcu()); the kernel \
             frees them in batches, not through a callback each, so they are counted, not timed"
        );
    }
    let _ = writeln!(
        out,
        "  not timed: {} queued before tracing began (BEFORE), {} not recorded (pending map \
         full), {} requeued before their invocation was seen, {} missed by the kernel, {} \
         queued and {} invoked lost to a full row map",
        totals.queued_before_tracing,
        totals.pending_map_full,
        totals.requeued,
        totals.missed_by_kernel,
        totals.rows_map_full_queued,
        totals.rows_map_full_invoked,
    );
    if !summary.entry_points_not_traced.is_empty() {
        let _ = writeln!(
            out,
            "  entry points not traced (not on this kernel): {}",
            summary.entry_points_not_traced.join(", ")
        );
    }
    out.push_str(&disagreements(&summary.cross_checks));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Losses, SeriesStats, Unit};
    use rcutrace_common::hist::{LOG2_SLOTS, log2_slot};

    fn log2_of(values: &[i64]) -> Vec<u64> {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        for &v in values {
            counts[log2_slot(v) as usize] += 1;
        }
        counts
    }

    fn hist(name: &str, buckets: Buckets) -> String {
        let mut out = String::new();
        hist_map(
            &mut out,
            &HistMap {
                name: name.into(),
                key: None,
                buckets,
            },
            None,
        );
        out
    }

    const FULL: &str = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@";
    const HALF: &str = "@@@@@@@@@@@@@@@@@@@@@@@@@@                          ";
    const NONE: &str = "                                                    ";

    #[test]
    fn log2_vector() {
        let expected = format!(
            "@: \n\
             (..., 0)               1 |{HALF}|\n\
             [0]                    0 |{NONE}|\n\
             [1]                    0 |{NONE}|\n\
             [2, 4)                 2 |{FULL}|\n\
             [4, 8)                 1 |{HALF}|\n\
             [8, 16)                0 |{NONE}|\n\
             [16, 32)               1 |{HALF}|\n\
             \n"
        );
        assert_eq!(
            hist("@", Buckets::Log2(log2_of(&[-1, 2, 3, 7, 20]))),
            expected
        );
    }

    #[test]
    fn linear_vector() {
        let linear = Linear {
            min: 0,
            max: 10,
            step: 2,
        };
        let mut counts = vec![0; linear.buckets() as usize + 2];
        for v in [2i64, 3, 7, -1, 11] {
            let slot = if v < 0 { 0 } else { linear.slot(v as u64) };
            counts[slot as usize] += 1;
        }
        let expected = format!(
            "@: \n\
             (..., 0)               1 |{HALF}|\n\
             [0, 2)                 0 |{NONE}|\n\
             [2, 4)                 2 |{FULL}|\n\
             [4, 6)                 0 |{NONE}|\n\
             [6, 8)                 1 |{HALF}|\n\
             [8, 10)                0 |{NONE}|\n\
             [10, ...)              1 |{HALF}|\n\
             \n"
        );
        assert_eq!(hist("@", Buckets::Linear(linear, counts)), expected);
    }

    #[test]
    fn bars_use_single_precision() {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        counts[4] = 26;
        counts[5] = 15;
        let expected = format!(
            "@h: \n\
             [4, 8)                26 |{FULL}|\n\
             [8, 16)               15 |{:<52}|\n\
             \n",
            "@".repeat(30)
        );
        assert_eq!(hist("@h", Buckets::Log2(counts)), expected);
        assert_eq!(bar_width(15, 26), 30);
    }

    #[test]
    fn whole_run_vector() {
        let mut h = vec![0; LOG2_SLOTS as usize];
        h[log2_slot(5) as usize] = 1;
        let mut hk1 = vec![0; LOG2_SLOTS as usize];
        hk1[log2_slot(1) as usize] = 1;
        let mut hk2 = vec![0; LOG2_SLOTS as usize];
        hk2[log2_slot(100) as usize] = 1;
        hk2[log2_slot(200) as usize] = 1;
        let all = vec![
            Map::Hist(HistMap {
                name: "@hk".into(),
                key: Some("2".into()),
                buckets: Buckets::Log2(hk2),
            }),
            Map::Count(CountMap {
                name: "@a".into(),
                entries: vec![("y".into(), 2), ("x".into(), 1)],
            }),
            Map::Hist(HistMap {
                name: "@h".into(),
                key: None,
                buckets: Buckets::Log2(h),
            }),
            Map::Hist(HistMap {
                name: "@hk".into(),
                key: Some("1".into()),
                buckets: Buckets::Log2(hk1),
            }),
        ];
        let out = banner(1) + "\n\n" + &maps(&all, &|_| None);
        let expected = format!(
            "Attaching 1 probe...\n\
             \n\
             \n\
             @a[x]: 1\n\
             @a[y]: 2\n\
             @h: \n\
             [4, 8)                 1 |{FULL}|\n\
             \n\
             @hk[1]: \n\
             [1]                    1 |{FULL}|\n\
             \n\
             @hk[2]: \n\
             [64, 128)              1 |{FULL}|\n\
             [128, 256)             1 |{FULL}|\n\
             \n"
        );
        assert_eq!(out, expected);
    }

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
    fn count_ties_sort_by_key() {
        let mut out = String::new();
        count_map(
            &mut out,
            &CountMap {
                name: "@".into(),
                entries: vec![("b".into(), 3), ("c".into(), 1), ("a".into(), 3)],
            },
        );
        assert_eq!(out, "@[c]: 1\n@[a]: 3\n@[b]: 3\n");
    }

    #[test]
    fn labels_at_the_edges() {
        assert_eq!(log2_label(11), "[512, 1K)");
        assert_eq!(log2_label(12), "[1K, 2K)");
        assert_eq!(log2_label(21), "[512K, 1M)");
        assert_eq!(log2_label(33), "[2G, 4G)");
        assert_eq!(log2_label(34), "[4G, 8G)");
        assert_eq!(log2_label(64), "[4E, 8E)");
        let kib = Linear {
            min: 0,
            max: 4096,
            step: 1024,
        };
        assert_eq!(linear_label(&kib, 1), "[0, 1K)");
        assert_eq!(linear_label(&kib, 2), "[1K, 2K)");
        assert_eq!(linear_label(&kib, 5), "[4K, ...)");
        let mib = Linear {
            min: 1 << 20,
            max: 3 << 20,
            step: 1 << 20,
        };
        assert_eq!(linear_label(&mib, 0), "(..., 1M)");
        assert_eq!(linear_label(&mib, 2), "[2M, 3M)");
        // A step that is not a multiple of 1024 never abbreviates (bpftrace 0.17 could).
        let plain = Linear {
            min: 0,
            max: 1_250_000,
            step: 5_000,
        };
        assert_eq!(linear_label(&plain, 126), "[625000, 630000)");
    }

    #[test]
    fn long_labels_and_counts_push_the_row() {
        let linear = Linear {
            min: 1_000_000_000_000,
            max: 1_000_000_000_010,
            step: 10,
        };
        let counts = vec![0, 123_456_789_012, 0];
        let out = hist("@", Buckets::Linear(linear, counts));
        assert!(
            out.contains("[1000000000000, 1000000000010)123456789012 |"),
            "{out}"
        );
    }

    #[test]
    fn sparse_buckets_print_every_non_empty_bucket_ascending() {
        let out = hist(
            "@srlat",
            Buckets::Sparse {
                step: 100,
                buckets: vec![(2, 4), (1, 20), (70, 1)],
            },
        );
        assert_eq!(
            out,
            "@srlat: \n[100, 200): 20\n[200, 300): 4\n[7000, 7100): 1\n\n"
        );
        // `--buckets 3`: each row with its unit.
        let report = Report {
            time: None,
            maps: vec![Map::Hist(HistMap {
                name: "@srlat".into(),
                key: None,
                buckets: Buckets::Sparse {
                    step: 3,
                    buckets: vec![(3, 2)],
                },
            })],
            summary: Summary::Latency(vec![LatencySummary {
                map_name: "@srlat".into(),
                unit: Unit::Ms,
                series: Vec::new(),
                percentile_error: 0.0,
                losses: crate::model::Losses::default(),
                stages: None,
                cross_checks: Vec::new(),
            }]),
            environment: None,
        };
        assert!(
            super::report(&report).contains("\n@srlat: \n[9, 12) ms: 2\n"),
            "{}",
            super::report(&report)
        );
    }

    /// bpftrace 0.17 prints a map it never wrote as an empty line: no header, no rows.
    #[test]
    fn empty_maps_print_as_bpftrace_prints_them() {
        assert_eq!(hist("@x", Buckets::Log2(vec![0; 65])), "\n");
        let linear = Linear {
            min: 0,
            max: 10,
            step: 5,
        };
        assert_eq!(hist("@x", Buckets::Linear(linear, vec![0; 4])), "\n");
        let sparse = Buckets::Sparse {
            step: 10,
            buckets: vec![],
        };
        assert_eq!(hist("@x", sparse), "\n");
        let mut out = String::new();
        count_map(
            &mut out,
            &CountMap {
                name: "@".into(),
                entries: vec![],
            },
        );
        assert_eq!(out, "\n");
    }

    fn count_summary_of(pairs: [Option<u64>; 4], secs: u64) -> String {
        count_summary(&CountSummary {
            elapsed: std::time::Duration::from_secs(secs),
            readers: pairs[0],
            call_rcu: pairs[1],
            callbacks: pairs[2],
            callbacks_of: ["call_rcu", "call_rcu_hurry", "kvfree_call_rcu"]
                .map(String::from)
                .to_vec(),
            grace_periods: pairs[3],
            missed: 0,
            own_calls_left_out: 0,
            keyed_losses: None,
            readers_estimate: None,
            cross_checks: Vec::new(),
        })
    }

    /// A sampled estimate is never printed as a count: the figure, its margin, how it was
    /// sampled, and the grace periods rcutrace's switching may have caused.
    #[test]
    fn an_estimate_says_so() {
        let estimate = ReadersEstimate {
            readers: Some(1_000_000),
            counted: 99_000,
            sampled: Duration::from_millis(990),
            windows: 10,
            margin: Some(12_345),
            switching_grace_periods: 31,
            switching_calls_left_out: 20,
        };
        let summary = |estimate: ReadersEstimate| {
            count_summary(&CountSummary {
                elapsed: Duration::from_secs(10),
                readers: estimate.readers,
                grace_periods: Some(400),
                readers_estimate: Some(estimate),
                ..CountSummary::default()
            })
        };
        let text = summary(estimate);
        assert!(
            text.contains(
                "  RCU readers, estimated:       ~1000000 \u{b1}12345 (1.2%) at 95% confidence\n    \
                 counted 99000 in 10 windows of the reader probe, 0.990 s (9.9% of the time),\n    \
                 assuming the load was the same while it was detached\n"
            ),
            "{text}"
        );
        assert!(text.contains(
            "    up to 31 of them ended while rcutrace switched its reader probe;\n    \
             20 updater calls the tasks-RCU kthreads made for its detaching are not counted\n"
        ));
        assert!(text.contains("RCU readers per grace period: 2500.0 (100000.0/s) (estimated)"));
        let one = summary(ReadersEstimate {
            windows: 1,
            margin: None,
            ..estimate
        });
        assert!(
            one.contains("~1000000, margin unknown (one window)"),
            "{one}"
        );
        let none = summary(ReadersEstimate {
            readers: None,
            windows: 0,
            ..estimate
        });
        assert!(
            none.contains("not estimated (no window was sampled)"),
            "{none}"
        );
    }

    #[test]
    fn ratios_per_grace_period_and_second() {
        let text = count_summary_of([Some(100_000), Some(30), Some(40), Some(20)], 10);
        assert!(
            text.contains("grace periods:                20 (2.0/s)"),
            "{text}"
        );
        assert!(
            text.contains("RCU readers per grace period: 5000.0 (10000.0/s)"),
            "{text}"
        );
        assert!(
            text.contains("call_rcu() per grace period:  1.5 (3.0/s)"),
            "{text}"
        );
        assert!(
            text.contains("callbacks per grace period:   2.0 (4.0/s)"),
            "{text}"
        );
        assert!(text.contains("missed by the kernel: 0"), "{text}");
    }

    #[test]
    fn what_was_left_out_as_rcutraces_own_doing_is_said() {
        let plain = count_summary_of([Some(100), Some(3), Some(4), Some(2)], 3);
        assert!(!plain.contains("rcutrace's own doing"), "{plain}");
        let summary = CountSummary {
            own_calls_left_out: 5,
            elapsed: std::time::Duration::from_secs(3),
            ..CountSummary::default()
        };
        let text = count_summary(&summary);
        assert!(
            text.contains(
                "not counted, as rcutrace's own doing: 5 calls other threads made for its \
                 attaching and detaching (tasks-RCU kthreads, SRCU workers)"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_window_too_short_gives_no_rates() {
        let text = count_summary_of([Some(100), Some(3), Some(4), Some(2)], 0);
        assert!(text.contains("(too short a window for rates)"), "{text}");
        assert!(text.contains("grace periods:                2\n"), "{text}");
        assert!(!text.contains("/s)"), "{text}");
    }

    #[test]
    fn no_grace_period_is_not_a_division_by_zero() {
        let text = count_summary_of([Some(5), None, None, Some(0)], 1);
        assert!(text.contains("RCU readers per grace period: n/a"), "{text}");
        assert!(
            text.contains("call_rcu() per grace period:  not traced"),
            "{text}"
        );
        let text = count_summary_of([None, Some(1), None, None], 0);
        assert!(text.contains("grace periods: not traced"), "{text}");
        assert!(text.contains("missed by the kernel: 0"), "{text}");
    }

    #[test]
    fn stack_keys_fit_one_summary_line() {
        assert_eq!(
            one_line("\n    rcu_barrier+5\n    cleanup_net+463\n"),
            "rcu_barrier+5; cleanup_net+463"
        );
        assert_eq!(one_line("kworker/1:1"), "kworker/1:1");
    }

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

    /// `gp`'s summary of a machine of `cpus` CPUs: each a last holdout twice (once found by a
    /// pass, 0.25 ms held each time), but the `worst`, each `n` times (half found by a pass,
    /// 1 ms each), tallied as `gp` tallies them.
    fn holdouts_model(cpus: u32, worst: &[(u32, u64)], shown: usize) -> GracePeriodsSummary {
        use crate::model::{
            aggregate::Layout,
            anatomy::{GracePeriod, Holdout},
            grace_periods::Tally,
        };
        let mut tally = Tally::new(Layout::Log2, Unit::Ms, shown);
        let mut gp_seq = 0;
        let mut add = |tally: &mut Tally, cpu: u32, found_by_pass: bool, held_ns: u64| {
            gp_seq += 4;
            tally.add(GracePeriod {
                gp_seq,
                started_ns: gp_seq * 1_000_000,
                duration_ns: held_ns + 100_000,
                phases: Default::default(),
                request_wait_ns: None,
                fqs_passes: u32::from(found_by_pass),
                cpus_reported: cpus,
                blocked_readers: 0,
                last_holdout: Some(Holdout::Cpu {
                    cpus: vec![cpu],
                    found_by_pass,
                    sample: None,
                }),
                held_ns,
            });
        };
        for cpu in 0..cpus {
            match worst.iter().find(|(c, _)| *c == cpu) {
                Some(&(_, n)) => {
                    for i in 0..n {
                        add(&mut tally, cpu, i % 2 == 0, 1_000_000);
                    }
                }
                None => {
                    add(&mut tally, cpu, true, 250_000);
                    add(&mut tally, cpu, false, 250_000);
                }
            }
        }
        GracePeriodsSummary {
            elapsed: Duration::from_secs(10),
            latency: LatencySummary {
                map_name: "@gplat".into(),
                unit: Unit::Ms,
                series: vec![tally.duration().stats(None)],
                percentile_error: crate::model::stats::PERCENTILE_ERROR,
                losses: crate::model::Losses::default(),
                stages: None,
                cross_checks: Vec::new(),
            },
            phases: tally.phases(),
            holdouts_by_cpu: tally.holdouts_by_cpu(),
            holdout_cpus_shown: shown,
            holdouts_by_task: tally.holdouts_by_task(),
            slowest: Vec::new(),
            by_gp_seq: tally.by_gp_seq(),
            without_report: tally.without_report(),
            unassembled: Default::default(),
            lost: Default::default(),
            rcu_node_leaves: Vec::new(),
        }
    }

    /// The lines of the by-CPU table in `gp`'s summary, its title first.
    fn holdouts_table(summary: &GracePeriodsSummary) -> Vec<String> {
        let text = grace_periods_summary(summary);
        let start = text
            .find("Last holdouts, by CPU")
            .unwrap_or_else(|| panic!("{text}"));
        text[start..]
            .lines()
            .take_while(|l| !l.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn holdouts_of_384_cpus_list_the_worst_ten_and_sum_the_rest() {
        // The worst ten out of CPU order, two of them tied (the lower CPU first).
        let worst = [
            (7, 100),
            (300, 90),
            (12, 90),
            (255, 80),
            (64, 70),
            (128, 60),
            (200, 50),
            (3, 40),
            (383, 30),
            (90, 20),
        ];
        let summary = holdouts_model(384, &worst, 10);
        // JSON's rows: every CPU.
        assert_eq!(summary.holdouts_by_cpu.len(), 384);
        let table = holdouts_table(&summary);
        assert_eq!(
            table,
            [
                "Last holdouts, by CPU, most grace periods first (10 of 384 CPUs, --top):",
                "    CPU  GRACE PERIODS  FOUND BY A PASS     HELD (ms)",
                "      7            100               50       100.000",
                "     12             90               45        90.000",
                "    300             90               45        90.000",
                "    255             80               40        80.000",
                "     64             70               35        70.000",
                "    128             60               30        60.000",
                "    200             50               25        50.000",
                "      3             40               20        40.000",
                "    383             30               15        30.000",
                "     90             20               10        20.000",
                "  ... 374 more CPUs: 748 grace periods, 374 found by a pass, held 187.000 ms \
                 (-f json lists every CPU)",
            ]
        );
        assert!(table.iter().all(|l| l.len() <= 120), "{table:#?}");
        // Shown and summed add up to every grace period tallied.
        let total: u64 = worst.iter().map(|(_, n)| n).sum::<u64>() + 748;
        assert_eq!(summary.latency.series[0].count, total);
    }

    #[test]
    fn holdouts_of_64_cpus_list_the_worst_ten_and_sum_the_rest() {
        let worst = [
            (7, 100),
            (60, 90),
            (12, 90),
            (55, 80),
            (33, 70),
            (40, 60),
            (20, 50),
            (3, 40),
            (63, 30),
            (50, 20),
        ];
        let table = holdouts_table(&holdouts_model(64, &worst, 10));
        assert_eq!(table.len(), 13, "{table:#?}");
        assert_eq!(
            table[0],
            "Last holdouts, by CPU, most grace periods first (10 of 64 CPUs, --top):"
        );
        assert_eq!(
            table[2],
            "      7            100               50       100.000"
        );
        assert_eq!(
            table[3],
            "     12             90               45        90.000"
        );
        assert_eq!(
            table[4],
            "     60             90               45        90.000"
        );
        assert_eq!(
            table[11],
            "     50             20               10        20.000"
        );
        assert_eq!(
            table[12],
            "  ... 54 more CPUs: 108 grace periods, 54 found by a pass, held 27.000 ms \
             (-f json lists every CPU)"
        );
    }

    #[test]
    fn holdouts_of_few_cpus_list_every_one_and_top_0_only_sums() {
        // Two CPUs: both listed, nothing summed.
        let table = holdouts_table(&holdouts_model(2, &[(1, 3)], 10));
        assert_eq!(
            table,
            [
                "Last holdouts, by CPU, most grace periods first:",
                "    CPU  GRACE PERIODS  FOUND BY A PASS     HELD (ms)",
                "      1              3                2         3.000",
                "      0              2                1         0.500",
            ]
        );
        // One CPU beyond --top is listed: summing it would take as many lines.
        let table = holdouts_table(&holdouts_model(11, &[], 10));
        assert_eq!(table.len(), 13, "{table:#?}");
        assert!(!table.iter().any(|l| l.contains("more CPUs")), "{table:#?}");
        // --top 0 lists no slowest grace period and no CPU: the one line holds them all.
        let table = holdouts_table(&holdouts_model(384, &[], 0));
        assert_eq!(
            table,
            [
                "Last holdouts, by CPU, most grace periods first (0 of 384 CPUs, --top):",
                "  384 CPUs: 768 grace periods, 384 found by a pass, held 192.000 ms \
                 (-f json lists every CPU)",
            ]
        );
    }
}
