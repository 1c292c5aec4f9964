use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use xtask::vm::{self, GuestJob, Kernel, shell_quote};
use xtask::{bpftrace, build, dist, setup, soak, workspace};

#[derive(Parser)]
#[command(about = "Developer tasks for rcutrace")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build rcutrace (static, musl) and the guest workload (rcu-workload) in release mode.
    Build,
    /// Build what an installation needs into target/dist/: the static rcutrace, its man pages
    /// and shell completions (bash, zsh, fish).
    Dist,
    /// Boot a Debian kernel in QEMU and run `rcutrace ARGS...` (or a shell script) in it as root.
    #[command(after_help = "EXAMPLES:\n    \
        cargo xtask vm -- --help\n    \
        cargo xtask vm --kernel 6.1 -- ARGS...\n    \
        cargo xtask vm --idle --cpus 4 -- ARGS...\n    \
        cargo xtask vm --script session.sh   (rcutrace and rcu-workload are on its PATH)\n    \
        cargo xtask vm --cpus 64 --memory-mb 4096 --test-module --script session.sh")]
    Vm(VmArgs),
    /// Run the whole test suite: set-up, fmt, clippy, unit tests, VM tests on 6.1, 6.12 and 7.3.
    Test,
    /// Measure rcutrace against bpftrace and against no tracer in one guest; full-size runs
    /// write the table to BENCHMARKS.md.
    // The benchmark's own binary parses the arguments: `cargo xtask bench --help` is its help.
    #[command(disable_help_flag = true)]
    Bench {
        /// The benchmark's arguments (`cargo xtask bench --help` lists them).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Boot chosen scenarios again and again on one kernel and count the boots that passed,
    /// hung or failed, with the state collected at each hang (not part of `cargo xtask test`).
    #[command(after_help = "EXAMPLES:\n    \
        cargo xtask soak --kernel 6.12\n    \
        cargo xtask soak --kernel 6.1 --boots 10 --scenario seed-srlat --scenario flood-callbacks")]
    Soak(SoakArgs),
}

#[derive(Args)]
struct SoakArgs {
    /// Kernel to boot: 6.1, 6.12, 7.3 (downloaded by scripts/setup) or a path to a vmlinuz.
    #[arg(long, default_value = "6.12")]
    kernel: Kernel,
    /// Boots of each scenario.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    boots: u32,
    /// A scenario to repeat (repeatable; default: all of them).
    #[arg(long = "scenario", value_enum)]
    scenarios: Vec<soak::Scenario>,
    /// A boot that runs longer than this many seconds counts as hung.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(30..))]
    timeout: u64,
    /// Guest CPUs (at least 2: membarrier needs them to call synchronize_rcu()).
    #[arg(long, default_value_t = vm::DEFAULT_CPUS, value_parser = clap::value_parser!(u32).range(2..=64))]
    cpus: u32,
}

#[derive(Args)]
struct VmArgs {
    /// Kernel to boot: 6.1, 6.12, 7.3 (downloaded by scripts/setup) or a path to a vmlinuz.
    #[arg(long, default_value = "6.12")]
    kernel: Kernel,
    /// Guest CPUs.
    #[arg(long, default_value_t = vm::DEFAULT_CPUS, value_parser = clap::value_parser!(u32).range(1..=64))]
    cpus: u32,
    /// CPUs the firmware lists in all, the rest possible but not online (QEMU's maxcpus).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    max_cpus: Option<u32>,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = vm::DEFAULT_MEMORY_MB, value_parser = clap::value_parser!(u32).range(256..))]
    memory_mb: u32,
    /// Do not start `rcu-workload background` next to rcutrace.
    #[arg(long)]
    idle: bool,
    /// Give up and kill the guest after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Run this shell script (busybox sh, as root, in /tmp) instead of one rcutrace command:
    /// several commands, or a command beside a workload of your own, in one boot.
    #[arg(long, value_name = "FILE", conflicts_with = "args")]
    script: Option<PathBuf>,
    /// Add this to the guest kernel's command line (repeatable), e.g. `--append rcu_nocbs=all`.
    #[arg(long, value_name = "OPTION")]
    append: Vec<String>,
    /// Also put the test module, built for the kernel, at /lib/rcutrace_test.ko: a script
    /// loads it (`insmod /lib/rcutrace_test.ko`) and drives it with `rcu-workload module OP N`.
    #[arg(long, requires = "script")]
    test_module: bool,
    /// Also put Debian's bpftrace (installed by `scripts/setup --bench`) at the host's path, to
    /// look at rcutrace from beside it; the guest gets at least the memory its libraries need.
    #[arg(long, requires = "script")]
    bpftrace: bool,
    /// Arguments for rcutrace.
    #[arg(last = true)]
    args: Vec<String>,
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Cmd::Build => build_command(),
        Cmd::Dist => dist_command(),
        Cmd::Vm(args) => vm_command(args),
        Cmd::Test => test_command(),
        Cmd::Bench { args } => bench_command(&args),
        Cmd::Soak(args) => soak_command(args),
    };
    // Printed here rather than returned so a set RUST_BACKTRACE does not bury the message.
    result.unwrap_or_else(|e| {
        eprintln!("xtask: error: {e:#}");
        ExitCode::FAILURE
    })
}

fn build_command() -> Result<ExitCode> {
    let (rcutrace, workload) = build::build_all()?;
    eprintln!(
        "xtask: built {} and {}",
        relative(&rcutrace),
        relative(&workload)
    );
    Ok(ExitCode::SUCCESS)
}

fn dist_command() -> Result<ExitCode> {
    setup::run_with(&["--no-vm"])?;
    let dist = dist::run()?;
    eprintln!("xtask: installable files in {}:", relative(&dist.dir));
    for file in &dist.files {
        eprintln!("  {file}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A path inside the workspace, relative to its root.
fn relative(path: &Path) -> String {
    path.strip_prefix(workspace::root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Where `--script` puts the user's script in the guest.
const GUEST_SCRIPT: &str = "/root/script.sh";

fn vm_command(args: VmArgs) -> Result<ExitCode> {
    // Read first: a wrong path is told before minutes of building and booting.
    if let Some(path) = &args.script {
        std::fs::metadata(path)
            .and_then(|m| {
                if m.is_file() {
                    Ok(())
                } else {
                    Err(std::io::Error::other("not a regular file"))
                }
            })
            .with_context(|| format!("--script {}", path.display()))?;
    }
    let kernel_image = ensure_vm_prerequisites(&args.kernel)?;
    let (rcutrace, workload) = build::build_all()?;

    let mut script = String::new();
    if !args.idle {
        script.push_str("/bin/rcu-workload background >/dev/null &\nworkload=$!\n");
    }
    if args.script.is_some() {
        script.push_str(&format!("sh {GUEST_SCRIPT}"));
    } else {
        script.push_str("/bin/rcutrace");
        for arg in &args.args {
            script.push(' ');
            script.push_str(&shell_quote(arg));
        }
    }
    script.push_str("\nrc=$?\n");
    if !args.idle {
        script.push_str("kill $workload 2>/dev/null; wait $workload 2>/dev/null\n");
    }
    script.push_str("exit $rc\n");

    let mut files = vec![
        (rcutrace, "/bin/rcutrace".into()),
        (workload, "/bin/rcu-workload".into()),
    ];
    if let Some(path) = &args.script {
        files.push((path.clone(), GUEST_SCRIPT.into()));
    }
    let mut job = GuestJob {
        kernel: args.kernel.clone(),
        cpus: args.cpus,
        memory_mb: args.memory_mb,
        files,
        script,
        timeout: Duration::from_secs(args.timeout),
        kernel_args: args.append.clone(),
        max_cpus: args.max_cpus,
        boot_again: true,
    };
    if args.test_module {
        job = job.with_test_module()?;
    }
    if args.bpftrace {
        setup::run_with(&["--bench"])?;
        job = job.file(bpftrace::HOST_BPFTRACE, bpftrace::HOST_BPFTRACE);
        job.memory_mb = job.memory_mb.max(vm::BPFTRACE_MEMORY_MB);
    }
    let what = match &args.script {
        Some(path) => format!("the script {}", path.display()),
        None => "rcutrace".to_string(),
    };
    eprintln!(
        "xtask: booting {} ({}) with {} CPUs, {}",
        args.kernel,
        file_name(&kernel_image),
        args.cpus,
        if args.idle {
            "idle"
        } else {
            "rcu-workload background running"
        }
    );
    let out = vm::run(&job, true)?;

    let console_log = workspace::vm_dir().join("last-console.log");
    std::fs::write(&console_log, &out.console)
        .with_context(|| format!("writing {}", console_log.display()))?;
    let status = out.status.unwrap_or(1);
    eprintln!(
        "xtask: {what} exited with status {status}; guest booted in {}, whole run {:.1} s \
         (kernel console: {})",
        out.boot_time
            .map_or("?".to_string(), |t| format!("{:.1} s", t.as_secs_f64())),
        out.elapsed.as_secs_f64(),
        console_log.display()
    );
    Ok(ExitCode::from(u8::try_from(status).unwrap_or(1)))
}

/// The benchmark is a crate of its own (`bench/`), which depends on this one: its host binary
/// takes the arguments, `--help` included, and its exit status is this command's.
fn bench_command(args: &[String]) -> Result<ExitCode> {
    let status = build::cargo()
        .args(["run", "--quiet", "--package", build::BENCH_PACKAGE])
        .args(["--bin", build::BENCH_HOST_BIN, "--"])
        .args(args)
        .status()
        .context("could not run cargo")?;
    Ok(match status.code() {
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        // Killed by a signal: cargo or the benchmark has said why, if anything.
        None => ExitCode::FAILURE,
    })
}

fn soak_command(args: SoakArgs) -> Result<ExitCode> {
    let scenarios = if args.scenarios.is_empty() {
        soak::Scenario::ALL.to_vec()
    } else {
        args.scenarios
    };
    if scenarios.contains(&soak::Scenario::SeedSrlat) {
        setup::run_with(&["--bench"])?; // bpftrace
    }
    ensure_vm_prerequisites(&args.kernel)?;
    eprintln!(
        "xtask: soak on {}: {} boots of {}, {} s each at most",
        args.kernel,
        args.boots,
        scenarios
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", "),
        args.timeout
    );
    let report = soak::run(&soak::Options {
        kernel: args.kernel,
        boots: args.boots,
        scenarios,
        timeout: Duration::from_secs(args.timeout),
        cpus: args.cpus,
    })?;
    print!("{}", report.markdown());
    Ok(ExitCode::SUCCESS)
}

/// Makes sure the toolchain, QEMU and the kernels are there; returns the kernel image.
fn ensure_vm_prerequisites(kernel: &Kernel) -> Result<PathBuf> {
    setup::run()?;
    let missing = vm::missing_host_tools();
    if !missing.is_empty() {
        bail!("still missing after scripts/setup: {}", missing.join(", "));
    }
    kernel.resolve()
}

/// The whole test suite: formatting, lints, unit tests, and the VM tests on the three kernels.
fn test_command() -> Result<ExitCode> {
    setup::run()?;
    cargo(&["fmt", "--all", "--check"]).context("code is not formatted: run cargo fmt")?;
    cargo(&["clippy", "--all-targets", "--", "-D", "warnings"]).context("clippy found problems")?;
    build::build_all()?;
    let xtask::test_runner::Totals { passed, failed } = xtask::test_runner::run_all()?;
    println!("tests: {passed} passed, {failed} failed");
    if failed > 0 {
        bail!("{failed} tests failed");
    }
    Ok(ExitCode::SUCCESS)
}

fn cargo(args: &[&str]) -> Result<()> {
    eprintln!("xtask: cargo {}", args.join(" "));
    build::run_cargo(args)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}
