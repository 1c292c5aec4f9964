//! The reader path: N getppid() calls (one `rcu_read_lock()` each) timed under each tracer,
//! and the readers each counted; and the sampled reader mode under steady loads.

use std::thread;

use crate::guest::loads::{SteadyLoad, getppid_loop, spin_for};
use crate::guest::tracer::{launch, start};
use crate::guest::{Options, progress, sample};
use crate::sample::{Config, Job, Metric, Tracer};
use crate::{PACED_WORK, SETTLE};

/// N getppid() calls, each one `rcu_read_lock()`.
pub fn reader_path(opts: &Options, tracer: Tracer, tag: &str) -> Result<(), String> {
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
pub fn sampled_readers(opts: &Options, tag: &str) -> Result<(), String> {
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
