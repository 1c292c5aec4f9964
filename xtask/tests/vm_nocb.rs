//! Offloaded callbacks: in a guest booted with `rcu_nocbs=all`, every CPU's callbacks are
//! invoked by kthreads, and many are queued on a bypass list (lazy ones always, on 6.12 and
//! 7.3; any once more than a few dozen come in a jiffy) rather than through
//! `rcu_segcblist_enqueue()`. `rcutrace callbacks` must still see N test-module callbacks
//! exactly N queued, N invoked and N timed, on 6.1, 6.12 and 7.3, and its cross-checks (each
//! entry point's calls against the callbacks seen queued through it) must agree.

mod support;

use std::time::Duration;

use support::{
    Run, assert_callbacks_exact, boot_with_module_and_kernel_args, callbacks_summary,
    readout_number, run_named, sections,
};

const CALLBACKS: u64 = 300;
/// From a kworker on each CPU in a tight loop: far more than the 64 a jiffy (HZ=250) that
/// go to a CPU's list directly before the bypass list takes over, on every kernel.
const FLOOD: u64 = 10_000;

const MODULE_CB: &str = "rcutrace_test_cb [rcutrace_test]";
const HURRY_CB: &str = "rcutrace_test_hurry_cb [rcutrace_test]";
const FLOOD_CB: &str = "rcutrace_test_flood_cb [rcutrace_test]";

fn offloaded_callbacks(series: &str) {
    let hurry = series != "6.1";
    let mut work = vec![format!("module call_rcu {CALLBACKS}")];
    if hurry {
        work.push(format!("module call_rcu_hurry {CALLBACKS}"));
    }
    work.push(format!("module flood {FLOOD}"));
    // The barrier flushes the bypass lists and waits until every callback above was invoked,
    // inside the window (lazy ones would otherwise wait up to 10 s).
    work.push("module rcu_barrier 1".into());
    let work_script: String = work
        .iter()
        .map(|w| format!("/bin/rcu-workload {w} || exit 1\n"))
        .collect();
    let script = format!(
        "insmod /lib/rcutrace_test.ko || exit 1\n\
         echo '=== offload'; cat /sys/devices/system/cpu/online; dmesg | grep -i offload\n\
         cat > /tmp/nocb.sh <<'EOF'\n{work_script}EOF\n\
         traced nocb 'callbacks --secs 0 --top 0 -f json' 'sh /tmp/nocb.sh'\n\
         echo '=== readout'; cat /proc/rcutrace_test\n"
    );
    let guest = boot_with_module_and_kernel_args(
        series,
        &script,
        &["rcu_nocbs=all"],
        Duration::from_secs(400),
    );
    let sections = sections(&guest.stdout);
    // The kernel says which CPUs it offloads: all of them.
    let offload = &sections["offload"];
    let online = offload.lines().next().unwrap_or_default().trim();
    assert!(
        offload.contains(&format!("Offload RCU callbacks from CPUs: {online}")),
        "{offload}"
    );

    let run: Run = run_named(&sections, "nocb");
    run.assert_ok("nocb");
    let records = run.records();
    let s = callbacks_summary(&records);
    eprintln!("{series}: cross-checks {:#?}", s.cross_checks);
    assert_callbacks_exact(&records, MODULE_CB, "call_rcu", CALLBACKS);
    if hurry {
        assert_callbacks_exact(&records, HURRY_CB, "call_rcu_hurry", CALLBACKS);
    }
    assert_callbacks_exact(&records, FLOOD_CB, "call_rcu", FLOOD);
    let readout = &sections["readout"];
    assert_eq!(
        readout_number(readout, "invoked rcutrace_test_cb"),
        CALLBACKS
    );
    assert_eq!(
        readout_number(readout, "invoked rcutrace_test_flood_cb"),
        FLOOD
    );

    // Every traced entry point's calls agree with the callbacks seen queued through it, and
    // nothing warns.
    let checked: Vec<&str> = s.cross_checks.iter().map(|c| c.counted.as_str()).collect();
    assert!(
        checked.contains(&"callbacks queued via call_rcu"),
        "{checked:?}"
    );
    for check in &s.cross_checks {
        assert!(check.agrees, "{check:#?}");
    }
    let call_rcu = s
        .cross_checks
        .iter()
        .find(|c| c.counted == "callbacks queued via call_rcu")
        .unwrap();
    assert!(call_rcu.expected >= CALLBACKS + FLOOD, "{call_rcu:#?}");
    assert!(!run.err.contains("differ by"), "{}", run.err);
}

#[test]
fn offloaded_callbacks_on_6_1() {
    offloaded_callbacks("6.1");
}

#[test]
fn offloaded_callbacks_on_6_12() {
    offloaded_callbacks("6.12");
}

#[test]
fn offloaded_callbacks_on_7_3() {
    offloaded_callbacks("7.3");
}
