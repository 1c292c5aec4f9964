//! `count --sample-readers`: the reader kprobe is really detached between its windows (the
//! kernel's own list of registered kprobes says so while rcutrace runs), the reader count is
//! only ever printed as an estimate with how it was made, and the updater counts stay exact
//! although every detach waits for grace periods. Ground truth in an idle guest:
//! membarrier(MEMBARRIER_CMD_GLOBAL) calls synchronize_rcu() exactly once per call.

mod support;

use rcutrace_common::records::{CountSummary, MapValue, ReadersEstimated, Record};
use support::{boot, run_named, sections, workload_value};

const CALLS: u64 = 30;
/// How often the guest looks at the registered kprobes while rcutrace samples.
const POLLS: u64 = 60;

/// Makes the membarrier calls while polling /sys/kernel/debug/kprobes/list, then says how
/// often the reader kprobe was armed, disabled (a detach waiting for grace periods) or gone.
const POLL_SCRIPT: &str = r#"cat > /tmp/poll.sh <<'END'
/bin/rcu-workload membarrier CALLS &
armed=0; disabled=0; absent=0; i=0
while [ $i -lt POLLS ]; do
    probe=$(grep ' __rcu_read_lock+0x' /sys/kernel/debug/kprobes/list)
    case "$probe" in
        "") absent=$((absent + 1)) ;;
        *DISABLED*) disabled=$((disabled + 1)) ;;
        *) armed=$((armed + 1)) ;;
    esac
    sleep 0.05; i=$((i + 1))
done
wait
echo "armed: $armed"
echo "disabled: $disabled"
echo "absent: $absent"
END
"#;

fn summaries(records: &[Record]) -> Vec<&CountSummary> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::CountSummary(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// The `@` map's counts of the first report, by key.
fn counts(records: &[Record]) -> Vec<(String, u64)> {
    records
        .iter()
        .find_map(|r| match r {
            Record::Map(maps) => match maps.get("@") {
                Some(MapValue::Keyed(counts)) => Some(counts.0.clone()),
                _ => None,
            },
            _ => None,
        })
        .unwrap_or_default()
}

fn estimated(summary: &CountSummary) -> &ReadersEstimated {
    summary
        .readers_estimated
        .as_ref()
        .unwrap_or_else(|| panic!("no estimate in {summary:?}"))
}

fn sampled_readers(series: &str) {
    let script = format!(
        "{}traced sampled '-f json count --secs 0 --sample-readers 100/500' 'sh /tmp/poll.sh'\n\
         traced text 'count --secs 2 --sample-readers 100/300' 'sleep 1'\n\
         traced intervals '-f json count --secs 3 --interval 1 --sample-readers 100/400' 'sleep 4'\n",
        POLL_SCRIPT
            .replace("CALLS", &CALLS.to_string())
            .replace("POLLS", &POLLS.to_string())
    );
    let guest = boot(series, &script);
    let sections = sections(&guest.stdout);

    let sampled = run_named(&sections, "sampled");
    sampled.assert_ok("sampled");
    let records = sampled.records();
    let counts = counts(&records);
    // The updaters stay exact: rcutrace's own detaching (which waits for grace periods) is
    // not the system's.
    let synchronize = counts.iter().find(|(k, _)| k == "synchronize_rcu");
    assert_eq!(
        synchronize.map(|(_, n)| *n),
        Some(CALLS),
        "{series}: {}",
        sampled.out
    );
    // The readers are an estimate, and say so.
    assert!(
        counts
            .iter()
            .any(|(k, _)| k == "__rcu_read_lock (estimated)")
            && !counts.iter().any(|(k, _)| k == "__rcu_read_lock"),
        "{series}: {counts:?}"
    );
    let [summary] = summaries(&records)[..] else {
        panic!("{series}: one summary expected: {}", sampled.out)
    };
    let estimate = estimated(summary);
    let elapsed_ns = summary.elapsed_ns.unwrap() as f64;
    let share = estimate.sampled_ns as f64 / elapsed_ns;
    // 100 ms of every 500 ms: a fifth of the time, give or take the timer's slack and the
    // last window cut short by the end.
    assert!(
        (0.12..0.3).contains(&share),
        "{series}: sampled {share}: {summary:?}"
    );
    let periods = elapsed_ns / 500e6;
    let windows = f64::from(estimate.windows);
    assert!(
        (periods - 1.0..=periods + 1.0).contains(&windows),
        "{series}: {windows} windows in {periods} periods"
    );
    assert!(
        estimate.margin_95.is_some() && estimate.counted > 0,
        "{estimate:?}"
    );
    let scaled = estimate.counted as f64 / share;
    let readers = summary.readers.unwrap() as f64;
    assert!((readers - scaled).abs() <= 1.0, "{readers} vs {scaled}");

    // The guest saw the probe come and go: really unregistered between windows, not only
    // disabled. (Armed for longer than the windows: attaching, and the start of each detach.)
    let state = |name| workload_value(&sampled.work, name);
    let (armed, disabled, absent) = (state("armed"), state("disabled"), state("absent"));
    assert_eq!(armed + disabled + absent, POLLS);
    assert!(
        armed > 0 && absent > 0 && armed < POLLS * 3 / 4,
        "{series}: armed {armed}, disabled {disabled}, absent {absent}"
    );

    // The text says it is an estimate wherever the reader count appears.
    let text = run_named(&sections, "text");
    text.assert_ok("text");
    for expected in [
        "@[__rcu_read_lock (estimated)]: ",
        "  RCU readers, estimated:       ~",
        "(estimated)\n",
    ] {
        assert!(text.out.contains(expected), "{series}: {}", text.out);
    }
    assert!(!text.out.contains("@[__rcu_read_lock]"), "{}", text.out);

    // Each interval estimates from its own windows.
    let intervals = run_named(&sections, "intervals");
    intervals.assert_ok("intervals");
    let records = intervals.records();
    let summaries = summaries(&records);
    assert!(summaries.len() >= 3, "{series}: {}", intervals.out);
    for s in &summaries[..3] {
        let windows = estimated(s).windows;
        assert!((2..=4).contains(&windows), "{series}: {s:?}");
    }
}

#[test]
fn sampled_readers_on_6_1() {
    sampled_readers("6.1");
}

#[test]
fn sampled_readers_on_6_12() {
    sampled_readers("6.12");
}

#[test]
fn sampled_readers_on_7_3() {
    sampled_readers("7.3");
}
