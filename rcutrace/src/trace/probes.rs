//! The probe table: every kernel function rcutrace hooks, what it is to RCU, the eBPF programs
//! that can serve it, and the rules that decide which ways of hooking it are tried, in which
//! order.
//!
//! This is pure data and logic; `tracer` carries the plan out against the kernel.

use std::fmt;

use crate::model::attribution::takes_srcu_domain;

use rcutrace_common::{
    callbacks,
    counters::{self, CounterSlot},
    gp,
    latency::MAX_TIMED,
};

/// A way of running an eBPF program at a kernel function's entry or return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Kprobe,
    /// A kprobe of a kprobe-multi link, which puts one program on many functions in one
    /// ftrace update; the functions are told apart by their cookies (6.0+, with fprobes).
    KprobeMulti,
    Kretprobe,
    Fentry,
    Fexit,
    /// A kernel tracepoint (`Probe::tracepoint`), where the kernel has it.
    Tracepoint,
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Kprobe => "kprobe",
            Method::KprobeMulti => "kprobe-multi",
            Method::Kretprobe => "kretprobe",
            Method::Fentry => "fentry",
            Method::Fexit => "fexit",
            Method::Tracepoint => "tracepoint",
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

/// Which family of eBPF programs serves a probe; the program for a method is named from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Programs {
    /// `count`'s programs for one counter slot.
    Counter(CounterSlot),
    /// The latency programs of one timed function (`0..MAX_TIMED`).
    Timed(u32),
    /// The program that ends a timed call with no sample when its entry function returns
    /// false (`Timed::found_nothing`); only timed function 0 has one.
    TimedFoundNothing(u32),
    /// `callbacks`' programs for one hook (`enqueue`, `dequeue`, `call_rcu`, ...).
    Callbacks(&'static str),
    /// `gp`'s programs for one hook (`init`, `report`, `tick`, ...): kprobes and kretprobes
    /// only, since these functions run in the scheduler, the tick and RCU's core.
    GracePeriod(&'static str),
    /// `srlat --stages`' programs for one hook (`sync`, `exp_select`, ...): kprobes and
    /// kretprobes only, for the same reasons, and the entries read the caller's registers.
    Stages(&'static str),
    /// The programs that follow rcutrace's own tasks-RCU work (`request`, `list`,
    /// `grace_period`): kprobes only, since a trampoline would itself queue such work.
    OwnWork(&'static str),
    /// `run`'s programs that follow the command's threads and the work they cause (`fork`,
    /// `switch`, `queue_work`, ...): scheduler and workqueue tracepoints.
    Followed(&'static str),
    /// The program that keeps who initialised each dynamic SRCU domain (`--by srcu`): a
    /// kprobe, which reads the stack.
    DomainInit,
}

/// One hook: a kernel function, the side, and the programs that can serve it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub function: &'static str,
    pub side: Side,
    pub programs: Programs,
    /// Under `--attach auto`, try a kprobe before a trampoline: the entry of a function whose
    /// return is hooked too. A second program on one trampoline makes the kernel replace the
    /// trampoline's image, and freeing the old one runs a tasks-RCU grace period, whose
    /// kthread calls synchronize_rcu(): rcutrace's own doing, which would land in its window.
    pub prefer_kprobe: bool,
}

/// Functions that a BPF trampoline must never hook: the trampoline itself takes
/// `rcu_read_lock()`, so it recurses; 6.4+ refuse it, Debian's 6.1 hangs outright.
const TRAMPOLINE_UNSAFE: &[&str] = &["__rcu_read_lock", "__rcu_read_unlock"];

/// The grace-period hooks that also have a trampoline program (the others run where a
/// trampoline's own `rcu_read_lock()` would recurse): the quiescent-state report, which a
/// kprobe misses when it fires inside another kprobe's handler on the same CPU, and the
/// kthread's milestones, which a kprobe misses while a map operation from user space holds
/// the CPU's BPF lock (the kthread preempting a scrape): both skipped, a grace period would
/// go unseen.
const GP_TRAMPOLINE_HOOKS: &[&str] = &["report", "init", "cleanup"];

impl Probe {
    /// How a user names the hook: its function, and a return hook as the kernel's probe
    /// events write it (`rcu_gp_init%return`).
    pub fn hook_name(&self) -> String {
        match self.side {
            Side::Entry => self.function.to_string(),
            Side::Return => format!("{}%return", self.function),
        }
    }

    /// `(category, name)` where this probe is a tracepoint, written `category:name` in place
    /// of a function (no kernel function has a colon in its name).
    pub fn tracepoint(&self) -> Option<(&'static str, &'static str)> {
        self.function.split_once(':')
    }

    /// The eBPF program that serves this probe by `method`, if there is one.
    pub fn program(&self, method: Method) -> Option<String> {
        if (method == Method::Tracepoint) != self.tracepoint().is_some() {
            return None;
        }
        let side_of = |method| match method {
            Method::Kprobe | Method::KprobeMulti | Method::Fentry | Method::Tracepoint => {
                Side::Entry
            }
            Method::Kretprobe | Method::Fexit => Side::Return,
        };
        if side_of(method) != self.side {
            return None;
        }
        let trampoline = matches!(method, Method::Fentry | Method::Fexit);
        if trampoline && TRAMPOLINE_UNSAFE.contains(&self.function) {
            return None;
        }
        if method == Method::KprobeMulti {
            return self.multi_program();
        }
        match self.programs {
            // The reader's only program: no trampoline program exists for it at all.
            Programs::Counter(counters::READ_LOCK) => {
                (method == Method::Kprobe).then(|| "count_read_lock_kprobe".to_string())
            }
            Programs::Counter(slot) if slot < counters::COUNTER_SLOTS => {
                Some(format!("count_{slot}_{method}"))
            }
            Programs::Timed(index) if index < MAX_TIMED => {
                let side = if self.side == Side::Entry {
                    "entry"
                } else {
                    "return"
                };
                Some(format!("timed_{index}_{side}_{method}"))
            }
            Programs::TimedFoundNothing(0) => Some(format!("timed_0_found_nothing_{method}")),
            Programs::Callbacks(hook) => Some(format!("callbacks_{hook}_{method}")),
            Programs::GracePeriod(hook) => (!trampoline || GP_TRAMPOLINE_HOOKS.contains(&hook))
                .then(|| format!("gp_{hook}_{method}")),
            Programs::Stages(hook) => (!trampoline).then(|| format!("stages_{hook}_{method}")),
            Programs::OwnWork(hook) => {
                (method == Method::Kprobe).then(|| format!("own_work_{hook}_kprobe"))
            }
            Programs::Followed(hook) => Some(format!("followed_{hook}_{method}")),
            Programs::DomainInit => (method == Method::Kprobe).then(|| "domain_init_kprobe".into()),
            Programs::Counter(_) | Programs::Timed(_) | Programs::TimedFoundNothing(_) => None,
        }
    }
}

impl Probe {
    /// The program that serves this probe among others through one kprobe-multi link, the
    /// cookie telling them apart: every counted function but the reader, whose probe is
    /// switched on and off by itself (`--sample-readers`) and is hit too often to share a
    /// program that looks its cookie up; and the grace-period entry hooks of `gp_hook_cookie`.
    fn multi_program(&self) -> Option<String> {
        match self.programs {
            _ if TRAMPOLINE_UNSAFE.contains(&self.function) => None,
            Programs::Counter(slot)
                if slot != counters::READ_LOCK && slot < counters::COUNTER_SLOTS =>
            {
                Some(MULTI_COUNTER.to_string())
            }
            Programs::GracePeriod(hook) if gp_hook_cookie(hook).is_some() => {
                Some(MULTI_GRACE_PERIODS.to_string())
            }
            _ => None,
        }
    }

    /// The program the kprobe-multi link's program tail-calls for this probe's hits, found by
    /// its cookie, where it has one: a grace-period hook's own kprobe program, loaded as the
    /// link's (the verifier checks it alone, where one program of them all took it longer).
    pub fn multi_hook_program(&self) -> Option<String> {
        match self.programs {
            Programs::GracePeriod(hook) if gp_hook_cookie(hook).is_some() => {
                self.program(Method::Kprobe)
            }
            _ => None,
        }
    }

    /// The cookie this probe's function is attached with on its kprobe-multi link.
    pub fn multi_cookie(&self) -> u64 {
        match self.programs {
            Programs::Counter(slot) => u64::from(slot),
            Programs::GracePeriod(hook) => gp_hook_cookie(hook).unwrap_or(0),
            _ => 0,
        }
    }
}

/// The cookie of a grace-period entry hook on the kprobe-multi link, for those it serves:
/// every entry kprobe but two kinds. The kthread's milestones and the reports keep their
/// trampolines (a kprobe-multi link skips hits where a kprobe does, while a map operation
/// holds the CPU's BPF lock). The tick and the context switch keep a kprobe each: they run on
/// every CPU many times a second, and their programs ran two to four times longer through the
/// link than on kprobes (the same code, `bpf_stats`, emulated 6.12), where the link's gains
/// are at attach and detach, which the five rarer hooks still give.
fn gp_hook_cookie(hook: &str) -> Option<u64> {
    Some(match hook {
        "fqs" => gp::HOOK_FQS,
        "unblock" => gp::HOOK_UNBLOCK,
        "expedited_start" => gp::HOOK_EXPEDITED_START,
        "expedited_report" => gp::HOOK_EXPEDITED_REPORT,
        "expedited_walk" => gp::HOOK_EXPEDITED_WALK,
        _ => return None,
    })
}

/// The grace-period program of the kprobe-multi links.
const MULTI_GRACE_PERIODS: &str = "gp_multi_kprobe";

/// The table of the programs (`Probe::multi_hook_program`) that a kprobe-multi link's program
/// tail-calls, by cookie.
pub const MULTI_HOOK_TABLE: &str = "GP_MULTI_HOOKS";

/// The counter program of the kprobe-multi links.
const MULTI_COUNTER: &str = "count_multi_kprobe";

/// What the attributions need from the attach method.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Keys {
    #[default]
    Plain,
    /// Kernel stacks are keys: entries are hooked by kprobe, whose stack starts at the probed
    /// function as bpftrace's `kstack` does (a trampoline's starts in the trampoline).
    Stacks,
}

/// Who loads a method's programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loader {
    Aya,
    /// `own_links`: what aya 0.14 cannot load (a kprobe-multi link's program), or only at a
    /// cost (a trampoline's).
    Own,
}

/// Every program `plan` may try for `probes` that `loader` loads: what a run that attaches
/// them needs it to.
pub fn planned_programs(
    probes: &[Probe],
    choice: AttachChoice,
    keys: Keys,
    loader: Loader,
) -> impl Iterator<Item = String> + '_ {
    probes
        .iter()
        .flat_map(move |probe| {
            let planned = plan(probe, choice, keys);
            let linked = planned.iter().any(|(m, _)| *m == Method::KprobeMulti);
            let hook = probe
                .multi_hook_program()
                .filter(|_| linked)
                .map(|program| (Method::KprobeMulti, program));
            planned.into_iter().chain(hook)
        })
        .filter(move |(method, _)| method.loader() == loader)
        .map(|(_, program)| program)
}

/// The `(method, program)` pairs to try for `probe`, in order. Under `--attach auto`, a probe
/// a kprobe-multi link can serve is tried there first, with the others of its run (one ftrace
/// update for them all); on a kernel without such links the tracer passes over that entry.
pub fn plan(probe: &Probe, choice: AttachChoice, keys: Keys) -> Vec<(Method, String)> {
    if probe.tracepoint().is_some() {
        return probe
            .program(Method::Tracepoint)
            .map(|program| (Method::Tracepoint, program))
            .into_iter()
            .collect();
    }
    let (probe_method, trampoline_method) = match probe.side {
        Side::Entry => (Method::Kprobe, Method::Fentry),
        Side::Return => (Method::Kretprobe, Method::Fexit),
    };
    let kprobe = probe
        .program(probe_method)
        .map(|program| (probe_method, program));
    let stacks_need_kprobe = keys == Keys::Stacks && probe.side == Side::Entry;
    let trampoline = probe
        .program(trampoline_method)
        .filter(|_| !stacks_need_kprobe)
        .map(|program| (trampoline_method, program));
    let order = match (choice, trampoline) {
        (AttachChoice::Kprobe, _) | (_, None) => vec![kprobe],
        (AttachChoice::Fentry, Some(trampoline)) => vec![Some(trampoline)],
        (AttachChoice::Auto, Some(trampoline)) if probe.prefer_kprobe => {
            vec![kprobe, Some(trampoline)]
        }
        (AttachChoice::Auto, Some(trampoline)) => vec![Some(trampoline), kprobe],
    };
    let batched = probe
        .program(Method::KprobeMulti)
        .filter(|_| choice == AttachChoice::Auto && !stacks_need_kprobe)
        .map(|program| (Method::KprobeMulti, program));
    batched
        .into_iter()
        .chain(order.into_iter().flatten())
        .collect()
}

/// What a function is to RCU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Enters a read-side critical section.
    Reader,
    /// Queues a callback for after a grace period.
    Queues,
    /// Blocks its caller until a grace period (or all callbacks) completed.
    Waits,
    /// Takes or checks a grace-period cookie without blocking.
    Polls,
    /// Runs once per grace period, in the grace-period kthread.
    GracePeriod,
}

/// A function `rcutrace count` counts, and the slot its count lands in.
#[derive(Clone, Copy, Debug)]
pub struct Counted {
    pub role: Role,
    /// Counted by plain `count`; the rest only with `count --all`.
    pub by_default: bool,
    pub probe: Probe,
}

impl Counted {
    pub fn function(&self) -> &'static str {
        self.probe.function
    }

    pub fn slot(&self) -> CounterSlot {
        match self.probe.programs {
            Programs::Counter(slot) => slot,
            Programs::Timed(_)
            | Programs::TimedFoundNothing(_)
            | Programs::Callbacks(_)
            | Programs::GracePeriod(_)
            | Programs::Stages(_)
            | Programs::OwnWork(_)
            | Programs::Followed(_)
            | Programs::DomainInit => {
                unreachable!("counted functions use counter programs")
            }
        }
    }
}

const fn counted(
    function: &'static str,
    slot: CounterSlot,
    role: Role,
    by_default: bool,
) -> Counted {
    Counted {
        role,
        by_default,
        probe: Probe {
            function,
            side: Side::Entry,
            programs: Programs::Counter(slot),
            prefer_kprobe: false,
        },
    }
}

use Role::*;

/// Everything `rcutrace count` counts: plain `count` the first seven; `count --all` every RCU
/// update-side function the kernel's own tools/rcu/rcu-updaters.sh counts, and rcu_gp_init.
/// The readers' probe: every rcu_read_lock() of a preemptible kernel.
pub const READERS: Counted = counted("__rcu_read_lock", counters::READ_LOCK, Reader, true);

pub const COUNTED: &[Counted] = &[
    READERS,
    counted("call_rcu", counters::CALL_RCU, Queues, true),
    counted("call_rcu_hurry", counters::CALL_RCU_HURRY, Queues, true),
    counted("kvfree_call_rcu", counters::KVFREE_CALL_RCU, Queues, true),
    counted("synchronize_rcu", counters::SYNCHRONIZE_RCU, Waits, true),
    counted(
        "synchronize_rcu_expedited",
        counters::SYNCHRONIZE_RCU_EXPEDITED,
        Waits,
        true,
    ),
    counted("rcu_gp_fqs_loop", counters::GP_FQS_LOOP, GracePeriod, true),
    counted("rcu_gp_init", 7, GracePeriod, false),
    counted("call_rcu_tasks", 8, Queues, false),
    counted("call_rcu_tasks_rude", 9, Queues, false),
    counted("call_rcu_tasks_trace", 10, Queues, false),
    counted("call_srcu", 11, Queues, false),
    counted("rcu_barrier", 12, Waits, false),
    counted("rcu_barrier_tasks", 13, Waits, false),
    counted("rcu_barrier_tasks_rude", 14, Waits, false),
    counted("rcu_barrier_tasks_trace", 15, Waits, false),
    counted("srcu_barrier", 16, Waits, false),
    counted("synchronize_rcu_tasks", 17, Waits, false),
    counted("synchronize_rcu_tasks_rude", 18, Waits, false),
    counted("synchronize_rcu_tasks_trace", 19, Waits, false),
    counted("synchronize_srcu", 20, Waits, false),
    counted("synchronize_srcu_expedited", 21, Waits, false),
    counted("get_state_synchronize_rcu", 22, Polls, false),
    counted("get_state_synchronize_rcu_full", 23, Polls, false),
    counted("start_poll_synchronize_rcu", 24, Polls, false),
    counted("start_poll_synchronize_rcu_full", 25, Polls, false),
    counted("start_poll_synchronize_rcu_expedited", 26, Polls, false),
    counted(
        "start_poll_synchronize_rcu_expedited_full",
        27,
        Polls,
        false,
    ),
    counted("poll_state_synchronize_rcu", 28, Polls, false),
    counted("poll_state_synchronize_rcu_full", 29, Polls, false),
    counted("cond_synchronize_rcu", 30, Waits, false),
    counted("cond_synchronize_rcu_full", 31, Waits, false),
    counted("cond_synchronize_rcu_expedited", 32, Waits, false),
    counted("cond_synchronize_rcu_expedited_full", 33, Waits, false),
    counted("get_state_synchronize_srcu", 34, Polls, false),
    counted("start_poll_synchronize_srcu", 35, Polls, false),
    counted("poll_state_synchronize_srcu", 36, Polls, false),
];

const fn own_work(function: &'static str, hook: &'static str) -> Probe {
    Probe {
        function,
        side: Side::Entry,
        programs: Programs::OwnWork(hook),
        prefer_kprobe: true,
    }
}

/// The hooks that follow rcutrace's own tasks-RCU and SRCU work (see
/// `rcutrace_common::own_work`), attached before any probe of a command, so that the work its
/// attaching queues is seen: the queueing functions (the rude flavour's grace periods make no
/// RCU calls: not followed), the callback list a kthread advances before each grace period
/// (and SRCU accelerates after queueing), and the start of the grace periods that call
/// `synchronize_rcu()` (SRCU's: each check of its readers).
pub const OWN_WORK: &[Probe] = &[
    own_work("call_rcu_tasks", "request"),
    own_work("call_rcu_tasks_trace", "request"),
    own_work("call_srcu", "srcu_request"),
    own_work("srcu_gp_start_if_needed", "srcu_start"),
    own_work("rcu_segcblist_accelerate", "list"),
    own_work("rcu_tasks_wait_gp", "grace_period"),
    own_work("try_check_zero", "srcu_grace_period"),
];

const fn followed(tracepoint: &'static str, hook: &'static str) -> Probe {
    Probe {
        function: tracepoint,
        side: Side::Entry,
        programs: Programs::Followed(hook),
        prefer_kprobe: false,
    }
}

/// What a launched command (`run`, `-c`) is followed by: the tree of threads forked from it,
/// each until its task is freed. Tracepoints every kernel has.
pub const FOLLOWED_TREE: &[Probe] = &[
    followed("sched:sched_process_fork", "fork"),
    followed("sched:sched_process_free", "free"),
];

/// What `run` follows besides: the tree's switches off and on the CPU, and the work items it
/// queues, from queueing to the end of their run in a kworker.
pub const FOLLOWED_WORK: &[Probe] = &[
    followed("sched:sched_switch", "switch"),
    followed("workqueue:workqueue_queue_work", "queue_work"),
    followed("workqueue:workqueue_execute_start", "execute_start"),
    followed("workqueue:workqueue_execute_end", "execute_end"),
];

impl Method {
    /// Whether attaching by this method can queue RCU work that other threads do later, in
    /// the window: a trampoline's attach frees the replaced direct-call hash (and, where the
    /// function had a trampoline already, its old image) through tasks RCU; a tracepoint's
    /// frees the probe array it replaces. A kprobe's attach queues none (measured on 6.1,
    /// 6.12 and 7.3: no `call_rcu_tasks*()` or `call_srcu()` from its attaching).
    pub fn queues_deferred_work(self) -> bool {
        self.is_trampoline() || self == Method::Tracepoint
    }

    /// A BPF trampoline (fentry or fexit).
    pub fn is_trampoline(self) -> bool {
        matches!(self, Method::Fentry | Method::Fexit)
    }

    pub fn loader(self) -> Loader {
        match self {
            Method::KprobeMulti | Method::Fentry | Method::Fexit => Loader::Own,
            Method::Kprobe | Method::Kretprobe | Method::Tracepoint => Loader::Aya,
        }
    }
}

/// `plan` as it is carried out on a kernel with kprobe-multi links (`kprobe_multi`) or
/// without: with them, a probe they can serve is served by its link (should the kernel refuse
/// the link, the tracer falls back to the rest of the plan and says so); without, by the rest.
pub fn plan_on(
    probe: &Probe,
    choice: AttachChoice,
    keys: Keys,
    kprobe_multi: bool,
) -> Vec<(Method, String)> {
    let mut planned = plan(probe, choice, keys);
    let batched = planned
        .first()
        .is_some_and(|(method, _)| *method == Method::KprobeMulti);
    if batched && kprobe_multi {
        planned.truncate(1);
    } else {
        planned.retain(|(method, _)| *method != Method::KprobeMulti);
    }
    planned
}

/// Which of the own-work hooks a run attaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnWork {
    /// None: nothing asks whose doing a call is, or nothing the run attaches queues work into
    /// its window.
    Off,
    /// Tasks RCU's (`OWN_WORK_ESSENTIAL`): the first trampoline on a function queues only a
    /// tasks-RCU callback (freeing ftrace's replaced direct-call hash), and what its grace
    /// period and callbacks do after stays in tasks and normal RCU.
    TasksRcu,
    /// Every hook, SRCU's and tasks-trace RCU's too: a trampoline image replaced, a
    /// tracepoint's probe array or a switched kprobe's program array freed, go through
    /// tasks-trace RCU, which 7.x runs as SRCU.
    All,
}

impl OwnWork {
    /// The hooks attached.
    pub fn probes(self) -> Vec<Probe> {
        OWN_WORK
            .iter()
            .filter(|probe| match self {
                OwnWork::Off => false,
                OwnWork::TasksRcu => OWN_WORK_ESSENTIAL.contains(&probe.function),
                OwnWork::All => true,
            })
            .copied()
            .collect()
    }
}

/// Which own-work hooks a run of `probes` needs. Only the programs that count or time calls
/// ask whose doing a call is (`count`, `srlat`, `gplat`, `run`, `serve`'s counts, `top`'s
/// waits): `gp`, `stall` and `callbacks` start without them. And only a run whose own
/// attaching can reach into its window needs them: a kprobe's attach queues nothing
/// (measured on 6.1, 6.12 and 7.3), so a run of kprobes alone skips them, a third of its
/// start-up. A first trampoline on each function needs tasks RCU's; every hook is needed
/// where a trampoline's image is replaced (two of the run's programs on one function, or a
/// function another tool's program is attached to: `traced_by_others`), where a tracepoint
/// is attached, and where the run detaches and attaches a probe again while it counts
/// (`switches_in_window`, the sampled readers).
pub fn own_work_needed(
    probes: &[Probe],
    choice: AttachChoice,
    keys: Keys,
    switches_in_window: bool,
    kprobe_multi: bool,
    traced_by_others: &dyn Fn(&[&str]) -> bool,
) -> OwnWork {
    let asks_whose = probes.iter().any(|p| {
        matches!(
            p.programs,
            Programs::Counter(_) | Programs::Timed(_) | Programs::TimedFoundNothing(_)
        )
    });
    if !asks_whose {
        return OwnWork::Off;
    }
    let plans: Vec<(&Probe, Vec<(Method, String)>)> = probes
        .iter()
        .map(|p| (p, plan_on(p, choice, keys, kprobe_multi)))
        .collect();
    let may_use = |queueing: fn(Method) -> bool| {
        plans
            .iter()
            .any(|(_, plan)| plan.iter().any(|(method, _)| queueing(*method)))
    };
    if switches_in_window || may_use(|method| method == Method::Tracepoint) {
        return OwnWork::All;
    }
    if !may_use(Method::queues_deferred_work) {
        return OwnWork::Off;
    }
    // The functions that get a trampoline as planned (a kprobe tried first and failing is
    // the kernel refusing that function, which it does not do for these).
    let first_by = |method: fn(&Method) -> bool| -> Vec<&str> {
        plans
            .iter()
            .filter(|(_, plan)| plan.first().is_some_and(|(m, _)| method(m)))
            .map(|(probe, _)| probe.function)
            .collect()
    };
    let mut trampolined = first_by(|m| m.is_trampoline());
    trampolined.sort_unstable();
    // A trampoline beside a kprobe-multi link on one function (`count --all`'s rcu_gp_init)
    // shares its ftrace record with the link's ops: not the first-trampoline case measured.
    let batched = first_by(|m| *m == Method::KprobeMulti);
    let shared = trampolined.windows(2).any(|pair| pair[0] == pair[1])
        || trampolined.iter().any(|f| batched.contains(f));
    trampolined.dedup();
    if shared || traced_by_others(&trampolined) {
        OwnWork::All
    } else {
        OwnWork::TasksRcu
    }
}

/// How many of the first slots of the `COUNTS` array the programs of `probes` write: its only
/// writers are the counter programs, each to its own slot, so a reading need read no further.
pub fn counter_slots_written(probes: &[Probe]) -> u32 {
    probes
        .iter()
        .filter_map(|p| match p.programs {
            Programs::Counter(slot) => Some(slot + 1),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

impl Probe {
    /// Whether the hook only names what other hooks count (`SRCU_DOMAIN_INIT`): a run goes
    /// on without it.
    pub fn names_only(&self) -> bool {
        self.programs == Programs::DomainInit
    }
}

/// Where every dynamic SRCU domain is initialised, on 6.1, 6.12 and 7.3 alike (the exported
/// initialisers differ: `init_srcu_struct`, 7.x's `init_srcu_struct_generic` and `_fast`):
/// what names a domain no symbol names, for the runs that key by domain.
pub const SRCU_DOMAIN_INIT: Probe = Probe {
    function: "init_srcu_struct_fields",
    side: Side::Entry,
    programs: Programs::DomainInit,
    prefer_kprobe: true,
};

/// The functions of the own-work hooks that must be there for them to work (the trace
/// flavour is gone from 7.3's tasks RCU).
pub const OWN_WORK_ESSENTIAL: &[&str] = &[
    "call_rcu_tasks",
    "rcu_segcblist_accelerate",
    "rcu_tasks_wait_gp",
];

/// Counted functions that queue the `rcu_head` given first through normal RCU: a head of
/// rcutrace's own callbacks' chains ends there (its object is freed after that grace period).
const QUEUE_HEAD_NORMAL: &[&str] = &["call_rcu", "call_rcu_hurry", "kvfree_call_rcu"];
/// Counted functions that queue the `rcu_head` given first through tasks RCU.
const QUEUE_HEAD_TASKS: &[&str] = &[
    "call_rcu_tasks",
    "call_rcu_tasks_rude",
    "call_rcu_tasks_trace",
];

/// Bit masks of the counter slots whose function queues the head given first: through
/// normal RCU, and through tasks RCU.
pub fn head_first_slots() -> (u64, u64) {
    let mask = |functions: &[&str]| {
        COUNTED
            .iter()
            .filter(|c| functions.contains(&c.function()))
            .fold(0u64, |mask, c| mask | 1 << c.slot())
    };
    (mask(QUEUE_HEAD_NORMAL), mask(QUEUE_HEAD_TASKS))
}

/// Bit mask of the counter slots whose function takes its SRCU domain first, whose programs
/// read it with `--by srcu`.
pub fn srcu_domain_slots() -> u64 {
    COUNTED
        .iter()
        .filter(|c| takes_srcu_domain(c.function()))
        .fold(0u64, |mask, c| mask | 1 << c.slot())
}

/// Which functions `count` traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountedSet {
    /// The default seven.
    Default,
    /// `--all`: the whole table.
    All,
    /// `--by srcu`: those called on an SRCU domain.
    Srcu,
}

/// The functions `count` traces.
pub fn counted_functions(set: CountedSet) -> impl Iterator<Item = &'static Counted> {
    COUNTED.iter().filter(move |c| match set {
        CountedSet::Default => c.by_default,
        CountedSet::All => true,
        CountedSet::Srcu => takes_srcu_domain(c.function()),
    })
}

/// Functions that block their caller: the ones `srlat --func` accepts.
pub fn waiting_functions() -> impl Iterator<Item = &'static str> {
    COUNTED
        .iter()
        .filter(|c| c.role == Waits)
        .map(Counted::function)
        .chain(WAITING_WRAPPERS.iter().copied())
}

/// Functions outside RCU that wait for its grace periods, timed like its own (`srlat --func`,
/// `run`), never counted: networking's, around synchronize_rcu() and its expedited form.
const WAITING_WRAPPERS: &[&str] = &["synchronize_net"];

/// An interval rcutrace times: from `entry`'s start to `exit`'s return on the same thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timed {
    pub entry: Probe,
    pub exit: Probe,
    /// Where the entry function is one that may return false having started nothing
    /// (`rcu_gp_init()`): its return, which then ends the call with no sample, counted.
    pub found_nothing: Option<Probe>,
}

impl Timed {
    /// The timed-function index both probes' programs share.
    pub fn index(&self) -> u32 {
        match self.entry.programs {
            Programs::Timed(index) => index,
            Programs::Counter(_)
            | Programs::TimedFoundNothing(_)
            | Programs::Callbacks(_)
            | Programs::GracePeriod(_)
            | Programs::Stages(_)
            | Programs::OwnWork(_)
            | Programs::Followed(_)
            | Programs::DomainInit => {
                unreachable!("timed probes use timed programs")
            }
        }
    }

    /// Entry and return are one function: a second entry before a return means a lost return.
    pub fn same_function(&self) -> bool {
        self.entry.function == self.exit.function
    }

    /// Every probe the timing attaches.
    pub fn probes(&self) -> impl Iterator<Item = Probe> {
        [self.entry, self.exit]
            .into_iter()
            .chain(self.found_nothing)
    }
}

/// Times `entry` to `exit` with the programs of timed function `index` (`< MAX_TIMED`).
pub const fn timed(index: u32, entry: &'static str, exit: &'static str) -> Timed {
    let programs = Programs::Timed(index);
    Timed {
        entry: Probe {
            function: entry,
            side: Side::Entry,
            programs,
            prefer_kprobe: false,
        },
        exit: Probe {
            function: exit,
            side: Side::Return,
            programs,
            prefer_kprobe: false,
        },
        found_nothing: None,
    }
}

/// Times each call of `function`, from its entry to its return, with the programs of timed
/// function `index`; the entry prefers a kprobe so the function gets one trampoline only.
pub const fn timed_call(index: u32, function: &'static str) -> Timed {
    let mut timed = timed(index, function, function);
    timed.entry.prefer_kprobe = true;
    timed
}

/// Internal grace-period latency: `rcu_gp_init()` entry to `rcu_gp_cleanup()` return. An
/// `rcu_gp_init()` that returns false found no grace period to start: its call ends there.
pub const GP_LATENCY: Timed = {
    let mut timed = timed(0, "rcu_gp_init", "rcu_gp_cleanup");
    timed.found_nothing = Some(Probe {
        function: "rcu_gp_init",
        side: Side::Return,
        programs: Programs::TimedFoundNothing(0),
        prefer_kprobe: false,
    });
    timed
};

/// `count --all`'s count of the `rcu_gp_init()` calls that found no grace period to start.
pub const GP_INIT_FOUND_NOTHING: Probe = Probe {
    function: "rcu_gp_init",
    side: Side::Return,
    programs: Programs::Counter(counters::GP_INIT_FOUND_NOTHING),
    prefer_kprobe: false,
};

const fn callback_hook(function: &'static str, side: Side, hook: &'static str) -> Probe {
    Probe {
        function,
        side,
        programs: Programs::Callbacks(hook),
        prefer_kprobe: false,
    }
}

/// What `rcutrace callbacks` hooks. Only `queue` and `invoke` are indispensable.
pub struct CallbackProbes {
    /// Every callback for normal RCU, SRCU and tasks RCU is put on a CPU's list here, with
    /// its `rcu_head` (function already set), except on CPUs whose callbacks are offloaded
    /// (`rcu_nocbs=`, `nohz_full=`), where many go to the bypass list below instead.
    pub queue: Probe,
    /// The offloaded CPUs' bypass list: `rcu_cblist_enqueue(bypass, rhp)` takes one callback
    /// onto it, `rcu_cblist_flush_enqueue(list, bypass, rhp)` flushes it with one more
    /// callback (or none: `rhp` NULL) at its end. The whole list later joins the CPU's list
    /// at once (`rcu_segcblist_insert_pend_cbs()`), so each callback is seen queued once:
    /// here or at `queue`. Both are global functions of `rcu_segcblist.c`, called only from
    /// the offloading code, on Debian's 6.1, 6.12 and 7.3.
    pub bypass: Probe,
    pub bypass_flush: Probe,
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
    queue: callback_hook("rcu_segcblist_enqueue", Side::Entry, "enqueue"),
    barrier: callback_hook("rcu_segcblist_entrain", Side::Entry, "entrain"),
    bypass: callback_hook("rcu_cblist_enqueue", Side::Entry, "bypass"),
    bypass_flush: callback_hook("rcu_cblist_flush_enqueue", Side::Entry, "bypass_flush"),
    invoke: callback_hook("rcu_cblist_dequeue", Side::Return, "dequeue"),
    kvfree: callback_hook("kvfree_call_rcu", Side::Entry, "kvfree"),
    entry_points: [
        (
            callback_hook("call_rcu", Side::Entry, "call_rcu"),
            callbacks::VIA_CALL_RCU,
        ),
        (
            callback_hook("call_rcu_hurry", Side::Entry, "call_rcu_hurry"),
            callbacks::VIA_CALL_RCU_HURRY,
        ),
        (
            callback_hook("call_srcu", Side::Entry, "call_srcu"),
            callbacks::VIA_CALL_SRCU,
        ),
        (
            callback_hook("call_rcu_tasks", Side::Entry, "call_rcu_tasks"),
            callbacks::VIA_CALL_RCU_TASKS,
        ),
        (
            callback_hook("call_rcu_tasks_trace", Side::Entry, "call_rcu_tasks_trace"),
            callbacks::VIA_CALL_RCU_TASKS_TRACE,
        ),
        (
            callback_hook("call_rcu_tasks_rude", Side::Entry, "call_rcu_tasks_rude"),
            callbacks::VIA_CALL_RCU_TASKS_RUDE,
        ),
    ],
};

impl CallbackProbes {
    /// Attach order: the queueing probes first, so that the callbacks rcutrace's own
    /// attaching queues are seen as its own (each trampoline's registration frees the
    /// kernel's old table of direct calls through `call_rcu_tasks()`, and their invocations
    /// come in the window). Nothing is counted until every probe is attached, so the entry
    /// points and the invocation probe need no place of their own in the order.
    pub fn in_attach_order(&self) -> Vec<Probe> {
        let mut probes = vec![
            self.queue,
            self.bypass,
            self.bypass_flush,
            self.barrier,
            self.invoke,
            self.kvfree,
        ];
        probes.extend(self.entry_points.iter().map(|(p, _)| *p));
        probes
    }
}

const fn gp_hook(function: &'static str, side: Side, hook: &'static str) -> Probe {
    Probe {
        function,
        side,
        programs: Programs::GracePeriod(hook),
        prefer_kprobe: false,
    }
}

/// What `rcutrace gp` hooks: each grace period's milestones in the grace-period kthread, the
/// quiescent-state reports, and the two hot hooks that find holdouts (the tick, on CPUs
/// that still owe the grace period in progress a quiescent state; the context switch, for
/// readers switched out inside their critical section). The same functions on Debian's 6.1,
/// 6.12 and 7.3 (none inlined there).
pub struct GracePeriodProbes {
    /// `rcu_start_this_gp()` returning true: a grace period was wanted and the kthread woken.
    pub request: Probe,
    pub init: Probe,
    pub init_return: Probe,
    /// One force-quiescent-state pass over a node.
    pub fqs: Probe,
    pub report: Probe,
    pub cleanup: Probe,
    pub cleanup_return: Probe,
    pub context_switch: Probe,
    /// A blocked reader's outermost `rcu_read_unlock()` comes here, to be dequeued from its
    /// node. (`rcu_preempt_deferred_qs_irqrestore()`, which does the dequeueing, refuses
    /// kprobes on Debian's 6.12.)
    pub unblock: Probe,
    pub tick: Probe,
}

/// The expedited grace period in progress, for `serve`'s gauge of its age: from the start
/// of its CPU selection to the return of the wait that wakes its waiters (both the workqueue
/// path and the direct one pass there).
pub const EXPEDITED_START: Probe =
    gp_hook("sync_rcu_exp_select_cpus", Side::Entry, "expedited_start");
pub const EXPEDITED_END: Probe = gp_hook("rcu_exp_wait_wake", Side::Return, "expedited_end");

/// `gp`'s expedited reports: CPUs of a leaf (`rcu_report_exp_cpu_mult()`, whose mask is its
/// second argument on 6.1 and 6.12, its third on 7.3), and the walk up from a leaf
/// (`__rcu_report_exp_rnp()`), where a leaf's last blocked reader leaving is seen:
/// `rcu_report_exp_rnp()` and `rcu_report_exp_rdp()` are inlined on 6.1, 6.12 and 7.3.
/// Kprobes only, like the other expedited hooks: they run with a node's lock held, in an
/// IPI handler or a reader's unlock.
pub const EXPEDITED_REPORT: Probe =
    gp_hook("rcu_report_exp_cpu_mult", Side::Entry, "expedited_report");
pub const EXPEDITED_WALK: Probe = gp_hook("__rcu_report_exp_rnp", Side::Entry, "expedited_walk");

/// `gp`'s expedited hooks, reports before the bounds so that every expedited grace period
/// seen to start is seen whole.
pub const EXPEDITED_GRACE_PERIODS: [Probe; 4] = [
    EXPEDITED_REPORT,
    EXPEDITED_WALK,
    EXPEDITED_END,
    EXPEDITED_START,
];

/// The kernel's own RCU stall warning, a tracepoint production kernels keep (`rcutrace
/// stall` reports it beside its own earlier warning).
pub const KERNEL_STALL_WARNING: Probe =
    gp_hook("rcu:rcu_stall_warning", Side::Entry, "stall_warning");

pub const GRACE_PERIODS: GracePeriodProbes = GracePeriodProbes {
    request: gp_hook("rcu_start_this_gp", Side::Return, "request"),
    init: gp_hook("rcu_gp_init", Side::Entry, "init"),
    init_return: gp_hook("rcu_gp_init", Side::Return, "init"),
    fqs: gp_hook("force_qs_rnp", Side::Entry, "fqs"),
    report: gp_hook("rcu_report_qs_rnp", Side::Entry, "report"),
    cleanup: gp_hook("rcu_gp_cleanup", Side::Entry, "cleanup"),
    cleanup_return: gp_hook("rcu_gp_cleanup", Side::Return, "cleanup"),
    context_switch: gp_hook("rcu_note_context_switch", Side::Entry, "context_switch"),
    unblock: gp_hook("rcu_read_unlock_special", Side::Entry, "unblock"),
    tick: gp_hook("rcu_sched_clock_irq", Side::Entry, "tick"),
};

/// Without these no grace period can be assembled; without the others, what they show
/// (requests, passes, blocked readers, holdout samples) is said to be missing.
pub const GRACE_PERIODS_NEEDED: &[Probe] = &[
    GRACE_PERIODS.init,
    GRACE_PERIODS.init_return,
    GRACE_PERIODS.report,
    GRACE_PERIODS.cleanup,
    GRACE_PERIODS.cleanup_return,
];

impl GracePeriodProbes {
    /// Attach order: the optional hooks first, so that once the needed ones are in, every
    /// grace period is seen whole.
    pub fn in_attach_order(&self) -> [Probe; 10] {
        [
            self.request,
            self.fqs,
            self.context_switch,
            self.unblock,
            self.tick,
            self.report,
            self.cleanup_return,
            self.cleanup,
            self.init_return,
            self.init,
        ]
    }

    /// `in_attach_order` without the tick hook, for a command that keeps no holdout samples
    /// (`serve`): only the samples need the hottest hook.
    pub fn without_samples(&self) -> Vec<Probe> {
        self.in_attach_order()
            .into_iter()
            .filter(|p| *p != self.tick)
            .collect()
    }
}

/// The milestones of each grace period that `srlat --stages` joins calls to: the same hooks
/// as `gp`'s, the ends first so that every grace period begun is seen whole. Kprobes first:
/// a trampoline attached on 7.3 leaves tasks-RCU and SRCU work behind (its old image freed
/// after their grace periods) whose kworkers call `synchronize_rcu()`, expedited under
/// `rcu_expedited`, in the window that times the user's own calls; an expedited call then
/// waits behind rcutrace's. A short run that times calls is hurt more by that than by a
/// skipped kprobe, which its joins count.
pub const GRACE_PERIOD_BOUNDS: [Probe; 4] = [
    kprobe_first(GRACE_PERIODS.cleanup_return),
    kprobe_first(GRACE_PERIODS.cleanup),
    kprobe_first(GRACE_PERIODS.init_return),
    kprobe_first(GRACE_PERIODS.init),
];

/// What `gp --flavor srcu` hooks: each SRCU grace period's start, and the domain's
/// grace-period work, whose return tells which grace periods it ended; the returns first, so
/// that a grace period seen to begin is seen to end. The callbacks' runs too: they can wake a
/// grace period's waiters on another CPU before that work returns, and a waiter must find the
/// grace period it waited through ended. The same functions on Debian's 6.1, 6.12 and 7.3;
/// kprobes only (their programs have no trampoline: see `rcutrace-ebpf`'s `gp::srcu`).
pub const SRCU_GRACE_PERIODS: [Probe; 4] = [
    gp_hook("process_srcu", Side::Return, "srcu_work"),
    gp_hook("srcu_invoke_callbacks", Side::Entry, "srcu_callbacks"),
    gp_hook("process_srcu", Side::Entry, "srcu_work"),
    gp_hook("srcu_gp_start", Side::Entry, "srcu_start"),
];

/// Each scan of a domain's readers (`try_check_zero()`), whose return names the CPUs where
/// readers entered and have not left when it finds some. Optional: without them the grace
/// periods are still timed.
pub const SRCU_READER_SCANS: [Probe; 2] = [
    gp_hook("try_check_zero", Side::Return, "srcu_scan"),
    gp_hook("try_check_zero", Side::Entry, "srcu_scan"),
];

/// What `gp --flavor tasks` hooks: each tasks-RCU flavour's wait function, which its kthread
/// calls once per grace period (entry and return; the returns first, as above). The rude
/// flavour's is optional: 7.3 on x86 runs no rude grace period, and a kernel may lack it.
pub const TASKS_GRACE_PERIODS: [Probe; 4] = [
    gp_hook("rcu_tasks_wait_gp", Side::Return, "tasks"),
    gp_hook("rcu_tasks_rude_wait_gp", Side::Return, "tasks_rude"),
    gp_hook("rcu_tasks_wait_gp", Side::Entry, "tasks"),
    gp_hook("rcu_tasks_rude_wait_gp", Side::Entry, "tasks_rude"),
];

/// Without these no tasks-RCU grace period is seen.
pub const TASKS_GRACE_PERIODS_NEEDED: [Probe; 2] = [TASKS_GRACE_PERIODS[0], TASKS_GRACE_PERIODS[2]];
/// Each pass of classic tasks RCU over the tasks it still waits for (the holdouts), whose
/// entry names them. Optional: without it the grace periods are still timed.
pub const TASKS_HOLDOUT_PASSES: Probe =
    gp_hook("check_all_holdout_tasks", Side::Entry, "tasks_holdouts");

/// The same of tasks-trace RCU before 7.0, whose entry names the tasks whose readers it
/// still waits for. Optional, and only where the kernel has the list.
pub const TASKS_TRACE_HOLDOUT_PASSES: Probe = gp_hook(
    "check_all_holdout_tasks_trace",
    Side::Entry,
    "tasks_trace_holdouts",
);

/// Where a tasks-RCU grace period passes from one phase to the next: the returns and entries
/// of the phase steps its wait function calls (classic tasks RCU's, then tasks-trace RCU's
/// before 7.0; the rude flavour has none). Optional: without them the grace periods are
/// still timed whole.
pub const TASKS_PHASE_STEPS: [Probe; 8] = [
    gp_hook("rcu_tasks_postgp", Side::Entry, "tasks_postgp"),
    gp_hook("rcu_tasks_postscan", Side::Return, "tasks_postscan"),
    gp_hook("rcu_tasks_postscan", Side::Entry, "tasks_postscan"),
    gp_hook("rcu_tasks_pregp_step", Side::Return, "tasks_pregp"),
    gp_hook("rcu_tasks_trace_postgp", Side::Entry, "tasks_postgp"),
    gp_hook("rcu_tasks_trace_postscan", Side::Return, "tasks_postscan"),
    gp_hook("rcu_tasks_trace_postscan", Side::Entry, "tasks_postscan"),
    gp_hook("rcu_tasks_trace_pregp_step", Side::Return, "tasks_pregp"),
];

/// The tick, where a holdout task of classic tasks RCU is sampled (its kernel stack) while it
/// holds a grace period: `gp --flavor tasks` alone (it runs on every CPU's every tick).
pub const TASKS_HOLDOUT_TICKS: Probe = gp_hook("rcu_sched_clock_irq", Side::Entry, "tasks_tick");

/// Without these no tasks-rude-RCU grace period is seen.
pub const TASKS_RUDE_GRACE_PERIODS: [Probe; 2] = [TASKS_GRACE_PERIODS[1], TASKS_GRACE_PERIODS[3]];

/// The functions that block their caller until a grace period of a flavour other than
/// normal RCU's has ended (or its callbacks have run): `gp --flavor` times them, by the
/// caller's stack, as the grace periods' waiters. A kernel lacks some (7.x made tasks-trace's
/// inline wrappers over SRCU's; 6.12 has no `rcu_barrier_tasks_rude()`).
pub const TASKS_WAITS: [&str; 2] = ["synchronize_rcu_tasks", "rcu_barrier_tasks"];
pub const TASKS_RUDE_WAITS: [&str; 2] = ["synchronize_rcu_tasks_rude", "rcu_barrier_tasks_rude"];
pub const TASKS_TRACE_WAITS: [&str; 2] = ["synchronize_rcu_tasks_trace", "rcu_barrier_tasks_trace"];
/// SRCU's, each on the domain it is given first.
pub const SRCU_WAITS: [&str; 3] = [
    "synchronize_srcu",
    "synchronize_srcu_expedited",
    "srcu_barrier",
];

const fn kprobe_first(probe: Probe) -> Probe {
    Probe {
        prefer_kprobe: true,
        ..probe
    }
}

const fn stage_hook(function: &'static str, side: Side, hook: &'static str) -> Probe {
    Probe {
        function,
        side,
        programs: Programs::Stages(hook),
        prefer_kprobe: false,
    }
}

/// What `srlat --stages` hooks beside the timed calls and the grace periods' bounds. The
/// same functions on Debian's 6.1 and 6.12, where `exp_funnel_lock()` and
/// `synchronize_rcu_expedited_wait()` are inlined (their callers and callees are not).
pub struct StageProbes {
    /// The caller's entries: which grace period it needs, where its expedited request is.
    pub sync: Probe,
    pub sync_expedited: Probe,
    /// The caller queueing its `wakeme_after_rcu()` callback (6.1 through `call_rcu()`,
    /// 6.12 `call_rcu_hurry()`), and the callback's invocation.
    pub queue_call_rcu: Probe,
    pub queue_call_rcu_hurry: Probe,
    pub wakeme: Probe,
    /// The expedited worker: the request it took, selecting CPUs, each IPI's handler, and
    /// the wait for reports with the wake-ups after it.
    pub exp_work: Probe,
    pub exp_select: Probe,
    pub exp_select_end: Probe,
    pub exp_ipi: Probe,
    pub exp_wait: Probe,
    pub exp_wait_end: Probe,
}

pub const STAGES: StageProbes = StageProbes {
    sync: stage_hook("synchronize_rcu", Side::Entry, "sync"),
    sync_expedited: stage_hook("synchronize_rcu_expedited", Side::Entry, "sync_expedited"),
    queue_call_rcu: stage_hook("call_rcu", Side::Entry, "queue_call_rcu"),
    queue_call_rcu_hurry: stage_hook("call_rcu_hurry", Side::Entry, "queue_call_rcu_hurry"),
    wakeme: stage_hook("wakeme_after_rcu", Side::Entry, "wakeme"),
    exp_work: stage_hook("wait_rcu_exp_gp", Side::Entry, "exp_work"),
    exp_select: stage_hook("sync_rcu_exp_select_cpus", Side::Entry, "exp_select"),
    exp_select_end: stage_hook("sync_rcu_exp_select_cpus", Side::Return, "exp_select"),
    exp_ipi: stage_hook("rcu_exp_handler", Side::Entry, "exp_ipi"),
    exp_wait: stage_hook("rcu_exp_wait_wake", Side::Entry, "exp_wait"),
    exp_wait_end: stage_hook("rcu_exp_wait_wake", Side::Return, "exp_wait"),
};

impl StageProbes {
    /// The expedited path's hooks without which no expedited call can be taken apart.
    pub fn expedited_needed(&self) -> [Probe; 5] {
        [
            self.sync_expedited,
            self.exp_select,
            self.exp_select_end,
            self.exp_wait,
            self.exp_wait_end,
        ]
    }
}

#[cfg(test)]
mod tests;
