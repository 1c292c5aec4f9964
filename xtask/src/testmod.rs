//! Builds the test kernel module (xtask/testmod: `rcutrace_test.ko`) against Debian's own
//! headers for a test kernel, and adds it to guest jobs. The module calls RCU update-side
//! functions on command through /proc/rcutrace_test and counts what it did: exact ground truth
//! for the VM tests. Its interface is described at the top of `rcutrace_test.c`.
//!
//! scripts/setup extracts each kernel's headers under target/kernels/<series>/headers; the
//! module is built into target/testmod/<series>/ and rebuilt only when its sources change.

use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};

use crate::vm::{GuestJob, Kernel};
use crate::workspace;

/// Where `GuestJob::with_test_module` puts the module in the guest.
pub const GUEST_PATH: &str = "/lib/rcutrace_test.ko";
/// The module's name, as /proc/modules and /proc/kallsyms show it.
pub const MODULE_NAME: &str = "rcutrace_test";
/// Its control file in the guest.
pub const PROC_FILE: &str = "/proc/rcutrace_test";

const SOURCES: [&str; 2] = ["rcutrace_test.c", "Kbuild"];
const KO: &str = "rcutrace_test.ko";

/// The module's sources.
pub fn source_dir() -> PathBuf {
    workspace::root().join("xtask").join("testmod")
}

/// Where the module for `series` is built.
pub fn build_dir(series: &str) -> PathBuf {
    workspace::target_dir().join("testmod").join(series)
}

/// The kernel build tree for `series`: Debian's headers for exactly the kernel that boots.
pub fn headers_dir(series: &str) -> Result<PathBuf> {
    let image = Kernel::Series(series.into()).resolve()?;
    let release = image
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
        .with_context(|| format!("unexpected kernel image name {}", image.display()))?;
    let tree = workspace::kernels_dir()
        .join(series)
        .join("headers/usr/src")
        .join(format!("linux-headers-{release}"));
    if !tree.join("Makefile").is_file() {
        bail!(
            "no headers for kernel {release} at {}: run scripts/setup",
            tree.display()
        );
    }
    Ok(tree)
}

/// Builds `rcutrace_test.ko` for the kernel series (e.g. "6.1") and returns its path.
/// A no-op when the module is newer than its sources and the headers.
pub fn build(series: &str) -> Result<PathBuf> {
    let headers = headers_dir(series)?;
    let dir = build_dir(series);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Test binaries run in parallel: one build per directory at a time.
    let _lock = lock(&dir.join(".lock"))?;

    for name in SOURCES {
        copy_if_changed(&source_dir().join(name), &dir.join(name))?;
    }
    let ko = dir.join(KO);
    let mut inputs: Vec<PathBuf> = SOURCES.iter().map(|n| dir.join(n)).collect();
    inputs.push(headers.join("Module.symvers"));
    if is_newer_than_all(&ko, &inputs) {
        return Ok(ko);
    }

    let output = Command::new("make")
        .arg("-C")
        .arg(&headers)
        .arg(format!("M={}", dir.display()))
        .arg("modules")
        .output()
        .context("could not run make (scripts/setup installs it)")?;
    if !output.status.success() || !ko.is_file() {
        bail!(
            "building the test module for {series} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(ko)
}

impl GuestJob {
    /// Adds the test module, built for this job's kernel series, at [`GUEST_PATH`]. The job's
    /// script loads it itself (`insmod /lib/rcutrace_test.ko`).
    pub fn with_test_module(self) -> Result<Self> {
        let Kernel::Series(series) = &self.kernel else {
            bail!(
                "the test module is built for the downloaded kernel series only, not {}",
                self.kernel
            );
        };
        let ko = build(series)?;
        Ok(self.file(ko, GUEST_PATH))
    }
}

fn copy_if_changed(from: &Path, to: &Path) -> Result<()> {
    let content = fs::read(from).with_context(|| format!("reading {}", from.display()))?;
    if fs::read(to).ok().as_deref() != Some(content.as_slice()) {
        fs::write(to, content).with_context(|| format!("writing {}", to.display()))?;
    }
    Ok(())
}

fn is_newer_than_all(target: &Path, inputs: &[PathBuf]) -> bool {
    let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(built) = modified(target) else {
        return false;
    };
    inputs
        .iter()
        .all(|input| modified(input).is_some_and(|t: SystemTime| t <= built))
}

/// An exclusive lock held until the returned file is dropped.
fn lock(path: &Path) -> Result<File> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("locking {}", path.display()));
    }
    Ok(file)
}
