//! The machines users run: trees of `rcu_node`s, on Debian's 6.1, 6.12 and 7.3. Above 16 CPUs
//! the kernel puts leaves of up to 16 CPUs under a root; a small guest takes the same shape
//! with `rcutree.rcu_fanout_leaf=2` (4 CPUs: two leaves under a root). In each shape the test
//! module holds a reader on the last leaf's last CPU, spinning with preemption off and then
//! asleep inside the reader: `gp` names that CPU with the module's function on its stack,
//! and that blocked task (pid, comm, the CPU it blocked on, the module's function where it
//! was switched out), never the leaf's bit read as a CPU; no grace period is blamed on a CPU
//! that was not in it; the count of grace periods agrees with `rcu_state.gp_seq`.
//!
//! `gp` says which tree it decoded by: the leaves' CPUs, as the kernel's geometry makes them.
//! A third guest is isolated for latency work (`nohz_full=2-3 rcu_nocbs=2-3`), its firmware
//! listing 8 CPUs of which 4 are there (6.1 counts 8 possible): the counts stay exact and its
//! idle isolated CPUs are said to be found quiescent by a pass.
//! One boot per shape and kernel runs every scenario (the 64-CPU guest boots in about a
//! minute of emulation).

mod support;

use std::{collections::HashMap, time::Duration};

use rcutrace_common::records::{LastHoldout, Record};
use support::{
    assert_blocked_reader, assert_callbacks_exact, assert_gp_consistent, assert_held,
    assert_hold_spin_sampled, boot_with_module_on, boot_with_module_on_max, grace_periods, held,
    hold_interval, readout_number, run_named, sections, stall_warnings,
};

const HOLD_MS: u64 = 400;
/// A hold past the first warning of a watch with the kernel's stall timeout at 3 s (at 1 s).
const STALL_HOLD_MS: u64 = 2500;
const STALL_TIMEOUT: &str = "/sys/module/rcupdate/parameters/rcu_cpu_stall_timeout";
/// The hold during which another process makes `EXPEDITED_CALLS` expedited calls, the first
/// 0.3 s into it (room for the emulated 64-CPU guest to start the caller).
const EXPEDITED_HOLD_MS: u64 = 1500;
const EXPEDITED_CALLS: u64 = 3;
/// `membarrier()` calls: a `synchronize_rcu()` each.
const SYNCS: u64 = 20;
const CALLBACKS: u64 = 300;
/// `getppid()` calls on each CPU: two `rcu_read_lock()` each.
const READERS: u64 = 500;

/// A guest shape: its CPUs, memory and kernel options, and the leaves the kernel must say it
/// built.
struct Shape {
    cpus: u32,
    memory_mb: u32,
    kernel_args: &'static [&'static str],
    limit: Duration,
    leaves: &'static [&'static str],
}

const TWO_LEAVES_OF_TWO: Shape = Shape {
    cpus: 4,
    memory_mb: 1024,
    kernel_args: &["rcutree.rcu_fanout_leaf=2"],
    limit: Duration::from_secs(400),
    leaves: &["0-1", "2-3"],
};

const FOUR_LEAVES_OF_SIXTEEN: Shape = Shape {
    cpus: 64,
    memory_mb: 4096,
    kernel_args: &[],
    limit: Duration::from_secs(900),
    leaves: &["0-15", "16-31", "32-47", "48-63"],
};

/// No grace period names a CPU that the guest does not have, and every CPU holdout is a CPU
/// whose report the kernel gave for it (a leaf's own bits).
fn assert_cpus_named_exist(name: &str, records: &[Record], cpus: u32) {
    for g in grace_periods(records) {
        if let Some(LastHoldout {
            kind,
            cpu,
            cpu_list,
            ..
        }) = &g.last_holdout
        {
            assert!(*cpu < cpus, "{name}: {g:#?}");
            if kind == "cpu" {
                assert!(cpu_list.is_some(), "{name}: {g:#?}");
            }
        }
    }
}

fn tree(series: &str, shape: &Shape) {
    let last = shape.cpus - 1;
    let script = format!(
        "insmod /lib/rcutrace_test.ko || exit 1\n\
         echo '=== geometry'; dmesg | grep -e 'rcu_fanout_leaf' -e 'Adjusting geometry' -e 'nr_cpu_ids'\n\
         traced cbfirst 'callbacks --secs 5 -f json' 'sleep 6'\n\
         traced cpu 'gp --secs 0 --top 50 -f json' 'sh -c \"/bin/rcu-workload module hold_cpu {last} {HOLD_MS}; sleep 0.5\"'\n\
         echo '=== cpu_readout'; cat /proc/rcutrace_test\n\
         traced task 'gp --secs 0 --top 50 -f json' 'sh -c \"taskset -c {last} /bin/rcu-workload module block_reader 1 {HOLD_MS}; sleep 0.5\"'\n\
         echo '=== task_readout'; cat /proc/rcutrace_test\n\
         traced text 'gp --secs 0 --top 3' 'sh -c \"taskset -c {last} /bin/rcu-workload module block_reader 1 {HOLD_MS}; sleep 0.5\"'\n\
         printf '/bin/rcu-workload module reset 0 >/dev/null\n%s & held=$!\nsleep 0.3\n/bin/rcu-workload module synchronize_rcu_expedited {EXPEDITED_CALLS} >/dev/null\nwait $held\nsleep 0.2\n' '/bin/rcu-workload module hold_cpu {last} {EXPEDITED_HOLD_MS}' > /tmp/exp_cpu.sh\n\
         printf '/bin/rcu-workload module reset 0 >/dev/null\n%s & held=$!\nsleep 0.3\n/bin/rcu-workload module synchronize_rcu_expedited {EXPEDITED_CALLS} >/dev/null\nwait $held\nsleep 0.2\n' 'taskset -c {last} /bin/rcu-workload module block_reader 1 {EXPEDITED_HOLD_MS}' > /tmp/exp_task.sh\n\
         traced exp_cpu 'gp --secs 0 --top 100000 -f json' 'sh /tmp/exp_cpu.sh'\n\
         echo '=== exp_cpu_readout'; cat /proc/rcutrace_test\n\
         traced exp_task 'gp --secs 0 --top 100000 -f json' 'sh /tmp/exp_task.sh'\n\
         echo '=== exp_task_readout'; cat /proc/rcutrace_test\n\
         echo 3 > {STALL_TIMEOUT}\n\
         printf '%s & held=$!\\nsleep 0.3\\n/bin/rcu-workload module synchronize_rcu_expedited 1 >/dev/null\\nwait $held\\n' '/bin/rcu-workload module hold_cpu {last} {STALL_HOLD_MS}' > /tmp/stall_cpu.sh\n\
         printf '%s & held=$!\\nsleep 0.3\\n/bin/rcu-workload module synchronize_rcu_expedited 1 >/dev/null\\nwait $held\\n' 'taskset -c {last} /bin/rcu-workload module block_reader 1 {STALL_HOLD_MS}' > /tmp/stall_task.sh\n\
         traced stall_cpu 'stall -f json' 'sh /tmp/stall_cpu.sh'\n\
         traced stall_task 'stall -f json' 'sh /tmp/stall_task.sh'\n\
         echo 21 > {STALL_TIMEOUT}\n\
         {updaters}\
         printf 'for i in $(seq 0 {last}); do taskset -c $i /bin/rcu-workload getppid {READERS} >/dev/null & done; wait\\n' > /tmp/percpu.sh\n\
         traced percpu 'count --secs 0 --by cpu --top 0' 'sh /tmp/percpu.sh'\n",
        updaters = updaters_on(last, &format!("membarrier {SYNCS}")),
    );
    let guest = boot_with_module_on(
        series,
        &script,
        shape.cpus,
        shape.memory_mb,
        shape.kernel_args,
        shape.limit,
    );
    let sections = sections(&guest.stdout);
    let geometry = &sections["geometry"];
    let leaves = |records: &[Record]| support::gp_summary(records).rcu_node_leaves.clone();

    // The first callbacks run after boot, in the idle guest: its own doing left out.
    support::assert_own_callbacks_left_out("cbfirst", &run_named(&sections, "cbfirst"));

    // A reader held on the last CPU with preemption off: that CPU is the last holdout, as
    // itself (a leaf's bit), with the module's function on the stack a tick sampled there.
    let cpu = run_named(&sections, "cpu");
    let records = cpu.records();
    assert_gp_consistent("cpu", &cpu, &records);
    assert_cpus_named_exist("cpu", &records, shape.cpus);
    // The tree read from the kernel's memory is the one its geometry makes.
    assert_eq!(leaves(&records), shape.leaves, "{geometry}");
    let readout = &sections["cpu_readout"];
    assert_eq!(readout_number(readout, "hold_cpu"), u64::from(last));
    let (start, end) = hold_interval(readout, HOLD_MS);
    let g = held(&records, end);
    assert_held(g, start, end, HOLD_MS);
    let h = g.last_holdout.as_ref().expect("a last holdout");
    assert_eq!(
        (h.kind.as_str(), h.cpu, h.cpu_list.as_deref()),
        ("cpu", last, Some(last.to_string().as_str())),
        "{geometry}{g:#?}"
    );
    let writer = support::workload_value(&cpu.work, "pid") as u32;
    assert_eq!(
        (h.pid, h.comm.as_deref(), h.mode.as_deref()),
        (Some(writer), Some("rcu-workload"), Some("kernel")),
        "{g:#?}"
    );
    assert_hold_spin_sampled(&h.stack, g);

    // A reader asleep inside its critical section on the last CPU: its leaf reports itself
    // to the root when it leaves, and that report names the task, never the leaf's bit.
    let task = run_named(&sections, "task");
    let records = task.records();
    assert_gp_consistent("task", &task, &records);
    assert_cpus_named_exist("task", &records, shape.cpus);
    let (start, end) = hold_interval(&sections["task_readout"], HOLD_MS);
    let g = held(&records, end);
    assert_held(g, start, end, HOLD_MS);
    let writer = support::workload_value(&task.work, "pid") as u32;
    let h = assert_blocked_reader(g, writer, (start, end));
    assert_eq!(h.cpu, last, "{geometry}{g:#?}");

    // The text names the tree, and the blocked reader with the CPU it blocked on.
    let text = run_named(&sections, "text");
    text.assert_ok("text");
    assert!(
        text.out.contains(&format!(
            "blocked reader pid {} rcu-workload (on CPU {last},",
            { support::workload_value(&text.work, "pid") }
        )),
        "{}",
        text.out
    );
    assert!(
        !text.out.contains("reports from no rcu_node"),
        "{}",
        text.out
    );
    assert!(
        text.out.contains(&format!(
            "rcu_node tree: {} leaves of CPUs {}\n",
            shape.leaves.len(),
            shape.leaves.join(" ")
        )),
        "{}",
        text.out
    );

    // Expedited grace periods requested while the last CPU holds a reader with preemption
    // off: each one started during the hold waits for that CPU, which reports itself when
    // its reader ends; then while a reader is asleep on it, for that reader.
    assert_expedited_held(&sections, "exp_cpu", shape.cpus, last, geometry);
    assert_expedited_held(&sections, "exp_task", shape.cpus, last, geometry);

    // `stall` names the same CPU and the same task while they hold a grace period, and only
    // CPUs that owe it: the last CPU, or (for the task, whose CPU reported) none.
    let stall = run_named(&sections, "stall_cpu");
    stall.assert_ok("stall_cpu");
    let records = stall.records();
    let warnings = stall_warnings(&records);
    assert!(!warnings.is_empty(), "no warning: {}", stall.out);
    let writer = support::workload_value(&stall.work, "pid") as u32;
    for w in &warnings {
        let cpus: Vec<u32> = w
            .holdouts
            .iter()
            .filter(|h| h.kind == "cpu")
            .map(|h| h.cpu)
            .collect();
        assert_eq!(cpus, [last], "{geometry}{w:#?}");
    }
    // An expedited grace period requested during the hold waits for that CPU alone, as the
    // kernel's leaf of it says; during the blocked reader's sleep, for blocked tasks alone.
    assert_expedited_waiting_for(&records, &[last], false, geometry, &stall.out);
    let held = warnings[0]
        .holdouts
        .iter()
        .find(|h| h.kind == "cpu")
        .unwrap();
    assert_eq!(
        (held.pid, held.comm.as_deref()),
        (Some(writer), Some("rcu-workload")),
        "{:#?}",
        warnings[0]
    );
    let stall = run_named(&sections, "stall_task");
    stall.assert_ok("stall_task");
    let records = stall.records();
    let writer = support::workload_value(&stall.work, "pid") as u32;
    let named = stall_warnings(&records).into_iter().find_map(|w| {
        w.holdouts
            .iter()
            .find(|h| h.kind == "task" && h.pid == Some(writer))
    });
    let blocked = named.unwrap_or_else(|| panic!("no warning names the reader: {}", stall.out));
    assert_expedited_waiting_for(&records, &[], true, geometry, &stall.out);
    assert_eq!(blocked.cpu, last, "{blocked:#?}");
    assert!(
        blocked
            .stack
            .iter()
            .any(|f| f.starts_with("rcutrace_test_block_in_reader")),
        "{blocked:#?}"
    );

    // The updaters' counts stay exact on the last CPU: every synchronize_rcu() timed, every
    // module callback queued and invoked.
    assert_updaters_exact(&sections);

    // count --by cpu: a row for every CPU, each with at least the readers of the workload
    // pinned there, as bpftrace's `@[cpu, function]` map.
    let percpu = run_named(&sections, "percpu");
    percpu.assert_ok("percpu");
    let rows: Vec<(u32, u64)> = percpu
        .out
        .lines()
        .filter_map(|l| l.strip_prefix("@["))
        .filter_map(|l| l.split_once(", __rcu_read_lock]: "))
        .map(|(cpu, n)| (cpu.parse().unwrap(), n.trim().parse().unwrap()))
        .collect();
    let mut cpus: Vec<u32> = rows.iter().map(|(cpu, _)| *cpu).collect();
    cpus.sort_unstable();
    assert_eq!(cpus, (0..shape.cpus).collect::<Vec<_>>(), "{}", percpu.out);
    assert!(
        rows.iter().all(|(_, n)| *n >= 2 * READERS),
        "{}",
        percpu.out
    );
}

/// The expedited run `name` (`exp_cpu`: the last CPU held; `exp_task`: a reader asleep on
/// it): every expedited grace period is listed, as many as `rcu_state.expedited_sequence`
/// advanced by, each decoded (no CPU outside the guest, no report from no leaf); the module
/// made its calls; every one that started during the hold ended after it, held by the last
/// CPU reporting itself, or by the sleeping reader (pid, comm, the CPU it blocked on, where
/// it was switched out); and at least one did.
fn assert_expedited_held(
    sections: &HashMap<String, String>,
    name: &str,
    cpus: u32,
    last: u32,
    geometry: &str,
) {
    let run = run_named(sections, name);
    run.assert_ok(name);
    let records = run.records();
    let s = support::gp_summary(&records);
    let e = s
        .expedited
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: no expedited summary: {s:#?}\n{}", run.err));
    assert!(e.grace_periods > 0, "{name}: {e:#?}");
    assert_eq!(
        e.by_expedited_sequence,
        Some(e.grace_periods),
        "{name}: {e:#?}"
    );
    let [check] = e.cross_checks.as_slice() else {
        panic!("{name}: one expedited cross-check expected: {e:#?}");
    };
    assert!(check.agrees, "{name}: {check:#?}");
    assert_eq!(
        (
            e.without_report,
            e.incomplete,
            e.undecoded_reports,
            s.lost_events,
            s.kernel_reads_failed
        ),
        (0, 0, 0, 0, 0),
        "{name}: {s:#?}"
    );
    let listed = support::expedited_grace_periods(&records);
    assert_eq!(listed.len() as u64, e.grace_periods, "{name}: {e:#?}");
    for g in &listed {
        assert_eq!(
            g.quiescent_wait_ns.unwrap() + g.kthread_wake_ns.unwrap(),
            g.duration_ns,
            "{name}: {g:#?}"
        );
        let h = g.last_holdout.as_ref().expect("a last holdout");
        assert!(h.cpu < cpus, "{name}: {g:#?}");
        if h.kind == "cpu" {
            let named = cpus_of(h.cpu_list.as_deref().expect("a CPU list"));
            assert!(named.iter().all(|&c| c < cpus), "{name}: {g:#?}");
        }
    }
    let readout = &sections[&format!("{name}_readout")];
    assert_eq!(
        readout_number(readout, "calls synchronize_rcu_expedited"),
        EXPEDITED_CALLS,
        "{readout}"
    );
    // The module sleeps until its clock says the hold has passed (msleep() counted jiffies,
    // which ran ahead of that clock in the emulated 64-CPU guest).
    let (start, end) = hold_interval(readout, EXPEDITED_HOLD_MS);
    let during: Vec<_> = listed
        .iter()
        .filter(|g| g.started_ns >= start && g.started_ns <= end)
        .collect();
    assert!(
        !during.is_empty(),
        "{name}: no expedited grace period started during the hold {start}..{end}: {listed:#?}"
    );
    let writer = support::workload_value(&run.work, "pid") as u32;
    // What a failure below needs beside the record: the run's losses and its notes.
    let losses = format!(
        "lost events {}, stacks {}, blocked readers not followed {}, kernel reads failed {}, \
         missed by the kernel {} {:?}\n{}",
        s.lost_events,
        s.lost_stacks,
        s.blocked_readers_not_followed,
        s.kernel_reads_failed,
        s.missed_by_kernel,
        s.missed_by_hook,
        run.err
    );
    for g in during {
        assert!(
            g.started_ns + g.held_ns.unwrap() >= end,
            "{name}: its last report came before the hold ended at {end}: {g:#?}"
        );
        let h = g.last_holdout.as_ref().expect("a last holdout");
        if name == "exp_cpu" {
            assert_eq!(
                (
                    h.kind.as_str(),
                    h.cpu,
                    h.cpu_list.as_deref(),
                    h.found_by_pass
                ),
                ("cpu", last, Some(last.to_string().as_str()), Some(false)),
                "{geometry}{name}: {g:#?}\n{losses}"
            );
        } else {
            assert_eq!(h.cpu, last, "{geometry}{name}: {g:#?}\n{losses}");
            support::assert_blocked_reader(g, writer, (start, end));
        }
    }
}

/// The guest's `srlat` and `callbacks` runs, for `assert_updaters_exact`: `synchronize_rcu()`
/// calls by `rcu-workload SYNCS` (`SYNCS` of them) and the module's callbacks, from a writer
/// pinned to `cpu`.
fn updaters_on(cpu: u32, syncs: &str) -> String {
    format!(
        "traced srlat 'srlat --secs 0 --pid WPID' 'taskset -c {cpu} /bin/rcu-workload {syncs}'\n\
         printf 'taskset -c {cpu} /bin/rcu-workload module call_rcu {CALLBACKS}\\n/bin/rcu-workload module rcu_barrier 1\\n' > /tmp/callbacks.sh\n\
         traced callbacks 'callbacks --secs 0 --top 0 -f json' 'sh /tmp/callbacks.sh'\n"
    )
}

/// The `srlat` and `callbacks` runs of a guest: every `synchronize_rcu()` of the pinned
/// writer timed, every module callback queued and invoked.
fn assert_updaters_exact(sections: &HashMap<String, String>) {
    let srlat = run_named(sections, "srlat");
    srlat.assert_ok("srlat");
    assert_eq!(
        srlat.number_after("@srlat count", "count"),
        Some(SYNCS as f64),
        "{}",
        srlat.out
    );
    let callbacks = run_named(sections, "callbacks");
    callbacks.assert_ok("callbacks");
    assert_callbacks_exact(
        &callbacks.records(),
        "rcutrace_test_cb [rcutrace_test]",
        "call_rcu",
        CALLBACKS,
    );
}

/// The CPUs of a cpulist (`0,2-3`).
fn cpus_of(list: &str) -> Vec<u32> {
    list.split(',')
        .flat_map(|part| match part.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<u32>>(),
            None => vec![part.parse().unwrap()],
        })
        .collect()
}

/// A guest isolated for latency work as people run one: CPUs 2-3 without ticks while they
/// run one task or none (`nohz_full`) and with their callbacks offloaded (`rcu_nocbs`), and
/// on 6.1 room for 4 more CPUs to be plugged in (QEMU's `maxcpus=8`: the firmware lists more
/// CPUs than are there, as on servers with empty sockets). The kernel refuses `membarrier()` there, so the
/// module calls `synchronize_rcu()`. The answers stay exact, and `gp` says how the isolated
/// CPUs' quiescent states were found: by the kthread's passes, which find them idle (they
/// have no tick to report with).
fn isolated(series: &str) {
    let script = format!(
        "insmod /lib/rcutrace_test.ko || exit 1\n\
         echo '=== isolated'; cat /sys/devices/system/cpu/nohz_full; dmesg | grep -i 'offload'\n\
         echo '=== possible'; cat /sys/devices/system/cpu/possible /sys/devices/system/cpu/online\n\
         traced gp 'gp --secs 0 --top 100 -f json' 'sh -c \"/bin/rcu-workload module synchronize_rcu {SYNCS}; /bin/rcu-workload module hold_cpu 3 {HOLD_MS}; sleep 0.5\"'\n\
         echo '=== readout'; cat /proc/rcutrace_test\n\
         {updaters}",
        updaters = updaters_on(3, &format!("module synchronize_rcu {SYNCS}")),
    );
    let guest = boot_with_module_on_max(
        series,
        &script,
        (4, 8),
        1024,
        &["nohz_full=2-3", "rcu_nocbs=2-3"],
        Duration::from_secs(400),
    );
    let sections = sections(&guest.stdout);
    let isolated = &sections["isolated"];
    assert!(isolated.starts_with("2-3\n"), "{isolated}");
    assert!(
        isolated.contains("Offload RCU callbacks from CPUs: 2-3"),
        "{isolated}"
    );
    // Room for CPUs that could be plugged in: the kernel's maps and rcutrace's per-CPU ones
    // have a slot for each, and no CPU is named that is not there. 6.12 and 7.3 count only
    // the present CPUs of this machine possible (seen; `possible_cpus=` does not change it),
    // so they have none to spare here.
    let possible = if series == "6.1" { "0-7" } else { "0-3" };
    assert_eq!(sections["possible"], format!("{possible}\n0-3\n"));

    let gp = run_named(&sections, "gp");
    let records = gp.records();
    assert_gp_consistent("gp", &gp, &records);
    assert_cpus_named_exist("gp", &records, 4);
    // The hold on isolated CPU 3 held its grace period up, and CPU 3 is named.
    let (start, end) = hold_interval(&sections["readout"], HOLD_MS);
    let g = held(&records, end);
    assert_held(g, start, end, HOLD_MS);
    let h = g.last_holdout.as_ref().expect("a last holdout");
    assert_eq!((h.kind.as_str(), h.cpu), ("cpu", 3), "{g:#?}");
    // Idle isolated CPUs are found quiescent by the kthread's passes, and gp says so.
    let found: Vec<&LastHoldout> = grace_periods(&records)
        .into_iter()
        .filter_map(|g| g.last_holdout.as_ref())
        .filter(|h| h.kind == "cpu")
        .filter(|h| {
            let cpus = cpus_of(h.cpu_list.as_deref().unwrap_or_default());
            cpus.contains(&2) || cpus.contains(&3)
        })
        .collect();
    assert!(
        found.iter().any(|h| h.found_by_pass == Some(true)),
        "{found:#?}"
    );

    assert_updaters_exact(&sections);
}

fn two_leaves(series: &str) {
    tree(series, &TWO_LEAVES_OF_TWO);
}

fn four_leaves(series: &str) {
    tree(series, &FOUR_LEAVES_OF_SIXTEEN);
}

#[test]
fn two_leaves_of_two_cpus_on_6_1() {
    two_leaves("6.1");
}

#[test]
fn two_leaves_of_two_cpus_on_6_12() {
    two_leaves("6.12");
}

#[test]
fn two_leaves_of_two_cpus_on_7_3() {
    two_leaves("7.3");
}

#[test]
fn isolated_cpus_on_6_1() {
    isolated("6.1");
}

#[test]
fn isolated_cpus_on_6_12() {
    isolated("6.12");
}

#[test]
fn isolated_cpus_on_7_3() {
    isolated("7.3");
}

#[test]
fn sixty_four_cpus_on_6_1() {
    four_leaves("6.1");
}

#[test]
fn sixty_four_cpus_on_6_12() {
    four_leaves("6.12");
}

#[test]
fn sixty_four_cpus_on_7_3() {
    four_leaves("7.3");
}

/// Every expedited stall warning of a run waits for exactly `cpus`, and for blocked tasks
/// as `blocked_tasks` says; there is at least one.
fn assert_expedited_waiting_for(
    records: &[Record],
    cpus: &[u32],
    blocked_tasks: bool,
    geometry: &str,
    out: &str,
) {
    let waits: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::ExpeditedStallWarning(w) => Some(&w.waiting_for),
            _ => None,
        })
        .collect();
    assert!(!waits.is_empty(), "{geometry}no expedited warning: {out}");
    for waiting_for in waits {
        let w = waiting_for
            .as_ref()
            .unwrap_or_else(|| panic!("{geometry}unread: {out}"));
        assert_eq!(
            (w.cpus.as_slice(), w.blocked_tasks),
            (cpus, blocked_tasks),
            "{geometry}{out}"
        );
    }
}
