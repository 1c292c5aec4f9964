//! How many probe hits the kernel skipped for rcutrace's programs: each program's
//! `recursion_misses` (the program was already running on that CPU, or another BPF program
//! was), as the kernel reports it in the fdinfo of the program file descriptors we hold.
//!
//! Kprobe links also carry a `missed` count (6.7+), but querying it with
//! BPF_OBJ_GET_INFO_BY_FD crashed Debian's 6.12 kernel (NULL pointer call) under load, so
//! rcutrace never asks: returns lost to kretprobe limits are detected by the eBPF programs.

use std::{collections::HashMap, fs, os::fd::RawFd};

/// Skipped hits by program id.
pub fn missed_by_program_id() -> HashMap<u32, u64> {
    let mut missed = HashMap::new();
    let Ok(entries) = fs::read_dir("/proc/self/fd") else {
        return missed;
    };
    for entry in entries.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<RawFd>().ok())
        else {
            continue;
        };
        let Ok(target) = fs::read_link(entry.path()) else {
            continue;
        };
        if !target.to_string_lossy().contains("bpf-prog") {
            continue;
        }
        let Ok(fdinfo) = fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else {
            continue;
        };
        let fields = parse_fdinfo(&fdinfo);
        let Some(prog_id) = fields.get("prog_id").and_then(|v| v.parse::<u32>().ok()) else {
            continue;
        };
        let skipped: u64 = fields
            .get("recursion_misses")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        *missed.entry(prog_id).or_insert(0) += skipped;
    }
    missed
}

fn parse_fdinfo(text: &str) -> HashMap<&str, &str> {
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(key, value)| (key.trim(), value.trim()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_fields() {
        let text = "pos:\t0\nflags:\t02000002\nprog_type:\t2\nprog_id:\t42\nrecursion_misses:\t7\n";
        let fields = parse_fdinfo(text);
        assert_eq!(fields["prog_id"], "42");
        assert_eq!(fields["recursion_misses"], "7");
    }
}
