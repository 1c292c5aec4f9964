//! Release builds of the binaries that run inside the guest.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::workspace;

/// The guest-side load generator (`xtask/src/bin/rcu-workload.rs`).
pub const WORKLOAD_BIN: &str = "rcu-workload";
/// The tracer itself.
pub const RCUTRACE_BIN: &str = "rcutrace";
/// The guest-side benchmark driver (`xtask/src/bin/rcu-bench.rs`).
pub const BENCH_BIN: &str = "rcu-bench";

/// `cargo`, run in the workspace root.
pub fn cargo() -> Command {
    // Under cargo (xtask runs, tests) CARGO names the toolchain's own cargo.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace::root());
    cmd
}

/// Runs `cargo ARGS...` in the workspace root; fails unless it succeeds.
pub fn run_cargo(args: &[&str]) -> Result<()> {
    let status = cargo().args(args).status().context("could not run cargo")?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Runs `cargo build --release` with the given extra arguments.
pub fn cargo_build_release(args: &[&str]) -> Result<()> {
    run_cargo(&[&["build", "--release"], args].concat())
}

/// Builds rcu-workload in release mode (a no-op when fresh) and returns its path.
pub fn build_workload() -> Result<PathBuf> {
    cargo_build_release(&["-p", "xtask", "--bin", WORKLOAD_BIN])
        .context("building the guest workload failed")?;
    existing(workspace::release_binary(WORKLOAD_BIN))
}

/// Builds the benchmark driver in release mode and returns its path.
pub fn build_bench() -> Result<PathBuf> {
    cargo_build_release(&["-p", "xtask", "--bin", BENCH_BIN])
        .context("building the benchmark driver failed")?;
    existing(workspace::release_binary(BENCH_BIN))
}

/// Builds rcutrace in release mode and returns its path.
pub fn build_rcutrace() -> Result<PathBuf> {
    cargo_build_release(&["-p", RCUTRACE_BIN]).context(
        "building rcutrace failed; see cargo's messages above \
         (the eBPF toolchain comes from scripts/setup)",
    )?;
    existing(workspace::release_binary(RCUTRACE_BIN))
}

/// Builds both guest binaries, the workload first since it has no special toolchain needs.
pub fn build_all() -> Result<(PathBuf, PathBuf)> {
    let workload = build_workload()?;
    let rcutrace = build_rcutrace()?;
    Ok((rcutrace, workload))
}

fn existing(path: PathBuf) -> Result<PathBuf> {
    if !path.is_file() {
        bail!(
            "cargo reported success but {} does not exist",
            path.display()
        );
    }
    Ok(path)
}
