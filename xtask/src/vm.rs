//! Boots a Debian kernel under QEMU (software emulation) and runs a shell job as root in the guest.
//!
//! The guest has four ISA serial ports, each written to its own host file so the kernel's messages never
//! mix with the job's output: ttyS0 is the kernel console, ttyS1 the job's stdout, ttyS2 its stderr and
//! ttyS3 its exit status. The job's stdout and stderr are serial ttys in raw mode, so programs see a
//! terminal (`TERM=dumb`); pipe through `cat` in the script for non-tty behaviour.
//!
//! Guests boot with the kernel's own stuck-task reporting on (soft lockups, tasks blocked for
//! more than 30 s; reports only, no panic) and every magic SysRq key enabled. When a job runs
//! past its time, or asks with `xtask-collect-state`, the runner collects the guest's state
//! through QEMU's monitor before going on (see `guest_state`), and a timeout's error
//! ([`GuestTimeout`]) says which tasks were blocked and where.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};

use crate::cpio::Archive;
use crate::guest_state::GuestState;
use crate::workspace;

pub const QEMU: &str = "qemu-system-x86_64";
pub const BUSYBOX: &str = "/bin/busybox";
pub const DEFAULT_CPUS: u32 = 2;
pub const DEFAULT_MEMORY_MB: u32 = 2048;
/// A guest with bpftrace in it (the benchmark's, and some tests' and soak scenarios'): room
/// for bpftrace's ~200 MB of libraries in its initramfs.
pub const BPFTRACE_MEMORY_MB: u32 = 3072;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Kernel series that scripts/setup downloads.
/// (7.3 is Debian's newest, from trixie-backports; its test module is built in a Debian 13 chroot.)
pub const KNOWN_SERIES: [&str; 3] = ["6.1", "6.12", "7.3"];

/// Which kernel to boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kernel {
    /// A series unpacked by scripts/setup under target/kernels/<series>/boot/, e.g. "6.1" or "6.12".
    Series(String),
    /// A vmlinuz anywhere on the host.
    Path(PathBuf),
}

impl FromStr for Kernel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(format!(
                "empty kernel name: use {} or a path to a vmlinuz",
                KNOWN_SERIES.join(", ")
            ));
        }
        if s.contains('/') || Path::new(s).is_file() {
            Ok(Kernel::Path(PathBuf::from(s)))
        } else {
            Ok(Kernel::Series(s.to_string()))
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kernel::Series(s) => write!(f, "{s}"),
            Kernel::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

impl Kernel {
    /// The vmlinuz to boot.
    pub fn resolve(&self) -> Result<PathBuf> {
        match self {
            Kernel::Path(p) if p.is_file() => Ok(p.clone()),
            Kernel::Path(p) => bail!("kernel image {} does not exist", p.display()),
            Kernel::Series(series) => {
                let boot = workspace::kernels_dir().join(series).join("boot");
                let mut images: Vec<PathBuf> = fs::read_dir(&boot)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("vmlinuz-"))
                    })
                    .collect();
                images.sort();
                match images.pop() {
                    Some(image) => Ok(image),
                    None if KNOWN_SERIES.contains(&series.as_str()) => bail!(
                        "no {series} kernel under {}: run scripts/setup to download it",
                        boot.display()
                    ),
                    None => bail!(
                        "unknown kernel {series:?}: use {} (after scripts/setup) or a path to a vmlinuz",
                        KNOWN_SERIES.join(", ")
                    ),
                }
            }
        }
    }
}

/// A shell job to run as root in a freshly booted guest.
#[derive(Debug, Clone)]
pub struct GuestJob {
    pub kernel: Kernel,
    pub cpus: u32,
    pub memory_mb: u32,
    /// Host files to copy in, with their guest paths. Dynamic ELF files bring the libraries `ldd` lists.
    pub files: Vec<(PathBuf, String)>,
    /// Run by busybox `sh` in /tmp, with stdin from /dev/null.
    pub script: String,
    pub timeout: Duration,
    /// Added to the kernel command line after the runner's own options (e.g. `rcu_nocbs=all`).
    pub kernel_args: Vec<String>,
    /// CPUs the firmware lists beyond `cpus`, as if sockets were empty (QEMU's `maxcpus`):
    /// the kernel counts them possible, not online.
    pub max_cpus: Option<u32>,
    /// Whether a boot that never reaches the job (`BootHang`) is followed by a second one.
    pub boot_again: bool,
}

impl GuestJob {
    pub fn new(kernel: Kernel, script: impl Into<String>) -> Self {
        GuestJob {
            kernel,
            cpus: DEFAULT_CPUS,
            memory_mb: DEFAULT_MEMORY_MB,
            files: Vec::new(),
            script: script.into(),
            timeout: DEFAULT_TIMEOUT,
            kernel_args: Vec::new(),
            max_cpus: None,
            boot_again: true,
        }
    }

    /// Adds a host file at a guest path.
    pub fn file(mut self, host: impl Into<PathBuf>, guest: impl Into<String>) -> Self {
        self.files.push((host.into(), guest.into()));
        self
    }
}

/// What a guest run produced.
#[derive(Debug, Clone)]
pub struct GuestOutput {
    pub stdout: String,
    pub stderr: String,
    /// The job's exit status; always `Some` when `run` succeeds.
    pub status: Option<i32>,
    /// The kernel console (ttyS0), with "\r" removed.
    pub console: String,
    /// Guest uptime when the job started, i.e. the boot time.
    pub boot_time: Option<Duration>,
    /// Wall time of the whole QEMU run.
    pub elapsed: Duration,
    /// The state collected at each `xtask-collect-state` of the job, in order.
    pub states: Vec<GuestState>,
}

/// The error of a guest that ran past its time: what it had printed, and its state, collected
/// before QEMU was killed. `anyhow::Error::downcast_ref` finds it under the added context.
#[derive(Debug)]
pub struct GuestTimeout {
    pub kernel: Kernel,
    pub timeout: Duration,
    pub stdout: String,
    pub stderr: String,
    /// The kernel console up to the collection (the dumps excluded).
    pub console: String,
    pub state: GuestState,
    /// Where the logs, registers and summary are kept.
    pub dir: PathBuf,
}

impl fmt::Display for GuestTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "guest ({}) timed out after {:.1?}; its state was collected, then QEMU killed.",
            self.kernel, self.timeout
        )?;
        write!(f, "{}", self.state)?;
        writeln!(
            f,
            "(every task's stack and CPU backtrace: {}; registers of each vCPU: {})",
            self.dir.join(CONSOLE).display(),
            self.dir.join(crate::guest_state::REGISTERS).display()
        )?;
        for (name, text) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if !text.trim().is_empty() {
                writeln!(f, "The job's {name} (its end):\n{}", tail_lines(text, 10))?;
            }
        }
        write!(
            f,
            "Console tail before the collection:\n{}",
            tail_lines(&self.console, 40)
        )
    }
}

impl std::error::Error for GuestTimeout {}

/// Boots `job.kernel`, runs `job.script` and powers off. With `echo`, the job's stdout and stderr are
/// also streamed live to the host's stdout and stderr.
pub fn run(job: &GuestJob, echo: bool) -> Result<GuestOutput> {
    let kernel = job.kernel.resolve()?;
    // Taken before the image is built, so the job's timeout counts from a free host core.
    let _slot = crate::vm_slots::acquire()?;
    let mut boots = 1;
    loop {
        let dir = RunDir::create()?;
        let result = run_in(job, &kernel, &dir.path, echo);
        let Err(error) = result else {
            return result;
        };
        // Keep the logs (not the image) of a failed run.
        let _ = fs::remove_file(dir.path.join(INITRD));
        let path = dir.keep();
        let error = error.context(format!("guest logs kept in {}", path.display()));
        // A boot that never reached the job ran nothing of the project's: boot again, saying
        // so, rather than fail a test on the emulator.
        if job.boot_again && boots < BOOTS && error.downcast_ref::<BootHang>().is_some() {
            eprintln!("xtask: {error:#}\nxtask: booting {} again", job.kernel);
            boots += 1;
            continue;
        }
        return Err(error);
    }
}

/// Boots per job: a second one only after a boot that never reached the job.
const BOOTS: u32 = 2;
/// How long a boot may take to reach the job. 64-CPU guests boot in 13-30 s, two at once on
/// two cores; one 7.3 boot of that shape once sat with 57 vCPUs halted and an empty console
/// until its 900 s timeout, before init ever ran.
const BOOT_LIMIT: Duration = Duration::from_secs(180);

/// The error of a guest whose kernel did not start the job within `BOOT_LIMIT`, with its
/// state collected before QEMU was killed.
#[derive(Debug)]
pub struct BootHang {
    pub kernel: Kernel,
    pub console: String,
    pub state: GuestState,
}

impl fmt::Display for BootHang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "guest ({}) had not started its job {:.0?} after QEMU did; its state was collected, \
             then QEMU killed.",
            self.kernel, BOOT_LIMIT
        )?;
        write!(f, "{}", self.state)?;
        write!(f, "Console tail:\n{}", tail_lines(&self.console, 20))
    }
}

impl std::error::Error for BootHang {}

const INITRD: &str = "initramfs.cpio.gz";
const CONSOLE: &str = "console.log";
const STDOUT: &str = "stdout";
const STDERR: &str = "stderr";
const STATUS: &str = "status";
const QEMU_LOG: &str = "qemu.log";
const MONITOR: &str = "monitor.sock";
/// The line a job's `xtask-collect-state` writes to the status port.
const COLLECT_REQUEST: &str = "collect";
/// Reporting only: a stuck kernel names itself on the console and the run goes on.
/// `no_timer_check`: on a loaded host the emulated timer can miss the boot-time IO-APIC check's
/// window, and the kernel panics before init ("IO-APIC + timer doesn't work!", seen by
/// `cargo xtask soak` on 6.12 in one boot of ten).
const KERNEL_ARGS: &str = "console=ttyS0 panic=-1 quiet sysrq_always_enabled \
                           softlockup_panic=0 hung_task_panic=0 no_timer_check";
/// The runner's own kernel options, then the job's.
fn kernel_command_line(extra: &[String]) -> String {
    std::iter::once(KERNEL_ARGS)
        .chain(extra.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

const BOOT_MARKER: &str = "xtask-vm: job start, uptime ";
const POLL: Duration = Duration::from_millis(20);

fn run_in(job: &GuestJob, kernel: &Path, dir: &Path, echo: bool) -> Result<GuestOutput> {
    if job.cpus == 0 || job.memory_mb < 128 {
        bail!("a guest needs at least 1 CPU and 128 MiB of memory");
    }
    let initrd = dir.join(INITRD);
    build_initramfs(job, &initrd)?;
    for name in [CONSOLE, STDOUT, STDERR, STATUS] {
        File::create(dir.join(name))?;
    }

    let serial = |name: &str| format!("file:{}", dir.join(name).display());
    let monitor = MonitorSocket::new(dir);
    let mut cmd = Command::new(QEMU);
    // Single-threaded TCG: with thread=multi, attaching and detaching kprobes and trampolines
    // while other vCPUs run the patched code crashed 6.12 guests (a NULL jump in the probed
    // code) within a few runs; one host thread for all vCPUs never did.
    cmd.args(["-accel", "tcg,thread=single", "-cpu", "max"])
        .args(["-m", &job.memory_mb.to_string()])
        .args(["-smp", &smp(job.cpus, job.max_cpus)])
        // No default NIC, VGA or disks: fewer devices to probe at boot.
        .args(["-no-reboot", "-nodefaults", "-display", "none"])
        // The keyboard (SysRq) and the registers of a stuck guest, from outside it.
        .arg("-monitor")
        .arg(format!(
            "unix:{},server=on,wait=off",
            monitor.path.display()
        ))
        .args(["-serial", &serial(CONSOLE)])
        .args(["-serial", &serial(STDOUT)])
        .args(["-serial", &serial(STDERR)])
        .args(["-serial", &serial(STATUS)])
        .arg("-kernel")
        .arg(kernel)
        .arg("-initrd")
        .arg(&initrd)
        .arg("-append")
        .arg(kernel_command_line(&job.kernel_args))
        .stdin(Stdio::null());
    let log = File::create(dir.join(QEMU_LOG))?;
    cmd.stdout(log.try_clone()?).stderr(log);

    let started = Instant::now();
    let mut qemu = KillOnDrop(cmd.spawn().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            anyhow!("{QEMU} not found: run scripts/setup to install QEMU")
        } else {
            anyhow!("could not start {QEMU}: {e}")
        }
    })?);

    let mut out_tail = Tail::new(&dir.join(STDOUT))?;
    let mut err_tail = Tail::new(&dir.join(STDERR))?;
    let pump = |out: &mut Tail, err: &mut Tail| -> Result<()> {
        out.pump(&mut io::stdout().lock())
            .and_then(|_| err.pump(&mut io::stderr().lock()))
            .context("copying the guest's output to the host")
    };
    let mut states = Vec::new();
    let mut booted = false;
    let exit = loop {
        if echo {
            pump(&mut out_tail, &mut err_tail)?;
        }
        if let Some(status) = qemu.0.try_wait()? {
            break status;
        }
        if collect_requests(&read_lossy(&dir.join(STATUS))) > states.len() {
            let state = GuestState::collect(&monitor.path, &dir.join(CONSOLE));
            state.save(dir, &format!("-{}", states.len() + 1));
            states.push(state);
        }
        if !booted && started.elapsed() > BOOT_LIMIT {
            booted = read_lossy(&dir.join(CONSOLE)).contains(BOOT_MARKER);
            if !booted {
                let (console, state) = collect_and_kill(qemu, &monitor.path, dir);
                return Err(BootHang {
                    kernel: job.kernel.clone(),
                    console,
                    state,
                }
                .into());
            }
        }
        if started.elapsed() > job.timeout {
            if echo {
                let _ = pump(&mut out_tail, &mut err_tail);
            }
            let (console, state) = collect_and_kill(qemu, &monitor.path, dir);
            return Err(GuestTimeout {
                kernel: job.kernel.clone(),
                timeout: job.timeout,
                stdout: read_lossy(&dir.join(STDOUT)),
                stderr: read_lossy(&dir.join(STDERR)),
                console,
                state,
                dir: dir.to_path_buf(),
            }
            .into());
        }
        std::thread::sleep(POLL);
    };
    if echo {
        pump(&mut out_tail, &mut err_tail)?;
    }
    let elapsed = started.elapsed();
    if !exit.success() {
        let log = fs::read_to_string(dir.join(QEMU_LOG)).unwrap_or_default();
        bail!(
            "{QEMU} failed ({exit}):\n{}\nConsole tail:\n{}",
            log.trim_end(),
            console_tail(dir)
        );
    }

    let read = |name: &str| -> Result<String> {
        let bytes = fs::read(dir.join(name)).with_context(|| format!("reading guest {name}"))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    let console = read(CONSOLE)?.replace('\r', "");
    let status_text = read(STATUS)?;
    let status_text = exit_status_line(&status_text);
    if status_text.is_empty() {
        bail!(
            "guest ({}) ended without reporting the job's exit status (kernel panic, crash or \
             broken init?). Console tail:\n{}",
            job.kernel,
            tail_lines(&console, 40)
        );
    }
    let status: i32 = status_text.parse().map_err(|_| {
        anyhow!(
            "guest reported a malformed exit status {status_text:?}. Console tail:\n{}",
            tail_lines(&console, 40)
        )
    })?;
    let boot_time = console.lines().find_map(|l| {
        let secs = l.split_once(BOOT_MARKER)?.1.trim().parse::<f64>().ok()?;
        Some(Duration::from_secs_f64(secs))
    });

    Ok(GuestOutput {
        stdout: read(STDOUT)?,
        stderr: read(STDERR)?,
        status: Some(status),
        console,
        boot_time,
        elapsed,
        states,
    })
}

/// A stuck guest's console up to now and its state, collected (and saved in `dir`) before
/// QEMU is killed.
fn collect_and_kill(qemu: KillOnDrop, monitor: &Path, dir: &Path) -> (String, GuestState) {
    let console = read_lossy(&dir.join(CONSOLE));
    let state = GuestState::collect(monitor, &dir.join(CONSOLE));
    state.save(dir, "");
    drop(qemu);
    (console, state)
}

fn read_lossy(path: &Path) -> String {
    String::from_utf8_lossy(&fs::read(path).unwrap_or_default()).replace('\r', "")
}

/// How many times the job asked for its state to be collected.
fn collect_requests(status_port: &str) -> usize {
    status_port
        .lines()
        .filter(|l| l.trim() == COLLECT_REQUEST)
        .count()
}

/// The exit status init writes last to the status port, past the job's collection requests.
fn exit_status_line(status_port: &str) -> &str {
    status_port
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && *l != COLLECT_REQUEST)
        .unwrap_or("")
}

/// QEMU's monitor socket: in the run's directory unless that path is too long for a Unix
/// socket address (108 bytes), then in the temporary directory.
struct MonitorSocket {
    path: PathBuf,
}

impl MonitorSocket {
    fn new(dir: &Path) -> Self {
        let path = dir.join(MONITOR);
        if path.as_os_str().len() < 100 {
            return MonitorSocket { path };
        }
        let name = dir.file_name().map_or_else(
            || format!("xtask-vm-{}", std::process::id()),
            |n| n.to_string_lossy().into_owned(),
        );
        MonitorSocket {
            path: std::env::temp_dir().join(format!("{name}.sock")),
        }
    }
}

impl Drop for MonitorSocket {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// PID 1 of the guest. Its own output goes to the kernel console.
const INIT: &str = r#"#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t bpf bpffs /sys/fs/bpf
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
# Held open so the raw settings stick; raw stops "\n" becoming "\r\n".
exec 3>/dev/ttyS1 4>/dev/ttyS2 5>/dev/ttyS3
for t in 1 2 3; do stty -F /dev/ttyS$t raw -echo || echo "xtask-vm: stty ttyS$t failed"; done
# Blocked tasks report themselves after 30 s (the default, 120 s, outlasts most jobs' limits).
echo 30 >/proc/sys/kernel/hung_task_timeout_secs
echo "xtask-vm: job start, uptime $(cut -d' ' -f1 /proc/uptime)"
# From here on the console carries the kernel's whole log, info messages included.
echo 7 >/proc/sys/kernel/printk
cd /tmp
sh /job.sh </dev/null >&3 2>&4 3>&- 4>&- 5>&-
rc=$?
echo "xtask-vm: job exit $rc, uptime $(cut -d' ' -f1 /proc/uptime)"
# Strays holding the ttys would stop the close below from waiting for the output to drain.
kill -9 -1 2>/dev/null && sleep 0.1
exec 3>&- 4>&-
echo "$rc" >&5
exec 5>&-
poweroff -f
"#;

/// Run by a job to have the host collect the guest's state now (see `guest_state`); returns
/// once the host has pressed its last SysRq key (`l`), or after a minute.
const COLLECT_STATE: &str = r#"#!/bin/sh
seen() { dmesg | grep -c 'sysrq: Show backtrace of all active CPUs'; }
before=$(seen)
echo collect >/dev/ttyS3
i=0
while [ "$(seen)" -le "$before" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
"#;

fn build_initramfs(job: &GuestJob, out: &Path) -> Result<()> {
    let mut archive = Archive::new();
    for dir in ["/proc", "/sys", "/dev", "/tmp", "/run", "/root", "/etc"] {
        archive.dir(dir);
    }
    // The kernel opens /dev/console before /init runs, ahead of devtmpfs.
    archive.char_dev("/dev/console", 5, 1, 0o600);

    add_host_file(&mut archive, Path::new(BUSYBOX), BUSYBOX)
        .context("busybox is missing: run scripts/setup")?;
    for applet in busybox_applets()? {
        archive.symlink(&applet, BUSYBOX);
    }
    for (host, guest) in &job.files {
        if !guest.starts_with('/') {
            bail!("guest path {guest:?} must be absolute");
        }
        add_host_file(&mut archive, host, guest)?;
    }
    archive.file("/init", INIT.as_bytes().to_vec(), 0o755);
    archive.file(
        "/bin/xtask-collect-state",
        COLLECT_STATE.as_bytes().to_vec(),
        0o755,
    );
    archive.file("/job.sh", job.script.clone().into_bytes(), 0o755);

    // Level 1: compression time matters more than size here.
    let mut gzip = Command::new("gzip")
        .args(["-1", "-n", "-c"])
        .stdin(Stdio::piped())
        .stdout(File::create(out).with_context(|| format!("creating {}", out.display()))?)
        .spawn()
        .context("could not run gzip")?;
    {
        let mut stdin = BufWriter::new(gzip.stdin.take().expect("piped"));
        archive.write_to(&mut stdin)?;
        stdin.flush()?;
    }
    let status = gzip.wait()?;
    if !status.success() {
        bail!("gzip failed ({status}) writing {}", out.display());
    }
    Ok(())
}

/// Absolute guest paths of busybox's applets.
fn busybox_applets() -> Result<Vec<String>> {
    let out = Command::new(BUSYBOX)
        .arg("--list-full")
        .output()
        .with_context(|| format!("could not run {BUSYBOX}: run scripts/setup"))?;
    if !out.status.success() {
        bail!("`{BUSYBOX} --list-full` failed ({})", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty() && *l != "bin/busybox")
        .map(|l| format!("/{l}"))
        .collect())
}

/// Copies a host file (following symlinks) and, for dynamic ELF files, every library `ldd` lists.
fn add_host_file(archive: &mut Archive, host: &Path, guest: &str) -> Result<()> {
    let data = fs::read(host).with_context(|| format!("reading {}", host.display()))?;
    let mode = fs::metadata(host)?.permissions().mode();
    let is_elf = data.starts_with(b"\x7fELF");
    archive.file(guest, data, mode);
    if is_elf {
        for lib in shared_libraries(host)? {
            if !archive.contains(&lib) {
                let data = fs::read(&lib).with_context(|| format!("reading {lib}"))?;
                archive.file(&lib, data, 0o755);
            }
        }
    }
    Ok(())
}

/// Absolute paths of the shared libraries (and dynamic loader) that `ldd` lists for `binary`.
pub fn shared_libraries(binary: &Path) -> Result<Vec<String>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .context("could not run ldd")?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if text.contains("not a dynamic executable") || text.contains("statically linked") {
        return Ok(Vec::new());
    }
    if !out.status.success() {
        bail!("ldd {} failed: {}", binary.display(), text.trim());
    }
    let mut libs = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.contains("not found") {
            bail!("{}: missing shared library: {line}", binary.display());
        }
        // "libc.so.6 => /lib/.../libc.so.6 (0x..)" or "/lib64/ld-linux-x86-64.so.2 (0x..)"
        let path = match line.split_once("=>") {
            Some((_, rhs)) => rhs.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(path) = path.filter(|p| p.starts_with('/')) {
            libs.push(path.to_string());
        }
    }
    Ok(libs)
}

/// Makes sure no early return leaves QEMU running.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Follows a growing file and copies what is new to a host stream.
struct Tail {
    file: File,
    buf: Vec<u8>,
}

impl Tail {
    fn new(path: &Path) -> Result<Self> {
        Ok(Tail {
            file: File::open(path)?,
            buf: vec![0; 64 * 1024],
        })
    }

    fn pump(&mut self, out: &mut impl Write) -> Result<()> {
        loop {
            let n = self.file.read(&mut self.buf)?;
            if n == 0 {
                break;
            }
            out.write_all(&self.buf[..n])?;
        }
        out.flush()?;
        Ok(())
    }
}

fn console_tail(dir: &Path) -> String {
    let console = fs::read(dir.join(CONSOLE)).unwrap_or_default();
    tail_lines(&String::from_utf8_lossy(&console).replace('\r', ""), 40)
}

/// The last `n` lines, extended back to the first panic or oops headline so the cause is not cut off.
fn tail_lines(text: &str, n: usize) -> String {
    const MARKERS: [&str; 5] = [
        "Kernel panic",
        "BUG:",
        "Oops",
        "general protection fault",
        "WARNING:",
    ];
    const MAX: usize = 150;
    let lines: Vec<&str> = text.lines().collect();
    if lines.iter().all(|l| l.trim().is_empty()) {
        return "(console is empty)".to_string();
    }
    let mut start = lines.len().saturating_sub(n);
    if let Some(first) = lines
        .iter()
        .position(|l| MARKERS.iter().any(|m| l.contains(m)))
    {
        start = start.min(first);
    }
    if lines.len() - start > MAX {
        let head = &lines[start..start + 20];
        let tail = &lines[lines.len() - (MAX - 20)..];
        return format!("{}\n[...]\n{}", head.join("\n"), tail.join("\n"));
    }
    lines[start..].join("\n")
}

/// A per-run directory under target/vm/, removed on drop unless kept.
struct RunDir {
    path: PathBuf,
    keep: bool,
}

impl RunDir {
    fn create() -> Result<Self> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let base = workspace::vm_dir();
        fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
        prune_old_runs(&base);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let path = base.join(format!(
            "run-{}-{}-{nanos}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(RunDir { path, keep: false })
    }

    fn keep(mut self) -> PathBuf {
        self.keep = true;
        self.path.clone()
    }
}

/// Removes run directories left by failed or interrupted runs long ago. A live run is never this old
/// unless its timeout is longer than the age limit.
fn prune_old_runs(base: &Path) {
    const MAX_AGE: Duration = Duration::from_secs(12 * 3600);
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > MAX_AGE);
        if old && entry.file_name().to_string_lossy().starts_with("run-") {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Host programs a guest run needs that are not installed (scripts/setup installs them).
pub fn missing_host_tools() -> Vec<String> {
    let mut missing = Vec::new();
    for tool in [QEMU, "gzip", "ldd"] {
        if !in_path(tool) {
            missing.push(tool.to_string());
        }
    }
    if !Path::new(BUSYBOX).is_file() {
        missing.push(BUSYBOX.to_string());
    }
    missing
}

fn in_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Quotes a word for a POSIX shell.
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// QEMU's `-smp` value: `cpus`, and room for more where asked.
fn smp(cpus: u32, max_cpus: Option<u32>) -> String {
    match max_cpus {
        Some(max) if max > cpus => format!("{cpus},maxcpus={max}"),
        _ => cpus.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_parsing() {
        assert_eq!("6.12".parse::<Kernel>(), Ok(Kernel::Series("6.12".into())));
        assert_eq!(
            "./vmlinuz".parse::<Kernel>(),
            Ok(Kernel::Path("./vmlinuz".into()))
        );
        assert!("".parse::<Kernel>().is_err());
        let err = Kernel::Series("5.4".into()).resolve().unwrap_err();
        assert!(err.to_string().contains("unknown kernel"), "{err}");
    }

    #[test]
    fn console_excerpt_keeps_the_panic_headline() {
        let mut console = String::from("boot\nKernel panic - not syncing: test\n");
        for i in 0..60 {
            console.push_str(&format!("trace {i}\n"));
        }
        let tail = tail_lines(&console, 40);
        assert!(tail.starts_with("Kernel panic"), "{tail}");
        assert!(tail.ends_with("trace 59"));
        assert_eq!(tail_lines("a\nb\nc", 2), "b\nc");
        assert_eq!(tail_lines("\n", 2), "(console is empty)");
    }

    #[test]
    fn status_port_carries_requests_then_the_status() {
        assert_eq!(collect_requests("collect\ncollect\n"), 2);
        assert_eq!(exit_status_line("collect\r\n0\n"), "0");
        assert_eq!(exit_status_line("collect\n"), "");
        assert_eq!(exit_status_line("7\n"), "7");
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("--duration=5"), "--duration=5");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
    }

    #[test]
    fn ldd_of_a_host_binary_includes_the_loader() {
        let exe = std::env::current_exe().unwrap();
        let libs = shared_libraries(&exe).unwrap();
        assert!(libs.iter().any(|l| l.contains("libc.so")), "{libs:?}");
        assert!(libs.iter().any(|l| l.contains("ld-linux")), "{libs:?}");
        assert!(shared_libraries(Path::new(BUSYBOX)).unwrap().is_empty());
    }
}
