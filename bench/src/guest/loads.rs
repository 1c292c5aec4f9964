//! The work the tracers are measured on: timed loops of getppid() (one `rcu_read_lock()`
//! each) and membarrier() (one `synchronize_rcu()` each), and steady getppid() loads on a
//! thread of their own, bare or paced by user-space work, that run while a tracer watches.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use xtask::guest::sys_getppid;

use crate::MEMBARRIER_WARMUP;
use crate::stats::median;

/// Wall-clock ns per getppid() call.
pub(crate) fn getppid_loop(calls: u64) -> f64 {
    let started = Instant::now();
    for _ in 0..calls {
        sys_getppid();
    }
    started.elapsed().as_nanos() as f64 / calls as f64
}

/// One membarrier(MEMBARRIER_CMD_GLOBAL) call, its failure as a message.
pub(crate) fn membarrier_global() -> Result<(), String> {
    xtask::guest::sys_membarrier_global()
        .map_err(|e| format!("membarrier(MEMBARRIER_CMD_GLOBAL) failed: {e}"))
}

/// After a few untimed calls: the mean wall-clock ns per membarrier(MEMBARRIER_CMD_GLOBAL)
/// call, and the median of this thread's CPU ns per call. The CPU time leaves out the sleep in
/// synchronize_rcu(), so it shows the probes' cost on the caller; the median leaves out the
/// calls during which the emulator ran the other CPU.
pub(crate) fn membarrier_loop(calls: u64) -> Result<(f64, f64), String> {
    for _ in 0..MEMBARRIER_WARMUP {
        membarrier_global()?;
    }
    let mut cpu = Vec::with_capacity(calls as usize);
    let started = Instant::now();
    for _ in 0..calls {
        let before = thread_cpu_ns();
        membarrier_global()?;
        cpu.push(thread_cpu_ns().saturating_sub(before) as f64);
    }
    let wall = started.elapsed().as_nanos() as f64;
    let median = median(&cpu).ok_or("no membarrier() call was timed")?;
    Ok((wall / calls as f64, median))
}

fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// getppid() calls on a thread of their own until stopped, `spin` iterations of user-space
/// work before each; the calls made so far can be read at any time, and the load logs its
/// progress (CLOCK_MONOTONIC ns, calls so far) after every hundred calls.
pub(crate) struct SteadyLoad {
    calls: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<(u64, u64)>>,
}

impl SteadyLoad {
    pub(crate) fn start(spin: u64) -> Self {
        let calls = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (calls, stop) = (Arc::clone(&calls), Arc::clone(&stop));
            thread::spawn(move || {
                let mut progress = vec![(monotonic_ns(), 0)];
                let mut made = 0;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..100 {
                        work(spin);
                        sys_getppid();
                    }
                    made += 100;
                    calls.fetch_add(100, Ordering::Relaxed);
                    progress.push((monotonic_ns(), made));
                }
                progress
            })
        };
        SteadyLoad {
            calls,
            stop,
            thread,
        }
    }

    /// The calls the load makes over the next `window`.
    pub(crate) fn measure(&self, window: Duration) -> Calls {
        let (before, started) = (self.calls.load(Ordering::Relaxed), Instant::now());
        thread::sleep(window);
        Calls {
            calls: self.calls.load(Ordering::Relaxed) - before,
            elapsed: started.elapsed(),
        }
    }

    /// Stops the load; its progress log.
    pub(crate) fn stop(self) -> Vec<(u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// Calls a load made over a stretch of time.
pub(crate) struct Calls {
    pub(crate) calls: u64,
    elapsed: Duration,
}

impl Calls {
    pub(crate) fn ns_per_call(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.calls.max(1) as f64
    }

    pub(crate) fn per_second(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }
}

/// CLOCK_MONOTONIC now, in ns: the clock rcutrace logs its sampled windows on.
fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `clock` now, in ns.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// `spin` iterations of arithmetic the compiler cannot drop.
fn work(spin: u64) {
    let mut x = 0u64;
    for i in 0..spin {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    std::hint::black_box(x);
}

/// The iterations of `work` that take about `duration` on this machine.
pub(crate) fn spin_for(duration: Duration) -> u64 {
    const TRIAL: u64 = 1_000_000;
    // Once untimed: the emulator translates the loop on its first run.
    work(TRIAL);
    let started = Instant::now();
    work(TRIAL);
    let per_iteration = started.elapsed().as_secs_f64() / TRIAL as f64;
    (duration.as_secs_f64() / per_iteration.max(1e-12)) as u64
}
