//! `rcutrace srlat` and `gplat` on real Debian kernels. Ground truth: each
//! membarrier(MEMBARRIER_CMD_GLOBAL) call runs synchronize_rcu() exactly once (2+ CPUs), and
//! with /sys/kernel/rcu_expedited set, synchronize_rcu_expedited() inside it exactly once.

mod support;

use rcutrace_common::records::{HistValue, Record};
use support::{Run, boot_with_module, run_named, sections, workload_value};

const CALLS: u64 = 30;
/// More threads inside synchronize_rcu() at once than a kretprobe has instances (about 2 per
/// CPU, at least 10), so that the kernel drops returns.
const THREADS: u64 = 64;
const PER_THREAD: u64 = 2;

/// `(in flight at exit, returns lost, begun before tracing, missed by the kernel, lost to a
/// full map)`.
fn not_measured(run: &Run, map: &str) -> [u64; 5] {
    let line = run
        .out
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{map} not measured: ")))
        .unwrap_or_else(|| panic!("no losses line in {}", run.out));
    let numbers: Vec<u64> = line
        .split(", ")
        .map(|part| part.split(' ').next().unwrap().parse().unwrap())
        .collect();
    numbers.try_into().unwrap()
}

/// Histogram rows must add up to the exact count the summary line reports.
fn assert_exact_samples(run: &Run, map: &str, expected: u64) {
    let count = run
        .number_after(&format!("{map} count"), "count")
        .unwrap_or_else(|| panic!("no count line in {}", run.out));
    assert_eq!(count as u64, expected, "{}", run.out);
    let rows: u64 = run.hist_rows().iter().map(|(_, n)| n).sum();
    assert_eq!(rows, expected, "{}", run.out);
    assert!(
        run.out.contains(&format!(
            "{map} not measured: 0 in flight at exit, 0 returns lost, 0 begun before tracing"
        )),
        "{}",
        run.out
    );
}

/// Grace periods that began after gp_seq read `from` and ended by its reading `to`: the
/// sequence's low two bits are the state (0 idle), the rest counts grace periods ended.
fn grace_periods_between(from: u64, to: u64) -> u64 {
    let ended_by = |seq: u64| seq >> 2;
    let began_by = |seq: u64| (seq + 3) >> 2;
    ended_by(to).saturating_sub(began_by(from))
}

#[test]
fn grace_periods_between_count_only_whole_ones() {
    // Idle at 8 (two ended), idle at 16: the third and fourth began and ended between.
    assert_eq!(grace_periods_between(8, 16), 2);
    // The third under way at 9: only the fourth is whole between.
    assert_eq!(grace_periods_between(9, 16), 1);
    // The fifth under way at 17 had not ended.
    assert_eq!(grace_periods_between(9, 17), 1);
    assert_eq!(grace_periods_between(16, 16), 0);
}

fn latency_ground_truth(series: &str) {
    let script = format!(
        "insmod /lib/rcutrace_test.ko || exit 1\n\
         traced srlat 'srlat --secs 0 --pid WPID' '/bin/rcu-workload membarrier {CALLS}'\n\
         traced srlat_kprobe 'srlat --secs 0 --pid WPID --attach kprobe' '/bin/rcu-workload membarrier {CALLS}'\n\
         traced overflow 'srlat --secs 0 --pid WPID --unit ns --linear 0,1,1' '/bin/rcu-workload membarrier 20'\n\
         traced buckets 'srlat --secs 0 --pid WPID --unit us --buckets 2000' '/bin/rcu-workload membarrier 20'\n\
         traced idle 'srlat --secs 0 --pid WPID' 'sleep 1'\n\
         traced json 'srlat --secs 0 --pid WPID -f json' '/bin/rcu-workload membarrier {CALLS}'\n\
         echo 1 > /sys/kernel/rcu_expedited\n\
         traced srelat 'srlat --expedited --secs 0 --pid WPID' '/bin/rcu-workload membarrier {CALLS}'\n\
         traced srelat_kprobe 'srlat --expedited --secs 0 --pid WPID --attach kprobe' '/bin/rcu-workload membarrier {CALLS}'\n\
         echo 0 > /sys/kernel/rcu_expedited\n\
         traced many_kretprobe 'srlat --secs 0 --pid WPID --attach kprobe' '/bin/rcu-workload membarrier-threads {THREADS} {PER_THREAD}'\n\
         traced many_fexit 'srlat --secs 0 --pid WPID' '/bin/rcu-workload membarrier-threads {THREADS} {PER_THREAD}'\n\
         echo '=== gp_seq_launch'; grep gp_seq: /proc/rcutrace_test\n\
         traced gplat 'gplat --secs 0' 'sh -c \"grep gp_seq: /proc/rcutrace_test; /bin/rcu-workload membarrier {CALLS}; grep gp_seq: /proc/rcutrace_test\"'\n\
         echo '=== gp_seq_exit'; grep gp_seq: /proc/rcutrace_test\n"
    );
    let guest = boot_with_module(series, &script);
    let sections = sections(&guest.stdout);

    for (name, map) in [
        ("srlat", "@srlat"),
        ("srlat_kprobe", "@srlat"),
        ("srelat", "@srelat"),
        ("srelat_kprobe", "@srelat"),
    ] {
        let run = run_named(&sections, name);
        run.assert_ok(name);
        assert_exact_samples(&run, map, CALLS);
        assert!(run.out.contains(&format!("{map} p50 ")), "{}", run.out);
        // The workload exits before the window ends: said once.
        assert_eq!(
            run.err.matches(" exited ").count(),
            1,
            "{name}: {}",
            run.err
        );
    }

    // A process that makes no call: bpftrace's never-written map is one empty line.
    let idle = run_named(&sections, "idle");
    idle.assert_ok("idle");
    assert_eq!(
        idle.out,
        "Attaching 2 probes...\n\n\n\n\
         @srlat count 0\n\
         @srlat not measured: 0 in flight at exit, 0 returns lost, 0 begun before tracing, 0 missed by the kernel, 0 lost to a full map\n"
    );
    let expedited = run_named(&sections, "srelat");
    assert!(
        expedited.out.contains(" us, mean "),
        "default unit us: {}",
        expedited.out
    );

    // The same run as JSON lines, decoded into the records the renderer writes.
    let json = run_named(&sections, "json");
    json.assert_ok("json");
    let records: Vec<Record> = json
        .out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let [
        Record::AttachedProbes { probes: 2 },
        Record::Environment(environment),
        Record::Hist(hists),
        Record::LatencySummary(summary),
        Record::NotMeasured(losses),
    ] = records.as_slice()
    else {
        panic!(
            "not attached_probes, environment, hist, summary, not measured: {}",
            json.out
        );
    };
    assert!(
        environment.kernel_release.starts_with(series),
        "{}",
        json.out
    );
    assert!(
        environment.attach.get("synchronize_rcu").is_some(),
        "{}",
        json.out
    );
    let Some(HistValue::Buckets(buckets)) = hists.get("@srlat") else {
        panic!("no @srlat buckets: {}", json.out);
    };
    assert_eq!(buckets.iter().map(|b| b.count).sum::<u64>(), CALLS);
    assert!(
        buckets.windows(2).all(|w| w[0].max < w[1].min),
        "{}",
        json.out
    );
    assert_eq!((summary.map.as_str(), summary.count), ("@srlat", CALLS));
    assert_eq!(
        (
            losses.map.as_str(),
            losses.in_flight_at_exit,
            losses.returns_lost,
            losses.begun_before_tracing
        ),
        ("@srlat", 0, 0, 0),
        "{}",
        json.out
    );
    let (min, max) = (summary.min_ns.unwrap(), summary.max_ns.unwrap());
    assert!(min <= max && summary.percentiles_ns.get("p50").is_some());
    // The entries counted against what became of them: all 30 sampled.
    let [check] = losses.cross_checks.as_slice() else {
        panic!("one cross-check expected: {}", json.out);
    };
    assert_eq!(
        (check.expected, check.value, check.bound, check.agrees),
        (CALLS, CALLS, 0, true),
        "{check:#?}"
    );

    // Every sample is >= 1 ns, so `--linear 0,1,1` folds them all into the overflow bucket,
    // yet the exact maximum survives, bounded by what user space timed around each call.
    let overflow = run_named(&sections, "overflow");
    overflow.assert_ok("overflow");
    assert_eq!(
        overflow.hist_rows(),
        vec![("[1, ...)".to_string(), 20)],
        "{}",
        overflow.out
    );
    let max = overflow.number_after("@srlat count", "max").expect("max") as u64;
    let slowest = workload_value(&overflow.work, "slowest_ns");
    assert!(
        max <= slowest && max >= slowest / 2,
        "max {max} ns, user space saw {slowest} ns"
    );

    // Sparse buckets: every sample in a printed bucket, ascending, no overflow line.
    let buckets = run_named(&sections, "buckets");
    buckets.assert_ok("buckets");
    let lines: Vec<(u64, u64)> = buckets
        .out
        .lines()
        .skip_while(|l| !l.starts_with("@srlat: "))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            // `[LOW, HIGH) UNIT: COUNT`
            let (bucket, count) = l.split_once(") us: ").expect("[LOW, HIGH) us: COUNT");
            let (low, high) = bucket
                .strip_prefix('[')
                .and_then(|b| b.split_once(", "))
                .expect("[LOW, HIGH)");
            let (low, high): (u64, u64) = (low.parse().unwrap(), high.parse().unwrap());
            assert_eq!(high - low, 2000, "{l}");
            (low, count.parse().unwrap())
        })
        .collect();
    assert_eq!(
        lines.iter().map(|(_, n)| n).sum::<u64>(),
        20,
        "{}",
        buckets.out
    );
    assert!(lines.windows(2).all(|w| w[0].0 < w[1].0), "{}", buckets.out);
    assert!(lines.iter().all(|(b, _)| b % 2000 == 0), "{}", buckets.out);

    // Returns the kernel drops are counted as such, not lost and not "in flight": kretprobes
    // run out of instances (10 on two CPUs) when the 64 threads released into
    // synchronize_rcu() at once overlap (seen: 20 samples and 108 returns lost; how many
    // overlap is up to the emulator), and every thread has returned (and exited) before the
    // window ends. Under --pid every call of the process is accounted for, exactly. fexit has no
    // such limit, but the kernel skips its program on a CPU where another thread was preempted
    // inside it (seen on 7.3: 29 and 33 of 128): every call is a sample or missed, none is left
    // in flight, whether the thread entered again or exited after the skipped return.
    let calls = THREADS * PER_THREAD;
    let kretprobe = run_named(&sections, "many_kretprobe");
    kretprobe.assert_ok("many_kretprobe");
    let samples = kretprobe.number_after("@srlat count", "count").unwrap() as u64;
    let [in_flight, returns_lost, began_before, missed, full] = not_measured(&kretprobe, "@srlat");
    assert_eq!(
        (in_flight, began_before, full),
        (0, 0, 0),
        "every call had returned: {}",
        kretprobe.out
    );
    assert_eq!(
        samples + returns_lost + missed,
        calls,
        "{series}: every call accounted for: {}",
        kretprobe.out
    );
    // The scenario this run is for: 64 threads released at once outnumber the kretprobe's
    // instances, and the returns it dropped are reported as such.
    assert!(
        returns_lost > 0,
        "{series}: no return lost: {}",
        kretprobe.out
    );
    // So the entries agree with what became of them: no warning.
    assert!(!kretprobe.out.contains("WARNING"), "{}", kretprobe.out);
    let fexit = run_named(&sections, "many_fexit");
    fexit.assert_ok("many_fexit");
    let samples = fexit.number_after("@srlat count", "count").unwrap() as u64;
    let [in_flight, returns_lost, _, missed, _] = not_measured(&fexit, "@srlat");
    assert_eq!((in_flight, returns_lost), (0, 0), "{series}: {}", fexit.out);
    assert_eq!(samples + missed, calls, "{series}: {}", fexit.out);
    assert!(!fexit.out.contains("WARNING"), "{}", fexit.out);

    // gplat times every grace period the kernel ran while it traced, checked against the
    // kernel's own sequence (rcu_state.gp_seq, read by the test module): no fewer than those
    // that both began and ended between the two read-outs inside its window (CALLS
    // membarrier() calls drive them), and no more than those that began after the read-out
    // before its launch and ended before the one after its exit.
    let gplat = run_named(&sections, "gplat");
    gplat.assert_ok("gplat");
    let samples = gplat
        .number_after("@gplat count", "count")
        .unwrap_or_else(|| panic!("no @gplat count in {}", gplat.out)) as u64;
    let gp_seq = |text: &str| -> Vec<u64> {
        text.lines()
            .filter_map(|l| l.strip_prefix("gp_seq: "))
            .map(|n| n.trim().parse().unwrap())
            .collect()
    };
    let [inside_start, inside_end] = gp_seq(&gplat.work)[..] else {
        panic!("two gp_seq read-outs expected: {}", gplat.work)
    };
    let [launch] = gp_seq(&sections["gp_seq_launch"])[..] else {
        panic!("{:?}", sections["gp_seq_launch"])
    };
    let [exit] = gp_seq(&sections["gp_seq_exit"])[..] else {
        panic!("{:?}", sections["gp_seq_exit"])
    };
    let whole = |from, to| grace_periods_between(from, to);
    let (at_least, at_most) = (whole(inside_start, inside_end), whole(launch, exit));
    assert!(
        at_least >= CALLS,
        "{series}: {at_least} grace periods for {CALLS} calls"
    );
    assert!(
        (at_least..=at_most).contains(&samples),
        "{series}: gplat timed {samples} grace periods; the kernel ran {at_least} inside its \
         window and {at_most} from before its launch to after its exit: {}",
        gplat.out
    );
    // Every rcu_gp_init() entry ended at an rcu_gp_cleanup() return, was in flight at the
    // end, or found nothing to do (within the bound): no warning.
    assert!(!gplat.out.contains("WARNING"), "{}", gplat.out);
}

#[test]
fn latency_on_6_1() {
    latency_ground_truth("6.1");
}

#[test]
fn latency_on_6_12() {
    latency_ground_truth("6.12");
}

#[test]
fn latency_on_7_3() {
    latency_ground_truth("7.3");
}
