use super::*;
use std::time::Duration;

use crate::model::{
    Buckets, CallbackCounts, CallbackRow, CallbackTotals, KeyedLosses, Losses, ReadersEstimate,
    SeriesStats, Unit, stats::PERCENTILE_ERROR,
};
use crate::render::{self, Format};
use rcutrace_common::hist::{LOG2_SLOTS, Linear};
use rcutrace_common::{hist::log2_slot, records::Environment};

/// What a live run printed in `format`: banner, then its report.
pub(crate) fn live(format: Format, report: &Report) -> String {
    render::banner(format, 2) + &render::output(format, report)
}

fn replayed(report: &Report) -> String {
    let saved = parse(live(Format::Json, report).as_bytes()).unwrap();
    assert_eq!(saved.probes, Some(2));
    render::banner(Format::Text, 2) + &render::output(Format::Text, &saved.reports[0])
}

pub(crate) fn log2(values: &[i64]) -> Buckets {
    let mut counts = vec![0; LOG2_SLOTS as usize];
    for &v in values {
        counts[log2_slot(v) as usize] += 1;
    }
    Buckets::Log2(counts)
}

pub(crate) fn series(key: Option<&str>, count: u64) -> SeriesStats {
    SeriesStats {
        key: key.map(String::from),
        count,
        min_ns: (count > 0).then_some(1_234_567),
        max_ns: (count > 0).then_some(23_456_789),
        mean_ns: (count > 0).then_some(12_345_678.9),
        percentiles_exact: false,
        percentiles: if count > 0 {
            vec![
                (0.5, 11_111_111.1),
                (0.9, 2e7),
                (0.99, 2.3e7),
                (0.999, 2.3e7),
            ]
        } else {
            vec![]
        },
    }
}

pub(crate) fn latency(maps: Vec<Map>, series: Vec<SeriesStats>, unit: Unit) -> Report {
    Report {
        time: None,
        maps,
        summary: Summary::Latency(vec![LatencySummary {
            map_name: "@srlat".into(),
            unit,
            series,
            percentile_error: PERCENTILE_ERROR,
            losses: Losses {
                in_flight_at_exit: 1,
                returns_lost: 2,
                stacks_lost: Some(3),
                ..Losses::default()
            },
            stages: None,
            cross_checks: Vec::new(),
            grace_periods: Vec::new(),
        }]),
        environment: Some(Environment {
            kernel_release: "6.12.57+deb13-cloud-amd64".into(),
            cpus: 2,
            ..Environment::default()
        }),
    }
}

pub(crate) fn hist(key: Option<&str>, buckets: Buckets) -> Map {
    Map::Hist(HistMap {
        name: "@srlat".into(),
        key: key.map(String::from),
        buckets,
    })
}

#[test]
fn every_layout_prints_again_byte_for_byte() {
    let linear = Linear {
        min: 0,
        max: 10240,
        step: 1024,
    };
    let mut linear_counts = vec![0; 12];
    linear_counts[0] = 1;
    linear_counts[3] = 4;
    linear_counts[11] = 2;
    for report in [
        latency(
            vec![hist(None, log2(&[-1, 0, 5, 20, 1 << 40]))],
            vec![series(None, 5)],
            Unit::Ms,
        ),
        latency(
            vec![hist(None, Buckets::Linear(linear, linear_counts))],
            vec![series(None, 7)],
            Unit::Us,
        ),
        latency(
            vec![hist(
                None,
                Buckets::Sparse {
                    step: 100,
                    buckets: vec![(7, 1), (2, 3)],
                },
            )],
            vec![series(None, 4)],
            Unit::Ns,
        ),
    ] {
        assert_eq!(replayed(&report), live(Format::Text, &report));
    }
}

/// `run`'s report of two synchronize_rcu() calls, keyed by stack.
pub(crate) fn run_report() -> Report {
    use crate::model::run::{RunFigures, RunWait};
    let key = "\n    synchronize_rcu+5\n    __x64_sys_membarrier+490\n";
    let Summary::Latency(latency) = latency(
        vec![hist(Some(key), log2(&[16_000_000, 20_000_000]))],
        vec![series(Some(key), 2)],
        Unit::Ms,
    )
    .summary
    else {
        unreachable!()
    };
    Report {
        time: None,
        maps: vec![hist(Some(key), log2(&[16_000_000, 20_000_000]))],
        summary: Summary::Run(Box::new(RunSummary {
            latency,
            figures: RunFigures {
                command: "rcu-workload membarrier 2".into(),
                exit_status: Some(0),
                wall_ns: 40_000_000,
                off_cpu_asleep_ns: 35_000_000,
                in_waits_asleep_ns: 35_000_000,
                threads: 1,
                rcu_wait_ns: 36_000_000,
                waits: vec![RunWait {
                    function: "synchronize_rcu".into(),
                    domain: None,
                    caused_work: false,
                    calls: 2,
                    total_ns: 36_000_000,
                    max_ns: 20_000_000,
                }],
                ..Default::default()
            },
        })),
        environment: None,
    }
}

/// `run`'s report: the waits' histograms by stack, then the command's account, printed
/// again as it was, and its stacks drawn as the live run's.
#[test]
fn a_run_prints_again_byte_for_byte() {
    let report = run_report();
    let text = live(Format::Text, &report);
    assert!(
        text.contains("Command: rcu-workload membarrier 2"),
        "{text}"
    );
    assert_eq!(replayed(&report), text);
    let saved = parse(live(Format::Json, &report).as_bytes()).unwrap();
    assert_eq!(
        crate::model::stacks::of_report(&saved.reports[0]),
        crate::model::stacks::of_report(&report)
    );
    assert!(crate::model::stacks::of_report(&report).is_ok());
}

#[test]
fn stages_print_again_byte_for_byte() {
    let mut report = latency(
        vec![hist(None, log2(&[6, 0]))],
        vec![series(None, 2)],
        Unit::Ms,
    );
    let stages = crate::model::stages::tests::both_paths();
    assert_eq!(stages.paths.len(), 2);
    assert_eq!(stages.calls.len(), 2);
    if let Summary::Latency(summaries) = &mut report.summary {
        summaries[0].stages = Some(Box::new(stages));
    }
    let text = live(Format::Text, &report);
    assert!(
        text.contains("Expedited grace period, 1 calls (ms)"),
        "{text}"
    );
    assert_eq!(replayed(&report), text);
    // And the calls, one by one, come back too.
    let json = live(Format::Json, &report);
    let saved = parse(json.as_bytes()).unwrap();
    assert_eq!(
        render::banner(Format::Json, 2) + &render::output(Format::Json, &saved.reports[0]),
        json
    );
    // Calls out of order and events lost: 0 in every JSON summary, the text's line said
    // only where there are some; both come back.
    assert!(
        json.contains("\"out_of_order\": 0, \"events_lost\": 0"),
        "{json}"
    );
    assert!(!json.contains("\"out_of_order\": false"), "{json}");
    assert!(!text.contains("in an order no call has"), "{text}");
    assert!(
        text.contains("0 grace period not seen whole; 0 grace-period and stage events of the run lost to a full ring\n"),
        "{text}"
    );
    if let Summary::Latency(summaries) = &mut report.summary {
        let stages = summaries[0].stages.as_mut().unwrap();
        (stages.adjusted, stages.out_of_order, stages.events_lost) = (1, 1, 5);
        (stages.calls[0].adjusted, stages.calls[0].out_of_order) = (true, true);
    }
    let text = live(Format::Text, &report);
    assert!(
        text.contains("@srlat stages: 1 calls' records came in an order no call has"),
        "{text}"
    );
    assert!(text.contains("; 5 grace-period and stage events of the run lost to a full ring\n"));
    assert_eq!(replayed(&report), text);
    let json = live(Format::Json, &report);
    assert!(
        json.contains("\"out_of_order\": 1, \"events_lost\": 5"),
        "{json}"
    );
    assert!(
        json.contains("\"adjusted\": true, \"out_of_order\": true"),
        "{json}"
    );
    let saved = parse(json.as_bytes()).unwrap();
    let Summary::Latency(summaries) = &saved.reports[0].summary else {
        panic!("{saved:?}")
    };
    let stages = summaries[0].stages.as_ref().unwrap();
    assert_eq!(
        (stages.adjusted, stages.out_of_order, stages.events_lost),
        (1, 1, 5)
    );
    let calls: Vec<bool> = stages.calls.iter().map(|c| c.out_of_order).collect();
    assert_eq!(calls, [true, false]);
}

#[test]
fn keyed_and_empty_histograms_print_again() {
    let keyed = latency(
        vec![
            hist(Some("kworker/0:1"), log2(&[5, 6])),
            hist(
                Some("\n    synchronize_rcu+5\n    do_syscall_64+135\n"),
                log2(&[100]),
            ),
        ],
        vec![
            series(Some("\n    synchronize_rcu+5\n    do_syscall_64+135\n"), 1),
            series(Some("kworker/0:1"), 2),
        ],
        Unit::Ms,
    );
    assert_eq!(replayed(&keyed), live(Format::Text, &keyed));
    let empty = latency(vec![hist(None, log2(&[]))], vec![series(None, 0)], Unit::Ms);
    let text = live(Format::Text, &empty);
    assert!(text.contains("\n\n\n\n@srlat count 0\n"), "{text:?}");
    assert_eq!(replayed(&empty), text);
    let no_key = latency(vec![], vec![], Unit::Ms);
    assert_eq!(replayed(&no_key), live(Format::Text, &no_key));
}

#[test]
fn a_flavours_slowest_grace_periods_print_again() {
    // `gp --flavor tasks`: its histogram's summary, then the slowest grace periods, each
    // with its phases, passes and holdouts (one with its stack).
    let mut run = latency(
        vec![Map::Hist(HistMap {
            name: "@tasks_gp".into(),
            key: Some("rcu_tasks".into()),
            buckets: log2(&[1_119_777_148, 31_000_000]),
        })],
        vec![series(Some("rcu_tasks"), 2)],
        Unit::Ms,
    );
    let Summary::Latency(summaries) = &mut run.summary else {
        unreachable!()
    };
    summaries[0].map_name = "@tasks_gp".into();
    let record = |duration_ns: u64, passes, holdouts| {
        let mut gp: records::GracePeriod = serde_json::from_str(&format!(
            r#"{{"flavor":"tasks","key":"rcu_tasks","gp_seq":0,"started_ns":5,"duration_ns":{duration_ns}}}"#
        ))
        .unwrap();
        gp.phases = [
            ("pre_gp", 23_857_000),
            ("holdouts", duration_ns - 23_857_000),
        ]
        .map(|(name, ns)| records::PhaseLength {
            name: name.into(),
            ns,
        })
        .to_vec();
        gp.holdout_passes = Some(passes);
        gp.holdout_tasks = holdouts;
        gp
    };
    summaries[0].grace_periods = vec![
        record(
            1_119_777_148,
            9,
            vec![records::HoldoutTaskRecord {
                pid: 185,
                comm: "rcu-workload".into(),
                cpu: 3,
                stack: vec!["rcutrace_test_hold_task+60 [rcutrace_test]".into()],
            }],
        ),
        record(31_000_000, 0, Vec::new()),
    ];
    let text = live(Format::Text, &run);
    assert!(text.contains("Slowest 2 grace periods (ms):"), "{text}");
    assert!(
        text.contains("stack of pid 185: rcutrace_test_hold_task+60 [rcutrace_test]"),
        "{text}"
    );
    assert_eq!(replayed(&run), text);
    // A flavour's grace period with no summary before it belongs to nothing.
    let orphan = r#"{"type": "rcutrace_grace_period", "data": {"flavor": "srcu", "key": "d", "gp_seq": 1, "started_ns": 0, "duration_ns": 9}}"#;
    assert!(refused(orphan).contains("line 1: a srcu grace period before the summary"));
}

#[test]
fn count_prints_again_with_its_ratios() {
    for entries in [
        vec![
            ("call_rcu".to_string(), 6697),
            ("__rcu_read_lock".into(), 1_400_220),
        ],
        vec![],
    ] {
        for readers_estimate in [
            None,
            Some(ReadersEstimate {
                readers: Some(1_400_220),
                counted: 140_000,
                sampled: Duration::from_nanos(501_012_345),
                windows: 5,
                margin: Some(20_000),
                switching_grace_periods: 12,
                switching_calls_left_out: 9,
            }),
        ] {
            let report = Report {
                time: None,
                maps: vec![Map::Count(CountMap {
                    name: "@".into(),
                    entries: entries.clone(),
                })],
                summary: Summary::Count(CountSummary {
                    elapsed: Duration::from_nanos(5_010_123_456),
                    readers: Some(1_400_220),
                    call_rcu: Some(6697),
                    callbacks: Some(8777),
                    callbacks_of: vec!["call_rcu".into(), "kvfree_call_rcu".into()],
                    grace_periods: Some(462),
                    missed: 3,
                    own_calls_left_out: 0,
                    keyed_losses: Some(KeyedLosses {
                        map_full: 1,
                        stacks_lost: 2,
                    }),
                    readers_estimate,
                    cross_checks: Vec::new(),
                }),
                environment: None,
            };
            assert_eq!(replayed(&report), live(Format::Text, &report));
        }
    }
}

/// A `callbacks` run: two rows, one of them without an invocation.
pub(crate) fn callbacks_report() -> Report {
    let row = |function: &str, invoked| CallbackRow {
        function: function.into(),
        via: "call_rcu".into(),
        queued: invoked + 2,
        invoked,
        pending_at_exit: 2,
        queued_before_tracing: 1,
        unrecorded: 0,
        requeued: 0,
        latency: if invoked > 0 {
            series(None, invoked)
        } else {
            series(None, 0)
        },
    };
    Report {
        time: None,
        maps: vec![
            Map::Hist(HistMap {
                name: "@cblat".into(),
                key: Some("rcu_work_rcufn".into()),
                buckets: log2(&[3_000_000, 20_000_000]),
            }),
            Map::Count(CountMap {
                name: "@cpu_pending".into(),
                entries: Vec::new(),
            }),
            Map::Count(CountMap {
                name: "@cpu_queued".into(),
                entries: vec![("0".into(), 4), ("1".into(), 2)],
            }),
        ],
        summary: Summary::Callbacks(CallbacksSummary {
            elapsed: Duration::from_nanos(5_004_999_999),
            unit: Unit::Ms,
            rows: vec![row("rcu_work_rcufn", 2), row("delayed_put_task_struct", 0)],
            rows_not_shown: 3,
            not_shown: CallbackCounts {
                queued: 9,
                invoked: 8,
                pending_at_exit: 1,
                queued_before_tracing: 4,
            },
            percentile_error: 0.0039,
            totals: CallbackTotals {
                queued: 20,
                invoked: 12,
                kvfree_queued: Some(7),
                missed_by_kernel: 1,
                ..CallbackTotals::default()
            },
            entry_points_not_traced: vec!["call_rcu_hurry".into()],
            entry_points: vec![crate::model::EntryPointCalls {
                function: "call_rcu".into(),
                calls: 21,
                notes: crate::model::checks::Notes {
                    overwritten: 1,
                    waiting_at_close: 0,
                    from_before: 0,
                },
            }],
            cross_checks: Vec::new(),
        }),
        environment: None,
    }
}

#[test]
fn callbacks_print_again() {
    let report = callbacks_report();
    let text = live(Format::Text, &report);
    assert!(text.contains("rcu_work_rcufn"), "{text}");
    assert_eq!(replayed(&report), text);
}

/// A gp run of 384 CPUs, each a last holdout, with its ten slowest grace periods (`--top`
/// 10): JSON keeps every CPU, and `report` lists the same ten as the live text did.
#[test]
fn a_gp_run_of_384_cpus_keeps_every_cpu_and_prints_the_same_ten() {
    use crate::model::{
        CpuHoldouts, GracePeriodRow, GracePeriodsSummary,
        anatomy::{GracePeriod, Holdout},
    };
    let top = 10;
    let holdouts: Vec<CpuHoldouts> = (0..384u32)
        .map(|i| {
            // Most grace periods first, as the tally sorts them.
            let cpu = (i * 7) % 384;
            CpuHoldouts {
                cpus: vec![cpu],
                grace_periods: 1000 - u64::from(i),
                found_by_pass: u64::from(i % 3),
                held_ns: 1_000_000 + u64::from(cpu),
            }
        })
        .collect();
    let slowest = (0..top as u64)
        .map(|i| GracePeriodRow {
            grace_period: GracePeriod {
                gp_seq: 4 * i,
                started_ns: i,
                duration_ns: 90_000_000 - i,
                phases: Default::default(),
                request_wait_ns: None,
                fqs_passes: 1,
                cpus_reported: 384,
                blocked_readers: 0,
                last_holdout: Some(Holdout::Cpu {
                    cpus: vec![7],
                    found_by_pass: false,
                    sample: None,
                }),
                held_ns: 80_000_000,
                expedited: false,
            },
            stack: Vec::new(),
        })
        .collect();
    let count = holdouts.iter().map(|h| h.grace_periods).sum();
    let report = Report {
        time: None,
        maps: vec![Map::Hist(HistMap {
            name: "@gplat".into(),
            key: None,
            buckets: log2(&[3_000_000, 20_000_000]),
        })],
        summary: Summary::GracePeriods(Box::new(GracePeriodsSummary {
            elapsed: Duration::from_secs(10),
            latency: LatencySummary {
                map_name: "@gplat".into(),
                unit: Unit::Ms,
                series: vec![series(None, count)],
                percentile_error: PERCENTILE_ERROR,
                losses: Losses::default(),
                stages: None,
                cross_checks: Vec::new(),
                grace_periods: Vec::new(),
            },
            phases: Vec::new(),
            holdouts_by_cpu: holdouts,
            holdout_cpus_shown: top,
            holdouts_by_task: Vec::new(),
            slowest,
            by_gp_seq: Some(count),
            without_report: 0,
            unassembled: Default::default(),
            lost: Default::default(),
            rcu_node_leaves: Vec::new(),
            expedited: None,
        })),
        environment: None,
    };
    let json = live(Format::Json, &report);
    let saved = parse(json.as_bytes()).unwrap();
    let Summary::GracePeriods(s) = &saved.reports[0].summary else {
        panic!("{json}");
    };
    assert_eq!(s.holdouts_by_cpu.len(), 384);
    assert_eq!(s.holdout_cpus_shown, top);
    let text = live(Format::Text, &report);
    assert!(
        text.contains("Last holdouts, by CPU, most grace periods first (10 of 384 CPUs, --top):\n"),
        "{text}"
    );
    assert!(text.contains("\n  ... 374 more CPUs: "), "{text}");
    assert_eq!(replayed(&report), text);
}

/// bpftrace 0.17's own JSON of the keyed-map run in docs (kstack, comm, pid keys).
#[test]
fn bpftrace_json_prints_as_bpftrace_printed_it() {
    let json = r#"{"type": "attached_probes", "data": {"probes": 2}}
{"type": "map", "data": {"@": {"\n    synchronize_rcu+5\n    __x64_sys_membarrier+490\n    do_syscall_64+135\n    entry_SYSCALL_64_after_hwframe+118\n": 3}}}
{"type": "map", "data": {"@c": {"kworker/1:2": 1, "loadgen": 3}}}
{"type": "hist", "data": {"@h": {"loadgen": [{"min": 4, "max": 7, "count": 3}]}}}
{"type": "map", "data": {"@p": {"152, loadgen": 3}}}
{"type": "lost_events", "data": {"events": 0}}
{"type": "hist", "data": {"@l": [{"max": -1, "count": 1}, {"min": 0, "max": 1, "count": 0}, {"min": 2, "max": 3, "count": 2}, {"min": 4, "max": 5, "count": 0}, {"min": 6, "max": 7, "count": 0}, {"min": 8, "max": 9, "count": 0}, {"min": 10, "count": 1}]}}
"#;
    let saved = parse(json.as_bytes()).unwrap();
    let text = render::banner(Format::Text, saved.probes.unwrap() as usize)
        + &render::output(Format::Text, &saved.reports[0]);
    let bars = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@";
    let half = "@@@@@@@@@@@@@@@@@@@@@@@@@@                          ";
    let none = "                                                    ";
    assert_eq!(
        text,
        format!(
            "Attaching 2 probes...\n\n\n\
             @[\n    synchronize_rcu+5\n    __x64_sys_membarrier+490\n    do_syscall_64+135\n    \
             entry_SYSCALL_64_after_hwframe+118\n]: 3\n\
             @c[kworker/1:2]: 1\n@c[loadgen]: 3\n\
             @h[loadgen]: \n[4, 8)                 3 |{bars}|\n\n\
             @l: \n(..., 0)               1 |{half}|\n[0, 2)                 0 |{none}|\n\
             [2, 4)                 2 |{bars}|\n[4, 6)                 0 |{none}|\n\
             [6, 8)                 0 |{none}|\n[8, 10)                0 |{none}|\n\
             [10, ...)              1 |{half}|\n\n\
             @p[152, loadgen]: 3\n"
        )
    );
}

/// The seed scripts' `@ = count()`, as bpftrace 0.17 saves it.
#[test]
fn bpftrace_scalars_print_as_bpftrace_printed_them() {
    let json = "{\"type\": \"attached_probes\", \"data\": {\"probes\": 1}}\n\
                {\"type\": \"map\", \"data\": {\"@\": 1400220}}\n\
                {\"type\": \"map\", \"data\": {\"@b\": 1}}\n";
    let saved = parse(json.as_bytes()).unwrap();
    let text = render::banner(Format::Text, 1) + &render::output(Format::Text, &saved.reports[0]);
    assert_eq!(text, "Attaching 1 probe...\n\n\n@: 1400220\n@b: 1\n");
    assert_eq!(
        render::banner(Format::Json, 1) + &render::output(Format::Json, &saved.reports[0]),
        json
    );
}

#[test]
fn what_cannot_be_read_is_said() {
    let err =
        parse("{\"type\": \"hist\", \"data\": {\"@h\": 3}}\nnot json\n".as_bytes()).unwrap_err();
    assert!(format!("{err:#}").contains("line 1"), "{err:#}");
    let huge = "{\"type\": \"hist\", \"data\": {\"@h\": [{\"min\": 0, \"max\": 0, \"count\": 1}, \
                {\"min\": 18446744073709551614, \"count\": 1}]}}\n";
    let err = parse(huge.as_bytes()).unwrap_err();
    assert!(
        format!("{err:#}").contains("not one lhist() accepts"),
        "{err:#}"
    );
    let err = parse("{}\nnot json\n".as_bytes()).unwrap_err();
    assert!(format!("{err:#}").contains("line 1"), "{err:#}");
}

fn refused(json: &str) -> String {
    format!("{:#}", parse(json.as_bytes()).unwrap_err())
}

pub(crate) fn count_report(time: Option<&str>, calls: u64, environment: bool) -> Report {
    Report {
        time: time.map(Stamp::interval),
        maps: vec![Map::Count(CountMap {
            name: "@".into(),
            entries: vec![("call_rcu".into(), calls)],
        })],
        summary: Summary::Count(CountSummary {
            elapsed: Duration::from_secs(1),
            call_rcu: Some(calls),
            grace_periods: Some(3),
            ..CountSummary::default()
        }),
        environment: environment.then(Environment::default),
    }
}

/// `count --interval 1`: every interval prints again as it printed, time first.
#[test]
fn interval_runs_print_every_interval_again() {
    let intervals = [
        count_report(Some("10:00:01"), 5, true),
        count_report(Some("10:00:02"), 7, false),
        count_report(Some("10:00:02"), 1, false),
    ];
    let (mut json, mut text) = (
        render::banner(Format::Json, 2),
        render::banner(Format::Text, 2),
    );
    for interval in &intervals {
        json += &render::output(Format::Json, interval);
        text += &render::output(Format::Text, interval);
    }
    let saved = parse(json.as_bytes()).unwrap();
    assert_eq!(saved.reports, intervals);
    let again = saved
        .reports
        .iter()
        .fold(render::banner(Format::Text, 2), |out, r| {
            out + &render::output(Format::Text, r)
        });
    assert_eq!(again, text);
    assert!(text.contains("\n10:00:02\n@[call_rcu]: 1\n"), "{text}");
    // A latency run's intervals too; the environment is said once, in the first.
    let mut json = render::banner(Format::Json, 2);
    let mut expected = Vec::new();
    for (i, time) in ["10:00:01", "10:00:02"].into_iter().enumerate() {
        let mut report = latency(
            vec![hist(None, log2(&[5, 20]))],
            vec![series(None, 2)],
            Unit::Ms,
        );
        report.time = Some(Stamp::interval(time));
        if i > 0 {
            report.environment = None;
        }
        json += &render::output(Format::Json, &report);
        expected.push(report);
    }
    let again = parse(json.as_bytes()).unwrap().reports;
    let as_json = |reports: &[Report]| -> String {
        reports
            .iter()
            .map(|r| render::output(Format::Json, r))
            .collect()
    };
    assert_eq!(as_json(&again), as_json(&expected));
    // A second environment is a second run.
    let twice = json.clone() + &render::output(Format::Json, &expected[0]);
    assert!(refused(&twice).contains("a second run starts here (its own environment"));
}

/// bpftrace's `interval:s:1 { time(); print(@); clear(@); }`.
#[test]
fn bpftrace_time_records_start_intervals() {
    let json = "{\"type\": \"attached_probes\", \"data\": {\"probes\": 2}}\n\
                {\"type\": \"time\", \"data\": \"10:00:01\\n\"}\n\
                {\"type\": \"map\", \"data\": {\"@\": {\"call_rcu\": 4}}}\n\
                {\"type\": \"time\", \"data\": \"10:00:02\\n\"}\n\
                {\"type\": \"map\", \"data\": {\"@\": {\"call_rcu\": 6}}}\n";
    let saved = parse(json.as_bytes()).unwrap();
    let text = saved.reports.iter().fold(String::new(), |out, r| {
        out + &render::output(Format::Text, r)
    });
    assert_eq!(text, "10:00:01\n@[call_rcu]: 4\n10:00:02\n@[call_rcu]: 6\n");
}

#[test]
fn what_is_not_one_whole_run_is_refused_with_its_line() {
    assert_eq!(
        refused(""),
        "it holds no record (the file is empty): not a run saved with -f json or --save"
    );
    assert!(refused("\n\n").contains("no record (only empty lines)"));
    // Two runs concatenated: the second banner, or without banners the second summary.
    let one = live(Format::Json, &count_report(None, 5, true));
    let err = refused(&(one.clone() + &one));
    let lines = one.lines().count();
    assert!(
        err.starts_with(&format!("line {}: a second run starts here", lines + 1)),
        "{err}"
    );
    let bare = render::output(Format::Json, &count_report(None, 5, false));
    let err = refused(&(bare.clone() + &bare));
    assert!(
        err.starts_with(&format!(
            "line {}: a map after the summary of its window (line {})",
            bare.lines().count() + 1,
            bare.lines().count()
        )),
        "{err}"
    );
    // Cut before its summaries: by whole lines, and in the middle of one.
    let run = live(
        Format::Json,
        &latency(
            vec![hist(None, log2(&[5, 20]))],
            vec![series(None, 2)],
            Unit::Ms,
        ),
    );
    let lines: Vec<&str> = run.lines().collect();
    let kept = lines.len() - 1;
    let cut = lines[..kept].join("\n") + "\n";
    let err = refused(&cut);
    assert!(
        err.starts_with("the run has no @srlat's rcutrace_not_measured record: the file ends"),
        "{err}"
    );
    assert!(err.contains("the file was cut short"), "{err}");
    let cut = lines[..kept - 1].join("\n") + "\n";
    assert!(refused(&cut).contains("the file was cut short"));
    let err = refused(&run[..run.len() - 10]);
    assert!(
        err.starts_with(&format!("line {}, the last, is cut short", lines.len())),
        "{err}"
    );
    // An interval cut short before the next one begins.
    let mut json = render::banner(Format::Json, 2)
        + &render::output(Format::Json, &count_report(Some("10:00:01"), 5, true));
    let second = render::output(Format::Json, &count_report(Some("10:00:02"), 5, false));
    let second: Vec<&str> = second.lines().collect();
    json += &(second[..second.len() - 1].join("\n") + "\n");
    let err = refused(&json);
    assert!(
        err.starts_with("the interval that starts on line "),
        "{err}"
    );
    // bpftrace's own runs have no summaries to miss.
    assert!(parse("{\"type\": \"map\", \"data\": {\"@\": 3}}\n".as_bytes()).is_ok());
}

/// bpftrace 0.17's own output (`bpftrace -f json` and `bpftrace` of the scripts beside
/// them in golden/): log2 buckets at or above 2^31 have wrapped 32-bit bounds in its JSON,
/// and print as its text printed them.
#[test]
fn bpftrace_wrapped_bounds_print_as_bpftrace_printed_them() {
    for (json, text) in [
        (
            include_str!("../golden/bpftrace-0.17-issue.json"),
            include_str!("../golden/bpftrace-0.17-issue.txt"),
        ),
        (
            include_str!("../golden/bpftrace-0.17-large-values.json"),
            include_str!("../golden/bpftrace-0.17-large-values.txt"),
        ),
    ] {
        assert!(json.contains("\"min\": -2147483648, \"max\": 0"));
        let saved = parse(json.as_bytes()).unwrap();
        let printed = saved.reports.iter().fold(
            render::banner(Format::Text, saved.probes.unwrap() as usize),
            |out, r| out + &render::output(Format::Text, r),
        );
        assert_eq!(printed, text);
    }
    // Anything else negative is still refused.
    let err = parse(
        "{\"type\": \"hist\", \"data\": {\"@h\": [{\"min\": -5, \"max\": 0, \"count\": 1}]}}\n"
            .as_bytes(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("neither a value nor a wrapped log2 bound"));
}

/// A gp run with expedited grace periods: the JSON marks their rows expedited and carries
/// their summary, `report` prints the same section again, and a run saved before (no
/// expedited summary, no mark) still reads as normal grace periods only.
#[test]
fn a_gp_run_with_expedited_grace_periods_prints_the_same_again() {
    use crate::model::{
        CpuHoldouts, ExpeditedGracePeriods, GracePeriodLosses, GracePeriodRow, GracePeriodsSummary,
        TaskHoldouts,
        anatomy::{GracePeriod, Holdout, Phases, Task},
    };
    let row = |gp_seq: u64, expedited: bool, holdout: Holdout| GracePeriodRow {
        grace_period: GracePeriod {
            gp_seq,
            started_ns: gp_seq,
            duration_ns: 5_000_000,
            phases: Phases {
                quiescent_wait_ns: 4_000_000,
                kthread_wake_ns: 1_000_000,
                ..Default::default()
            },
            request_wait_ns: None,
            fqs_passes: 0,
            cpus_reported: 4,
            blocked_readers: u32::from(matches!(holdout, Holdout::Task { .. })),
            last_holdout: Some(holdout),
            held_ns: 4_000_000,
            expedited,
        },
        stack: Vec::new(),
    };
    let cpu = |cpus: Vec<u32>, found_by_pass| Holdout::Cpu {
        cpus,
        found_by_pass,
        sample: None,
    };
    let reader = Holdout::Task {
        task: Task {
            pid: 438,
            tgid: 438,
            comm: "rcu-workload".into(),
        },
        cpu: 3,
        blocked_ns: 1_029_436_832,
        blocked_at_ns: Some(16_532_516_827),
        stack: None,
    };
    let expedited = ExpeditedGracePeriods {
        durations: series(None, 3),
        holdouts_by_cpu: vec![CpuHoldouts {
            cpus: vec![0, 1],
            grace_periods: 2,
            found_by_pass: 2,
            held_ns: 8_000_000,
        }],
        holdouts_by_task: vec![TaskHoldouts {
            pid: 438,
            comm: "rcu-workload".into(),
            grace_periods: 1,
            held_ns: 4_000_000,
        }],
        slowest: vec![
            row(353, true, reader),
            row(325, true, cpu(vec![0, 1], true)),
        ],
        by_sequence: Some(3),
        without_report: 0,
        unassembled: Default::default(),
    };
    let mut summary = GracePeriodsSummary {
        elapsed: Duration::from_secs(4),
        latency: LatencySummary {
            map_name: "@gplat".into(),
            unit: Unit::Ms,
            series: vec![series(None, 1)],
            percentile_error: PERCENTILE_ERROR,
            losses: Losses::default(),
            stages: None,
            cross_checks: Vec::new(),
            grace_periods: Vec::new(),
        },
        phases: Vec::new(),
        holdouts_by_cpu: vec![CpuHoldouts {
            cpus: vec![3],
            grace_periods: 1,
            found_by_pass: 0,
            held_ns: 4_000_000,
        }],
        holdout_cpus_shown: 1,
        holdouts_by_task: Vec::new(),
        slowest: vec![row(409, false, cpu(vec![3], false))],
        by_gp_seq: Some(1),
        without_report: 0,
        unassembled: Default::default(),
        // Saved and read back by hook, for the text again.
        lost: GracePeriodLosses {
            missed_by_kernel: 3,
            missed_by_hook: [("rcu_read_unlock_special".to_string(), 3)]
                .into_iter()
                .collect(),
            ..Default::default()
        },
        rcu_node_leaves: vec!["0-1".into(), "2-3".into()],
        expedited: Some(Box::new(expedited)),
    };
    let report = |summary: &GracePeriodsSummary| Report {
        time: None,
        maps: vec![Map::Hist(HistMap {
            name: "@gplat".into(),
            key: None,
            buckets: log2(&[5_000_000]),
        })],
        summary: Summary::GracePeriods(Box::new(summary.clone())),
        environment: None,
    };
    let with = report(&summary);
    let json = live(Format::Json, &with);
    assert_eq!(json.matches("\"expedited\": true").count(), 2, "{json}");
    assert!(json.contains("\"by_expedited_sequence\": 3"), "{json}");
    // The reader's switch-out moment is saved and read back.
    assert!(json.contains("\"blocked_at_ns\": 16532516827"), "{json}");
    let saved = parse(json.as_bytes()).unwrap();
    let Summary::GracePeriods(s) = &saved.reports[0].summary else {
        panic!("{json}");
    };
    let slowest = &s.expedited.as_ref().expect("expedited").slowest;
    assert!(
        matches!(
            slowest[0].grace_period.last_holdout,
            Some(Holdout::Task {
                blocked_at_ns: Some(16_532_516_827),
                ..
            })
        ),
        "{slowest:#?}"
    );
    let text = live(Format::Text, &with);
    assert!(
        text.contains(
            "\nExpedited grace periods: 3 in 4.00 s (0.8/s); rcu_state.expedited_sequence \
             advanced by as many\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("CPUs 0-1 (2) (found idle or offline at selection)"),
        "{text}"
    );
    assert!(
        text.contains("blocked reader pid 438 rcu-workload (on CPU 3,"),
        "{text}"
    );
    assert!(
        text.contains("3 missed by the kernel (rcu_read_unlock_special 3)"),
        "{text}"
    );
    assert_eq!(replayed(&with), text);
    // Saved before expedited grace periods were followed.
    summary.expedited = None;
    let without = report(&summary);
    let json = live(Format::Json, &without);
    assert!(!json.contains("expedited"), "{json}");
    let saved = parse(json.as_bytes()).unwrap();
    let Summary::GracePeriods(s) = &saved.reports[0].summary else {
        panic!("{json}");
    };
    assert_eq!((s.expedited.is_none(), s.slowest.len()), (true, 1));
    assert_eq!(replayed(&without), live(Format::Text, &without));
}
