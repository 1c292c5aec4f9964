//! `rcutrace gp`'s summary: statistics, phases, the last holdouts by CPU and by task, the
//! slowest grace periods and what was not seen.

use std::{collections::BTreeMap, fmt::Write as _};

use super::latency::latency_summary;
use rcutrace_common::records::GracePeriod;

use crate::{
    model::tree::cpu_list,
    model::{CpuHoldouts, GracePeriodsSummary, MIN_RATE_WINDOW_SECS, Unit},
    render::figure,
};

/// `rcutrace gp`'s lines after the duration histogram: its statistics, each phase's, the
/// last holdouts by CPU and by task, the slowest grace periods, and what was not seen.
pub(super) fn grace_periods_summary(summary: &GracePeriodsSummary) -> String {
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
        let percentile = |q: f64| super::percentile_column(stats, q, unit);
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
        CpuTable::NORMAL,
        &summary.holdouts_by_cpu,
        summary.holdout_cpus_shown,
        unit,
    ));
    out.push_str(&holdouts_by_task(
        "Last holdouts, by blocked reader",
        &summary.holdouts_by_task,
        unit,
    ));
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
                holdout_text(gp.last_holdout.as_ref(), false, unit),
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
        "\nNot assembled: {} begun before tracing, {} incomplete{}, {} inits for nothing{}; lost: \
         {} events, {} stacks, {} blocked readers not followed, {} kernel reads failed, {} \
         missed by the kernel{}",
        u.began_before_tracing,
        u.incomplete,
        match u.unseen {
            0 => String::new(),
            n => format!(", {n} unseen (skipped whole by the kernel)"),
        },
        u.spurious_inits,
        match u.undecoded_reports {
            0 => String::new(),
            n => format!(", {n} reports from no rcu_node of the tree"),
        },
        l.events,
        l.stacks,
        l.blocked_readers,
        l.kernel_reads,
        l.missed_by_kernel,
        missed_by_hook(&l.missed_by_hook)
    );
    if let Some(expedited) = &summary.expedited {
        out.push_str(&expedited_summary(
            expedited,
            summary.elapsed.as_secs_f64(),
            summary.holdout_cpus_shown,
            unit,
        ));
    }
    out
}

/// The expedited grace periods' section: their count against `expedited_sequence`, their
/// durations, their last holdouts by CPU and by blocked reader, the slowest, and what was not
/// assembled.
fn expedited_summary(
    e: &crate::model::ExpeditedGracePeriods,
    secs: f64,
    shown: usize,
    unit: Unit,
) -> String {
    let mut out = String::new();
    let count = e.durations.count;
    let rate = if secs >= MIN_RATE_WINDOW_SECS {
        format!(" ({:.1}/s)", count as f64 / secs)
    } else {
        String::new()
    };
    let by_sequence = match e.by_sequence {
        Some(n) if n == count => "; rcu_state.expedited_sequence advanced by as many".to_string(),
        Some(n) => format!(
            "; warning: rcu_state.expedited_sequence says {n} from the first to the last, so {} \
             were not seen",
            n.saturating_sub(count)
        ),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "\nExpedited grace periods: {count} in {secs:.2} s{rate}{by_sequence}"
    );
    let suffix = unit.suffix();
    let fixed = |ns: u64| figure::fixed_number(ns as f64, unit);
    if count > 0 {
        let percentile = |q: f64| super::percentile_column(&e.durations, q, unit);
        let _ = writeln!(
            out,
            "  duration ({suffix}), from selecting CPUs to waking the waiters: p50 {}, p99 {}, \
             max {}",
            percentile(0.5).trim(),
            percentile(0.99).trim(),
            e.durations.max_ns.map_or("-".to_string(), fixed),
        );
    }
    if e.without_report > 0 {
        let _ = writeln!(
            out,
            "warning: {} expedited grace periods ended with no report seen: their last holdout \
             is unknown",
            e.without_report
        );
    }
    out.push_str(&holdouts_by_cpu(
        CpuTable::EXPEDITED,
        &e.holdouts_by_cpu,
        shown,
        unit,
    ));
    out.push_str(&holdouts_by_task(
        "Last holdouts of expedited grace periods, by blocked reader",
        &e.holdouts_by_task,
        unit,
    ));
    if !e.slowest.is_empty() {
        let _ = writeln!(
            out,
            "\nSlowest {} expedited grace periods ({suffix}):\n  {:>12}  {:>10}  {:>10}  {:>8}  {:>4}  LAST HOLDOUT",
            e.slowest.len(),
            "SEQUENCE",
            "DURATION",
            "QS WAIT",
            "WAKE",
            "CPUS",
        );
        for row in &e.slowest {
            let gp = &row.grace_period;
            let _ = writeln!(
                out,
                "  {:>12}  {:>10}  {:>10}  {:>8}  {:>4}  {}",
                gp.gp_seq as i64,
                fixed(gp.duration_ns),
                fixed(gp.phases.quiescent_wait_ns),
                fixed(gp.phases.kthread_wake_ns),
                gp.cpus_reported,
                holdout_text(gp.last_holdout.as_ref(), true, unit),
            );
            if !row.stack.is_empty() {
                let _ = writeln!(out, "      stack: {}", row.stack.join("; "));
            }
        }
    }
    let u = &e.unassembled;
    let _ = writeln!(
        out,
        "\nExpedited not assembled: {} begun before tracing, {} incomplete{}",
        u.began_before_tracing,
        u.incomplete,
        match u.undecoded_reports {
            0 => String::new(),
            n => format!(", {n} reports from no rcu_node leaf of the tree"),
        },
    );
    out
}

/// A table of last holdouts by blocked reader under `title`, if there are any.
fn holdouts_by_task(title: &str, rows: &[crate::model::TaskHoldouts], unit: Unit) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let fixed = |ns: u64| figure::fixed_number(ns as f64, unit);
    let _ = writeln!(
        out,
        "\n{title}:\n  {:>7}  {:<16}  {:>13}  {:>12}",
        "PID",
        "COMM",
        "GRACE PERIODS",
        format!("HELD ({})", unit.suffix()),
    );
    for row in rows {
        let _ = writeln!(
            out,
            "  {:>7}  {:<16}  {:>13}  {:>12}",
            row.pid,
            row.comm,
            row.grace_periods,
            fixed(row.held_ns)
        );
    }
    out
}

/// The words of a table of last holdouts by CPU: normal grace periods' CPUs are found by a
/// force-quiescent-state pass, expedited ones' at the selection of CPUs.
struct CpuTable {
    title: &'static str,
    found: &'static str,
    found_words: &'static str,
}

impl CpuTable {
    const NORMAL: CpuTable = CpuTable {
        title: "Last holdouts, by CPU",
        found: "FOUND BY A PASS",
        found_words: "found by a pass",
    };
    const EXPEDITED: CpuTable = CpuTable {
        title: "Last holdouts of expedited grace periods, by CPU",
        found: "FOUND AT SELECTION",
        found_words: "found at selection",
    };
}

/// `gp`'s last holdouts by CPU, most grace periods first (as the model sorts them): the first
/// `shown`, then the rest added up on one line, so that hundreds of CPUs take a dozen lines.
/// One row left over is listed, not summed: its line would take as much room.
fn holdouts_by_cpu(table: CpuTable, rows: &[CpuHoldouts], shown: usize, unit: Unit) -> String {
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
    let _ = writeln!(out, "\n{}, most grace periods first{of}:", table.title);
    let lists: Vec<String> = listed.iter().map(|row| cpu_list(&row.cpus)).collect();
    // As wide as the longest list of CPUs.
    let width = lists.iter().map(String::len).max().unwrap_or(0).max(5);
    let found_width = table.found.len();
    if !listed.is_empty() {
        let _ = writeln!(
            out,
            "  {:>width$}  {:>13}  {:>found_width$}  {:>12}",
            "CPU",
            "GRACE PERIODS",
            table.found,
            format!("HELD ({})", unit.suffix()),
        );
    }
    for (row, list) in listed.iter().zip(&lists) {
        let _ = writeln!(
            out,
            "  {:>width$}  {:>13}  {:>found_width$}  {:>12}",
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
            "  {cpus}: {} grace periods, {} {}, held {} {} (-f json lists every CPU)",
            rest.iter().map(|r| r.grace_periods).sum::<u64>(),
            rest.iter().map(|r| r.found_by_pass).sum::<u64>(),
            table.found_words,
            fixed(rest.iter().map(|r| r.held_ns).sum()),
            unit.suffix(),
        );
    }
    out
}

/// A grace period's last holdout in a few words.
fn holdout_text(
    holdout: Option<&crate::model::anatomy::Holdout>,
    expedited: bool,
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
            let how = match (*found_by_pass, expedited) {
                (true, false) => "found quiescent by a pass",
                (true, true) => "found idle or offline at selection",
                (false, _) => "reported itself",
            };
            let running = sample
                .as_ref()
                .map_or(String::new(), |s| format!(", {}", super::running(s)));
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

/// The slowest grace periods of the flavours other than normal RCU's (`gp --flavor`), one
/// row each: what ran it, its length, each phase its kernel has (a column per phase any of
/// them has; `-` where this one's was not seen), the passes over its holdouts (tasks RCU),
/// and what held it last: tasks (each with its stack where a tick sampled it), or the CPUs
/// where SRCU readers entered; then the calls that waited through it.
pub(super) fn slowest_of_flavours(grace_periods: &[GracePeriod], unit: Unit) -> String {
    let mut out = String::new();
    if grace_periods.is_empty() {
        return out;
    }
    let mut phases: Vec<&str> = Vec::new();
    for phase in grace_periods.iter().flat_map(|gp| &gp.phases) {
        if !phases.contains(&phase.name.as_str()) {
            phases.push(&phase.name);
        }
    }
    let passes = grace_periods.iter().any(|gp| gp.holdout_passes.is_some());
    let keys: Vec<String> = grace_periods
        .iter()
        .map(|gp| gp.key.clone().unwrap_or_else(|| gp.flavor.clone()))
        .collect();
    let key_width = keys.iter().map(String::len).max().unwrap_or(0).max(3);
    let widths: Vec<usize> = phases.iter().map(|p| p.len().max(8)).collect();
    let fixed = |ns: u64| figure::fixed_number(ns as f64, unit);
    let mut header = format!("  {:<key_width$}  {:>10}", "KEY", "DURATION");
    for (phase, width) in phases.iter().zip(&widths) {
        let _ = write!(header, "  {:>width$}", phase.to_uppercase());
    }
    if passes {
        header.push_str("  PASSES");
    }
    header.push_str("  HELD BY");
    let _ = writeln!(
        out,
        "\nSlowest {} grace periods ({}):\n{header}",
        grace_periods.len(),
        unit.suffix()
    );
    for (gp, key) in grace_periods.iter().zip(&keys) {
        let mut row = format!("  {key:<key_width$}  {:>10}", fixed(gp.duration_ns));
        for (phase, width) in phases.iter().zip(&widths) {
            let length = gp.phases.iter().find(|p| p.name == *phase);
            let _ = write!(
                row,
                "  {:>width$}",
                length.map_or("-".into(), |p| fixed(p.ns))
            );
        }
        if passes {
            let shown = gp.holdout_passes.map_or("-".into(), |n| n.to_string());
            let _ = write!(row, "  {shown:>6}");
        }
        let _ = writeln!(out, "{row}  {}", held_by(gp));
        for task in gp.holdout_tasks.iter().filter(|t| !t.stack.is_empty()) {
            let _ = writeln!(
                out,
                "      stack of pid {}: {}",
                task.pid,
                task.stack.join("; ")
            );
        }
        for waiter in &gp.waiters {
            let _ = writeln!(
                out,
                "      waited through by pid {} in {} for {} {}: {}",
                waiter.pid,
                waiter.function,
                fixed(waiter.waited_ns),
                unit.suffix(),
                waiter.stack.join("; ")
            );
        }
        if let Some(n) = gp.waiters_unlisted {
            let _ = writeln!(out, "      waited through by {n} more");
        }
    }
    out
}

/// What held a grace period of the other flavours last, in words.
fn held_by(gp: &GracePeriod) -> String {
    if !gp.holdout_tasks.is_empty() {
        let tasks: Vec<String> = gp
            .holdout_tasks
            .iter()
            .map(|t| format!("pid {} {} (CPU {})", t.pid, t.comm, t.cpu))
            .collect();
        return tasks.join(", ");
    }
    if !gp.reader_cpus.is_empty() {
        let cpus: Vec<String> = gp.reader_cpus.iter().map(u32::to_string).collect();
        return format!("readers that entered on CPUs {}", cpus.join(","));
    }
    "-".into()
}

/// The hooks whose hits the kernel skipped, after the total: ` (rcu_read_unlock_special 4,
/// rcu_gp_init%return 1)`, most first; nothing when none was.
fn missed_by_hook(hooks: &BTreeMap<String, u64>) -> String {
    if hooks.is_empty() {
        return String::new();
    }
    let mut most_first: Vec<(&String, &u64)> = hooks.iter().collect();
    most_first.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let named: Vec<String> = most_first
        .iter()
        .map(|(hook, n)| format!("{hook} {n}"))
        .collect();
    format!(" ({})", named.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LatencySummary;
    use std::time::Duration;

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
                expedited: false,
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
                grace_periods: Vec::new(),
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
            expedited: None,
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

    /// The hooks the kernel skipped hits of follow the total, most first; none, nothing.
    #[test]
    fn skipped_hits_are_named_by_hook() {
        let mut summary = holdouts_model(4, &[], 10);
        let line = |summary: &GracePeriodsSummary| {
            let text = grace_periods_summary(summary);
            text.lines()
                .find(|l| l.starts_with("Not assembled"))
                .map(String::from)
                .unwrap_or_else(|| panic!("{text}"))
        };
        assert!(line(&summary).ends_with(", 0 missed by the kernel"));
        summary.lost.missed_by_kernel = 6;
        summary.lost.missed_by_hook = [
            ("rcu_gp_init%return".to_string(), 1),
            ("rcu_read_unlock_special".to_string(), 4),
            ("rcu_sched_clock_irq".to_string(), 1),
        ]
        .into_iter()
        .collect();
        assert!(
            line(&summary).ends_with(
                ", 6 missed by the kernel (rcu_read_unlock_special 4, rcu_gp_init%return 1, \
                 rcu_sched_clock_irq 1)"
            ),
            "{}",
            line(&summary)
        );
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

    fn flavour_grace_period(key: &str, duration_ns: u64, phases: &[(&str, u64)]) -> GracePeriod {
        let mut gp: GracePeriod = serde_json::from_str(&format!(
            r#"{{"flavor":"tasks","key":"{key}","gp_seq":0,"started_ns":0,"duration_ns":{duration_ns}}}"#
        ))
        .unwrap();
        gp.phases = phases
            .iter()
            .map(|&(name, ns)| rcutrace_common::records::PhaseLength {
                name: name.into(),
                ns,
            })
            .collect();
        gp
    }

    #[test]
    fn the_slowest_of_the_flavours_show_each_phase_and_who_held_them() {
        let mut classic = flavour_grace_period(
            "rcu_tasks",
            452_100_000,
            &[
                ("pre_gp", 3_200_000),
                ("scan_tasklist", 120_000),
                ("post_scan", 4_000),
                ("holdouts", 445_300_000),
                ("post_gp", 3_476_000),
            ],
        );
        classic.holdout_passes = Some(5);
        classic.waiters = vec![rcutrace_common::records::WaiterRecord {
            pid: 189,
            function: "synchronize_rcu_tasks".into(),
            waited_ns: 460_000_000,
            stack: vec!["synchronize_rcu_tasks+5".into(), "op+9 [m]".into()],
        }];
        classic.holdout_tasks = vec![rcutrace_common::records::HoldoutTaskRecord {
            pid: 420,
            comm: "rcu-workload".into(),
            cpu: 3,
            stack: vec!["hold+5 [m]".into(), "op_hold+9 [m]".into()],
        }];
        // The rude flavour has no phases and no holdout tasks.
        let mut rude = flavour_grace_period("rcu_tasks_rude", 63_000_000, &[]);
        rude.holdout_passes = Some(0);
        let text = slowest_of_flavours(&[classic, rude], Unit::Ms);
        let expected = "
Slowest 2 grace periods (ms):
  KEY               DURATION    PRE_GP  SCAN_TASKLIST  POST_SCAN  HOLDOUTS   POST_GP  PASSES  HELD BY
  rcu_tasks          452.100     3.200          0.120      0.004   445.300     3.476       5  pid 420 rcu-workload (CPU 3)
      stack of pid 420: hold+5 [m]; op_hold+9 [m]
      waited through by pid 189 in synchronize_rcu_tasks for 460.000 ms: synchronize_rcu_tasks+5; op+9 [m]
  rcu_tasks_rude      63.000         -              -          -         -         -       0  -
";
        assert_eq!(text, expected, "\n{text}");
        // SRCU: its own phases, and the CPUs its readers entered on.
        let mut srcu = flavour_grace_period(
            "tracepoint_srcu",
            318_500_000,
            &[
                ("scan1", 318_000_000),
                ("scan2", 400_000),
                ("gp_end", 100_000),
            ],
        );
        srcu.flavor = "srcu".into();
        srcu.reader_cpus = vec![1, 3];
        let text = slowest_of_flavours(&[srcu], Unit::Ms);
        assert!(
            text.contains("SCAN1     SCAN2    GP_END  HELD BY\n"),
            "{text}"
        );
        assert!(
            text.ends_with("318.000     0.400     0.100  readers that entered on CPUs 1,3\n"),
            "{text}"
        );
        assert!(slowest_of_flavours(&[], Unit::Ms).is_empty());
    }
}
