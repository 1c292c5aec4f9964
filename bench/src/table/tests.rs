use super::*;

/// One sample of everything, as the guest driver prints them.
pub const SAMPLES: &str = "\
info kernel 6.12.0-test
sample getppid_ns none 400
sample getppid_ns none 420
sample getppid_ns rcutrace 1400
sample getppid_ns bpftrace 1600
sample getppid_ns floor-kprobe 1200
sample events_per_call rcutrace 2.0
sample events_per_call bpftrace 2.0
sample program_ns rcutrace-count 50
sample program_ns bpftrace-count 150
sample program_ns rcutrace-srlat 120
sample program_ns bpftrace-srlat 400
sample program_ns floor-kprobe-count 10
sample membarrier_wall_ns none 10000000
sample membarrier_wall_ns rcutrace 10100000
sample membarrier_wall_ns bpftrace 10300000
sample membarrier_cpu_ns none 9000
sample membarrier_cpu_ns rcutrace 9500
sample membarrier_cpu_ns bpftrace 11000
sample membarrier_cpu_ns rcutrace-kprobe 9700
sample membarrier_cpu_ns rcutrace-fentry 9400
sample membarrier_cpu_ns floor-kprobe 9300
sample membarrier_cpu_ns floor-kprobe-fexit 9200
sample membarrier_cpu_ns floor-fentry 9100
sample startup_ms rcutrace-count 100
sample startup_ms bpftrace-count 3000
sample startup_ms rcutrace-srlat 90
sample startup_ms bpftrace-srlat 3200
sample banner_ms rcutrace-count 100
sample banner_ms bpftrace-count 2900
sample rss_kib rcutrace-count 8192
sample rss_kib bpftrace-count 102400
sample rss_kib rcutrace-srlat 8192
sample rss_kib bpftrace-srlat 104448
sample exit_ms rcutrace-kprobe-srlat 700
sample exit_ms rcutrace-fentry-srlat 2800
sample exit_ms bpftrace-srlat 1400
sample run_utime_ms rcutrace 30
sample run_utime_ms bpftrace 2500
sample run_s rcutrace 10.5
sample run_s bpftrace 14
sample window_cpu_ms rcutrace 1
sample window_cpu_ms bpftrace 20
sample window_utime_ms rcutrace 0
sample window_utime_ms bpftrace 10
sample startup_utime_ms rcutrace-count 20
sample startup_utime_ms bpftrace-count 1200
sample first_attach_ms rcutrace-count 60
sample kallsyms_read_ms kernel 250
sample kallsyms_lines kernel 150000
sample btf_kib kernel 4576
sample load_getppid_ns none 500
sample load_getppid_ns rcutrace-sampled 600
sample events_per_call rcutrace-sampled 1.5
sample paced_events_per_call rcutrace 2.01
sample paced_events_per_call rcutrace-sampled 1.99
sample sampled_margin_pct rcutrace-sampled 1.2
sample paced_calls_per_s rcutrace 20000
sample paced_calls_per_s rcutrace-sampled 20800
sample paced_window_speed rcutrace-sampled 0.95
sample added_cpu_pct rcutrace-gp-idle 0.05
sample added_cpu_pct rcutrace-gp-busy 0.2
sample added_cpu_pct rcutrace-gp-busy 0.6
sample added_cpu_pct rcutrace-stall-idle 0.04
sample added_cpu_pct rcutrace-stall-busy 0.15
sample added_ns_per_switch rcutrace-gp-idle 900
sample added_ns_per_switch rcutrace-gp-busy 1200
sample window_cpu_ms rcutrace-gp-busy 30
sample window_program_ms rcutrace-gp-busy 10
sample program_runs_per_s rcutrace-gp-busy 2000
sample switches_per_s rcutrace-gp-busy 300
sample tracer_runs_per_s rcutrace-gp-busy 50
sample window_cpu_ms rcutrace-stall-busy 4
sample window_program_ms rcutrace-stall-busy 11
sample program_runs_per_s rcutrace-stall-busy 2200
sample switches_per_s rcutrace-stall-busy 310
sample startup_ms rcutrace-stall-idle 400
sample rss_kib rcutrace-stall-busy 7168
sample netns_ns none 30000000
sample netns_ns rcutrace-run 31000000
sample netns_ns rcutrace-srlat-c 32000000
sample netns_ns bpftrace 34000000
sample bogus line
";

fn summary() -> Summary {
    let mut samples = Samples::parse(SAMPLES);
    for command in Footprinted::ALL {
        for family in Family::ALL {
            let (rcutrace, bpftrace) = match (command, family) {
                (Footprinted::Count, Family::Queued) => (300.0, 100.0),
                (Footprinted::Gp, Family::GracePeriods) => (1.5, -0.5),
                _ => (10.0, 20.0),
            };
            for (tracer, value) in [(RCUTRACE, rcutrace), (Bpftrace, bpftrace)] {
                samples.add(crate::sample::Sample {
                    metric: Metric::Footprint(family),
                    config: Config::Footprint(tracer, command),
                    value,
                });
            }
        }
    }
    Summary::new(&samples, Sizes::FULL)
}

#[test]
fn namespace_rows_and_targets() {
    let summary = summary();
    let row = |id| summary.row(id).unwrap();
    let wall = row(RowId::NetnsWall);
    assert_eq!(
        (wall.none, wall.rcutrace, wall.bpftrace),
        (Some(30.0), Some(31.0), Some(34.0))
    );
    let added = row(RowId::NetnsAdded);
    assert_eq!((added.rcutrace, added.bpftrace), (Some(1.0), Some(4.0)));
    assert_eq!(added.ratio, Some(0.25));
    assert_eq!(row(RowId::NetnsSrlatAdded).rcutrace, Some(2.0));
    // run adds 1 ms, srlat -c 2 ms: 1 ms less, within the target.
    let over = row(RowId::NetnsRunOverSrlat);
    assert_eq!(over.rcutrace, Some(-1.0));
    assert!(!over.misses_target());
}

#[test]
fn footprint_rows_and_targets() {
    let summary = summary();
    let row = |command, family| summary.row(RowId::Footprint(command, family)).unwrap();
    let queued = row(Footprinted::Count, Family::Queued);
    assert_eq!(
        (queued.rcutrace, queued.bpftrace),
        (Some(300.0), Some(100.0))
    );
    assert_eq!(queued.ratio, Some(3.0));
    assert!(queued.misses_target());
    assert!(!row(Footprinted::Srlat, Family::Waits).misses_target());
    // Within the idle guest's noise of zero: met, and no ratio of noise.
    let gps = row(Footprinted::Gp, Family::GracePeriods);
    assert!(!gps.misses_target());
    assert_eq!(gps.ratio, None);
    let table = summary.table();
    assert!(
        table.contains(
            "| Footprint of one `count` run: callbacks queued (`call_rcu` family, \
             `call_srcu`) (calls its start and exit cause) |  |  | 300 | 100 | 3.000 \
             | rcutrace ≤ bpftrace (± 5 %) | **no** |"
        ),
        "{table}"
    );
}

#[test]
fn summary_rows_and_targets() {
    let summary = summary();
    let reader = summary.row(RowId::ReaderAdded).unwrap();
    // (1400 - 410) / 2 and (1600 - 410) / 2.
    assert_eq!(reader.rcutrace, Some(495.0));
    assert_eq!(reader.bpftrace, Some(595.0));
    assert!(reader.misses_target());
    // (1200 - 410) / 2: an empty program on the same kprobe.
    assert_eq!(reader.floor, Some(395.0));
    let own = summary.row(RowId::ReaderOwn).unwrap();
    assert_eq!((own.rcutrace, own.bpftrace), (Some(100.0), Some(200.0)));
    assert_eq!(summary.row(RowId::ReaderProgram).unwrap().floor, Some(10.0));
    // Sampled: (600 - 500) / 2 per event against bpftrace's 595, under its own baseline.
    let sampled = summary.row(RowId::SampledReaderAdded).unwrap();
    assert_eq!((sampled.none, sampled.rcutrace), (Some(500.0), Some(50.0)));
    assert!(!sampled.misses_target());
    let estimate = summary.row(RowId::PacedEstimateOverCount).unwrap();
    assert!((estimate.rcutrace.unwrap() - 1.99 / 2.01).abs() < 1e-9);
    assert!(!estimate.misses_target());
    // Each mechanism's floor beside rcutrace attached that way; bpftrace's script uses
    // kprobe + kretprobe only.
    let by = |m| {
        let row = summary.row(RowId::SyncAddedBy(m)).unwrap();
        (row.floor, row.rcutrace, row.bpftrace)
    };
    assert_eq!(
        by(Mechanism::Kprobe),
        (Some(300.0), Some(700.0), Some(2000.0))
    );
    assert_eq!(by(Mechanism::KprobeFexit), (Some(200.0), Some(500.0), None));
    assert_eq!(by(Mechanism::Fentry), (Some(100.0), Some(400.0), None));
    let own = summary.row(RowId::SyncOwn).unwrap();
    // rcutrace's default is kprobe + fexit, bpftrace's kprobe + kretprobe.
    assert_eq!((own.rcutrace, own.bpftrace), (Some(300.0), Some(1700.0)));
    let startup = summary.row(RowId::StartupCount).unwrap();
    assert!((startup.ratio.unwrap() - 1.0 / 30.0).abs() < 1e-9);
    assert!(startup.target.as_ref().unwrap().met);
    assert_eq!(summary.row(RowId::RssCount).unwrap().rcutrace, Some(8.0));
    assert!(!summary.row(RowId::RssSrlat).unwrap().misses_target());
    let exit = |attach| {
        let row = summary.row(RowId::ExitSrlat(attach)).unwrap();
        (row.rcutrace, row.bpftrace, row.ratio)
    };
    assert_eq!(exit(Attach::Kprobe), (Some(700.0), Some(1400.0), Some(0.5)));
    assert_eq!(exit(Attach::Fentry), (Some(2800.0), None, None));
    let share = summary.row(RowId::UserCpuShare).unwrap();
    assert!((share.rcutrace.unwrap() - 30.0 / 105.0).abs() < 1e-9);
    assert!(share.target.as_ref().unwrap().met);
    assert!(summary.rows.iter().all(Row::is_complete));
    assert_eq!(
        summary.get(Metric::KallsymsLines, Config::Kernel),
        Some(150_000.0)
    );

    let table = summary.table();
    assert_eq!(table.lines().count(), summary.rows.len() + 2);
    assert!(table.contains("| Median of 5 runs |"), "{table}");
    assert!(
        table.contains(
            "| Added CPU per `synchronize_rcu()` call by kprobe + fexit \
             (ns; rcutrace's default) |  | 200 | 500 |  |  |  |  |"
        ),
        "{table}"
    );
    assert!(
        table.contains(
            "| Added CPU per `synchronize_rcu()` call by kprobe + kretprobe \
             (ns; rcutrace `--attach kprobe`) |  | 300 | 700 | 2000 | 0.350 |  |  |"
        ),
        "{table}"
    );
    assert!(
        table.contains("| Added per `__rcu_read_lock` event (ns) |  | 395.0 | 495.0 | 595.0 | 0.832 | ≤ 0.5 | **no** |"),
        "{table}"
    );
    assert!(
        table.contains("| User CPU while tracing, 10 s window (ms) |  |  | 0 | 10 | 0.000 |  |  |"),
        "{table}"
    );
    let targets = summary.targets();
    // 13, the namespace load's, and one per footprint row.
    assert_eq!(targets.lines().count(), 13 + 1 + 20, "{targets}");
    assert!(
        targets.contains("share of the whole count run (%): 0.29 %, target rcutrace < 1 %: met"),
        "{targets}"
    );
    assert!(
        targets.contains("Peak RSS, count (MiB): 8.0, target rcutrace ≤ 10 MiB: met"),
        "{targets}"
    );
}

#[test]
fn always_on_rows_and_their_targets() {
    let summary = summary();
    let cpu = |watcher, load| summary.row(RowId::WatchCpu(watcher, load)).unwrap();
    // gp has a target on the busy load only: the median of 0.2 and 0.6 is 0.4 ≤ 0.5.
    assert_eq!(cpu(Watcher::Gp, Load::Idle).target, None);
    let gp_busy = cpu(Watcher::Gp, Load::Busy);
    assert!((gp_busy.rcutrace.unwrap() - 0.4).abs() < 1e-9);
    assert!(gp_busy.target.as_ref().unwrap().met);
    // stall's 0.1 % holds on both loads: met idle, missed busy.
    assert!(!cpu(Watcher::Stall, Load::Idle).misses_target());
    assert!(cpu(Watcher::Stall, Load::Busy).misses_target());
    assert!(!cpu(Watcher::Stall, Load::Busy).has_bpftrace);
    let per_switch = summary
        .row(RowId::WatchPerSwitch(Watcher::Gp, Load::Busy))
        .unwrap();
    assert_eq!(per_switch.rcutrace, Some(1200.0));
    assert!(
        summary
            .row(RowId::WatchPerSwitch(Watcher::Stall, Load::Busy))
            .is_none()
    );
    // stall's start-up against bpftrace's count: 400 / 3000; its RSS under the load.
    let startup = summary.row(RowId::StartupStall).unwrap();
    assert_eq!(
        (startup.rcutrace, startup.bpftrace),
        (Some(400.0), Some(3000.0))
    );
    assert!(!startup.misses_target());
    assert_eq!(summary.row(RowId::RssStall).unwrap().rcutrace, Some(7.0));

    let table = summary.table();
    assert!(
        table.contains(
            "| Added CPU, `rcutrace gp --secs 0`, steady `getppid()` load (% of one CPU: \
             its own + its BPF programs') |  |  | 0.400 |  |  | rcutrace ≤ 0.5 % | yes |"
        ),
        "{table}"
    );
    assert!(
        table.contains(
            "| Added CPU, `rcutrace stall`, steady `getppid()` load (% of one CPU: its own \
             + its BPF programs') |  |  | 0.150 |  |  | rcutrace ≤ 0.1 % | **no** |"
        ),
        "{table}"
    );
    let targets = summary.targets();
    assert!(
        targets.contains(
            "`rcutrace stall`, idle guest (% of one CPU: its own + its BPF programs'): \
             0.040 %, target rcutrace ≤ 0.1 %: met"
        ),
        "{targets}"
    );
    assert!(
        targets.contains("0.150 %, target rcutrace ≤ 0.1 %: **missed**"),
        "{targets}"
    );
}

/// A figure exactly at a limit meets an "at most" target.
#[test]
fn at_most_includes_the_limit() {
    let row = Row::new(RowId::WatchCpu(Watcher::Stall, Load::Idle), Sizes::FULL, 3)
        .rcutrace_only(Some(0.1))
        .percent_target(watch_cpu_target(Watcher::Stall, Load::Idle));
    assert!(!row.misses_target());
    let row = Row::new(RowId::WatchCpu(Watcher::Gp, Load::Idle), Sizes::FULL, 3)
        .rcutrace_only(Some(9.0))
        .percent_target(watch_cpu_target(Watcher::Gp, Load::Idle));
    assert_eq!(row.target, None);
}

/// Each row has its own id, so no lookup can find the wrong one.
#[test]
fn rows_have_distinct_ids_and_labels() {
    let summary = summary();
    for (i, row) in summary.rows.iter().enumerate() {
        assert_eq!(summary.row(row.id), Some(row));
        assert!(summary.rows[i + 1..].iter().all(|r| r.label != row.label));
    }
}

#[test]
fn ratios_of_noise_and_zero_are_not_computed() {
    let row = Row::new(RowId::MembarrierAddedWall, Sizes::FULL, 1)
        .traced((Some(-6.0), Some(37.0)))
        .with_ratio_of_added();
    assert_eq!(row.ratio, None);
    assert!(row.is_complete());
    let row = Row::new(RowId::WindowUtime, Sizes::FULL, 0)
        .traced((Some(0.0), Some(0.0)))
        .with_ratio();
    assert_eq!((row.ratio, row.ratio_note), (None, Some("n/a (÷ 0)")));
    assert!(row.is_complete());
    let summary = Summary {
        rows: vec![row],
        ..Summary::new(&Samples::default(), Sizes::FULL)
    };
    assert!(summary.table().contains(" | 0 | 0 | n/a (÷ 0) |  |  |"));
}

#[test]
fn missing_samples_leave_cells_empty() {
    let summary = Summary::new(&Samples::default(), Sizes::FULL);
    assert!(summary.rows.iter().all(|r| r.rcutrace.is_none()));
    assert!(!summary.rows.iter().any(Row::is_complete));
    assert!(summary.row(RowId::StartupCount).unwrap().misses_target());
    assert!(summary.targets().contains("not measured"));
}
