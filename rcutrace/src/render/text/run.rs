//! `rcutrace run`'s account of its command, under the histograms of its waits.

use std::fmt::Write as _;

use crate::model::{
    Unit,
    run::{RunFigures, RunWait, expeditable, expedited_saving},
};
use crate::render::figure::fixed_number;

/// Milliseconds with three decimals: `16.042 ms`.
fn ms(nanos: u64) -> String {
    format!("{} ms", fixed_number(nanos as f64, Unit::Ms))
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * part as f64 / whole as f64)
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn how_it_ended(f: &RunFigures) -> String {
    match (f.exit_status, f.signal) {
        (Some(status), _) => format!("exit status {status}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "still running when tracing ended".into(),
    }
}

fn table(out: &mut String, rows: &[&RunWait]) {
    let _ = writeln!(
        out,
        "    {:<30} {:>7} {:>14} {:>14} {:>14}",
        "FUNCTION", "CALLS", "TOTAL", "MEAN", "MAX"
    );
    for row in rows {
        let domain = row
            .domain
            .as_ref()
            .map_or(String::new(), |d| format!("  on {d}"));
        let _ = writeln!(
            out,
            "    {:<30} {:>7} {:>14} {:>14} {:>14}{domain}",
            row.function,
            row.calls,
            ms(row.total_ns),
            ms(row.total_ns / row.calls.max(1)),
            ms(row.max_ns)
        );
    }
}

pub(super) fn run_summary(f: &RunFigures) -> String {
    let mut out = String::new();
    // A saved run's figures are read back as written: sums saturate rather than overflow.
    let off_cpu = f.off_cpu_asleep_ns.saturating_add(f.off_cpu_runnable_ns);
    let _ = writeln!(out, "\nCommand: {} ({})", f.command, how_it_ended(f));
    let cpu = f.cpu_ns.map_or("on CPU unknown".to_string(), |cpu| {
        format!("on CPU {}", ms(cpu))
    });
    let _ = writeln!(
        out,
        "  wall {}; {cpu}; off CPU {} (asleep {}, waiting for a CPU {}), over {}",
        ms(f.wall_ns),
        ms(off_cpu),
        ms(f.off_cpu_asleep_ns),
        ms(f.off_cpu_runnable_ns),
        plural(f.threads, "thread", "threads"),
    );
    let own: Vec<&RunWait> = f.waits.iter().filter(|w| !w.caused_work).collect();
    let caused: Vec<&RunWait> = f.waits.iter().filter(|w| w.caused_work).collect();
    let calls = own.iter().fold(0u64, |n, w| n.saturating_add(w.calls));
    if calls == 0 {
        let _ = writeln!(out, "  Waiting on RCU: none in its own threads");
    } else {
        let off_in_waits = f.in_waits_asleep_ns.saturating_add(f.in_waits_runnable_ns);
        let _ = writeln!(
            out,
            "  Waiting on RCU: {} in {}: asleep {} ({} of its time asleep), waiting for a CPU \
             {}, on the CPU {}",
            ms(f.rcu_wait_ns),
            plural(calls, "call", "calls"),
            ms(f.in_waits_asleep_ns),
            percent(f.in_waits_asleep_ns, f.off_cpu_asleep_ns),
            ms(f.in_waits_runnable_ns),
            ms(f.rcu_wait_ns.saturating_sub(off_in_waits)),
        );
        table(&mut out, &own);
    }
    let _ = writeln!(
        out,
        "  Work it caused: {} queued, {} run to the end; waiting on RCU there {}",
        plural(f.work_queued, "work item", "work items"),
        f.work_done,
        ms(f.caused_rcu_wait_ns)
    );
    if !caused.is_empty() {
        table(&mut out, &caused);
    }
    if f.work_unfinished > 0 {
        let why = if f.linger_expired {
            "when --linger ran out"
        } else {
            "when tracing ended"
        };
        let _ = writeln!(
            out,
            "    {} still queued or running {why}: its waits after that are not here",
            plural(f.work_unfinished, "work item was", "work items were")
        );
    }
    saved(&mut out, f);
    losses(&mut out, f);
    out
}

/// What expediting, or waking synchronize_rcu() callers from the grace-period kthread,
/// would have changed.
fn saved(out: &mut String, f: &RunFigures) {
    let normal: Vec<&RunWait> = f
        .waits
        .iter()
        .filter(|w| expeditable(&w.function))
        .collect();
    if normal.is_empty() {
        return;
    }
    let _ = writeln!(out, "  What would have saved it:");
    match f.expedited_mean_ns {
        Some(mean) => {
            for row in &normal {
                let saving = expedited_saving(row, Some(mean)).unwrap_or(0);
                let _ = writeln!(
                    out,
                    "    {}{}: expedited (a mean {} in this run) would have saved about {} of {}",
                    row.function,
                    if row.caused_work {
                        " in work it caused"
                    } else {
                        ""
                    },
                    ms(mean),
                    ms(saving),
                    ms(row.total_ns)
                );
            }
        }
        None => {
            let _ = writeln!(
                out,
                "    expedited grace periods: their cost here is unknown (no \
                 synchronize_rcu_expedited() in this run to measure it by)"
            );
        }
    }
    if f.normal_wake_from_gp == Some(false) {
        let calls = normal
            .iter()
            .filter(|w| w.function == "synchronize_rcu")
            .fold(0u64, |n, w| n.saturating_add(w.calls));
        let _ = writeln!(
            out,
            "    rcutree.rcu_normal_wake_from_gp=1 would wake the {} from the grace-period \
             kthread, not after callback invocation",
            plural(calls, "synchronize_rcu() call", "synchronize_rcu() calls")
        );
    }
}

fn losses(out: &mut String, f: &RunFigures) {
    // The command ran, so its first thread was forked: none seen means the fork hook never
    // fired, and every figure of it here is missing, not zero.
    let ran = f.exit_status.is_some() || f.signal.is_some();
    if ran && f.threads == 0 {
        let _ = writeln!(
            out,
            "  WARNING: the fork tracepoint saw none of its threads: nothing of the command \
             was followed, and its figures here are not its own"
        );
    }
    if f.threads_lost > 0 {
        let _ = writeln!(
            out,
            "  WARNING: {} not followed (no room): their waits and time are not here",
            plural(f.threads_lost, "thread", "threads")
        );
    }
    if f.work_lost > 0 {
        let _ = writeln!(
            out,
            "  WARNING: {} not followed (no room): their waits are not here",
            plural(f.work_lost, "work item", "work items")
        );
    }
    if f.off_cpu_unseen > 0 {
        let _ = writeln!(
            out,
            "  WARNING: {} off the CPU not measured (no room): off-CPU time is a lower bound",
            plural(f.off_cpu_unseen, "stretch", "stretches")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> RunFigures {
        RunFigures {
            command: "rcu-workload membarrier 2".into(),
            exit_status: Some(0),
            wall_ns: 50_000_000,
            cpu_ns: Some(8_000_000),
            off_cpu_asleep_ns: 40_000_000,
            off_cpu_runnable_ns: 1_000_000,
            in_waits_asleep_ns: 39_000_000,
            in_waits_runnable_ns: 500_000,
            threads: 1,
            rcu_wait_ns: 40_000_000,
            waits: vec![RunWait {
                function: "synchronize_rcu".into(),
                domain: None,
                caused_work: false,
                calls: 2,
                total_ns: 40_000_000,
                max_ns: 22_000_000,
            }],
            normal_wake_from_gp: Some(false),
            ..Default::default()
        }
    }

    #[test]
    fn the_account_of_a_command_that_waited_on_rcu() {
        let text = run_summary(&figures());
        assert!(
            text.contains("\nCommand: rcu-workload membarrier 2 (exit status 0)\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  wall 50.000 ms; on CPU 8.000 ms; off CPU 41.000 ms (asleep 40.000 ms, \
                 waiting for a CPU 1.000 ms), over 1 thread\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "  Waiting on RCU: 40.000 ms in 2 calls: asleep 39.000 ms (97.5% of its time \
                 asleep), waiting for a CPU 0.500 ms, on the CPU 0.500 ms\n"
            ),
            "{text}"
        );
        assert!(text.contains("    synchronize_rcu                      2      40.000 ms      20.000 ms      22.000 ms\n"), "{text}");
        // No expedited call in the run: its cost is not guessed.
        assert!(text.contains("their cost here is unknown"), "{text}");
        assert!(
            text.contains("would wake the 2 synchronize_rcu() calls"),
            "{text}"
        );
        assert!(!text.contains("WARNING"), "{text}");
    }

    #[test]
    fn losses_and_unfinished_work_are_said() {
        let mut f = figures();
        f.threads_lost = 2;
        f.work_lost = 1;
        f.off_cpu_unseen = 3;
        f.work_queued = 4;
        f.work_unfinished = 1;
        f.linger_expired = true;
        f.exit_status = None;
        f.signal = Some(9);
        let text = run_summary(&f);
        assert!(text.contains("(killed by signal 9)"), "{text}");
        assert!(text.contains("WARNING: 2 threads not followed"), "{text}");
        assert!(text.contains("WARNING: 1 work item not followed"), "{text}");
        assert!(
            text.contains("WARNING: 3 stretches off the CPU not measured"),
            "{text}"
        );
        assert!(
            text.contains("1 work item was still queued or running when --linger ran out"),
            "{text}"
        );
        assert!(!text.contains("fork tracepoint"), "{text}");
    }

    #[test]
    fn a_fork_hook_that_never_fired_is_said() {
        let mut f = figures();
        f.threads = 0;
        let text = run_summary(&f);
        assert_eq!(
            text.matches("WARNING: the fork tracepoint saw none of its threads")
                .count(),
            1,
            "{text}"
        );
    }

    #[test]
    fn a_saved_run_with_figures_at_their_limit_is_still_told() {
        // `report` reads a saved run back as written; its sums must not overflow.
        let mut f = figures();
        f.off_cpu_asleep_ns = u64::MAX;
        f.off_cpu_runnable_ns = u64::MAX;
        f.in_waits_asleep_ns = u64::MAX;
        f.in_waits_runnable_ns = u64::MAX;
        f.expedited_mean_ns = Some(u64::MAX);
        let mut second = f.waits[0].clone();
        second.calls = u64::MAX;
        second.caused_work = false;
        f.waits.push(second);
        let text = run_summary(&f);
        assert!(text.contains(&format!("in {} calls", u64::MAX)), "{text}");
        assert!(text.contains("would have saved about 0.000 ms"), "{text}");
    }
}
