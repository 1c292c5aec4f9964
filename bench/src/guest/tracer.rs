//! A tracer's process: its command line, its launch and the wait until it has attached (its
//! banner, and where that comes first, the kernel's own lists), its stop with SIGINT, and what
//! it cost; and the check that rcutrace attached as the table says.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use xtask::bpftrace::{BPFTRACE_COUNT, BPFTRACE_SRLAT};

use super::procfs::{
    KPROBE_LIST, cpu_now, enabled_kprobes, peak_rss, ticks_per_sec, tracing_links,
};
use super::{Options, sample};
use crate::floor;
use crate::sample::{Attach, Config, Hook, Job, Mechanism, Metric, Tracer};
use crate::{SAMPLE_READERS, SETTLE};

/// How long a tracer may take to print its banner and attach.
pub(crate) const ATTACH_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a tracer may take to exit after SIGINT (it is asked again every few seconds).
const EXIT_TIMEOUT: Duration = Duration::from_secs(60);

/// A tracer that has attached.
pub(crate) struct Running {
    child: Child,
    pub(crate) pid: libc::pid_t,
    launched: Instant,
    stdout: JoinHandle<String>,
    /// Lines read from stdout so far.
    stdout_lines: Arc<AtomicU64>,
    /// Each line with the time since launch it was read at.
    stderr: JoinHandle<Vec<(Duration, String)>>,
}

/// A tracer that has exited, with what it cost.
pub(crate) struct Finished {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    /// stderr's lines with the time since launch each was read at.
    pub(crate) stderr_lines: Vec<(Duration, String)>,
    /// The tracer's own peak RSS (`VmHWM`), as last read before it exited.
    peak_rss_kib: Option<u64>,
    pub(crate) utime: Duration,
    pub(crate) lifetime: Duration,
    /// From the first SIGINT until reaped.
    exit: Duration,
}

/// The command line of `tracer` doing `job`; `None` for no tracer.
fn tracer_command(opts: &Options, tracer: Tracer, job: Job) -> Result<Option<Command>, String> {
    let (program, args): (&str, Vec<String>) = match tracer {
        Tracer::None => return Ok(None),
        Tracer::Rcutrace(attach) => {
            let mut args: Vec<String> = vec![job.name().into(), "--secs".into(), "0".into()];
            if attach != Attach::Auto {
                args.extend(["--attach".into(), attach.name().into()]);
            }
            (&opts.rcutrace, args)
        }
        Tracer::Bpftrace => {
            let script = match job {
                Job::Count => BPFTRACE_COUNT,
                Job::Srlat => BPFTRACE_SRLAT,
            };
            (&opts.bpftrace, vec!["-e".into(), script.into()])
        }
        Tracer::RcutraceSampled => (
            &opts.rcutrace,
            ["count", "--secs", "0", "--sample-readers", SAMPLE_READERS]
                .map(String::from)
                .to_vec(),
        ),
        Tracer::RcutraceRun | Tracer::RcutraceSrlatCommand => {
            return Err(format!("{} runs its load itself", tracer.name()));
        }
        Tracer::Floor(mechanism) => {
            let script = floor::empty_script(job, mechanism).ok_or_else(|| {
                format!(
                    "{} must never hook {}",
                    tracer.name(),
                    floor::hooked_function(job)
                )
            })?;
            (&opts.bpftrace, vec!["-e".into(), script])
        }
    };
    let mut cmd = Command::new(program);
    cmd.args(args);
    Ok(Some(cmd))
}

/// What shows that a tracer has attached, where its banner does not: bpftrace prints its
/// banner before it attaches (rcutrace after), so wait for its kprobes to be listed as enabled
/// and for a BPF link of each of its trampolines.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Attachments {
    function: &'static str,
    kprobes: usize,
    trampolines: usize,
}

fn attachments_to_wait_for(tracer: Tracer, job: Job) -> Option<Attachments> {
    if !matches!(tracer, Tracer::Bpftrace | Tracer::Floor(_)) {
        return None;
    }
    let hooks = Mechanism::of(tracer, job)?.hooks(job)?;
    let trampolines = hooks.iter().filter(|h| h.is_trampoline()).count();
    Some(Attachments {
        function: floor::hooked_function(job),
        kprobes: hooks.len() - trampolines,
        trampolines,
    })
}

/// rcutrace's log must show it hooked the job's function by the mechanism the table files its
/// figures under.
pub(crate) fn check_rcutrace_hooks<'a>(
    tracer: Tracer,
    job: Job,
    log: impl IntoIterator<Item = &'a str>,
) -> Result<(), String> {
    let function = floor::hooked_function(job);
    let mut expected = Mechanism::of(tracer, job)
        .and_then(|m| m.hooks(job))
        .unwrap_or_default();
    expected.sort();
    let logged = floor::logged_hooks(log, function);
    if logged != expected {
        let names = |hooks: &[Hook]| {
            hooks
                .iter()
                .map(|h| h.name())
                .collect::<Vec<_>>()
                .join(" + ")
        };
        return Err(format!(
            "{} hooked {function} by {}, but the table files it under {}",
            tracer.name(),
            names(&logged),
            names(&expected)
        ));
    }
    Ok(())
}

/// Launches the tracer and waits until it has attached, sampling the time that took.
pub(crate) fn start(opts: &Options, tracer: Tracer, job: Job) -> Result<Option<Running>, String> {
    launch(opts, tracer, job, &[], true)
}

/// Launches the tracer with extra environment and waits until it has attached; with `record`,
/// samples the time that took and the user CPU it used.
pub(crate) fn launch(
    opts: &Options,
    tracer: Tracer,
    job: Job,
    env: &[(&str, &str)],
    record: bool,
) -> Result<Option<Running>, String> {
    let Some(cmd) = tracer_command(opts, tracer, job)? else {
        thread::sleep(SETTLE);
        return Ok(None);
    };
    let config = Config::Running(tracer, job);
    let wait_for = attachments_to_wait_for(tracer, job);
    spawn_attached(cmd, config, wait_for, env, record).map(Some)
}

/// Launches `cmd` and waits until it has attached (its banner, and `wait_for` where the banner
/// does not show it); with `record`, samples under `config` the time that took and the user
/// CPU it used.
pub(crate) fn spawn_attached(
    cmd: Command,
    config: Config,
    wait_for: Option<Attachments>,
    env: &[(&str, &str)],
    record: bool,
) -> Result<Running, String> {
    spawn_until(cmd, config, wait_for, env, record, BANNER)
}

/// How rcutrace and bpftrace begin their output.
const BANNER: &str = "Attaching ";

/// `spawn_attached`, waiting for a line that starts with `ready` instead of the banner.
pub(crate) fn spawn_until(
    mut cmd: Command,
    config: Config,
    wait_for: Option<Attachments>,
    env: &[(&str, &str)],
    record: bool,
    ready: &'static str,
) -> Result<Running, String> {
    thread::sleep(SETTLE);
    let baseline = wait_for.map_or(0, |w| enabled_kprobes(w.function));
    cmd.envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let launched = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not start {}: {e}", config.name()))?;
    let pid = child.id() as libc::pid_t;

    let (banner_tx, banner_rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("piped");
    let stdout_lines = Arc::new(AtomicU64::new(0));
    let lines_read = Arc::clone(&stdout_lines);
    let stdout = thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            lines_read.fetch_add(1, Ordering::Relaxed);
            if line.starts_with(ready) {
                let _ = banner_tx.send(Instant::now());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let stderr = child.stderr.take().expect("piped");
    let stderr = thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .map(|line| (launched.elapsed(), line))
            .collect()
    });
    let running = Running {
        child,
        pid,
        launched,
        stdout,
        stdout_lines,
        stderr,
    };

    let banner = match banner_rx.recv_timeout(ATTACH_TIMEOUT) {
        Ok(at) => at,
        Err(_) => {
            let done = running.stop()?;
            return Err(format!(
                "{} printed no banner:\n{}{}",
                config.name(),
                done.stdout,
                done.stderr
            ));
        }
    };
    if let Some(w) = wait_for {
        while enabled_kprobes(w.function) < baseline + w.kprobes
            || tracing_links(pid) < w.trampolines
        {
            if launched.elapsed() > ATTACH_TIMEOUT {
                let done = running.stop()?;
                return Err(format!(
                    "{}: not attached to {} after {:?} ({} kprobes enabled in {KPROBE_LIST}, \
                     {} trampoline links expected):\n{}{}",
                    config.name(),
                    w.function,
                    ATTACH_TIMEOUT,
                    w.kprobes,
                    w.trampolines,
                    done.stdout,
                    done.stderr
                ));
            }
            thread::sleep(Duration::from_millis(1));
        }
    }
    let attached = Instant::now();
    if !record {
        return Ok(running);
    }
    if let Some(cpu) = cpu_now(pid) {
        sample(
            Metric::StartupUtimeMs,
            config,
            cpu.utime_ticks as f64 * 1e3 / ticks_per_sec(),
        );
    }
    sample(
        Metric::BannerMs,
        config,
        (banner - launched).as_secs_f64() * 1e3,
    );
    sample(
        Metric::StartupMs,
        config,
        (attached.max(banner) - launched).as_secs_f64() * 1e3,
    );
    Ok(running)
}

impl Running {
    /// SIGINT (as Ctrl-C would), then reaps the tracer with its resource usage.
    pub(crate) fn stop(self) -> Result<Finished, String> {
        let started = Instant::now();
        // When the last signal was sent, and the lines read from stdout by then.
        let mut last_signal: Option<(Instant, u64)> = None;
        let mut status = 0;
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // Not wait4's ru_maxrss: the kernel records the old memory's high-water mark at exec,
        // and a child spawned by vfork execs from its parent's, so that figure is at least
        // this driver's own peak. The tracer's high-water mark only grows; the last read
        // before it exits misses at most its last few milliseconds.
        let mut peak_rss_kib = None;
        loop {
            if let Some(kib) = peak_rss(self.pid) {
                peak_rss_kib = Some(kib);
            }
            // bpftrace 0.17 misses a SIGINT that lands while it is still setting up: ask again,
            // unless it has printed anything since (it is exiting: a second SIGINT while it
            // detaches, which takes seconds for a kfunc under emulation, kills it).
            let lines = self.stdout_lines.load(Ordering::Relaxed);
            let signal = match last_signal {
                None => Some(libc::SIGINT),
                Some(_) if started.elapsed() > EXIT_TIMEOUT => Some(libc::SIGKILL),
                Some((at, lines_then))
                    if at.elapsed() > Duration::from_secs(5) && lines == lines_then =>
                {
                    Some(libc::SIGINT)
                }
                Some(_) => None,
            };
            if let Some(signal) = signal {
                unsafe { libc::kill(self.pid, signal) };
                last_signal = Some((Instant::now(), lines));
            }
            let reaped = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut usage) };
            if reaped == self.pid {
                break;
            }
            if reaped < 0 {
                return Err(format!(
                    "wait4({}): {}",
                    self.pid,
                    std::io::Error::last_os_error()
                ));
            }
            thread::sleep(Duration::from_millis(5));
        }
        let lifetime = self.launched.elapsed();
        let exit = started.elapsed();
        // Reaped by wait4, so the Child must not be waited for again.
        drop(self.child);
        let stdout = self.stdout.join().unwrap_or_default();
        let stderr_lines = self.stderr.join().unwrap_or_default();
        let stderr: String = stderr_lines
            .iter()
            .map(|(_, line)| format!("{line}\n"))
            .collect();
        let exited_cleanly = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        if !exited_cleanly {
            return Err(format!(
                "tracer pid {} ended badly (wait status {status:#x}):\n{stdout}{stderr}",
                self.pid
            ));
        }
        let time = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        Ok(Finished {
            stdout,
            stderr,
            stderr_lines,
            peak_rss_kib,
            utime: time(usage.ru_utime),
            lifetime,
            exit,
        })
    }
}

impl Finished {
    pub(crate) fn record_rss(&self, config: Config) {
        if let Some(kib) = self.peak_rss_kib {
            sample(Metric::RssKib, config, kib as f64);
        }
    }

    pub(crate) fn record_exit(&self, config: Config) {
        sample(Metric::ExitMs, config, self.exit.as_secs_f64() * 1e3);
    }
}
