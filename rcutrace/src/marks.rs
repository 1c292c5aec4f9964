//! Start-up timing marks: how long after `main` began each step of the start-up ended, logged
//! at debug level (`RUST_LOG=rcutrace::marks=debug`), so that where the time to the
//! banner goes is measured rather than estimated. Off by default, a mark costs one check of
//! the log level.

use std::{fmt::Display, sync::OnceLock, time::Instant};

static STARTED: OnceLock<Instant> = OnceLock::new();

/// Notes when the process began its own work: called first thing in `main`.
pub fn start() {
    STARTED.get_or_init(Instant::now);
}

/// Logs that `step` has just ended, with the time since `start`, the CPU time the thread
/// that marks it has used so far (user, and system: the kernel's work for it, such as one
/// attach) and the process's peak resident memory (`VmHWM`), so that a step that grows the
/// peak is seen where it does.
pub fn mark(step: impl Display) {
    if log::log_enabled!(log::Level::Debug) {
        let since = STARTED.get_or_init(Instant::now).elapsed();
        let usage = process_usage();
        log::debug!(
            "{:8.1} ms  (thread: user {:6.1} ms, system {:6.1} ms; peak {:6} KiB)  {step}",
            since.as_secs_f64() * 1e3,
            usage.user.as_secs_f64() * 1e3,
            usage.system.as_secs_f64() * 1e3,
            usage.peak_kib,
        );
    }
}

/// The calling thread's CPU time so far and the process's peak resident memory.
struct Usage {
    user: std::time::Duration,
    system: std::time::Duration,
    peak_kib: i64,
}

fn process_usage() -> Usage {
    let thread = rusage(libc::RUSAGE_THREAD);
    let duration = |t: libc::timeval| {
        std::time::Duration::new(t.tv_sec as u64, (t.tv_usec as u32).saturating_mul(1000))
    };
    Usage {
        user: duration(thread.ru_utime),
        system: duration(thread.ru_stime),
        peak_kib: peak_resident_kib(),
    }
}

/// `VmHWM`, this process image's peak resident memory. Not getrusage's `ru_maxrss`, which
/// counts in the peak of the process that forked this one before it became rcutrace.
fn peak_resident_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// `getrusage(who)`, or zeroes where it fails.
fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: an all-zero rusage is a valid value, which the call fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid rusage for the call to fill; on failure it stays zeroed.
    unsafe { libc::getrusage(who, &mut usage) };
    usage
}

/// The CPU time this thread has used so far (user and system), for timing a step's CPU
/// rather than its wall time, which a busy machine stretches.
pub fn thread_cpu() -> std::time::Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}
