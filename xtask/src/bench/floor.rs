//! The floor: what an attach mechanism costs by itself. An empty program on the same hook as a
//! tracer's program, attached the same way, adds only the mechanism's cost; a tracer's added
//! cost minus that floor is its program's own share.
//!
//! The empty programs are bpftrace scripts with empty blocks (bpftrace still attaches the
//! probe and runs a program that does nothing), so no product option exists for them.

use super::sample::{Attach, Job, Tracer};

/// One program's place on the hooked function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hook {
    Kprobe,
    Kretprobe,
    Fentry,
    Fexit,
}

impl Hook {
    /// As rcutrace's log names it (`synchronize_rcu: attached by fexit (...)`).
    pub fn name(self) -> &'static str {
        match self {
            Hook::Kprobe => "kprobe",
            Hook::Kretprobe => "kretprobe",
            Hook::Fentry => "fentry",
            Hook::Fexit => "fexit",
        }
    }

    /// Patched in through a BPF trampoline rather than a kprobe.
    pub fn is_trampoline(self) -> bool {
        matches!(self, Hook::Fentry | Hook::Fexit)
    }

    /// The probe type as bpftrace 0.17 spells it (`fentry`/`fexit` came later as aliases).
    fn bpftrace_type(self) -> &'static str {
        match self {
            Hook::Kprobe => "kprobe",
            Hook::Kretprobe => "kretprobe",
            Hook::Fentry => "kfunc",
            Hook::Fexit => "kretfunc",
        }
    }
}

/// How a function's programs are attached: its entry alone (the reader), or its entry and its
/// return (synchronize_rcu()).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// kprobe at entry, kretprobe at return.
    Kprobe,
    /// kprobe at entry, fexit at return.
    KprobeFexit,
    /// fentry at entry, fexit at return.
    Fentry,
}

impl Mechanism {
    pub const ALL: [Mechanism; 3] = [Mechanism::Kprobe, Mechanism::KprobeFexit, Mechanism::Fentry];

    /// As written in a sample line's configuration.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Kprobe => "kprobe",
            Mechanism::KprobeFexit => "kprobe-fexit",
            Mechanism::Fentry => "fentry",
        }
    }

    /// The hooks it puts on `job`'s function, entry first; `None` where it must never be used.
    pub fn hooks(self, job: Job) -> Option<Vec<Hook>> {
        let (entry, ret) = match self {
            Mechanism::Kprobe => (Hook::Kprobe, Hook::Kretprobe),
            Mechanism::KprobeFexit => (Hook::Kprobe, Hook::Fexit),
            Mechanism::Fentry => (Hook::Fentry, Hook::Fexit),
        };
        match job {
            // The BPF trampoline takes rcu_read_lock() itself: on the reader it recurses
            // (6.4+ refuse it, Debian's 6.1 hangs). Readers are kprobes, entry only.
            Job::Count => (!entry.is_trampoline()).then(|| vec![entry]),
            Job::Srlat => Some(vec![entry, ret]),
        }
    }

    /// The hooks on `job`'s function, as a table row names them: "kprobe + kretprobe".
    pub fn label(self, job: Job) -> String {
        self.hooks(job)
            .unwrap_or_default()
            .iter()
            .map(|h| h.name())
            .collect::<Vec<_>>()
            .join(" + ")
    }

    /// The mechanism `tracer` uses on `job`'s function; `None` for no tracer.
    pub fn of(tracer: Tracer, job: Job) -> Option<Mechanism> {
        match (tracer, job) {
            (Tracer::None, _) => None,
            (Tracer::Floor(mechanism), _) => Some(mechanism),
            // Readers are always kprobes, whatever the tracer.
            (_, Job::Count) => Some(Mechanism::Kprobe),
            // The seed's latency script.
            (Tracer::Bpftrace, Job::Srlat) => Some(Mechanism::Kprobe),
            (Tracer::Rcutrace(Attach::Kprobe), Job::Srlat) => Some(Mechanism::Kprobe),
            (Tracer::Rcutrace(Attach::Fentry), Job::Srlat) => Some(Mechanism::Fentry),
            // rcutrace's probe table prefers a kprobe at the entry of a function whose return
            // it also hooks (a second program on one trampoline would make the kernel replace
            // it, running grace periods of rcutrace's own); the driver checks its log.
            (Tracer::Rcutrace(Attach::Auto), Job::Srlat) => Some(Mechanism::KprobeFexit),
            // A reader mode only; the namespace load's tracers time no synchronize_rcu() loop.
            (
                Tracer::RcutraceSampled | Tracer::RcutraceRun | Tracer::RcutraceSrlatCommand,
                Job::Srlat,
            ) => None,
        }
    }
}

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
        .map(|hook| format!("{}:{function} {{}}", hook.bpftrace_type()))
        .collect();
    Some(probes.join(" "))
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
