//! The benchmark's host side, which `cargo xtask bench` hands its arguments to: one guest
//! running the rcu-bench driver, its table printed, and written to BENCHMARKS.md at full size.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;

use rcu_bench::{self as bench, Sizes, document};
use xtask::vm::{self, Kernel};
use xtask::workspace;

/// Measure rcutrace against bpftrace and against no tracer in one guest; full-size runs
/// write the table to BENCHMARKS.md.
#[derive(Parser)]
#[command(
    name = "cargo xtask bench",
    bin_name = "cargo xtask bench",
    after_help = "EXAMPLES:\n    \
        cargo xtask bench\n    \
        cargo xtask bench --kernel 6.1\n    \
        cargo xtask bench --kernel 6.12 --scaling 64   (what grows with the CPU count)\n    \
        cargo xtask bench --reps 1 --calls 20000 --membarriers 5 --window 1   (quick look, not recorded)"
)]
struct BenchArgs {
    /// Kernel to boot: 6.1, 6.12, 7.3 (downloaded by scripts/setup) or a path to a vmlinuz.
    #[arg(long, default_value = "6.12")]
    kernel: Kernel,
    /// Repetitions of every measurement (medians are quoted).
    #[arg(long, default_value_t = Sizes::FULL.reps, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// getppid() calls per reader-path measurement.
    #[arg(long, default_value_t = Sizes::FULL.calls, value_parser = clap::value_parser!(u64).range(1..))]
    calls: u64,
    /// membarrier(MEMBARRIER_CMD_GLOBAL) calls per latency-path measurement.
    #[arg(long, default_value_t = Sizes::FULL.membarriers, value_parser = clap::value_parser!(u64).range(1..))]
    membarriers: u64,
    /// Seconds of each tracer's CPU-time run.
    #[arg(long, default_value_t = Sizes::FULL.window_secs, value_parser = clap::value_parser!(u64).range(1..))]
    window: u64,
    /// Guest CPUs (at least 2: membarrier needs them to call synchronize_rcu()).
    #[arg(long, default_value_t = vm::DEFAULT_CPUS, value_parser = clap::value_parser!(u32).range(2..=64))]
    cpus: u32,
    /// Guest memory in MiB (bpftrace's libraries take about 200 MB of the initramfs).
    #[arg(long, default_value_t = vm::BPFTRACE_MEMORY_MB, value_parser = clap::value_parser!(u32).range(1024..))]
    memory_mb: u32,
    /// Give up and kill the guest after this many seconds (default: from the sizes).
    #[arg(long)]
    timeout: Option<u64>,
    /// Measure only what grows with the CPU count, in a guest of 2 CPUs and in one of CPUS:
    /// start-up, peak RSS, an `--interval` report's CPU, and gp's and stall's added CPU.
    #[arg(long, value_name = "CPUS", value_parser = clap::value_parser!(u32).range(4..=64))]
    scaling: Option<u32>,
    /// Write the kernel's section again from LOG, what a finished full-size run printed
    /// (`cargo xtask bench > LOG`), after the section's generator changed: nothing is measured.
    #[arg(long, value_name = "LOG", conflicts_with = "scaling")]
    replay: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    // Printed here rather than returned so a set RUST_BACKTRACE does not bury the message; as
    // xtask's own, since `cargo xtask bench` is what ran.
    bench_command(BenchArgs::parse()).unwrap_or_else(|e| {
        eprintln!("xtask: error: {e:#}");
        ExitCode::FAILURE
    })
}

fn bench_command(args: BenchArgs) -> Result<ExitCode> {
    let sizes = Sizes {
        reps: args.reps,
        calls: args.calls,
        membarriers: args.membarriers,
        window_secs: args.window,
    };
    let mut opts = bench::Options::new(args.kernel, sizes);
    opts.cpus = args.cpus;
    opts.memory_mb = args.memory_mb;
    opts.timeout = args.timeout.map(Duration::from_secs);
    if let Some(cpus) = args.scaling {
        return scaling_command(&opts, cpus);
    }
    if let Some(log) = &args.replay {
        return replay_command(log);
    }
    eprintln!(
        "xtask: benchmarking on {} with {} CPUs: {} repetitions (guest time limit {:.0} s)",
        opts.kernel,
        opts.cpus,
        sizes.reps,
        opts.timeout
            .unwrap_or_else(|| sizes.timeout())
            .as_secs_f64()
    );
    let outcome = bench::run(&opts, true)?;
    println!(
        "\nKernel {}, {}; whole guest run {:.0} s\n",
        outcome.kernel_release,
        opts.command(),
        outcome.elapsed.as_secs_f64()
    );
    println!("{}", outcome.summary.table());
    println!("{}", outcome.summary.targets());
    if sizes.is_full() {
        let series = write_kernel_section(&outcome, &opts)?;
        eprintln!(
            "xtask: the {series} kernel's section written to {}",
            bench::BENCHMARKS_MD
        );
    } else {
        eprintln!(
            "xtask: reduced sizes: {} left as it was (full size: --reps {} --calls {} \
             --membarriers {} --window {} or more)",
            bench::BENCHMARKS_MD,
            Sizes::FULL.reps,
            Sizes::FULL.calls,
            Sizes::FULL.membarriers,
            Sizes::FULL.window_secs
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the run's kernel's section to BENCHMARKS.md, with whether the run agrees with the
/// one it replaces; returns the kernel's series.
fn write_kernel_section(outcome: &bench::Outcome, opts: &bench::Options) -> Result<String> {
    write_section(&outcome.kernel_release, str::to_string, |before| {
        let mut section = bench::benchmarks_md(outcome, &opts.command(), &bench::today());
        if let Some(comparison) =
            before.and_then(|before| bench::against_previous(before, &section))
        {
            section.push_str(&comparison);
        }
        section
    })
}

/// `--replay LOG`: the section of the logged run's kernel, written again from its log.
fn replay_command(log: &std::path::Path) -> Result<ExitCode> {
    let text =
        std::fs::read_to_string(log).with_context(|| format!("reading {}", log.display()))?;
    let (outcome, sizes) = bench::replay(&text)?;
    anyhow::ensure!(
        sizes.is_full(),
        "{} is a reduced-size run's: only a full-size run's section is recorded",
        log.display()
    );
    let series = document::series(&outcome.kernel_release)
        .with_context(|| format!("no kernel series in {}", outcome.kernel_release))?;
    let kernel: Kernel = series.parse().map_err(anyhow::Error::msg)?;
    let opts = bench::Options::new(kernel, sizes);
    let series = write_kernel_section(&outcome, &opts)?;
    eprintln!(
        "xtask: the {series} kernel's section written again to {} from {}",
        bench::BENCHMARKS_MD,
        log.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `--scaling CPUS`: the scaling table, printed, and at full size written to BENCHMARKS.md
/// as the kernel's section of that many CPUs.
fn scaling_command(opts: &bench::Options, cpus: u32) -> Result<ExitCode> {
    let sizes = opts.sizes;
    eprintln!(
        "xtask: what grows with the CPU count on {}: 2 CPUs against {cpus}, {} repetitions",
        opts.kernel, sizes.reps
    );
    let outcome = bench::run_scaling(opts, cpus, true)?;
    let command = format!("{} --scaling {cpus}", opts.command());
    println!(
        "\nKernel {}, {command}; both guest runs {:.0} s\n",
        outcome.kernel_release,
        outcome.elapsed.as_secs_f64()
    );
    let table = outcome.summary.table();
    println!("{table}");
    for miss in outcome.summary.misses() {
        println!("missed: {miss}");
    }
    if sizes.reps >= Sizes::FULL.reps && sizes.window_secs >= Sizes::FULL.window_secs {
        let key = write_section(
            &outcome.kernel_release,
            |series| document::scaling_key(series, cpus),
            |_| bench::scaling_md(&outcome, &command, &bench::today(), cpus),
        )?;
        eprintln!(
            "xtask: the section `{key}` written to {}",
            bench::BENCHMARKS_MD
        );
    } else {
        eprintln!(
            "xtask: reduced sizes: {} left as it was (full size: --reps {} --window {} or more)",
            bench::BENCHMARKS_MD,
            Sizes::FULL.reps,
            Sizes::FULL.window_secs
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes one section of BENCHMARKS.md for the kernel of `kernel_release`, under the key
/// `key_of` makes of its series, as `section` makes it from the text it replaces (if any);
/// returns the key.
fn write_section(
    kernel_release: &str,
    key_of: impl FnOnce(&str) -> String,
    section: impl FnOnce(Option<&str>) -> String,
) -> Result<String> {
    let path = workspace::root().join(bench::BENCHMARKS_MD);
    let series = document::series(kernel_release)
        .with_context(|| format!("no kernel series in the release {kernel_release:?}"))?;
    let key = key_of(&series);
    let previous = std::fs::read_to_string(&path).unwrap_or_default();
    let before = document::section(&previous, &key);
    let text = document::with_section(&previous, &key, &section(before.as_deref()));
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(key)
}
