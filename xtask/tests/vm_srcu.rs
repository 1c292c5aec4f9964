//! SRCU by domain (`--by srcu`) on Debian's 6.1, 6.12 and 7.3, in a guest with two `rcu_node`
//! leaves (4 CPUs, `rcutree.rcu_fanout_leaf=2`), one boot per kernel for every scenario. The
//! test module calls SRCU's functions on its own `srcu_struct`, a known number of times:
//!
//! - `count --by srcu -c CMD` (by kprobe, and `--attach fentry`) counts the module's calls exactly, each under the module's
//!   domain by name (`rcutrace_test_srcu [rcutrace_test]`);
//! - `srlat --func synchronize_srcu --func srcu_barrier --by srcu -c CMD` times exactly the
//!   module's waits, under that name and no other;
//! - the module's synchronize_rcu_tasks_trace(): on 7.3 (where tasks-trace RCU is SRCU) a
//!   synchronize_srcu() on `rcu_tasks_trace_srcu_struct`, timed under that name, exactly; on
//!   6.1 and 6.12 a function of its own, so no SRCU wait;
//! - `callbacks --by srcu -c CMD`: the module's 10 call_srcu() callbacks under its domain, and
//!   on 7.3 its tasks-trace callbacks under `rcu_tasks_trace_srcu_struct` (none on 6.x);
//! - the module unloaded before `count`'s report: its domain still named as when called;
//! - a domain no symbol names (the module's `dynamic_srcu` op: a kmalloc'd `srcu_struct`
//!   initialised in the window): `count --by srcu` and `srlat --by srcu` key its calls, exactly,
//!   by its address and the module function that initialised it.

mod support;

use std::time::Duration;

use rcutrace_common::records::Record;
use support::{boot_with_module_on, run_named, sections};

const CALL_SRCU: u64 = 10;
const SYNCHRONIZE_SRCU: u64 = 4;
const SRCU_BARRIER: u64 = 2;
const TASKS_TRACE_SYNCS: u64 = 3;
const TASKS_TRACE_CALLBACKS: u64 = 5;
const DYNAMIC_SYNCS: u64 = 3;
const MODULE_DOMAIN: &str = "rcutrace_test_srcu [rcutrace_test]";
const TASKS_TRACE_DOMAIN: &str = "rcu_tasks_trace_srcu_struct";

/// `(map, key, count)` of every latency summary of a `-f json` run.
fn timed(records: &[Record]) -> Vec<(String, Option<String>, u64)> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::LatencySummary(s) => Some((s.map.clone(), s.key.clone(), s.count)),
            _ => None,
        })
        .filter(|(_, _, count)| *count > 0)
        .collect()
}

fn srcu_scenarios(series: &str) {
    let script = format!(
        "insmod /lib/rcutrace_test.ko || exit 1\n\
         printf 'rcu-workload module call_srcu {CALL_SRCU}\\n\
         rcu-workload module synchronize_srcu {SYNCHRONIZE_SRCU}\\n\
         rcu-workload module srcu_barrier {SRCU_BARRIER}\\n' > /tmp/ops.sh\n\
         traced() {{ name=$1; shift; rcutrace \"$@\" >/tmp/o 2>/tmp/e; s=$?; \
         echo \"=== $name.out\"; grep -v '^[a-z_]*: ' /tmp/o; \
         echo \"=== $name.work\"; grep '^[a-z_]*: ' /tmp/o; \
         echo \"=== $name.err\"; cat /tmp/e; echo \"=== $name.status\"; echo $s 0; }}\n\
         traced count count --by srcu -c 'sh /tmp/ops.sh'\n\
         traced count_fentry count --attach fentry --by srcu -c 'sh /tmp/ops.sh'\n\
         traced srlat -f json srlat --func synchronize_srcu --func srcu_barrier --by srcu \
           -c 'sh /tmp/ops.sh'\n\
         traced trace -f json srlat --func synchronize_srcu --by srcu \
           -c 'rcu-workload module synchronize_rcu_tasks_trace {TASKS_TRACE_SYNCS}'\n\
         traced callbacks callbacks --by srcu -c 'sh /tmp/ops.sh'\n\
         traced trace_callbacks callbacks --by srcu \
           -c 'rcu-workload module call_rcu_tasks_trace {TASKS_TRACE_CALLBACKS}'\n\
         printf 'rcu-workload module synchronize_srcu {SYNCHRONIZE_SRCU}\\nrmmod rcutrace_test\\n' \
           > /tmp/unload.sh\n\
         traced unloaded count --by srcu -c 'sh /tmp/unload.sh'\n\
         echo '=== left'; grep -c rcutrace_test /proc/kallsyms || true\n\
         insmod /lib/rcutrace_test.ko || exit 1\n\
         traced dynamic count --by srcu -c 'rcu-workload module dynamic_srcu {DYNAMIC_SYNCS}'\n\
         traced dynamic_srlat -f json srlat --func synchronize_srcu --by srcu \
           -c 'rcu-workload module dynamic_srcu {DYNAMIC_SYNCS}'\n"
    );
    let guest = boot_with_module_on(
        series,
        &script,
        4,
        1024,
        &["rcutree.rcu_fanout_leaf=2"],
        Duration::from_secs(300),
    );
    let sections = sections(&guest.stdout);

    // count: each of the module's calls once, under its domain's name, by kprobe (the
    // default for these) and by trampoline (whose pointer argument is read as a number).
    for name in ["count", "count_fentry"] {
        let count = run_named(&sections, name);
        count.assert_ok(name);
        for (function, n) in [
            ("call_srcu", CALL_SRCU),
            ("synchronize_srcu", SYNCHRONIZE_SRCU),
            ("srcu_barrier", SRCU_BARRIER),
        ] {
            assert_eq!(
                count.count(&format!("{MODULE_DOMAIN}, {function}")),
                Some(n),
                "{name} {function}:\n{}",
                count.out
            );
        }
        assert!(
            count
                .out
                .contains("calls lost to a full key map: 0, kernel stacks lost: 0"),
            "{}",
            count.out
        );
    }

    // srlat -c: the command's waits alone, all on the module's domain.
    let srlat = run_named(&sections, "srlat");
    srlat.assert_ok("srlat");
    let mut waits = timed(&srlat.records());
    waits.sort();
    let key = Some(MODULE_DOMAIN.to_string());
    assert_eq!(
        waits,
        [
            ("@srcu_barrier".to_string(), key.clone(), SRCU_BARRIER),
            ("@synchronize_srcu".to_string(), key, SYNCHRONIZE_SRCU),
        ],
        "{}",
        srlat.out
    );

    // Tasks-trace RCU: SRCU on 7.3, its own function before.
    let trace = run_named(&sections, "trace");
    trace.assert_ok("trace");
    let expected = match series {
        "7.3" => vec![(
            "@synchronize_srcu".to_string(),
            Some(TASKS_TRACE_DOMAIN.to_string()),
            TASKS_TRACE_SYNCS,
        )],
        _ => Vec::new(),
    };
    assert_eq!(timed(&trace.records()), expected, "{}", trace.out);
    assert!(
        trace.work.contains(&format!("done: {TASKS_TRACE_SYNCS}")),
        "{}\n{}",
        trace.work,
        trace.err
    );

    // callbacks: the module's call_srcu() callbacks under its domain; on 7.3 its tasks-trace
    // callbacks under rcu_tasks_trace_srcu_struct.
    let callbacks = run_named(&sections, "callbacks");
    callbacks.assert_ok("callbacks");
    let line = format!(
        "@srcu_queued[{MODULE_DOMAIN}, rcutrace_test_srcu_cb [rcutrace_test]]: {CALL_SRCU}"
    );
    assert!(
        callbacks.out.lines().any(|l| l == line),
        "{line}\n{}",
        callbacks.out
    );
    let trace_callbacks = run_named(&sections, "trace_callbacks");
    trace_callbacks.assert_ok("trace_callbacks");
    let line = format!(
        "@srcu_queued[{TASKS_TRACE_DOMAIN}, rcutrace_test_tasks_trace_cb [rcutrace_test]]: \
         {TASKS_TRACE_CALLBACKS}"
    );
    let has_line = trace_callbacks.out.lines().any(|l| l == line);
    assert_eq!(has_line, series == "7.3", "{line}\n{}", trace_callbacks.out);
    // On 6.x they went through call_rcu_tasks_trace(), on no SRCU domain.
    let srcu_queued_tasks_trace = trace_callbacks
        .out
        .lines()
        .any(|l| l.starts_with("@srcu_queued[") && l.contains("rcutrace_test_tasks_trace_cb"));
    assert_eq!(
        srcu_queued_tasks_trace,
        series == "7.3",
        "{}",
        trace_callbacks.out
    );

    // A domain no symbol names: by its address and the function that initialised it, with
    // exactly the op's calls, by count and by srlat.
    let dynamic = run_named(&sections, "dynamic");
    dynamic.assert_ok("dynamic");
    let rows: Vec<(&str, u64)> = dynamic
        .out
        .lines()
        .filter_map(|l| l.strip_prefix("@[")?.split_once(", synchronize_srcu]: "))
        .map(|(key, n)| (key, n.trim().parse().unwrap()))
        .collect();
    assert!(
        matches!(rows[..], [(key, DYNAMIC_SYNCS)] if names_dynamic_domain(key)),
        "{rows:?}\n{}",
        dynamic.out
    );
    let dynamic_srlat = run_named(&sections, "dynamic_srlat");
    dynamic_srlat.assert_ok("dynamic_srlat");
    let waits = timed(&dynamic_srlat.records());
    assert!(
        matches!(&waits[..], [(map, Some(key), DYNAMIC_SYNCS)]
            if map == "@synchronize_srcu" && names_dynamic_domain(key)),
        "{waits:?}\n{}",
        dynamic_srlat.out
    );

    // The module unloaded before the report: its domain is named as it was when called.
    let unloaded = run_named(&sections, "unloaded");
    unloaded.assert_ok("unloaded");
    assert_eq!(
        unloaded.count(&format!("{MODULE_DOMAIN}, synchronize_srcu")),
        Some(SYNCHRONIZE_SRCU),
        "{}",
        unloaded.out
    );
}

/// Whether `key` names a domain by its address and the module function that initialised it:
/// `0xADDRESS (initialised in rcutrace_test_init_dynamic_srcu+OFFSET [rcutrace_test])`.
fn names_dynamic_domain(key: &str) -> bool {
    let Some((address, by)) = key.split_once(" (initialised in ") else {
        return false;
    };
    let Some(offset) = by
        .strip_prefix("rcutrace_test_init_dynamic_srcu+")
        .and_then(|rest| rest.strip_suffix(" [rcutrace_test])"))
    else {
        return false;
    };
    address
        .strip_prefix("0x")
        .is_some_and(|hex| !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        && !offset.is_empty()
        && offset.bytes().all(|b| b.is_ascii_digit())
}

#[test]
fn a_dynamic_domain_key_is_its_address_and_initialiser() {
    assert!(names_dynamic_domain(
        "0xffff888004a1c000 (initialised in rcutrace_test_init_dynamic_srcu+18 [rcutrace_test])"
    ));
    assert!(!names_dynamic_domain("0xffff888004a1c000"));
    assert!(!names_dynamic_domain(
        "0xffff888004a1c000 (initialised in op_dynamic_srcu+18 [rcutrace_test])"
    ));
}

#[test]
fn srcu_on_6_1() {
    srcu_scenarios("6.1");
}

#[test]
fn srcu_on_6_12() {
    srcu_scenarios("6.12");
}

#[test]
fn srcu_on_7_3() {
    srcu_scenarios("7.3");
}
