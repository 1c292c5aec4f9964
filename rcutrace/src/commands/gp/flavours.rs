//! `rcutrace gp --flavor srcu|tasks|rude|trace`: how long the grace periods of the flavours
//! other than normal RCU's take, by what runs them: each SRCU domain, each tasks-RCU flavour
//! (`rude` and `trace` keep one; since 7.0 tasks-trace RCU is an SRCU domain). The
//! programs send each grace period's bounds; `model::flavour_grace_periods` assembles them,
//! and each period's report is a histogram of the lengths per key, with exact statistics.

use std::{
    cell::RefCell,
    collections::{HashMap, HashSet},
};

use anyhow::{Context as _, Result, bail};
use rcutrace_common::gp as common;

use rcutrace_common::{
    latency::{RECORD_SAMPLE, Sample, read_record, record_kind},
    records,
};

use crate::{
    cli::{ByArgs, Flavor, GpArgs},
    commands::{
        naming,
        publish::Sink,
        timed_calls::{self, Checking, Timing},
        window,
    },
    kernel::{self, cgroups::CgroupPaths, symbols::keeper::SymbolKeeper},
    model::{
        CountMap, HistMap, LatencySummary, Losses, Map, Report, Summary,
        aggregate::{Aggregate, Layout},
        attribution::By,
        flavour_grace_periods::{
            Assemble, FlavourGracePeriod, FlavourTally, HoldoutTask, SrcuAssembler, TasksAssembler,
            Waiter,
        },
        stats::PERCENTILE_ERROR,
    },
    trace::{
        engine::{Ends, Need, Period, Reporting, Request},
        grace_periods::{self, decode, srcu_constants, tasks_constants},
        probes::{
            self, AttachChoice, Probe, SRCU_GRACE_PERIODS, SRCU_READER_SCANS, SRCU_WAITS,
            TASKS_GRACE_PERIODS, TASKS_GRACE_PERIODS_NEEDED, TASKS_HOLDOUT_PASSES,
            TASKS_HOLDOUT_TICKS, TASKS_PHASE_STEPS, TASKS_RUDE_GRACE_PERIODS, TASKS_RUDE_WAITS,
            TASKS_TRACE_HOLDOUT_PASSES, TASKS_TRACE_WAITS, TASKS_WAITS,
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
pub(crate) struct Plan {
    pub(crate) probes: Vec<Probe>,
    pub(crate) needed: &'static [Probe],
    pub(crate) constants: Vec<Constant>,
    /// The histograms' map, keyed by what ran each grace period.
    pub(crate) map_name: &'static str,
    pub(crate) assembler: Box<dyn Assemble>,
    /// The one domain or tasks-RCU flavour kept (`--flavor rude|trace`), by address: the
    /// programs hook every one, and their events carry it.
    pub(crate) only: Option<u64>,
    /// The functions that wait for these grace periods (timed as the waiters, where this
    /// kernel has them): the flavour's own, or SRCU's on the domains followed.
    pub(crate) waits: Vec<&'static str>,
    /// Where each grace period passes from one phase to the next, beyond its bounds (tasks
    /// RCU's phase steps; SRCU's phases end at its reader scans, among `probes`): `gp` and
    /// `serve` hook those this kernel has, `stall` none.
    pub(crate) phase_steps: &'static [Probe],
    /// The tick that samples the holdouts' stacks, where their field is known: `gp` alone
    /// hooks it (it runs on every CPU's every tick).
    pub(crate) holdout_samples: Option<Probe>,
}

/// What `flavor`'s grace periods (and waiters) are followed by on this kernel.
pub(crate) fn plan(flavor: Flavor) -> Result<Plan> {
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
        Flavor::Tasks => Plan {
            waits: [TASKS_WAITS, TASKS_RUDE_WAITS, TASKS_TRACE_WAITS].concat(),
            ..tasks_plan(&TASKS_GRACE_PERIODS_NEEDED)?
        },
        Flavor::Rude => Plan {
            only: Some(address_of(TASKS_RUDE).context("following tasks-rude RCU")?),
            waits: TASKS_RUDE_WAITS.to_vec(),
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
            waits: TASKS_TRACE_WAITS.to_vec(),
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
        waits: SRCU_WAITS.to_vec(),
        phase_steps: &[],
        holdout_samples: None,
    })
}

/// Every tasks-RCU flavour's grace periods, and classic tasks RCU's holdout tasks where their
/// fields are known; the run fails without `needed`.
fn tasks_plan(needed: &'static [Probe]) -> Result<Plan> {
    let mut probes = TASKS_GRACE_PERIODS.to_vec();
    let mut holdout_samples = None;
    let holdouts = kernel::tasks_holdouts::layout()?;
    if let Some(layout) = holdouts {
        probes.push(TASKS_HOLDOUT_PASSES);
        if layout.trace_holdout_list.is_some() {
            probes.push(TASKS_TRACE_HOLDOUT_PASSES);
        }
        if layout.holdout_flag.is_some() {
            holdout_samples = Some(TASKS_HOLDOUT_TICKS);
        }
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
        waits: Vec::new(),
        phase_steps: &TASKS_PHASE_STEPS,
        holdout_samples,
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
        mut probes,
        needed,
        mut constants,
        map_name,
        assembler,
        only,
        waits,
        phase_steps,
        holdout_samples,
    } = plan(args.flavor)?;
    // The phase steps and the waits, where this kernel has them: one pass over
    // /proc/kallsyms for both.
    let wanted: Vec<&str> = (waits.iter().copied())
        .chain(phase_steps.iter().map(|p| p.function))
        .collect();
    let present = if wanted.is_empty() {
        HashSet::new()
    } else {
        kernel::functions_present(&wanted)?
    };
    probes.extend(phase_steps.iter().filter(|p| present.contains(p.function)));
    probes.extend(holdout_samples);
    let timings = waiters(&waits, &present, args);
    // By timed index, as `waiters` numbers them.
    let wait_functions: Vec<&'static str> = waits
        .iter()
        .copied()
        .filter(|f| present.contains(*f))
        .collect();
    probes.extend(timings.iter().flat_map(|t| t.timed.probes()));
    constants.extend(waiters_constants(&timings, map_name, only));
    // The waiters are keyed by their callers' stacks, folded beyond --top.
    let by = ByArgs {
        by: Some(By::Stack),
        top: args.top,
    };
    let unit_ns = args.unit.nanos();
    let new_tally = || FlavourTally::new(Layout::Log2, unit_ns, args.top);
    let stream = RefCell::new(Stream {
        assembler,
        tally: new_tally(),
        began_before_tracing: 0,
        malformed: 0,
    });
    let waited = RefCell::new(Aggregate::new(
        Layout::Log2,
        timings.iter().map(|t| t.unit.nanos()).collect(),
    ));
    // One ring carries both: the grace periods' events and the waits' samples.
    let srcu = map_name == SRCU_MAP;
    let mut consume = |record: &[u8]| {
        if record_kind(record) == Some(RECORD_SAMPLE) {
            waited.borrow_mut().add(record);
            // A wait returns after the grace periods it waited through ended, and those are
            // in the tally by then: their ends were put in the ring before its return (for
            // SRCU, by the callbacks' run that woke it at the latest).
            if let Some(sample) = read_record::<Sample>(record) {
                let wait = Waiter {
                    timed: sample.key.event,
                    tid: sample.tid,
                    domain: sample.key.domain,
                    started_ns: sample.start_ns,
                    waited_ns: sample.nanos,
                    stack: sample.key.stack,
                };
                for gp in &mut stream.borrow_mut().tally.slowest {
                    gp.waited_through_by(&wait, srcu);
                }
            }
            return;
        }
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
    let checking = Checking {
        whole_window: args.over_time.interval().is_none_or(|i| i.cumulative),
        format: sink.format(),
    };
    let mut cgroups = CgroupPaths::new();
    let report = window::trace(
        Request {
            probes: &probes,
            constants,
            // Kprobes only: the programs have no other kind, and a trampoline's attaching
            // would itself wait for these flavours' grace periods.
            choice: AttachChoice::Kprobe,
            by: by.by,
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
            let mut report = report_of(
                period,
                args,
                map_name,
                &tally,
                Unfinished {
                    in_progress,
                    began_before_tracing,
                },
                &wait_functions,
                &symbols,
            );
            if !timings.is_empty() {
                let waiters = timed_calls::period_report(
                    period,
                    &timings,
                    &by,
                    &mut waited.borrow_mut(),
                    &symbols,
                    checking,
                    &mut cgroups,
                )?;
                report.add_latency(waiters);
            }
            Ok(report)
        },
        sink,
    )
    .await?;
    window::launched(launch.as_ref())?;
    Ok(report)
}

/// The waits of `functions` this kernel has (`present`), each timed from its call to its
/// return.
fn waiters(functions: &[&'static str], present: &HashSet<String>, args: &GpArgs) -> Vec<Timing> {
    functions
        .iter()
        .filter(|f| present.contains(**f))
        .zip(0..)
        .map(|(&function, index)| Timing {
            timed: probes::timed_call(index, function),
            map_name: format!("@{function}"),
            unit: args.unit,
        })
        .collect()
}

/// What the waits' programs are told: everyone's calls count, SRCU's are keyed by domain
/// too, and where one domain is followed (7.x's tasks-trace RCU) only its waits count.
fn waiters_constants(timings: &[Timing], map_name: &str, only: Option<u64>) -> Vec<Constant> {
    let only_domain = if map_name == SRCU_MAP { only } else { None };
    let mut constants = timed_calls::constants(timings, 0, true);
    constants.push(Constant::U64("ONLY_DOMAIN", only_domain.unwrap_or(0)));
    constants
}

/// Grace periods of the period not in its tally: still in progress as it closed, and seen
/// to end having begun before tracing.
struct Unfinished {
    in_progress: u64,
    began_before_tracing: u64,
}

fn report_of(
    period: &Period<'_>,
    args: &GpArgs,
    map_name: &str,
    tally: &FlavourTally,
    unfinished: Unfinished,
    wait_functions: &[&'static str],
    symbols: &SymbolKeeper,
) -> Report {
    let Unfinished {
        in_progress,
        began_before_tracing,
    } = unfinished;
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
    let mut waiter_stacks = Vec::new();
    let mut grace_periods: Vec<records::GracePeriod> = tally
        .slowest
        .iter()
        .map(|gp| {
            let (record, stacks) = record_of(gp, map_name, wait_functions, &mut name);
            waiter_stacks.push(stacks);
            record
        })
        .collect();
    // The holdouts' and waiters' stacks, named once the domains' namer is done with the
    // symbols.
    drop(name);
    let mut frames = naming::stack_frames(period.tracer, symbols);
    for ((record, gp), stacks) in grace_periods
        .iter_mut()
        .zip(&tally.slowest)
        .zip(waiter_stacks)
    {
        for (task, holdout) in record.holdout_tasks.iter_mut().zip(&gp.last_holdouts) {
            task.stack = holdout.stack.map(&mut frames).unwrap_or_default();
        }
        for (waiter, stack) in record.waiters.iter_mut().zip(stacks) {
            waiter.stack = frames(stack);
        }
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
        grace_periods,
    };
    Report {
        time: None,
        maps,
        summary: Summary::Latency(vec![summary]),
        environment: period.environment(),
    }
}

/// The flavour a plan's grace periods are said to be of: `srcu` or `tasks`.
pub(crate) fn flavor_of(map_name: &str) -> &'static str {
    if map_name == SRCU_MAP {
        "srcu"
    } else {
        "tasks"
    }
}

/// At most this many waiters are listed per grace period; the rest are counted.
const MAX_WAITERS_LISTED: usize = 16;

/// One grace period as `-f json` gives it: `rcutrace_grace_period`, with its flavour and
/// what ran it, named; with the stacks of the waiters listed (in their order), to be named.
fn record_of(
    gp: &FlavourGracePeriod,
    map_name: &str,
    wait_functions: &[&'static str],
    name: &mut impl FnMut(u64) -> String,
) -> (records::GracePeriod, Vec<u64>) {
    let key = name(gp.key);
    let flavor = flavor_of(map_name);
    // Its own flavour's waits (SRCU's are on its domain already).
    let own = wait_frames(flavor, &key);
    let mut waiters: Vec<(&Waiter, &str)> = gp
        .waiters
        .iter()
        .filter_map(|w| {
            let function = *wait_functions.get(w.timed as usize)?;
            own.contains(&function).then_some((w, function))
        })
        .collect();
    let unlisted = waiters.len().saturating_sub(MAX_WAITERS_LISTED) as u64 + gp.waiters_unkept;
    waiters.truncate(MAX_WAITERS_LISTED);
    let stacks = waiters.iter().map(|(w, _)| w.stack).collect();
    let record = records::GracePeriod {
        flavor: flavor.into(),
        key: Some(key),
        gp_seq: gp.gp_seq as i64,
        started_ns: gp.started_ns,
        duration_ns: gp.duration_ns,
        init_ns: None,
        quiescent_wait_ns: None,
        kthread_wake_ns: None,
        cleanup_ns: None,
        request_wait_ns: None,
        fqs_passes: None,
        cpus_reported: None,
        blocked_readers: None,
        held_ns: None,
        last_holdout: None,
        expedited: false,
        reader_cpus: gp.reader_cpus.clone(),
        holdout_tasks: gp.last_holdouts.iter().map(HoldoutTask::record).collect(),
        phases: gp
            .phases
            .iter()
            .map(|&(name, ns)| records::PhaseLength {
                name: name.into(),
                ns,
            })
            .collect(),
        // The rude flavour's make none: it waits for each CPU, not for tasks.
        holdout_passes: (map_name == TASKS_MAP).then_some(gp.holdout_passes),
        waiters: waiters
            .iter()
            .map(|(w, function)| records::WaiterRecord {
                pid: w.tid,
                function: function.to_string(),
                waited_ns: w.waited_ns,
                stack: Vec::new(),
            })
            .collect(),
        waiters_unlisted: (unlisted > 0).then_some(unlisted),
    };
    (record, stacks)
}

/// The functions that wait for a grace period of `flavor` run by `key` (named), as they stand
/// on a blocked task's kernel stack: the tasks-RCU flavour's own waits, or SRCU's on any domain (a stack does
/// not say which), with `__synchronize_srcu()`, which `synchronize_srcu()` tail-calls on
/// Debian's 6.1, 6.12 and 7.3 and so leaves no frame of its own. On 7.x tasks-trace RCU's
/// waits are SRCU's.
pub(crate) fn wait_frames(flavor: &str, key: &str) -> Vec<&'static str> {
    match (flavor, key) {
        ("srcu", _) => [&SRCU_WAITS[..], &["__synchronize_srcu"]].concat(),
        (_, "rcu_tasks_rude") => TASKS_RUDE_WAITS.to_vec(),
        (_, "rcu_tasks_trace") => TASKS_TRACE_WAITS.to_vec(),
        _ => TASKS_WAITS.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(index: u32, function: &'static str) -> Timing {
        Timing {
            timed: probes::timed_call(index, function),
            map_name: format!("@{function}"),
            unit: crate::model::Unit::Ms,
        }
    }

    fn constant(constants: &[Constant], name: &str) -> u64 {
        constants
            .iter()
            .find_map(|c| match *c {
                Constant::U32(n, v) if n == name => Some(u64::from(v)),
                Constant::U64(n, v) if n == name => Some(v),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no {name}"))
    }

    #[test]
    fn srcu_waiters_are_keyed_by_domain_and_kept_to_the_one_followed() {
        const TRACE_DOMAIN: u64 = 0xffff_ffff_8310_c7a0;
        let timings: Vec<Timing> = SRCU_WAITS
            .iter()
            .zip(0..)
            .map(|(&f, i)| timing(i, f))
            .collect();
        let constants = waiters_constants(&timings, SRCU_MAP, Some(TRACE_DOMAIN));
        // Every wait's return ends its call; each takes its domain first.
        assert_eq!(constant(&constants, "SAME_FUNCTION_MASK"), 0b111);
        assert_eq!(constant(&constants, "DOMAIN_ARG_MASK"), 0b111);
        assert_eq!(constant(&constants, "ONLY_DOMAIN"), TRACE_DOMAIN);
        assert_eq!(constant(&constants, "TARGET_TGID"), 0);
        // Every domain's, where none is followed alone.
        let every = waiters_constants(&timings, SRCU_MAP, None);
        assert_eq!(constant(&every, "ONLY_DOMAIN"), 0);
    }

    #[test]
    fn tasks_waiters_take_no_domain_whatever_flavour_is_kept() {
        const RUDE: u64 = 0xffff_ffff_82cc_db60;
        let timings = vec![
            timing(0, TASKS_RUDE_WAITS[0]),
            timing(1, TASKS_RUDE_WAITS[1]),
        ];
        // `only` names a tasks-RCU flavour here, not a domain the waits are given.
        let constants = waiters_constants(&timings, TASKS_MAP, Some(RUDE));
        assert_eq!(constant(&constants, "SAME_FUNCTION_MASK"), 0b11);
        assert_eq!(constant(&constants, "DOMAIN_ARG_MASK"), 0);
        assert_eq!(constant(&constants, "ONLY_DOMAIN"), 0);
    }

    #[test]
    fn a_grace_period_record_says_its_flavour_and_what_held_it() {
        let gp = FlavourGracePeriod {
            key: 0xffff_ffff_82cc_dcc0,
            gp_seq: 0,
            started_ns: 5_000,
            duration_ns: 900_000_000,
            reader_cpus: Vec::new(),
            last_holdouts: vec![HoldoutTask {
                comm: "spin".into(),
                pid: 160,
                cpu: 3,
                stack: None,
            }],
            holdouts_unnamed: false,
            phases: vec![("pre_gp", 2_000_000), ("holdouts", 890_000_000)],
            holdout_passes: 4,
            waiters: Vec::new(),
            waiters_unkept: 0,
        };
        let mut name = |key: u64| format!("{key:#x}");
        let (record, _) = record_of(&gp, TASKS_MAP, &[], &mut name);
        assert_eq!(record.flavor, "tasks");
        assert_eq!(record.key.as_deref(), Some("0xffffffff82ccdcc0"));
        assert_eq!(
            (record.started_ns, record.duration_ns),
            (5_000, 900_000_000)
        );
        assert_eq!(
            record.holdout_tasks,
            [records::HoldoutTaskRecord {
                pid: 160,
                comm: "spin".into(),
                cpu: 3,
                stack: Vec::new(),
            }]
        );
        // Its kernel's phases, in order, and its passes over the holdouts.
        let phases: Vec<(&str, u64)> = record
            .phases
            .iter()
            .map(|p| (p.name.as_str(), p.ns))
            .collect();
        assert_eq!(phases, [("pre_gp", 2_000_000), ("holdouts", 890_000_000)]);
        assert_eq!(record.holdout_passes, Some(4));
        // Normal RCU's anatomy is absent, not zero.
        let json = serde_json::to_string(&record).unwrap();
        assert!(
            !json.contains("init_ns") && !json.contains("held_ns"),
            "{json}"
        );
        let srcu = record_of(
            &FlavourGracePeriod {
                reader_cpus: vec![3],
                last_holdouts: Vec::new(),
                gp_seq: 9,
                ..gp
            },
            SRCU_MAP,
            &[],
            &mut name,
        )
        .0;
        assert_eq!((srcu.flavor.as_str(), srcu.gp_seq), ("srcu", 9));
        assert_eq!(srcu.holdout_passes, None);
        assert_eq!(srcu.reader_cpus, [3]);
    }

    #[test]
    fn a_grace_period_lists_only_its_own_flavours_waiters() {
        let waiter = |timed, stack| Waiter {
            timed,
            tid: 189,
            domain: 0,
            started_ns: 0,
            waited_ns: 460_000_000,
            stack,
        };
        let gp = FlavourGracePeriod {
            key: 0xffff_ffff_82cc_dcc0,
            duration_ns: 450_000_000,
            // A classic wait, a rude one (another flavour's), one of no function timed.
            waiters: vec![waiter(0, 11), waiter(1, 12), waiter(7, 13)],
            waiters_unkept: 2,
            ..FlavourGracePeriod::default()
        };
        let functions = ["synchronize_rcu_tasks", "synchronize_rcu_tasks_rude"];
        let mut name = |_| "rcu_tasks".to_string();
        let (record, stacks) = record_of(&gp, TASKS_MAP, &functions, &mut name);
        assert_eq!(
            record.waiters,
            [records::WaiterRecord {
                pid: 189,
                function: "synchronize_rcu_tasks".into(),
                waited_ns: 460_000_000,
                stack: Vec::new(),
            }]
        );
        assert_eq!(stacks, [11]);
        // Those past the kept are said.
        assert_eq!(record.waiters_unlisted, Some(2));
    }

    #[test]
    fn every_wait_of_every_flavour_fits_the_timed_programs() {
        let all = [TASKS_WAITS, TASKS_RUDE_WAITS, TASKS_TRACE_WAITS].concat();
        assert!(all.len() as u32 <= rcutrace_common::latency::MAX_TIMED);
        assert!(SRCU_WAITS.len() as u32 <= rcutrace_common::latency::MAX_TIMED);
        // And they are waits: srlat times them too.
        for function in all.iter().chain(&SRCU_WAITS) {
            assert!(
                probes::waiting_functions().any(|w| w == *function),
                "{function}"
            );
        }
    }
    #[test]
    fn each_flavour_is_waited_for_in_its_own_functions() {
        assert_eq!(
            wait_frames("tasks", "rcu_tasks"),
            ["synchronize_rcu_tasks", "rcu_barrier_tasks"]
        );
        assert_eq!(
            wait_frames("tasks", "rcu_tasks_trace"),
            ["synchronize_rcu_tasks_trace", "rcu_barrier_tasks_trace"]
        );
        // Any domain's, the tail-called one too.
        let srcu = wait_frames("srcu", "rcu_tasks_trace_srcu_struct");
        assert!(srcu.contains(&"__synchronize_srcu") && srcu.contains(&"srcu_barrier"));
    }
}
