//! A tracer's footprint: the RCU work that one run of it causes in the kernel it measures, by
//! its start and its exit (loading and attaching, detaching and unloading, its allocator's
//! mappings, the tasks-RCU kthreads' grace periods for its trampolines).
//!
//! A referee (bpftrace, kprobes on every RCU updater function the kernel has and on the
//! grace-period kthread's `rcu_gp_init`) counts all of the guest's calls throughout; the
//! driver asks it for its totals at the edges of each window (a `sync()` call makes it print
//! them). A window spans a tracer's launch, attach, a short wait, its exit on SIGINT and
//! `TAIL` more, for the work its exit leaves queued; the footprint is what the referee counted
//! in it less the idle guest's rate over the same time, from an idle window of its own. bpftrace
//! is measured doing the same: its script hooks exactly what rcutrace hooked in the same run,
//! by the same mechanisms.

use std::collections::HashMap;
use std::time::Duration;

/// How long a window goes on after the tracer has exited: the tasks-RCU kthreads call
/// `synchronize_rcu()` for its trampolines' grace periods up to seconds after the detach.
pub const TAIL: Duration = Duration::from_secs(5);
/// The idle window that gives the guest's own rate of each call.
pub const IDLE_WINDOW: Duration = Duration::from_secs(10);
/// The line the referee prints after its totals.
pub const END_OF_TOTALS: &str = "=== footprint totals end";
/// The line the referee prints before them.
const TOTALS: &str = "=== footprint totals";

/// The commands whose footprint is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Footprinted {
    Count,
    Srlat,
    Callbacks,
    Gp,
    Stall,
}

impl Footprinted {
    pub const ALL: [Footprinted; 5] = [
        Footprinted::Count,
        Footprinted::Srlat,
        Footprinted::Callbacks,
        Footprinted::Gp,
        Footprinted::Stall,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Footprinted::Count => "count",
            Footprinted::Srlat => "srlat",
            Footprinted::Callbacks => "callbacks",
            Footprinted::Gp => "gp",
            Footprinted::Stall => "stall",
        }
    }

    /// rcutrace's arguments: the command as a user runs it until Ctrl-C.
    pub fn args(self) -> &'static [&'static str] {
        match self {
            Footprinted::Count => &["count", "--secs", "0"],
            Footprinted::Srlat => &["srlat", "--secs", "0"],
            Footprinted::Callbacks => &["callbacks", "--secs", "0"],
            Footprinted::Gp => &["gp", "--secs", "0"],
            Footprinted::Stall => &["stall"],
        }
    }
}

/// What the footprint counts, each a sum over kernel functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Callbacks queued: the call_rcu family and `call_srcu`.
    Queued,
    /// `kvfree_call_rcu` (kfree_rcu() and kvfree_rcu()).
    Kvfree,
    /// Updaters that wait: the synchronize_rcu family, `synchronize_srcu` and the barriers.
    Waits,
    /// Grace periods of normal RCU (`rcu_gp_init`).
    GracePeriods,
}

impl Family {
    pub const ALL: [Family; 4] = [
        Family::Queued,
        Family::Kvfree,
        Family::Waits,
        Family::GracePeriods,
    ];

    /// The functions summed; the referee hooks those the kernel has.
    pub fn functions(self) -> &'static [&'static str] {
        match self {
            Family::Queued => &[
                "call_rcu",
                "call_rcu_hurry",
                "call_rcu_tasks",
                "call_rcu_tasks_trace",
                "call_rcu_tasks_rude",
                "call_srcu",
            ],
            Family::Kvfree => &["kvfree_call_rcu"],
            Family::Waits => &[
                "synchronize_rcu",
                "synchronize_rcu_expedited",
                "synchronize_rcu_tasks",
                "synchronize_rcu_tasks_trace",
                "synchronize_rcu_tasks_rude",
                "synchronize_srcu",
                "synchronize_srcu_expedited",
                "rcu_barrier",
                "rcu_barrier_tasks",
                "rcu_barrier_tasks_trace",
                "rcu_barrier_tasks_rude",
                "srcu_barrier",
            ],
            Family::GracePeriods => &["rcu_gp_init"],
        }
    }

    /// As a row names it.
    pub fn label(self) -> &'static str {
        match self {
            Family::Queued => "callbacks queued (`call_rcu` family, `call_srcu`)",
            Family::Kvfree => "`kvfree_call_rcu`",
            Family::Waits => "waiting updaters (`synchronize_*`, barriers)",
            Family::GracePeriods => "grace periods (`rcu_gp_init`)",
        }
    }

    /// Every function of every family.
    pub fn every_function() -> impl Iterator<Item = &'static str> {
        Family::ALL
            .into_iter()
            .flat_map(|f| f.functions().iter().copied())
    }
}

/// The referee's bpftrace script: a count per function of `present` (those of the families
/// the kernel has), printed whenever `sync()` is called.
pub fn referee_script(present: &[&str]) -> String {
    let hooks: Vec<String> = present.iter().map(|f| format!("kprobe:{f}")).collect();
    format!(
        "{} {{ @[func] = count(); }} \
         tracepoint:syscalls:sys_enter_sync {{ printf(\"{TOTALS}\\n\"); print(@); \
         printf(\"{END_OF_TOTALS}\\n\"); }}",
        hooks.join(",")
    )
}

/// The referee's totals in its output so far: each `@[func]: N` between the last complete
/// pair of marker lines.
pub fn last_totals(output: &str) -> Option<HashMap<String, u64>> {
    let end = output.rfind(END_OF_TOTALS)?;
    let start = output[..end].rfind(TOTALS)?;
    Some(
        output[start..end]
            .lines()
            .filter_map(|line| {
                let (key, n) = line.strip_prefix("@[")?.split_once("]: ")?;
                Some((key.to_string(), n.trim().parse().ok()?))
            })
            .collect(),
    )
}

/// A family's calls in `after` less those in `before`.
pub fn family_calls(
    family: Family,
    before: &HashMap<String, u64>,
    after: &HashMap<String, u64>,
) -> u64 {
    family
        .functions()
        .iter()
        .map(|f| {
            let get = |totals: &HashMap<String, u64>| totals.get(*f).copied().unwrap_or(0);
            get(after).saturating_sub(get(before))
        })
        .sum()
}

/// One hook rcutrace attached, as its `RUST_LOG=info` log says
/// (`call_rcu: attached by fentry (count_1_fentry)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    pub function: String,
    pub method: String,
}

/// The hooks in rcutrace's log, in the order attached (a kprobe-multi link's line names all
/// its functions: `call_rcu, synchronize_rcu: attached by kprobe-multi (...)`).
pub fn attached_hooks<'a>(log: impl IntoIterator<Item = &'a str>) -> Vec<Attached> {
    log.into_iter()
        .filter_map(|line| {
            let (before, after) = line.split_once(": attached by ")?;
            let method = after.split_whitespace().next()?.to_string();
            let functions = before.rsplit_once("] ").map_or(before, |(_, f)| f);
            Some(
                functions
                    .split(", ")
                    .map(move |function| Attached {
                        function: function.trim().to_string(),
                        method: method.clone(),
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .flatten()
        .collect()
}

/// A bpftrace script that hooks what rcutrace hooked, by the same mechanisms, and counts:
/// bpftrace doing the same command's attaching. `None` if a method has no bpftrace spelling.
pub fn mirror_script(hooks: &[Attached]) -> Option<String> {
    let probes: Vec<String> = hooks
        .iter()
        .map(|hook| {
            let kind = match hook.method.as_str() {
                // bpftrace 0.17 puts a kprobe of its own on each function of a list.
                "kprobe" | "kprobe-multi" => "kprobe",
                "kretprobe" => "kretprobe",
                // bpftrace 0.17's names for fentry and fexit.
                "fentry" => "kfunc",
                "fexit" => "kretfunc",
                // A tracepoint's "function" is `category:name`.
                "tracepoint" => "tracepoint",
                _ => return None,
            };
            Some(format!("{kind}:{}", hook.function))
        })
        .collect::<Option<_>>()?;
    (!probes.is_empty()).then(|| {
        format!(
            "BEGIN {{ printf(\"{MIRROR_ATTACHED}\\n\"); }} {} {{ @[probe] = count(); }}",
            probes.join(",")
        )
    })
}

/// What the mirror prints once attached: bpftrace runs BEGIN after attaching every probe (its
/// banner comes before).
pub const MIRROR_ATTACHED: &str = "mirror attached";

/// The idle guest's calls over `window`, from its calls over an idle window.
pub fn idle_calls(idle_calls: u64, idle_window: Duration, window: Duration) -> f64 {
    idle_calls as f64 * window.as_secs_f64() / idle_window.as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referee_and_its_totals() {
        let script = referee_script(&["call_rcu", "rcu_gp_init"]);
        assert!(script.starts_with("kprobe:call_rcu,kprobe:rcu_gp_init { @[func] = count(); }"));
        assert!(script.contains("tracepoint:syscalls:sys_enter_sync"));
        let output = "Attaching 3 probes...\n=== footprint totals\n@[call_rcu]: 5\n\n\
            === footprint totals end\n=== footprint totals\n@[rcu_gp_init]: 2\n\
            @[call_rcu]: 12\n\n=== footprint totals end\n=== footprint totals\n@[call_rcu]: 1";
        let last = last_totals(output).unwrap();
        assert_eq!(last.get("call_rcu"), Some(&12));
        assert_eq!(last.get("rcu_gp_init"), Some(&2));
        let before = HashMap::from([("call_rcu".to_string(), 5)]);
        assert_eq!(family_calls(Family::Queued, &before, &last), 7);
        assert_eq!(family_calls(Family::GracePeriods, &before, &last), 2);
        assert_eq!(family_calls(Family::Waits, &before, &last), 0);
        assert_eq!(last_totals("=== footprint totals\n@[x]: 1\n"), None);
    }

    #[test]
    fn mirror_hooks_what_rcutrace_hooked() {
        let log = [
            "[INFO  rcutrace::trace::tracer] __rcu_read_lock: attached by kprobe (count_read_lock_kprobe)",
            "[INFO  rcutrace::trace::tracer] call_rcu: fentry failed: no",
            "[INFO  rcutrace::trace::tracer] call_rcu: attached by fentry (count_1_fentry)",
            "[INFO  rcutrace::trace::tracer] synchronize_rcu: attached by fexit (timed_0_return_fexit)",
            "[INFO  rcutrace::trace::tracer] rcu:rcu_stall_warning: attached by tracepoint (stall_warning_tracepoint)",
            "[INFO  rcutrace::trace::tracer] call_rcu_hurry, kvfree_call_rcu: attached by kprobe-multi (count_multi_kprobe)",
        ];
        let hooks = attached_hooks(log);
        assert_eq!(hooks.len(), 6);
        assert_eq!(
            mirror_script(&hooks).unwrap(),
            "BEGIN { printf(\"mirror attached\\n\"); } \
             kprobe:__rcu_read_lock,kfunc:call_rcu,kretfunc:synchronize_rcu,\
             tracepoint:rcu:rcu_stall_warning,kprobe:call_rcu_hurry,kprobe:kvfree_call_rcu \
             { @[probe] = count(); }"
        );
        assert_eq!(mirror_script(&[]), None);
        let odd = [Attached {
            function: "f".into(),
            method: "uprobe".into(),
        }];
        assert_eq!(mirror_script(&odd), None);
    }

    #[test]
    fn idle_rate_scales_with_the_window() {
        let idle = idle_calls(20, Duration::from_secs(10), Duration::from_secs(5));
        assert!((idle - 10.0).abs() < 1e-9);
    }

    #[test]
    fn families_do_not_overlap() {
        let all: Vec<&str> = Family::every_function().collect();
        for (i, f) in all.iter().enumerate() {
            assert!(!all[i + 1..].contains(f), "{f} twice");
        }
    }
}
