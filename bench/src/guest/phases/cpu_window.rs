//! A tracer's CPU time over a window of counting under a steady getppid() load, and over its
//! whole run.

use std::thread;

use crate::SETTLE;
use crate::guest::loads::SteadyLoad;
use crate::guest::procfs::{cpu_now, ticks_per_sec};
use crate::guest::tracer::start;
use crate::guest::{Options, progress, sample};
use crate::sample::{Config, Job, Metric, Tracer};

/// A tracer's CPU time while it counts for the window under a steady getppid() load.
pub fn cpu_window(opts: &Options, tracer: Tracer, tag: &str) -> Result<(), String> {
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
