//! `rcutrace gplat` and `rcutrace srlat`: one latency pipeline, different choices of functions.

use std::cell::RefCell;

use anyhow::{Result, bail};

use super::{
    timed_calls::{self, Checking, Timing, say_not_timed},
    window::trace,
};
use crate::{
    cli::{LatencyArgs, SrlatArgs},
    commands::publish::Sink,
    kernel,
    kernel::cgroups::CgroupPaths,
    kernel::symbols::keeper::SymbolKeeper,
    model::aggregate::{Aggregate, Layout},
    model::attribution::By,
    model::stages::{Joiner, Staged, StagedFunction, StagesSummary},
    model::{Report, Summary, Unit},
    trace::engine::{Ends, Need, Period, Reporting, Request},
    trace::launch::{self, Following},
    trace::probes::{self, FOLLOWED_TREE, Probe, SRCU_DOMAIN_INIT},
    trace::stages,
};

pub async fn gplat(args: &LatencyArgs, sink: Sink) -> Result<Report> {
    let timing = Timing {
        timed: probes::GP_LATENCY,
        map_name: "@gplat".into(),
        unit: args.unit.unwrap_or(Unit::Ms),
    };
    // The grace-period kthread is no one's process tree: -c only says when to stop.
    run(&[timing], args, Callers::All, None, sink).await
}

pub async fn srlat(args: &SrlatArgs, sink: Sink) -> Result<Report> {
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
            unit: args
                .latency
                .unit
                .unwrap_or_else(|| timed_calls::default_unit(function)),
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
    run(&timings, &args.latency, callers, stages, sink).await
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

/// The seed scripts' names for the two classic maps; `@FUNCTION` for the rest.
fn map_name(function: &str) -> String {
    match function {
        "synchronize_rcu" => "@srlat".into(),
        "synchronize_rcu_expedited" => "@srelat".into(),
        other => format!("@{other}"),
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
    sink: Sink,
) -> Result<Report> {
    let pid = match callers {
        Callers::Process(pid) => Some(pid),
        Callers::All | Callers::LaunchedTree => None,
    };
    let launch = super::window::launch_of(args.common.length.command())?;
    let mut timed_probes: Vec<Probe> = timings.iter().flat_map(|t| t.timed.probes()).collect();
    // With --by srcu each call's domain is read: every function timed then takes one.
    let mut constants =
        timed_calls::constants(timings, pid.unwrap_or(0), args.by.by == Some(By::Srcu));
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
    let mut probes = probes;
    if args.by.by == Some(By::Srcu) {
        probes.insert(0, SRCU_DOMAIN_INIT);
    }
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
        format: sink.format(),
    };
    let mut cgroups = CgroupPaths::new();
    let report = trace(
        Request {
            probes: &probes,
            constants,
            choice: args.common.attach,
            by: args.by.by,
            need: needed.as_deref().map_or(Need::All, Need::These),
            ends: Ends {
                after: args.common.length.duration(),
                with_process: pid,
            },
            reporting: Reporting::every(args.over_time.interval()),
            sample_readers: None,
            hooks: super::window::hooks(
                matches!(args.by.by, Some(By::Stack | By::Srcu)).then_some(&symbols),
                launch.as_ref(),
            ),
        },
        Some(&mut consume),
        &mut |period| {
            let mut report = timed_calls::period_report(
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
        sink,
    )
    .await?;
    super::window::launched(launch.as_ref())?;
    Ok(report)
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
        assert_eq!(
            timed_calls::default_unit("synchronize_srcu_expedited"),
            Unit::Us
        );
        assert_eq!(timed_calls::default_unit("rcu_barrier"), Unit::Ms);
    }
}
