//! The records only `rcutrace gp` writes (`rcutrace_gp_summary`, `rcutrace_grace_period`)
//! back into the model, so that `report` prints a saved gp run as it printed live.

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use rcutrace_common::records;

use crate::model::{
    CpuHoldouts, ExpeditedGracePeriods, GracePeriodLosses, GracePeriodRow, GracePeriodsSummary,
    LatencySummary, PhaseStats, SeriesStats, TaskHoldouts,
    anatomy::{GracePeriod, Holdout, Mode, Phases, Sample, Task, Unassembled},
    tree::parse_cpu_list,
};
use crate::runs::figures::{percentiles, seconds, unit};

/// The summary of a saved gp run from its records; `latency` holds the `@gplat` statistics.
pub fn summary(
    s: &records::GracePeriodsSummary,
    rows: &[records::GracePeriod],
    latency: Vec<LatencySummary>,
) -> Result<GracePeriodsSummary> {
    let Some(latency) = latency.into_iter().next() else {
        bail!("this gp run has no latency summary of its grace periods' durations");
    };
    let unit = unit(&s.unit).with_context(|| format!("unknown unit {:?}", s.unit))?;
    Ok(GracePeriodsSummary {
        elapsed: s
            .elapsed_ns
            .map_or_else(|| seconds(s.elapsed_s), Duration::from_nanos),
        latency: LatencySummary { unit, ..latency },
        phases: s
            .phases
            .iter()
            .map(|p| PhaseStats {
                name: p.name.clone(),
                stats: SeriesStats {
                    key: None,
                    count: p.count,
                    min_ns: p.min_ns,
                    max_ns: p.max_ns,
                    mean_ns: p.mean_ns,
                    percentiles: percentiles(&p.percentiles_ns),
                    percentiles_exact: p.percentiles_exact,
                },
            })
            .collect(),
        holdouts_by_cpu: cpu_holdouts(&s.holdouts_by_cpu)?,
        // The live run listed its --top CPUs, a number the records do not keep. As many as
        // its slowest grace periods is the same: that list has --top of them, or every grace
        // period tallied and so at least as many as there are CPUs in the table.
        holdout_cpus_shown: rows.iter().filter(|g| !g.expedited).count(),
        holdouts_by_task: task_holdouts(&s.holdouts_by_task),
        slowest: rows
            .iter()
            .filter(|g| !g.expedited)
            .map(row)
            .collect::<Result<_>>()?,
        by_gp_seq: s.by_gp_seq,
        without_report: s.without_report,
        unassembled: Unassembled {
            began_before_tracing: s.begun_before_tracing,
            incomplete: s.incomplete,
            unseen: s.unseen,
            spurious_inits: s.spurious_inits,
            undecoded_reports: s.undecoded_reports,
        },
        lost: GracePeriodLosses {
            events: s.lost_events,
            stacks: s.lost_stacks,
            blocked_readers: s.blocked_readers_not_followed,
            kernel_reads: s.kernel_reads_failed,
            missed_by_kernel: s.missed_by_kernel,
            missed_by_hook: s.missed_by_hook.clone(),
        },
        rcu_node_leaves: s.rcu_node_leaves.clone(),
        expedited: s
            .expedited
            .as_ref()
            .map(|e| expedited(e, rows))
            .transpose()?
            .map(Box::new),
    })
}

/// The expedited grace periods of a saved run: their summary, and the rows marked expedited.
fn expedited(
    e: &records::ExpeditedGracePeriodsRecord,
    rows: &[records::GracePeriod],
) -> Result<ExpeditedGracePeriods> {
    Ok(ExpeditedGracePeriods {
        durations: SeriesStats {
            key: None,
            count: e.grace_periods,
            min_ns: e.min_ns,
            max_ns: e.max_ns,
            mean_ns: e.mean_ns,
            percentiles: percentiles(&e.percentiles_ns),
            percentiles_exact: e.percentiles_exact,
        },
        holdouts_by_cpu: cpu_holdouts(&e.holdouts_by_cpu)?,
        holdouts_by_task: task_holdouts(&e.holdouts_by_task),
        slowest: rows
            .iter()
            .filter(|g| g.expedited)
            .map(row)
            .collect::<Result<_>>()?,
        by_sequence: e.by_expedited_sequence,
        without_report: e.without_report,
        unassembled: Unassembled {
            began_before_tracing: e.begun_before_tracing,
            incomplete: e.incomplete,
            undecoded_reports: e.undecoded_reports,
            ..Unassembled::default()
        },
    })
}

fn cpu_holdouts(rows: &[records::CpuHoldoutsRecord]) -> Result<Vec<CpuHoldouts>> {
    rows.iter()
        .map(|r| {
            let cpus = match &r.cpu_list {
                Some(list) => parse_cpu_list(list)
                    .with_context(|| format!("{list:?} is not a list of CPUs"))?,
                None => vec![r.cpu],
            };
            Ok(CpuHoldouts {
                cpus,
                grace_periods: r.grace_periods,
                found_by_pass: r.found_by_pass,
                held_ns: r.held_ns,
            })
        })
        .collect()
}

fn task_holdouts(rows: &[records::TaskHoldoutsRecord]) -> Vec<TaskHoldouts> {
    rows.iter()
        .map(|r| TaskHoldouts {
            pid: r.pid,
            comm: r.comm.clone(),
            grace_periods: r.grace_periods,
            held_ns: r.held_ns,
        })
        .collect()
}

fn row(g: &records::GracePeriod) -> Result<GracePeriodRow> {
    let last_holdout = g.last_holdout.as_ref().map(holdout).transpose()?;
    // Normal RCU's grace periods are saved with their anatomy whole.
    let field = |value: Option<u64>, name: &str| {
        value.with_context(|| format!("grace period {} has no {name}", g.gp_seq))
    };
    let count = |value: Option<u32>, name: &str| field(value.map(u64::from), name);
    Ok(GracePeriodRow {
        grace_period: GracePeriod {
            gp_seq: g.gp_seq as u64,
            started_ns: g.started_ns,
            duration_ns: g.duration_ns,
            phases: Phases {
                init_ns: field(g.init_ns, "init_ns")?,
                quiescent_wait_ns: field(g.quiescent_wait_ns, "quiescent_wait_ns")?,
                kthread_wake_ns: field(g.kthread_wake_ns, "kthread_wake_ns")?,
                cleanup_ns: field(g.cleanup_ns, "cleanup_ns")?,
            },
            request_wait_ns: g.request_wait_ns,
            fqs_passes: count(g.fqs_passes, "fqs_passes")? as u32,
            cpus_reported: count(g.cpus_reported, "cpus_reported")? as u32,
            blocked_readers: count(g.blocked_readers, "blocked_readers")? as u32,
            last_holdout,
            held_ns: field(g.held_ns, "held_ns")?,
            expedited: g.expedited,
        },
        stack: g
            .last_holdout
            .as_ref()
            .map_or_else(Vec::new, |h| h.stack.clone()),
    })
}

fn holdout(h: &records::LastHoldout) -> Result<Holdout> {
    let task = || {
        Some(Task {
            pid: h.pid?,
            tgid: h.tgid.unwrap_or(h.pid?),
            comm: h.comm.clone().unwrap_or_default(),
        })
    };
    // The CPUs as listed; a run saved before lists were written has only their count, of
    // CPUs from the first on.
    let listed = match &h.cpu_list {
        Some(list) => {
            Some(parse_cpu_list(list).with_context(|| format!("{list:?} is not a list of CPUs"))?)
        }
        None => None,
    };
    Ok(match h.kind.as_str() {
        "task" if h.blocked_ns.is_none() && listed.is_some() => Holdout::Readers {
            task: task().context("a blocked-readers holdout without a pid")?,
            cpus: listed.unwrap_or_default(),
        },
        "cpu" => Holdout::Cpu {
            cpus: listed.unwrap_or_else(|| (h.cpu..h.cpu + h.cpus.unwrap_or(1)).collect()),
            found_by_pass: h.found_by_pass.unwrap_or(false),
            sample: task().map(|task| Sample {
                task,
                mode: match h.mode.as_deref() {
                    Some("user") => Mode::User,
                    Some("idle") => Mode::Idle,
                    _ => Mode::Kernel,
                },
                stack: None,
            }),
        },
        "task" => Holdout::Task {
            task: task().context("a blocked-reader holdout without a pid")?,
            cpu: h.cpu,
            blocked_ns: h.blocked_ns.unwrap_or(0),
            blocked_at_ns: h.blocked_at_ns,
            stack: None,
        },
        other => bail!("unknown holdout kind {other:?} (expected cpu or task)"),
    })
}
