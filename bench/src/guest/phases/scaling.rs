//! What grows with the machine, measured the same way in a guest of few CPUs and in one of
//! many: each tracer's start-up and peak RSS for `count` (rcutrace's with its start-up
//! phases), and the CPU rcutrace spends on each `--interval` report, most of it reading every
//! per-CPU map across the CPUs. The always-on commands' added CPU is `watching`'s.

use std::process::Command;
use std::thread;

use super::programs::startup_phases;
use crate::SETTLE;
use crate::guest::procfs::cpu_now;
use crate::guest::tracer::{launch, spawn_attached};
use crate::guest::{Options, progress, sample};
use crate::marks;
use crate::sample::{Config, Job, Metric, Tracer};

/// One launch of `tracer`'s count, stopped once attached and settled: its start-up, its peak
/// RSS, and for rcutrace where its start-up went.
pub fn count_startup(opts: &Options, tracer: Tracer, tag: &str) -> Result<(), String> {
    let config = Config::Running(tracer, Job::Count);
    let marks_log: &[(&str, &str)] = &[("RUST_LOG", marks::LOG_FILTER)];
    let env = if tracer == Tracer::RCUTRACE {
        marks_log
    } else {
        &[]
    };
    let running = launch(opts, tracer, Job::Count, env, true)?
        .ok_or_else(|| format!("{} launches nothing", tracer.name()))?;
    thread::sleep(SETTLE);
    let done = running.stop()?;
    done.record_rss(config);
    if tracer == Tracer::RCUTRACE {
        startup_phases(config, &done.stderr_lines);
    }
    progress(&format!(
        "{tag} {} count started and stopped",
        tracer.name()
    ));
    Ok(())
}

/// What rcutrace logs for each report's reading of the counters (`trace::engine`).
const READ_LOG: &str = "warn,rcutrace::trace::engine=debug";
const READ_LINE: &str = "counters read for a report in ";
/// In the same line, what of it the per-CPU arrays took.
const ARRAYS_PART: &str = "the per-CPU arrays in ";

/// `rcutrace count --interval 1` over the window: the CPU its threads use per report, and of
/// that, what reading the counters took (as rcutrace logs it, its thread's CPU time).
pub fn interval_reports(opts: &Options, tag: &str) -> Result<(), String> {
    let config = Config::Running(Tracer::RCUTRACE, Job::Count);
    let mut cmd = Command::new(&opts.rcutrace);
    cmd.args(["count", "--interval", "1", "--secs", "0"]);
    let running = spawn_attached(cmd, config, None, &[("RUST_LOG", READ_LOG)], false)?;
    thread::sleep(SETTLE);
    let before = (std::time::Instant::now(), cpu_now(running.pid));
    thread::sleep(opts.window);
    let after = (std::time::Instant::now(), cpu_now(running.pid));
    let done = running.stop()?;
    let (Some(cpu_before), Some(cpu_after)) = (before.1, after.1) else {
        return Err(format!(
            "could not read the CPU time of `rcutrace count --interval 1`:\n{}",
            done.stderr
        ));
    };
    let reports = (after.0 - before.0).as_secs_f64();
    let cpu_ms = cpu_after.exec_ns.saturating_sub(cpu_before.exec_ns) as f64 / 1e6;
    sample(Metric::IntervalCpuMs, config, cpu_ms / reports);
    let median_after = |text: &str| {
        let mut values: Vec<f64> = done
            .stderr_lines
            .iter()
            .filter(|(_, line)| line.contains(READ_LINE))
            .filter_map(|(_, line)| {
                let after = &line[line.find(text)? + text.len()..];
                after.split_whitespace().next()?.parse().ok()
            })
            .collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    };
    let (Some(read_ms), Some(arrays_ms)) = (median_after(READ_LINE), median_after(ARRAYS_PART))
    else {
        return Err(format!(
            "`rcutrace count --interval 1` logged no reading of its counters:\n{}",
            done.stderr
        ));
    };
    sample(Metric::IntervalReadMs, config, read_ms);
    sample(Metric::IntervalArraysMs, config, arrays_ms);
    progress(&format!(
        "{tag} rcutrace count --interval 1: {:.3} ms of CPU per report, {read_ms:.3} ms of it \
         reading the counters, {arrays_ms:.3} ms the per-CPU arrays",
        cpu_ms / reports
    ));
    Ok(())
}
