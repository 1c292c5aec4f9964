//! `rcutrace run -- CMD`: runs one command with the waiting updaters timed in its threads and
//! in the work items they queue (the programs follow its process tree from the scheduler's
//! fork tracepoint, and its work from the workqueue tracepoints), and its threads' time off
//! the CPU measured from the context switches; then says where its time went. The timing is
//! `srlat`'s pipeline, keyed by kernel stack.

use std::{cell::RefCell, process::ExitCode, time::Duration};

use anyhow::{Result, bail};
use rcutrace_common::{
    followed::*,
    latency::{MAX_TIMED, RECORD_SAMPLE, Sample, read_record, record_kind},
};

use super::timed_calls::{self, Checking, Timing};
use crate::{
    cli::{ByArgs, RunArgs},
    commands::publish::Sink,
    kernel::{self, cgroups::CgroupPaths, symbols::keeper::SymbolKeeper},
    model::{
        Report, Summary,
        aggregate::{Aggregate, Layout},
        attribution::By,
        run::{self, RunFigures, RunSummary, Wait},
    },
    trace::{
        engine::{Ends, Need, Period, Reporting, Request},
        launch::{self, Following, Launch, Outcome},
        probes::{self, FOLLOWED_TREE, FOLLOWED_WORK, Probe, SRCU_DOMAIN_INIT},
    },
};

/// The command's status as rcutrace's: a shell's, 128 + the signal that ended it.
pub fn exit_code(figures: &RunFigures) -> ExitCode {
    match (figures.exit_status, figures.signal) {
        (Some(status), _) => ExitCode::from(status as u8),
        (None, Some(signal)) => ExitCode::from(128u8.wrapping_add(signal as u8)),
        (None, None) => ExitCode::FAILURE,
    }
}

pub async fn run(args: &RunArgs, sink: Sink) -> Result<Report> {
    let launch = Launch::new(
        &args.command,
        args.user.as_ref(),
        Some(Duration::from_secs(args.linger)),
    )?;
    let functions = functions(&args.func)?;
    let timings: Vec<Timing> = functions
        .iter()
        .zip(0..)
        .map(|(&function, index)| Timing {
            timed: probes::timed_call(index, function),
            map_name: format!("@{function}"),
            unit: timed_calls::default_unit(function),
        })
        .collect();
    let mut probes: Vec<Probe> = timings.iter().flat_map(|t| t.timed.probes()).collect();
    probes.extend(FOLLOWED_TREE.iter().chain(FOLLOWED_WORK).copied());
    // Its SRCU waits are shown by domain: a dynamic one is named by who initialised it.
    probes.insert(0, SRCU_DOMAIN_INIT);
    let mut constants = launch::following_constants(Following::TreeAndWork)?;
    // Whose calls count is decided by the following, not by a process id.
    constants.extend(timed_calls::constants(&timings, 0, true));
    let by = ByArgs {
        by: Some(By::Stack),
        top: args.top,
    };
    let units = timings.iter().map(|t| t.unit.nanos()).collect();
    let aggregate = RefCell::new(Aggregate::new(Layout::Log2, units));
    let waits: RefCell<Vec<Wait>> = RefCell::new(Vec::new());
    let mut consume = |record: &[u8]| {
        let Some(mut sample) =
            read_record::<Sample>(record).filter(|_| record_kind(record) == Some(RECORD_SAMPLE))
        else {
            aggregate.borrow_mut().add(record);
            return;
        };
        waits.borrow_mut().push(Wait {
            timed: sample.key.event,
            tid: sample.tid,
            origin: sample.key.origin,
            domain: sample.key.domain,
            start_ns: sample.start_ns,
            nanos: sample.nanos,
        });
        // The histograms are by stack alone: whose and which domain are in the account.
        sample.key.origin = 0;
        sample.key.domain = 0;
        aggregate.borrow_mut().add_sample(&sample);
    };
    let symbols = SymbolKeeper::new();
    let mut cgroups = CgroupPaths::new();
    let words: Vec<String> = args
        .command
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let report = super::window::trace(
        Request {
            probes: &probes,
            constants,
            choice: args.attach,
            by: by.by,
            need: Need::All,
            ends: Ends::default(),
            reporting: Reporting::AtEnd,
            sample_readers: None,
            hooks: super::window::hooks(Some(&symbols), Some(&launch)),
        },
        Some(&mut consume),
        &mut |period| {
            let checking = Checking {
                whole_window: true,
                format: sink.format(),
            };
            let report = timed_calls::period_report(
                period,
                &timings,
                &by,
                &mut aggregate.borrow_mut(),
                &symbols,
                checking,
                &mut cgroups,
            )?;
            let Summary::Latency(latency) = report.summary else {
                bail!("the waits' report is not a latency report");
            };
            // The functions the command never called (nothing seen, nothing lost) print
            // nothing: its account lists what it waited on.
            let (latency, silent): (Vec<_>, Vec<_>) =
                latency.into_iter().partition(|s| !said_nothing(s));
            let mut maps = report.maps;
            maps.retain(|m| !silent.iter().any(|s| s.map_name == m.name()));
            let mut domain = super::naming::domain_names(period.tracer, &symbols);
            let figures = figures(
                period,
                launch.outcome()?,
                &waits.borrow(),
                &functions,
                &mut domain,
                run::command_line(&words),
            )?;
            Ok(Report {
                maps,
                summary: Summary::Run(Box::new(RunSummary { latency, figures })),
                ..report
            })
        },
        sink,
    )
    .await?;
    if let Some(error) = launch.take_failure() {
        return Err(error);
    }
    Ok(report)
}

/// A function with no call seen and none lost.
fn said_nothing(summary: &crate::model::LatencySummary) -> bool {
    let stacks_lost = summary.losses.stacks_lost.unwrap_or(0);
    let others = crate::model::Losses {
        stacks_lost: None,
        ..summary.losses
    };
    summary.series.iter().all(|s| s.count == 0)
        && stacks_lost == 0
        && others == Default::default()
        && summary.cross_checks.iter().all(|c| c.agrees())
}

/// The waiting updaters to time: the default set where this kernel has them, and `--func`'s
/// (said where absent, as `srlat` says it).
fn functions(extra: &[&'static str]) -> Result<Vec<&'static str>> {
    let mut wanted: Vec<&'static str> = RUN_WAITS.to_vec();
    for function in extra {
        if !wanted.contains(function) {
            wanted.push(function);
        }
    }
    let present = kernel::functions_present(&wanted)?;
    let absent: Vec<&str> = extra
        .iter()
        .copied()
        .filter(|f| !present.contains(*f))
        .collect();
    timed_calls::say_not_timed(&absent);
    let here: Vec<&'static str> = wanted
        .into_iter()
        .filter(|f| present.contains(*f))
        .collect();
    if here.len() > MAX_TIMED as usize {
        crate::cli::usage_error(&format!(
            "run times at most {MAX_TIMED} functions, and this kernel has {} of those asked \
             for: {} (give fewer --func)",
            here.len(),
            here.join(", ")
        ))
        .exit();
    }
    if here.is_empty() {
        bail!(
            "none of the waiting updaters is on this kernel: {}",
            RUN_WAITS.join(", ")
        );
    }
    Ok(here)
}

/// The run's account of its command.
fn figures(
    period: &Period<'_>,
    outcome: Outcome,
    waits: &[Wait],
    functions: &[&str],
    domain: &mut dyn FnMut(u64) -> String,
    command: String,
) -> Result<RunFigures> {
    let counts = period.counters.array("FOLLOW_COUNTS");
    let count = |slot: u32| counts.get(slot as usize).copied().unwrap_or(0);
    let threads = count(FOLLOW_THREADS);
    let rows = run::wait_rows(waits, functions, domain);
    Ok(RunFigures {
        command,
        exit_status: outcome.exit_status(),
        signal: outcome.signal(),
        wall_ns: outcome.wall.as_nanos() as u64,
        cpu_ns: outcome.cpu.map(|cpu| cpu.as_nanos() as u64),
        off_cpu_asleep_ns: count(FOLLOW_OFF_CPU_ASLEEP_NS),
        off_cpu_runnable_ns: count(FOLLOW_OFF_CPU_RUNNABLE_NS),
        in_waits_asleep_ns: count(FOLLOW_IN_WAITS_ASLEEP_NS),
        in_waits_runnable_ns: count(FOLLOW_IN_WAITS_RUNNABLE_NS),
        threads,
        threads_lost: count(FOLLOW_LOST_THREADS),
        // Every thread's first run follows no switch out of it.
        off_cpu_unseen: count(FOLLOW_LOST_SWITCHES).saturating_sub(threads),
        rcu_wait_ns: run::time_waiting(waits, ORIGIN_COMMAND),
        caused_rcu_wait_ns: run::time_waiting(waits, ORIGIN_CAUSED_WORK),
        expedited_mean_ns: run::expedited_mean(&rows),
        waits: rows,
        work_queued: count(FOLLOW_WORK_QUEUED),
        work_done: count(FOLLOW_WORK_DONE),
        work_lost: count(FOLLOW_LOST_WORK),
        work_unfinished: period.tracer.caused_work_unfinished()?,
        linger_expired: outcome.linger_expired,
        normal_wake_from_gp: normal_wake_from_gp(),
    })
}

/// `rcutree.rcu_normal_wake_from_gp`, where the kernel has it.
fn normal_wake_from_gp() -> Option<bool> {
    let text =
        std::fs::read_to_string("/sys/module/rcutree/parameters/rcu_normal_wake_from_gp").ok()?;
    let value: i64 = text.trim().parse().ok()?;
    Some(value > 0)
}
