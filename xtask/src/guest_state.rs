//! Collects a guest's state the way a kernel engineer would at a hung machine, from outside it,
//! so it works however stuck the guest's user space is: magic SysRq `w` (blocked tasks), `t`
//! (every task's stack) and `l` (every CPU's backtrace) pressed on the guest's keyboard through
//! QEMU's monitor, the kernel console they print to, and QEMU's `info registers` for each vCPU.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::hang::KernelState;
use crate::monitor::Monitor;

/// File names of what is collected, in the run's directory.
pub const REGISTERS: &str = "registers.txt";
pub const REPORT: &str = "hang-report.txt";

const MONITOR_TIMEOUT: Duration = Duration::from_secs(10);
/// The console counts as done with a dump once it has not grown for this long.
const CONSOLE_SETTLE: Duration = Duration::from_millis(1500);
/// The longest wait for one dump (SysRq `t` of a few hundred tasks through an emulated UART).
const DUMP_LIMIT: Duration = Duration::from_secs(40);
/// SysRq keys in order: the console log level to 7 first, so that the dumps (printed at
/// KERN_INFO) reach a console booted with `quiet`; `l` last, after the registers, as the
/// guest-side request waits for its header.
const SYSRQ_KEYS: [(char, &str); 4] = [
    ('7', "console log level"),
    ('w', "blocked tasks"),
    ('t', "every task's stack"),
    ('l', "every CPU's backtrace"),
];

/// What was collected from one guest at one moment.
#[derive(Debug, Clone)]
pub struct GuestState {
    /// Read from the whole console up to the end of the dumps.
    pub kernel: KernelState,
    /// `info registers -a` (every vCPU), as QEMU printed it.
    pub registers: String,
    /// Steps that did not work (an unanswering monitor says QEMU itself is stuck).
    pub problems: Vec<String>,
    /// The console's length (bytes) when the collection began.
    pub console_offset: u64,
}

impl GuestState {
    /// Presses the SysRq keys, waits for each dump, reads the registers and the console.
    pub fn collect(monitor_socket: &Path, console: &Path) -> GuestState {
        let console_offset = file_len(console);
        let mut problems = Vec::new();
        let mut registers = String::new();
        match Monitor::connect(monitor_socket, MONITOR_TIMEOUT) {
            Err(e) => problems.push(format!(
                "QEMU's monitor at {} did not answer: {e}",
                monitor_socket.display()
            )),
            Ok(mut monitor) => {
                for (key, what) in SYSRQ_KEYS {
                    // Before `l`: a job that asked goes on (and may power off) once it sees `l`.
                    if key == 'l' {
                        match monitor.command("info registers -a", MONITOR_TIMEOUT) {
                            Ok(text) => registers = text,
                            Err(e) => problems.push(format!("info registers: {e}")),
                        }
                    }
                    match monitor.send_key(&format!("alt-sysrq-{key}"), MONITOR_TIMEOUT) {
                        Ok(()) => wait_for_quiet(console),
                        Err(e) => problems.push(format!("SysRq {key} ({what}): {e}")),
                    }
                }
            }
        }
        let text = fs::read(console).unwrap_or_default();
        let kernel = KernelState::parse(&String::from_utf8_lossy(&text).replace('\r', ""));
        if kernel.cpus.is_empty() && problems.is_empty() {
            problems.push(
                "the guest printed no CPU backtrace for SysRq l (its kernel did not take the \
                 keyboard interrupt?)"
                    .into(),
            );
        }
        GuestState {
            kernel,
            registers,
            problems,
            console_offset,
        }
    }

    /// Writes the registers and the summary into `dir`.
    pub fn save(&self, dir: &Path, name_suffix: &str) -> Vec<PathBuf> {
        let name = |base: &str| match base.rsplit_once('.') {
            Some((stem, ext)) => format!("{stem}{name_suffix}.{ext}"),
            None => format!("{base}{name_suffix}"),
        };
        let registers = dir.join(name(REGISTERS));
        let report = dir.join(name(REPORT));
        let _ = fs::write(&registers, &self.registers);
        let _ = fs::write(&report, self.to_string());
        vec![report, registers]
    }

    /// The number of vCPUs whose registers QEMU printed.
    pub fn vcpus_with_registers(&self) -> usize {
        self.registers
            .lines()
            .filter(|l| l.trim_start().starts_with("CPU#"))
            .count()
    }
}

impl fmt::Display for GuestState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kernel.summary())?;
        for problem in &self.problems {
            writeln!(f, "collecting: {problem}")?;
        }
        Ok(())
    }
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

fn wait_for_quiet(console: &Path) {
    let start = Instant::now();
    let mut len = file_len(console);
    let mut since_growth = Instant::now();
    while start.elapsed() < DUMP_LIMIT && since_growth.elapsed() < CONSOLE_SETTLE {
        std::thread::sleep(Duration::from_millis(100));
        let now = file_len(console);
        if now != len {
            len = now;
            since_growth = Instant::now();
        }
    }
}
