//! The window is exactly the window, and nothing rcutrace does itself is in its numbers: its
//! own attaching, reading and detaching call RCU updaters (trampoline updates wait for grace
//! periods), and those must not be counted or timed. Ground truth in an idle guest:
//! membarrier(MEMBARRIER_CMD_GLOBAL) calls synchronize_rcu() exactly once per call.

mod support;

use support::{boot, run_named, sections};

const CALLS: u64 = 30;

fn own_doing_is_not_counted(series: &str) {
    let script = format!(
        "traced srlat 'srlat --secs 0' '/bin/rcu-workload membarrier {CALLS}'\n\
         traced count 'count --secs 0 --all --by comm --top 0' 'sleep 2'\n"
    );
    let guest = boot(series, &script);
    let sections = sections(&guest.stdout);

    // Without --pid, every synchronize_rcu() in the guest is timed: the workload's 30, and
    // none of rcutrace's own (attaching fentry/fexit waits for grace periods).
    let srlat = run_named(&sections, "srlat");
    srlat.assert_ok("srlat");
    let samples = srlat.number_after("@srlat count", "count").unwrap() as u64;
    assert_eq!(samples, CALLS, "{series}: {}", srlat.out);

    // Every update-side call keyed by who made it: rcutrace is never among them.
    let count = run_named(&sections, "count");
    count.assert_ok("count");
    let own: Vec<&str> = count
        .out
        .lines()
        .filter(|l| l.starts_with("@[rcutrace, ") && !l.contains("__rcu_read_lock"))
        .collect();
    assert!(own.is_empty(), "{series}: rcutrace counted itself: {own:?}");
}

#[test]
fn own_doing_is_not_counted_on_6_1() {
    own_doing_is_not_counted("6.1");
}

#[test]
fn own_doing_is_not_counted_on_6_12() {
    own_doing_is_not_counted("6.12");
}
