//! The probe table: every kernel function rcutrace hooks, the eBPF program for each way of
//! hooking it, and the rules that decide which ways are tried, in which order.
//!
//! This is pure data and logic; `tracer` carries the plan out against the kernel.

use std::fmt;

use rcutrace_common::{
    callbacks,
    counters::{self, CounterSlot},
};

/// A way of running an eBPF program at a kernel function's entry or return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Kprobe,
    Kretprobe,
    Fentry,
    Fexit,
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Kprobe => "kprobe",
            Method::Kretprobe => "kretprobe",
            Method::Fentry => "fentry",
            Method::Fexit => "fexit",
        })
    }
}

/// The user's `--attach` choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AttachChoice {
    /// fentry/fexit where the kernel allows it and it is safe, else kprobe/kretprobe.
    #[default]
    Auto,
    /// kprobe/kretprobe only.
    Kprobe,
    /// fentry/fexit only (except where they are unsafe: readers are always kprobes).
    Fentry,
}

/// Which end of the function the program runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Entry,
    Return,
}

/// One hook: a kernel function, the side, and the eBPF programs that can serve it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub function: &'static str,
    pub side: Side,
    /// Program for a kprobe (entry) or kretprobe (return).
    pub kprobe_program: &'static str,
    /// Program for fentry (entry) or fexit (return); `None` where a trampoline is unsafe.
    pub trampoline_program: Option<&'static str>,
}

/// Functions that a BPF trampoline must never hook: the trampoline itself takes
/// `rcu_read_lock()`, so it recurses; 6.4+ refuse it, Debian's 6.1 hangs outright.
const TRAMPOLINE_UNSAFE: &[&str] = &["__rcu_read_lock", "__rcu_read_unlock"];

/// The `(method, program)` pairs to try for `probe`, in order.
pub fn plan(probe: &Probe, choice: AttachChoice) -> Vec<(Method, &'static str)> {
    let (probe_method, trampoline_method) = match probe.side {
        Side::Entry => (Method::Kprobe, Method::Fentry),
        Side::Return => (Method::Kretprobe, Method::Fexit),
    };
    let kprobe = (probe_method, probe.kprobe_program);
    let trampoline = probe
        .trampoline_program
        .filter(|_| !TRAMPOLINE_UNSAFE.contains(&probe.function))
        .map(|program| (trampoline_method, program));
    match (choice, trampoline) {
        (AttachChoice::Kprobe, _) | (_, None) => vec![kprobe],
        (AttachChoice::Fentry, Some(trampoline)) => vec![trampoline],
        (AttachChoice::Auto, Some(trampoline)) => vec![trampoline, kprobe],
    }
}

/// A function `rcutrace count` counts, and the slot its count lands in.
#[derive(Clone, Copy, Debug)]
pub struct Counted {
    pub slot: CounterSlot,
    pub probe: Probe,
}

const fn counted(
    function: &'static str,
    slot: CounterSlot,
    kprobe_program: &'static str,
    fentry_program: Option<&'static str>,
) -> Counted {
    Counted {
        slot,
        probe: Probe {
            function,
            side: Side::Entry,
            kprobe_program,
            trampoline_program: fentry_program,
        },
    }
}

/// Everything `rcutrace count` counts.
pub const COUNTED: &[Counted] = &[
    counted(
        "__rcu_read_lock",
        counters::READ_LOCK,
        "count_read_lock_kprobe",
        None,
    ),
    counted(
        "call_rcu",
        counters::CALL_RCU,
        "count_call_rcu_kprobe",
        Some("count_call_rcu_fentry"),
    ),
    counted(
        "call_rcu_hurry",
        counters::CALL_RCU_HURRY,
        "count_call_rcu_hurry_kprobe",
        Some("count_call_rcu_hurry_fentry"),
    ),
    counted(
        "kvfree_call_rcu",
        counters::KVFREE_CALL_RCU,
        "count_kvfree_call_rcu_kprobe",
        Some("count_kvfree_call_rcu_fentry"),
    ),
    counted(
        "synchronize_rcu",
        counters::SYNCHRONIZE_RCU,
        "count_synchronize_rcu_kprobe",
        Some("count_synchronize_rcu_fentry"),
    ),
    counted(
        "synchronize_rcu_expedited",
        counters::SYNCHRONIZE_RCU_EXPEDITED,
        "count_synchronize_rcu_expedited_kprobe",
        Some("count_synchronize_rcu_expedited_fentry"),
    ),
    counted(
        "rcu_gp_fqs_loop",
        counters::GP_FQS_LOOP,
        "count_gp_fqs_loop_kprobe",
        Some("count_gp_fqs_loop_fentry"),
    ),
];

/// An interval rcutrace times: from `entry`'s start to `exit`'s return on the same thread.
#[derive(Clone, Copy, Debug)]
pub struct Latency {
    /// Map name in the output, as the bpftrace scripts call it.
    pub map_name: &'static str,
    pub entry: Probe,
    pub exit: Probe,
}

const fn latency_entry(function: &'static str) -> Probe {
    Probe {
        function,
        side: Side::Entry,
        kprobe_program: "latency_entry_kprobe",
        trampoline_program: Some("latency_entry_fentry"),
    }
}

const fn latency_exit(function: &'static str) -> Probe {
    Probe {
        function,
        side: Side::Return,
        kprobe_program: "latency_return_kretprobe",
        trampoline_program: Some("latency_return_fexit"),
    }
}

/// Internal grace-period latency: `rcu_gp_init()` entry to `rcu_gp_cleanup()` return.
pub const GP_LATENCY: Latency = Latency {
    map_name: "@gplat",
    entry: latency_entry("rcu_gp_init"),
    exit: latency_exit("rcu_gp_cleanup"),
};

pub const SYNCHRONIZE_RCU_LATENCY: Latency = Latency {
    map_name: "@srlat",
    entry: latency_entry("synchronize_rcu"),
    exit: latency_exit("synchronize_rcu"),
};

pub const SYNCHRONIZE_RCU_EXPEDITED_LATENCY: Latency = Latency {
    map_name: "@srelat",
    entry: latency_entry("synchronize_rcu_expedited"),
    exit: latency_exit("synchronize_rcu_expedited"),
};

const fn callback_entry(
    function: &'static str,
    kprobe_program: &'static str,
    fentry_program: &'static str,
) -> Probe {
    Probe {
        function,
        side: Side::Entry,
        kprobe_program,
        trampoline_program: Some(fentry_program),
    }
}

/// What `rcutrace callbacks` hooks. Only `queue` and `invoke` are indispensable.
pub struct CallbackProbes {
    /// Every callback for normal RCU, SRCU and tasks RCU is put on a CPU's list here, with
    /// its `rcu_head` (function already set); not reached on CPUs whose callbacks are
    /// offloaded (rcu_nocbs=), where they go to a bypass list first.
    pub queue: Probe,
    /// Barrier callbacks (`rcu_barrier()` and its SRCU and tasks cousins) join the lists here.
    pub barrier: Probe,
    /// Returns each `rcu_head` just before the invocation loops call its function.
    pub invoke: Probe,
    /// `kfree_rcu()` objects: counted only, the kernel frees them in batches.
    pub kvfree: Probe,
    /// API entry points, with the `Via` each leaves for the queueing that follows.
    pub entry_points: [(Probe, callbacks::Via); 6],
}

pub const CALLBACKS: CallbackProbes = CallbackProbes {
    queue: callback_entry(
        "rcu_segcblist_enqueue",
        "callbacks_enqueue_kprobe",
        "callbacks_enqueue_fentry",
    ),
    barrier: callback_entry(
        "rcu_segcblist_entrain",
        "callbacks_entrain_kprobe",
        "callbacks_entrain_fentry",
    ),
    invoke: Probe {
        function: "rcu_cblist_dequeue",
        side: Side::Return,
        kprobe_program: "callbacks_dequeue_kretprobe",
        trampoline_program: Some("callbacks_dequeue_fexit"),
    },
    kvfree: callback_entry(
        "kvfree_call_rcu",
        "callbacks_kvfree_kprobe",
        "callbacks_kvfree_fentry",
    ),
    entry_points: [
        (
            callback_entry(
                "call_rcu",
                "callbacks_call_rcu_kprobe",
                "callbacks_call_rcu_fentry",
            ),
            callbacks::VIA_CALL_RCU,
        ),
        (
            callback_entry(
                "call_rcu_hurry",
                "callbacks_call_rcu_hurry_kprobe",
                "callbacks_call_rcu_hurry_fentry",
            ),
            callbacks::VIA_CALL_RCU_HURRY,
        ),
        (
            callback_entry(
                "call_srcu",
                "callbacks_call_srcu_kprobe",
                "callbacks_call_srcu_fentry",
            ),
            callbacks::VIA_CALL_SRCU,
        ),
        (
            callback_entry(
                "call_rcu_tasks",
                "callbacks_call_rcu_tasks_kprobe",
                "callbacks_call_rcu_tasks_fentry",
            ),
            callbacks::VIA_CALL_RCU_TASKS,
        ),
        (
            callback_entry(
                "call_rcu_tasks_trace",
                "callbacks_call_rcu_tasks_trace_kprobe",
                "callbacks_call_rcu_tasks_trace_fentry",
            ),
            callbacks::VIA_CALL_RCU_TASKS_TRACE,
        ),
        (
            callback_entry(
                "call_rcu_tasks_rude",
                "callbacks_call_rcu_tasks_rude_kprobe",
                "callbacks_call_rcu_tasks_rude_fentry",
            ),
            callbacks::VIA_CALL_RCU_TASKS_RUDE,
        ),
    ],
};

impl CallbackProbes {
    /// Attach order: entry points first, so that the queueing probe, attached last, finds
    /// them in place; the invocation probe before it, so that every queueing it sees has its
    /// invocation seen too.
    pub fn in_attach_order(&self) -> Vec<Probe> {
        let mut probes: Vec<Probe> = self.entry_points.iter().map(|(p, _)| *p).collect();
        probes.extend([self.kvfree, self.barrier, self.invoke, self.queue]);
        probes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted_probe(function: &str) -> Probe {
        COUNTED
            .iter()
            .find(|c| c.probe.function == function)
            .unwrap()
            .probe
    }

    #[test]
    fn auto_prefers_trampolines_then_falls_back() {
        let plan = plan(&counted_probe("call_rcu"), AttachChoice::Auto);
        assert_eq!(
            plan,
            vec![
                (Method::Fentry, "count_call_rcu_fentry"),
                (Method::Kprobe, "count_call_rcu_kprobe")
            ]
        );
        let exit = plan_methods(&GP_LATENCY.exit, AttachChoice::Auto);
        assert_eq!(exit, vec![Method::Fexit, Method::Kretprobe]);
    }

    fn plan_methods(probe: &Probe, choice: AttachChoice) -> Vec<Method> {
        plan(probe, choice).into_iter().map(|(m, _)| m).collect()
    }

    #[test]
    fn forced_methods_are_the_only_ones_tried() {
        let probe = counted_probe("synchronize_rcu");
        assert_eq!(
            plan_methods(&probe, AttachChoice::Kprobe),
            vec![Method::Kprobe]
        );
        assert_eq!(
            plan_methods(&probe, AttachChoice::Fentry),
            vec![Method::Fentry]
        );
        let exit = SYNCHRONIZE_RCU_LATENCY.exit;
        assert_eq!(
            plan_methods(&exit, AttachChoice::Kprobe),
            vec![Method::Kretprobe]
        );
        assert_eq!(
            plan_methods(&exit, AttachChoice::Fentry),
            vec![Method::Fexit]
        );
    }

    #[test]
    fn readers_never_get_a_trampoline_whatever_is_asked() {
        let reader = counted_probe("__rcu_read_lock");
        for choice in [
            AttachChoice::Auto,
            AttachChoice::Fentry,
            AttachChoice::Kprobe,
        ] {
            assert_eq!(plan_methods(&reader, choice), vec![Method::Kprobe]);
        }
        // Even a table entry that named a trampoline program would be refused.
        let careless = Probe {
            trampoline_program: Some("anything"),
            ..reader
        };
        assert_eq!(
            plan_methods(&careless, AttachChoice::Fentry),
            vec![Method::Kprobe]
        );
    }

    #[test]
    fn callbacks_attach_queueing_last_and_name_each_entry_point_once() {
        let order = CALLBACKS.in_attach_order();
        assert_eq!(order.last(), Some(&CALLBACKS.queue));
        assert_eq!(order[order.len() - 2], CALLBACKS.invoke);
        let mut vias: Vec<_> = CALLBACKS.entry_points.iter().map(|(_, v)| *v).collect();
        vias.sort();
        vias.dedup();
        assert_eq!(vias.len(), CALLBACKS.entry_points.len());
        for (probe, via) in CALLBACKS.entry_points {
            // The entry point's printed name is its function's.
            assert_eq!(callbacks::VIA_NAMES[via as usize], probe.function);
        }
        assert_eq!(
            plan_methods(&CALLBACKS.invoke, AttachChoice::Auto),
            vec![Method::Fexit, Method::Kretprobe]
        );
    }

    #[test]
    fn every_counter_slot_is_used_once() {
        let mut slots: Vec<_> = COUNTED.iter().map(|c| c.slot).collect();
        slots.sort();
        slots.dedup();
        assert_eq!(slots.len(), COUNTED.len());
        assert!(slots.iter().all(|&s| s < counters::COUNTER_SLOTS));
    }
}
