//! `rcutrace stall`'s events as they happen, and its summary at the end.

use std::{fmt::Write as _, time::Duration};

use crate::model::tree::cpu_list;

/// Seconds with two decimals: `1.02 s`.
fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// What an expedited grace period warned about still waits for, from the kernel's leaves:
/// `still waiting for CPUs 3,40-47 and tasks blocked in a reader`.
fn expedited_waiting_for(waiting_for: Option<&crate::model::stall::ExpeditedHoldouts>) -> String {
    let Some(w) = waiting_for else {
        return "what it waits for unknown (kernel memory could not be read)".into();
    };
    let cpus = match w.cpus.len() {
        0 => None,
        1 => Some(format!("CPU {}", w.cpus[0])),
        _ => Some(format!("CPUs {}", cpu_list(&w.cpus))),
    };
    let tasks = w
        .blocked_tasks
        .then_some("tasks blocked in a reader".to_string());
    match (cpus, tasks) {
        (Some(c), Some(t)) => format!("still waiting for {c} and {t}"),
        (Some(one), None) | (None, Some(one)) => format!("still waiting for {one}"),
        // Every report came in between the look and the read: it is ending.
        (None, None) => "every CPU and task has reported (it is ending)".into(),
    }
}

/// A flavour's name in a warning's first line: `TASKS-RCU`, `SRCU`.
fn flavor_name(flavor: &str) -> &'static str {
    match flavor {
        "srcu" => "SRCU",
        _ => "TASKS-RCU",
    }
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
                    super::running,
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
        StallEvent::ExpeditedWarning {
            time,
            warning,
            waiting_for,
        } => {
            let _ = writeln!(
                out,
                "{time} RCU STALL WARNING: the expedited grace period in progress is {} old \
                 (past {}), {}",
                seconds(warning.age),
                seconds(warning.threshold),
                expedited_waiting_for(waiting_for.as_ref())
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
        StallEvent::FlavorWarning {
            time,
            flavor,
            key,
            warning,
        } => {
            let gp = &warning.grace_period;
            let _ = writeln!(
                out,
                "{time} {} STALL WARNING: {key} grace period is {} old (past {})",
                flavor_name(flavor),
                seconds(warning.age),
                seconds(warning.threshold)
            );
            for task in &gp.holdouts {
                let _ = writeln!(
                    out,
                    "  holdout task pid {} {} (on CPU {})",
                    task.pid, task.comm, task.cpu
                );
            }
            if !gp.reader_cpus.is_empty() {
                let cpus = match gp.reader_cpus.len() {
                    1 => "CPU",
                    _ => "CPUs",
                };
                let _ = writeln!(
                    out,
                    "  readers that entered on {cpus} {} have not left",
                    cpu_list(&gp.reader_cpus)
                );
            }
            if gp.holdouts.is_empty() && gp.reader_cpus.is_empty() {
                let _ = writeln!(out, "  what holds it is not seen yet");
            }
            for task in &warning.blocked {
                let _ = writeln!(
                    out,
                    "  blocked behind it: pid {} {}\n    stack: {}",
                    task.pid,
                    task.comm,
                    task.stack.join("; ")
                );
            }
        }
        StallEvent::FlavorEnded {
            time,
            flavor,
            key,
            ended,
        } => {
            let plural = if ended.warnings == 1 { "" } else { "s" };
            let _ = writeln!(
                out,
                "{time} {} STALL ENDED: {key} grace period took {} ({} warning{plural})",
                flavor_name(flavor),
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

pub(super) fn stall_summary(s: &crate::model::StallSummary) -> String {
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
    let flavours = if s.flavor_thresholds.is_empty() {
        String::new()
    } else {
        let at: Vec<String> = s.flavor_thresholds.iter().map(|t| seconds(*t)).collect();
        format!("; tasks-RCU and SRCU ones' of {}", at.join(", "))
    };
    format!(
        "Watched {} (warning at a grace period's age of {}{flavours}): {}{expedited}, {}, {} \
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expedited_warning_says_what_it_still_waits_for() {
        use crate::model::stall::ExpeditedHoldouts;
        let w = |cpus: Vec<u32>, blocked_tasks| ExpeditedHoldouts {
            cpus,
            blocked_tasks,
        };
        assert_eq!(
            expedited_waiting_for(Some(&w(vec![63], false))),
            "still waiting for CPU 63"
        );
        assert_eq!(
            expedited_waiting_for(Some(&w(vec![3, 40, 41, 42, 43], true))),
            "still waiting for CPUs 3,40-43 and tasks blocked in a reader"
        );
        assert_eq!(
            expedited_waiting_for(Some(&w(vec![], true))),
            "still waiting for tasks blocked in a reader"
        );
        assert!(expedited_waiting_for(None).contains("unknown"));
    }

    use crate::model::{
        StallEvent,
        flavour_grace_periods::HoldoutTask,
        flavour_stall::{BlockedTask, FlavourStallEnded, FlavourStallWarning, InProgress},
    };

    fn warning(holdouts: Vec<HoldoutTask>, reader_cpus: Vec<u32>) -> FlavourStallWarning {
        FlavourStallWarning {
            grace_period: InProgress {
                key: 1,
                started_ns: 0,
                holdouts,
                reader_cpus,
            },
            age: Duration::from_millis(2010),
            threshold: Duration::from_secs(2),
            blocked: Vec::new(),
        }
    }

    #[test]
    fn a_flavours_warning_names_what_holds_it() {
        let tasks = StallEvent::FlavorWarning {
            time: "13:26:36".into(),
            flavor: "tasks",
            key: "rcu_tasks".into(),
            warning: warning(
                vec![HoldoutTask {
                    comm: "rcu-workload".into(),
                    pid: 362,
                    cpu: 3,
                    stack: None,
                }],
                Vec::new(),
            ),
        };
        assert_eq!(
            stall_event(&tasks),
            "13:26:36 TASKS-RCU STALL WARNING: rcu_tasks grace period is 2.01 s old (past 2.00 s)\n\
             \x20 holdout task pid 362 rcu-workload (on CPU 3)\n"
        );
        let mut srcu_warning = warning(Vec::new(), vec![3, 4, 5]);
        srcu_warning.blocked = vec![BlockedTask {
            pid: 512,
            comm: "firecracker".into(),
            stack: vec![
                "__synchronize_srcu+145".into(),
                "mmu_notifier_unregister+130".into(),
            ],
        }];
        let srcu = StallEvent::FlavorWarning {
            time: "13:26:36".into(),
            flavor: "srcu",
            key: "kvm_srcu".into(),
            warning: srcu_warning,
        };
        assert_eq!(
            stall_event(&srcu),
            "13:26:36 SRCU STALL WARNING: kvm_srcu grace period is 2.01 s old (past 2.00 s)\n\
             \x20 readers that entered on CPUs 3-5 have not left\n\
             \x20 blocked behind it: pid 512 firecracker\n\
             \x20   stack: __synchronize_srcu+145; mmu_notifier_unregister+130\n"
        );
        let ended = StallEvent::FlavorEnded {
            time: "13:26:40".into(),
            flavor: "srcu",
            key: "kvm_srcu".into(),
            ended: FlavourStallEnded {
                key: 1,
                duration: Duration::from_secs(5),
                warnings: 2,
            },
        };
        assert_eq!(
            stall_event(&ended),
            "13:26:40 SRCU STALL ENDED: kvm_srcu grace period took 5.00 s (2 warnings)\n"
        );
    }
}
