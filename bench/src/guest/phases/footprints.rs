//! The footprints: the RCU work one run of each command causes by its start and exit, under
//! rcutrace and under bpftrace hooking what rcutrace hooked, as the referee counts it.

use std::process::Command;
use std::thread;

use crate::SETTLE;
use crate::footprint::{self, Family, Footprinted};
use crate::guest::referee::{Referee, RefereeWindow};
use crate::guest::tracer::{spawn_attached, spawn_until};
use crate::guest::{Options, progress, rotated, sample};
use crate::sample::{Config, Metric, Tracer};

/// The footprint of each command (see `crate::footprint`): an idle window for the
/// guest's own rate, then each command's run under rcutrace and under bpftrace hooking what
/// rcutrace hooked in that run, each in a window of its own, all counted by one referee.
pub fn footprints(opts: &Options, rep: u32, tag: &str) -> Result<(), String> {
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
