//! `rcutrace callbacks` against the test module's exact ground truth on Debian's 6.1 and
//! 6.12: N callbacks of a known function are N queued, N invoked and N latency samples, the
//! way they were queued (call_rcu, call_rcu_hurry, call_srcu, call_rcu_tasks) is told apart,
//! callbacks held back by a reader wait at least as long as the reader, callbacks pending at
//! exit are checked against the kernel's own lists, and a flood of 100 000 loses nothing
//! silently.

mod support;

use std::{collections::HashMap, time::Duration};

use rcutrace_common::records::{CallbackRow, CrossCheck, MapValue, Record};
use support::{
    Run, boot_with_module_within, callback_latency_samples, callback_row, callbacks_summary,
    readout_number, run_named, sections,
};

const CALLBACKS: u64 = 300;
const SRCU_CALLBACKS: u64 = 100;
/// Tasks RCU grace periods take a tenth of a second or more under emulation.
const TASKS_CALLBACKS: u64 = 5;
const DELAYED: u64 = 50;
const DELAY_MS: u64 = 20;
const KFREES: u64 = 200;
const FLOOD: u64 = 100_000;
/// Long enough to outlast the held run's close, which reads /proc/kallsyms.
const HOLD_MS: u64 = 5000;

const MODULE_CB: &str = "rcutrace_test_cb [rcutrace_test]";
const HURRY_CB: &str = "rcutrace_test_hurry_cb [rcutrace_test]";
const DELAYED_CB: &str = "rcutrace_test_delayed_cb [rcutrace_test]";
const SRCU_CB: &str = "rcutrace_test_srcu_cb [rcutrace_test]";
const TASKS_CB: &str = "rcutrace_test_tasks_cb [rcutrace_test]";
const FLOOD_CB: &str = "rcutrace_test_flood_cb [rcutrace_test]";

/// The JSON records of one run.
fn decode(run: &Run) -> Vec<Record> {
    run.out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

/// `@cpu_queued` and the like, by CPU.
fn per_cpu(records: &[Record], name: &str) -> HashMap<String, u64> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Map(maps) => maps.get(name),
            _ => None,
        })
        .filter_map(|m| match m {
            MapValue::Keyed(keys) => Some(keys.0.iter().cloned().collect()),
            MapValue::Scalar(_) => None,
        })
        .next()
        .unwrap_or_default()
}

/// Every callback queued while tracing is timed, still pending, or counted as not recorded.
fn assert_accounted(row: &CallbackRow) {
    assert_eq!(
        row.queued,
        row.invoked + row.pending_at_exit + row.not_recorded + row.requeued,
        "{row:#?}"
    );
}

/// The check of the pending callbacks against the kernel's lists.
fn pending_check(records: &[Record]) -> &CrossCheck {
    let s = callbacks_summary(records);
    s.cross_checks
        .iter()
        .find(|c| c.at_most && c.counted.contains("pending at exit"))
        .unwrap_or_else(|| panic!("no check of the pending callbacks: {:#?}", s.cross_checks))
}

/// By kprobe, the kernel skips uncounted a kprobe hit that comes while another kprobe's
/// handler runs on its CPU: a softirq invoking callbacks inside one of rcutrace's handlers
/// goes unseen (under a loaded host, 88 of 300 once), and now and then an entry point's note
/// (one of 300 callbacks then counts as `other`). Every callback of the function is still
/// seen queued; a run in which invocations went unseen must say so, with the pending beyond
/// what the kernel's lists held, and otherwise each is a latency sample.
fn assert_exact_or_flagged(run: &Run, function: &str, n: u64) {
    let records = decode(run);
    let s = callbacks_summary(&records);
    let rows: Vec<&CallbackRow> = s.rows.iter().filter(|r| r.function == function).collect();
    let queued: u64 = rows.iter().map(|r| r.queued).sum();
    let invoked: u64 = rows.iter().map(|r| r.invoked).sum();
    let pending: u64 = rows.iter().map(|r| r.pending_at_exit).sum();
    let before: u64 = rows.iter().map(|r| r.queued_before_tracing).sum();
    assert_eq!((queued, invoked + pending, before), (n, n, 0), "{rows:#?}");
    let check = pending_check(&records);
    if pending > 0 {
        assert!(!check.agrees && check.value > check.expected, "{check:#?}");
    } else {
        assert_eq!(callback_latency_samples(&records, function), n, "{rows:#?}");
    }
    // Other callbacks' invocations may have gone unseen too: said, never silent.
    if !check.agrees {
        assert!(run.err.contains("pending at exit"), "{}", run.err);
    }
}

/// Exactly N queued and N invoked, each a latency sample, none from before tracing.
fn assert_exact(records: &[Record], function: &str, via: &str, n: u64) {
    let s = callbacks_summary(records);
    let r = callback_row(s, function, via);
    assert_eq!(
        (
            r.queued,
            r.invoked,
            r.pending_at_exit,
            r.queued_before_tracing
        ),
        (n, n, 0, 0),
        "{function} via {via}: {r:#?}"
    );
    assert_eq!(callback_latency_samples(records, function), n, "{function}");
    assert!(r.min_ns.is_some_and(|min| min > 0), "{r:#?}");
}

fn exact_callbacks(series: &str) {
    let hurry = series != "6.1";
    let mut work = vec![
        format!("module call_rcu {CALLBACKS}"),
        format!("module call_rcu_delayed {DELAYED} {DELAY_MS}"),
        format!("module kfree_rcu {KFREES}"),
        format!("module call_srcu {SRCU_CALLBACKS}"),
        format!("module call_rcu_tasks {TASKS_CALLBACKS}"),
    ];
    if hurry {
        work.push(format!("module call_rcu_hurry {CALLBACKS}"));
    }
    // The barriers wait until every callback above was invoked, inside the window.
    work.extend(
        [
            "module rcu_barrier 1",
            "module srcu_barrier 1",
            "module rcu_barrier_tasks 1",
        ]
        .map(String::from),
    );
    let work_script: String = work
        .iter()
        .map(|w| format!("/bin/rcu-workload {w} || exit 1\n"))
        .collect();
    let hold_s = HOLD_MS / 1000;
    let script = format!(
        "insmod /lib/rcutrace_test.ko || exit 1\n\
         cat > /tmp/exact.sh <<'EOF'\n{work_script}EOF\n\
         printf '/bin/rcu-workload module call_rcu {CALLBACKS}\\n/bin/rcu-workload module rcu_barrier 1\\n' > /tmp/kprobe.sh\n\
         printf '/bin/rcu-workload module flood {FLOOD}\\n/bin/rcu-workload module rcu_barrier 1\\n' > /tmp/flood.sh\n\
         printf '/bin/rcu-workload module hold_cpu 1 {HOLD_MS} &\\nsleep 0.5\\n/bin/rcu-workload module call_rcu {CALLBACKS}\\n' > /tmp/held.sh\n\
         traced exact 'callbacks --secs 0 --top 0 -f json' 'sh /tmp/exact.sh'\n\
         echo '=== readout'; cat /proc/rcutrace_test\n\
         /bin/rcu-workload module reset 0 >/dev/null\n\
         traced kprobe 'callbacks --secs 0 --top 0 --attach kprobe -f json' 'sh /tmp/kprobe.sh'\n\
         /bin/rcu-workload module reset 0 >/dev/null\n\
         traced text 'callbacks --secs 0 --top 3 --by cpu' 'sh /tmp/kprobe.sh'\n\
         /bin/rcu-workload module reset 0 >/dev/null\n\
         traced held 'callbacks --secs 0 --top 0 -f json' 'sh /tmp/held.sh'\n\
         sleep {hold_s}\n\
         /bin/rcu-workload module reset 0 >/dev/null\n\
         traced flood 'callbacks --secs 0 --top 0 --by cpu -f json' 'sh /tmp/flood.sh'\n\
         echo '=== flood_readout'; cat /proc/rcutrace_test\n"
    );
    // The flood alone takes minutes of emulation.
    let guest = boot_with_module_within(series, &script, Duration::from_secs(600));
    let sections = sections(&guest.stdout);

    let exact = run_named(&sections, "exact");
    exact.assert_ok("exact");
    let records = decode(&exact);
    let s = callbacks_summary(&records);
    assert_exact(&records, MODULE_CB, "call_rcu", CALLBACKS);
    assert_exact(&records, DELAYED_CB, "call_rcu", DELAYED);
    assert_exact(&records, SRCU_CB, "call_srcu", SRCU_CALLBACKS);
    assert_exact(&records, TASKS_CB, "call_rcu_tasks", TASKS_CALLBACKS);
    if hurry {
        assert_exact(&records, HURRY_CB, "call_rcu_hurry", CALLBACKS);
    } else {
        assert_eq!(s.entry_points_not_traced, ["call_rcu_hurry"]);
    }
    // A reader held DELAY_MS after the queueing delays every one of those callbacks.
    let delayed = callback_row(s, DELAYED_CB, "call_rcu");
    assert!(
        delayed.min_ns.unwrap() >= DELAY_MS * 1_000_000,
        "{delayed:#?}"
    );
    // The module timed the same callbacks from just before call_rcu() to inside the
    // callback, an interval that contains rcutrace's (enqueue to dequeue) for each one.
    let readout = &sections["readout"];
    assert_eq!(
        readout_number(readout, "invoked rcutrace_test_cb"),
        CALLBACKS
    );
    for (function, callback) in [
        (DELAYED_CB, "rcutrace_test_delayed_cb"),
        (MODULE_CB, "rcutrace_test_cb"),
    ] {
        let r = callback_row(s, function, "call_rcu");
        let module_min = readout_number(readout, &format!("wait_min_ns {callback}"));
        let module_max = readout_number(readout, &format!("wait_max_ns {callback}"));
        assert!(r.min_ns.unwrap() <= module_min, "{r:#?} vs {module_min}");
        assert!(r.max_ns.unwrap() <= module_max, "{r:#?} vs {module_max}");
    }
    // rcu_barrier()'s own callbacks are entrained, not queued by call_rcu.
    let barrier = s
        .rows
        .iter()
        .find(|r| r.via == "barrier")
        .unwrap_or_else(|| panic!("no barrier row: {:#?}", s.rows));
    assert!(barrier.invoked > 0, "{barrier:#?}");
    assert!(
        s.kvfree_queued.is_some_and(|n| n >= KFREES),
        "{:?}",
        s.kvfree_queued
    );
    for r in &s.rows {
        assert_accounted(r);
    }
    assert_eq!(s.not_timed.pending_map_full, 0);
    // The pending callbacks checked against the kernel's lists, and agreeing (hits the
    // kernel counted as skipped allowed for: an SRCU or tasks-RCU invocation in a kworker,
    // interrupted by a softirq that invokes callbacks, skips the same program there).
    let check = pending_check(&records);
    assert!(check.agrees, "{check:#?}\n{:#?}", s.not_timed);
    // Each entry point's calls against the callbacks seen queued through it: all four
    // checked, all agreeing, nothing warned.
    for via in ["call_rcu", "call_srcu", "call_rcu_tasks"] {
        let check = s
            .cross_checks
            .iter()
            .find(|c| c.counted == format!("callbacks queued via {via}"))
            .unwrap_or_else(|| panic!("no check of {via}: {:#?}", s.cross_checks));
        assert!(check.agrees && check.value > 0, "{check:#?}");
    }
    assert!(
        s.cross_checks.iter().all(|c| c.agrees),
        "{:#?}",
        s.cross_checks
    );
    assert!(!exact.err.contains("differ by"), "{}", exact.err);

    // By kprobe and kretprobe instead of trampolines: the same exact counts.
    let kprobe = run_named(&sections, "kprobe");
    kprobe.assert_ok("kprobe");
    assert_exact_or_flagged(&kprobe, MODULE_CB, CALLBACKS);

    // A reader held on CPU 1 across the close keeps every callback queued after it waiting:
    // all N pending, and the kernel's lists (read from its memory) hold at least as many.
    let held = run_named(&sections, "held");
    held.assert_ok("held");
    let records = decode(&held);
    let r = callback_row(callbacks_summary(&records), MODULE_CB, "call_rcu");
    assert_eq!(
        (r.queued, r.invoked, r.pending_at_exit),
        (CALLBACKS, 0, CALLBACKS),
        "{r:#?}"
    );
    let check = pending_check(&records);
    assert!(
        check.agrees && check.value >= CALLBACKS && check.expected >= check.value,
        "{check:#?}"
    );

    // The text: bpftrace's keyed histograms, then the table, the module's row in it.
    let text = run_named(&sections, "text");
    text.assert_ok("text");
    assert!(
        text.out.contains(&format!("\n@cblat[{MODULE_CB}]: \n")),
        "{}",
        text.out
    );
    let table_row = text
        .out
        .lines()
        .find(|l| l.trim_start().starts_with(MODULE_CB))
        .unwrap_or_else(|| panic!("no table row for {MODULE_CB}:\n{}", text.out));
    let cells: Vec<&str> = table_row[table_row.find(']').unwrap() + 1..]
        .split_whitespace()
        .collect();
    let n = CALLBACKS.to_string();
    assert_eq!(cells[..5], ["call_rcu", &n, &n, "0", "0"], "{table_row}");
    assert!(text.out.contains("\n@cpu_queued["), "{}", text.out);
    assert!(text.out.contains("\n@cpu_invoked["), "{}", text.out);

    // A flood from kworkers on every CPU: each callback a sample, pending, or counted lost.
    let flood = run_named(&sections, "flood");
    flood.assert_ok("flood");
    let records = decode(&flood);
    let s = callbacks_summary(&records);
    // A kworker interrupted between call_rcu() and the queueing by another call_rcu() on
    // its CPU leaves its callback `other` (once in 100 000 under a loaded host, on 7.3).
    let rows: Vec<&CallbackRow> = s.rows.iter().filter(|r| r.function == FLOOD_CB).collect();
    assert!(
        rows.iter().all(|r| r.via == "call_rcu" || r.via == "other"),
        "{rows:#?}"
    );
    let via_call_rcu = callback_row(s, FLOOD_CB, "call_rcu").queued;
    assert!(via_call_rcu >= FLOOD - FLOOD / 100, "{rows:#?}");
    let sum = |column: fn(&CallbackRow) -> u64| rows.iter().map(|r| column(r)).sum::<u64>();
    assert_eq!(sum(|r| r.queued), FLOOD, "{rows:#?}");
    rows.iter().for_each(|r| assert_accounted(r));
    // The barrier waited for them all, and the pending map holds 262144: nothing is lost.
    assert_eq!(
        (sum(|r| r.invoked), sum(|r| r.not_recorded)),
        (FLOOD, 0),
        "{rows:#?}"
    );
    assert_eq!(s.not_timed.row_map_full_queued, 0);
    let queued_by_cpu = per_cpu(&records, "@cpu_queued");
    let flood_readout = &sections["flood_readout"];
    for (cpu, queued) in &queued_by_cpu {
        let module = readout_number(flood_readout, &format!("flood_queued cpu{cpu}"));
        assert!(*queued >= module, "cpu {cpu}: {queued} < {module}");
    }
    assert_eq!(queued_by_cpu.values().sum::<u64>(), s.queued);
}

#[test]
fn exact_callbacks_on_6_1() {
    exact_callbacks("6.1");
}

#[test]
fn exact_callbacks_on_6_12() {
    exact_callbacks("6.12");
}

#[test]
fn exact_callbacks_on_7_3() {
    exact_callbacks("7.3");
}
