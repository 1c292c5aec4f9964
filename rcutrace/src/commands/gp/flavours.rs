//! `rcutrace gp --flavor srcu|tasks|rude|trace`: how long the grace periods of the flavours
//! other than normal RCU's take, by what runs them: each SRCU domain, each tasks-RCU flavour
//! (`rude` and `trace` keep one; since 7.0 tasks-trace RCU is an SRCU domain). The
//! programs send each grace period's bounds; `model::flavour_grace_periods` assembles them,
//! and each period's report is a histogram of the lengths per key, with exact statistics.

use std::{cell::RefCell, collections::HashMap};

use anyhow::{Context as _, Result, bail};
use rcutrace_common::gp as common;

use crate::{
    cli::{Flavor, GpArgs},
    commands::{naming, publish::Sink, window},
    kernel::{self, symbols::keeper::SymbolKeeper},
    model::{
        CountMap, HistMap, LatencySummary, Losses, Map, Report, Summary,
        aggregate::Layout,
        flavour_grace_periods::{Assemble, FlavourTally, SrcuAssembler, TasksAssembler},
        stats::PERCENTILE_ERROR,
    },
    trace::{
        engine::{Ends, Need, Period, Reporting, Request},
        grace_periods::{self, decode, srcu_constants, tasks_constants},
        probes::{
            self, AttachChoice, Probe, SRCU_GRACE_PERIODS, SRCU_READER_SCANS, TASKS_GRACE_PERIODS,
            TASKS_GRACE_PERIODS_NEEDED, TASKS_HOLDOUT_PASSES, TASKS_RUDE_GRACE_PERIODS,
        },
        tracer::Constant,
    },
};

/// SRCU's grace periods, by domain.
const SRCU_MAP: &str = "@srcu_gp";
/// Tasks RCU's grace periods, by flavour.
const TASKS_MAP: &str = "@tasks_gp";
/// Per flavour and task, the grace periods whose last pass over the holdouts still listed
/// that task (classic tasks RCU).
const HELD_BY_MAP: &str = "@tasks_gp_held_by";
/// Per key and CPU, the grace periods held up by readers that entered on that CPU (SRCU).
const HELD_ON_MAP: &str = "@srcu_gp_held_on";

/// The per-CPU areas' offsets, by which the programs find each CPU's counts of readers.
const PER_CPU_OFFSET: &str = "__per_cpu_offset";
/// The tasks-RCU flavours `--flavor rude` and `trace` keep, by their `struct rcu_tasks`.
const TASKS_RUDE: &str = "rcu_tasks_rude";
const TASKS_TRACE: &str = "rcu_tasks_trace";
/// What tasks-trace RCU became in 7.0: an SRCU domain (mainline c27cea4416a3).
const TASKS_TRACE_SRCU: &str = "rcu_tasks_trace_srcu_struct";

/// What one flavour hooks and how its events are assembled.
struct Plan {
    probes: Vec<Probe>,
    needed: &'static [Probe],
    constants: Vec<Constant>,
    /// The histograms' map, keyed by what ran each grace period.
    map_name: &'static str,
    assembler: Box<dyn Assemble>,
    /// The one domain or tasks-RCU flavour kept (`--flavor rude|trace`), by address: the
    /// programs hook every one, and their events carry it.
    only: Option<u64>,
}

fn plan(flavor: Flavor) -> Result<Plan> {
    let wanted: &[&str] = match flavor {
        Flavor::Srcu => &[PER_CPU_OFFSET],
        Flavor::Rude => &[TASKS_RUDE],
        Flavor::Trace => &[PER_CPU_OFFSET, TASKS_TRACE_SRCU, TASKS_TRACE],
        Flavor::Tasks | Flavor::Normal => &[],
    };
    // One pass over /proc/kallsyms for all of them, before tracing begins.
    let symbols = if wanted.is_empty() {
        HashMap::new()
    } else {
        kernel::kernel_symbols(wanted).unwrap_or_else(|e| {
            log::warn!("reading /proc/kallsyms: {e:#}");
            HashMap::new()
        })
    };
    let address_of = |symbol: &str| {
        symbols.get(symbol).copied().with_context(|| {
            format!("this kernel has no {symbol} in /proc/kallsyms (or hides its address)")
        })
    };
    Ok(match flavor {
        Flavor::Srcu => srcu_plan(symbols.get(PER_CPU_OFFSET).copied())?,
        Flavor::Tasks => tasks_plan(&TASKS_GRACE_PERIODS_NEEDED)?,
        Flavor::Rude => Plan {
            only: Some(address_of(TASKS_RUDE).context("following tasks-rude RCU")?),
            ..tasks_plan(&TASKS_RUDE_GRACE_PERIODS)?
        },
        Flavor::Trace if symbols.contains_key(TASKS_TRACE_SRCU) => {
            eprintln!(
                "rcutrace: tasks-trace RCU is SRCU on this kernel: following its domain, \
                 {TASKS_TRACE_SRCU}"
            );
            Plan {
                only: symbols.get(TASKS_TRACE_SRCU).copied(),
                ..srcu_plan(symbols.get(PER_CPU_OFFSET).copied())?
            }
        }
        Flavor::Trace => Plan {
            only: Some(address_of(TASKS_TRACE).context("following tasks-trace RCU")?),
            ..tasks_plan(&TASKS_GRACE_PERIODS_NEEDED)?
        },
        Flavor::Normal => bail!("normal RCU's grace periods are taken apart by gp itself"),
    })
}

/// SRCU's grace periods, every domain's; their readers' CPUs named where `per_cpu_offset`
/// (the address of `__per_cpu_offset`) and the readers' layout are known.
fn srcu_plan(per_cpu_offset: Option<u64>) -> Result<Plan> {
    // Domains no symbol names are named by who initialised them, where that was in the
    // window.
    let mut probes = SRCU_GRACE_PERIODS.to_vec();
    probes.push(probes::SRCU_DOMAIN_INIT);
    let layout = kernel::srcu_layout::layout()?;
    // The scans are hooked only where their readers can be found: without them the grace
    // periods are still timed, their readers' CPUs not named.
    if layout.readers.is_some() && per_cpu_offset.is_some() {
        probes.extend(SRCU_READER_SCANS);
    } else {
        eprintln!(
            "rcutrace: warning: this kernel's SRCU readers' counts cannot be found (its BTF or \
             {PER_CPU_OFFSET}): the CPUs of the readers that hold grace periods up are not \
             named"
        );
    }
    Ok(Plan {
        probes,
        needed: &SRCU_GRACE_PERIODS,
        constants: srcu_constants(&layout, per_cpu_offset, kernel::possible_cpus()?),
        map_name: SRCU_MAP,
        assembler: Box::new(SrcuAssembler::default()),
        only: None,
    })
}

/// Every tasks-RCU flavour's grace periods, and classic tasks RCU's holdout tasks where their
/// fields are known; the run fails without `needed`.
fn tasks_plan(needed: &'static [Probe]) -> Result<Plan> {
    let mut probes = TASKS_GRACE_PERIODS.to_vec();
    let holdouts = kernel::tasks_holdouts::layout()?;
    if holdouts.is_some() {
        probes.push(TASKS_HOLDOUT_PASSES);
    } else {
        eprintln!(
            "rcutrace: warning: this kernel's BTF lacks the holdout list's fields of \
             task_struct: the tasks that hold tasks-RCU grace periods up are not named"
        );
    }
    Ok(Plan {
        probes,
        needed,
        constants: tasks_constants(holdouts.as_ref()),
        map_name: TASKS_MAP,
        assembler: Box::new(TasksAssembler::default()),
        only: None,
    })
}

struct Stream {
    assembler: Box<dyn Assemble>,
    tally: FlavourTally,
    /// Grace periods seen to end whose start was not seen, since tracing began.
    began_before_tracing: u64,
    malformed: u64,
}

pub async fn run(args: &GpArgs, sink: Sink) -> Result<Report> {
    let Plan {
        probes,
        needed,
        constants,
        map_name,
        assembler,
        only,
    } = plan(args.flavor)?;
    let unit_ns = args.unit.nanos();
    let new_tally = || FlavourTally::new(Layout::Log2, unit_ns);
    let stream = RefCell::new(Stream {
        assembler,
        tally: new_tally(),
        began_before_tracing: 0,
        malformed: 0,
    });
    let mut consume = |record: &[u8]| {
        let mut stream = stream.borrow_mut();
        let Some(event) = decode(record) else {
            stream.malformed += 1;
            return;
        };
        // Every event names its domain or flavour.
        if only.is_some_and(|only| event.value != only) {
            return;
        }
        stream.assembler.add(&event);
        for gp in stream.assembler.take_done() {
            stream.tally.add(&gp);
        }
    };
    let symbols = SymbolKeeper::new();
    let launch = window::launch_of(args.length.command())?;
    let report = window::trace(
        Request {
            probes: &probes,
            constants,
            // Kprobes only: the programs have no other kind.
            choice: AttachChoice::Kprobe,
            by: None,
            need: Need::These(needed),
            ends: Ends::after(args.length.duration()),
            reporting: Reporting::every(args.over_time.interval()),
            sample_readers: None,
            hooks: window::hooks(Some(&symbols), launch.as_ref()),
        },
        Some(&mut consume),
        &mut |period| {
            let mut stream = stream.borrow_mut();
            grace_periods::refuse_malformed(stream.malformed)?;
            let began = stream.assembler.take_began_before_tracing();
            stream.began_before_tracing += began;
            let (tally, began_before_tracing) = if period.cumulative {
                (stream.tally.clone(), stream.began_before_tracing)
            } else {
                (std::mem::replace(&mut stream.tally, new_tally()), began)
            };
            let in_progress = stream.assembler.in_progress();
            Ok(report_of(
                period,
                args,
                map_name,
                &tally,
                in_progress,
                began_before_tracing,
                &symbols,
            ))
        },
        sink,
    )
    .await?;
    window::launched(launch.as_ref())?;
    Ok(report)
}

fn report_of(
    period: &Period<'_>,
    args: &GpArgs,
    map_name: &str,
    tally: &FlavourTally,
    in_progress: u64,
    began_before_tracing: u64,
    symbols: &SymbolKeeper,
) -> Report {
    // A domain or flavour is named by the symbol at its address (`rcu_tasks`,
    // `tracepoint_srcu`, `NAME [module]`), else by its address and its initialiser.
    let mut name = naming::domain_names(period.tracer, symbols);
    let mut maps = Vec::new();
    let mut series = Vec::new();
    for (&key, durations) in &tally.by_key {
        let key = Some(name(key));
        maps.push(Map::Hist(HistMap {
            name: map_name.into(),
            key: key.clone(),
            buckets: durations.buckets(),
        }));
        series.push(durations.stats(key));
    }
    // In the order bpftrace prints the histograms: by count, the largest last.
    series.sort_by(|a, b| a.count.cmp(&b.count).then_with(|| a.key.cmp(&b.key)));
    if map_name == SRCU_MAP {
        let entries = tally
            .held_by_readers_on
            .iter()
            .map(|(&(key, cpu), &grace_periods)| (format!("{}, {cpu}", name(key)), grace_periods))
            .collect();
        maps.push(Map::Count(CountMap {
            name: HELD_ON_MAP.into(),
            entries,
        }));
    }
    if map_name == TASKS_MAP {
        let entries = tally
            .held_by_tasks
            .iter()
            .map(|((key, comm, pid), &grace_periods)| {
                (format!("{}, {comm}, {pid}", name(*key)), grace_periods)
            })
            .collect();
        maps.push(Map::Count(CountMap {
            name: HELD_BY_MAP.into(),
            entries,
        }));
        if tally.holdouts_unnamed > 0 {
            eprintln!(
                "rcutrace: warning: the last pass of {} tasks-RCU grace periods listed more \
                 than {} holdout tasks: only those are in {HELD_BY_MAP}",
                tally.holdouts_unnamed,
                common::MAX_TASKS_HOLDOUTS_NAMED
            );
        }
    }
    let losses = period.counters.array("GP_LOSSES");
    let loss = |slot: u32| losses.get(slot as usize).copied().unwrap_or(0);
    // A number or a reader's count that could not be read leaves a grace period unseen or a
    // CPU unnamed: said, as nothing in a histogram's summary holds it.
    let reads_failed = loss(common::GP_LOST_READS);
    if reads_failed > 0 {
        eprintln!(
            "rcutrace: warning: {reads_failed} reads of kernel memory failed: grace periods \
             or their readers' CPUs may be missing from {map_name}"
        );
    }
    let attached: Vec<Probe> = period.attached.iter().map(|(p, _)| *p).collect();
    let summary = LatencySummary {
        map_name: map_name.into(),
        unit: args.unit,
        series,
        percentile_error: PERCENTILE_ERROR,
        losses: Losses {
            in_flight_at_exit: if period.closing { in_progress } else { 0 },
            returns_lost: 0,
            began_before_tracing,
            missed_by_kernel: period.counters.missed(period.tracer, &attached),
            lost_to_full_map: loss(common::GP_LOST_EVENTS),
            stacks_lost: None,
            own_calls_left_out: 0,
        },
        stages: None,
        cross_checks: Vec::new(),
    };
    Report {
        time: None,
        maps,
        summary: Summary::Latency(vec![summary]),
        environment: period.environment(),
    }
}
