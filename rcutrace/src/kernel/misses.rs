//! How many probe hits the kernel skipped for rcutrace's programs: each program's
//! `recursion_misses` (the program was already running on that CPU, or another BPF program
//! was), as the kernel reports it for the program file descriptors we hold.
//!
//! Asked of each program with BPF_OBJ_GET_INFO_BY_FD (aya 0.14 reads that information but does
//! not expose this field), not read from /proc/self/fdinfo: every /proc/self entry looked up
//! stays cached until the process is reaped, and the kernel frees each through call_rcu()
//! then (some two hundred per run for the fd and fdinfo entries), RCU work the measurement
//! itself would cause.
//!
//! Kprobe links also carry a `missed` count (6.7+), but querying a kprobe link with
//! BPF_OBJ_GET_INFO_BY_FD crashed Debian's 6.12 kernel (NULL pointer call) under load, so
//! rcutrace never asks: the kprobe layer's own skips are read from its table instead
//! (`kprobe_table`), and returns lost to kretprobe limits are detected by the eBPF programs.
//!
//! A kprobe or perf tracepoint's program is run by `trace_call_bpf()`, which skips it while
//! another BPF program runs on that CPU (`bpf_prog_active`: a kprobe program, or a map
//! updated from user space). Linux counts that skip in the program's `recursion_misses` only
//! from 6.7 (mainline "bpf: Count missed stats in trace_call_bpf"); before, nowhere, so the
//! figure is then a lower bound (`uncounted_skips`). Trampolines (fentry, fexit) count theirs
//! on every kernel rcutrace supports.

use std::{collections::HashMap, os::fd::BorrowedFd, sync::Mutex};

use aya_obj::generated::bpf_prog_info;

/// Skipped hits by program id, for the programs behind `programs`.
pub fn missed_by_program_id<'a>(
    programs: impl IntoIterator<Item = BorrowedFd<'a>>,
) -> HashMap<u32, u64> {
    let mut missed = HashMap::new();
    for program in programs {
        if let Some(info) = program_info(program) {
            *missed.entry(info.id).or_insert(0) += info.recursion_misses;
        }
    }
    missed
}

/// Why the hits the kernel skipped may be more than it counted on this run: each a cause,
/// said once on stderr and recorded with the run's environment. Empty: every skip is counted.
static UNCOUNTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Notes that `cause` leaves some skipped hits uncounted on this run.
pub fn note_uncounted(cause: String) {
    UNCOUNTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(cause);
}

/// The causes noted (`note_uncounted`).
pub fn uncounted() -> Vec<String> {
    UNCOUNTED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Whether a kernel of release `release` (`uname -r`) leaves uncounted the skips of
/// `trace_call_bpf()`: before 6.7. An unreadable release is taken to be old.
pub fn bpf_layer_skips_uncounted(release: &str) -> bool {
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) < (6, 7),
        _ => true,
    }
}

/// The kernel's id of a program, or `None` if it would not say.
pub fn program_id(program: BorrowedFd<'_>) -> Option<u32> {
    program_info(program).map(|info| info.id)
}

/// The kernel's information about a program, or `None` if it would not say.
fn program_info(program: BorrowedFd<'_>) -> Option<bpf_prog_info> {
    super::bpf_programs::program_info(program, |_| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd as _;

    #[test]
    fn kernels_before_6_7_leave_the_bpf_layers_skips_uncounted() {
        assert!(bpf_layer_skips_uncounted("6.1.0-57-cloud-amd64"));
        assert!(bpf_layer_skips_uncounted("5.15.0"));
        assert!(bpf_layer_skips_uncounted("6.6.63"));
        assert!(!bpf_layer_skips_uncounted("6.7.0"));
        assert!(!bpf_layer_skips_uncounted("6.12.118+deb12-cloud-amd64"));
        assert!(!bpf_layer_skips_uncounted("7.3.4+deb13-cloud-amd64"));
        assert!(bpf_layer_skips_uncounted("unknown"));
    }

    /// A descriptor that is not a BPF program gives no answer rather than a wrong one.
    #[test]
    fn a_non_program_gives_nothing() {
        let file = std::fs::File::open("/dev/null").unwrap();
        assert!(program_info(file.as_fd()).is_none());
        assert!(missed_by_program_id([file.as_fd()]).is_empty());
    }
}
