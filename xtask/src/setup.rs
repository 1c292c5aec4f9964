//! Runs scripts/setup, which installs (or confirms, in about a second) everything the builds
//! and the VM need: the eBPF toolchain, QEMU, busybox and the Debian kernels; with `--bench`,
//! also bpftrace for `cargo xtask bench`; with `--serve-test`, Debian's Prometheus server.
//! Whatever it prints goes to stderr: the standard output belongs to the command that needed
//! the set-up (`cargo xtask vm` shows the guest's output there).

use std::io;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::workspace;

pub fn run() -> Result<()> {
    run_with(&[])
}

/// scripts/setup with extra flags, e.g. `--bench`. Callers take turns: two tests (or two
/// xtask commands) setting up at once would both run apt, and the second finds its lock held.
pub fn run_with(flags: &[&str]) -> Result<()> {
    let target = workspace::target_dir();
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;
    let lock_path = target.join("setup.lock");
    let lock = std::fs::File::create(&lock_path)
        .with_context(|| format!("creating {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;
    let status = Command::new("bash")
        .arg(workspace::setup_script())
        .args(flags)
        .current_dir(workspace::root())
        .stdout(Stdio::from(
            io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .context("duplicating stderr")?,
        ))
        .status()
        .context("could not run scripts/setup")?;
    if !status.success() {
        bail!("scripts/setup failed ({status}); its message above says what is missing");
    }
    Ok(())
}
