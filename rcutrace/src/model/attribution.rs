//! `--by`: who caused each event, as the key of every map; and `--top`, which keeps the
//! largest keys and folds the rest into one, so that totals stay exact.

use rcutrace_common::attribution::{self as common, Attribution, NO_STACK};

/// What `--by` keys maps with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// The caller's command name.
    Comm,
    /// The caller's process id (with its command name).
    Pid,
    /// The CPU the call was made on.
    Cpu,
    /// The caller's kernel stack.
    Stack,
    /// The caller's cgroup (v2), as its path below the cgroup mount.
    Cgroup,
    /// The caller's cgroup and command name.
    #[value(name = "cgroup,comm", alias = "comm,cgroup")]
    CgroupComm,
    /// The caller's cgroup and process id (with its command name).
    #[value(name = "cgroup,pid", alias = "pid,cgroup")]
    CgroupPid,
}

/// The programs' `BY_MODE` constant for an optional `--by`.
pub fn mode(by: Option<By>) -> u32 {
    match by {
        None => common::BY_NONE,
        Some(By::Comm) => common::BY_COMM,
        Some(By::Pid) => common::BY_PID,
        Some(By::Cpu) => common::BY_CPU,
        Some(By::Stack) => common::BY_STACK,
        Some(By::Cgroup) => common::BY_CGROUP,
        Some(By::CgroupComm) => common::BY_CGROUP_COMM,
        Some(By::CgroupPid) => common::BY_CGROUP_PID,
    }
}

/// Key text as bpftrace prints it: a comm bare, `pid, comm`, a CPU number, a kernel stack
/// (`\n    frame+off` per frame, deepest first, then `\n`), or a cgroup path first, then the
/// rest (`/a, comm`). `frames` symbolizes a stack id, `cgroup` names a cgroup id.
pub fn key_text(
    by: By,
    key: &Attribution,
    frames: &mut dyn FnMut(u64) -> Vec<String>,
    cgroup: &mut dyn FnMut(u64) -> String,
) -> String {
    match by {
        By::Cgroup => cgroup(key.cgroup),
        By::CgroupComm => format!("{}, {}", cgroup(key.cgroup), comm(&key.comm)),
        By::CgroupPid => format!("{}, {}, {}", cgroup(key.cgroup), key.tgid, comm(&key.comm)),
        By::Comm => comm(&key.comm),
        By::Pid => format!("{}, {}", key.tgid, comm(&key.comm)),
        By::Cpu => key.cpu.to_string(),
        By::Stack if key.stack == NO_STACK => "[stack lost]".to_string(),
        By::Stack => {
            let mut text = String::from("\n");
            for frame in frames(key.stack) {
                text.push_str("    ");
                text.push_str(&frame);
                text.push('\n');
            }
            text
        }
    }
}

/// A NUL-padded command name as text.
fn comm(bytes: &[u8; 16]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Keeps the `top` entries with the largest weight and merges the rest into one entry keyed
/// `[other: N keys]`; `top == 0` keeps everything, and so does a single key beyond `top`
/// (folding it would hide its name and save nothing). Ties are broken by key, so the result
/// does not depend on the input order.
pub fn fold_top<T>(
    entries: Vec<(String, T)>,
    top: usize,
    weight: impl Fn(&T) -> u64,
    merge: impl Fn(&mut T, T),
) -> Vec<(String, T)> {
    if top == 0 || entries.len() <= top + 1 {
        return entries;
    }
    let mut entries = entries;
    entries.sort_by(|(ka, a), (kb, b)| weight(b).cmp(&weight(a)).then_with(|| ka.cmp(kb)));
    let rest = entries.split_off(top);
    let folded = rest.len();
    let mut rest = rest.into_iter().map(|(_, value)| value);
    if let Some(mut other) = rest.next() {
        for value in rest {
            merge(&mut other, value);
        }
        entries.push((format!("[other: {folded} keys]"), other));
    }
    entries
}

/// `--top` for series that live on from one report to the next (`serve`'s counters, which
/// must never go down): the first `top` keys admitted keep a series of their own for the rest
/// of the run, every later key goes to `[other]` (0: keep every key). Within one report the
/// heaviest new keys are admitted first.
#[derive(Debug)]
pub struct StickyTop {
    top: usize,
    kept: std::collections::HashSet<String>,
}

impl StickyTop {
    pub const OTHER: &'static str = "[other]";

    pub fn new(top: usize) -> Self {
        StickyTop {
            top,
            kept: Default::default(),
        }
    }

    /// Admits the keys of one report, with their weights, while there is room.
    pub fn admit(&mut self, keys: impl IntoIterator<Item = (String, u64)>) {
        let mut new: Vec<(String, u64)> = keys
            .into_iter()
            .filter(|(key, _)| !self.kept.contains(key))
            .collect();
        new.sort_by(|(ka, a), (kb, b)| b.cmp(a).then_with(|| ka.cmp(kb)));
        new.dedup_by(|a, b| a.0 == b.0);
        for (key, _) in new {
            if self.top != 0 && self.kept.len() >= self.top {
                break;
            }
            self.kept.insert(key);
        }
    }

    /// The label a key's values go under: its own, or `[other]`.
    pub fn label(&self, key: String) -> String {
        if self.kept.contains(&key) {
            key
        } else {
            Self::OTHER.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(comm_text: &str) -> Attribution {
        let mut key = Attribution {
            tgid: 152,
            cpu: 1,
            stack: 7,
            cgroup: 9,
            ..Default::default()
        };
        key.comm[..comm_text.len()].copy_from_slice(comm_text.as_bytes());
        key
    }

    #[test]
    fn keys_print_as_bpftrace_prints_them() {
        let mut frames =
            |id: u64| vec![format!("synchronize_rcu+{id}"), "do_syscall_64+135".into()];
        let mut cgroup = |id: u64| format!("/system.slice/unit-{id}.service");
        let mut text = |by: By, k: &Attribution| key_text(by, k, &mut frames, &mut cgroup);
        let k = key("kworker/u4:1");
        assert_eq!(text(By::Comm, &k), "kworker/u4:1");
        assert_eq!(text(By::Pid, &k), "152, kworker/u4:1");
        assert_eq!(text(By::Cpu, &k), "1");
        assert_eq!(
            text(By::Stack, &k),
            "\n    synchronize_rcu+7\n    do_syscall_64+135\n"
        );
        let lost = Attribution {
            stack: NO_STACK,
            ..k
        };
        assert_eq!(text(By::Stack, &lost), "[stack lost]");
        let full = key("0123456789abcdef");
        assert_eq!(text(By::Comm, &full), "0123456789abcdef");
        assert_eq!(text(By::Cgroup, &k), "/system.slice/unit-9.service");
        assert_eq!(
            text(By::CgroupComm, &k),
            "/system.slice/unit-9.service, kworker/u4:1"
        );
        assert_eq!(
            text(By::CgroupPid, &k),
            "/system.slice/unit-9.service, 152, kworker/u4:1"
        );
    }

    #[test]
    fn sticky_top_keeps_the_first_keys_admitted_for_good() {
        let mut top = StickyTop::new(2);
        top.admit([
            ("/b".to_string(), 5),
            ("/a".to_string(), 9),
            ("/c".to_string(), 1),
        ]);
        let labels = |top: &StickyTop| ["/a", "/b", "/c", "/d"].map(|k| top.label(k.to_string()));
        assert_eq!(labels(&top), ["/a", "/b", "[other]", "[other]"]);
        // A later, heavier key finds no room: the series so far never move.
        top.admit([("/d".to_string(), 1000), ("/a".to_string(), 10)]);
        assert_eq!(labels(&top), ["/a", "/b", "[other]", "[other]"]);
        let mut all = StickyTop::new(0);
        all.admit([("/c".to_string(), 1)]);
        all.admit([("/d".to_string(), 1)]);
        assert_eq!(labels(&all), ["[other]", "[other]", "/c", "/d"]);
    }

    #[test]
    fn top_keeps_the_largest_and_folds_the_rest_exactly() {
        let entries: Vec<(String, u64)> = [("a", 5), ("b", 1), ("c", 9), ("d", 5), ("e", 2)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let folded = fold_top(entries.clone(), 2, |v| *v, |a, b| *a += b);
        assert_eq!(
            folded,
            vec![
                ("c".to_string(), 9),
                ("a".to_string(), 5),
                ("[other: 3 keys]".to_string(), 8)
            ]
        );
        let total: u64 = folded.iter().map(|(_, v)| v).sum();
        assert_eq!(total, 22);
        assert_eq!(
            fold_top(entries.clone(), 0, |v| *v, |a, b| *a += b),
            entries
        );
        assert_eq!(
            fold_top(entries.clone(), 5, |v| *v, |a, b| *a += b),
            entries
        );
    }
}
