//! SRCU by domain (`--by srcu`) and the grace periods of SRCU and tasks RCU (`gp --flavor`) on
//! Debian's 6.1, 6.12 and 7.3, in a guest with two `rcu_node` leaves (4 CPUs,
//! `rcutree.rcu_fanout_leaf=2`), one boot per kernel for every scenario. The test module
//! calls SRCU's functions on its own `srcu_struct`, a known number of times:
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
//!   by its address and the module function that initialised it;
//! - held grace periods: an SRCU reader of the module's domain asleep on the last leaf's
//!   last CPU (`hold_srcu`), and a task busy in the kernel there that tasks RCU must wait for
//!   (`hold_task`), each while the script makes one wait begin: `srlat` times that one wait,
//!   under the module's domain for SRCU, and no shorter than from its call to the hold's end;
//! - `gp --flavor srcu`: after a reader of the module's domain that entered on CPU 1 and left
//!   on the hold's CPU (their counts left unbalanced for good) and two grace periods, the
//!   module's domain has exactly one grace period for its held
//!   reader's request, no shorter than from that request to the reader's end, held up by
//!   readers on the hold's CPU and no other (not CPU 1), one more for each of the 3 synchronize_srcu()
//!   calls another thread makes during the hold (exactly 3 waiters, under the domain and the
//!   module's stack; each of those grace periods' records lists the one call that waited
//!   through it, the held one none), and exactly one for each of its
//!   synchronize_srcu() calls, whose waiters are those calls, under the domain and the
//!   module's stack; the held one's record taken apart at SRCU's phases (`scan1`, `scan2`,
//!   `gp_end`, adding up to it), its scans clear only after the reader left, and the text's
//!   table of the slowest showing those phases for each call's;
//! - `gp --flavor tasks`: one tasks-RCU grace period for the wait begun inside `hold_task`,
//!   its record (`-f json`) begun after that call and over after the hold, naming the busy
//!   task among its last holdouts, then exactly one per synchronize call of
//!   each tasks flavour: classic, rude (none on 7.3, where it is a no-op on x86) and
//!   tasks-trace (7.3's are SRCU's, not here); the busy task is named, by comm and pid, among
//!   the last holdouts of classic tasks RCU; its waiters are each of the module's synchronize
//!   calls, exactly, under the module's stack; every classic grace period taken apart at its
//!   five phases, adding up to it, the held one's passes over the holdouts begun before the
//!   hold's end and ended after it, its holder's stack sampled where it was busy, and the
//!   module's wait listed as waiting through it;
//! - `gp --flavor trace` and `--flavor rude`, with 3 calls of each tasks flavour in the window:
//!   exactly their own flavour's 3 grace periods on 6.1 and 6.12; on 7.3 `trace` says it
//!   follows `rcu_tasks_trace_srcu_struct` and finds exactly 3 of its grace periods, `rude`
//!   none; each taken apart at its phases (tasks RCU's steps on 6.x, SRCU's scans on 7.3),
//!   the rude flavour's at none;
//! - a tasks-trace reader asleep on the hold's CPU (`hold_trace`) while one
//!   synchronize_rcu_tasks_trace() waits: `gp --flavor trace` has a grace period past the
//!   reader's end naming it, on 6.x by task among its last holdouts (and in
//!   `@tasks_gp_held_by`), on 7.3 by CPU among its SRCU readers' (`@srcu_gp_held_on`), and
//!   the one wait among its waiters;
//! - `stall --flavor tasks --flavor srcu --flavor-warn-at 1000ms` beside 3 s holds of
//!   `hold_task` and `hold_srcu`, each with one wait behind it: a warning about each held grace period within 2 s of the threshold,
//!   naming the busy task (tasks RCU) or the reader's CPU (SRCU), and the module's wait
//!   blocked behind it by its kernel stack, and each one's end;
//! - `serve --flavor tasks --flavor srcu`, scraped: the age of the tasks-RCU grace period a
//!   busy task holds up while it does, then exactly one SRCU grace period per
//!   synchronize_srcu() on the module's idle domain, and the held one's passes over its
//!   holdouts among tasks RCU's phases;
//! - a second rcutrace attaching trampolines and kprobes inside the window: on 6.1 and 6.12 a
//!   trampoline's detach is among `--flavor tasks`' waiters, with its stack; on every kernel a
//!   kprobe's detach is among `--flavor trace`'s (under `rcu_tasks_trace_srcu_struct` on 7.3).

mod support;

use std::time::Duration;

use rcutrace_common::records::{self, MapValue, Record};
use support::{Run, boot_with_module_on, run_named, sections};

const CALL_SRCU: u64 = 10;
const SYNCHRONIZE_SRCU: u64 = 4;
const SRCU_BARRIER: u64 = 2;
const TASKS_TRACE_SYNCS: u64 = 3;
const TASKS_TRACE_CALLBACKS: u64 = 5;
const DYNAMIC_SYNCS: u64 = 3;
const MODULE_DOMAIN: &str = "rcutrace_test_srcu [rcutrace_test]";
const TASKS_TRACE_DOMAIN: &str = "rcu_tasks_trace_srcu_struct";
/// The holds: on the second leaf's last CPU, for a second.
const HOLD_CPU: u64 = 3;
const HOLD_MS: u64 = 1000;
/// Synchronize calls of each tasks-RCU flavour after the held one.
const TASKS_SYNCS: u64 = 3;

/// A hold (`OP` on CPU `C` for `MS`, the module noting its start in `STARTED`), and once it
/// has begun, one `WAIT`.
const HELD_WAIT: &str = "\
before=$(grep STARTED /proc/rcutrace_test)
rcu-workload module OP C MS &
while [ \"$(grep STARTED /proc/rcutrace_test)\" = \"$before\" ]; do sleep 0.05; done
rcu-workload module WAIT 1
wait
";

/// The held SRCU reader of `gp --flavor srcu` (on CPU C for MS, asking for a grace period
/// inside it), and once it has asked, N synchronize_srcu() calls one after another: the
/// first waits for a grace period after the held one, each next for one of its own.
/// Before it, a reader that entered on CPU 1 and left on CPU C, leaving CPU 1's count one
/// ahead and C's one behind on the index the held reader enters (two grace periods flip it
/// back): the held reader's CPU must still be named, and CPU 1 not.
const GP_HELD: &str = "\
rcu-workload module migrate_srcu 1 C
rcu-workload module synchronize_srcu 2
before=$(grep 'called_ns start_poll_synchronize_srcu' /proc/rcutrace_test)
rcu-workload module hold_srcu C MS &
while [ \"$(grep 'called_ns start_poll_synchronize_srcu' /proc/rcutrace_test)\" = \"$before\" ]; do sleep 0.05; done
rcu-workload module synchronize_srcu N
wait
sleep 0.5
";
const HELD_SRCU_SYNCS: u64 = 3;

/// `serve --flavor tasks --flavor srcu`, scraped while the module's task holds a tasks-RCU
/// grace period up (its one wait behind it), then after SYNCS synchronize_srcu() calls.
const SERVE_FLAVORS: &str = "\
ip link set lo up
/bin/rcutrace serve --flavor tasks --flavor srcu --listen 127.0.0.1:9760 >/tmp/serve.out 2>/tmp/serve.err &
spid=$!
i=0; while ! grep -q Attaching /tmp/serve.out && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
before=$(grep task_hold_start_ns /proc/rcutrace_test)
rcu-workload module hold_task C MS & hold=$!
while [ \"$(grep task_hold_start_ns /proc/rcutrace_test)\" = \"$before\" ]; do sleep 0.05; done
rcu-workload module synchronize_rcu_tasks 1 & wait_pid=$!
sleep 0.5
wget -q -O /tmp/serve.during http://127.0.0.1:9760/metrics
wait $hold $wait_pid
rcu-workload module synchronize_srcu SYNCS
sleep 0.5
wget -q -O /tmp/serve.after http://127.0.0.1:9760/metrics
kill -TERM $spid; wait $spid; status=$?
echo '=== serve_flavors.during'; cat /tmp/serve.during
echo '=== serve_flavors.after'; cat /tmp/serve.after
echo '=== serve_flavors.err'; cat /tmp/serve.err
echo '=== serve_flavors.status'; echo $status
";

/// `stall --flavor`'s holds (run `watched`, the prelude's `traced`, beside rcutrace), and its
/// threshold: a warning due within 2 s of the threshold
/// comes while the hold lasts.
const STALL_HOLD_MS: u64 = 3000;
const STALL_WARN_MS: u64 = 1000;

/// The entries of keyed map `map` in a `-f json` run's records.
fn keyed_entries(run: &Run, map: &str) -> Vec<(String, u64)> {
    run.records()
        .into_iter()
        .filter_map(|r| match r {
            Record::Map(maps) => match maps.get(map) {
                Some(MapValue::Keyed(keys)) => Some(keys.0.clone()),
                _ => None,
            },
            _ => None,
        })
        .flatten()
        .collect()
}

fn held_wait(op: &str, started: &str, wait: &str) -> String {
    held_wait_for(op, started, wait, HOLD_MS)
}

fn held_wait_for(op: &str, started: &str, wait: &str, ms: u64) -> String {
    HELD_WAIT
        .replace("OP", op)
        .replace("STARTED", started)
        .replace("WAIT", wait)
        .replace(" C ", &format!(" {HOLD_CPU} "))
        .replace(" MS ", &format!(" {ms} "))
}

/// The names of a grace period's phases, in order.
fn phase_names(g: &records::GracePeriod) -> Vec<&str> {
    g.phases.iter().map(|p| p.name.as_str()).collect()
}

/// When a grace period's phase `name` ended: its start plus every phase up to that one.
fn phase_end(g: &records::GracePeriod, name: &str) -> u64 {
    let through = g.phases.iter().position(|p| p.name == name).unwrap() + 1;
    g.started_ns + g.phases[..through].iter().map(|p| p.ns).sum::<u64>()
}

const TASKS_PHASES: [&str; 5] = [
    "pre_gp",
    "scan_tasklist",
    "post_scan",
    "holdouts",
    "post_gp",
];
const SRCU_PHASES: [&str; 3] = ["scan1", "scan2", "gp_end"];

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

/// The calls of `map` (a wait `gp --flavor` times, by its callers' stacks) whose key holds
/// `frame`, summed over the stacks, in a `-f json` run.
fn waits_through(run: &Run, map: &str, frame: &str) -> u64 {
    run.records()
        .into_iter()
        .filter_map(|r| match r {
            Record::LatencySummary(s) if s.map == map => Some(s),
            _ => None,
        })
        .filter(|s| s.key.as_deref().is_some_and(|k| k.contains(frame)))
        .map(|s| s.count)
        .sum()
}

fn srcu_scenarios(series: &str) {
    let script = format!(
        "insmod /lib/rcutrace_test.ko || exit 1\n\
         cat > /tmp/held_srcu.sh <<'EOF'\n{held_srcu}EOF\n\
         cat > /tmp/held_task.sh <<'EOF'\n{held_task}EOF\n\
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
           -c 'rcu-workload module dynamic_srcu {DYNAMIC_SYNCS}'\n\
         traced held_srcu -f json srlat --func synchronize_srcu --by srcu -c 'sh /tmp/held_srcu.sh'\n\
         echo '=== held_srcu.readout'; cat /proc/rcutrace_test\n\
         traced held_task -f json srlat --func synchronize_rcu_tasks -c 'sh /tmp/held_task.sh'\n\
         echo '=== held_task.readout'; cat /proc/rcutrace_test\n\
         cat > /tmp/gp_held.sh <<'EOF'\n{gp_held}EOF\n\
         traced gp_held -f json gp --flavor srcu --top 50 -c 'sh /tmp/gp_held.sh'\n\
         echo '=== gp_held.readout'; cat /proc/rcutrace_test\n\
         printf 'rcu-workload module synchronize_srcu {SYNCHRONIZE_SRCU}\\nsleep 0.5\\n' \
           > /tmp/gp_syncs.sh\n\
         traced gp_syncs gp --flavor srcu -c 'sh /tmp/gp_syncs.sh'\n\
         cat > /tmp/gp_tasks.sh <<'EOF'\n{held_task}\
         cat /proc/rcutrace_test > /tmp/held_readout\n\
         rcu-workload module synchronize_rcu_tasks {TASKS_SYNCS}\n\
         rcu-workload module synchronize_rcu_tasks_rude {TASKS_SYNCS}\n\
         rcu-workload module synchronize_rcu_tasks_trace {TASKS_SYNCS}\n\
         sleep 0.5\nEOF\n\
         traced gp_tasks -f json gp --flavor tasks -c 'sh /tmp/gp_tasks.sh'\n\
         echo '=== gp_tasks.readout'; cat /tmp/held_readout\n\
         printf 'rcu-workload module synchronize_rcu_tasks_trace {TASKS_SYNCS}\\n\
         rcu-workload module synchronize_rcu_tasks_rude {TASKS_SYNCS}\\n\
         rcu-workload module synchronize_rcu_tasks {TASKS_SYNCS}\\nsleep 0.5\\n' > /tmp/flavours.sh\n\
         traced gp_trace -f json gp --flavor trace -c 'sh /tmp/flavours.sh'\n\
         traced gp_rude -f json gp --flavor rude -c 'sh /tmp/flavours.sh'\n\
         cat > /tmp/held_trace.sh <<'EOF'\n{held_trace}EOF\n\
         traced gp_trace_held -f json gp --flavor trace -c 'sh /tmp/held_trace.sh'\n\
         echo '=== gp_trace_held.readout'; cat /proc/rcutrace_test\n\
         printf 'rcutrace srlat --attach fentry --secs 1 >/dev/null 2>&1\\nsleep 0.5\\n' > /tmp/attach.sh\n\
         traced gp_attach -f json gp --flavor tasks -c 'sh /tmp/attach.sh'\n\
         traced gp_detach -f json gp --flavor trace -c 'sh /tmp/attach.sh'\n\
         cat > /tmp/stall_task.sh <<'EOF'\n{stall_task}EOF\n\
         cat > /tmp/stall_srcu.sh <<'EOF'\n{stall_srcu}EOF\n\
         printf 'sh /tmp/stall_task.sh\\ncat /proc/rcutrace_test > /tmp/stall_task_readout\\n\
         sh /tmp/stall_srcu.sh\\nsleep 0.5\\n' > /tmp/stall_holds.sh\n\
         watched stall_flavors \
           '-f json stall --flavor tasks --flavor srcu --flavor-warn-at {STALL_WARN_MS}ms' \
           'sh /tmp/stall_holds.sh'\n\
         echo '=== stall_flavors.task_readout'; cat /tmp/stall_task_readout\n\
         echo '=== stall_flavors.srcu_readout'; cat /proc/rcutrace_test\n\
         {serve_flavors}",
        held_srcu = held_wait("hold_srcu", "srcu_hold_start_ns", "synchronize_srcu"),
        serve_flavors = SERVE_FLAVORS
            .replace("C MS", &format!("{HOLD_CPU} {HOLD_MS}"))
            .replace("SYNCS", &SYNCHRONIZE_SRCU.to_string()),
        gp_held = GP_HELD
            .replace("C MS", &format!("{HOLD_CPU} {HOLD_MS}"))
            .replace("1 C", &format!("1 {HOLD_CPU}"))
            .replace("N", &HELD_SRCU_SYNCS.to_string()),
        held_task = held_wait("hold_task", "task_hold_start_ns", "synchronize_rcu_tasks"),
        stall_task = held_wait_for(
            "hold_task",
            "task_hold_start_ns",
            "synchronize_rcu_tasks",
            STALL_HOLD_MS
        ),
        // Two grace periods first, so that both of its indexes were scanned clear in the
        // window: the reader's CPU is named from the counts' residues then.
        stall_srcu = "rcu-workload module synchronize_srcu 2\n".to_string()
            + &held_wait_for(
                "hold_srcu",
                "srcu_hold_start_ns",
                "synchronize_srcu",
                STALL_HOLD_MS
            ),
        held_trace = held_wait(
            "hold_trace",
            "trace_hold_start_ns",
            "synchronize_rcu_tasks_trace"
        ),
    );
    let guest = boot_with_module_on(
        series,
        &script,
        4,
        1024,
        &["rcutree.rcu_fanout_leaf=2"],
        Duration::from_secs(420),
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

    // The held waits: each one wait alone, begun inside its hold and timed at least to the
    // hold's end (it cannot return before; the probe's clock is read after the module's).
    for (name, prefix, function, key) in [
        ("held_srcu", "srcu", "synchronize_srcu", Some(MODULE_DOMAIN)),
        ("held_task", "task", "synchronize_rcu_tasks", None),
    ] {
        let run = run_named(&sections, name);
        run.assert_ok(name);
        let readout = sections[&format!("{name}.readout")].as_str();
        let number = |key: &str| support::readout_number(readout, key);
        let (start, end) = (
            number(&format!("{prefix}_hold_start_ns")),
            number(&format!("{prefix}_hold_end_ns")),
        );
        let called = number(&format!("called_ns {function}"));
        assert!(end - start >= HOLD_MS * 1_000_000, "{readout}");
        assert!(
            start < called && called < end,
            "{name}: the wait began outside the hold:\n{readout}"
        );
        let summaries: Vec<_> = run
            .records()
            .into_iter()
            .filter_map(|r| match r {
                Record::LatencySummary(s) if s.count > 0 => Some(s),
                _ => None,
            })
            .collect();
        assert!(
            matches!(&summaries[..], [s] if s.map == format!("@{function}")
                && s.key.as_deref() == key && s.count == 1),
            "{name}: {summaries:#?}"
        );
        let waited = summaries[0].max_ns.unwrap();
        println!(
            "{series} {name}: waited {waited} ns, called {} ns before the hold ended",
            end - called
        );
        assert!(
            waited >= end - called,
            "{name}: waited {waited} ns, but was called {} ns before the hold ended",
            end - called
        );
    }
    assert_eq!(
        support::readout_number(&sections["held_srcu.readout"], "srcu_hold_cpu"),
        HOLD_CPU
    );

    // gp --flavor srcu: the held reader's grace period, whole, on the module's domain alone
    // (it requested it inside the reader, so it began after that call and ended after the
    // reader left), then one for each synchronize_srcu() called during the hold.
    let gp_held = run_named(&sections, "gp_held");
    gp_held.assert_ok("gp_held");
    let readout = sections["gp_held.readout"].as_str();
    let number = |key: &str| support::readout_number(readout, key);
    let requested = number("called_ns start_poll_synchronize_srcu");
    let held_until = number("srcu_hold_end_ns");
    let module_grace_periods: Vec<_> = gp_held
        .records()
        .into_iter()
        .filter_map(|r| match r {
            Record::LatencySummary(s) if s.key.as_deref() == Some(MODULE_DOMAIN) => Some(s),
            _ => None,
        })
        .collect();
    assert!(
        matches!(&module_grace_periods[..], [s] if s.map == "@srcu_gp"
            && s.count == 2 + 1 + HELD_SRCU_SYNCS
            && s.max_ns.is_some_and(|max| max >= held_until - requested)),
        "{series}: {module_grace_periods:#?}\nheld {} ns from the request\n{}",
        held_until - requested,
        gp_held.out
    );
    // Held up by readers on the hold's CPU, and on no other: not by the CPU the moved reader
    // left ahead, whose residue the clear scans before the hold kept. The map counts every
    // grace period of the run, and one before the hold can be held briefly too (a 7.3 run's
    // first: a scan failed, so a reader was in flight, before either index had been scanned
    // clear in the window, when the raw counts, the moved reader's residue with them, are
    // all that names CPUs: docs/gp.md). So the held grace period names the hold's CPU alone,
    // and each other CPU counted is one that grace periods ended before the hold name, as
    // often as they name it.
    let module_records: Vec<records::GracePeriod> = gp_held
        .records()
        .into_iter()
        .filter_map(|r| match r {
            Record::GracePeriod(g) if g.key.as_deref() == Some(MODULE_DOMAIN) => Some(g),
            _ => None,
        })
        .collect();
    let hold_began = number("srcu_hold_start_ns");
    let held_grace_periods: Vec<&records::GracePeriod> = module_records
        .iter()
        .filter(|g| g.started_ns + g.duration_ns >= held_until && g.started_ns <= held_until)
        .collect();
    assert!(
        matches!(&held_grace_periods[..], [g] if g.reader_cpus == [HOLD_CPU as u32]),
        "{series}: {held_grace_periods:#?}"
    );
    // Every CPU the grace periods ended before the hold name, as often as they name it, and
    // the hold's CPU once more.
    let expected: std::collections::BTreeMap<String, u64> = module_records
        .iter()
        .filter(|g| g.started_ns + g.duration_ns < hold_began)
        .flat_map(|g| g.reader_cpus.iter().copied())
        .chain([HOLD_CPU as u32])
        .fold(Default::default(), |mut counts, cpu| {
            *counts.entry(format!("{MODULE_DOMAIN}, {cpu}")).or_default() += 1;
            counts
        });
    let held_on: std::collections::BTreeMap<String, u64> =
        keyed_entries(&gp_held, "@srcu_gp_held_on")
            .into_iter()
            .filter(|(key, _)| key.starts_with(MODULE_DOMAIN))
            .collect();
    assert_eq!(held_on, expected, "{series}:\n{}", gp_held.out);
    // Each of those calls (and the two before the hold) waited through exactly one grace
    // period of the domain, whose record lists it with its stack; the held one was waited
    // through by none (its request was the reader's own, no wait).
    let through_module = |g: &records::GracePeriod| {
        g.waiters
            .iter()
            .filter(|w| {
                w.function == "synchronize_srcu"
                    && w.stack
                        .iter()
                        .any(|f| f.starts_with("op_synchronize_srcu+"))
            })
            .count()
    };
    assert_eq!(
        module_records
            .iter()
            .map(through_module)
            .collect::<Vec<_>>(),
        [0, 1, 1, 1, 1, 1],
        "{series}: {module_records:#?}"
    );
    // Its waiters: exactly those calls (and the two before the hold), under the domain and
    // the module's stack.
    assert_eq!(
        waits_through(&gp_held, "@synchronize_srcu", &format!("{MODULE_DOMAIN}, ")),
        2 + HELD_SRCU_SYNCS,
        "{series}:\n{}",
        gp_held.out
    );
    assert_eq!(
        waits_through(&gp_held, "@synchronize_srcu", "op_synchronize_srcu+"),
        2 + HELD_SRCU_SYNCS,
        "{series}:\n{}",
        gp_held.out
    );
    println!(
        "{series} gp_held: {:?} ns for a reader held {} ns after the request",
        module_grace_periods[0].max_ns,
        held_until - requested
    );
    // Its record takes it apart at its kernel's phases, every bound seen: the scan that found
    // the domain's readers gone came after the reader left, and ended the second scan.
    let held_record = held_grace_periods[0];
    println!("{series} gp_held phases: {:?}", held_record.phases);
    assert_eq!(phase_names(held_record), SRCU_PHASES, "{held_record:#?}");
    assert_eq!(
        held_record.phases.iter().map(|p| p.ns).sum::<u64>(),
        held_record.duration_ns
    );
    assert!(
        phase_end(held_record, "scan2") >= held_until,
        "{series}: the scans cleared before the reader left ({held_until}): {held_record:#?}"
    );
    // One grace period for each synchronize_srcu() on the idle domain, in text as bpftrace
    // prints a keyed histogram.
    let gp_syncs = run_named(&sections, "gp_syncs");
    gp_syncs.assert_ok("gp_syncs");
    assert!(
        gp_syncs
            .out
            .contains(&format!("@srcu_gp[{MODULE_DOMAIN}]: \n")),
        "{}",
        gp_syncs.out
    );
    assert!(
        gp_syncs.out.contains(&format!(
            "@srcu_gp[{MODULE_DOMAIN}] count {SYNCHRONIZE_SRCU}, "
        )),
        "{}",
        gp_syncs.out
    );
    // Each of them taken apart in the text's table of the slowest, by SRCU's phases.
    let module_rows = gp_syncs
        .out
        .lines()
        .skip_while(|l| !l.ends_with("DURATION     SCAN1     SCAN2    GP_END  HELD BY"))
        .filter(|l| l.starts_with(&format!("  {MODULE_DOMAIN} ")))
        .count() as u64;
    assert!(module_rows >= SYNCHRONIZE_SRCU, "{}", gp_syncs.out);
    // And their waiters: those calls, under the domain and the module's stack, on one line.
    let waiter = format!("@synchronize_srcu[{MODULE_DOMAIN}, synchronize_srcu+");
    let waiters: Vec<&str> = gp_syncs
        .out
        .lines()
        .filter(|l| l.starts_with(&waiter) && l.contains("; op_synchronize_srcu+"))
        .filter(|l| l.contains("] count "))
        .collect();
    assert!(
        matches!(waiters[..], [line] if line.contains(&format!("] count {SYNCHRONIZE_SRCU}, "))),
        "{series}: {waiters:#?}\n{}",
        gp_syncs.out
    );

    // gp --flavor tasks: the held wait's grace period (it began after the call and could not
    // end before the hold did), then one per synchronize call, of each flavour this kernel
    // runs tasks-RCU grace periods of.
    let gp_tasks = run_named(&sections, "gp_tasks");
    gp_tasks.assert_ok("gp_tasks");
    let readout = sections["gp_tasks.readout"].as_str();
    let number = |key: &str| support::readout_number(readout, key);
    let held_for = number("task_hold_end_ns") - number("called_ns synchronize_rcu_tasks");
    let mut flavours: Vec<(String, u64, u64)> = gp_tasks
        .records()
        .into_iter()
        .filter_map(|r| match r {
            Record::LatencySummary(s) if s.map == "@tasks_gp" && s.count > 0 => {
                Some((s.key.unwrap_or_default(), s.count, s.max_ns.unwrap_or(0)))
            }
            _ => None,
        })
        .collect();
    flavours.sort();
    let counts: Vec<(&str, u64)> = flavours.iter().map(|(k, n, _)| (k.as_str(), *n)).collect();
    let expected: &[(&str, u64)] = match series {
        "7.3" => &[("rcu_tasks", TASKS_SYNCS + 1)],
        _ => &[
            ("rcu_tasks", TASKS_SYNCS + 1),
            ("rcu_tasks_rude", TASKS_SYNCS),
            ("rcu_tasks_trace", TASKS_SYNCS),
        ],
    };
    assert_eq!(counts, expected, "{series}:\n{}", gp_tasks.out);
    // The held wait's grace period, in its record: begun after the call (the kthread starts
    // it when it wakes, some time after), over after the hold, the busy task among its last
    // holdouts.
    let (called, hold_end) = (
        number("called_ns synchronize_rcu_tasks"),
        number("task_hold_end_ns"),
    );
    let holder_pid = number("task_hold_pid") as u32;
    let held: Vec<_> = gp_tasks
        .records()
        .into_iter()
        .filter_map(|r| match r {
            Record::GracePeriod(g) if g.key.as_deref() == Some("rcu_tasks") => Some(g),
            _ => None,
        })
        .filter(|g| g.started_ns > called && g.started_ns + g.duration_ns >= hold_end)
        .collect();
    println!(
        "{series} gp_tasks: the wait called {held_for} ns before the hold ended; held: {:?}",
        held.iter()
            .map(|g| (g.started_ns - called, g.duration_ns))
            .collect::<Vec<_>>()
    );
    assert!(
        held.iter().any(|g| g.flavor == "tasks"
            && g.holdout_tasks
                .iter()
                .any(|t| t.pid == holder_pid && t.comm == "rcu-workload")),
        "{series}: no grace period from the call ({called}) past the hold ({hold_end}) held by \
         pid {holder_pid}: {held:#?}\n{}",
        gp_tasks.out
    );
    // Taken apart at its kernel's phases, every bound seen: its passes over the holdouts
    // began before the hold ended and went on past it; so do every rcu_tasks grace period's.
    let holder_gp = held
        .iter()
        .find(|g| g.holdout_tasks.iter().any(|t| t.pid == holder_pid))
        .unwrap();
    println!(
        "{series} gp_tasks phases: {:?}, {:?} passes",
        holder_gp.phases, holder_gp.holdout_passes
    );
    assert!(
        phase_end(holder_gp, "post_scan") < hold_end
            && phase_end(holder_gp, "holdouts") >= hold_end
            && holder_gp.holdout_passes.is_some_and(|n| n >= 1),
        "{series}: the holdout passes did not span the hold's end ({hold_end}): {holder_gp:#?}"
    );
    // The module's wait, called before it began and returned after it ended, waited through
    // it: listed with its stack.
    assert!(
        holder_gp
            .waiters
            .iter()
            .any(|w| w.function == "synchronize_rcu_tasks"
                && w.waited_ns >= holder_gp.duration_ns
                && w.stack
                    .iter()
                    .any(|f| f.starts_with("op_synchronize_rcu_tasks+"))),
        "{series}: the held grace period does not list the wait behind it: {holder_gp:#?}"
    );
    // Its holder's kernel stack, as a tick sampled it busy in the module while it held.
    let holder = holder_gp
        .holdout_tasks
        .iter()
        .find(|t| t.pid == holder_pid)
        .unwrap();
    assert!(
        holder
            .stack
            .iter()
            .any(|f| f.starts_with("rcutrace_test_hold_task+") && f.ends_with(" [rcutrace_test]")),
        "{series}: the holder's stack is not where it was busy: {holder:#?}"
    );
    for g in gp_tasks.records().into_iter().filter_map(|r| match r {
        Record::GracePeriod(g) if g.key.as_deref() == Some("rcu_tasks") => Some(g),
        _ => None,
    }) {
        assert_eq!(phase_names(&g), TASKS_PHASES, "{series}: {g:#?}");
        assert_eq!(g.phases.iter().map(|p| p.ns).sum::<u64>(), g.duration_ns);
    }
    // The busy task is named among the last holdouts of the grace period it held (classic
    // tasks RCU's last pass over its holdout list), by comm and pid.
    let held_by = keyed_entries(&gp_tasks, "@tasks_gp_held_by");
    let holder = format!("rcu_tasks, rcu-workload, {}", number("task_hold_pid"));
    assert!(
        held_by.iter().any(|(key, n)| *key == holder && *n >= 1),
        "{series}: no {holder} in {held_by:?}\n{}",
        gp_tasks.out
    );
    // Its waiters: each of the module's synchronize calls exactly once, under its function
    // and the module's stack (7.3's tasks-trace calls are SRCU's, not here; its rude calls
    // return at once, but are calls).
    let mut module_waits = vec![
        ("synchronize_rcu_tasks", TASKS_SYNCS + 1),
        ("synchronize_rcu_tasks_rude", TASKS_SYNCS),
    ];
    if series != "7.3" {
        module_waits.push(("synchronize_rcu_tasks_trace", TASKS_SYNCS));
    }
    for (function, calls) in module_waits {
        assert_eq!(
            waits_through(
                &gp_tasks,
                &format!("@{function}"),
                &format!("op_{function}+")
            ),
            calls,
            "{series} {function}:\n{}",
            gp_tasks.out
        );
    }

    // --flavor trace and rude keep one flavour of the three called in their window: 6.x's
    // tasks-trace and tasks-rude kthreads' grace periods, one per call; on 7.3 tasks-trace
    // RCU is an SRCU domain, said and followed, and synchronize_rcu_tasks_rude() returns at
    // once on x86 (no grace period).
    let kept = |name: &str, map: &str| -> Vec<(String, u64)> {
        let run = run_named(&sections, name);
        run.assert_ok(name);
        run.records()
            .into_iter()
            .filter_map(|r| match r {
                Record::LatencySummary(s) if s.map == map && s.count > 0 => {
                    Some((s.key.unwrap_or_default(), s.count))
                }
                _ => None,
            })
            .collect()
    };
    let trace_note = "tasks-trace RCU is SRCU on this kernel: following its domain, \
                      rcu_tasks_trace_srcu_struct";
    let trace_err = &run_named(&sections, "gp_trace").err;
    if series == "7.3" {
        assert!(trace_err.contains(trace_note), "{trace_err}");
        assert_eq!(
            kept("gp_trace", "@srcu_gp"),
            [("rcu_tasks_trace_srcu_struct".to_string(), TASKS_SYNCS)]
        );
        assert_eq!(kept("gp_rude", "@tasks_gp"), []);
    } else {
        assert!(!trace_err.contains(trace_note), "{trace_err}");
        assert_eq!(
            kept("gp_trace", "@tasks_gp"),
            [("rcu_tasks_trace".to_string(), TASKS_SYNCS)]
        );
        assert_eq!(
            kept("gp_rude", "@tasks_gp"),
            [("rcu_tasks_rude".to_string(), TASKS_SYNCS)]
        );
    }
    // Each of their grace periods taken apart at its kernel's phases (before 7.0 tasks-trace
    // RCU's own steps, since then SRCU's scans); the rude flavour has none, nor passes.
    let records_of = |name: &str| -> Vec<records::GracePeriod> {
        run_named(&sections, name)
            .records()
            .into_iter()
            .filter_map(|r| match r {
                Record::GracePeriod(g) => Some(g),
                _ => None,
            })
            .collect()
    };
    let (trace_key, trace_phases) = match series {
        "7.3" => (TASKS_TRACE_DOMAIN, &SRCU_PHASES[..]),
        _ => ("rcu_tasks_trace", &TASKS_PHASES[..]),
    };
    let trace_records = records_of("gp_trace");
    assert_eq!(
        trace_records.len() as u64,
        TASKS_SYNCS,
        "{series}: {trace_records:#?}"
    );
    for g in &trace_records {
        assert_eq!(g.key.as_deref(), Some(trace_key));
        assert_eq!(phase_names(g), trace_phases, "{series}: {g:#?}");
    }
    for g in records_of("gp_rude") {
        assert!(
            g.phases.is_empty() && g.holdout_passes == Some(0),
            "{series}: {g:#?}"
        );
    }

    // A tasks-trace reader asleep on the hold's CPU while one synchronize_rcu_tasks_trace()
    // waits: the grace period it waited for, in its record, is over after the reader left,
    // and names it: before 7.0 the reader's task among its last holdouts (its pass over
    // trc_holdout_list), since 7.0 the reader's CPU among those whose SRCU readers held it.
    let gp_trace_held = run_named(&sections, "gp_trace_held");
    gp_trace_held.assert_ok("gp_trace_held");
    let readout = sections["gp_trace_held.readout"].as_str();
    let number = |key: &str| support::readout_number(readout, key);
    let (called, hold_end, reader) = (
        number("called_ns synchronize_rcu_tasks_trace"),
        number("trace_hold_end_ns"),
        number("trace_hold_pid") as u32,
    );
    assert_eq!(number("trace_hold_cpu"), HOLD_CPU, "{readout}");
    let held: Vec<_> = gp_trace_held
        .records()
        .into_iter()
        .filter_map(|r| match r {
            Record::GracePeriod(g) => Some(g),
            _ => None,
        })
        .filter(|g| g.started_ns + g.duration_ns >= hold_end)
        .collect();
    let named = |g: &rcutrace_common::records::GracePeriod| match series {
        "7.3" => {
            g.flavor == "srcu"
                && g.key.as_deref() == Some(TASKS_TRACE_DOMAIN)
                && g.reader_cpus.contains(&(HOLD_CPU as u32))
        }
        _ => {
            g.flavor == "tasks"
                && g.key.as_deref() == Some("rcu_tasks_trace")
                && g.started_ns > called
                && g.holdout_tasks.iter().any(|t| {
                    t.pid == reader && t.comm == "rcu-workload" && u64::from(t.cpu) == HOLD_CPU
                })
        }
    };
    assert!(
        held.iter().any(named),
        "{series}: no tasks-trace grace period past the reader ({hold_end}) naming it: \
         {held:#?}\n{}",
        gp_trace_held.out
    );
    let (map, key) = match series {
        "7.3" => (
            "@srcu_gp_held_on",
            format!("{TASKS_TRACE_DOMAIN}, {HOLD_CPU}"),
        ),
        _ => (
            "@tasks_gp_held_by",
            format!("rcu_tasks_trace, rcu-workload, {reader}"),
        ),
    };
    assert!(
        keyed_entries(&gp_trace_held, map)
            .iter()
            .any(|(k, n)| *k == key && *n >= 1),
        "{series}: no {map}[{key}]\n{}",
        gp_trace_held.out
    );
    let wait = match series {
        "7.3" => "@synchronize_srcu",
        _ => "@synchronize_rcu_tasks_trace",
    };
    assert_eq!(
        waits_through(&gp_trace_held, wait, "op_synchronize_rcu_tasks_trace+"),
        1,
        "{series}:\n{}",
        gp_trace_held.out
    );

    // rcutrace's own attaching, run inside the window by a second rcutrace, among the
    // waiters with its stack: before 7.0 a trampoline's detach unregisters its ftrace ops,
    // which waits for a tasks-RCU grace period; everywhere a kprobe's detach waits for a
    // tasks-trace one, an SRCU wait on rcu_tasks_trace_srcu_struct since 7.0. (7.3 frees a
    // trampoline's ftrace ops without a synchronous wait: none to see there.)
    let gp_attach = run_named(&sections, "gp_attach");
    gp_attach.assert_ok("gp_attach");
    if series != "7.3" {
        assert!(
            waits_through(
                &gp_attach,
                "@synchronize_rcu_tasks",
                "bpf_trampoline_unlink_prog+"
            ) >= 1,
            "{series}: no trampoline's detach among the waiters\n{}",
            gp_attach.out
        );
    }
    let gp_detach = run_named(&sections, "gp_detach");
    gp_detach.assert_ok("gp_detach");
    let (map, key) = match series {
        "7.3" => ("@synchronize_srcu", format!("{TASKS_TRACE_DOMAIN}, ")),
        _ => ("@synchronize_rcu_tasks_trace", String::new()),
    };
    let detaches: u64 = gp_detach
        .records()
        .into_iter()
        .filter_map(|r| match r {
            Record::LatencySummary(s) if s.map == map => Some(s),
            _ => None,
        })
        .filter(|s| {
            s.key
                .as_deref()
                .is_some_and(|k| k.starts_with(&key) && k.contains("perf_event_detach_bpf_prog+"))
        })
        .map(|s| s.count)
        .sum();
    assert!(
        detaches >= 1,
        "{series}: no kprobe's detach among the waiters\n{}",
        gp_detach.out
    );

    // stall --flavor: the held tasks-RCU and SRCU grace periods, each warned about within 2 s
    // of passing the threshold, naming what held it (the busy task; the reader's CPU), and
    // each end said.
    let stall = run_named(&sections, "stall_flavors");
    stall.assert_ok("stall_flavors");
    let task_holder =
        support::readout_number(&sections["stall_flavors.task_readout"], "task_hold_pid") as u32;
    let threshold_ns = STALL_WARN_MS * 1_000_000;
    let records = stall.records();
    let warned = |flavor: &str, key: &str, names: &dyn Fn(&records::FlavorStallWarning) -> bool| {
        records.iter().any(|r| {
            matches!(r, Record::FlavorStallWarning(w) if w.flavor == flavor && w.key == key
                && w.threshold_ns == threshold_ns
                && w.age_ns >= threshold_ns && w.age_ns < threshold_ns + 2_000_000_000
                && names(w))
        })
    };
    assert!(
        warned("tasks", "rcu_tasks", &|w| w
            .holdout_tasks
            .iter()
            .any(|t| t.pid == task_holder && t.comm == "rcu-workload")),
        "{series}: no warning about rcu_tasks naming pid {task_holder}\n{}\n{}",
        stall.out,
        stall.err
    );
    assert!(
        warned("srcu", MODULE_DOMAIN, &|w| w
            .reader_cpus
            .contains(&(HOLD_CPU as u32))),
        "{series}: no warning about {MODULE_DOMAIN} naming CPU {HOLD_CPU}\n{}",
        stall.out
    );
    // And each names the one wait blocked behind it, by its kernel stack: the module's call.
    fn blocked_behind(frame: &str) -> impl Fn(&records::FlavorStallWarning) -> bool + '_ {
        move |w| {
            w.blocked_tasks
                .iter()
                .any(|t| t.comm == "rcu-workload" && t.stack.iter().any(|f| f.starts_with(frame)))
        }
    }
    for (flavor, key, frame) in [
        ("tasks", "rcu_tasks", "op_synchronize_rcu_tasks+"),
        ("srcu", MODULE_DOMAIN, "op_synchronize_srcu+"),
    ] {
        assert!(
            warned(flavor, key, &blocked_behind(frame)),
            "{series}: no warning about {key} naming the task blocked in {frame}\n{}\n{}",
            stall.out,
            stall.err
        );
    }
    for (flavor, key) in [("tasks", "rcu_tasks"), ("srcu", MODULE_DOMAIN)] {
        assert!(
            records
                .iter()
                .any(|r| matches!(r, Record::FlavorStallEnded(e)
                if e.flavor == flavor && e.key == key && e.warnings >= 1
                    && e.duration_ns >= threshold_ns)),
            "{series}: no end of the {key} grace period warned about\n{}",
            stall.out
        );
    }
    assert!(
        records.iter().any(|r| matches!(r, Record::StallSummary(s)
            if s.flavor_thresholds_ns == [threshold_ns])),
        "{}",
        stall.out
    );

    // serve --flavor: while the task held a tasks-RCU grace period up, its age was served;
    // after, SRCU's grace periods by domain, exactly one per synchronize_srcu() on the
    // module's idle domain, and tasks RCU's by flavour with their phases.
    let metric = |section: &str, series: &str| -> Option<f64> {
        sections[section]
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    };
    assert_eq!(
        sections["serve_flavors.status"].trim(),
        "0",
        "{}",
        sections["serve_flavors.err"]
    );
    let age = metric(
        "serve_flavors.during",
        "rcutrace_flavor_grace_period_age_seconds{flavor=\"tasks\",key=\"rcu_tasks\"}",
    );
    assert!(
        age.is_some_and(|age| age > 0.1),
        "{series}: age {age:?}\n{}",
        sections["serve_flavors.during"]
    );
    let srcu_count = metric(
        "serve_flavors.after",
        &format!(
            "rcutrace_flavor_grace_period_latency_nanoseconds_count{{flavor=\"srcu\",key=\"{MODULE_DOMAIN}\"}}"
        ),
    );
    assert_eq!(
        srcu_count,
        Some(SYNCHRONIZE_SRCU as f64),
        "{series}:\n{}",
        sections["serve_flavors.after"]
    );
    let held_phase = metric(
        "serve_flavors.after",
        "rcutrace_flavor_grace_period_phase_nanoseconds_sum{flavor=\"tasks\",key=\"rcu_tasks\",phase=\"holdouts\"}",
    );
    assert!(
        held_phase.is_some_and(|ns| ns >= 0.5e9),
        "{series}: the held grace period's passes over its holdouts: {held_phase:?}\n{}",
        sections["serve_flavors.after"]
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
