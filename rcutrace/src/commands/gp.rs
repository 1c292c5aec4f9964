//! `rcutrace gp`: every grace period taken apart. The programs send each grace period's
//! events through the sample ring; `model::anatomy` assembles them as they arrive and
//! `model::grace_periods` tallies each period's grace periods for the report.

use std::{cell::RefCell, time::Duration};

use anyhow::{Result, bail};
use rcutrace_common::{
    attribution::MAX_STACKS,
    gp::{self as common, GpEvent, MAX_BLOCKED},
};

use super::{Need, Period, Request, trace};
use crate::{
    cli::GpArgs,
    kernel::{self, environment, rcu_state::RcuLayout},
    model::{
        GracePeriodLosses, GracePeriodRow, GracePeriodsSummary, HistMap, LatencySummary, Losses,
        Map, Report, Summary,
        aggregate::Layout,
        anatomy::{Assembler, Holdout},
        grace_periods::Tally,
        stats::PERCENTILE_ERROR,
    },
    render::Format,
    trace::{
        probes::{GRACE_PERIODS, GRACE_PERIODS_NEEDED, Probe},
        tracer::Constant,
    },
};

/// A CPU that has held a grace period up this long is sampled at each of its ticks (a few
/// ticks at HZ=250: past the first force-quiescent-state pass).
const HOLDOUT_SAMPLE_AFTER_NS: u64 = 10_000_000;

/// The map the duration histogram prints as: the same as `gplat`'s, which times the same.
const MAP_NAME: &str = "@gplat";

/// The stream as it is assembled, and the tally of the period so far.
struct Stream {
    assembler: Assembler,
    tally: Tally,
    malformed: u64,
}

pub async fn run(args: &GpArgs, format: Format) -> Result<Report> {
    let probes: Vec<Probe> = GRACE_PERIODS.in_attach_order().to_vec();
    super::read_btf_ahead(&probes, Default::default(), None);
    crate::trace::marks::mark("kernel BTF read");
    let layout = kernel::rcu_state::layout()?;
    crate::trace::marks::mark("RCU's layout and rcu_node tree read");
    let cpus = kernel::possible_cpus()?;
    let leaves = layout.tree.leaf_cpu_lists();
    let new_tally = || Tally::new(Layout::Log2, args.unit, args.top);
    let stream = RefCell::new(Stream {
        assembler: Assembler::new(layout.tree.clone(), &kernel::online_cpus()?),
        tally: new_tally(),
        malformed: 0,
    });
    let mut consume = |record: &[u8]| {
        let mut stream = stream.borrow_mut();
        let Some(event) = decode(record) else {
            stream.malformed += 1;
            return;
        };
        stream.assembler.add(&event);
        for gp in stream.assembler.take_done() {
            stream.tally.add(gp);
        }
    };
    let mut symbolizer = None;
    trace(
        Request {
            probes: &probes,
            constants: constants(&layout, cpus, GpEvents::WithSamples),
            choice: Default::default(),
            by: None,
            need: Need::These(GRACE_PERIODS_NEEDED),
            duration: args.common.duration(),
            interval: args.over_time.interval(),
            listener: None,
            traced_process: None,
            sample_readers: None,
            watch: None,
            at_close: None,
            format,
        },
        Some(&mut consume),
        &mut |period| {
            let mut stream = stream.borrow_mut();
            if stream.malformed > 0 {
                bail!(
                    "{} records in the event buffer were not grace-period events \
                     (rcutrace's eBPF object and loader disagree)",
                    stream.malformed
                );
            }
            let tally = if period.cumulative {
                stream.tally.clone()
            } else {
                std::mem::replace(&mut stream.tally, new_tally())
            };
            let in_progress = stream.assembler.in_progress();
            let unassembled = if period.cumulative {
                stream.assembler.unassembled
            } else {
                std::mem::take(&mut stream.assembler.unassembled)
            };
            let report = report(
                period,
                args,
                &tally,
                in_progress,
                unassembled,
                &leaves,
                &mut symbolizer,
            )?;
            if let Summary::GracePeriods(summary) = &report.summary {
                super::warn_disagreements(format, &summary.cross_checks());
            }
            Ok(report)
        },
    )
    .await
}

/// What the grace-period programs send to user space.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum GpEvents {
    /// Nothing: they keep the grace period's state and counts for reading (`top`).
    None,
    /// Every event, with stacks sampled on holdout CPUs (`gp`).
    WithSamples,
    /// The same, and a wake-up of user space at once when a grace period, normal or
    /// expedited, passes `wake_after` (`stall`, whose watch then need not look often).
    WithWakeAfter(Duration),
    /// Every event but the holdout samples: the anatomy without stacks (`serve`).
    WithoutSamples,
}

/// The grace-period programs' load-time constants and map sizes: where RCU's state lies in
/// this kernel, and room for every possible CPU.
pub(super) fn constants(layout: &RcuLayout, cpus: u32, events: GpEvents) -> Vec<Constant> {
    let (rcuname, msg) = layout.stall_warning.unwrap_or((0, 0));
    let sample_after_ns = match events {
        GpEvents::WithSamples | GpEvents::WithWakeAfter(_) => HOLDOUT_SAMPLE_AFTER_NS,
        // No grace period gets that old.
        GpEvents::WithoutSamples | GpEvents::None => u64::MAX,
    };
    let wake_after_ns = match events {
        GpEvents::WithWakeAfter(after) => u64::try_from(after.as_nanos()).unwrap_or(u64::MAX),
        _ => u64::MAX,
    };
    vec![
        Constant::U32("GP_EVENTS", u32::from(events != GpEvents::None)),
        Constant::U64("RCU_STATE_ADDRESS", layout.rcu_state),
        Constant::U32("RCU_STATE_GP_SEQ", layout.gp_seq),
        Constant::U32("RCU_NODE_QSMASK", layout.node_qsmask),
        Constant::U32("RCU_NODE_GRPLO", layout.node_grplo),
        Constant::U32("RCU_NODE_LEVEL", layout.node_level),
        Constant::U32("RCU_LEAF_LEVEL", layout.tree.leaf_level()),
        Constant::U32("TASK_RCU_READ_LOCK_NESTING", layout.task_nesting),
        Constant::U32("STALL_WARNING_RCUNAME", rcuname),
        Constant::U32("STALL_WARNING_MSG", msg),
        Constant::U64("HOLDOUT_SAMPLE_AFTER_NS", sample_after_ns),
        Constant::U64("STALL_WAKE_AFTER_NS", wake_after_ns),
        Constant::MaxEntries("CPU_STATE", cpus),
        Constant::MaxEntries("BLOCKED", MAX_BLOCKED),
        Constant::MaxEntries("STACKS", MAX_STACKS),
    ]
}

pub(super) fn decode(record: &[u8]) -> Option<GpEvent> {
    rcutrace_common::latency::read_record(record)
}

fn report(
    period: &Period<'_>,
    args: &GpArgs,
    tally: &Tally,
    in_progress: bool,
    unassembled: crate::model::anatomy::Unassembled,
    rcu_node_leaves: &[String],
    symbolizer: &mut Option<crate::kernel::symbols::Symbolizer>,
) -> Result<Report> {
    let losses = period.counters.array("GP_LOSSES");
    let loss = |slot: u32| losses.get(slot as usize).copied().unwrap_or(0);
    let missed_by_kernel = period.counters.missed(
        period.tracer,
        &period.attached.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
    );
    let lost = GracePeriodLosses {
        events: loss(common::GP_LOST_EVENTS),
        stacks: loss(common::GP_LOST_STACKS),
        blocked_readers: loss(common::GP_LOST_BLOCKED),
        kernel_reads: loss(common::GP_LOST_READS),
        missed_by_kernel,
    };
    let mut frames = super::stack_frames(period.tracer, symbolizer);
    let slowest = tally
        .slowest()
        .iter()
        .map(|gp| GracePeriodRow {
            grace_period: gp.clone(),
            stack: holdout_stack(gp.last_holdout.as_ref())
                .map(&mut frames)
                .unwrap_or_default(),
        })
        .collect();
    let latency = LatencySummary {
        map_name: MAP_NAME.into(),
        unit: args.unit,
        series: vec![tally.duration().stats(None)],
        percentile_error: PERCENTILE_ERROR,
        losses: Losses {
            in_flight_at_exit: u64::from(in_progress),
            returns_lost: 0,
            began_before_tracing: unassembled.began_before_tracing,
            missed_by_kernel,
            lost_to_full_map: lost.events,
            stacks_lost: None,
            own_calls_left_out: 0,
        },
        stages: None,
        cross_checks: Vec::new(),
    };
    Ok(Report {
        time: None,
        maps: vec![Map::Hist(HistMap {
            name: MAP_NAME.into(),
            key: None,
            buckets: tally.duration().buckets(),
        })],
        summary: Summary::GracePeriods(Box::new(GracePeriodsSummary {
            elapsed: period.elapsed,
            latency,
            phases: tally.phases(),
            holdouts_by_cpu: tally.holdouts_by_cpu(),
            holdout_cpus_shown: args.top,
            holdouts_by_task: tally.holdouts_by_task(),
            slowest,
            by_gp_seq: tally.by_gp_seq(),
            without_report: tally.without_report(),
            unassembled,
            lost,
            rcu_node_leaves: rcu_node_leaves.to_vec(),
        })),
        environment: environment::current(period.attached),
    })
}

/// The stack kept for a grace period's last holdout: sampled on the CPU, or where the
/// blocked reader was switched out.
pub(super) fn holdout_stack(holdout: Option<&Holdout>) -> Option<u64> {
    match holdout? {
        Holdout::Cpu { sample, .. } => sample.as_ref()?.stack,
        Holdout::Task { stack, .. } => *stack,
        Holdout::Readers { .. } => None,
    }
}
