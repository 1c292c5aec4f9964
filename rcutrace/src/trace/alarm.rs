//! An alarm the kernel keeps (a timerfd): it wakes the window's thread once, when it is due.
//!
//! tokio's timer wheel files a deadline seconds away in a coarse slot and wakes the thread at
//! that slot's start to file it finer: a 5 s wait is three wake-ups, and an always-on command
//! (`stall`, `gp`) is judged by what its wake-ups cost. The window's own
//! schedule (its watch's looks, its ring buffer's reads, `--interval`'s reports) waits on this
//! alarm instead.

use std::{
    io,
    os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use tokio::io::{Interest, unix::AsyncFd};

pub struct Alarm {
    /// Made at the first wait, so that a run that never waits holds no timer.
    timer: Option<AsyncFd<OwnedFd>>,
    /// The moment it is set for, if any.
    set_for: Option<Instant>,
}

impl Alarm {
    pub fn new() -> Self {
        Alarm {
            timer: None,
            set_for: None,
        }
    }

    fn timer() -> Result<AsyncFd<OwnedFd>> {
        // SAFETY: timerfd_create takes a clock and flags and returns a new fd or -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("creating a timerfd");
        }
        // SAFETY: the fd was just created and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the AsyncFd owns the fd, so it stays open for as long as it is registered.
        unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)
            .context("watching a timerfd")
    }

    /// Completes at `when` (at once if it has passed); never without one. Cancelling it
    /// leaves the alarm set, so that waiting again for the same moment costs no system call.
    pub async fn at(&mut self, when: Option<Instant>) {
        let Some(when) = when else {
            return std::future::pending().await;
        };
        if self.set_for != Some(when) {
            // A timer that cannot be made or set (neither fails on valid arguments) degrades
            // to tokio's, which keeps the time if not the wake-ups.
            if let Err(e) = self.set(when) {
                log::debug!("{e:#}; waiting on tokio's timer");
                return tokio::time::sleep_until(when.into()).await;
            }
        }
        let Some(timer) = &self.timer else {
            return tokio::time::sleep_until(when.into()).await;
        };
        loop {
            let Ok(mut ready) = timer.readable().await else {
                return tokio::time::sleep_until(when.into()).await;
            };
            let mut expirations = 0u64;
            // SAFETY: reads 8 bytes into a u64 from a timerfd the AsyncFd owns.
            let read = unsafe {
                libc::read(
                    timer.get_ref().as_raw_fd(),
                    (&raw mut expirations).cast(),
                    size_of::<u64>(),
                )
            };
            if read == size_of::<u64>() as isize {
                self.set_for = None;
                return;
            }
            // Not yet due (EAGAIN): the readiness was stale.
            ready.clear_ready();
        }
    }

    fn set(&mut self, when: Instant) -> Result<()> {
        // Made at the first wait; kept for the next.
        let timer = match self.timer.take() {
            Some(timer) => timer,
            None => Self::timer()?,
        };
        let timer = self.timer.insert(timer);
        // Relative: `Instant` is CLOCK_MONOTONIC, but std does not expose its timespec. A zero
        // value would disarm the timer, so a moment already past is set 1 ns ahead.
        let after = when
            .saturating_duration_since(Instant::now())
            .max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                // `as _`: musl's time_t is about to change width, and the cast follows it.
                tv_sec: after.as_secs() as _,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and itimerspec; the old value is not asked for.
        let set = unsafe {
            libc::timerfd_settime(timer.get_ref().as_raw_fd(), 0, &spec, std::ptr::null_mut())
        };
        if set != 0 {
            return Err(io::Error::last_os_error()).context("setting a timerfd");
        }
        self.set_for = Some(when);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn wakes_at_the_moment_asked_and_not_before() {
        runtime().block_on(async {
            let mut alarm = Alarm::new();
            let start = Instant::now();
            alarm.at(Some(start + Duration::from_millis(30))).await;
            assert!(start.elapsed() >= Duration::from_millis(30));
            // Set again for a moment already past: completes at once.
            alarm.at(Some(start)).await;
        });
    }

    #[test]
    fn a_cancelled_wait_leaves_it_set_and_a_new_moment_resets_it() {
        runtime().block_on(async {
            let mut alarm = Alarm::new();
            let start = Instant::now();
            let far = start + Duration::from_secs(3600);
            tokio::select! {
                () = alarm.at(Some(far)) => panic!("an hour passed"),
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
            assert_eq!(alarm.set_for, Some(far));
            alarm.at(Some(start + Duration::from_millis(20))).await;
            assert!(start.elapsed() >= Duration::from_millis(20));
            assert_eq!(alarm.set_for, None);
        });
    }

    #[test]
    fn without_a_moment_it_never_completes() {
        runtime().block_on(async {
            let mut alarm = Alarm::new();
            tokio::select! {
                () = alarm.at(None) => panic!("completed without a moment"),
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        });
    }
}
