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
    /// The SRCU domain (`struct srcu_struct`) called on: its symbol (`NAME [module]` for a
    /// module's), or its address where no symbol starts there (one allocated at run time).
    Srcu,
}

/// The functions whose first argument is the SRCU domain they act on (`struct srcu_struct *`),
/// which `--by srcu` keys by it.
pub const SRCU_FUNCTIONS: [&str; 7] = [
    "call_srcu",
    "synchronize_srcu",
    "synchronize_srcu_expedited",
    "srcu_barrier",
    "get_state_synchronize_srcu",
    "start_poll_synchronize_srcu",
    "poll_state_synchronize_srcu",
];

/// Whether `function`'s first argument is an SRCU domain.
pub fn takes_srcu_domain(function: &str) -> bool {
    SRCU_FUNCTIONS.contains(&function)
}

/// A domain's name from the symbol that starts at its address (`NAME+0 [module]` as a frame
/// prints it, without the offset), or the frame as it is (`0x...`, `NAME+OFFSET`).
pub fn domain_name(frame: &str) -> String {
    match frame.split_once("+0") {
        Some((name, rest)) if rest.is_empty() || rest.starts_with(' ') => format!("{name}{rest}"),
        _ => frame.to_string(),
    }
}

/// Who initialised a dynamic SRCU domain, from the frames of the stack that did (deepest
/// first): the first frame outside SRCU's own initialisers.
pub fn initialiser(stack: &[String]) -> Option<&str> {
    stack
        .iter()
        .map(String::as_str)
        .find(|frame| !frame.starts_with("init_srcu_struct") && !frame.starts_with("__init_srcu"))
}

/// What names the parts of a key that the programs give as numbers: a stack's id (its frames),
/// a cgroup's id (its path), an SRCU domain's address (`domain_name`).
pub struct Namers<'a> {
    pub frames: &'a mut dyn FnMut(u64) -> Vec<String>,
    pub cgroup: &'a mut dyn FnMut(u64) -> String,
    pub domain: &'a mut dyn FnMut(u64) -> String,
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
        Some(By::Srcu) => common::BY_SRCU,
    }
}

/// Key text as bpftrace prints it: a comm bare, `pid, comm`, a CPU number, a kernel stack
/// (`\n    frame+off` per frame, deepest first, then `\n`), a cgroup path first, then the
/// rest (`/a, comm`), or an SRCU domain's name.
pub fn key_text(by: By, key: &Attribution, names: &mut Namers<'_>) -> String {
    let cgroup = &mut names.cgroup;
    match by {
        By::Cgroup => cgroup(key.cgroup),
        By::CgroupComm => format!("{}, {}", cgroup(key.cgroup), comm(&key.comm)),
        By::CgroupPid => format!("{}, {}, {}", cgroup(key.cgroup), key.tgid, comm(&key.comm)),
        By::Srcu => (names.domain)(key.domain),
        By::Comm => comm(&key.comm),
        By::Pid => format!("{}, {}", key.tgid, comm(&key.comm)),
        By::Cpu => key.cpu.to_string(),
        By::Stack if key.stack == NO_STACK => "[stack lost]".to_string(),
        By::Stack => {
            let mut text = String::from("\n");
            for frame in (names.frames)(key.stack) {
                text.push_str("    ");
                text.push_str(&frame);
                text.push('\n');
            }
            text
        }
    }
}

/// A NUL-padded command name as text.
pub fn comm(bytes: &[u8; 16]) -> String {
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

    /// A dynamic domain is named after the first frame outside SRCU's initialisers, whether
    /// the exported one called `init_srcu_struct_fields()` or jumped to it.
    #[test]
    fn a_domain_is_named_after_who_initialised_it() {
        let frames = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let called = frames(&[
            "init_srcu_struct_fields+5",
            "init_srcu_struct_generic+20",
            "kvm_create_vm+291",
            "kvm_dev_ioctl+1400",
        ]);
        assert_eq!(initialiser(&called), Some("kvm_create_vm+291"));
        let jumped = frames(&["init_srcu_struct_fields+5", "kvm_create_vm+291"]);
        assert_eq!(initialiser(&jumped), Some("kvm_create_vm+291"));
        assert_eq!(initialiser(&frames(&["init_srcu_struct_fields+5"])), None);
        assert_eq!(initialiser(&[]), None);
    }

    #[test]
    fn keys_print_as_bpftrace_prints_them() {
        let mut frames =
            |id: u64| vec![format!("synchronize_rcu+{id}"), "do_syscall_64+135".into()];
        let mut cgroup = |id: u64| format!("/system.slice/unit-{id}.service");
        let mut domain = |address: u64| format!("{address:#x}");
        let mut names = Namers {
            frames: &mut frames,
            cgroup: &mut cgroup,
            domain: &mut domain,
        };
        let mut text = |by: By, k: &Attribution| key_text(by, k, &mut names);
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
        let srcu = Attribution {
            domain: 0xffff_ffff_a040_2000,
            ..k
        };
        assert_eq!(text(By::Srcu, &srcu), "0xffffffffa0402000");
    }

    #[test]
    fn a_domain_is_named_by_the_symbol_that_starts_at_it() {
        assert_eq!(
            domain_name("rcutrace_test_srcu+0 [rcutrace_test]"),
            "rcutrace_test_srcu [rcutrace_test]"
        );
        assert_eq!(domain_name("tracepoint_srcu+0"), "tracepoint_srcu");
        // Inside another symbol, or none: the frame as it is, never another symbol's name.
        assert_eq!(domain_name("kvm_vm_stats+40"), "kvm_vm_stats+40");
        assert_eq!(domain_name("srcu+05"), "srcu+05");
        assert_eq!(domain_name("0xffff88800a1b2c00"), "0xffff88800a1b2c00");
    }

    #[test]
    fn the_srcu_functions_take_their_domain_first() {
        assert!(takes_srcu_domain("synchronize_srcu"));
        assert!(takes_srcu_domain("call_srcu"));
        assert!(!takes_srcu_domain("synchronize_rcu"));
        assert!(!takes_srcu_domain("srcu_read_lock"));
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
