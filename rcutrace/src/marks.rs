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

/// Logs that `step` has just ended, with the time since `start`.
pub fn mark(step: impl Display) {
    if log::log_enabled!(log::Level::Debug) {
        let since = STARTED.get_or_init(Instant::now).elapsed();
        log::debug!("{:8.1} ms  {step}", since.as_secs_f64() * 1e3);
    }
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
