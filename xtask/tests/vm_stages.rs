//! `rcutrace srlat --stages` on Debian's 6.1, 6.12 and 7.3, on both default paths. Ground
//! truth: each membarrier(MEMBARRIER_CMD_GLOBAL) call runs synchronize_rcu() exactly once (2+
//! CPUs), which waits for a normal grace period through a wakeme_after_rcu() callback
//! (rcu_normal_wake_from_gp=0 on 6.1 and 6.12) or is woken by the grace-period kthread itself
//! (=1, 7.3's default), or with /sys/kernel/rcu_expedited set runs
//! synchronize_rcu_expedited() inside. Every one of the N calls is taken apart, on the path
//! it took, into stages that add up exactly to its latency, and the calls listed are the
//! histogram's samples (same count, same exact minimum and maximum).

mod support;

use rcutrace_common::records::{CallStages, LatencySummary, Record, StagesSummary};
use support::{Run, boot, boot_with_module, readout_number, run_named, sections};

const CALLS: u64 = 30;
/// The test module holds a reader on this CPU with preemption off, this long.
const HOLD_CPU: u64 = 1;
const HOLD_MS: u64 = 400;

struct Staged<'a> {
    latency: &'a LatencySummary,
    summary: &'a StagesSummary,
    calls: Vec<&'a CallStages>,
}

fn staged<'a>(name: &str, records: &'a [Record], map: &str) -> Staged<'a> {
    let latency = records
        .iter()
        .find_map(|r| match r {
            Record::LatencySummary(s) if s.map == map => Some(s),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{name}: no latency summary of {map}: {records:#?}"));
    let summary = records
        .iter()
        .find_map(|r| match r {
            Record::StagesSummary(s) if s.map == map => Some(s),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{name}: no stages summary of {map}: {records:#?}"));
    let calls = records
        .iter()
        .filter_map(|r| match r {
            Record::CallStages(c) if c.map == map => Some(c),
            _ => None,
        })
        .collect();
    Staged {
        latency,
        summary,
        calls,
    }
}

/// Every call taken apart on `path`, its stages (`keys`, in order) adding up to its latency,
/// and the calls being the histogram's samples.
fn assert_taken_apart(name: &str, run: &Run, map: &str, path: &str, keys: &[&str]) {
    run.assert_ok(name);
    let records = run.records();
    let s = staged(name, &records, map);
    assert_eq!(s.latency.count, CALLS, "{name}: {:#?}", s.latency);
    assert_eq!(
        (
            s.summary.entry_not_seen,
            s.summary.grace_period_not_seen,
            s.summary.calls_not_listed,
            s.summary.out_of_order,
            s.summary.events_lost
        ),
        (0, 0, 0, 0, 0),
        "{name}: {:#?}",
        s.summary
    );
    let [only] = s.summary.paths.as_slice() else {
        panic!("{name}: not one path: {:#?}", s.summary);
    };
    assert_eq!((only.path.as_str(), only.calls), (path, CALLS), "{name}");
    assert_eq!(s.calls.len() as u64, CALLS, "{name}");
    for call in &s.calls {
        assert_eq!(call.path, path, "{name}: {call:#?}");
        let stage_keys: Vec<&str> = call.stages_ns.0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(stage_keys, keys, "{name}: {call:#?}");
        let sum: u64 = call.stages_ns.0.iter().map(|(_, ns)| ns).sum();
        assert_eq!(sum, call.latency_ns, "{name}: {call:#?}");
    }
    // The calls listed are the histogram's: the same exact extremes and total.
    let latencies: Vec<u64> = s.calls.iter().map(|c| c.latency_ns).collect();
    assert_eq!(latencies.iter().min().copied(), s.latency.min_ns, "{name}");
    assert_eq!(latencies.iter().max().copied(), s.latency.max_ns, "{name}");
    let total: u64 = latencies.iter().sum();
    assert_eq!(total, only.latency_sum_ns, "{name}");
    let mean = s.latency.mean_ns.unwrap();
    assert!(
        (mean * CALLS as f64 - total as f64).abs() < 1.0,
        "{name}: mean {mean} of {CALLS} against {total}"
    );
    // Each stage's sum over the calls adds up to the latencies' too.
    let stage_sums: u64 = only.stages.iter().map(|stage| stage.sum_ns).sum();
    assert_eq!(stage_sums, total, "{name}: {only:#?}");
}

fn stages_ground_truth(series: &str) {
    let script = format!(
        "traced normal 'srlat --stages --secs 0 --pid WPID -f json' '/bin/rcu-workload membarrier {CALLS}'\n\
         traced normal_text 'srlat --stages --secs 0 --pid WPID' '/bin/rcu-workload membarrier {CALLS}'\n\
         echo 1 > /sys/kernel/rcu_expedited\n\
         traced expedited 'srlat --stages --secs 0 --pid WPID -f json' '/bin/rcu-workload membarrier {CALLS}'\n\
         traced expedited_inner 'srlat --expedited --stages --secs 0 --pid WPID -f json' '/bin/rcu-workload membarrier {CALLS}'\n\
         traced expedited_text 'srlat --stages --secs 0 --pid WPID' '/bin/rcu-workload membarrier {CALLS}'\n\
         echo 0 > /sys/kernel/rcu_expedited\n"
    );
    let guest = boot(series, &script);
    let sections = sections(&guest.stdout);

    // The default path: a normal grace period, then the wakeme_after_rcu() callback; on 7.3
    // the grace-period kthread wakes the caller itself, with no callback.
    // 6.1 has no such parameter; 6.12 has it, off; 7.3 has it on.
    let wake_from_gp = match series {
        "6.1" => None,
        "6.12" => Some(false),
        _ => Some(true),
    };
    let normal_keys: &[&str] = if wake_from_gp == Some(true) {
        &["gp_start_wait", "grace_period", "after_grace_period"]
    } else {
        &["gp_start_wait", "grace_period", "callback_wait", "wake_up"]
    };
    let normal = run_named(&sections, "normal");
    assert_taken_apart("normal", &normal, "@srlat", "normal", normal_keys);
    let records = normal.records();
    let s = staged("normal", &records, "@srlat");
    assert_eq!(s.summary.wake_from_gp, wake_from_gp);

    let text = run_named(&sections, "normal_text");
    text.assert_ok("normal_text");
    eprintln!("{series}, normal path:\n{}{}", text.out, text.err);
    let path_lines: &[&str] = if wake_from_gp == Some(true) {
        &[
            "  the grace period's end to the caller running (no callback)",
            "  this kernel wakes callers from the grace-period kthread \
             (rcutree.rcu_normal_wake_from_gp=1): no callback waits behind others",
        ]
    } else {
        &[
            "  its wakeme_after_rcu() callback waiting to be invoked",
            "  rcutree.rcu_normal_wake_from_gp=1 (",
        ]
    };
    for line in [
        "@srlat stages: 30 calls taken apart, each into stages that add up to its latency",
        "Normal grace period, 30 calls (ms)",
        "  waiting for a grace period to start",
        "@srlat stages not taken apart: 0 entry not seen, 0 grace period not seen whole; 0 \
         grace-period and stage events of the run lost to a full ring",
    ]
    .iter()
    .chain(path_lines)
    {
        assert!(text.out.contains(line), "no {line:?} in:\n{}", text.out);
    }
    // The histogram comes first, as bpftrace prints it, then rcutrace's lines.
    let hist = text.out.find("@srlat: \n").expect("the histogram");
    assert!(hist < text.out.find("@srlat count 30").expect("the statistics"));

    // synchronize_rcu() with rcu_expedited set runs synchronize_rcu_expedited(): both the
    // outer call and the inner one are taken apart on the expedited path.
    let expedited_keys = ["funnel", "select_cpus", "reports", "wake_up"];
    for (name, map) in [("expedited", "@srlat"), ("expedited_inner", "@srelat")] {
        let run = run_named(&sections, name);
        assert_taken_apart(name, &run, map, "expedited", &expedited_keys);
        let records = run.records();
        let s = staged(name, &records, map);
        let path = &s.summary.paths[0];
        // Whose request ran each grace period is known for every call.
        assert_eq!(path.own + path.piggy_backed, CALLS, "{name}: {path:#?}");
        assert!(path.expedited_grace_periods > 0, "{name}: {path:#?}");
        assert!(s.calls.iter().all(|c| c.piggy_backed.is_some()), "{name}");
    }
    let text = run_named(&sections, "expedited_text");
    text.assert_ok("expedited_text");
    eprintln!("{series}, expedited path:\n{}{}", text.out, text.err);
    for line in [
        "Expedited grace period, 30 calls (ms)",
        "  funnel: waiting for an expedited grace period to start",
        "  selecting CPUs and sending their IPIs",
        " ran their own expedited grace period, ",
    ] {
        assert!(text.out.contains(line), "no {line:?} in:\n{}", text.out);
    }
}

/// An expedited call made while the test module holds a reader on CPU 1 with preemption off:
/// its grace period must send CPU 1 an IPI, and CPU 1 reports only when the hold ends, so the
/// call's wait for reports ends after the hold did.
fn expedited_behind_a_held_cpu(series: &str) {
    // The membarrier() caller is the traced process itself (exec), the hold a child of it;
    // the call comes once the hold has begun.
    let script = format!(
        "insmod /lib/rcutrace_test.ko\n\
         echo 1 > /sys/kernel/rcu_expedited\n\
         printf '/bin/rcu-workload module hold_cpu {HOLD_CPU} {HOLD_MS} &\\n\
                 until grep -q \"hold_start_ns: [1-9]\" /proc/rcutrace_test; do sleep 0.01; done\\n\
                 exec /bin/rcu-workload membarrier 1\\n' > /tmp/held.sh\n\
         traced held 'srlat --stages --secs 0 --pid WPID -f json' 'sh /tmp/held.sh'\n\
         sleep 1\n\
         echo '=== held_readout'; cat /proc/rcutrace_test\n\
         echo 0 > /sys/kernel/rcu_expedited\n"
    );
    let guest = boot_with_module(series, &script);
    let sections = sections(&guest.stdout);
    let run = run_named(&sections, "held");
    run.assert_ok("held");
    let readout = &sections["held_readout"];
    assert_eq!(readout_number(readout, "hold_cpu"), HOLD_CPU, "{readout}");
    let hold_start = readout_number(readout, "hold_start_ns");
    let hold_end = readout_number(readout, "hold_end_ns");
    let records = run.records();
    let s = staged("held", &records, "@srlat");
    let [call] = s.calls.as_slice() else {
        panic!("held: not one call: {:#?}\n{}", s.calls, run.err);
    };
    assert_eq!(call.path, "expedited", "{call:#?}");
    assert_eq!(call.piggy_backed, Some(false), "{call:#?}");
    assert!(
        call.ipis.is_some_and(|n| n >= 1),
        "no IPI for CPU {HOLD_CPU}: {call:#?}"
    );
    let sum: u64 = call.stages_ns.0.iter().map(|(_, ns)| ns).sum();
    assert_eq!(sum, call.latency_ns, "{call:#?}");
    assert!(
        (hold_start..hold_end).contains(&call.started_ns),
        "the call did not come during the hold ({hold_start}..{hold_end}): {call:#?}"
    );
    let reports_end = call.started_ns
        + call
            .stages_ns
            .0
            .iter()
            .take_while(|(key, _)| key != "wake_up")
            .map(|(_, ns)| ns)
            .sum::<u64>();
    assert!(
        reports_end > hold_end,
        "the reports were in before CPU {HOLD_CPU} let go at {hold_end}: {call:#?}"
    );
    eprintln!("{series}, expedited behind a held CPU, held {hold_start}..{hold_end}:\n{call:#?}");
}

#[test]
fn held_cpu_on_6_1() {
    expedited_behind_a_held_cpu("6.1");
}

#[test]
fn held_cpu_on_6_12() {
    expedited_behind_a_held_cpu("6.12");
}

#[test]
fn held_cpu_on_7_3() {
    expedited_behind_a_held_cpu("7.3");
}

#[test]
fn stages_on_6_1() {
    stages_ground_truth("6.1");
}

#[test]
fn stages_on_6_12() {
    stages_ground_truth("6.12");
}

#[test]
fn stages_on_7_3() {
    stages_ground_truth("7.3");
}
