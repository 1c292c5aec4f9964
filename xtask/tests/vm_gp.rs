//! `rcutrace gp` against the test module's holdouts on Debian's 6.1, 6.12 and 7.3: a reader held on
//! CPU 1 with preemption off makes CPU 1 the last holdout of the grace period it holds up,
//! with the module's spinning function on the stack a tick sampled there and the writer as
//! the task running; a reader blocked inside its critical section is the last holdout of its
//! grace period as that task, blocked as long as it slept, with the module's function on the
//! stack where it was switched out. Every listed grace period's phases add up to its
//! duration, and the count of grace periods agrees with the advance of `rcu_state.gp_seq`;
//! with every kprobe disarmed for a while (as a kernel that bypasses a hook would leave it),
//! the two disagree, and rcutrace says so.

mod support;

use rcutrace_common::records::LastHoldout;
use support::{
    assert_blocked_reader, assert_gp_consistent, assert_held, assert_hold_spin_sampled,
    boot_with_module, gp_summary as summary, held, hold_interval, readout_number, run_named,
    sections,
};

const HOLD_CPU: u64 = 1;
const HOLD_MS: u64 = 400;
const BLOCK_MS: u64 = 300;
/// `membarrier()` calls (a `synchronize_rcu()` each) before, while and after every kprobe in
/// the kernel is disarmed.
const SILENT_CALLS: u64 = 10;

fn holdouts(series: &str) {
    // Each hold is followed by half a second of tracing, so that the grace period it held
    // ends before the interrupt (else it is only "in flight at exit" on a slow host).
    let script = format!(
        "insmod /lib/rcutrace_test.ko || exit 1\n\
         traced cpu 'gp --secs 0 --top 50 -f json' 'sh -c \"/bin/rcu-workload module hold_cpu {HOLD_CPU} {HOLD_MS}; sleep 0.5\"'\n\
         echo '=== cpu_readout'; cat /proc/rcutrace_test\n\
         traced task 'gp --secs 0 --top 50 -f json' 'sh -c \"/bin/rcu-workload module block_reader 1 {BLOCK_MS}; sleep 0.5\"'\n\
         echo '=== task_readout'; cat /proc/rcutrace_test\n\
         traced text 'gp --secs 0 --top 3' 'sh -c \"/bin/rcu-workload module hold_cpu {HOLD_CPU} {HOLD_MS}; sleep 0.5\"'\n\
         mount -t debugfs none /sys/kernel/debug 2>/dev/null\n\
         cat > /tmp/silent.sh <<'EOF'\n\
         /bin/rcu-workload membarrier {SILENT_CALLS}\n\
         echo 0 > /sys/kernel/debug/kprobes/enabled\n\
         /bin/rcu-workload membarrier {SILENT_CALLS}\n\
         echo 1 > /sys/kernel/debug/kprobes/enabled\n\
         /bin/rcu-workload membarrier {SILENT_CALLS}\n\
         EOF\n\
         traced silent 'gp --secs 0 --top 0 -f json' 'sh /tmp/silent.sh'\n"
    );
    let guest = boot_with_module(series, &script);
    let sections = sections(&guest.stdout);

    // A reader held on CPU 1 with preemption off.
    let cpu = run_named(&sections, "cpu");
    let records = cpu.records();
    assert_gp_consistent("cpu", &cpu, &records);
    let readout = &sections["cpu_readout"];
    let (start, end) = hold_interval(readout, HOLD_MS);
    assert_eq!(readout_number(readout, "hold_cpu"), HOLD_CPU);
    let g = held(&records, end);
    assert_held(g, start, end, HOLD_MS);
    let Some(LastHoldout {
        kind,
        cpu: holdout_cpu,
        pid,
        comm,
        mode,
        stack,
        ..
    }) = &g.last_holdout
    else {
        unreachable!()
    };
    assert_eq!(
        (kind.as_str(), *holdout_cpu),
        ("cpu", HOLD_CPU as u32),
        "{g:#?}"
    );
    let writer: u32 = support::workload_value(&cpu.work, "pid") as u32;
    assert_eq!(*pid, Some(writer), "{g:#?}");
    assert_eq!(comm.as_deref(), Some("rcu-workload"), "{g:#?}");
    assert_eq!(mode.as_deref(), Some("kernel"), "{g:#?}");
    // (vm_stall looks through every sample for the thunk's reason.)
    assert_hold_spin_sampled(stack, g);
    let s = summary(&records);
    assert!(
        s.holdouts_by_cpu
            .iter()
            .any(|r| r.cpu == HOLD_CPU as u32 && r.held_ns >= end - g.started_ns),
        "{s:#?}"
    );

    // A reader blocked inside its critical section.
    let task = run_named(&sections, "task");
    let records = task.records();
    assert_gp_consistent("task", &task, &records);
    let (start, end) = hold_interval(&sections["task_readout"], BLOCK_MS);
    let g = held(&records, end);
    assert_held(g, start, end, BLOCK_MS);
    let writer: u32 = support::workload_value(&task.work, "pid") as u32;
    assert_blocked_reader(g, writer, BLOCK_MS);
    let s = summary(&records);
    assert!(
        s.holdouts_by_task
            .iter()
            .any(|r| r.pid == writer && r.comm == "rcu-workload"),
        "{s:#?}"
    );

    // The text names the holdout CPU and its stack, under bpftrace's histogram.
    let text = run_named(&sections, "text");
    text.assert_ok("text");
    assert!(text.out.contains("@gplat: \n"), "{}", text.out);
    assert!(text.out.contains("Phases (ms)"), "{}", text.out);
    assert!(
        text.out.contains(&format!("CPU {HOLD_CPU} (")),
        "{}",
        text.out
    );
    assert!(text.out.contains("rcutrace_test_hold_spin"), "{}", text.out);

    // Hooks that stop firing while attached (every kprobe disarmed through debugfs for 10
    // synchronize_rcu() calls; the report's trampoline goes on): the grace periods assembled
    // fall short of the advance of rcu_state.gp_seq, and rcutrace says so with both figures.
    let silent = run_named(&sections, "silent");
    silent.assert_ok("silent");
    let records = silent.records();
    let s = summary(&records);
    let [check] = s.cross_checks.as_slice() else {
        panic!("one cross-check expected: {s:#?}");
    };
    assert!(!check.agrees, "{check:#?}");
    assert_eq!(check.value, s.grace_periods, "{check:#?}");
    assert!(
        check.expected >= check.value + SILENT_CALLS - 1,
        "{SILENT_CALLS} synchronize_rcu() unseen: {check:#?}"
    );
    let warning = format!(
        "grace periods assembled from rcu_gp_init() to rcu_gp_cleanup() ({}) and the advance \
         of rcu_state.gp_seq ({}) differ by {}",
        check.value,
        check.expected,
        check.expected - check.value
    );
    assert!(silent.err.contains(&warning), "{}", silent.err);
}

#[test]
fn holdouts_on_6_1() {
    holdouts("6.1");
}

#[test]
fn holdouts_on_6_12() {
    holdouts("6.12");
}

#[test]
fn holdouts_on_7_3() {
    holdouts("7.3");
}
