//! The latency path: M membarrier() calls (one `synchronize_rcu()` each) timed under each
//! tracer, by the clock and by the caller's CPU time.

use std::thread;

use crate::SETTLE;
use crate::guest::loads::membarrier_loop;
use crate::guest::tracer::start;
use crate::guest::{Options, progress, sample};
use crate::sample::{Config, Job, Metric, Tracer};

/// M membarrier(MEMBARRIER_CMD_GLOBAL) calls, each one synchronize_rcu().
pub fn latency_path(opts: &Options, tracer: Tracer, tag: &str) -> Result<(), String> {
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
        let done = running.stop()?;
        done.record_rss(Config::Running(tracer, Job::Srlat));
        done.record_exit(Config::Running(tracer, Job::Srlat));
    }
    Ok(())
}
