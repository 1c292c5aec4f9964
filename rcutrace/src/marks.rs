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
