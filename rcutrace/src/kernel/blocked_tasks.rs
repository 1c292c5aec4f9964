//! The tasks blocked right now in given kernel functions, found as a kernel engineer finds
//! them by hand: every thread asleep and not to be woken by a signal (state `D`, or `I`, the
//! kind that does not count as load), its kernel stack read from `/proc/PID/task/TID/stack`.
//! Unlike a probe, this finds the waits that began before tracing did, which a wedged
//! machine's all are. Reading every such thread's stack costs, so it is done only when a
//! warning is due.

use std::{fs, io, path::Path};

use anyhow::{Context as _, Result, bail};

use crate::model::flavour_stall::BlockedTask;

/// The threads (but `own_tgid`'s) asleep uninterruptibly with one of `functions` on their
/// kernel stack, by pid; fails only where no stack can be read at all (not root, or a kernel
/// without `/proc/PID/stack`).
pub fn blocked_in(functions: &[&str], own_tgid: u32) -> Result<Vec<BlockedTask>> {
    let mut blocked = Vec::new();
    let mut unreadable = None;
    for process in fs::read_dir("/proc").context("listing /proc")? {
        let Some(tgid) = number_of(&process?.path()) else {
            continue;
        };
        if tgid == own_tgid {
            continue;
        }
        // A process or thread gone meanwhile is no waiter.
        let Ok(threads) = fs::read_dir(format!("/proc/{tgid}/task")) else {
            continue;
        };
        for thread in threads.flatten() {
            let path = thread.path();
            let Some(pid) = number_of(&path) else {
                continue;
            };
            let Ok(stat) = fs::read_to_string(path.join("stat")) else {
                continue;
            };
            if !matches!(state_of(&stat), Some('D' | 'I')) {
                continue;
            }
            let stack = match fs::read_to_string(path.join("stack")) {
                Ok(text) => frames(&text),
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    unreadable.get_or_insert(e);
                    continue;
                }
                Err(_) => continue,
            };
            if in_any(&stack, functions) {
                blocked.push(BlockedTask {
                    pid,
                    comm: comm_of(&stat).to_string(),
                    stack,
                });
            }
        }
    }
    if let Some(e) = unreadable
        && blocked.is_empty()
    {
        bail!("reading the kernel stacks of blocked tasks (/proc/PID/stack): {e}");
    }
    blocked.sort_by_key(|t| t.pid);
    Ok(blocked)
}

fn number_of(path: &Path) -> Option<u32> {
    path.file_name()?.to_str()?.parse().ok()
}

/// A thread's state letter in its `stat` line (after the comm, which may hold anything).
fn state_of(stat: &str) -> Option<char> {
    stat.rsplit_once(") ")?.1.chars().next()
}

fn comm_of(stat: &str) -> &str {
    stat.split_once(" (")
        .and_then(|(_, rest)| rest.rsplit_once(") "))
        .map_or("", |(comm, _)| comm)
}

/// A `/proc/PID/stack` as rcutrace names frames: `name+offset` in decimal, a module's with
/// ` [module]`, deepest first.
fn frames(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let frame = line.split_once("] ").map_or(line, |(_, f)| f).trim();
            let (symbol, module) = match frame.split_once(' ') {
                Some((symbol, module)) => (symbol, Some(module)),
                None => (frame, None),
            };
            let (name, offset) = symbol.split_once('+')?;
            let offset = offset.split('/').next()?.trim_start_matches("0x");
            let offset = u64::from_str_radix(offset, 16).ok()?;
            Some(match module {
                Some(module) => format!("{name}+{offset} {module}"),
                None => format!("{name}+{offset}"),
            })
        })
        .collect()
}

/// Whether a kernel stack (as `frames` names it) is in one of `functions`.
pub fn in_any(stack: &[String], functions: &[&str]) -> bool {
    stack.iter().any(|f| functions.contains(&function_of(f)))
}

/// The function a frame is in.
fn function_of(frame: &str) -> &str {
    frame.split_once('+').map_or(frame, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_is_named_as_rcutrace_names_frames() {
        // Debian's 6.1, a module's synchronize_srcu() (tail-called into __synchronize_srcu).
        let text = "[<0>] __synchronize_srcu+0x91/0xc0\n\
                    [<0>] op_synchronize_srcu+0x37/0x60 [rcutrace_test]\n\
                    [<0>] entry_SYSCALL_64_after_hwframe+0x6e/0xd8\n";
        let stack = frames(text);
        assert_eq!(
            stack,
            [
                "__synchronize_srcu+145",
                "op_synchronize_srcu+55 [rcutrace_test]",
                "entry_SYSCALL_64_after_hwframe+110"
            ]
        );
        assert_eq!(function_of(&stack[1]), "op_synchronize_srcu");
        assert!(frames("").is_empty());
    }

    #[test]
    fn the_state_and_comm_are_read_past_a_comm_with_spaces_and_parentheses() {
        let stat = "420 (a (b) c) D 1 420 420 0 -1 4194560";
        assert_eq!(state_of(stat), Some('D'));
        assert_eq!(comm_of(stat), "a (b) c");
        assert_eq!(state_of("garbage"), None);
    }
}
