//! `rcutrace report` against real runs on 6.1 and 6.12: two srlat runs, with rcu_expedited 0
//! and 1, and runs of every histogram layout, of count and of callbacks, print their text and
//! save their JSON; `report FILE` prints each run's text again byte for byte, and `report A B` names the
//! setting that differs and the ratios.

mod support;

use support::{boot_with_files, run_named, sections};

/// The unpacked kernel's configuration, for the guest's /boot (where Debian keeps it).
fn kernel_config(series: &str) -> (std::path::PathBuf, String) {
    let boot = xtask::workspace::kernels_dir().join(series).join("boot");
    let config = std::fs::read_dir(&boot)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("config-")
        })
        .unwrap_or_else(|| panic!("no config-* in {}", boot.display()));
    let name = config.file_name().unwrap().to_string_lossy().into_owned();
    (config, format!("/boot/{name}"))
}

#[test]
fn report_reprints_runs_and_compares_two_6_12() {
    report_reprints_runs_and_compares_two("6.12");
}

#[test]
fn report_reprints_runs_and_compares_two_7_3() {
    report_reprints_runs_and_compares_two("7.3");
}

#[test]
fn report_reprints_runs_and_compares_two_6_1() {
    report_reprints_runs_and_compares_two("6.1");
}

fn report_reprints_runs_and_compares_two(series: &str) {
    let script = "\
echo 0 > /sys/kernel/rcu_expedited
traced normal 'srlat --save /tmp/normal.json --pid WPID' '/bin/rcu-workload membarrier 20'
echo 1 > /sys/kernel/rcu_expedited
traced expedited 'srlat --save /tmp/expedited.json --pid WPID' '/bin/rcu-workload membarrier 20'
echo 0 > /sys/kernel/rcu_expedited
traced count 'count --by comm --save /tmp/count.json' '/bin/rcu-workload membarrier 20'
traced linear 'gplat --linear 0,40,5 --save /tmp/linear.json' '/bin/rcu-workload membarrier 20'
traced sparse 'srlat --buckets 4 --by pid --save /tmp/sparse.json' '/bin/rcu-workload membarrier 20'
traced callbacks 'callbacks --by cpu --save /tmp/callbacks.json' '/bin/rcu-workload membarrier 20'
traced json '-f json srlat --func rcu_barrier --func synchronize_rcu --by comm --save /tmp/saved.json' '/bin/rcu-workload membarrier 5'
echo '=== json.saved'; cmp /tmp/json.out /tmp/saved.json && echo identical
echo '=== json.again'; /bin/rcutrace -f json report /tmp/saved.json | cmp - /tmp/saved.json && echo identical
for run in normal expedited count linear sparse callbacks; do
    /bin/rcutrace report /tmp/$run.json >/tmp/$run.report
    echo \"=== $run.same\"; cmp /tmp/$run.out /tmp/$run.report && echo identical
done
echo '=== compare.out'; /bin/rcutrace report /tmp/normal.json /tmp/expedited.json
echo '=== itself.out'; /bin/rcutrace report /tmp/callbacks.json /tmp/callbacks.json
echo '=== normal.json'; cat /tmp/normal.json
";
    let out = boot_with_files(series, script, &[kernel_config(series)]);
    let parts = sections(&out.stdout);
    for run in ["normal", "expedited"] {
        let traced = run_named(&parts, run);
        assert_eq!(
            traced.number_after("@srlat count", "count"),
            Some(20.0),
            "{}",
            traced.out
        );
    }
    // Every layout, keyed maps and count's ratios print again byte for byte.
    for run in [
        "normal",
        "expedited",
        "count",
        "linear",
        "sparse",
        "callbacks",
    ] {
        let traced = run_named(&parts, run);
        traced.assert_ok(run);
        assert_eq!(
            parts[&format!("{run}.same")],
            "identical\n",
            "{run}: {}",
            traced.out
        );
    }
    // --save writes what -f json prints, and report -f json writes it again.
    run_named(&parts, "json").assert_ok("json");
    assert_eq!(
        parts["json.saved"],
        "identical\n",
        "{}",
        run_named(&parts, "json").out
    );
    assert_eq!(
        parts["json.again"],
        "identical\n",
        "{}",
        run_named(&parts, "json").out
    );
    let sparse = run_named(&parts, "sparse").out;
    assert!(
        sparse
            .lines()
            .any(|l| l.starts_with("@srlat[") && l.contains("rcu-workload]: ")),
        "{sparse}"
    );
    let count = run_named(&parts, "count").out;
    assert!(count.contains("calls lost to a full key map"), "{count}");
    let callbacks = run_named(&parts, "callbacks").out;
    assert!(callbacks.contains("@cpu_queued["), "{callbacks}");
    let linear = run_named(&parts, "linear").out;
    // The buckets are the layout's: 5 ms wide from 0, or its overflow past 40 (which of them
    // hold samples depends on how fast the guest's grace periods are).
    let linear_bucket = |line: &str| {
        let Some(range) = line.strip_prefix('[').and_then(|l| l.split(')').next()) else {
            return false;
        };
        match range.split_once(", ") {
            Some(("40", "...")) => true,
            Some((low, high)) => matches!(
                (low.parse::<u64>(), high.parse::<u64>()),
                (Ok(low), Ok(high)) if low % 5 == 0 && high == low + 5 && high <= 40
            ),
            None => false,
        }
    };
    let buckets: Vec<&str> = linear.lines().filter(|l| l.starts_with('[')).collect();
    assert!(
        !buckets.is_empty() && buckets.iter().all(|l| linear_bucket(l)),
        "{linear}"
    );
    let json = &parts["normal.json"];
    assert!(
        json.contains("\"type\": \"rcutrace_environment\""),
        "{json}"
    );
    assert!(json.contains("\"rcu_expedited\": \"0\""), "{json}");
    // Debian's kernels: HZ 250, from the configuration in /boot.
    assert!(json.contains("\"hz\": 250"), "{json}");
    assert!(json.contains("\"layout\": {\"kind\": \"log2\"}"), "{json}");

    // A run against itself: the same environment, and every ratio 1.
    let itself = &parts["itself.out"];
    assert!(itself.contains("\nEnvironment: the same\n"), "{itself}");
    assert!(itself.contains("\ncallbacks queued "), "{itself}");
    assert!(itself.contains("\n@cpu_queued "), "{itself}");
    for line in itself.lines().filter(|l| l.starts_with("  ")) {
        let ratio = line.split_whitespace().last().unwrap_or_default();
        assert!(["1.00", "-"].contains(&ratio), "{line}\n{itself}");
    }
    let compare = &parts["compare.out"];
    assert!(
        compare.starts_with("A: /tmp/normal.json\nB: /tmp/expedited.json\n"),
        "{compare}"
    );
    // The one setting changed between the runs comes first, with both values.
    let environment: Vec<&str> = compare
        .lines()
        .skip_while(|l| !l.starts_with("Environment"))
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(
        environment[0].starts_with("Environment, what differs "),
        "{compare}"
    );
    assert!(
        environment.iter().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words == ["rcu_expedited", "0", "1"]
        }),
        "{compare}"
    );
    assert!(compare.contains("@srlat: A | B\n"), "{compare}");
    let count_row: Vec<&str> = compare
        .lines()
        .find(|l| l.trim_start().starts_with("count "))
        .unwrap_or_else(|| panic!("{compare}"))
        .split_whitespace()
        .collect();
    assert_eq!(count_row, ["count", "20", "20", "1.00"], "{compare}");
    // Expedited grace periods are shorter: the mean's ratio B/A is below one.
    let mean_ratio: f64 = compare
        .lines()
        .find(|l| l.trim_start().starts_with("mean "))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("{compare}"));
    assert!(mean_ratio < 1.0, "{compare}");
}
