//! The benchmark's guest side, which the rcu-bench driver (`bench/src/bin/rcu-bench.rs`) runs
//! in the order it sets: `phases` measures, one file per group of measurements; `tracer`
//! launches a tracer, waits until it has attached and stops it with what it cost; `procfs`
//! reads the kernel's and a process's figures; `referee` counts the RCU work of a footprint;
//! `loads` makes the timed system calls and the steady loads the tracers run beside.

mod loads;
pub mod phases;
pub mod procfs;
mod referee;
mod tracer;

use std::time::Duration;

use crate::sample::{Config, Metric, Sample};

/// What the driver was asked to do (its command line).
pub struct Options {
    /// Repetitions of every measurement.
    pub reps: u32,
    /// getppid() calls per reader-path measurement.
    pub calls: u64,
    /// membarrier() calls per latency-path measurement.
    pub membarriers: u64,
    /// Each tracer's CPU-time run, and each always-on command's watch.
    pub window: Duration,
    /// The tracers' paths in the guest.
    pub rcutrace: String,
    pub bpftrace: String,
    /// Only what grows with the CPU count (`--scaling`).
    pub scaling: bool,
}

/// `items` in the order of repetition `rep`: rotating spreads drift and order effects evenly.
pub fn rotated<T: Copy>(items: &[T], rep: u32) -> Vec<T> {
    let mut items = items.to_vec();
    let len = items.len();
    if len > 0 {
        items.rotate_left(rep as usize % len);
    }
    items
}

/// Prints one measured value as the line the host reads back.
pub(crate) fn sample(metric: Metric, config: Config, value: f64) {
    let sample = Sample {
        metric,
        config,
        value,
    };
    println!("{}", sample.line());
}

/// Progress, on stderr: stdout is for the lines the host reads back.
pub(crate) fn progress(msg: &str) {
    eprintln!("rcu-bench: {msg}");
}
