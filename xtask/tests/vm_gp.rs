//! `rcutrace gp` against the test module's holdouts on Debian's 6.1, 6.12 and 7.3: a reader held on
//! CPU 1 with preemption off makes CPU 1 the last holdout of the grace period it holds up,
//! with the module's spinning function on the stack a tick sampled there and the writer as
//! the task running; a reader blocked inside its critical section is the last holdout of its
//! grace period as that task, blocked as long as it slept, with the module's function on the
//! stack where it was switched out. Every listed grace period's phases add up to its
//! duration, and the count of grace periods agrees with the advance of `rcu_state.gp_seq`;
//! with every kprobe disarmed for a while (as a kernel that bypasses a hook would leave it),
//! the two disagree, and rcutrace says so. Stacks are named as they were when captured: a
//! module's functions after the module was unloaded (`gp`'s blocked reader, `count --by
//! stack`), and a BPF program's after the program went away (`count --by stack` of readers
//! taken inside it).

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
/// `synchronize_rcu()` calls from the module before it is unloaded under `count --by stack`.
const UNLOAD_CALLS: u64 = 5;
/// RCU readers taken inside the workload's own BPF program before it is unloaded.
const BPF_READERS: u64 = 100;
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
         traced silent 'gp --attach kprobe --secs 0 --top 0 -f json' 'sh /tmp/silent.sh'\n\
         cat > /tmp/symbols_read.sh <<'EOF'\n\
         i=0\n\
         while ! grep -q \"read $2 times\" \"$1\" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done\n\
         EOF\n\
         export RUST_LOG=rcutrace::marks=debug\n\
         traced unload_gp 'gp --secs 0 --top 50 -f json' 'sh -c \"sh /tmp/symbols_read.sh /tmp/unload_gp.err 1; /bin/rcu-workload module block_reader 1 {BLOCK_MS}; cat /proc/rcutrace_test > /tmp/unload_readout; sleep 0.5; rmmod rcutrace_test\"'\n\
         echo '=== unload_gp_modules'; cat /proc/modules\n\
         echo '=== unload_gp_readout'; cat /tmp/unload_readout\n\
         insmod /lib/rcutrace_test.ko || exit 1\n\
         traced unload_count 'count --secs 0 --by stack --top 0' 'sh -c \"sh /tmp/symbols_read.sh /tmp/unload_count.err 1; /bin/rcu-workload module synchronize_rcu {UNLOAD_CALLS}; rmmod rcutrace_test\"'\n\
         echo '=== unload_count_modules'; cat /proc/modules\n\
         cat > /tmp/bpf_readers.sh <<'EOF'\n\
         sh /tmp/symbols_read.sh /tmp/unload_bpf.err 1\n\
         sh /tmp/symbols_read.sh /tmp/unload_bpf.err 2 | /bin/rcu-workload bpf-readers {BPF_READERS}\n\
         i=0; while grep -q '_rcu_readers.\\[bpf\\]' /proc/kallsyms && [ $i -lt 10 ]; do sleep 0.5; i=$((i + 1)); done\n\
         echo \"kallsyms_rcu_readers: $(grep -c '_rcu_readers.\\[bpf\\]' /proc/kallsyms)\"\n\
         EOF\n\
         traced unload_bpf 'count --secs 0 --by stack --top 0' 'sh /tmp/bpf_readers.sh'\n"
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
    assert_blocked_reader(g, writer, (start, end));
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

    // Stacks named as they were when captured: the module is unloaded before the report is
    // made, and its functions are still named `NAME+OFFSET [rcutrace_test]`.
    let unload = run_named(&sections, "unload_gp");
    unload.assert_ok("unload_gp");
    assert_unloaded(&sections["unload_gp_modules"]);
    let records = unload.records();
    let writer: u32 = support::workload_value(&unload.work, "pid") as u32;
    let g = support::grace_periods(&records)
        .into_iter()
        .find(|g| {
            g.last_holdout
                .as_ref()
                .is_some_and(|h| h.kind == "task" && h.pid == Some(writer))
        })
        .unwrap_or_else(|| panic!("no grace period held by the reader: {}", unload.out));
    let hold = hold_interval(&sections["unload_gp_readout"], BLOCK_MS);
    let h = assert_blocked_reader(g, writer, hold);
    assert!(
        h.stack
            .iter()
            .any(|f| is_module_frame(f, "rcutrace_test_block_in_reader")),
        "{g:#?}"
    );
    // Something went away, nothing appeared: one snapshot of what can go, as the window
    // opened.
    assert_eq!(symbol_reads(&unload.err), 1, "{}", unload.err);
    // The reader above blocked through the context-switch hook (a kprobe) and unlocked
    // through the unblock hook, which where the kernel has kprobe-multi links (not Debian's
    // 6.1) is on one link with the other rarer entry hooks: the passes and the three
    // expedited entries (the tick and the context switch keep a kprobe each).
    let linked = unload
        .err
        .contains("kprobe-multi link of 5 functions attached");
    assert_eq!(linked, series != "6.1", "{}", unload.err);
    let unload = run_named(&sections, "unload_count");
    unload.assert_ok("unload_count");
    assert_unloaded(&sections["unload_count_modules"]);
    let from_module: u64 = support::stack_counts(&unload.out)
        .into_iter()
        .filter(|(frames, _)| {
            frames
                .first()
                .is_some_and(|f| f.starts_with("synchronize_rcu+"))
                && frames.iter().any(|f| is_module_frame(f, "rcutrace_test_"))
        })
        .map(|(_, n)| n)
        .sum();
    assert_eq!(from_module, UNLOAD_CALLS, "{}", unload.out);
    assert_eq!(symbol_reads(&unload.err), 1, "{}", unload.err);

    // A BPF program's frames: readers taken inside a program of the workload's own (its
    // bpf_for_each_map_elem() over a one-bucket hash map takes rcu_read_lock() once per run),
    // counted by stack, the program unloaded before the report: exactly as many readers on
    // stacks through `bpf_prog_TAG_rcu_readers+OFFSET [bpf]` as it ran. Two snapshots of what
    // can go: as the window opened, and when the program appeared.
    let unload = run_named(&sections, "unload_bpf");
    unload.assert_ok("unload_bpf");
    assert_eq!(
        support::workload_value(&unload.work, "kallsyms_rcu_readers"),
        0,
        "{}",
        unload.work
    );
    assert_eq!(
        support::workload_value(&unload.work, "readers"),
        BPF_READERS,
        "{}",
        unload.work
    );
    assert_eq!(symbol_reads(&unload.err), 2, "{}", unload.err);
    // The program's own readers: no interrupt between the reader and the program's frame (a
    // tick that lands while the program runs takes readers of its own, on a stack that has
    // the program's frame further down: seen on 7.3, 102 against 100).
    let through_program: u64 = support::stack_counts(&unload.out)
        .into_iter()
        .filter(|(frames, _)| {
            let program = frames.iter().position(|f| is_bpf_frame(f, "rcu_readers"));
            frames
                .first()
                .is_some_and(|f| f.starts_with("__rcu_read_lock+"))
                && program.is_some_and(|at| !frames[..at].iter().any(|f| f.starts_with("asm_")))
        })
        .map(|(_, n)| n)
        .sum();
    assert_eq!(through_program, BPF_READERS, "{}", unload.out);

    // Hooks that stop firing while attached (`--attach kprobe`, every kprobe disarmed through
    // debugfs for 10 synchronize_rcu() calls): the grace periods assembled fall short of the
    // advance of rcu_state.gp_seq, and rcutrace says so with both figures; every grace period
    // between the first and the last assembled is counted, seen in part or unseen.
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
    assert_eq!(
        check.expected - check.value,
        s.unseen + s.incomplete,
        "{check:#?}\n{s:#?}"
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

/// `NAME+OFFSET [rcutrace_test]` with NAME starting with `prefix`, OFFSET decimal.
fn is_module_frame(frame: &str, prefix: &str) -> bool {
    frame
        .strip_suffix(" [rcutrace_test]")
        .and_then(|f| f.rsplit_once('+'))
        .is_some_and(|(name, offset)| {
            name.starts_with(prefix)
                && !offset.is_empty()
                && offset.bytes().all(|b| b.is_ascii_digit())
        })
}

/// `bpf_prog_TAG_NAME+OFFSET [bpf]`: TAG 16 hex digits, OFFSET decimal.
fn is_bpf_frame(frame: &str, name: &str) -> bool {
    frame
        .strip_suffix(" [bpf]")
        .and_then(|f| f.rsplit_once('+'))
        .and_then(|(symbol, offset)| {
            let tag = symbol
                .strip_prefix("bpf_prog_")?
                .strip_suffix(name)?
                .strip_suffix('_')?;
            Some(
                tag.len() == 16
                    && tag.bytes().all(|b| b.is_ascii_hexdigit())
                    && !offset.is_empty()
                    && offset.bytes().all(|b| b.is_ascii_digit()),
            )
        })
        .unwrap_or(false)
}

/// How many snapshots of what can go (modules, generated code) rcutrace took of
/// /proc/kallsyms, by its marks (the kernel image's own symbols are read once more, apart).
fn symbol_reads(err: &str) -> usize {
    err.lines()
        .filter(|l| l.contains("kernel symbols read"))
        .count()
}

/// The module was gone when the report was made (rcutrace printed it after the workload,
/// which ended with `rmmod`).
fn assert_unloaded(modules: &str) {
    assert!(
        !modules.lines().any(|l| l.starts_with("rcutrace_test ")),
        "{modules}"
    );
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
