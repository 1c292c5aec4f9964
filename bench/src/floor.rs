//! The floor: what an attach mechanism costs by itself. An empty program on the same hook as a
//! tracer's program, attached the same way, adds only the mechanism's cost; a tracer's added
//! cost minus that floor is its program's own share.
//!
//! The empty programs are bpftrace scripts with empty blocks (bpftrace still attaches the
//! probe and runs a program that does nothing), so no product option exists for them.

use crate::sample::{Hook, Job, Mechanism};

/// The function a job's timed work exercises and its tracers hook.
pub fn hooked_function(job: Job) -> &'static str {
    match job {
        Job::Count => "__rcu_read_lock",
        Job::Srlat => "synchronize_rcu",
    }
}

/// The bpftrace script that attaches empty programs to `job`'s function by `mechanism`;
/// `None` where the mechanism must never be used.
pub fn empty_script(job: Job, mechanism: Mechanism) -> Option<String> {
    let function = hooked_function(job);
    let probes: Vec<String> = mechanism
        .hooks(job)?
        .iter()
        .map(|&hook| format!("{}:{function} {{}}", bpftrace_type(hook)))
        .collect();
    Some(probes.join(" "))
}

/// The probe type as bpftrace 0.17 spells it (`fentry`/`fexit` came later as aliases).
fn bpftrace_type(hook: Hook) -> &'static str {
    match hook {
        Hook::Kprobe => "kprobe",
        Hook::Kretprobe => "kretprobe",
        Hook::Fentry => "kfunc",
        Hook::Fexit => "kretfunc",
    }
}

/// The hooks rcutrace's `RUST_LOG=info` log says it attached to `function`, sorted.
pub fn logged_hooks<'a>(log: impl IntoIterator<Item = &'a str>, function: &str) -> Vec<Hook> {
    let prefix = format!("{function}: attached by ");
    let mut hooks: Vec<Hook> = log
        .into_iter()
        .filter_map(|line| {
            let method = line.split_once(&prefix)?.1.split_whitespace().next()?;
            [Hook::Kprobe, Hook::Kretprobe, Hook::Fentry, Hook::Fexit]
                .into_iter()
                .find(|h| h.name() == method)
        })
        .collect();
    hooks.sort();
    hooks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_scripts_per_mechanism() {
        assert_eq!(
            empty_script(Job::Count, Mechanism::Kprobe).as_deref(),
            Some("kprobe:__rcu_read_lock {}")
        );
        assert_eq!(
            empty_script(Job::Srlat, Mechanism::Kprobe).as_deref(),
            Some("kprobe:synchronize_rcu {} kretprobe:synchronize_rcu {}")
        );
        assert_eq!(
            empty_script(Job::Srlat, Mechanism::KprobeFexit).as_deref(),
            Some("kprobe:synchronize_rcu {} kretfunc:synchronize_rcu {}")
        );
        assert_eq!(
            empty_script(Job::Srlat, Mechanism::Fentry).as_deref(),
            Some("kfunc:synchronize_rcu {} kretfunc:synchronize_rcu {}")
        );
        assert_eq!(Mechanism::KprobeFexit.label(Job::Srlat), "kprobe + fexit");
        assert_eq!(Mechanism::Kprobe.label(Job::Count), "kprobe");
    }

    /// No mechanism ever puts a trampoline on the reader, whatever asks for it.
    #[test]
    fn readers_never_get_a_trampoline() {
        for mechanism in Mechanism::ALL {
            let hooks = mechanism.hooks(Job::Count).unwrap_or_default();
            assert!(hooks.iter().all(|h| !h.is_trampoline()), "{mechanism:?}");
            if let Some(script) = empty_script(Job::Count, mechanism) {
                assert!(!script.contains("kfunc") && !script.contains("kretfunc"));
            }
        }
        assert_eq!(empty_script(Job::Count, Mechanism::Fentry), None);
        // The reader has no return to hook: kprobe + fexit is its kprobe alone.
        assert_eq!(
            empty_script(Job::Count, Mechanism::KprobeFexit),
            empty_script(Job::Count, Mechanism::Kprobe)
        );
        // Every configuration the reader path runs under hooks it by a kprobe.
        for &tracer in Job::Count.tracers() {
            if let Some(mechanism) = Mechanism::of(tracer, Job::Count) {
                assert_eq!(
                    mechanism.hooks(Job::Count),
                    Some(vec![Hook::Kprobe]),
                    "{tracer:?}"
                );
            }
        }
    }

    #[test]
    fn hooks_from_rcutraces_log() {
        let log = [
            "[INFO  rcutrace::tracer] synchronize_rcu: attached by kprobe (timed_0_entry_kprobe)",
            "[INFO  rcutrace::tracer] synchronize_rcu: attached by fexit (timed_0_return_fexit)",
            "[INFO  rcutrace::tracer] call_rcu: attached by fentry (count_1_fentry)",
        ];
        assert_eq!(
            logged_hooks(log, "synchronize_rcu"),
            Mechanism::KprobeFexit.hooks(Job::Srlat).unwrap()
        );
        assert_eq!(logged_hooks(log, "call_rcu"), vec![Hook::Fentry]);
        assert_eq!(logged_hooks(log, "__rcu_read_lock"), vec![]);
    }
}
