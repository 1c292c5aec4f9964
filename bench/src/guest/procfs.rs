//! What the kernel says about the tracers and itself, read from /proc, /sys and debugfs: a
//! process's peak RSS, CPU time and BPF programs (with bpf_stats, their runs and run time),
//! the kprobes and trampoline links attached, and the guest's context switches.

use std::collections::HashMap;

/// The kernel's list of registered kprobes (debugfs).
pub(crate) const KPROBE_LIST: &str = "/sys/kernel/debug/kprobes/list";

/// Whether the kernel times BPF programs' runs.
const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// A live process's peak RSS so far (`VmHWM` in /proc/PID/status), in KiB.
pub(crate) fn peak_rss(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// Clock ticks per second: the unit of /proc/PID/stat's CPU times.
pub(crate) fn ticks_per_sec() -> f64 {
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).max(1) as f64
}

/// A process's CPU time so far: all its threads' time on a CPU (ns), the times they were put
/// on one, and its user time.
#[derive(Clone, Copy)]
pub(crate) struct Cpu {
    pub(crate) exec_ns: u64,
    pub(crate) timeslices: u64,
    pub(crate) utime_ticks: u64,
}

pub(crate) fn cpu_now(pid: libc::pid_t) -> Option<Cpu> {
    let (mut exec_ns, mut timeslices) = (0, 0);
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let schedstat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        // On a CPU (ns), waiting for one (ns), timeslices run.
        let mut fields = schedstat.split_whitespace();
        exec_ns += fields.next()?.parse::<u64>().ok()?;
        timeslices += fields.nth(1)?.parse::<u64>().ok()?;
    }
    // Fields after the parenthesised command name: state is field 3, utime field 14.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.rsplit_once(')')?.1;
    let utime_ticks = after_name.split_whitespace().nth(11)?.parse().ok()?;
    Some(Cpu {
        exec_ns,
        timeslices,
        utime_ticks,
    })
}

/// Turns the kernel's timing of BPF programs (bpf_stats) on or off.
pub fn set_bpf_stats(on: bool) -> Result<(), String> {
    std::fs::write(BPF_STATS, if on { "1" } else { "0" })
        .map_err(|e| format!("writing {BPF_STATS}: {e}"))
}

/// One loaded BPF program, as its owner's fdinfo shows it.
pub(crate) struct Program {
    pub(crate) id: u64,
    pub(crate) kind: u64,
    runs: u64,
    run_ns: u64,
}

impl Program {
    /// Its runs and run time since `before` was read (all of them if it was not loaded yet).
    pub(crate) fn since(&self, before: &[Program]) -> (u64, u64) {
        before
            .iter()
            .find(|b| b.id == self.id)
            .map_or((self.runs, self.run_ns), |b| {
                (
                    self.runs - b.runs.min(self.runs),
                    self.run_ns - b.run_ns.min(self.run_ns),
                )
            })
    }
}

/// The BPF programs a process holds, each once, from /proc/PID/fdinfo.
pub(crate) fn bpf_programs(pid: libc::pid_t) -> Vec<Program> {
    let mut programs: HashMap<u64, Program> = HashMap::new();
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Ok(info) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let field = |name: &str| -> Option<u64> {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
        };
        // Links name their program with prog_id too; only program fds have prog_type.
        let (Some(kind), Some(id), Some(runs), Some(run_ns)) = (
            field("prog_type"),
            field("prog_id"),
            field("run_cnt"),
            field("run_time_ns"),
        ) else {
            continue;
        };
        programs.insert(
            id,
            Program {
                id,
                kind,
                runs,
                run_ns,
            },
        );
    }
    let mut programs: Vec<Program> = programs.into_values().collect();
    programs.sort_by_key(|p| p.id);
    programs
}

/// Enabled kprobes (entry or return) on `function` in the kernel's list of registered kprobes.
pub(crate) fn enabled_kprobes(function: &str) -> usize {
    let list = std::fs::read_to_string(KPROBE_LIST).unwrap_or_default();
    let at = format!("{function}+0x");
    list.lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(2)
                .is_some_and(|s| s.starts_with(&at))
                && !l.contains("[DISABLED]")
                && !l.contains("[GONE]")
        })
        .count()
}

/// The BPF links of trampoline programs (fentry, fexit) a process holds: the kernel hands a
/// link's fd out only after the trampoline is patched in.
pub(crate) fn tracing_links(pid: libc::pid_t) -> usize {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            std::fs::read_to_string(entry.path()).is_ok_and(|info| {
                info.lines()
                    .any(|l| l.strip_prefix("link_type:").map(str::trim) == Some("tracing"))
            })
        })
        .count()
}

/// Context switches since boot, all CPUs (`ctxt` in /proc/stat).
pub(crate) fn context_switches() -> Option<u64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("ctxt "))?
        .trim()
        .parse()
        .ok()
}
