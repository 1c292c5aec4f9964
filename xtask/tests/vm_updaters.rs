//! Every RCU updater, the latency of any waiting one, and who calls them (`count --all`,
//! `srlat --func`, `--by`), against the test module's exact ground truth on real Debian
//! kernels: each `rcu-workload module OP N` makes exactly N calls of OP's kernel function from
//! its own process, so the counts and samples keyed by that process must be exactly N. 7.3 has
//! no tasks-trace functions of its own (tasks-trace RCU became an SRCU domain): asked for them
//! there, rcutrace names them as not on this kernel and measures the rest.

mod support;

use std::collections::HashMap;

use support::{Run, boot_with_module, run_named, sections, stack_counts};

const N: u64 = 7;

/// Ops named after the kernel function they call once per unit (on 6.1 and 6.12; 7.3 lacks
/// the tasks-trace ones).
const COUNTED_OPS: &[&str] = &[
    "call_rcu",
    "synchronize_rcu",
    "synchronize_rcu_expedited",
    "rcu_barrier",
    "call_srcu",
    "synchronize_srcu",
    "synchronize_srcu_expedited",
    "srcu_barrier",
    "get_state_synchronize_srcu",
    "start_poll_synchronize_srcu",
    "poll_state_synchronize_srcu",
    "synchronize_rcu_tasks",
    "call_rcu_tasks",
    "rcu_barrier_tasks",
    "synchronize_rcu_tasks_trace",
    "call_rcu_tasks_trace",
    "rcu_barrier_tasks_trace",
    "synchronize_rcu_tasks_rude",
    "get_state_synchronize_rcu",
    "start_poll_synchronize_rcu",
    "poll_state_synchronize_rcu",
    "cond_synchronize_rcu",
    "get_state_synchronize_rcu_full",
    "start_poll_synchronize_rcu_full",
    "poll_state_synchronize_rcu_full",
    "cond_synchronize_rcu_full",
    "cond_synchronize_rcu_expedited",
];

/// Waiting functions, timed in two runs of at most eight.
const WAITING_OPS: [&[&str]; 2] = [
    &[
        "synchronize_rcu",
        "rcu_barrier",
        "synchronize_srcu",
        "synchronize_srcu_expedited",
        "srcu_barrier",
        "synchronize_rcu_tasks",
        "rcu_barrier_tasks",
        "synchronize_rcu_tasks_trace",
    ],
    &[
        "rcu_barrier_tasks_trace",
        "synchronize_rcu_tasks_rude",
        "synchronize_rcu_expedited",
        "cond_synchronize_rcu",
        "cond_synchronize_rcu_full",
    ],
];

/// The functions 7.3 no longer has: its tasks-trace RCU calls SRCU's functions inline.
const TASKS_TRACE: [&str; 3] = [
    "call_rcu_tasks_trace",
    "rcu_barrier_tasks_trace",
    "synchronize_rcu_tasks_trace",
];

/// The ops of `ops` that `series` has.
fn on_kernel(series: &str, ops: &[&'static str]) -> Vec<&'static str> {
    ops.iter()
        .copied()
        .filter(|op| series != "7.3" || !TASKS_TRACE.contains(op))
        .collect()
}

/// The functions rcutrace said were not on this kernel, in `run`'s stderr line that starts
/// with `prefix`.
fn named_absent(run: &Run, prefix: &str) -> Vec<String> {
    run.err
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map(|list| list.split(", ").map(str::to_string).collect())
        .unwrap_or_default()
}

/// Guest commands that write /tmp/NAME.sh, a script that runs every op in `ops` N times, one
/// process each; with `wait`, the cond_* ops get ARG 1, which makes them really wait for a
/// grace period.
fn each_op(name: &str, ops: &[&str], wait: bool) -> String {
    let lines: Vec<String> = ops
        .iter()
        .map(|op| {
            let arg = if wait && op.starts_with("cond_") {
                " 1"
            } else {
                ""
            };
            format!("/bin/rcu-workload module {op} {N}{arg} || exit 1\n")
        })
        .collect();
    format!("cat > /tmp/{name}.sh <<'EOF'\n{}EOF\n", lines.concat())
}

/// The `pid: P` each op's process printed, in the order of `ops`.
fn pids(run: &Run, ops: &[&str]) -> HashMap<String, u64> {
    let pids: Vec<u64> = run
        .work
        .lines()
        .filter_map(|l| l.strip_prefix("pid: "))
        .map(|p| p.trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), ops.len(), "{}", run.work);
    ops.iter().map(|op| op.to_string()).zip(pids).collect()
}

/// `COUNT` of `@MAP[KEY] count COUNT, ...` in the summary lines, or 0 when the key is absent.
fn samples(run: &Run, map_key: &str) -> u64 {
    run.number_after(&format!("{map_key} count"), "count")
        .map_or(0, |n| n as u64)
}

fn updaters_ground_truth(series: &str) {
    // Every function is asked for on every kernel; the module runs the ops the kernel has.
    let counted_ops = on_kernel(series, COUNTED_OPS);
    let waiting_ops = WAITING_OPS.map(|ops| on_kernel(series, ops));
    let script = format!(
        "insmod /lib/rcutrace_test.ko || exit 1\n{count_ops}{wait_ops0}{wait_ops1}\
         /bin/rcu-workload module reset 1 >/dev/null\n\
         traced all 'count --all --secs 0 --by stack --top 0' 'sh /tmp/count.sh'\n\
         echo '=== readout'; cat /proc/rcutrace_test\n\
         traced wait0 'srlat --secs 0 --by pid --top 0 {funcs0}' 'sh /tmp/wait0.sh'\n\
         traced wait1 'srlat --secs 0 --by pid --top 0 {funcs1}' 'sh /tmp/wait1.sh'\n\
         traced comm 'srlat --secs 0 --by comm --func rcu_barrier' '/bin/rcu-workload module rcu_barrier {N}'\n\
         traced stack 'count --secs 0 --by stack --top 0' '/bin/rcu-workload module synchronize_rcu {N}'\n\
         echo 1 > /sys/kernel/rcu_expedited\n\
         traced nested 'srlat --secs 0 --pid WPID --func synchronize_rcu --expedited' '/bin/rcu-workload module synchronize_rcu {N}'\n\
         echo 0 > /sys/kernel/rcu_expedited\n\
         echo '=== ops'; grep '^ops:' /proc/rcutrace_test\n",
        count_ops = each_op("count", &counted_ops, false),
        funcs0 = funcs(WAITING_OPS[0]),
        funcs1 = funcs(WAITING_OPS[1]),
        wait_ops0 = each_op("wait0", &waiting_ops[0], true),
        wait_ops1 = each_op("wait1", &waiting_ops[1], true),
    );
    let guest = boot_with_module(series, &script);
    let sections = sections(&guest.stdout);
    let supported = sections.get("ops").cloned().unwrap_or_default();
    let supported: Vec<&str> = supported.split_whitespace().skip(1).collect();
    for op in counted_ops.iter().chain(waiting_ops.iter().flatten()) {
        assert!(
            supported.contains(op),
            "{series}: the module lacks {op}: {supported:?}"
        );
    }

    // count --all --by stack: every call the module made of each function, exactly, as the
    // stacks whose caller is the module (the ops' processes also call updaters of their own,
    // in exec and exit, which the module's read-out does not count).
    let all = run_named(&sections, "all");
    all.assert_ok("all");
    // The tasks-trace functions are named as absent where they are (and only there), not
    // taken for a failure.
    let absent = named_absent(
        &all,
        "rcutrace: not on this kernel (absent or inlined), not traced: ",
    );
    for function in TASKS_TRACE {
        assert_eq!(
            absent.iter().any(|a| a == function),
            series == "7.3",
            "{series}: {function}: {}",
            all.err
        );
    }
    assert!(all.out.contains("kernel stacks lost: 0"), "{}", all.out);
    // rcu_gp_init() and rcu_gp_fqs_loop() were both counted, and agree.
    assert!(!all.out.contains("WARNING"), "{}", all.out);
    let stacks = stack_counts(&all.out);
    let readout = &sections["readout"];
    let mut checked = 0;
    for (function, calls) in module_calls(readout) {
        if !counted_ops.contains(&function.as_str()) || calls == 0 {
            continue;
        }
        let from_module: u64 = stacks
            .iter()
            .filter(|(frames, _)| {
                frames[0].starts_with(&format!("{function}+"))
                    && frames
                        .get(1)
                        .is_some_and(|f| f.ends_with(" [rcutrace_test]"))
            })
            .map(|(_, n)| n)
            .sum();
        assert_eq!(from_module, calls, "{series}: {function}\n{}", all.out);
        assert!(calls >= N, "{series}: {function}: {calls}");
        checked += 1;
    }
    assert_eq!(checked, counted_ops.len(), "{series}: {readout}");

    // srlat --func ... --by pid: exactly N samples per waiting function, in one run each.
    for (name, ops, asked) in [
        ("wait0", &waiting_ops[0], WAITING_OPS[0]),
        ("wait1", &waiting_ops[1], WAITING_OPS[1]),
    ] {
        let run = run_named(&sections, name);
        run.assert_ok(name);
        let absent = named_absent(
            &run,
            "rcutrace: not on this kernel (absent or inlined), not timed: ",
        );
        let expected: Vec<&str> = asked.iter().copied().filter(|f| !ops.contains(f)).collect();
        assert_eq!(absent, expected, "{series}: {name}: {}", run.err);
        for (op, pid) in pids(&run, ops) {
            let map = match op.as_str() {
                "synchronize_rcu" => "@srlat".to_string(),
                "synchronize_rcu_expedited" => "@srelat".to_string(),
                other => format!("@{other}"),
            };
            let key = format!("{map}[{pid}, rcu-workload]");
            assert_eq!(samples(&run, &key), N, "{series}: {key}\n{}", run.out);
            assert!(
                run.out.contains(&format!(
                    "{map} not measured: 0 in flight at exit, 0 returns lost"
                )),
                "{series}: {map}\n{}",
                run.out
            );
        }
    }

    // --by comm: the module's caller by name, exactly N rcu_barrier() waits.
    let comm = run_named(&sections, "comm");
    comm.assert_ok("comm");
    assert_eq!(
        samples(&comm, "@rcu_barrier[rcu-workload]"),
        N,
        "{}",
        comm.out
    );
    assert!(
        comm.out.contains("@rcu_barrier[rcu-workload]: \n"),
        "{}",
        comm.out
    );

    // --by stack: the module's write handler is on the stack of exactly N synchronize_rcu().
    let stack = run_named(&sections, "stack");
    stack.assert_ok("stack");
    let from_module = stack_counts(&stack.out)
        .into_iter()
        .filter(|(frames, _)| {
            frames
                .first()
                .is_some_and(|f| f.starts_with("synchronize_rcu+"))
                && frames.iter().any(|f| f.ends_with(" [rcutrace_test]"))
        })
        .map(|(_, n)| n)
        .sum::<u64>();
    assert_eq!(from_module, N, "{series}:\n{}", stack.out);

    // Nested calls (rcu_expedited=1: synchronize_rcu() runs synchronize_rcu_expedited()):
    // each call is one sample of each function.
    let nested = run_named(&sections, "nested");
    nested.assert_ok("nested");
    assert_eq!(samples(&nested, "@srlat"), N, "{}", nested.out);
    assert_eq!(samples(&nested, "@srelat"), N, "{}", nested.out);
}

/// `calls FUNC: N` lines of the module's read-out.
fn module_calls(readout: &str) -> Vec<(String, u64)> {
    readout
        .lines()
        .filter_map(|l| l.strip_prefix("calls "))
        .filter_map(|l| l.split_once(": "))
        .map(|(f, n)| (f.to_string(), n.trim().parse().unwrap()))
        .collect()
}

fn funcs(ops: &[&str]) -> String {
    ops.iter()
        .map(|op| format!("--func {op}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn updaters_on_6_1() {
    updaters_ground_truth("6.1");
}

#[test]
fn updaters_on_6_12() {
    updaters_ground_truth("6.12");
}

#[test]
fn updaters_on_7_3() {
    updaters_ground_truth("7.3");
}
