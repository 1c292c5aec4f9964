//! The last pass, with bpf_stats on: each tracer's BPF program time per event over the timed
//! work, the proof that its programs ran for every timed call, how rcutrace attached, and
//! where its start-up went.

use std::thread;
use std::time::Duration;

use crate::guest::loads::{getppid_loop, membarrier_global};
use crate::guest::procfs::bpf_programs;
use crate::guest::tracer::{check_rcutrace_hooks, launch};
use crate::guest::{Options, progress, sample};
use crate::marks;
use crate::sample::{Config, Job, Metric, Tracer};
use crate::{MEMBARRIER_WARMUP, SETTLE};

/// With bpf_stats on, the time each tracer's programs run per event, from their fdinfo, over
/// the timed work only (after a warm-up); with it, the proof that every tracer's programs,
/// the empty ones too, ran for each timed call, and that rcutrace attached as the table says.
pub fn program_times(opts: &Options) -> Result<(), String> {
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
pub(super) fn startup_phases(config: Config, stderr_lines: &[(Duration, String)]) {
    let marks: Vec<marks::Mark> = stderr_lines
        .iter()
        .filter_map(|(_, line)| marks::parse(line))
        .collect();
    for mark in &marks {
        println!("{}", marks::logged_line(&config.name(), mark));
    }
    let Some(phases) = marks::phases(&marks) else {
        println!("info mark {}: no start-up phases in the log", config.name());
        return;
    };
    for (metric, value) in marks::phase_samples(&phases) {
        sample(metric, config, value);
    }
}
