//! A command run inside the tracing window (`run -- CMD`, and `-c CMD` of the tracing
//! commands, as bpftrace's): started once every probe is attached, by a thread of rcutrace's
//! marked for that moment as the command's launcher, so that the programs that follow the
//! command's process tree take it from its first instruction and never take rcutrace itself;
//! its exit is taken the moment it comes, by a thread that waits for it.

use std::{
    cell::RefCell,
    ffi::{CString, OsString},
    os::unix::{ffi::OsStrExt as _, process::CommandExt as _},
    path::{Path, PathBuf},
    process::Command,
    sync::mpsc::Receiver,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use rcutrace_common::followed::{MAX_CAUSED_WORK, MAX_FOLLOWED_THREADS};

use super::{
    tracer::{Constant, Tracer},
    watch::{Watch, WatchNext},
};
use crate::kernel::tracefs;

/// How often the command is looked at: its exit, then the end of its work.
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

/// A command to run in the window, and what became of it.
pub struct Launch {
    program: PathBuf,
    args: Vec<OsString>,
    run_as: Option<RunAs>,
    /// After the command exits, wait this long at most for the work it caused to end
    /// (`run`); `None`: the window ends with the command.
    linger: Option<Duration>,
    state: RefCell<State>,
}

/// What became of the command, for its report.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    /// How it ended (`wait4`'s status), where it did.
    pub status: Option<libc::c_int>,
    /// From its start to its exit, or to now where it runs still.
    pub wall: Duration,
    /// Its CPU time, with its reaped children's, where it exited.
    pub cpu: Option<Duration>,
    /// Following its work ended at `linger` with work unfinished.
    pub linger_expired: bool,
}

impl Outcome {
    /// Its exit status, where it exited.
    pub fn exit_status(&self) -> Option<i32> {
        self.status
            .filter(|&s| libc::WIFEXITED(s))
            .map(|s| libc::WEXITSTATUS(s))
    }

    /// The signal that ended it, where one did.
    pub fn signal(&self) -> Option<i32> {
        self.status
            .filter(|&s| libc::WIFSIGNALED(s))
            .map(|s| libc::WTERMSIG(s))
    }
}

impl Launch {
    /// `words` (the program first), found as a shell finds it, to run as `user` (`--user`) or
    /// as the user who ran sudo; an error that says why where it cannot be started.
    pub fn new(
        words: &[OsString],
        user: Option<&RunAs>,
        linger: Option<Duration>,
    ) -> Result<Launch> {
        let (first, args) = words.split_first().context("no command to run")?;
        Ok(Launch {
            program: find_program(first)?,
            args: args.to_vec(),
            run_as: run_as(user),
            linger,
            state: RefCell::new(State::NotStarted),
        })
    }

    /// A command line split at spaces, as bpftrace's `-c` splits it.
    pub fn from_line(line: &str, linger: Option<Duration>) -> Result<Launch> {
        let words: Vec<OsString> = line.split_whitespace().map(OsString::from).collect();
        if words.is_empty() {
            anyhow::bail!("-c: the command is empty");
        }
        Launch::new(&words, None, linger)
    }

    /// The window's watch: start the command at the first look, then wait for its exit, then
    /// (with `linger`) for the end of the work it caused.
    pub fn look(&self, tracer: &mut Tracer) -> Result<WatchNext> {
        let mut state = self.state.borrow_mut();
        self.step(&mut state, tracer)
    }

    /// `look` as the window's watch, every `LOOK_EVERY`; the events are read on their own
    /// schedule meanwhile.
    pub fn watch(&self) -> Watch<'_> {
        Watch {
            every: LOOK_EVERY,
            check: Box::new(|tracer| self.look(tracer)),
            now: None,
            reads_events: false,
        }
    }

    /// What became of it; the error that ended the window, if one did.
    pub fn outcome(&self) -> Result<Outcome> {
        match &*self.state.borrow() {
            State::NotStarted => Ok(Outcome::default()),
            State::Running { started, .. } => Ok(Outcome {
                wall: started.elapsed(),
                ..Outcome::default()
            }),
            State::Exited(e) => Ok(Outcome {
                status: Some(e.status),
                wall: e.wall,
                cpu: Some(e.cpu),
                linger_expired: e.linger_expired,
            }),
            State::Failed(error) => Err(anyhow::anyhow!("{error:#}")),
        }
    }

    /// The error that ended the window, taken (its causes and type kept).
    pub fn take_failure(&self) -> Option<anyhow::Error> {
        let mut state = self.state.borrow_mut();
        match std::mem::replace(&mut *state, State::NotStarted) {
            State::Failed(error) => Some(error),
            other => {
                *state = other;
                None
            }
        }
    }

    fn step(&self, state: &mut State, tracer: &mut Tracer) -> Result<WatchNext> {
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
                            linger_until: exit.at + self.linger.unwrap_or_default(),
                            linger_expired: false,
                        });
                        self.step(state, tracer)
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
                if self.linger.is_none() || tracer.caused_work_unfinished()? == 0 {
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
}

/// `--user`, else the user who ran sudo (as sudo's `SUDO_UID` says), else rcutrace's own.
fn run_as(user: Option<&RunAs>) -> Option<RunAs> {
    if let Some(user) = user {
        return Some(user.clone());
    }
    let sudo_uid = std::env::var("SUDO_UID").ok();
    let uid = sudo_uid.filter(|_| unsafe { libc::geteuid() } == 0)?;
    RunAs::named(&uid)
}

impl RunAs {
    /// A user's ids and groups from the password and group databases, by name or uid.
    /// A uid the database lacks is taken as it is, with the group of the same number (as
    /// `sudo -u '#UID'` takes it).
    pub fn named(user: &str) -> Option<RunAs> {
        let number = user.parse::<libc::uid_t>().ok();
        let passwd = match number {
            Some(uid) => unsafe { libc::getpwuid(uid) },
            None => {
                let name = CString::new(user).ok()?;
                unsafe { libc::getpwnam(name.as_ptr()) }
            }
        };
        if passwd.is_null() {
            return number.map(|id| RunAs {
                uid: id,
                gid: id,
                groups: vec![id],
            });
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
}

/// What the programs follow of a launched command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Following {
    /// Its process tree (`-c`: the calls timed are its own).
    Tree,
    /// Its tree, the work it queues, and its time off the CPU (`run`).
    TreeAndWork,
}

/// The followers' constants: each tracepoint field's offset on this kernel, and the maps'
/// sizes.
pub fn following_constants(following: Following) -> Result<Vec<Constant>> {
    let [parent, child] =
        tracefs::field_offsets("sched", "sched_process_fork", ["parent_pid", "child_pid"])?;
    let [freed] = tracefs::field_offsets("sched", "sched_process_free", ["pid"])?;
    let mut constants = vec![
        Constant::U32("FOLLOWING", 1),
        Constant::U32("FORK_PARENT_PID", parent),
        Constant::U32("FORK_CHILD_PID", child),
        Constant::U32("FREE_PID", freed),
        Constant::MaxEntries("TREE", MAX_FOLLOWED_THREADS),
    ];
    if following == Following::Tree {
        return Ok(constants);
    }
    let [prev, state, next] = tracefs::field_offsets(
        "sched",
        "sched_switch",
        ["prev_pid", "prev_state", "next_pid"],
    )?;
    let [queued] = tracefs::field_offsets("workqueue", "workqueue_queue_work", ["work"])?;
    let [started] = tracefs::field_offsets("workqueue", "workqueue_execute_start", ["work"])?;
    let [ended] = tracefs::field_offsets("workqueue", "workqueue_execute_end", ["work"])?;
    constants.extend([
        Constant::U32("SWITCH_PREV_PID", prev),
        Constant::U32("SWITCH_PREV_STATE", state),
        Constant::U32("SWITCH_NEXT_PID", next),
        Constant::U32("QUEUE_WORK_WORK", queued),
        Constant::U32("EXECUTE_START_WORK", started),
        Constant::U32("EXECUTE_END_WORK", ended),
        Constant::MaxEntries("OFF_CPU", MAX_FOLLOWED_THREADS),
        Constant::MaxEntries("CAUSED", MAX_CAUSED_WORK),
        Constant::MaxEntries("WORKING", MAX_CAUSED_WORK),
    ]);
    Ok(constants)
}
