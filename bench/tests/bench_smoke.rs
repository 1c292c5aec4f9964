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
