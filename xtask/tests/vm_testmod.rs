//! The test module (xtask/testmod) on real Debian kernels: it loads, names its callbacks in
//! /proc/kallsyms, offers the ops each kernel supports, performs exactly what it is asked
//! (its own counters agree with the requests, every queued callback is invoked), and what it
//! does is what rcutrace measures: `srlat --pid` sees exactly N samples for N calls.

mod support;

use std::collections::HashMap;

use support::{Run, boot_with_module, run_named, sections};

/// Ops on both kernels, in the module's order.
const COMMON_OPS: &[&str] = &[
    "call_rcu",
    "kfree_rcu",
    "synchronize_rcu",
    "synchronize_rcu_expedited",
    "rcu_barrier",
    "synchronize_srcu",
    "synchronize_srcu_expedited",
    "call_srcu",
    "srcu_barrier",
    "get_state_synchronize_srcu",
    "start_poll_synchronize_srcu",
    "poll_state_synchronize_srcu",
    "dynamic_srcu",
    "synchronize_rcu_tasks",
    "call_rcu_tasks",
    "rcu_barrier_tasks",
    "synchronize_rcu_tasks_trace",
    "call_rcu_tasks_trace",
    "rcu_barrier_tasks_trace",
    "synchronize_rcu_tasks_rude",
    "get_state_synchronize_rcu",
    "start_poll_synchronize_rcu",
    "start_poll_synchronize_rcu_expedited",
    "poll_state_synchronize_rcu",
    "cond_synchronize_rcu",
    "cond_synchronize_rcu_expedited",
    "get_state_synchronize_rcu_full",
    "start_poll_synchronize_rcu_full",
    "start_poll_synchronize_rcu_expedited_full",
    "poll_state_synchronize_rcu_full",
    "cond_synchronize_rcu_full",
    "cond_synchronize_rcu_expedited_full",
    "call_rcu_delayed",
    "flood",
    "call_rcu_in_kprobe",
    "hold_cpu",
    "block_reader",
    "spin_preempt_off",
    "hold_srcu",
    "migrate_srcu",
    "hold_task",
    "hold_trace",
    "reset",
];

/// The ops `series` supports: lazy RCU brought call_rcu_hurry in 6.2; 6.11 dropped the
/// callback flavour of tasks-rude RCU. 7.3 has no tasks-trace RCU functions of its own: its
/// tasks-trace ops call SRCU's on rcu_tasks_trace_srcu_struct, inline.
fn expected_ops(series: &str) -> Vec<&'static str> {
    let mut ops = COMMON_OPS.to_vec();
    match series {
        "6.1" => {
            let at = ops
                .iter()
                .position(|op| *op == "synchronize_rcu_tasks_rude")
                .unwrap()
                + 1;
            ops.splice(at..at, ["call_rcu_tasks_rude", "rcu_barrier_tasks_rude"]);
        }
        _ => ops.insert(1, "call_rcu_hurry"),
    }
    ops
}

/// The module's callback for each queueing op, and the barrier that waits for it.
const CALLBACK_OPS: &[(&str, &str, &str)] = &[
    ("call_rcu", "rcutrace_test_cb", "rcu_barrier"),
    ("call_rcu_hurry", "rcutrace_test_hurry_cb", "rcu_barrier"),
    ("call_srcu", "rcutrace_test_srcu_cb", "srcu_barrier"),
    (
        "call_rcu_tasks",
        "rcutrace_test_tasks_cb",
        "rcu_barrier_tasks",
    ),
    (
        "call_rcu_tasks_trace",
        "rcutrace_test_tasks_trace_cb",
        "rcu_barrier_tasks_trace",
    ),
    (
        "call_rcu_tasks_rude",
        "rcutrace_test_tasks_rude_cb",
        "rcu_barrier_tasks_rude",
    ),
];

const CALLBACKS: u64 = 300;
/// Tasks RCU grace periods take a tenth of a second or more under emulation.
const TASKS_CALLBACKS: u64 = 5;
const FLOOD: u64 = 20_000;
const DELAYED: u64 = 50;
const DELAY_MS: u64 = 20;
/// Units of every other op.
const UNITS: u64 = 3;
const SYNCS: u64 = 20;

/// One write to /proc/rcutrace_test.
struct Request {
    op: &'static str,
    n: u64,
    arg: Option<u64>,
}

impl Request {
    fn new(op: &'static str, n: u64) -> Self {
        Request { op, n, arg: None }
    }

    fn with_arg(op: &'static str, n: u64, arg: u64) -> Self {
        Request {
            op,
            n,
            arg: Some(arg),
        }
    }

    fn command(&self) -> String {
        match self.arg {
            Some(arg) => format!("/bin/rcu-workload module {} {} {arg}", self.op, self.n),
            None => format!("/bin/rcu-workload module {} {}", self.op, self.n),
        }
    }

    /// The kernel functions this request makes the module call, and how often, as the
    /// `uses` lines of its read-out document them.
    fn calls(&self) -> Vec<(String, u64)> {
        let (op, n) = (self.op, self.n);
        let waits = self.arg == Some(1);
        match op {
            // N ms of busy-waiting with preemption off: no RCU call.
            "reset" | "spin_preempt_off" | "hold_task" | "hold_trace" | "migrate_srcu" => vec![],
            "kfree_rcu" => vec![("kvfree_call_rcu".into(), n)],
            "call_rcu_delayed" | "flood" | "call_rcu_in_kprobe" => vec![("call_rcu".into(), n)],
            // One request inside the held reader (hold_cpu's N is the CPU, not a count).
            "hold_cpu" => vec![("start_poll_synchronize_rcu".into(), 1)],
            "hold_srcu" => vec![("start_poll_synchronize_srcu".into(), 1)],
            "block_reader" => vec![("start_poll_synchronize_rcu".into(), n)],
            "dynamic_srcu" => vec![("synchronize_srcu".into(), n)],
            "poll_state_synchronize_rcu" => {
                vec![("get_completed_synchronize_rcu".into(), 1), (op.into(), n)]
            }
            "poll_state_synchronize_rcu_full" => vec![
                ("get_completed_synchronize_rcu_full".into(), 1),
                (op.into(), n),
            ],
            "cond_synchronize_rcu" | "cond_synchronize_rcu_expedited" => vec![
                ("get_completed_synchronize_rcu".into(), 1),
                (
                    "get_state_synchronize_rcu".into(),
                    if waits { n } else { 0 },
                ),
                (op.into(), n),
            ],
            "cond_synchronize_rcu_full" | "cond_synchronize_rcu_expedited_full" => vec![
                ("get_completed_synchronize_rcu_full".into(), 1),
                (
                    "get_state_synchronize_rcu_full".into(),
                    if waits { n } else { 0 },
                ),
                (op.into(), n),
            ],
            _ => vec![(op.into(), n)],
        }
    }
}

/// `name: value` lines of the module's read-out.
fn parse_readout(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn number(readout: &HashMap<String, String>, key: &str) -> u64 {
    readout
        .get(key)
        .unwrap_or_else(|| panic!("no `{key}` in the module's read-out: {readout:#?}"))
        .parse()
        .unwrap()
}

fn srlat_samples(run: &Run, map: &str) -> u64 {
    run.number_after(&format!("{map} count"), "count")
        .unwrap_or_else(|| panic!("no {map} count line in {}", run.out)) as u64
}

fn module_ground_truth(series: &str) {
    let ops = expected_ops(series);
    let supported = |op: &str| ops.contains(&op);

    // Every op once, then each callback kind with its barrier, so all are invoked by the end.
    let mut requests = Vec::new();
    for &op in &ops {
        match op {
            "call_rcu_delayed" => requests.push(Request::with_arg(op, DELAYED, DELAY_MS)),
            "flood" => requests.push(Request::new(op, FLOOD)),
            // Held on CPU 1 for 50 ms; blocked twice for 20 ms.
            "hold_cpu" | "hold_srcu" | "hold_task" | "hold_trace" => {
                requests.push(Request::with_arg(op, 1, 50))
            }
            "block_reader" => requests.push(Request::with_arg(op, 2, 20)),
            // Entered on CPU 0, left on CPU 1.
            "migrate_srcu" => requests.push(Request::with_arg(op, 0, 1)),
            "reset" => {}
            op if op.starts_with("cond_synchronize_rcu") => {
                requests.push(Request::new(op, UNITS));
                requests.push(Request::with_arg(op, UNITS, 1));
            }
            op if CALLBACK_OPS.iter().any(|(queue, _, _)| *queue == op) => {}
            op => requests.push(Request::new(op, UNITS)),
        }
    }
    for &(queue, _, barrier) in CALLBACK_OPS.iter().filter(|(q, _, _)| supported(q)) {
        let n = if queue.contains("tasks") {
            TASKS_CALLBACKS
        } else {
            CALLBACKS
        };
        requests.push(Request::new(queue, n));
        requests.push(Request::new(barrier, 1));
    }
    // The flood's and the delayed callbacks: normal RCU, after everything else was queued.
    requests.push(Request::new("rcu_barrier", 1));

    let mut script = String::from(
        "insmod /lib/rcutrace_test.ko || exit 1\n\
         echo '=== kallsyms'; grep '\\[rcutrace_test\\]' /proc/kallsyms\n\
         echo '=== btf'; ls /sys/kernel/btf/rcutrace_test 2>&1\n",
    );
    for request in &requests {
        script.push_str(&format!(
            "{} >/tmp/request.out 2>&1 || {{ echo \"=== failed\"; cat /tmp/request.out; }}\n",
            request.command()
        ));
    }
    script.push_str("echo '=== readout'; cat /proc/rcutrace_test\n");
    // Refusals: the op this kernel lacks, an unknown op, an out-of-range ARG, no count.
    let missing = if series == "6.1" {
        "call_rcu_hurry"
    } else {
        "call_rcu_tasks_rude"
    };
    for (name, line) in [
        ("missing", format!("{missing} 1")),
        ("unknown", "no_such_op 1".to_string()),
        ("too_long", "call_rcu_delayed 1 101".to_string()),
        ("arg", "synchronize_rcu 1 1".to_string()),
        ("no_count", "call_rcu".to_string()),
        ("negative", "call_rcu -1".to_string()),
        ("trailing", "call_rcu 1 x".to_string()),
        ("too_many", "call_rcu_delayed 1 1 1".to_string()),
    ] {
        script.push_str(&format!(
            "echo '=== refused.{name}'; (echo '{line}' > /proc/rcutrace_test) 2>&1; echo \"status $?\"\n"
        ));
    }
    // Exactness against rcutrace: the writer's pid, exactly N samples, nested calls included.
    script.push_str(&format!(
        "/bin/rcu-workload module reset 0 >/dev/null\n\
         traced srlat 'srlat --secs 0 --pid WPID' '/bin/rcu-workload module synchronize_rcu {SYNCS}'\n\
         traced srelat 'srlat --expedited --secs 0 --pid WPID' '/bin/rcu-workload module synchronize_rcu_expedited {SYNCS}'\n\
         echo 1 > /sys/kernel/rcu_expedited\n\
         traced nested 'srlat --expedited --secs 0 --pid WPID' '/bin/rcu-workload module synchronize_rcu {SYNCS}'\n\
         echo 0 > /sys/kernel/rcu_expedited\n\
         traced count 'count --secs 0' '/bin/rcu-workload module call_rcu {CALLBACKS}'\n\
         echo '=== after'; cat /proc/rcutrace_test\n"
    ));

    let guest = boot_with_module(series, &script);
    let sections = sections(&guest.stdout);
    assert!(
        !sections.contains_key("failed"),
        "a request failed: {}",
        sections["failed"]
    );

    // Callbacks are module functions, named in kallsyms.
    let kallsyms = &sections["kallsyms"];
    for &(queue, callback, _) in CALLBACK_OPS.iter().filter(|(q, _, _)| supported(q)) {
        assert!(
            kallsyms.contains(&format!(" t {callback}\t[rcutrace_test]")),
            "{queue}: no {callback} in kallsyms:\n{kallsyms}"
        );
    }

    // Debian's 6.12 headers carry the kernel's BTF (a vmlinux of BTF only), so the module gets
    // its own; 6.1's do not, and kbuild skips it.
    let btf = &sections["btf"];
    assert_eq!(
        !btf.contains("No such file"),
        series != "6.1",
        "module BTF on {series}: {btf}"
    );

    let readout = parse_readout(&sections["readout"]);
    let listed: Vec<&str> = readout["ops"].split(' ').collect();
    assert_eq!(listed, ops, "ops on {series}");

    // The module called exactly what was asked, and nothing more.
    let mut expected: HashMap<String, u64> = HashMap::new();
    for request in &requests {
        for (func, n) in request.calls() {
            *expected.entry(func).or_default() += n;
        }
    }
    for (key, value) in &readout {
        if let Some(func) = key.strip_prefix("calls ") {
            let want = expected.get(func).copied().unwrap_or(0);
            assert_eq!(value.parse::<u64>().unwrap(), want, "calls of {func}");
        }
    }
    assert!(
        expected
            .keys()
            .all(|f| readout.contains_key(&format!("calls {f}")))
    );

    // Every callback queued was invoked by its barrier.
    let mut callbacks: Vec<(&str, u64)> = CALLBACK_OPS
        .iter()
        .filter(|(q, _, _)| supported(q))
        .map(|&(queue, callback, _)| {
            let n = if queue.contains("tasks") {
                TASKS_CALLBACKS
            } else {
                CALLBACKS
            };
            (callback, n)
        })
        .collect();
    callbacks.push(("rcutrace_test_flood_cb", FLOOD));
    callbacks.push(("rcutrace_test_delayed_cb", DELAYED));
    callbacks.push(("rcutrace_test_in_kprobe_cb", UNITS));
    for (callback, n) in callbacks {
        assert_eq!(number(&readout, &format!("queued {callback}")), n);
        assert_eq!(number(&readout, &format!("invoked {callback}")), n);
        let min = number(&readout, &format!("wait_min_ns {callback}"));
        let max = number(&readout, &format!("wait_max_ns {callback}"));
        assert!(0 < min && min <= max, "{callback}: {min} .. {max} ns");
    }
    // A reader held for DELAY_MS after queueing delays every one of those callbacks.
    // The flood is split evenly over the guest's CPUs.
    let cpus = u64::from(xtask::vm::DEFAULT_CPUS);
    for cpu in 0..cpus {
        let queued = number(&readout, &format!("flood_queued cpu{cpu}"));
        assert_eq!(queued, FLOOD / cpus, "flood callbacks queued on CPU {cpu}");
    }
    let held = number(&readout, "reader_held_ns call_rcu_delayed");
    let delayed_min = number(&readout, "wait_min_ns rcutrace_test_delayed_cb");
    assert!(held >= DELAY_MS * 1_000_000, "reader held {held} ns");
    assert!(
        delayed_min >= held,
        "waited {delayed_min} ns, reader held {held} ns"
    );

    for (name, errno) in [
        ("missing", "Operation not supported"),
        ("unknown", "Invalid argument"),
        ("too_long", "Invalid argument"),
        ("arg", "Invalid argument"),
        ("no_count", "Invalid argument"),
        ("negative", "Invalid argument"),
        ("trailing", "Invalid argument"),
        ("too_many", "Invalid argument"),
    ] {
        let out = &sections[&format!("refused.{name}")];
        assert!(
            out.contains(errno) && out.contains("status 1"),
            "{name}: {out}"
        );
    }

    // rcutrace sees the writer's calls, exactly.
    for (name, map) in [
        ("srlat", "@srlat"),
        ("srelat", "@srelat"),
        ("nested", "@srelat"),
    ] {
        let run = run_named(&sections, name);
        run.assert_ok(name);
        assert_eq!(srlat_samples(&run, map), SYNCS, "{name}: {}", run.out);
        assert_eq!(support::workload_value(&run.work, "done"), SYNCS);
    }
    let count = run_named(&sections, "count");
    count.assert_ok("count");
    let call_rcu = count.count("call_rcu").expect("call_rcu counted");
    assert!(
        call_rcu >= CALLBACKS,
        "{call_rcu} < {CALLBACKS}: {}",
        count.out
    );
    let after = parse_readout(&sections["after"]);
    assert_eq!(number(&after, "calls synchronize_rcu"), 2 * SYNCS);
    assert_eq!(number(&after, "calls synchronize_rcu_expedited"), SYNCS);
    assert_eq!(number(&after, "calls call_rcu"), CALLBACKS);
}

#[test]
fn module_on_6_1() {
    module_ground_truth("6.1");
}

#[test]
fn module_on_6_12() {
    module_ground_truth("6.12");
}

/// Built in the Debian 13 chroot that scripts/setup makes for Debian's newest kernel.
#[test]
fn module_on_7_3() {
    module_ground_truth("7.3");
}

/// A second build is a no-op: the module is only rebuilt when its sources change.
#[test]
fn module_build_is_cached() {
    for series in ["6.1", "6.12", "7.3"] {
        let ko = xtask::testmod::build(series).expect("building the test module");
        let built = std::fs::metadata(&ko).unwrap().modified().unwrap();
        let again = xtask::testmod::build(series).unwrap();
        assert_eq!(ko, again);
        assert_eq!(
            std::fs::metadata(&again).unwrap().modified().unwrap(),
            built
        );
    }
}
