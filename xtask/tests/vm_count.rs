//! `rcutrace count` on real Debian kernels, against workloads of known size.

mod support;

use rcutrace_common::records::{MapValue, Record};
use support::{boot, run_named, sections};

const READERS: u64 = 200_000;
const SYNCS: u64 = 40;

fn counts_ground_truth(series: &str) {
    let script = format!(
        "traced readers 'count --secs 0' '/bin/rcu-workload getppid {READERS}'\n\
         export RUST_LOG=warn,rcutrace::commands::publish=info\n\
         traced syncs 'count --secs 0 --attach kprobe' '/bin/rcu-workload membarrier {SYNCS}'\n\
         traced fentry 'count --secs 0 --attach fentry' '/bin/rcu-workload membarrier {SYNCS}'\n\
         unset RUST_LOG\n\
         traced timed 'count --secs 2' 'sleep 4'\n\
         traced json 'count --secs 0 -f json' '/bin/rcu-workload getppid {READERS}'\n\
         export RUST_LOG=info\n\
         traced absent 'count --secs 0' 'sleep 1'\n\
         traced absent_fentry 'count --secs 0 --attach fentry' 'sleep 1'\n\
         unset RUST_LOG\n"
    );
    let guest = boot(series, &script);
    let sections = sections(&guest.stdout);

    let readers = run_named(&sections, "readers");
    readers.assert_ok("readers");
    assert!(readers.out.starts_with("Attaching "), "{}", readers.out);
    let read_locks = readers.count("__rcu_read_lock").expect("readers counted");
    assert!(
        read_locks >= READERS,
        "{read_locks} < {READERS} getppid calls"
    );

    for name in ["syncs", "fentry"] {
        let run = run_named(&sections, name);
        run.assert_ok(name);
        let syncs = run
            .count("synchronize_rcu")
            .expect("synchronize_rcu counted");
        assert!(syncs >= SYNCS, "{name}: {syncs} < {SYNCS} membarrier calls");
        // Each synchronize_rcu() waits for a grace period; they can share one.
        let gps = run.count("rcu_gp_fqs_loop").expect("grace periods counted");
        assert!(
            gps > 0,
            "{name}: no grace period during {SYNCS} synchronize_rcu()"
        );
        assert!(
            run.out.contains("RCU readers per grace period: "),
            "{}",
            run.out
        );
        assert!(
            run.out.contains("call_rcu() per grace period:  "),
            "{}",
            run.out
        );
        assert!(run.err.contains("interrupted"), "{name}: {}", run.err);
        assert_detach_said(name, &run.err);
        if series == "6.1" {
            // No such function before lazy RCU: reported, not fatal.
            assert!(
                run.err
                    .contains("not on this kernel (absent or inlined), not traced: call_rcu_hurry"),
                "{}",
                run.err
            );
            assert!(run.out.contains("Attaching 6 probes..."), "{}", run.out);
        } else {
            assert!(run.count("call_rcu_hurry").is_some(), "{}", run.out);
            assert!(run.out.contains("Attaching 7 probes..."), "{}", run.out);
        }
    }

    // The same figures as bpftrace's JSON lines, with the summary as a record of its own.
    let json = run_named(&sections, "json");
    json.assert_ok("json");
    let records: Vec<Record> = json
        .out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let probes = if series == "6.1" { 6 } else { 7 };
    assert_eq!(
        records[0],
        Record::AttachedProbes { probes },
        "{}",
        json.out
    );
    let readers = records
        .iter()
        .find_map(|r| match r {
            Record::Map(maps) => match maps.get("@") {
                Some(MapValue::Keyed(counts)) => counts.get("__rcu_read_lock").copied(),
                _ => None,
            },
            _ => None,
        })
        .unwrap_or_else(|| panic!("no reader count: {}", json.out));
    assert!(readers >= READERS, "{readers}");
    match records.last() {
        Some(Record::CountSummary(summary)) => {
            assert!(summary.elapsed_s > 0.0, "{}", json.out);
            // rcu_gp_fqs_loop is traced on both kernels, so grace periods are a number.
            assert!(summary.grace_periods.is_some(), "{}", json.out);
        }
        _ => panic!("the count summary is not the last record: {}", json.out),
    }

    // A function the kernel lacks is named from what the attach learned (the kprobe found no
    // such symbol, the BTF pass no such function): /proc/kallsyms is read only where that is
    // not enough, as with fentry alone, which asks the BTF only.
    const KALLSYMS_READ: &str = "reading /proc/kallsyms for";
    let absent = run_named(&sections, "absent");
    absent.assert_ok("absent");
    assert!(!absent.err.contains(KALLSYMS_READ), "{}", absent.err);
    let absent_fentry = run_named(&sections, "absent_fentry");
    absent_fentry.assert_ok("absent_fentry");
    for run in [&absent, &absent_fentry] {
        let named = run
            .err
            .contains("not on this kernel (absent or inlined), not traced: call_rcu_hurry");
        assert_eq!(named, series == "6.1", "{}", run.err);
    }
    assert_eq!(
        absent_fentry
            .err
            .contains(&format!("{KALLSYMS_READ} call_rcu_hurry")),
        series == "6.1",
        "{}",
        absent_fentry.err
    );

    // --secs ends the window by itself: the run exits 0 before the interrupt arrives.
    let timed = run_named(&sections, "timed");
    timed.assert_ok("timed");
    assert!(!timed.err.contains("interrupted"), "{}", timed.err);
    assert!(timed.out.contains("Over 2."), "{}", timed.out);
}

/// rcutrace's line about its own detaching, logged since stderr is a file here: `detached N
/// hooks in T ms (K kprobes T ms, ...); grace periods ended meanwhile: G normal, ...`. The
/// kinds add up to the hooks, and each kprobe's unregistering waited for a normal grace
/// period of its own, one after another.
fn assert_detach_said(name: &str, err: &str) {
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("[INFO  rcutrace::commands::publish] detached "))
        .unwrap_or_else(|| panic!("{name}: no detach line: {err}"));
    let number = |text: &str| -> u64 { text.trim().parse().unwrap_or_else(|_| panic!("{line}")) };
    let (hooks, rest) = line.split_once(" hooks in ").expect(line);
    let (detach_ms, rest) = rest
        .split_once(" ms (")
        .unwrap_or_else(|| panic!("{name}: {line}"));
    let (kinds, rest) = rest
        .split_once("); grace periods ended meanwhile: ")
        .unwrap_or_else(|| panic!("{name}: {line}"));
    let of_kind = |kind: &str| -> u64 {
        kinds
            .split(", ")
            .filter_map(|k| k.split_once(' '))
            .filter(|(_, what)| what.starts_with(kind))
            .map(|(n, _)| number(n))
            .sum()
    };
    let kinds_sum: u64 = ["kprobe", "trampoline", "tracepoint"]
        .into_iter()
        .map(of_kind)
        .sum();
    assert_eq!(kinds_sum, number(hooks), "{name}: {line}");
    let normal = rest
        .split(", ")
        .find_map(|g| g.strip_suffix(" normal"))
        .map(number)
        .unwrap_or_else(|| panic!("{name}: {line}"));
    let kprobes = of_kind("kprobe");
    assert!(kprobes > 0 && normal >= kprobes, "{name}: {line}");
    // No grace period ends in under a microsecond: more would be a count gone wrong (a
    // freshly booted guest's gp_seq crosses the wrap its initial value sits just short of).
    assert!(normal <= number(detach_ms) * 1000, "{name}: {line}");
}

#[test]
fn count_on_6_1() {
    counts_ground_truth("6.1");
}

#[test]
fn count_on_6_12() {
    counts_ground_truth("6.12");
}

#[test]
fn count_on_7_3() {
    counts_ground_truth("7.3");
}

/// Attaching and detaching again and again while the kernel is busy must leave it running:
/// every run exits 0 and the guest shuts down normally.
fn repeated_runs_under_load(series: &str) {
    let script = "/bin/rcu-workload background >/dev/null &\n\
                  for i in 1 2 3; do\n\
                  /bin/rcutrace count --secs 1 >/dev/null; echo \"count $?\"\n\
                  /bin/rcutrace count --secs 1 --attach kprobe >/dev/null; echo \"count-kprobe $?\"\n\
                  /bin/rcutrace srlat --secs 1 --attach kprobe >/dev/null; echo \"srlat-kprobe $?\"\n\
                  /bin/rcutrace gplat --secs 1 >/dev/null; echo \"gplat $?\"\n\
                  done\n";
    let guest = boot(series, script);
    let statuses: Vec<&str> = guest.stdout.lines().collect();
    assert_eq!(statuses.len(), 12, "{}", guest.stdout);
    assert!(
        statuses.iter().all(|l| l.ends_with(" 0")),
        "{}",
        guest.stdout
    );
}

#[test]
fn repeated_runs_under_load_on_6_1() {
    repeated_runs_under_load("6.1");
}

#[test]
fn repeated_runs_under_load_on_6_12() {
    repeated_runs_under_load("6.12");
}

#[test]
fn repeated_runs_under_load_on_7_3() {
    repeated_runs_under_load("7.3");
}
