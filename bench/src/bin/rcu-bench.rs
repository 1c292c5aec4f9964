//! Guest-side driver for `cargo xtask bench`: times RCU-heavy system calls with no tracer, under
//! rcutrace and under bpftrace, in one boot, and prints raw samples for the host to summarise.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio, exit};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use std::sync::Mutex;

use rcu_bench::floor;
use rcu_bench::footprint::{self, Family, Footprinted};
use rcu_bench::marks;
use rcu_bench::sample::{
    Attach, Config, Hook, Job, Load, Mechanism, Metric, Sample, Tracer, Watcher,
};
use rcu_bench::stats::median;
use rcu_bench::{
    MEMBARRIER_WARMUP, NAMESPACE_TRACERS, NAMESPACES, PACED_WORK, SAMPLE_READERS, SETTLE,
    bpftrace_waits_script,
};
use xtask::bpftrace::{BPFTRACE_COUNT, BPFTRACE_SRLAT};
use xtask::guest::{online_cpus, sys_getppid};

const USAGE: &str = "\
rcu-bench: measures rcutrace against bpftrace and against no tracer (run as root in the guest)

USAGE:
    rcu-bench [--reps R] [--calls N] [--membarriers M] [--window SECS]
              [--rcutrace PATH] [--bpftrace PATH]

Each repetition runs, for no tracer, `rcutrace count`, bpftrace's reader count and an empty
kprobe on __rcu_read_lock (the order rotates from one repetition to the next):
    N getppid() calls (readers), timed;
then, for no tracer, `rcutrace srlat` (with --attach auto, kprobe and fentry), bpftrace's
synchronize_rcu() latency script and empty programs on synchronize_rcu()'s entry and return
(kprobe + kretprobe, kprobe + fexit, fentry + fexit):
    M membarrier(MEMBARRIER_CMD_GLOBAL) calls, timed by the clock and by the caller's CPU time;
then each tracer's count for SECS seconds under a getppid() load, for its CPU time;
then `rcutrace gp --secs 0` and `rcutrace stall`, each for SECS seconds on the idle guest and
under the getppid() load, with /proc/sys/kernel/bpf_stats_enabled set: the CPU each adds (its
threads' time on a CPU and its BPF programs' run time), per second and per context switch;
then the footprint of count, srlat, callbacks, gp and stall: the RCU updater calls and grace
periods one run of each causes by its start and exit, counted by a bpftrace referee (kprobes
on every RCU updater function the kernel has) less the idle guest's own rate, for rcutrace and
for bpftrace hooking what rcutrace hooked.
A last pass with /proc/sys/kernel/bpf_stats_enabled set reads each one's BPF program time,
checks that its programs ran for every timed call, and that rcutrace attached as expected.
The empty programs are bpftrace scripts with empty blocks.

Every tracer launch is timed until attached (its banner, and for a kprobe its entry in
/sys/kernel/debug/kprobes/list), then stopped with SIGINT and reaped with wait4() for its peak
RSS and CPU time. Output: `sample METRIC CONFIG VALUE` and `info KEY VALUE...` lines on stdout,
progress on stderr.

Defaults: --reps 5 --calls 1000000 --membarriers 100 --window 10
          --rcutrace /bin/rcutrace --bpftrace /usr/bin/bpftrace
";

/// How long a tracer may take to print its banner and attach.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a tracer may take to exit after SIGINT (it is asked again every few seconds).
const EXIT_TIMEOUT: Duration = Duration::from_secs(60);
const KPROBE_LIST: &str = "/sys/kernel/debug/kprobes/list";
const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

struct Options {
    reps: u32,
    calls: u64,
    membarriers: u64,
    window: Duration,
    rcutrace: String,
    bpftrace: String,
}

fn main() {
    let opts = parse_args();
    if let Err(e) = bench(&opts) {
        eprintln!("rcu-bench: error: {e}");
        exit(1);
    }
}

fn usage_error(msg: &str) -> ! {
    eprintln!("rcu-bench: {msg}\n(rcu-bench --help for usage)");
    exit(2)
}

fn parse_args() -> Options {
    let mut opts = Options {
        reps: 5,
        calls: 1_000_000,
        membarriers: 100,
        window: Duration::from_secs(10),
        rcutrace: "/bin/rcutrace".into(),
        bpftrace: "/usr/bin/bpftrace".into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            print!("{USAGE}");
            exit(0);
        }
        let Some(value) = args.next() else {
            usage_error(&format!("`{flag}` needs a value"))
        };
        let number = |v: &str| -> u64 {
            v.parse()
                .ok()
                .filter(|n| *n > 0)
                .unwrap_or_else(|| usage_error(&format!("{flag} needs a positive integer")))
        };
        match flag.as_str() {
            "--reps" => {
                opts.reps = u32::try_from(number(&value))
                    .unwrap_or_else(|_| usage_error("--reps is too large"))
            }
            "--calls" => opts.calls = number(&value),
            "--membarriers" => opts.membarriers = number(&value),
            "--window" => opts.window = Duration::from_secs(number(&value)),
            "--rcutrace" => opts.rcutrace = value,
            "--bpftrace" => opts.bpftrace = value,
            _ => usage_error(&format!("unknown option `{flag}`")),
        }
    }
    opts
}

/// `tracer` in the order of repetition `rep`: rotating spreads drift and order effects evenly.
fn rotated<T: Copy>(items: &[T], rep: u32) -> Vec<T> {
    let mut items = items.to_vec();
    let len = items.len();
    if len > 0 {
        items.rotate_left(rep as usize % len);
    }
    items
}

fn sample(metric: Metric, config: Config, value: f64) {
    let sample = Sample {
        metric,
        config,
        value,
    };
    println!("{}", sample.line());
}

fn progress(msg: &str) {
    eprintln!("rcu-bench: {msg}");
}

fn bench(opts: &Options) -> Result<(), String> {
    if online_cpus() < 2 {
        return Err("needs 2 or more CPUs: membarrier skips synchronize_rcu() on one".into());
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_err(|e| format!("reading the kernel release: {e}"))?;
    println!("info kernel {}", release.trim());
    println!("info cpus {}", online_cpus());
    println!(
        "info sizes reps={} calls={} membarriers={} window={}",
        opts.reps,
        opts.calls,
        opts.membarriers,
        opts.window.as_secs()
    );
    println!(
        "info bpftrace {}",
        first_line_of(&opts.bpftrace, "--version")
    );
    println!(
        "info rcutrace {}",
        first_line_of(&opts.rcutrace, "--version")
    );
    std::fs::read_to_string(KPROBE_LIST)
        .map_err(|e| format!("reading {KPROBE_LIST} (is debugfs mounted?): {e}"))?;

    for rep in 0..opts.reps {
        let tag = format!("[{}/{}]", rep + 1, opts.reps);
        kernel_facts();
        for tracer in rotated(Job::Count.tracers(), rep) {
            reader_path(opts, tracer, &tag)?;
        }
        for tracer in rotated(Job::Srlat.tracers(), rep) {
            latency_path(opts, tracer, &tag)?;
        }
        for tracer in rotated(&[Tracer::RCUTRACE, Tracer::Bpftrace], rep) {
            cpu_window(opts, tracer, &tag)?;
        }
        sampled_readers(opts, &tag)?;
        // Their programs' run time is part of what they add: bpf_stats on for these windows.
        set_bpf_stats(true)?;
        let watched = rotated(&Watcher::ALL, rep)
            .into_iter()
            .try_for_each(|watcher| {
                Load::ALL
                    .into_iter()
                    .try_for_each(|load| watching(opts, watcher, load, &tag))
            });
        set_bpf_stats(false)?;
        watched?;
        footprints(opts, rep, &tag)?;
        for tracer in rotated(&NAMESPACE_TRACERS, rep) {
            namespace_load(opts, tracer, &tag)?;
        }
    }
    set_bpf_stats(true)?;
    let result = program_times(opts);
    set_bpf_stats(false)?;
    result
}

/// N getppid() calls, each one `rcu_read_lock()`.
fn reader_path(opts: &Options, tracer: Tracer, tag: &str) -> Result<(), String> {
    let running = start(opts, tracer, Job::Count)?;
    thread::sleep(SETTLE);
    let ns = getppid_loop(opts.calls);
    sample(Metric::GetppidNs, Config::Under(tracer), ns);
    progress(&format!(
        "{tag} reader path, {}: {ns:.1} ns per getppid()",
        tracer.name()
    ));
    if let Some(running) = running {
        let done = running.stop()?;
        done.record_rss(Config::Running(tracer, Job::Count));
        let Some(prefix) = reader_count_prefix(tracer) else {
            return Ok(());
        };
        let events = reader_count(prefix, &done.stdout).ok_or_else(|| {
            format!(
                "no __rcu_read_lock count in {}'s output:\n{}{}",
                tracer.name(),
                done.stdout,
                done.stderr
            )
        })?;
        sample(
            Metric::EventsPerCall,
            Config::Under(tracer),
            events as f64 / opts.calls as f64,
        );
    }
    Ok(())
}

/// The sampled reader mode under steady loads that run through the tracer's whole life, so
/// that the time it samples and the time it does not carry the same load: a load of nothing
/// but getppid() calls, for its cost per reader and its estimate when the probe slows the
/// very readers it samples; and a paced load (readers a small part of the work), for its
/// estimate against an exact count of the same load.
fn sampled_readers(opts: &Options, tag: &str) -> Result<(), String> {
    let load = SteadyLoad::start(0);
    thread::sleep(SETTLE);
    let alone = load.measure(opts.window);
    load.stop();
    sample(
        Metric::LoadGetppidNs,
        Config::Under(Tracer::None),
        alone.ns_per_call(),
    );

    let load = SteadyLoad::start(0);
    let running = launch(opts, Tracer::RcutraceSampled, Job::Count, &[], false)?.expect("a tracer");
    let traced = load.measure(opts.window);
    let (ns, calls) = (traced.ns_per_call(), traced.calls);
    let done = running.stop()?;
    load.stop();
    let config = Config::Under(Tracer::RcutraceSampled);
    sample(Metric::LoadGetppidNs, config, ns);
    let estimate = reader_count(ESTIMATED_READERS, &done.stdout)
        .ok_or_else(|| format!("no reader estimate in:\n{}{}", done.stdout, done.stderr))?;
    sample(
        Metric::EventsPerCall,
        config,
        estimate as f64 / calls as f64,
    );
    progress(&format!(
        "{tag} sampled readers, getppid() load: {ns:.1} ns per call, {:.3} estimated events per call",
        estimate as f64 / calls as f64
    ));

    let spin = spin_for(PACED_WORK);
    for tracer in [Tracer::RCUTRACE, Tracer::RcutraceSampled] {
        let load = SteadyLoad::start(spin);
        // The sampled mode logs where each of its windows fell.
        let env: &[(&str, &str)] = match tracer {
            Tracer::RcutraceSampled => &[("RUST_LOG", "rcutrace::trace::sampling=info")],
            _ => &[],
        };
        let running = launch(opts, tracer, Job::Count, env, false)?.expect("a tracer");
        let calls_per_s = load.measure(opts.window).per_second();
        let done = running.stop()?;
        let progress_log = load.stop();
        sample(Metric::PacedCallsPerS, Config::Under(tracer), calls_per_s);
        if tracer == Tracer::RcutraceSampled
            && let Some(speed) =
                window_speed(&progress_log, &sampled_windows(&done.stderr), calls_per_s)
        {
            sample(Metric::PacedWindowSpeed, Config::Under(tracer), speed);
            progress(&format!(
                "{tag} paced load: {speed:.3} of its speed over the run in the sampled windows"
            ));
        }
        let prefix = reader_count_prefix(tracer).expect("a reader count");
        let report = |what| format!("no {what} in:\n{}{}", done.stdout, done.stderr);
        let readers = reader_count(prefix, &done.stdout).ok_or_else(|| report("reader count"))?;
        let secs = window_secs(&done.stdout).ok_or_else(|| report("window"))?;
        sample(
            Metric::PacedEventsPerCall,
            Config::Under(tracer),
            readers as f64 / secs / calls_per_s,
        );
        // Unknown with a single window (a short smoke run).
        if let Some(margin) = estimate_margin(&done.stdout).filter(|_| tracer != Tracer::RCUTRACE) {
            sample(
                Metric::SampledMarginPct,
                Config::Under(tracer),
                100.0 * margin as f64 / readers.max(1) as f64,
            );
        }
        progress(&format!(
            "{tag} paced load, {}: {:.0} readers/s, {calls_per_s:.0} calls/s",
            tracer.name(),
            readers as f64 / secs
        ));
    }
    Ok(())
}

/// getppid() calls on a thread of their own until stopped, `spin` iterations of user-space
/// work before each; the calls made so far can be read at any time, and the load logs its
/// progress (CLOCK_MONOTONIC ns, calls so far) after every hundred calls.
struct SteadyLoad {
    calls: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<(u64, u64)>>,
}

impl SteadyLoad {
    fn start(spin: u64) -> Self {
        let calls = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (calls, stop) = (Arc::clone(&calls), Arc::clone(&stop));
            thread::spawn(move || {
                let mut progress = vec![(monotonic_ns(), 0)];
                let mut made = 0;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..100 {
                        work(spin);
                        sys_getppid();
                    }
                    made += 100;
                    calls.fetch_add(100, Ordering::Relaxed);
                    progress.push((monotonic_ns(), made));
                }
                progress
            })
        };
        SteadyLoad {
            calls,
            stop,
            thread,
        }
    }

    /// The calls the load makes over the next `window`.
    fn measure(&self, window: Duration) -> Calls {
        let (before, started) = (self.calls.load(Ordering::Relaxed), Instant::now());
        thread::sleep(window);
        Calls {
            calls: self.calls.load(Ordering::Relaxed) - before,
            elapsed: started.elapsed(),
        }
    }

    /// Stops the load; its progress log.
    fn stop(self) -> Vec<(u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// Calls a load made over a stretch of time.
struct Calls {
    calls: u64,
    elapsed: Duration,
}

impl Calls {
    fn ns_per_call(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.calls.max(1) as f64
    }

    fn per_second(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }
}

/// CLOCK_MONOTONIC now, in ns: the clock rcutrace logs its sampled windows on.
fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `clock` now, in ns.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// The sampled reader mode's windows, `(start, end)` on CLOCK_MONOTONIC, from its log
/// (`reader window K: N readers in L ns from CLOCK_MONOTONIC S ns ...`).
fn sampled_windows(log: &str) -> Vec<(u64, u64)> {
    log.lines()
        .filter_map(|line| {
            let rest = line.split_once(" readers in ")?.1;
            let (length, rest) = rest.split_once(" ns from CLOCK_MONOTONIC ")?;
            let start = rest.split_once(" ns")?.0;
            let (length, start): (u64, u64) = (length.parse().ok()?, start.parse().ok()?);
            Some((start, start + length))
        })
        .collect()
}

/// The load's calls per second inside `windows` over `calls_per_s`, its rate over the whole
/// measured run (which the readers per call are worked out with): how much slower (below 1)
/// the load ran while the probe counted. `None` without windows inside the log.
fn window_speed(progress: &[(u64, u64)], windows: &[(u64, u64)], calls_per_s: f64) -> Option<f64> {
    // Calls made by time `t`, between the two log entries around it.
    let calls_at = |t: u64| -> Option<f64> {
        let after = progress.iter().position(|&(at, _)| at >= t)?;
        let (t1, c1) = progress[after];
        let (t0, c0) = progress[after.checked_sub(1)?];
        Some(c0 as f64 + (c1 - c0) as f64 * (t - t0) as f64 / (t1 - t0).max(1) as f64)
    };
    let (mut calls, mut time) = (0.0, 0u64);
    for &(start, end) in windows {
        calls += calls_at(end)? - calls_at(start)?;
        time += end - start;
    }
    (time > 0 && calls_per_s > 0.0).then(|| calls / (time as f64 * 1e-9) / calls_per_s)
}

/// `spin` iterations of arithmetic the compiler cannot drop.
fn work(spin: u64) {
    let mut x = 0u64;
    for i in 0..spin {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    std::hint::black_box(x);
}

/// The iterations of `work` that take about `duration` on this machine.
fn spin_for(duration: Duration) -> u64 {
    const TRIAL: u64 = 1_000_000;
    // Once untimed: the emulator translates the loop on its first run.
    work(TRIAL);
    let started = Instant::now();
    work(TRIAL);
    let per_iteration = started.elapsed().as_secs_f64() / TRIAL as f64;
    (duration.as_secs_f64() / per_iteration.max(1e-12)) as u64
}

/// M membarrier(MEMBARRIER_CMD_GLOBAL) calls, each one synchronize_rcu().
fn latency_path(opts: &Options, tracer: Tracer, tag: &str) -> Result<(), String> {
    let running = start(opts, tracer, Job::Srlat)?;
    thread::sleep(SETTLE);
    let (wall, cpu) = membarrier_loop(opts.membarriers)?;
    sample(Metric::MembarrierWallNs, Config::Under(tracer), wall);
    sample(Metric::MembarrierCpuNs, Config::Under(tracer), cpu);
    progress(&format!(
        "{tag} latency path, {}: {:.1} us per membarrier(), {:.2} us of it on the CPU",
        tracer.name(),
        wall / 1e3,
        cpu / 1e3
    ));
    if let Some(running) = running {
        running
            .stop()?
            .record_rss(Config::Running(tracer, Job::Srlat));
    }
    Ok(())
}

/// The waiting functions `rcutrace run` times that this kernel has, for the tracers that
/// time the same ones.
fn run_waits() -> Result<Vec<&'static str>, String> {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms")
        .map_err(|e| format!("reading /proc/kallsyms: {e}"))?;
    let present = |f: &&str| {
        kallsyms
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some(*f))
    };
    Ok(rcutrace_common::followed::RUN_WAITS
        .iter()
        .copied()
        .filter(present)
        .collect())
}

/// `NAMESPACES` network namespaces created and dropped, timed by the load itself: with no
/// tracer, under `rcutrace run` (which follows their cleanup in the kernel's worker until it
/// ends), under `rcutrace srlat -c` timing the same functions, and under bpftrace timing them
/// by stack. What each adds to the command is what it costs the user waiting for it.
fn namespace_load(opts: &Options, tracer: Tracer, tag: &str) -> Result<(), String> {
    let load = format!("/bin/rcu-workload netns {NAMESPACES}");
    let load_words: Vec<&str> = load.split(' ').collect();
    let waits = run_waits()?;
    let mut cmd = match tracer {
        Tracer::None => Command::new(load_words[0]),
        Tracer::RcutraceRun => {
            let mut cmd = Command::new(&opts.rcutrace);
            cmd.args(["run", "--"]).arg(load_words[0]);
            cmd
        }
        Tracer::RcutraceSrlatCommand => {
            let mut cmd = Command::new(&opts.rcutrace);
            cmd.arg("srlat");
            for f in &waits {
                cmd.args(["--func", f]);
            }
            cmd.args(["-c", &load]);
            cmd
        }
        Tracer::Bpftrace => {
            let mut cmd = Command::new(&opts.bpftrace);
            cmd.args(["-c", &load, "-e", &bpftrace_waits_script(&waits)]);
            cmd
        }
        other => return Err(format!("{} does not run the namespace load", other.name())),
    };
    if matches!(tracer, Tracer::None | Tracer::RcutraceRun) {
        cmd.args(&load_words[1..]);
    }
    let output = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("running the namespace load under {}: {e}", tracer.name()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let elapsed: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("elapsed_ns: ")?.trim().parse().ok())
        .ok_or_else(|| {
            format!(
                "the namespace load under {} printed no elapsed_ns (status {:?}): {}",
                tracer.name(),
                output.status.code(),
                String::from_utf8_lossy(&output.stderr).trim_end()
            )
        })?;
    let per_namespace = elapsed / NAMESPACES as f64;
    sample(Metric::NetnsNs, Config::Under(tracer), per_namespace);
    progress(&format!(
        "{tag} namespace load, {}: {:.2} ms per namespace",
        tracer.name(),
        per_namespace / 1e6
    ));
    Ok(())
}

/// A tracer's CPU time while it counts for the window under a steady getppid() load.
fn cpu_window(opts: &Options, tracer: Tracer, tag: &str) -> Result<(), String> {
    let running = start(opts, tracer, Job::Count)?.expect("a tracer");
    thread::sleep(SETTLE);
    let load = SteadyLoad::start(0);
    let before = cpu_now(running.pid);
    thread::sleep(opts.window);
    let after = cpu_now(running.pid);
    load.stop();
    let done = running.stop()?;
    let config = Config::Under(tracer);
    if let (Some(before), Some(after)) = (before, after) {
        sample(
            Metric::WindowCpuMs,
            config,
            after.exec_ns.saturating_sub(before.exec_ns) as f64 / 1e6,
        );
        sample(
            Metric::WindowUtimeMs,
            config,
            after.utime_ticks.saturating_sub(before.utime_ticks) as f64 * 1e3 / ticks_per_sec(),
        );
    }
    sample(Metric::RunUtimeMs, config, done.utime.as_secs_f64() * 1e3);
    sample(Metric::RunS, config, done.lifetime.as_secs_f64());
    progress(&format!(
        "{tag} {}-s count under load, {}: {:.1} ms user CPU over its whole run of {:.1} s",
        opts.window.as_secs(),
        tracer.name(),
        done.utime.as_secs_f64() * 1e3,
        done.lifetime.as_secs_f64()
    ));
    Ok(())
}

/// An always-on command (`gp`, `stall`) watching the guest for the window, idle or under the
/// steady getppid() load, with bpf_stats on: the CPU it adds (its threads' time on a CPU and
/// its BPF programs' run time) per second and per context switch of the guest. Its start-up
/// is sampled on the idle guest (as the other commands' before their timed work), its peak
/// RSS under the load (as theirs under it).
fn watching(opts: &Options, watcher: Watcher, load: Load, tag: &str) -> Result<(), String> {
    let config = Config::Watching(watcher, load);
    let mut cmd = Command::new(&opts.rcutrace);
    cmd.args(watcher.args());
    let running = spawn_attached(cmd, config, None, &[], load == Load::Idle)?;
    let steady = (load == Load::Busy).then(|| SteadyLoad::start(0));
    thread::sleep(SETTLE);
    let before = WatchReading::now(running.pid);
    thread::sleep(opts.window);
    let after = WatchReading::now(running.pid);
    if let Some(steady) = steady {
        steady.stop();
    }
    let done = running.stop()?;
    if load == Load::Busy {
        done.record_rss(config);
    }
    let (Some(cpu_before), Some(cpu_after)) = (before.cpu, after.cpu) else {
        return Err(format!("{}: could not read its CPU time", config.name()));
    };
    let secs = (after.at - before.at).as_secs_f64();
    let cpu_ns = cpu_after.exec_ns.saturating_sub(cpu_before.exec_ns);
    let (runs, program_ns) = after
        .programs
        .iter()
        .map(|p| p.since(&before.programs))
        .fold((0, 0), |(runs, ns), (r, n)| (runs + r, ns + n));
    // The tick program runs on every tick of every CPU: no runs means nothing was attached.
    if runs == 0 {
        return Err(format!(
            "bpf_stats: the {} programs of {} never ran in {secs:.1} s:\n{}{}",
            after.programs.len(),
            config.name(),
            done.stdout,
            done.stderr
        ));
    }
    let switches = after.switches.saturating_sub(before.switches);
    let added_ns = (cpu_ns + program_ns) as f64;
    sample(Metric::WindowCpuMs, config, cpu_ns as f64 / 1e6);
    sample(
        Metric::WindowUtimeMs,
        config,
        cpu_after.utime_ticks.saturating_sub(cpu_before.utime_ticks) as f64 * 1e3 / ticks_per_sec(),
    );
    let tracer_runs = cpu_after.timeslices.saturating_sub(cpu_before.timeslices);
    sample(Metric::TracerRunsPerS, config, tracer_runs as f64 / secs);
    sample(Metric::WindowProgramMs, config, program_ns as f64 / 1e6);
    sample(Metric::ProgramRunsPerS, config, runs as f64 / secs);
    sample(Metric::SwitchesPerS, config, switches as f64 / secs);
    sample(Metric::AddedCpuPct, config, 100.0 * added_ns / (secs * 1e9));
    if switches > 0 {
        sample(Metric::AddedNsPerSwitch, config, added_ns / switches as f64);
    }
    progress(&format!(
        "{tag} rcutrace {} watching, {} guest: {:.3} % of a CPU ({:.1} ms own, {:.1} ms \
         programs in {secs:.1} s; its threads run {:.0} times/s; {:.0} program runs/s, {:.0} \
         context switches/s)",
        watcher.name(),
        load.name(),
        100.0 * added_ns / (secs * 1e9),
        cpu_ns as f64 / 1e6,
        program_ns as f64 / 1e6,
        tracer_runs as f64 / secs,
        runs as f64 / secs,
        switches as f64 / secs
    ));
    Ok(())
}

/// What a watching tracer has cost so far, and the guest's context switches.
struct WatchReading {
    at: Instant,
    cpu: Option<Cpu>,
    programs: Vec<Program>,
    switches: u64,
}

impl WatchReading {
    fn now(pid: libc::pid_t) -> Self {
        WatchReading {
            at: Instant::now(),
            cpu: cpu_now(pid),
            programs: bpf_programs(pid),
            switches: context_switches().unwrap_or(0),
        }
    }
}

/// Context switches since boot, all CPUs (`ctxt` in /proc/stat).
fn context_switches() -> Option<u64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("ctxt "))?
        .trim()
        .parse()
        .ok()
}

/// With bpf_stats on, the time each tracer's programs run per event, from their fdinfo, over
/// the timed work only (after a warm-up); with it, the proof that every tracer's programs,
/// the empty ones too, ran for each timed call, and that rcutrace attached as the table says.
fn program_times(opts: &Options) -> Result<(), String> {
    for job in [Job::Count, Job::Srlat] {
        for &tracer in job.tracers() {
            if tracer == Tracer::None {
                continue;
            }
            // rcutrace logs how it attached each probe at info level, and its start-up's
            // timing marks at debug level.
            let env: &[(&str, &str)] = if matches!(tracer, Tracer::Rcutrace(_)) {
                &[("RUST_LOG", marks::LOG_FILTER)]
            } else {
                &[]
            };
            let running = launch(opts, tracer, job, env, false)?.expect("a tracer");
            thread::sleep(SETTLE);
            let (before, timed_calls) = match job {
                Job::Count => {
                    getppid_loop(1_000);
                    let before = bpf_programs(running.pid);
                    getppid_loop(opts.calls);
                    (before, opts.calls)
                }
                Job::Srlat => {
                    for _ in 0..MEMBARRIER_WARMUP {
                        membarrier_global()?;
                    }
                    let before = bpf_programs(running.pid);
                    for _ in 0..opts.membarriers {
                        membarrier_global()?;
                    }
                    (before, opts.membarriers)
                }
            };
            let after = bpf_programs(running.pid);
            let done = running.stop()?;
            let config = Config::Running(tracer, job);
            let mut busiest = 0;
            let mut total_ns = 0;
            for p in &after {
                let (runs, run_ns) = p.since(&before);
                println!(
                    "info program {} id={} type={} runs={runs} ns={run_ns} ns/run={:.1}",
                    config.name(),
                    p.id,
                    p.kind,
                    run_ns as f64 / runs.max(1) as f64
                );
                busiest = busiest.max(runs);
                total_ns += run_ns;
            }
            // Per event of the busiest program: the reader probe, or synchronize_rcu()'s
            // entry, whose return program runs as often. Each timed call is at least one
            // event: fewer runs mean a program (an empty one, say) was never attached.
            if busiest < timed_calls {
                return Err(format!(
                    "bpf_stats: the programs of {} ran {busiest} times for {timed_calls} timed \
                     calls (programs: {})",
                    config.name(),
                    after.len()
                ));
            }
            sample(Metric::ProgramNs, config, total_ns as f64 / busiest as f64);
            let attached: Vec<&(Duration, String)> = done
                .stderr_lines
                .iter()
                .filter(|(_, l)| l.contains("attached by"))
                .collect();
            if let Some((first, _)) = attached.first() {
                // Everything before the first probe is attached is loading.
                sample(Metric::FirstAttachMs, config, first.as_secs_f64() * 1e3);
            }
            for (_, line) in &attached {
                println!("info attach {} {}", config.name(), line.trim());
            }
            if matches!(tracer, Tracer::Rcutrace(_)) {
                check_rcutrace_hooks(tracer, job, attached.iter().map(|(_, l)| l.as_str()))?;
                startup_phases(config, &done.stderr_lines);
            }
        }
    }
    progress("BPF program times read");
    Ok(())
}

/// Where rcutrace's start-up went, from its timing marks.
fn startup_phases(config: Config, stderr_lines: &[(Duration, String)]) {
    let marks: Vec<marks::Mark> = stderr_lines
        .iter()
        .filter_map(|(_, line)| marks::parse(line))
        .collect();
    for mark in &marks {
        println!(
            "info mark {} {:.1} {}",
            config.name(),
            mark.at_ms,
            mark.step
        );
    }
    let Some(phases) = marks::phases(&marks) else {
        println!("info mark {}: no start-up phases in the log", config.name());
        return;
    };
    sample(Metric::StartupBtfPassMs, config, phases.btf_pass_ms);
    sample(Metric::StartupObjectMs, config, phases.object_ms);
    sample(Metric::StartupAttachingMs, config, phases.attaching_ms);
    sample(Metric::Attaches, config, phases.attaches.into());
    sample(Metric::AttachMinMs, config, phases.attach_min_ms);
    sample(Metric::AttachMaxMs, config, phases.attach_max_ms);
    sample(Metric::ProgramsKept, config, phases.programs_kept.into());
    sample(
        Metric::ProgramsInObject,
        config,
        phases.programs_in_object.into(),
    );
    if let Some(types) = phases.trampoline_btf_types {
        sample(Metric::TrampolineBtfTypes, config, types.into());
    }
}

/// Facts about the kernel that bear on a tracer's start-up: reading /proc/kallsyms in full
/// (the kernel formats every symbol), and the size of the kernel's BTF.
fn kernel_facts() {
    let started = Instant::now();
    if let Ok(text) = std::fs::read_to_string("/proc/kallsyms") {
        sample(
            Metric::KallsymsReadMs,
            Config::Kernel,
            started.elapsed().as_secs_f64() * 1e3,
        );
        sample(
            Metric::KallsymsLines,
            Config::Kernel,
            text.lines().count() as f64,
        );
    }
    if let Ok(meta) = std::fs::metadata("/sys/kernel/btf/vmlinux") {
        sample(Metric::BtfKib, Config::Kernel, meta.len() as f64 / 1024.0);
    }
}

/// A tracer that has attached.
struct Running {
    child: Child,
    pid: libc::pid_t,
    launched: Instant,
    stdout: JoinHandle<String>,
    /// Lines read from stdout so far.
    stdout_lines: Arc<AtomicU64>,
    /// Each line with the time since launch it was read at.
    stderr: JoinHandle<Vec<(Duration, String)>>,
}

/// A tracer that has exited, with what it cost.
struct Finished {
    stdout: String,
    stderr: String,
    /// stderr's lines with the time since launch each was read at.
    stderr_lines: Vec<(Duration, String)>,
    /// The tracer's own peak RSS (`VmHWM`), as last read before it exited.
    peak_rss_kib: Option<u64>,
    utime: Duration,
    lifetime: Duration,
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
struct Attachments {
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
fn check_rcutrace_hooks<'a>(
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
fn start(opts: &Options, tracer: Tracer, job: Job) -> Result<Option<Running>, String> {
    launch(opts, tracer, job, &[], true)
}

/// Launches the tracer with extra environment and waits until it has attached; with `record`,
/// samples the time that took and the user CPU it used.
fn launch(
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
fn spawn_attached(
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
fn spawn_until(
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
    fn stop(self) -> Result<Finished, String> {
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
        })
    }
}

impl Finished {
    fn record_rss(&self, config: Config) {
        if let Some(kib) = self.peak_rss_kib {
            sample(Metric::RssKib, config, kib as f64);
        }
    }
}

/// How a tracer's output starts the line of its reader count: rcutrace's
/// `@[__rcu_read_lock]: N`, bpftrace's `@: N`; `None` for those that count nothing.
fn reader_count_prefix(tracer: Tracer) -> Option<&'static str> {
    match tracer {
        Tracer::Rcutrace(_) => Some("@[__rcu_read_lock]: "),
        Tracer::RcutraceSampled => Some(ESTIMATED_READERS),
        Tracer::Bpftrace => Some("@: "),
        Tracer::None | Tracer::Floor(_) | Tracer::RcutraceRun | Tracer::RcutraceSrlatCommand => {
            None
        }
    }
}

/// How the sampled reader mode prints its estimate.
const ESTIMATED_READERS: &str = "@[__rcu_read_lock (estimated)]: ";

/// The window's length in seconds, from rcutrace's `Over S s:` line.
fn window_secs(output: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|l| l.strip_prefix("Over ")?.strip_suffix(" s:"))
        .and_then(|s| s.trim().parse().ok())
}

/// The stated 95% margin of the sampled reader mode's estimate (`~N ±M ...`); `None` where it
/// is unknown (fewer than two windows).
fn estimate_margin(output: &str) -> Option<u64> {
    output
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("RCU readers, estimated:"))
        .and_then(|rest| rest.split_once('\u{b1}'))
        .and_then(|(_, margin)| margin.split_whitespace().next()?.parse().ok())
}

/// The reader count on the line that starts with `prefix`.
fn reader_count(prefix: &str, output: &str) -> Option<u64> {
    output
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|n| n.trim().parse().ok())
}

/// Enabled kprobes (entry or return) on `function` in the kernel's list of registered kprobes.
fn enabled_kprobes(function: &str) -> usize {
    let list = std::fs::read_to_string(KPROBE_LIST).unwrap_or_default();
    let at = format!("{function}+0x");
    list.lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(2)
                .is_some_and(|s| s.starts_with(&at))
                && !l.contains("[DISABLED]")
                && !l.contains("[GONE]")
        })
        .count()
}

/// The BPF links of trampoline programs (fentry, fexit) a process holds: the kernel hands a
/// link's fd out only after the trampoline is patched in.
fn tracing_links(pid: libc::pid_t) -> usize {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            std::fs::read_to_string(entry.path()).is_ok_and(|info| {
                info.lines()
                    .any(|l| l.strip_prefix("link_type:").map(str::trim) == Some("tracing"))
            })
        })
        .count()
}

/// Wall-clock ns per getppid() call.
fn getppid_loop(calls: u64) -> f64 {
    let started = Instant::now();
    for _ in 0..calls {
        sys_getppid();
    }
    started.elapsed().as_nanos() as f64 / calls as f64
}

/// One membarrier(MEMBARRIER_CMD_GLOBAL) call, its failure as a message.
fn membarrier_global() -> Result<(), String> {
    xtask::guest::sys_membarrier_global()
        .map_err(|e| format!("membarrier(MEMBARRIER_CMD_GLOBAL) failed: {e}"))
}

/// After a few untimed calls: the mean wall-clock ns per membarrier(MEMBARRIER_CMD_GLOBAL)
/// call, and the median of this thread's CPU ns per call. The CPU time leaves out the sleep in
/// synchronize_rcu(), so it shows the probes' cost on the caller; the median leaves out the
/// calls during which the emulator ran the other CPU.
fn membarrier_loop(calls: u64) -> Result<(f64, f64), String> {
    for _ in 0..MEMBARRIER_WARMUP {
        membarrier_global()?;
    }
    let mut cpu = Vec::with_capacity(calls as usize);
    let started = Instant::now();
    for _ in 0..calls {
        let before = thread_cpu_ns();
        membarrier_global()?;
        cpu.push(thread_cpu_ns().saturating_sub(before) as f64);
    }
    let wall = started.elapsed().as_nanos() as f64;
    let median = median(&cpu).ok_or("no membarrier() call was timed")?;
    Ok((wall / calls as f64, median))
}

fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// A live process's peak RSS so far (`VmHWM` in /proc/PID/status), in KiB.
fn peak_rss(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

fn ticks_per_sec() -> f64 {
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).max(1) as f64
}

/// A process's CPU time so far: all its threads' time on a CPU (ns), the times they were put
/// on one, and its user time.
#[derive(Clone, Copy)]
struct Cpu {
    exec_ns: u64,
    timeslices: u64,
    utime_ticks: u64,
}

fn cpu_now(pid: libc::pid_t) -> Option<Cpu> {
    let (mut exec_ns, mut timeslices) = (0, 0);
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let schedstat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        // On a CPU (ns), waiting for one (ns), timeslices run.
        let mut fields = schedstat.split_whitespace();
        exec_ns += fields.next()?.parse::<u64>().ok()?;
        timeslices += fields.nth(1)?.parse::<u64>().ok()?;
    }
    // Fields after the parenthesised command name: state is field 3, utime field 14.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.rsplit_once(')')?.1;
    let utime_ticks = after_name.split_whitespace().nth(11)?.parse().ok()?;
    Some(Cpu {
        exec_ns,
        timeslices,
        utime_ticks,
    })
}

fn set_bpf_stats(on: bool) -> Result<(), String> {
    std::fs::write(BPF_STATS, if on { "1" } else { "0" })
        .map_err(|e| format!("writing {BPF_STATS}: {e}"))
}

/// One loaded BPF program, as its owner's fdinfo shows it.
struct Program {
    id: u64,
    kind: u64,
    runs: u64,
    run_ns: u64,
}

impl Program {
    /// Its runs and run time since `before` was read (all of them if it was not loaded yet).
    fn since(&self, before: &[Program]) -> (u64, u64) {
        before
            .iter()
            .find(|b| b.id == self.id)
            .map_or((self.runs, self.run_ns), |b| {
                (
                    self.runs - b.runs.min(self.runs),
                    self.run_ns - b.run_ns.min(self.run_ns),
                )
            })
    }
}

/// The BPF programs a process holds, each once, from /proc/PID/fdinfo.
fn bpf_programs(pid: libc::pid_t) -> Vec<Program> {
    let mut programs: HashMap<u64, Program> = HashMap::new();
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Ok(info) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let field = |name: &str| -> Option<u64> {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
        };
        // Links name their program with prog_id too; only program fds have prog_type.
        let (Some(kind), Some(id), Some(runs), Some(run_ns)) = (
            field("prog_type"),
            field("prog_id"),
            field("run_cnt"),
            field("run_time_ns"),
        ) else {
            continue;
        };
        programs.insert(
            id,
            Program {
                id,
                kind,
                runs,
                run_ns,
            },
        );
    }
    let mut programs: Vec<Program> = programs.into_values().collect();
    programs.sort_by_key(|p| p.id);
    programs
}

/// The first line `PROGRAM ARG` prints, or why there is none.
fn first_line_of(program: &str, arg: &str) -> String {
    match Command::new(program).arg(arg).output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            text.lines()
                .next()
                .unwrap_or("(no output)")
                .trim()
                .to_string()
        }
        Err(e) => format!("(could not run {program}: {e})"),
    }
}

/// The footprint of each command (see `rcu_bench::footprint`): an idle window for the
/// guest's own rate, then each command's run under rcutrace and under bpftrace hooking what
/// rcutrace hooked in that run, each in a window of its own, all counted by one referee.
fn footprints(opts: &Options, rep: u32, tag: &str) -> Result<(), String> {
    let mut referee = Referee::start(&opts.bpftrace)?;
    let result = (|| {
        let idle = referee.window(|| {
            thread::sleep(footprint::IDLE_WINDOW);
            Ok(())
        })?;
        progress(&format!(
            "{tag} footprint: idle guest, {} per {:.1} s",
            idle.describe(),
            idle.elapsed.as_secs_f64()
        ));
        for command in rotated(&Footprinted::ALL, rep) {
            let mut hooks = Vec::new();
            let rcutrace = referee.window(|| {
                let mut cmd = Command::new(&opts.rcutrace);
                cmd.args(command.args());
                let config = Config::Footprint(Tracer::RCUTRACE, command);
                let running = spawn_attached(cmd, config, None, &[("RUST_LOG", "info")], false)?;
                thread::sleep(SETTLE);
                let done = running.stop()?;
                hooks = footprint::attached_hooks(done.stderr.lines());
                Ok(())
            })?;
            record_footprint(Tracer::RCUTRACE, command, &rcutrace, &idle, tag);
            let script = footprint::mirror_script(&hooks).ok_or_else(|| {
                format!(
                    "rcutrace {}: no hooks bpftrace can mirror in its log",
                    command.name()
                )
            })?;
            let bpftrace = referee.window(|| {
                let mut cmd = Command::new(&opts.bpftrace);
                cmd.args(["-e", &script]);
                let config = Config::Footprint(Tracer::Bpftrace, command);
                // Not by reading its /proc/PID files: the kernel frees what that caches
                // through call_rcu() when the process is reaped, which would count as its own.
                let running =
                    spawn_until(cmd, config, None, &[], false, footprint::MIRROR_ATTACHED)?;
                thread::sleep(SETTLE);
                running.stop()?;
                Ok(())
            })?;
            record_footprint(Tracer::Bpftrace, command, &bpftrace, &idle, tag);
        }
        Ok(())
    })();
    let stopped = referee.stop();
    result.and(stopped)
}

/// Samples one run's footprint: each family's calls in its window less the idle guest's over
/// the same time; the calls of each function go to an `info` line.
fn record_footprint(
    tracer: Tracer,
    command: Footprinted,
    window: &RefereeWindow,
    idle: &RefereeWindow,
    tag: &str,
) {
    let config = Config::Footprint(tracer, command);
    let mut figures = Vec::new();
    for family in Family::ALL {
        let idle_calls = footprint::idle_calls(idle.calls(family), idle.elapsed, window.elapsed);
        let value = window.calls(family) as f64 - idle_calls;
        sample(Metric::Footprint(family), config, value);
        figures.push(format!("{} {value:.0}", Metric::Footprint(family).name()));
    }
    println!(
        "info footprint {} {:.1}s {}",
        config.name(),
        window.elapsed.as_secs_f64(),
        window.describe()
    );
    progress(&format!(
        "{tag} footprint of {}: {} (in {:.1} s, less the idle rate)",
        config.name(),
        figures.join(", "),
        window.elapsed.as_secs_f64()
    ));
}

/// A bpftrace counting every RCU updater function the kernel has, by kprobes, and printing
/// its totals whenever `sync()` is called.
struct Referee {
    child: Child,
    output: Arc<Mutex<String>>,
    reader: JoinHandle<()>,
}

/// What the referee counted between two of its totals.
struct RefereeWindow {
    before: HashMap<String, u64>,
    after: HashMap<String, u64>,
    elapsed: Duration,
}

impl RefereeWindow {
    fn calls(&self, family: Family) -> u64 {
        footprint::family_calls(family, &self.before, &self.after)
    }

    /// `function=calls` for each function called in the window.
    fn describe(&self) -> String {
        let mut calls: Vec<(&str, u64)> = Family::every_function()
            .map(|f| {
                let get = |t: &HashMap<String, u64>| t.get(f).copied().unwrap_or(0);
                (f, get(&self.after).saturating_sub(get(&self.before)))
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        calls.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        calls
            .iter()
            .map(|(f, n)| format!("{f}={n}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Referee {
    fn start(bpftrace: &str) -> Result<Self, String> {
        let kallsyms = std::fs::read_to_string("/proc/kallsyms")
            .map_err(|e| format!("reading /proc/kallsyms: {e}"))?;
        let text: std::collections::HashSet<&str> = kallsyms
            .lines()
            .filter_map(|l| {
                let mut fields = l.split_whitespace();
                let (_, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
                (matches!(kind, "t" | "T") && fields.next().is_none()).then_some(name)
            })
            .collect();
        let present: Vec<&str> = Family::every_function()
            .filter(|f| text.contains(f))
            .collect();
        println!("info footprint-referee hooks {}", present.join(" "));
        let mut child = Command::new(bpftrace)
            .args(["-e", &footprint::referee_script(&present)])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("could not start the footprint referee: {e}"))?;
        let output = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().expect("piped");
        let reader = {
            let output = Arc::clone(&output);
            thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let mut output = output.lock().unwrap_or_else(|e| e.into_inner());
                    output.push_str(&line);
                    output.push('\n');
                }
            })
        };
        let mut referee = Referee {
            child,
            output,
            reader,
        };
        // Its first totals say all its probes are attached; then its own attaching settles.
        let started = Instant::now();
        while !referee.text().contains("Attaching ") {
            if started.elapsed() > ATTACH_TIMEOUT {
                let _ = referee.stop();
                return Err("the footprint referee printed no banner".into());
            }
            thread::sleep(Duration::from_millis(50));
        }
        referee.totals()?;
        thread::sleep(footprint::TAIL);
        Ok(referee)
    }

    fn text(&self) -> String {
        self.output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Its totals so far: `sync()` makes it print them.
    fn totals(&mut self) -> Result<HashMap<String, u64>, String> {
        let marks = |text: &str| text.matches(footprint::END_OF_TOTALS).count();
        let before = marks(&self.text());
        let started = Instant::now();
        let mut last_sync: Option<Instant> = None;
        loop {
            // Its sync probe may not be attached yet: ask again now and then.
            if last_sync.is_none_or(|t| t.elapsed() > Duration::from_secs(2)) {
                unsafe { libc::sync() };
                last_sync = Some(Instant::now());
            }
            let text = self.text();
            if marks(&text) > before {
                return footprint::last_totals(&text)
                    .ok_or_else(|| "the footprint referee's totals are unreadable".into());
            }
            if started.elapsed() > ATTACH_TIMEOUT {
                return Err(format!(
                    "the footprint referee printed no totals in {ATTACH_TIMEOUT:?}:\n{text}"
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// What it counts while `run` runs and for `footprint::TAIL` after.
    fn window(
        &mut self,
        run: impl FnOnce() -> Result<(), String>,
    ) -> Result<RefereeWindow, String> {
        let before = self.totals()?;
        let started = Instant::now();
        run()?;
        thread::sleep(footprint::TAIL);
        let after = self.totals()?;
        Ok(RefereeWindow {
            before,
            after,
            elapsed: started.elapsed(),
        })
    }

    fn stop(mut self) -> Result<(), String> {
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let status = self
            .child
            .wait()
            .map_err(|e| format!("waiting for the footprint referee: {e}"))?;
        let _ = self.reader.join();
        if !status.success() {
            return Err(format!("the footprint referee ended badly: {status}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two windows of rcutrace's log (its own format), and a load that made 1000 calls a
    /// second but for those windows, where it made 900.
    #[test]
    fn the_load_is_timed_inside_the_logged_windows() {
        let log = "[INFO  rcutrace::trace::sampling] reader window 0: 180 readers in 100000000 ns \
                   from CLOCK_MONOTONIC 2000000000 ns (1.9s after the opening)\n\
                   [INFO  rcutrace::trace::sampling] reader window 1: 185 readers in 100000000 \
                   ns from CLOCK_MONOTONIC 5000000000 ns (4.9s after the opening)\n\
                   rcutrace: some other line\n";
        let windows = sampled_windows(log);
        assert_eq!(
            windows,
            [
                (2_000_000_000, 2_100_000_000),
                (5_000_000_000, 5_100_000_000)
            ]
        );
        // (time in ns, calls so far) every 100 ms from 0 to 10 s.
        let mut progress = vec![(0, 0)];
        let mut calls = 0;
        for step in 1..=100u64 {
            let at = step * 100_000_000;
            let inside = windows.iter().any(|&(s, e)| at > s && at <= e);
            calls += if inside { 90 } else { 100 };
            progress.push((at, calls));
        }
        let speed = window_speed(&progress, &windows, 1000.0).unwrap();
        assert!((speed - 0.9).abs() < 1e-9, "{speed}");
        // Without windows, or a window past the load's log, there is nothing to say.
        assert_eq!(window_speed(&progress, &[], 1000.0), None);
        assert_eq!(
            window_speed(&progress, &[(10_500_000_000, 10_600_000_000)], 1000.0),
            None
        );
    }
}
