//! The measurements, one file per group, each a function the driver calls in its order:
//! `readers` (the reader path and the sampled reader mode), `latency` (the latency path),
//! `cpu_window`, `watching` (the always-on commands), `footprints`, `namespaces` (the
//! namespace load) and `programs` (the last pass, with bpf_stats); `scaling` is the run
//! of few and of many CPUs (`--scaling`); here, the run's facts and the kernel's.

mod cpu_window;
mod footprints;
mod latency;
mod namespaces;
mod programs;
mod readers;
mod scaling;
mod watching;

use std::process::Command;
use std::time::Instant;

use xtask::guest::online_cpus;

use super::procfs::KPROBE_LIST;
use super::{Options, sample};
use crate::sample::{Config, Metric};

pub use cpu_window::cpu_window;
pub use footprints::footprints;
pub use latency::latency_path;
pub use namespaces::namespace_load;
pub use programs::program_times;
pub use readers::{reader_path, sampled_readers};
pub use scaling::{count_startup, interval_reports};
pub use watching::{stall_startup, watching};

/// Checks what the measurements need, and prints the run's facts: the kernel, its CPUs, the
/// sizes and both tracers' versions.
pub fn begin(opts: &Options) -> Result<(), String> {
    if online_cpus() < 2 {
        return Err("needs 2 or more CPUs: membarrier skips synchronize_rcu() on one".into());
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_err(|e| format!("reading the kernel release: {e}"))?;
    println!("info kernel {}", release.trim());
    println!("info cpus {}", online_cpus());
    println!(
        "info sizes reps={} calls={} membarriers={} window={}",
        opts.reps,
        opts.calls,
        opts.membarriers,
        opts.window.as_secs()
    );
    println!(
        "info bpftrace {}",
        first_line_of(&opts.bpftrace, "--version")
    );
    println!(
        "info rcutrace {}",
        first_line_of(&opts.rcutrace, "--version")
    );
    std::fs::read_to_string(KPROBE_LIST)
        .map_err(|e| format!("reading {KPROBE_LIST} (is debugfs mounted?): {e}"))?;
    Ok(())
}

/// Facts about the kernel that bear on a tracer's start-up: reading /proc/kallsyms in full
/// (the kernel formats every symbol), and the size of the kernel's BTF.
pub fn kernel_facts() {
    let started = Instant::now();
    if let Ok(text) = std::fs::read_to_string("/proc/kallsyms") {
        sample(
            Metric::KallsymsReadMs,
            Config::Kernel,
            started.elapsed().as_secs_f64() * 1e3,
        );
        sample(
            Metric::KallsymsLines,
            Config::Kernel,
            text.lines().count() as f64,
        );
    }
    if let Ok(meta) = std::fs::metadata("/sys/kernel/btf/vmlinux") {
        sample(Metric::BtfKib, Config::Kernel, meta.len() as f64 / 1024.0);
    }
    let functions = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|root| {
            std::fs::read_to_string(format!("{root}/available_filter_functions")).ok()
        });
    if let Some(functions) = functions {
        sample(
            Metric::FtraceRecords,
            Config::Kernel,
            functions.lines().count() as f64,
        );
    }
}

/// The first line `PROGRAM ARG` prints, or why there is none.
fn first_line_of(program: &str, arg: &str) -> String {
    match Command::new(program).arg(arg).output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            text.lines()
                .next()
                .unwrap_or("(no output)")
                .trim()
                .to_string()
        }
        Err(e) => format!("(could not run {program}: {e})"),
    }
}
