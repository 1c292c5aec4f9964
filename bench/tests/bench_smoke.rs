//! `cargo xtask bench` once, with tiny sizes, so that it cannot rot: the guest boots with
//! bpftrace, the driver measures every configuration, and every row of the table gets its
//! numbers. Whether the targets are met is the full-size benchmark's business, not this test's.
//! Needs what scripts/setup --bench installs (which the benchmark runs itself).

use rcu_bench::sample::{Config, Family, Footprinted, Metric, Tracer};
use rcu_bench::{self as bench, Options, Row, Sizes};
use xtask::vm::Kernel;
use xtask::workspace;

#[test]
fn tiny_benchmark_fills_every_row() {
    let sizes = Sizes {
        reps: 1,
        calls: 20_000,
        membarriers: 5,
        window_secs: 1,
    };
    assert!(!sizes.is_full(), "a smoke run must never be recorded");
    let recorded = workspace::root().join(bench::BENCHMARKS_MD);
    let before = std::fs::read(&recorded).ok();

    let opts = Options::new(Kernel::Series("6.12".into()), sizes);
    let outcome = bench::run(&opts, false).expect("the benchmark runs");

    assert!(
        outcome.kernel_release.starts_with("6.12."),
        "{}",
        outcome.kernel_release
    );
    assert!(
        outcome
            .info
            .iter()
            .any(|l| l.starts_with("bpftrace bpftrace v")),
        "{:?}",
        outcome.info
    );
    let summary = &outcome.summary;
    let incomplete: Vec<&Row> = summary.rows.iter().filter(|r| !r.is_complete()).collect();
    assert!(
        incomplete.is_empty(),
        "rows without numbers: {incomplete:#?}\n{}",
        summary.table()
    );
    let table = summary.table();
    assert_eq!(
        table.lines().count(),
        summary.rows.len() + 2,
        "header, rule and one line per row:\n{table}"
    );
    for row in &summary.rows {
        assert!(table.contains(&format!("| {} |", row.label)), "{table}");
    }
    // Every target is judged, met or not: 13, the namespace load's, and one per footprint row.
    let footprint_rows = Footprinted::ALL.len() * Family::ALL.len();
    assert_eq!(
        summary.targets().lines().count(),
        13 + 1 + footprint_rows,
        "{}",
        summary.targets()
    );
    // The footprint's referee counted: every run of every command queued callbacks (each
    // tracer's exit frees its programs through call_rcu()) beyond the idle guest's.
    for command in Footprinted::ALL {
        for tracer in [Tracer::RCUTRACE, Tracer::Bpftrace] {
            let config = Config::Footprint(tracer, command);
            let queued = summary
                .get(Metric::Footprint(Family::Queued), config)
                .unwrap();
            assert!(
                queued >= 1.0,
                "{}: {queued} callbacks queued",
                config.name()
            );
        }
    }
    // Tracers really ran: readers were counted, and programs ran under bpf_stats.
    for tracer in [Tracer::RCUTRACE, Tracer::Bpftrace] {
        let per_call = summary
            .get(Metric::EventsPerCall, Config::Under(tracer))
            .unwrap();
        assert!(
            per_call >= 1.0,
            "{tracer:?}: {per_call} events per getppid()"
        );
    }
    assert!(
        outcome
            .info
            .iter()
            .any(|l| l.contains("__rcu_read_lock: attached by kprobe")),
        "{:?}",
        outcome.info
    );
    assert_eq!(
        std::fs::read(&recorded).ok(),
        before,
        "{} changed",
        bench::BENCHMARKS_MD
    );
}

/// `--scaling` once, tiny, between guests of 2 and 4 CPUs (two `rcu_node`s would need more:
/// the table's shape is what is checked here, the full run boots 64): every row gets both
/// guests' numbers, and nothing is recorded.
#[test]
fn tiny_scaling_run_fills_every_row() {
    let sizes = Sizes {
        reps: 1,
        calls: 20_000,
        membarriers: 5,
        window_secs: 2,
    };
    let recorded = workspace::root().join(bench::BENCHMARKS_MD);
    let before = std::fs::read(&recorded).ok();
    let opts = Options::new(Kernel::Series("6.12".into()), sizes);
    let outcome = bench::run_scaling(&opts, 4, false).expect("the scaling run runs");
    let summary = &outcome.summary;
    assert_eq!(summary.cpus, (2, 4));
    let incomplete: Vec<_> = summary.rows.iter().filter(|r| !r.is_complete()).collect();
    assert!(
        incomplete.is_empty(),
        "rows without numbers: {incomplete:#?}\n{}",
        summary.table()
    );
    // Each report's CPU was measured, and is a report's worth, not nothing.
    let interval = summary
        .rows
        .iter()
        .find(|r| r.label.starts_with("CPU per"))
        .unwrap();
    assert!(
        interval.rcutrace.0.unwrap() > 0.0 && interval.rcutrace.1.unwrap() > 0.0,
        "{interval:?}"
    );
    let section = bench::scaling_md(&outcome, "cargo xtask bench --scaling 4", "today", 4);
    assert!(section.contains(&summary.table()), "{section}");
    assert!(!section.contains('{'), "a field left unfilled: {section}");
    assert_eq!(
        std::fs::read(&recorded).ok(),
        before,
        "{} changed",
        bench::BENCHMARKS_MD
    );
}
