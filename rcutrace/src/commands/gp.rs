//! `rcutrace gp`: every grace period taken apart. The programs send each grace period's
//! events through the sample ring; `model::anatomy` assembles them as they arrive and
//! `model::grace_periods` tallies each period's grace periods for the report.

use std::cell::RefCell;

use anyhow::Result;
use rcutrace_common::gp as common;

use super::window::trace;
use crate::{
    cli::{Flavor, GpArgs},
    commands::publish::Sink,
    kernel::{self, symbols::keeper::SymbolKeeper},
    model::{
        ExpeditedGracePeriods, GracePeriodLosses, GracePeriodRow, GracePeriodsSummary, HistMap,
        LatencySummary, Losses, Map, Report, Summary,
        aggregate::Layout,
        anatomy::{Assembler, Holdout},
        grace_periods::Tally,
        stats::PERCENTILE_ERROR,
    },
    trace::{
        engine::{self, Ends, Need, Period, Reporting, Request},
        grace_periods::{self, GpEvents, constants, decode},
        probes::{EXPEDITED_GRACE_PERIODS, GRACE_PERIODS, GRACE_PERIODS_NEEDED, Probe},
    },
};

/// The map the duration histogram prints as: the same as `gplat`'s, which times the same.
const MAP_NAME: &str = "@gplat";

/// The stream as it is assembled, and the tally of the period so far.
struct Stream {
    assembler: Assembler,
    tally: Tally,
    /// The expedited grace periods', tallied apart.
    expedited: Tally,
    malformed: u64,
}

pub(crate) mod flavours;

pub async fn run(args: &GpArgs, sink: Sink) -> Result<Report> {
    if args.flavor != Flavor::Normal {
        return flavours::run(args, sink).await;
    }
    let format = sink.format();
    let mut probes: Vec<Probe> = GRACE_PERIODS.in_attach_order().to_vec();
    engine::read_btf_ahead(&probes, Default::default(), None);
    crate::marks::mark("kernel BTF pass started beside the start");
    let mut layout = kernel::rcu_state::layout()?;
    layout.expedited = kernel::rcu_state::expedited_layout()?;
    if layout.expedited.is_some() {
        probes.extend(EXPEDITED_GRACE_PERIODS);
    }
    crate::marks::mark("RCU's layout and rcu_node tree read");
    let cpus = kernel::possible_cpus()?;
    let leaves = layout.tree.leaf_cpu_lists();
    let new_tally = || Tally::new(Layout::Log2, args.unit, args.top);
    let stream = RefCell::new(Stream {
        assembler: Assembler::new(layout.tree.clone(), &kernel::online_cpus()?),
        tally: new_tally(),
        expedited: new_tally(),
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
        for gp in stream.assembler.take_done_expedited() {
            stream.expedited.add(gp);
        }
    };
    let symbols = SymbolKeeper::new();
    let launch = super::window::launch_of(args.length.command())?;
    let report = trace(
        Request {
            probes: &probes,
            constants: constants(&layout, cpus, GpEvents::WithSamples),
            choice: args.attach,
            by: None,
            need: Need::These(GRACE_PERIODS_NEEDED),
            ends: Ends::after(args.length.duration()),
            reporting: Reporting::every(args.over_time.interval()),
            sample_readers: None,
            hooks: super::window::hooks(Some(&symbols), launch.as_ref()),
        },
        Some(&mut consume),
        &mut |period| {
            let mut stream = stream.borrow_mut();
            grace_periods::refuse_malformed(stream.malformed)?;
            let (tally, expedited) = if period.cumulative {
                (stream.tally.clone(), stream.expedited.clone())
            } else {
                (
                    std::mem::replace(&mut stream.tally, new_tally()),
                    std::mem::replace(&mut stream.expedited, new_tally()),
                )
            };
            let in_progress = stream.assembler.in_progress();
            let (unassembled, unassembled_expedited) = if period.cumulative {
                (
                    stream.assembler.unassembled,
                    stream.assembler.unassembled_expedited,
                )
            } else {
                (
                    std::mem::take(&mut stream.assembler.unassembled),
                    std::mem::take(&mut stream.assembler.unassembled_expedited),
                )
            };
            // The expedited grace periods are shown where every one of their hooks is in.
            let expedited_attached = EXPEDITED_GRACE_PERIODS
                .iter()
                .all(|probe| period.attached.iter().any(|(p, _)| p == probe));
            let expedited = expedited_attached.then_some((&expedited, unassembled_expedited));
            let report = report_of(
                period,
                args,
                &tally,
                in_progress,
                unassembled,
                expedited,
                &leaves,
                &symbols,
            )?;
            if let Summary::GracePeriods(summary) = &report.summary {
                super::publish::warn_disagreements(format, &summary.cross_checks());
            }
            Ok(report)
        },
        sink,
    )
    .await?;
    super::window::launched(launch.as_ref())?;
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn report_of(
    period: &Period<'_>,
    args: &GpArgs,
    tally: &Tally,
    in_progress: bool,
    unassembled: crate::model::anatomy::Unassembled,
    expedited: Option<(&Tally, crate::model::anatomy::Unassembled)>,
    rcu_node_leaves: &[String],
    symbols: &SymbolKeeper,
) -> Result<Report> {
    let losses = period.counters.array("GP_LOSSES");
    let loss = |slot: u32| losses.get(slot as usize).copied().unwrap_or(0);
    let attached: Vec<Probe> = period.attached.iter().map(|(p, _)| *p).collect();
    let missed_by_kernel = period.counters.missed(period.tracer, &attached);
    let lost = GracePeriodLosses {
        events: loss(common::GP_LOST_EVENTS),
        stacks: loss(common::GP_LOST_STACKS),
        blocked_readers: loss(common::GP_LOST_BLOCKED),
        kernel_reads: loss(common::GP_LOST_READS),
        missed_by_kernel,
        missed_by_hook: period.counters.missed_by_hook(period.tracer, &attached),
    };
    let mut frames = super::naming::stack_frames(period.tracer, symbols);
    let mut rows = |tally: &Tally| -> Vec<GracePeriodRow> {
        tally
            .slowest()
            .iter()
            .map(|gp| GracePeriodRow {
                grace_period: gp.clone(),
                stack: holdout_stack(gp.last_holdout.as_ref())
                    .map(&mut frames)
                    .unwrap_or_default(),
            })
            .collect()
    };
    let slowest = rows(tally);
    let expedited = expedited.map(|(tally, unassembled)| {
        Box::new(ExpeditedGracePeriods {
            durations: tally.duration().stats(None),
            holdouts_by_cpu: tally.holdouts_by_cpu(),
            holdouts_by_task: tally.holdouts_by_task(),
            slowest: rows(tally),
            by_sequence: tally.by_gp_seq(),
            without_report: tally.without_report(),
            unassembled,
        })
    });
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
        grace_periods: Vec::new(),
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
            expedited,
        })),
        environment: period.environment(),
    })
}

/// The stack kept for a grace period's last holdout: sampled on the CPU, or where the
/// blocked reader was switched out.
fn holdout_stack(holdout: Option<&Holdout>) -> Option<u64> {
    match holdout? {
        Holdout::Cpu { sample, .. } => sample.as_ref()?.stack,
        Holdout::Task { stack, .. } => *stack,
        Holdout::Readers { .. } => None,
    }
}
