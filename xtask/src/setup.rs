//! Runs scripts/setup, which installs (or confirms, in about a second) everything the builds
//! and the VM need: the eBPF toolchain, QEMU, busybox and the Debian kernels; with `--bench`,
//! also bpftrace for `cargo xtask bench`; with `--serve-test`, Debian's Prometheus server.

use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::workspace;

pub fn run() -> Result<()> {
    run_with(&[])
}

/// scripts/setup with extra flags, e.g. `--bench`.
pub fn run_with(flags: &[&str]) -> Result<()> {
    let status = Command::new("bash")
        .arg(workspace::setup_script())
        .args(flags)
        .current_dir(workspace::root())
        .status()
        .context("could not run scripts/setup")?;
    if !status.success() {
        bail!("scripts/setup failed ({status}); its message above says what is missing");
    }
    Ok(())
}
