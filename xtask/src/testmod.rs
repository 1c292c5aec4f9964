//! Builds the test kernel module (xtask/testmod: `rcutrace_test.ko`) against Debian's own
//! headers for a test kernel, and adds it to guest jobs. The module calls RCU update-side
//! functions on command through /proc/rcutrace_test and counts what it did: exact ground truth
//! for the VM tests. Its interface is described at the top of `rcutrace_test.c`.
//!
//! scripts/setup extracts each kernel's headers under target/kernels/<series>/headers; the
//! module is built into target/testmod/<series>/ and rebuilt only when its sources change.
//! The newest kernel's headers and tools need Debian 13: scripts/setup installs them in a
//! Debian 13 chroot (target/kernels/<series>/chroot), and the module is built in there, its
//! build directory bind-mounted on the chroot's /build in a mount namespace of its own.

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

/// Where the module for a kernel is built: against headers extracted on this machine, or inside
/// a Debian 13 chroot that has them installed.
pub enum BuildTree {
    Extracted(PathBuf),
    Chroot { root: PathBuf, headers: String },
}

impl BuildTree {
    /// The kernel's Module.symvers, as seen from this machine.
    fn symvers(&self) -> PathBuf {
        match self {
            BuildTree::Extracted(tree) => tree.join("Module.symvers"),
            BuildTree::Chroot { root, headers } => root
                .join(headers.trim_start_matches('/'))
                .join("Module.symvers"),
        }
    }

    /// `make modules` for the module in `dir`.
    fn make(&self, dir: &Path) -> Command {
        match self {
            BuildTree::Extracted(tree) => {
                let mut cmd = Command::new("make");
                cmd.arg("-C")
                    .arg(tree)
                    .arg(format!("M={}", dir.display()))
                    .arg("modules");
                cmd
            }
            BuildTree::Chroot { root, headers } => {
                // objtool reads /proc; both mounts vanish with the namespace.
                let mut cmd = Command::new("unshare");
                cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
                    .arg(
                        "mount -t proc proc \"$0/proc\" && mount --bind \"$1\" \"$0/build\" && \
                         exec chroot \"$0\" make -C \"$2\" M=/build modules",
                    )
                    .arg(root)
                    .arg(dir)
                    .arg(headers);
                cmd
            }
        }
    }
}

/// The release of the series' kernel image, e.g. `6.1.0-57-cloud-amd64`.
fn release(series: &str) -> Result<String> {
    let image = Kernel::Series(series.into()).resolve()?;
    image
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
        .map(str::to_string)
        .with_context(|| format!("unexpected kernel image name {}", image.display()))
}

/// The tree to build the module for `series` in: the chroot when scripts/setup made one.
pub fn build_tree(series: &str) -> Result<BuildTree> {
    let release = release(series)?;
    let root = workspace::kernels_dir().join(series).join("chroot");
    if root.join(format!(".ready-{release}")).is_file() {
        let headers = format!("/usr/src/linux-headers-{release}");
        if !root.join(&headers[1..]).join("Makefile").is_file() {
            bail!(
                "the chroot {} lacks {headers}: remove it and run scripts/setup",
                root.display()
            );
        }
        return Ok(BuildTree::Chroot { root, headers });
    }
    headers_dir(series).map(BuildTree::Extracted)
}

/// The kernel build tree for `series`: Debian's headers for exactly the kernel that boots.
pub fn headers_dir(series: &str) -> Result<PathBuf> {
    let release = release(series)?;
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
    let tree = build_tree(series)?;
    let dir = build_dir(series);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Test binaries run in parallel: one build per directory at a time.
    let _lock = lock(&dir.join(".lock"))?;

    for name in SOURCES {
        copy_if_changed(&source_dir().join(name), &dir.join(name))?;
    }
    let ko = dir.join(KO);
    let mut inputs: Vec<PathBuf> = SOURCES.iter().map(|n| dir.join(n)).collect();
    inputs.push(tree.symvers());
    if is_newer_than_all(&ko, &inputs) {
        return Ok(ko);
    }

    let output = tree
        .make(&dir)
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
