//! `rcutrace report A B --fail-if` on real runs on 6.1, 6.12 and 7.3, as a CI job would use it:
//! two srlat runs of 20 membarrier() calls each, with rcu_expedited 0 and 1 (expedited grace
//! periods are the shorter). Judged normal against expedited, a gate on slower or fewer calls
//! passes (exit 0); the same gate on the runs the other way round fails (exit 1), one line per
//! failed condition with both values; `--junit` writes the verdicts as JUnit XML that
//! quick-junit reads back; an expression it cannot read is a usage error (exit 2).

mod support;

use support::{boot, run_named, sections};

const CALLS: u64 = 20;

#[test]
fn a_gate_on_two_saved_runs_6_12() {
    a_gate_on_two_saved_runs("6.12");
}

#[test]
fn a_gate_on_two_saved_runs_6_1() {
    a_gate_on_two_saved_runs("6.1");
}

#[test]
fn a_gate_on_two_saved_runs_7_3() {
    a_gate_on_two_saved_runs("7.3");
}

/// `=== NAME.out` with the command's output, then `=== NAME.status` with its exit status.
const GATED: &str = r#"
gated() {
    name=$1; shift
    /bin/rcutrace "$@" >/tmp/$name.out 2>&1; status=$?
    echo "=== $name.out"; cat /tmp/$name.out
    echo "=== $name.status"; echo $status
}
"#;

fn a_gate_on_two_saved_runs(series: &str) {
    let script = format!(
        "{GATED}
echo 0 > /sys/kernel/rcu_expedited
traced normal 'srlat --save /tmp/normal.json --pid WPID' '/bin/rcu-workload membarrier {CALLS}'
echo 1 > /sys/kernel/rcu_expedited
traced expedited 'srlat --save /tmp/expedited.json --pid WPID' '/bin/rcu-workload membarrier {CALLS}'
echo 0 > /sys/kernel/rcu_expedited
gated faster report /tmp/normal.json /tmp/expedited.json --fail-if 'mean > +0%' --fail-if '@srlat count < {CALLS}' --junit /tmp/faster.xml
gated slower report /tmp/expedited.json /tmp/normal.json --fail-if 'mean > +0%' --fail-if '@srlat count < {CALLS}' --junit /tmp/slower.xml
gated absolute report /tmp/normal.json /tmp/expedited.json --fail-if 'max > 1ns' --fail-if 'count < {more}' --fail-if '@srelat p99 > 1s'
gated unreadable report /tmp/normal.json /tmp/expedited.json --fail-if 'p99 > 20'
gated one_run report /tmp/normal.json --fail-if 'p99 > +20%'
echo '=== faster.xml'; cat /tmp/faster.xml
echo '=== slower.xml'; cat /tmp/slower.xml
",
        more = CALLS + 1
    );
    let out = boot(series, &script);
    let parts = sections(&out.stdout);
    for run in ["normal", "expedited"] {
        let traced = run_named(&parts, run);
        traced.assert_ok(run);
        assert_eq!(
            traced.number_after("@srlat count", "count"),
            Some(CALLS as f64),
            "{}",
            traced.out
        );
    }
    let status = |name: &str| parts[&format!("{name}.status")].trim().to_string();
    let output = |name: &str| parts[&format!("{name}.out")].clone();

    // Expedited (B) against normal (A): not slower, not fewer. Every condition judged, none failed.
    let faster = output("faster");
    assert_eq!(status("faster"), "0", "{faster}");
    assert!(!faster.contains("FAILED"), "{faster}");
    assert!(
        faster.ends_with("--fail-if: 0 of 2 judged pairs (map or key and condition) failed\n"),
        "{faster}"
    );
    // The comparison is printed above the verdicts, as without a gate.
    assert!(faster.contains("@srlat: A | B\n"), "{faster}");

    // Normal (B) against expedited (A): slower, so the mean's condition fails, on one line
    // that names the map and both values; the count is the same and passes.
    let slower = output("slower");
    assert_eq!(status("slower"), "1", "{slower}");
    let failed: Vec<&str> = slower
        .lines()
        .filter(|l| l.starts_with("FAILED "))
        .collect();
    assert_eq!(failed.len(), 1, "{slower}");
    assert!(
        failed[0].starts_with("FAILED 'mean > +0%' on @srlat: A "),
        "{slower}"
    );
    // Its values are the comparison's own: A's mean, B's, and the limit (A's, +0%).
    let (a, b, limit) = values(failed[0]);
    let mean_row = table_row(&slower, "mean");
    assert_eq!(
        (a.as_str(), b.as_str()),
        (mean_row[1].as_str(), mean_row[2].as_str()),
        "{slower}"
    );
    assert_eq!(limit, a, "{slower}");
    assert!(
        slower.ends_with("--fail-if: 1 of 2 judged pairs (map or key and condition) failed\n"),
        "{slower}"
    );

    // Absolute limits: a count above the calls made fails with both counts; a map neither run
    // has judges nothing, which fails too.
    let absolute = output("absolute");
    assert_eq!(status("absolute"), "1", "{absolute}");
    assert!(
        absolute.contains("FAILED 'max > 1ns' on @srlat: A "),
        "{absolute}"
    );
    assert!(
        absolute.contains(&format!(
            "FAILED 'count < {}' on @srlat: A {CALLS}, B {CALLS}, limit {}\n",
            CALLS + 1,
            CALLS + 1
        )),
        "{absolute}"
    );
    assert!(
        absolute.contains(
            "FAILED '@srelat p99 > 1s': nothing to judge: no map @srelat in both runs has a \
             histogram with p99\n"
        ),
        "{absolute}"
    );

    // What it cannot read: a usage error that says what is accepted.
    let unreadable = output("unreadable");
    assert_eq!(status("unreadable"), "2", "{unreadable}");
    assert!(unreadable.contains("\"20\" has no unit"), "{unreadable}");
    assert!(
        unreadable.contains("STATISTIC is count, min, mean, max"),
        "{unreadable}"
    );
    let one_run = output("one_run");
    assert_eq!(status("one_run"), "2", "{one_run}");
    assert!(one_run.contains("give two saved runs"), "{one_run}");

    // JUnit XML, read back by quick-junit: a case per condition, failures as failures.
    for (name, failures) in [("faster", 0), ("slower", 1)] {
        let xml = &parts[&format!("{name}.xml")];
        let report = quick_junit::Report::deserialize_from_str(xml)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{xml}"));
        assert_eq!((report.tests, report.failures), (2, failures), "{xml}");
        let suite = &report.test_suites[0];
        let names: Vec<&str> = suite.test_cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["mean > +0%", &format!("@srlat count < {CALLS}")],
            "{xml}"
        );
        assert!(
            suite
                .test_cases
                .iter()
                .all(|c| c.classname.as_ref().map(|n| n.as_str()) == Some("@srlat")),
            "{xml}"
        );
    }
}

/// `A x ms, B y ms, limit z ms` of a verdict line, each value with its unit.
fn values(line: &str) -> (String, String, String) {
    let (_, rest) = line.split_once(": A ").unwrap();
    let (a, rest) = rest.split_once(", B ").unwrap();
    let (b, limit) = rest.split_once(", limit ").unwrap();
    (a.to_string(), b.to_string(), limit.to_string())
}

/// A row of the comparison's statistics table: `  mean  12.345 ms  3.4567 ms  0.28`, as
/// `[name, A, B, B/A]`.
fn table_row(out: &str, name: &str) -> Vec<String> {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} row: {out}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    // name, A value, A unit, B value, B unit, ratio
    vec![
        words[0].to_string(),
        format!("{} {}", words[1], words[2]),
        format!("{} {}", words[3], words[4]),
        words[5].to_string(),
    ]
}
