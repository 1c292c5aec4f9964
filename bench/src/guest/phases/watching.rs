//! The always-on commands (`gp`, `stall`) watching the guest, idle or under load: the CPU each
//! adds, its own and its BPF programs', per second and per context switch.

use std::process::Command;
use std::thread;
use std::time::Instant;

use crate::WATCH_SETTLE;
use crate::guest::loads::SteadyLoad;
use crate::guest::procfs::{Cpu, Program, bpf_programs, context_switches, cpu_now, ticks_per_sec};
use crate::guest::tracer::spawn_attached;
use crate::guest::{Options, progress, sample};
use crate::marks;
use crate::sample::{Config, Load, Metric, Watcher};

/// An always-on command (`gp`, `stall`) watching the guest for the window, idle or under the
/// steady getppid() load, with bpf_stats on: the CPU it adds (its threads' time on a CPU and
/// its BPF programs' run time) per second and per context switch of the guest. Its start-up
/// is sampled on the idle guest (as the other commands' before their timed work), its peak
/// RSS under the load (as theirs under it).
pub fn watching(opts: &Options, watcher: Watcher, load: Load, tag: &str) -> Result<(), String> {
    let config = Config::Watching(watcher, load);
    let mut cmd = Command::new(&opts.rcutrace);
    cmd.args(watcher.args());
    let running = spawn_attached(cmd, config, None, &[], load == Load::Idle)?;
    let steady = (load == Load::Busy).then(|| SteadyLoad::start(0));
    thread::sleep(WATCH_SETTLE);
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

/// Where `stall`'s start-up went, from its timing marks: a start of its own on the idle guest,
/// so that the marks' logging is in none of the figures the watching measures.
pub fn stall_startup(opts: &Options, tag: &str) -> Result<(), String> {
    let config = Config::Watching(Watcher::Stall, Load::Idle);
    let mut cmd = Command::new(&opts.rcutrace);
    cmd.args(Watcher::Stall.args());
    let running = spawn_attached(cmd, config, None, &[("RUST_LOG", marks::LOG_FILTER)], false)?;
    let done = running.stop()?;
    super::programs::startup_phases(config, &done.stderr_lines);
    progress(&format!("{tag} rcutrace stall's start-up marks read"));
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
