//! `--by cgroup`: two cgroups made in the guest, and a process in each making a known number
//! of `membarrier(MEMBARRIER_CMD_GLOBAL)` calls (one `synchronize_rcu()` each) or, through
//! the test module, of `call_rcu()` calls: each cgroup's path gets exactly its own process's
//! calls, in `count`, `srlat`, `callbacks`' queueing side and `serve`'s labels (under its
//! `--top` bound); the grace-period kthread `gplat` times runs in the root cgroup.

mod support;

use std::time::Duration;

use rcutrace_common::records::Record;
use support::{Run, boot_with_module_within, run_named, sections};

/// Calls from the process in each cgroup: different, so that a swap would show.
const ALPHA: u64 = 17;
const BETA: u64 = 29;
const ALPHA_CALLBACKS: u64 = 40;
const BETA_CALLBACKS: u64 = 25;

const SCRIPT: &str = r#"
wait_for() { i=0; while ! eval "$1" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done; }
insmod /lib/rcutrace_test.ko || exit 1
mount -t cgroup2 none /sys/fs/cgroup || exit 1
mkdir -p /sys/fs/cgroup/alpha /sys/fs/cgroup/pods/beta || exit 1
# in-cgroup CGROUP ARGS...: rcu-workload ARGS in a process moved into CGROUP first.
cat > /tmp/in-cgroup <<'EOF'
cg=$1; shift
echo $$ > /sys/fs/cgroup$cg/cgroup.procs || exit 1
echo "pid in $cg: $$"
exec /bin/rcu-workload "$@"
EOF
cat > /tmp/both.sh <<'EOF'
sh /tmp/in-cgroup /alpha membarrier ALPHA & a=$!
sh /tmp/in-cgroup /pods/beta membarrier BETA & b=$!
wait $a || exit 1
wait $b || exit 1
EOF
cat > /tmp/callbacks.sh <<'EOF'
sh /tmp/in-cgroup /alpha module call_rcu ALPHA_CALLBACKS & a=$!
sh /tmp/in-cgroup /pods/beta module call_rcu BETA_CALLBACKS & b=$!
wait $a || exit 1
wait $b || exit 1
/bin/rcu-workload module rcu_barrier 1
EOF
traced count 'count --secs 0 --by cgroup --top 0' 'sh /tmp/both.sh'
traced pid 'count --secs 0 --by cgroup,pid --top 0' 'sh /tmp/both.sh'
traced srlat '-f json srlat --secs 0 --by cgroup,comm --top 0' 'sh /tmp/both.sh'
traced gplat '-f json gplat --secs 0 --by cgroup --top 0' 'sh /tmp/both.sh'
traced callbacks 'callbacks --secs 0 --by cgroup --top 0' 'sh /tmp/callbacks.sh'
ip link set lo up
/bin/rcutrace serve --by cgroup --top 2 --listen 127.0.0.1:9750 >/tmp/serve.out 2>/tmp/serve.err &
spid=$!
wait_for "grep -q Attaching /tmp/serve.out"
# Scraped first while only the root cgroup has tasks: it takes the first of the two labels.
wget -q -O /tmp/serve.before http://127.0.0.1:9750/metrics
sh /tmp/both.sh >/tmp/serve.work 2>&1
wget -q -O /tmp/serve.after http://127.0.0.1:9750/metrics
kill -TERM $spid; wait $spid; status=$?
echo "=== serve.before"; cat /tmp/serve.before
echo "=== serve.after"; cat /tmp/serve.after
echo "=== serve.work"; cat /tmp/serve.work
echo "=== serve.err"; cat /tmp/serve.err
echo "=== serve.status"; echo $status
"#;

/// The pid the workload printed for the process in `cgroup`.
fn pid_in(run: &Run, cgroup: &str) -> u32 {
    let prefix = format!("pid in {cgroup}: ");
    run.work
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no pid for {cgroup} in {}", run.work))
        .trim()
        .parse()
        .unwrap()
}

/// `(labels, value)` of every sample of `metric` in an exposition.
fn samples(exposition: &str, metric: &str) -> Vec<(String, u64)> {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix(metric))
        .filter_map(|rest| {
            let (labels, value) = rest.rsplit_once(' ')?;
            Some((labels.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn by_cgroup(series: &str) {
    let script = SCRIPT
        .replace("ALPHA_CALLBACKS", &ALPHA_CALLBACKS.to_string())
        .replace("BETA_CALLBACKS", &BETA_CALLBACKS.to_string())
        .replace("ALPHA", &ALPHA.to_string())
        .replace("BETA", &BETA.to_string());
    let guest = boot_with_module_within(series, &script, Duration::from_secs(600));
    let sections = sections(&guest.stdout);

    // count: each path has exactly its process's synchronize_rcu() calls.
    let count = run_named(&sections, "count");
    count.assert_ok("count");
    assert_eq!(
        (
            count.count("/alpha, synchronize_rcu"),
            count.count("/pods/beta, synchronize_rcu")
        ),
        (Some(ALPHA), Some(BETA)),
        "{series}:\n{}\n{}",
        count.out,
        count.err
    );
    // Everything else ran in the root cgroup, and it is named as such.
    assert!(count.count("/, rcu_gp_fqs_loop").is_some(), "{}", count.out);

    // cgroup,pid: the path, then the process that made the calls.
    let pid = run_named(&sections, "pid");
    pid.assert_ok("pid");
    for (cgroup, n) in [("/alpha", ALPHA), ("/pods/beta", BETA)] {
        let key = format!(
            "{cgroup}, {}, rcu-workload, synchronize_rcu",
            pid_in(&pid, cgroup)
        );
        assert_eq!(pid.count(&key), Some(n), "{series}: {key}\n{}", pid.out);
    }

    // srlat, keyed by cgroup and comm: one histogram per path, with exactly its calls.
    let srlat = run_named(&sections, "srlat");
    srlat.assert_ok("srlat");
    let latency_counts = |run: &Run, map: &str| -> Vec<(Option<String>, u64)> {
        let mut counts: Vec<(Option<String>, u64)> = run
            .records()
            .into_iter()
            .filter_map(|r| match r {
                Record::LatencySummary(s) if s.map == map => Some((s.key, s.count)),
                _ => None,
            })
            .collect();
        counts.sort();
        counts
    };
    let counts = latency_counts(&srlat, "@srlat");
    for (key, n) in [
        ("/alpha, rcu-workload", ALPHA),
        ("/pods/beta, rcu-workload", BETA),
    ] {
        assert!(
            counts.contains(&(Some(key.to_string()), n)),
            "{series}: {key} {n}: {counts:?}\n{}",
            srlat.out
        );
    }

    // gplat: grace periods are the grace-period kthread's, in the root cgroup.
    let gplat = run_named(&sections, "gplat");
    gplat.assert_ok("gplat");
    let counts = latency_counts(&gplat, "@gplat");
    assert!(
        matches!(counts.as_slice(), [(Some(root), n)] if root == "/" && *n > 0),
        "{series}: {counts:?}\n{}",
        gplat.out
    );

    // callbacks: the queueing side, by cgroup and callback function.
    let callbacks = run_named(&sections, "callbacks");
    callbacks.assert_ok("callbacks");
    let queued = |cgroup: &str| {
        let key = format!("{cgroup}, rcutrace_test_cb [rcutrace_test]");
        let prefix = format!("@cgroup_queued[{key}]: ");
        callbacks
            .out
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map(|n| n.trim().parse::<u64>().unwrap())
    };
    assert_eq!(
        (queued("/alpha"), queued("/pods/beta")),
        (Some(ALPHA_CALLBACKS), Some(BETA_CALLBACKS)),
        "{series}:\n{}\n{}",
        callbacks.out,
        callbacks.err
    );
    // The map adds up to the table's QUEUED total.
    let by_cgroup_total: u64 = callbacks
        .out
        .lines()
        .filter_map(|l| l.strip_prefix("@cgroup_queued["))
        .map(|l| {
            l.rsplit_once("]: ")
                .unwrap()
                .1
                .trim()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    let total_line = callbacks
        .out
        .lines()
        .find(|l| l.trim_start().starts_with("all rows: "))
        .unwrap_or_else(|| panic!("no total line in {}", callbacks.out));
    let queued_total: u64 = total_line
        .trim_start()
        .trim_start_matches("all rows: ")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(by_cgroup_total, queued_total, "{}", callbacks.out);

    // serve --top 2: the root cgroup took the first label at the first scrape; of the two
    // cgroups that came later, one got the last label and the other shares "[other]".
    let section = |name: &str| {
        sections
            .get(name)
            .unwrap_or_else(|| panic!("no {name}: {sections:#?}"))
    };
    assert_eq!(
        section("serve.status").trim(),
        "0",
        "{}",
        section("serve.err")
    );
    let before = samples(section("serve.before"), "rcutrace_calls_total");
    assert!(
        before
            .iter()
            .all(|(labels, _)| labels.contains("cgroup=\"/\"")),
        "{series}: {before:?}"
    );
    let after = samples(section("serve.after"), "rcutrace_calls_total");
    let synchronize: Vec<(String, u64)> = after
        .iter()
        .filter(|(labels, _)| labels.contains("function=\"synchronize_rcu\""))
        .filter(|(labels, _)| !labels.contains("cgroup=\"/\""))
        .cloned()
        .collect();
    let mut values: Vec<u64> = synchronize.iter().map(|(_, n)| *n).collect();
    values.sort_unstable();
    assert_eq!(values, [ALPHA, BETA], "{series}: {synchronize:?}");
    assert!(
        synchronize
            .iter()
            .any(|(labels, _)| labels.contains("cgroup=\"[other]\"")),
        "{series}: {synchronize:?}"
    );
    let labels: std::collections::BTreeSet<&str> = after
        .iter()
        .filter_map(|(labels, _)| labels.split("cgroup=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(
        labels.len(),
        3,
        "{series}: two kept and [other]: {labels:?}"
    );
}

#[test]
fn by_cgroup_on_6_12() {
    by_cgroup("6.12");
}

#[test]
fn by_cgroup_on_6_1() {
    by_cgroup("6.1");
}

#[test]
fn by_cgroup_on_7_3() {
    by_cgroup("7.3");
}
