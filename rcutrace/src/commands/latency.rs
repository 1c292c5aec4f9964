//! `rcutrace gplat` and `rcutrace srlat`: one latency pipeline, different choices of functions.

use std::cell::RefCell;

use anyhow::{Result, bail};
use rcutrace_common::latency::*;

use super::trace;
use crate::{
    cli::{ByArgs, LatencyArgs, SrlatArgs},
    kernel,
    kernel::cgroups::CgroupPaths,
    kernel::symbols::keeper::SymbolKeeper,
    model::aggregate::{Aggregate, Layout, Series},
    model::attribution::{self, By, Namers, fold_top, key_text},
    model::checks::{self, CrossCheck},
    model::stages::{Joiner, Staged, StagedFunction, StagesSummary},
    model::stats::PERCENTILE_ERROR,
    model::{HistMap, LatencySummary, Losses, Map, Report, Summary, Unit},
    render::Format,
    trace::engine::{Need, Period, Request},
    trace::launch::{self, Following},
    trace::probes::{self, FOLLOWED_TREE, Probe, Timed},
    trace::stages,
    trace::tracer::{Constant, Tracer},
};

/// One timed function of a run: what is timed, the map it prints as, and its unit.
#[derive(Clone, Debug)]
pub(super) struct Timing {
    pub(super) timed: Timed,
    pub(super) map_name: String,
    pub(super) unit: Unit,
}

pub async fn gplat(args: &LatencyArgs, format: Format) -> Result<Report> {
    let timing = Timing {
        timed: probes::GP_LATENCY,
        map_name: "@gplat".into(),
        unit: args.unit.unwrap_or(Unit::Ms),
    };
    // The grace-period kthread is no one's process tree: -c only says when to stop.
    run(&[timing], args, Callers::All, None, format).await
}

pub async fn srlat(args: &SrlatArgs, format: Format) -> Result<Report> {
    let mut functions = srlat_functions(args);
    // `--func` may name a function this kernel lacks: named once, the others are timed.
    if !args.func.is_empty() {
        functions = on_this_kernel(functions)?;
    }
    let timings: Vec<Timing> = functions
        .iter()
        .zip(0..)
        .map(|(&function, index)| Timing {
            timed: probes::timed_call(index, function),
            map_name: map_name(function),
            unit: args.latency.unit.unwrap_or_else(|| default_unit(function)),
        })
        .collect();
    let stages = if args.stages {
        let staged = timings
            .iter()
            .map(|t| {
                let staged = match t.timed.entry.function {
                    "synchronize_rcu" => Staged::SynchronizeRcu,
                    _ => Staged::SynchronizeRcuExpedited,
                };
                StagedFunction {
                    timed: t.timed.index(),
                    staged,
                    map_name: t.map_name.clone(),
                    unit: t.unit,
                }
            })
            .collect();
        Some(stages::plan(staged)?)
    } else {
        None
    };
    let callers = match (args.pid, args.latency.common.length.command()) {
        (Some(pid), _) => Callers::Process(pid),
        (None, Some(_)) => Callers::LaunchedTree,
        (None, None) => Callers::All,
    };
    run(&timings, &args.latency, callers, stages, format).await
}

/// The functions `srlat` times, in the order given, each once: `--func`, `--expedited`, or
/// synchronize_rcu().
fn srlat_functions(args: &SrlatArgs) -> Vec<&'static str> {
    let mut functions: Vec<&'static str> = Vec::new();
    let expedited = args.expedited.then_some("synchronize_rcu_expedited");
    for function in args.func.iter().copied().chain(expedited) {
        if !functions.contains(&function) {
            functions.push(function);
        }
    }
    if functions.is_empty() {
        functions.push("synchronize_rcu");
    }
    functions
}

/// The functions this kernel has; the others named once on stderr, as `count` names them.
fn on_this_kernel(functions: Vec<&'static str>) -> Result<Vec<&'static str>> {
    let present = kernel::functions_present(&functions)?;
    let (here, absent): (Vec<&str>, Vec<&str>) =
        functions.into_iter().partition(|f| present.contains(*f));
    if here.is_empty() {
        bail!(
            "nothing to time: not on this kernel (absent from /proc/kallsyms, or inlined): {}",
            absent.join(", ")
        );
    }
    say_not_timed(&absent);
    Ok(here)
}

/// Names once, on stderr, the functions asked for that this kernel lacks.
pub(super) fn say_not_timed(absent: &[&str]) {
    if !absent.is_empty() {
        eprintln!(
            "rcutrace: not on this kernel (absent or inlined), not timed: {}",
            absent.join(", ")
        );
    }
}

/// The seed scripts' names for the two classic maps; `@FUNCTION` for the rest.
fn map_name(function: &str) -> String {
    match function {
        "synchronize_rcu" => "@srlat".into(),
        "synchronize_rcu_expedited" => "@srelat".into(),
        other => format!("@{other}"),
    }
}

/// Expedited grace periods take microseconds, normal ones milliseconds.
pub(super) fn default_unit(function: &str) -> Unit {
    if function.contains("expedited") {
        Unit::Us
    } else {
        Unit::Ms
    }
}

fn layout(args: &LatencyArgs) -> Layout {
    match (args.linear, args.buckets) {
        (Some(linear), _) => Layout::Linear(linear),
        (None, Some(step)) => Layout::Sparse(step),
        (None, None) => Layout::Log2,
    }
}

/// Whose calls are timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Callers {
    All,
    /// `--pid`: one process's.
    Process(u32),
    /// `-c`: those of the launched command's process tree.
    LaunchedTree,
}

async fn run(
    timings: &[Timing],
    args: &LatencyArgs,
    callers: Callers,
    stages: Option<stages::Plan>,
    format: Format,
) -> Result<Report> {
    let pid = match callers {
        Callers::Process(pid) => Some(pid),
        Callers::All | Callers::LaunchedTree => None,
    };
    let launch = super::launch_of(args.common.length.command())?;
    let same_function_mask = timings
        .iter()
        .filter(|t| t.timed.same_function())
        .fold(0u32, |mask, t| mask | 1 << t.timed.index());
    let mut timed_probes: Vec<Probe> = timings.iter().flat_map(|t| t.timed.probes()).collect();
    // With --by srcu each call's domain is read: every function timed then takes one.
    let domain_arg_mask = match args.by.by {
        Some(By::Srcu) => timings
            .iter()
            .filter(|t| attribution::takes_srcu_domain(t.timed.entry.function))
            .fold(0u32, |mask, t| mask | 1 << t.timed.index()),
        _ => 0,
    };
    let mut constants = vec![
        Constant::U32("SAME_FUNCTION_MASK", same_function_mask),
        Constant::U32("TARGET_TGID", pid.unwrap_or(0)),
        Constant::U32("DOMAIN_ARG_MASK", domain_arg_mask),
    ];
    if callers == Callers::LaunchedTree {
        constants.extend(launch::following_constants(Following::Tree)?);
        timed_probes.extend(FOLLOWED_TREE);
    }
    // With --stages, the hooks that take calls apart go in first, so that every call timed
    // has its entry seen; the timed probes and their joining partners must all attach.
    let (probes, needed, joiner) = match stages {
        Some(plan) => {
            constants.extend(plan.constants);
            let mut needed = plan.needed;
            needed.extend(timed_probes.iter().copied());
            let mut probes = plan.probes;
            probes.extend(timed_probes);
            (probes, Some(needed), Some(RefCell::new(plan.joiner)))
        }
        None => (timed_probes, None, None),
    };
    let units = timings.iter().map(|t| t.unit.nanos()).collect();
    // Filled by the samples as they arrive, emptied by each report.
    let aggregate = RefCell::new(Aggregate::new(layout(args), units));
    let mut consume = |record: &[u8]| match &joiner {
        Some(joiner) => {
            if let Some(sample) = joiner.borrow_mut().add(record) {
                aggregate.borrow_mut().add_sample(&sample);
            }
        }
        None => aggregate.borrow_mut().add(record),
    };
    let symbols = SymbolKeeper::new();
    // Every report covers the window from its opening: a plain run's one, or --cumulative's.
    let checking = Checking {
        whole_window: args.over_time.interval().is_none_or(|i| i.cumulative),
        format,
    };
    let mut cgroups = CgroupPaths::new();
    let report = trace(
        Request {
            probes: &probes,
            constants,
            choice: args.common.attach,
            by: args.by.by,
            need: needed.as_deref().map_or(Need::All, Need::These),
            duration: args.common.length.duration(),
            interval: args.over_time.interval(),
            listener: None,
            traced_process: pid,
            sample_readers: None,
            watch: None,
            launch: launch.as_ref(),
            at_close: None,
            symbols: matches!(args.by.by, Some(By::Stack | By::Srcu)).then_some(&symbols),
            format,
        },
        Some(&mut consume),
        &mut |period| {
            let mut report = report(
                period,
                timings,
                &args.by,
                &mut aggregate.borrow_mut(),
                &symbols,
                checking,
                &mut cgroups,
            )?;
            if let Some(joiner) = &joiner {
                add_stages(&mut report, period, timings, &mut joiner.borrow_mut())?;
            }
            Ok(report)
        },
    )
    .await?;
    super::launched(launch.as_ref())?;
    Ok(report)
}

/// When a report's samples are checked against the entries, and how a disagreement is said.
#[derive(Clone, Copy)]
pub(super) struct Checking {
    /// Every report covers the window from its opening (the in-flight calls at a period's
    /// start are known only there).
    pub(super) whole_window: bool,
    pub(super) format: Format,
}

/// The histograms and statistics of the samples that arrived in one period.
pub(super) fn report(
    period: &Period<'_>,
    timings: &[Timing],
    by: &ByArgs,
    aggregate: &mut Aggregate,
    symbols: &SymbolKeeper,
    checking: Checking,
    cgroups: &mut CgroupPaths,
) -> Result<Report> {
    if aggregate.malformed > 0 {
        bail!(
            "{} records in the sample buffer were not samples (rcutrace's eBPF object and loader disagree)",
            aggregate.malformed
        );
    }
    let mut maps = Vec::new();
    let mut summaries = Vec::new();
    for timing in timings {
        let index = timing.timed.index();
        let series = if period.cumulative {
            aggregate.copy(index)
        } else {
            aggregate.take(index)
        };
        let layout = aggregate.layout();
        let series = keyed(series, layout, period.tracer, by, symbols, cgroups);
        let mut stats = Vec::new();
        for (key, s) in &series {
            maps.push(Map::Hist(HistMap {
                name: timing.map_name.clone(),
                key: key.clone(),
                buckets: s.buckets(),
            }));
            stats.push(s.stats(key.clone()));
        }
        // In the order bpftrace prints the histograms: by count, the largest last.
        stats.sort_by(|a, b| a.count.cmp(&b.count).then_with(|| a.key.cmp(&b.key)));
        let (losses, left_behind) = losses(period, timing, by.by)?;
        // Calls in flight at a period's start are unknown: only a period that starts at the
        // window's opening can account for every entry.
        let cross_checks = if checking.whole_window {
            let samples: u64 = stats.iter().map(|s| s.count).sum();
            vec![entries_check(period, timing, samples + left_behind)]
        } else {
            Vec::new()
        };
        super::warn_disagreements(checking.format, &cross_checks);
        summaries.push(LatencySummary {
            map_name: timing.map_name.clone(),
            unit: timing.unit,
            series: stats,
            percentile_error: PERCENTILE_ERROR,
            losses,
            stages: None,
            cross_checks,
        });
    }
    // In bpftrace's order of maps, as the histograms print.
    summaries.sort_by(|a, b| a.map_name.as_bytes().cmp(b.map_name.as_bytes()));
    Ok(Report {
        time: None,
        maps,
        summary: Summary::Latency(summaries),
        environment: period.environment(),
    })
}

/// Puts each timed function's calls, taken apart, beside its statistics.
fn add_stages(
    report: &mut Report,
    period: &Period<'_>,
    timings: &[Timing],
    joiner: &mut Joiner,
) -> Result<()> {
    if joiner.malformed > 0 {
        bail!(
            "{} records in the sample buffer were neither samples nor grace-period events \
             (rcutrace's eBPF object and loader disagree)",
            joiner.malformed
        );
    }
    let Summary::Latency(summaries) = &mut report.summary else {
        return Ok(());
    };
    // The events the stages are made of travel in the sample ring beside gp's: what it had no
    // room for, gp's programs and the stage programs count alike.
    let events_lost = period
        .counters
        .array("GP_LOSSES")
        .get(rcutrace_common::gp::GP_LOST_EVENTS as usize)
        .copied()
        .unwrap_or(0);
    for timing in timings {
        let index = timing.timed.index();
        let stages = if period.cumulative && !period.closing {
            joiner.copy(index)
        } else {
            joiner.take(index, period.closing)
        };
        if let Some(summary) = summaries.iter_mut().find(|s| s.map_name == timing.map_name) {
            summary.stages = Some(Box::new(StagesSummary {
                events_lost,
                ..stages
            }));
        }
    }
    Ok(())
}

/// The series of one function with printable keys, the smallest folded beyond `--top`.
/// Without `--by` there is exactly one series, empty if nothing was measured.
fn keyed(
    series: Vec<(rcutrace_common::attribution::Attribution, Series)>,
    layout: Layout,
    tracer: &Tracer,
    by: &ByArgs,
    symbols: &SymbolKeeper,
    cgroups: &mut CgroupPaths,
) -> Vec<(Option<String>, Series)> {
    let Some(key_by) = by.by else {
        let all = series.into_iter().map(|(_, s)| s).reduce(|mut a, b| {
            a.merge(b);
            a
        });
        return vec![(None, all.unwrap_or_else(|| Series::new(layout)))];
    };
    let mut frames = super::stack_frames(tracer, symbols);
    let mut cgroup = |id| cgroups.path(id);
    let mut domain = super::domain_names(symbols);
    let mut names = Namers {
        frames: &mut frames,
        cgroup: &mut cgroup,
        domain: &mut domain,
    };
    let texts: Vec<(String, Series)> = series
        .into_iter()
        .map(|(key, s)| (key_text(key_by, &key, &mut names), s))
        .collect();
    fold_top(texts, by.top, Series::count, Series::merge)
        .into_iter()
        .map(|(k, s)| (Some(k), s))
        .collect()
}

/// The entries of one timed function against what became of each: a sample, or left
/// behind (see `losses`).
fn entries_check(period: &Period<'_>, timing: &Timing, accounted: u64) -> CrossCheck {
    let stats = period.counters.array("STATS");
    let index = timing.timed.index();
    let entries = stats
        .get((index * STAT_SLOTS + STAT_ENTRIES) as usize)
        .copied()
        .unwrap_or(0);
    checks::samples_against_entries(
        timing.timed.entry.function,
        entries,
        accounted,
        found_nothing_skipped(period, timing),
    )
}

/// Hits the kernel skipped at the return that ends a call finding nothing to do (none where
/// the timing has no such return): each leaves its call to be replaced by the next entry,
/// unseen.
fn found_nothing_skipped(period: &Period<'_>, timing: &Timing) -> u64 {
    timing
        .timed
        .found_nothing
        .map_or(0, |probe| period.counters.missed(period.tracer, &[probe]))
}

/// What could not be measured for one timed function in the period, and how many entries
/// left no sample behind them: each is in the in-flight map at the end, was replaced there
/// by its thread's next entry (a lost return), or could not be recorded or sent.
fn losses(period: &Period<'_>, timing: &Timing, by: Option<By>) -> Result<(Losses, u64)> {
    let tracer = period.tracer;
    let stats = period.counters.array("STATS");
    let index = timing.timed.index();
    let stat = |stat: u32| {
        stats
            .get((index * STAT_SLOTS + stat) as usize)
            .copied()
            .unwrap_or(0)
    };
    let entries_skipped = period.counters.missed(tracer, &[timing.timed.entry]);
    let found_nothing_skipped = found_nothing_skipped(period, timing);
    let returns_skipped = period.counters.missed(tracer, &[timing.timed.exit]);
    // A kprobe and a kretprobe on one function share its address: a hit the kprobe layer
    // skips there is counted by both, and is one call that neither program saw.
    let skipped_together = if timing.timed.same_function() {
        let counters = &period.counters;
        counters
            .kprobe_layer_missed(&[timing.timed.entry])
            .min(counters.kprobe_layer_missed(&[timing.timed.exit]))
    } else {
        0
    };
    let entries_skipped_alone = entries_skipped - skipped_together;
    let returns_skipped_alone = returns_skipped - skipped_together;
    // Calls left in the in-flight map: still inside the function, or returned with the return
    // not seen: dropped by the kernel (a kretprobe out of instances) or its program skipped (a
    // trampoline's program is skipped when its thread was preempted inside it and another
    // thread entered it on that CPU). A thread that has gone has certainly returned; a live
    // thread is taken to be still inside (its kernel stack cannot tell: the function may have
    // tail-called its way off the stack).
    let mut in_flight = 0;
    let mut returned = 0;
    for (tid, timed) in tracer.in_flight()? {
        if timed != index {
            continue;
        }
        if kernel::task_exists(tid) {
            in_flight += 1;
        } else {
            returned += 1;
        }
    }
    log::debug!(
        "{}: entries skipped {entries_skipped}, returns skipped {returns_skipped}, \
         in flight {in_flight}, of gone threads {returned}",
        timing.timed.entry.function
    );
    // A return skipped alone leaves its start behind, like a dropped return: count it once.
    let returns_dropped =
        (stat(STAT_RETURNS_MISSED) + returned).saturating_sub(returns_skipped_alone);
    let lost_to_full_map = stat(STAT_LOST_START_MAP_FULL) + stat(STAT_LOST_RING_FULL);
    let own_calls = stat(STAT_OWN_CALLS);
    // Calls that ended with no grace period started: not a loss, nothing to time.
    let found_nothing = stat(STAT_FOUND_NOTHING);
    let left_behind = in_flight
        + returned
        + stat(STAT_RETURNS_MISSED)
        + lost_to_full_map
        + own_calls
        + found_nothing;
    let losses = Losses {
        in_flight_at_exit: in_flight,
        returns_lost: returns_dropped,
        // An entry skipped alone makes its return look unmatched: count it once, as missed.
        began_before_tracing: stat(STAT_UNMATCHED_RETURNS).saturating_sub(entries_skipped_alone),
        missed_by_kernel: entries_skipped + returns_skipped_alone + found_nothing_skipped,
        lost_to_full_map,
        stacks_lost: (by == Some(By::Stack)).then(|| stat(STAT_LOST_STACK)),
        own_calls_left_out: own_calls,
    };
    Ok((losses, left_behind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcutrace_common::hist::Linear;

    #[test]
    fn layouts_from_the_command_line() {
        let linear = Linear {
            min: 0,
            max: 1000,
            step: 100,
        };
        let args = |linear, buckets| LatencyArgs {
            common: crate::cli::Common {
                length: crate::cli::Length {
                    secs: 1,
                    command: None,
                },
                attach: Default::default(),
            },
            over_time: Default::default(),
            unit: None,
            linear,
            buckets,
            by: Default::default(),
        };
        assert_eq!(layout(&args(Some(linear), None)), Layout::Linear(linear));
        assert_eq!(layout(&args(None, Some(5))), Layout::Sparse(5));
        assert_eq!(layout(&args(None, None)), Layout::Log2);
    }

    #[test]
    fn srlat_times_each_function_once_in_the_order_given() {
        let args = |func: &[&'static str], expedited| SrlatArgs {
            latency: LatencyArgs {
                common: crate::cli::Common {
                    length: crate::cli::Length {
                        secs: 1,
                        command: None,
                    },
                    attach: Default::default(),
                },
                over_time: Default::default(),
                unit: None,
                linear: None,
                buckets: None,
                by: Default::default(),
            },
            expedited,
            func: func.to_vec(),
            pid: None,
            stages: false,
        };
        assert_eq!(srlat_functions(&args(&[], false)), ["synchronize_rcu"]);
        assert_eq!(
            srlat_functions(&args(&[], true)),
            ["synchronize_rcu_expedited"]
        );
        assert_eq!(
            srlat_functions(&args(&["rcu_barrier", "synchronize_rcu_expedited"], true)),
            ["rcu_barrier", "synchronize_rcu_expedited"]
        );
    }

    #[test]
    fn names_and_units() {
        assert_eq!(map_name("synchronize_rcu"), "@srlat");
        assert_eq!(map_name("synchronize_rcu_expedited"), "@srelat");
        assert_eq!(map_name("rcu_barrier"), "@rcu_barrier");
        assert_eq!(default_unit("synchronize_srcu_expedited"), Unit::Us);
        assert_eq!(default_unit("rcu_barrier"), Unit::Ms);
    }
}
