//! `rcutrace run -- CMD`: runs one command with the waiting updaters timed in its threads and
//! in the work items they queue (the programs follow its process tree from the scheduler's
//! fork tracepoint, and its work from the workqueue tracepoints), and its threads' time off
//! the CPU measured from the context switches; then says where its time went. The timing is
//! `srlat`'s pipeline, keyed by kernel stack.

use std::{
    cell::RefCell,
    ffi::{CString, OsString},
    os::unix::{ffi::OsStrExt as _, process::CommandExt as _},
    path::{Path, PathBuf},
    process::{Command, ExitCode},
    sync::mpsc::Receiver,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use rcutrace_common::{
    followed::*,
    latency::{MAX_TIMED, RECORD_SAMPLE, Sample, read_record, record_kind},
};

use super::latency::{self, Checking, Timing};
use crate::{
    cli::{ByArgs, RunArgs},
    kernel::{self, cgroups::CgroupPaths, symbols::keeper::SymbolKeeper, tracefs},
    model::{
        Report, Summary,
        aggregate::{Aggregate, Layout},
        attribution::By,
        run::{self, RunFigures, RunSummary, Wait},
    },
    render::Format,
    trace::{
        engine::{Need, Period, Request, Watch, WatchNext},
        probes::{self, FOLLOWED, Probe, RUN_WAITS},
        tracer::{Constant, Tracer},
    },
};

/// How often the command is looked at: its exit, then its work's end.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// The command could not be started: said as a shell says it, with a shell's status.
#[derive(Debug)]
pub struct NotStarted {
    pub message: String,
    pub status: u8,
}

impl std::fmt::Display for NotStarted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NotStarted {}

/// The command's status as rcutrace's: a shell's, 128 + the signal that ended it.
pub fn exit_code(figures: &RunFigures) -> ExitCode {
    match (figures.exit_status, figures.signal) {
        (Some(status), _) => ExitCode::from(status as u8),
        (None, Some(signal)) => ExitCode::from(128u8.wrapping_add(signal as u8)),
        (None, None) => ExitCode::FAILURE,
    }
}

pub async fn run(args: &RunArgs, format: Format) -> Result<Report> {
    let program = find_program(&args.command[0])?;
    let run_as = run_as(args.user.as_deref())?;
    let functions = functions(&args.func)?;
    let timings: Vec<Timing> = functions
        .iter()
        .zip(0..)
        .map(|(&function, index)| Timing {
            timed: probes::timed_call(index, function),
            map_name: format!("@{function}"),
            unit: latency::default_unit(function),
        })
        .collect();
    let mut probes: Vec<Probe> = timings.iter().flat_map(|t| t.timed.probes()).collect();
    probes.extend(FOLLOWED.iter().copied());
    let mut constants = followed_constants()?;
    constants.push(Constant::U32(
        "SAME_FUNCTION_MASK",
        (1 << timings.len()) - 1,
    ));
    let by = ByArgs {
        by: Some(By::Stack),
        top: args.top,
    };
    let units = timings.iter().map(|t| t.unit.nanos()).collect();
    let aggregate = RefCell::new(Aggregate::new(Layout::Log2, units));
    let waits: RefCell<Vec<Wait>> = RefCell::new(Vec::new());
    let mut consume = |record: &[u8]| {
        if record_kind(record) == Some(RECORD_SAMPLE)
            && let Some(sample) = read_record::<Sample>(record)
        {
            waits.borrow_mut().push(Wait {
                timed: sample.key.event,
                tid: sample.tid,
                origin: sample.key.origin,
                start_ns: sample.start_ns,
                nanos: sample.nanos,
            });
        }
        aggregate.borrow_mut().add(record);
    };
    let command = Launch {
        program,
        args: args.command[1..].to_vec(),
        run_as,
        linger: Duration::from_secs(args.linger),
    };
    let state = RefCell::new(State::NotStarted);
    let mut check = |tracer: &mut Tracer| command.look(&mut state.borrow_mut(), tracer);
    let symbols = SymbolKeeper::new();
    let mut cgroups = CgroupPaths::new();
    let words: Vec<String> = args
        .command
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let report = super::trace(
        Request {
            probes: &probes,
            constants,
            choice: args.attach,
            by: by.by,
            need: Need::All,
            duration: None,
            interval: None,
            listener: None,
            traced_process: None,
            sample_readers: None,
            watch: Some(Watch {
                every: LOOK_EVERY,
                check: &mut check,
                now: None,
            }),
            at_close: None,
            symbols: Some(&symbols),
            format,
        },
        Some(&mut consume),
        &mut |period| {
            let checking = Checking {
                whole_window: true,
                format,
            };
            let report = latency::report(
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
            let figures = figures(
                period,
                &state.borrow(),
                &waits.borrow(),
                &functions,
                run::command_line(&words),
            )?;
            Ok(Report {
                maps,
                summary: Summary::Run(Box::new(RunSummary { latency, figures })),
                ..report
            })
        },
    )
    .await?;
    if let State::Failed(error) = state.into_inner() {
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
    if !absent.is_empty() {
        eprintln!(
            "rcutrace: not on this kernel (absent or inlined), not timed: {}",
            absent.join(", ")
        );
    }
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

/// The followers' constants: each tracepoint field's offset on this kernel, and the maps'
/// sizes.
fn followed_constants() -> Result<Vec<Constant>> {
    let [parent, child] =
        tracefs::field_offsets("sched", "sched_process_fork", ["parent_pid", "child_pid"])?;
    let [freed] = tracefs::field_offsets("sched", "sched_process_free", ["pid"])?;
    let [prev, state, next] = tracefs::field_offsets(
        "sched",
        "sched_switch",
        ["prev_pid", "prev_state", "next_pid"],
    )?;
    let [queued] = tracefs::field_offsets("workqueue", "workqueue_queue_work", ["work"])?;
    let [started] = tracefs::field_offsets("workqueue", "workqueue_execute_start", ["work"])?;
    let [ended] = tracefs::field_offsets("workqueue", "workqueue_execute_end", ["work"])?;
    Ok(vec![
        Constant::U32("FOLLOWING", 1),
        Constant::U32("FORK_PARENT_PID", parent),
        Constant::U32("FORK_CHILD_PID", child),
        Constant::U32("FREE_PID", freed),
        Constant::U32("SWITCH_PREV_PID", prev),
        Constant::U32("SWITCH_PREV_STATE", state),
        Constant::U32("SWITCH_NEXT_PID", next),
        Constant::U32("QUEUE_WORK_WORK", queued),
        Constant::U32("EXECUTE_START_WORK", started),
        Constant::U32("EXECUTE_END_WORK", ended),
        Constant::MaxEntries("TREE", MAX_FOLLOWED_THREADS),
        Constant::MaxEntries("OFF_CPU", MAX_FOLLOWED_THREADS),
        Constant::MaxEntries("CAUSED", MAX_CAUSED_WORK),
        Constant::MaxEntries("WORKING", MAX_CAUSED_WORK),
    ])
}

/// Where the command is in its life, as the watch saw it last.
enum State {
    NotStarted,
    Running {
        started: Instant,
        exit: Receiver<Result<Exit>>,
    },
    Exited(Exited),
    /// It could not be started, or waiting for it failed: the run ends with this error.
    Failed(anyhow::Error),
}

/// How the command ended, as its waiter saw it at once.
struct Exit {
    at: Instant,
    status: libc::c_int,
    cpu: Duration,
}

struct Exited {
    wall: Duration,
    status: libc::c_int,
    cpu: Duration,
    /// When following its work ends at the latest.
    linger_until: Instant,
    linger_expired: bool,
}

/// What to start, and as whom.
struct Launch {
    program: PathBuf,
    args: Vec<OsString>,
    run_as: Option<RunAs>,
    linger: Duration,
}

impl Launch {
    /// One look: start the command at the first, then wait for its exit, then for the end of
    /// the work it caused (or `--linger`).
    fn look(&self, state: &mut State, tracer: &mut Tracer) -> Result<WatchNext> {
        match state {
            State::NotStarted => {
                *state = match self.start(tracer) {
                    Ok((started, exit)) => State::Running { started, exit },
                    Err(error) => State::Failed(error),
                };
                Ok(match state {
                    State::Failed(_) => WatchNext::EndWindow,
                    _ => WatchNext::Continue,
                })
            }
            State::Running { started, exit } => {
                let started = *started;
                match exit.try_recv() {
                    Err(std::sync::mpsc::TryRecvError::Empty) => Ok(WatchNext::Continue),
                    Ok(Ok(exit)) => {
                        *state = State::Exited(Exited {
                            wall: exit.at.saturating_duration_since(started),
                            status: exit.status,
                            cpu: exit.cpu,
                            linger_until: exit.at + self.linger,
                            linger_expired: false,
                        });
                        self.look(state, tracer)
                    }
                    Ok(Err(error)) => {
                        *state = State::Failed(error);
                        Ok(WatchNext::EndWindow)
                    }
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                        *state = State::Failed(anyhow::anyhow!("the command's waiter ended"));
                        Ok(WatchNext::EndWindow)
                    }
                }
            }
            State::Exited(exited) => {
                if tracer.caused_work_unfinished()? == 0 {
                    return Ok(WatchNext::EndWindow);
                }
                if Instant::now() >= exited.linger_until {
                    exited.linger_expired = true;
                    return Ok(WatchNext::EndWindow);
                }
                Ok(WatchNext::Continue)
            }
            State::Failed(_) => Ok(WatchNext::EndWindow),
        }
    }

    /// Starts the command with this thread marked as its launcher: the programs follow what
    /// this thread forks while the mark is there (only the command), and nothing it does.
    /// A thread of rcutrace's waits for its exit, so that its end is taken when it comes.
    fn start(&self, tracer: &mut Tracer) -> Result<(Instant, Receiver<Result<Exit>>)> {
        let launcher = unsafe { libc::gettid() } as u32;
        tracer.follow_launcher(launcher, true)?;
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        if let Some(run_as) = &self.run_as {
            let (uid, gid, groups) = (run_as.uid, run_as.gid, run_as.groups.clone());
            // Between fork and exec: only async-signal-safe calls, on memory made before.
            unsafe {
                command.pre_exec(move || {
                    if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                        || libc::setgid(gid) != 0
                        || libc::setuid(uid) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let started = Instant::now();
        let spawned = command.spawn();
        tracer.follow_launcher(launcher, false)?;
        let pid = spawned
            .with_context(|| format!("starting {}", self.program.display()))?
            .id();
        let (send, exit) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("command waiter".into())
            .spawn(move || {
                let _ = send.send(wait_for(pid));
            })
            .context("starting the thread that waits for the command")?;
        Ok((started, exit))
    }
}

/// Waits for the command's exit: when, its status, and its CPU time (with its reaped
/// descendants').
fn wait_for(pid: u32) -> Result<Exit> {
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        if unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) } >= 0 {
            break;
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error).with_context(|| format!("waiting for the command (pid {pid})"));
        }
    }
    let at = Instant::now();
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Ok(Exit {
        at,
        status,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
    })
}

/// The run's account of its command.
fn figures(
    period: &Period<'_>,
    state: &State,
    waits: &[Wait],
    functions: &[&str],
    command: String,
) -> Result<RunFigures> {
    let counts = period.counters.array("FOLLOW_COUNTS");
    let count = |slot: u32| counts.get(slot as usize).copied().unwrap_or(0);
    let (exit_status, signal, wall_ns, cpu_ns, linger_expired) = match state {
        State::Exited(e) => {
            let (status, signal) = if libc::WIFEXITED(e.status) {
                (Some(libc::WEXITSTATUS(e.status)), None)
            } else {
                (None, Some(libc::WTERMSIG(e.status)))
            };
            (
                status,
                signal,
                e.wall.as_nanos() as u64,
                Some(e.cpu.as_nanos() as u64),
                e.linger_expired,
            )
        }
        State::Running { started, .. } => {
            (None, None, started.elapsed().as_nanos() as u64, None, false)
        }
        State::NotStarted | State::Failed(_) => (None, None, 0, None, false),
    };
    let threads = count(FOLLOW_THREADS);
    let rows = run::wait_rows(waits, functions);
    Ok(RunFigures {
        command,
        exit_status,
        signal,
        wall_ns,
        cpu_ns,
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
        linger_expired,
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

/// The program to run, found as a shell finds it; a shell's message and status where it
/// cannot be (127 not found, 126 not executable), before anything is attached.
fn find_program(name: &OsString) -> Result<PathBuf> {
    let not_started = |message: String, status| NotStarted { message, status };
    let executable = |path: &Path| {
        CString::new(path.as_os_str().as_bytes())
            .is_ok_and(|c| unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0)
            && path.is_file()
    };
    let shown = name.to_string_lossy();
    if name.as_bytes().contains(&b'/') {
        let path = PathBuf::from(name);
        if !path.exists() {
            return Err(not_started(format!("{shown}: No such file or directory"), 127).into());
        }
        if !executable(&path) {
            return Err(not_started(format!("{shown}: Permission denied"), 126).into());
        }
        return Ok(path);
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&search)
        .map(|dir| dir.join(name))
        .find(|candidate| executable(candidate))
        .ok_or_else(|| not_started(format!("{shown}: command not found"), 127).into())
}

/// Whom the command runs as, where not as rcutrace itself.
struct RunAs {
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
}

/// `--user`, else the user who ran sudo (as sudo's `SUDO_UID` says), else rcutrace's own.
fn run_as(user: Option<&str>) -> Result<Option<RunAs>> {
    let entry = match user {
        Some(user) => match password_entry(user) {
            Some(entry) => entry,
            None => crate::cli::usage_error(&format!(
                "--user {user}: no such user (give a name or a uid from the password database)"
            ))
            .exit(),
        },
        None => {
            let sudo_uid = std::env::var("SUDO_UID").ok();
            match sudo_uid.filter(|_| unsafe { libc::geteuid() } == 0) {
                Some(uid) => match password_entry(&uid) {
                    Some(entry) => entry,
                    None => return Ok(None),
                },
                None => return Ok(None),
            }
        }
    };
    Ok(Some(entry))
}

/// A user's ids and groups from the password and group databases, by name or uid.
fn password_entry(user: &str) -> Option<RunAs> {
    let passwd = match user.parse::<libc::uid_t>() {
        Ok(uid) => unsafe { libc::getpwuid(uid) },
        Err(_) => {
            let name = CString::new(user).ok()?;
            unsafe { libc::getpwnam(name.as_ptr()) }
        }
    };
    if passwd.is_null() {
        return None;
    }
    let (uid, gid, name) = unsafe { ((*passwd).pw_uid, (*passwd).pw_gid, (*passwd).pw_name) };
    let mut groups = vec![0 as libc::gid_t; 256];
    let mut count = groups.len() as libc::c_int;
    let found = unsafe { libc::getgrouplist(name, gid, groups.as_mut_ptr(), &mut count) };
    groups.truncate(if found < 0 { 0 } else { count as usize });
    if groups.is_empty() {
        groups.push(gid);
    }
    Some(RunAs { uid, gid, groups })
}
