//! Release builds of the binaries that run inside the guest.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::workspace;

/// The guest-side load generator (`xtask/src/bin/rcu-workload.rs`).
pub const WORKLOAD_BIN: &str = "rcu-workload";
/// The tracer itself.
pub const RCUTRACE_BIN: &str = "rcutrace";
/// rcutrace is built for this target: statically linked against musl, so the one file runs on
/// any x86_64 Linux, the busybox guests (which have no C library) included.
pub const STATIC_TARGET: &str = "x86_64-unknown-linux-musl";
/// The benchmark's package (`bench/`): a crate of its own, which depends on this one.
pub const BENCH_PACKAGE: &str = "rcu-bench";
/// The guest-side benchmark driver (`bench/src/bin/rcu-bench.rs`).
pub const BENCH_BIN: &str = "rcu-bench";
/// The benchmark's host side (`bench/src/main.rs`), which `cargo xtask bench` runs.
pub const BENCH_HOST_BIN: &str = "bench";

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
    cargo_build_release(&["-p", BENCH_PACKAGE, "--bin", BENCH_BIN])
        .context("building the benchmark driver failed")?;
    existing(workspace::release_binary(BENCH_BIN))
}

/// Builds the static rcutrace in release mode and returns its path.
pub fn build_rcutrace() -> Result<PathBuf> {
    cargo_build_release(&["-p", RCUTRACE_BIN, "--target", STATIC_TARGET]).context(
        "building rcutrace failed; see cargo's messages above \
         (the eBPF toolchain and the musl target come from scripts/setup)",
    )?;
    let binary = existing(workspace::release_binary_for(STATIC_TARGET, RCUTRACE_BIN))?;
    if has_interpreter(&binary)? {
        bail!(
            "{} is dynamically linked (it names a program interpreter): not the static build",
            binary.display()
        );
    }
    Ok(binary)
}

/// Whether an ELF file asks for a program interpreter (the dynamic loader): a static
/// executable, static-pie included, has no PT_INTERP program header.
pub fn has_interpreter(path: &std::path::Path) -> Result<bool> {
    const PT_INTERP: u32 = 3;
    let elf = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        elf.get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    // 64-bit little-endian ELF only: the one kind this project builds.
    if !elf.starts_with(b"\x7fELF\x02\x01") {
        bail!("{} is not a 64-bit little-endian ELF file", path.display());
    }
    let malformed = || anyhow::anyhow!("{}: malformed ELF header", path.display());
    let table = u64_at(0x20).ok_or_else(malformed)? as usize;
    let entry_size = u16_at(0x36).ok_or_else(malformed)? as usize;
    let entries = u16_at(0x38).ok_or_else(malformed)? as usize;
    for i in 0..entries {
        if u32_at(table + i * entry_size).ok_or_else(malformed)? == PT_INTERP {
            return Ok(true);
        }
    }
    Ok(false)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_executable_has_an_interpreter() {
        let this_test = std::env::current_exe().unwrap();
        assert!(has_interpreter(&this_test).unwrap());
        assert!(!has_interpreter(std::path::Path::new(crate::vm::BUSYBOX)).unwrap());
        assert!(has_interpreter(std::path::Path::new("Cargo.toml")).is_err());
    }
}
