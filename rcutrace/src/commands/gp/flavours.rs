//! `rcutrace gp --flavor srcu|tasks`: how long the grace periods of the flavours other than
//! normal RCU's take, by what runs them: each SRCU domain, each tasks-RCU flavour. The
//! programs send each grace period's bounds; `model::flavour_grace_periods` assembles them,
//! and each period's report is a histogram of the lengths per key, with exact statistics.

use std::cell::RefCell;

use anyhow::{Result, bail};
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
        grace_periods::{decode, srcu_constants, tasks_constants},
        probes::{
            self, AttachChoice, Probe, SRCU_GRACE_PERIODS, SRCU_READER_SCANS, TASKS_GRACE_PERIODS,
            TASKS_GRACE_PERIODS_NEEDED,
        },
        tracer::Constant,
    },
};

/// Per key and CPU, the grace periods held up by readers that entered on that CPU (SRCU).
const HELD_ON_MAP: &str = "@srcu_gp_held_on";

/// The per-CPU areas' offsets, by which the programs find each CPU's counts of readers.
const PER_CPU_OFFSET: &str = "__per_cpu_offset";

/// What one flavour hooks and how its events are assembled.
struct Plan {
    probes: Vec<Probe>,
    needed: &'static [Probe],
    constants: Vec<Constant>,
    /// The histograms' map, keyed by what ran each grace period.
    map_name: &'static str,
    assembler: Box<dyn Assemble>,
}

fn plan(flavor: Flavor) -> Result<Plan> {
    Ok(match flavor {
        Flavor::Srcu => {
            // Domains no symbol names are named by who initialised them, where that was
            // in the window.
            let mut probes = SRCU_GRACE_PERIODS.to_vec();
            probes.push(probes::SRCU_DOMAIN_INIT);
            // Without it the grace periods are still timed, their readers' CPUs not named.
            let per_cpu_offset = match kernel::kernel_symbols(&[PER_CPU_OFFSET]) {
                Ok(symbols) => symbols.get(PER_CPU_OFFSET).copied(),
                Err(e) => {
                    log::warn!("the CPUs of SRCU's readers are not named: {e:#}");
                    None
                }
            };
            let layout = kernel::srcu_layout::layout()?;
            // The scans are hooked only where their readers can be found.
            if layout.readers.is_some() && per_cpu_offset.is_some() {
                probes.extend(SRCU_READER_SCANS);
            } else {
                eprintln!(
                    "rcutrace: warning: this kernel's SRCU readers' counts cannot be found (its \
                     BTF or {PER_CPU_OFFSET}): the CPUs of the readers that hold grace periods \
                     up are not named"
                );
            }
            Plan {
                probes,
                needed: &SRCU_GRACE_PERIODS,
                constants: srcu_constants(&layout, per_cpu_offset, kernel::possible_cpus()?),
                map_name: "@srcu_gp",
                assembler: Box::new(SrcuAssembler::default()),
            }
        }
        Flavor::Tasks => Plan {
            probes: TASKS_GRACE_PERIODS.to_vec(),
            needed: &TASKS_GRACE_PERIODS_NEEDED,
            constants: tasks_constants(),
            map_name: "@tasks_gp",
            assembler: Box::new(TasksAssembler::default()),
        },
        Flavor::Normal => bail!("normal RCU's grace periods are taken apart by gp itself"),
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
            if stream.malformed > 0 {
                bail!(
                    "{} records in the event buffer were not grace-period events \
                     (rcutrace's eBPF object and loader disagree)",
                    stream.malformed
                );
            }
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
    if args.flavor == Flavor::Srcu {
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
