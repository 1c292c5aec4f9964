//! Property tests of the saved-run reader and of what `report` does with what it reads: any
//! file, made of bpftrace's records and rcutrace's own (whole, reordered, repeated, cut short,
//! with any member changed to any value, or lines of no record at all), is read into reports
//! or refused with an error, and every report read prints (text, JSON, folded), adds up to one
//! whole run or is refused, compares with itself and is judged by `--fail-if`: never a panic.
//!
//! The three tests run 100 000 cases between them (`cargo test`, as CI runs it); `PROPTEST_CASES`
//! sets the cases of each instead.

use proptest::{
    prelude::*,
    sample::Index,
    test_runner::{Config, RngAlgorithm},
};
use serde_json::{Map as JsonMap, Value, json};

use crate::{
    model::{
        Buckets, GracePeriodRow, GracePeriodsSummary, LatencySummary, Losses, PhaseStats, Report,
        SeriesStats, Summary, TaskHoldouts, Unit,
        anatomy::{GracePeriod, Holdout, Mode, Phases, Sample, Task},
        stacks,
    },
    render::{self, Format},
    runs::{compare, gate::Condition, intervals, saved},
};
use rcutrace_common::hist::Linear;

/// What `report` does with a file's text: it may refuse it, never panic.
fn report_on(text: &str) {
    let saved = match saved::parse(text.as_bytes()) {
        Ok(saved) => saved,
        Err(error) => {
            // The message and its causes, as main prints them.
            let _ = format!("{error:#}");
            return;
        }
    };
    let banner = saved.probes.unwrap_or(0) as usize;
    for format in [Format::Text, Format::Json, Format::Folded] {
        let mut out = render::banner(format, banner);
        for report in &saved.reports {
            out += &render::output(format, report);
        }
        // What `-f json` printed reads back (or is refused) too.
        if format == Format::Json {
            let _ = saved::parse(out.as_bytes()).map_err(|e| format!("{e:#}"));
        }
    }
    let conditions: Vec<Condition> = ["count < 10", "p99 > +20%", "@srlat mean >= 2ms"]
        .iter()
        .map(|c| c.parse().unwrap())
        .collect();
    // Each interval on its own (`--interval-index`), then the run whole.
    let each = saved.reports.iter().map(|r| vec![r.clone()]);
    for reports in each.chain([saved.reports.clone()]) {
        let Ok(whole) = intervals::whole(reports).map_err(|e| format!("{e:#}")) else {
            continue;
        };
        let comparison = compare::compare(&whole, &whole);
        let _ = render::comparison(&comparison, "a", "b");
        let verdicts = super::gate::judge(&conditions, &comparison, "a", "b");
        let _ = render::verdicts(&verdicts);
        let _ = render::junit(&verdicts);
        if let Ok(stacks) = stacks::of_report(&whole)
            && stacks.exact_total() != Some(0)
        {
            let _ = render::flamegraph(&whole);
        }
    }
}

/// rcutrace's and bpftrace's runs of every kind, as `-f json` writes them: what the cases
/// take apart and change.
fn seeds() -> Vec<Vec<String>> {
    use super::saved::tests::{
        callbacks_report, count_report, hist, latency, live, log2, run_report, series,
    };
    let mut reports = vec![
        count_report(None, 5, true),
        Report::of_counts(
            &[
                ("\n    synchronize_rcu+5\n    do_syscall_64+135\n", 30),
                ("[stack lost], call_rcu", 2),
                ("[other: 3 keys]", 7),
            ],
            None,
        ),
        latency(
            vec![
                hist(Some("kworker/0:1"), log2(&[5, 6])),
                hist(
                    Some("\n    synchronize_rcu+5\n    do_syscall_64+135\n"),
                    log2(&[100, -1, 0]),
                ),
            ],
            vec![
                series(Some("\n    synchronize_rcu+5\n    do_syscall_64+135\n"), 1),
                series(Some("kworker/0:1"), 2),
            ],
            Unit::Ms,
        ),
        latency(
            vec![hist(
                None,
                Buckets::Linear(
                    Linear {
                        min: 0,
                        max: 100,
                        step: 10,
                    },
                    vec![1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                ),
            )],
            vec![series(None, 6)],
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
        callbacks_report(),
        grace_periods(),
        run_report(),
    ];
    let mut staged = latency(
        vec![hist(None, log2(&[6, 0]))],
        vec![series(None, 2)],
        Unit::Ms,
    );
    if let Summary::Latency(summaries) = &mut staged.summary {
        summaries[0].stages = Some(Box::new(crate::model::stages::tests::both_paths()));
    }
    reports.push(staged);
    let mut runs: Vec<String> = reports.iter().map(|r| live(Format::Json, r)).collect();
    // Intervals: count's, its last cumulative, and latency's, whose buckets differ.
    let mut counts = render::banner(Format::Json, 2);
    let mut latencies = render::banner(Format::Json, 2);
    for (i, time) in ["10:00:01", "10:00:02", "10:00:03"].into_iter().enumerate() {
        let mut report = count_report(Some(time), i as u64 + 3, i == 0);
        if let Some(stamp) = report.time.as_mut() {
            stamp.cumulative = i == 2;
        }
        counts += &render::output(Format::Json, &report);
        let mut report = latency(
            vec![hist(None, log2(&[5, 20 << i]))],
            vec![series(None, 2)],
            Unit::Ms,
        );
        report.time = Some(crate::model::Stamp::interval(time));
        if i > 0 {
            report.environment = None;
        }
        latencies += &render::output(Format::Json, &report);
    }
    runs.push(counts);
    runs.push(latencies);
    runs.push(include_str!("../../runs/golden/bpftrace-0.17-issue.json").to_string());
    runs.push(include_str!("../../runs/golden/bpftrace-0.17-large-values.json").to_string());
    runs.iter()
        .map(|run| run.lines().map(String::from).collect())
        .collect()
}

/// A `gp` run: two of the slowest grace periods, one held by a CPU, one by a blocked reader.
fn grace_periods() -> Report {
    let task = Task {
        pid: 152,
        tgid: 150,
        comm: "loadgen".into(),
    };
    let row = |held_ns, last_holdout, stack: &[&str]| GracePeriodRow {
        grace_period: GracePeriod {
            gp_seq: 4,
            started_ns: 1000,
            duration_ns: held_ns * 2,
            phases: Phases {
                init_ns: 10,
                quiescent_wait_ns: held_ns,
                kthread_wake_ns: 5,
                cleanup_ns: held_ns - 15,
            },
            request_wait_ns: Some(3),
            fqs_passes: 2,
            cpus_reported: 2,
            blocked_readers: 1,
            last_holdout,
            held_ns,
            expedited: false,
        },
        stack: stack.iter().map(|f| f.to_string()).collect(),
    };
    let stats = SeriesStats {
        key: None,
        count: 2,
        min_ns: Some(600),
        max_ns: Some(1000),
        mean_ns: Some(800.0),
        percentiles_exact: true,
        percentiles: vec![(0.5, 600.0), (0.99, 1000.0)],
    };
    Report {
        time: None,
        maps: vec![super::saved::tests::hist(
            None,
            super::saved::tests::log2(&[600, 1000]),
        )],
        summary: Summary::GracePeriods(Box::new(GracePeriodsSummary {
            elapsed: std::time::Duration::from_secs(5),
            latency: LatencySummary {
                map_name: "@gplat".into(),
                unit: Unit::Us,
                series: vec![stats.clone()],
                percentile_error: 0.0,
                losses: Losses::default(),
                stages: None,
                cross_checks: Vec::new(),
                grace_periods: Vec::new(),
            },
            phases: vec![PhaseStats {
                name: "init".into(),
                stats,
            }],
            holdouts_by_cpu: Vec::new(),
            holdout_cpus_shown: 10,
            rcu_node_leaves: vec!["0-15".into(), "16-31".into()],
            holdouts_by_task: vec![TaskHoldouts {
                pid: 152,
                comm: "loadgen".into(),
                grace_periods: 1,
                held_ns: 300,
            }],
            slowest: vec![
                row(
                    500,
                    Some(Holdout::Cpu {
                        cpus: vec![1],
                        found_by_pass: false,
                        sample: Some(Sample {
                            task: task.clone(),
                            mode: Mode::Kernel,
                            stack: None,
                        }),
                    }),
                    &["rcu_sched_clock_irq+5", "do_idle+619"],
                ),
                row(
                    300,
                    Some(Holdout::Task {
                        task,
                        cpu: 0,
                        blocked_ns: 250,
                        blocked_at_ns: Some(1_000),
                        stack: None,
                    }),
                    &[],
                ),
            ],
            by_gp_seq: Some(2),
            without_report: 0,
            unassembled: Default::default(),
            lost: Default::default(),
            expedited: None,
        })),
        environment: None,
    }
}

/// Values a member may be changed to: the edges of every number type a record holds, and
/// the strings the reader gives a meaning.
fn value() -> impl Strategy<Value = Value> {
    let numbers = prop_oneof![
        Just(json!(0)),
        Just(json!(1)),
        Just(json!(-1)),
        Just(json!(2)),
        Just(json!(-2147483648i64)),
        Just(json!(2147483648u64)),
        Just(json!(4294967296u64)),
        Just(json!(i64::MIN)),
        Just(json!(i64::MAX)),
        Just(json!(u64::MAX)),
        Just(json!(u64::MAX - 1)),
        Just(json!(1u64 << 63)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (0u64..2000).prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        Just(json!(1e300)),
        Just(json!(-0.5)),
    ];
    let strings = prop_oneof![
        prop::sample::select(vec![
            "",
            "ms",
            "us",
            "ns",
            "s",
            "normal",
            "expedited",
            "cpu",
            "task",
            "user",
            "idle",
            "log2",
            "linear",
            "sparse",
            "@",
            "@srlat",
            "@srelat",
            "@gplat",
            "@h",
            "p50",
            "p99",
            "p99.9",
            "p0",
            "pxyz",
            "call_rcu",
            "10:00:01\n",
            "[stack lost]",
            "[other: 3 keys]",
            "\n    synchronize_rcu+5\n",
            "rcutrace_",
            "hist",
            "map",
        ])
        .prop_map(|s| json!(s)),
        ".{0,6}".prop_map(|s| json!(s)),
    ];
    let leaf = prop_oneof![
        4 => numbers,
        2 => strings,
        1 => any::<bool>().prop_map(|b| json!(b)),
        1 => Just(Value::Null),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec(("[a-z_@]{0,6}", inner), 0..3)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// The `index`th value of `root` in depth-first order (the root first).
fn node(root: &mut Value, index: usize) -> &mut Value {
    fn walk<'a>(value: &'a mut Value, left: &mut usize) -> Option<&'a mut Value> {
        if *left == 0 {
            return Some(value);
        }
        *left -= 1;
        match value {
            Value::Array(items) => items.iter_mut().find_map(|v| walk(v, left)),
            Value::Object(members) => members.values_mut().find_map(|v| walk(v, left)),
            _ => None,
        }
    }
    fn count(value: &Value) -> usize {
        1 + match value {
            Value::Array(items) => items.iter().map(count).sum(),
            Value::Object(members) => members.values().map(count).sum(),
            _ => 0,
        }
    }
    let mut left = index % count(root);
    // Below the count of values, `left` always names one.
    walk(root, &mut left).expect("an index below the count")
}

/// One change to a record's line.
#[derive(Clone, Debug)]
enum Change {
    /// A value (anywhere: a leaf, a member, the data, the type) replaced.
    Set(Index, Value),
    /// A member of an object removed.
    Remove(Index, Index),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => (any::<Index>(), value()).prop_map(|(at, v)| Change::Set(at, v)),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(at, m)| Change::Remove(at, m)),
    ]
}

fn apply(line: &str, change: &Change) -> String {
    let Ok(mut record) = serde_json::from_str::<Value>(line) else {
        return line.to_string();
    };
    match change {
        Change::Set(at, value) => *node(&mut record, at.index(usize::MAX)) = value.clone(),
        Change::Remove(at, member) => {
            if let Value::Object(members) = node(&mut record, at.index(usize::MAX))
                && !members.is_empty()
            {
                let key = members.keys().nth(member.index(members.len())).cloned();
                if let Some(key) = key {
                    members.remove(&key);
                }
            }
        }
    }
    record.to_string()
}

/// How a case ends: whole, cut at a byte (the last line then has no newline), or missing
/// its last newline.
#[derive(Clone, Debug)]
enum Ending {
    Whole,
    Cut(Index),
    NoLastNewline,
}

fn ending() -> impl Strategy<Value = Ending> {
    prop_oneof![
        3 => Just(Ending::Whole),
        2 => any::<Index>().prop_map(Ending::Cut),
        1 => Just(Ending::NoLastNewline),
    ]
}

fn joined(lines: &[String], ending: &Ending) -> String {
    let mut text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    match ending {
        Ending::Whole => {}
        Ending::NoLastNewline => {
            text.pop();
        }
        Ending::Cut(at) if !text.is_empty() => {
            let mut end = at.index(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        Ending::Cut(_) => {}
    }
    text
}

/// A bucket of bpftrace's JSON, of any bounds: those of log2 and linear layouts, and any.
fn bucket() -> impl Strategy<Value = Value> {
    let bound = prop_oneof![
        4 => Just(None),
        6 => (0u32..66).prop_map(|p| Some(json!(if p == 0 { 0 } else { 1u64 << (p - 1).min(63) }))),
        6 => (0i64..200).prop_map(|n| Some(json!(n * 10))),
        2 => (0i64..200).prop_map(|n| Some(json!(n * 10 - 1))),
        1 => Just(Some(json!(-2147483648i64))),
        1 => any::<i64>().prop_map(|n| Some(json!(n))),
        1 => Just(Some(json!(u64::MAX))),
    ];
    (bound.clone(), bound, prop_oneof![0u64..10, any::<u64>()]).prop_map(|(min, max, count)| {
        let mut bucket = JsonMap::new();
        if let Some(min) = min {
            bucket.insert("min".into(), min);
        }
        if let Some(max) = max {
            bucket.insert("max".into(), max);
        }
        bucket.insert("count".into(), json!(count));
        Value::Object(bucket)
    })
}

/// A histogram's buckets as bpftrace writes them: the non-empty range of a log2 or of a
/// linear layout (so that intervals of one map differ in their ranges), or any buckets.
fn buckets() -> impl Strategy<Value = Value> {
    let log2 = (0u32..64, 1u32..6, prop::collection::vec(1u64..5, 6)).prop_map(
        |(first, slots, counts)| {
            (first..(first + slots).min(64))
                .zip(counts)
                .map(|(slot, count)| match slot {
                    0 => json!({"min": 0, "max": 0, "count": count}),
                    s => {
                        let low = 1u64 << (s - 1);
                        json!({"min": low, "max": low.saturating_mul(2) - 1, "count": count})
                    }
                })
                .collect::<Vec<_>>()
        },
    );
    let linear = (
        prop::sample::select(vec![1u64, 2, 10, 100]),
        0u64..20,
        1u64..6,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(step, first, n, under, over)| {
            let mut buckets = Vec::new();
            if under {
                buckets.push(json!({"max": (first * step) as i64 - 1, "count": 2}));
            }
            for i in first..first + n {
                buckets.push(json!({"min": i * step, "max": (i + 1) * step - 1, "count": i % 3}));
            }
            if over {
                buckets.push(json!({"min": (first + n) * step, "count": 1}));
            }
            buckets
        });
    prop_oneof![
        2 => log2.prop_map(Value::Array),
        2 => linear.prop_map(Value::Array),
        1 => prop::collection::vec(bucket(), 0..6).prop_map(Value::Array),
    ]
}

const NAMES: [&str; 5] = ["@", "@h", "@l", "@srlat", "@c"];
const KEYS: [&str; 5] = [
    "loadgen",
    "kworker/0:1",
    "\n    synchronize_rcu+5\n    do_syscall_64+135\n",
    "152, loadgen",
    "",
];

/// One of bpftrace's records, of the types rcutrace reads and of those it skips.
fn bpftrace_record() -> impl Strategy<Value = String> {
    let name = prop::sample::select(NAMES.to_vec());
    let key = prop::sample::select(KEYS.to_vec());
    let count = prop_oneof![0u64..100, any::<u64>()];
    let map_value = prop_oneof![
        count.clone().prop_map(|n| json!(n)),
        prop::collection::vec((key.clone(), count), 0..4).prop_map(|entries| {
            let entries = entries.into_iter().map(|(k, n)| (k.to_string(), json!(n)));
            Value::Object(entries.collect())
        }),
        value(),
    ];
    let hist_value = prop_oneof![
        buckets(),
        prop::collection::vec((key, buckets()), 0..3).prop_map(|keys| Value::Object(
            keys.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
        )),
    ];
    prop_oneof![
        2 => prop_oneof![0u64..20, any::<u64>()]
            .prop_map(|n| json!({"type": "attached_probes", "data": {"probes": n}})),
        4 => (name.clone(), map_value)
            .prop_map(|(name, v)| json!({"type": "map", "data": {name: v}})),
        5 => (name, hist_value).prop_map(|(name, v)| json!({"type": "hist", "data": {name: v}})),
        2 => (0u32..24, 0u32..60)
            .prop_map(|(h, m)| json!({"type": "time", "data": format!("{h:02}:{m:02}:00\n")})),
        1 => Just(json!({"type": "lost_events", "data": {"events": 3}})),
        1 => Just(json!({"type": "printf", "data": "hello\n"})),
    ]
    .prop_map(|record| record.to_string())
}

/// A record of any type with any data: rcutrace's types, bpftrace's, and others.
fn any_record() -> impl Strategy<Value = String> {
    let kind = prop::sample::select(vec![
        "attached_probes",
        "map",
        "hist",
        "time",
        "rcutrace_count_summary",
        "rcutrace_latency_summary",
        "rcutrace_not_measured",
        "rcutrace_callbacks_summary",
        "rcutrace_gp_summary",
        "rcutrace_grace_period",
        "rcutrace_stall_warning",
        "rcutrace_stall_summary",
        "rcutrace_run_summary",
        "rcutrace_stages_summary",
        "rcutrace_call_stages",
        "rcutrace_environment",
        "rcutrace_empty_map",
        "rcutrace_interval",
        "rcutrace_unknown",
        "join",
    ]);
    (kind, value()).prop_map(|(kind, data)| json!({"type": kind, "data": data}).to_string())
}

/// One line of a mixed case.
#[derive(Clone, Debug)]
enum Line {
    /// A seed run's line, as it is or changed.
    Seed(Index, Index, Option<Change>),
    Bpftrace(String),
    Any(String),
    /// Not a record: any text.
    Text(String),
}

fn line() -> impl Strategy<Value = Line> {
    prop_oneof![
        6 => (any::<Index>(), any::<Index>(), prop::option::weighted(0.3, change()))
            .prop_map(|(run, line, change)| Line::Seed(run, line, change)),
        4 => bpftrace_record().prop_map(Line::Bpftrace),
        1 => any_record().prop_map(Line::Any),
        1 => prop_oneof![Just(String::new()), Just("{}".to_string()), ".{0,12}".prop_map(String::from)]
            .prop_map(Line::Text),
    ]
}

fn config(cases: u32) -> Config {
    Config {
        cases,
        // A failure is printed with its smallest case; nothing is written into the tree.
        failure_persistence: None,
        // ChaCha, the default, unoptimised as tests build it, took more time than the cases.
        rng_algorithm: RngAlgorithm::XorShift,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config(40_000))]

    /// One of the seed runs, its lines picked in any order (some left out, some twice),
    /// some of them changed, and the file cut anywhere.
    #[test]
    fn a_saved_run_reordered_changed_and_cut_is_read_or_refused(
        run in any::<Index>(),
        picks in prop::collection::vec(any::<Index>(), 0..14),
        changes in prop::collection::vec((any::<Index>(), change()), 0..3),
        ending in ending(),
    ) {
        let seeds = seeds_once();
        let seed = run.get(seeds);
        let mut lines: Vec<String> = picks.iter().map(|i| i.get(seed).clone()).collect();
        for (at, change) in &changes {
            if !lines.is_empty() {
                let i = at.index(lines.len());
                lines[i] = apply(&lines[i], change);
            }
        }
        report_on(&joined(&lines, &ending));
    }
}

proptest! {
    #![proptest_config(config(30_000))]

    /// bpftrace's own records in any number and order: maps, histograms of any buckets
    /// (log2 and linear ranges that differ from interval to interval among them), time
    /// records between them, and the records rcutrace skips.
    #[test]
    fn bpftrace_records_in_any_order_are_read_or_refused(
        records in prop::collection::vec(bpftrace_record(), 0..10),
        ending in ending(),
    ) {
        report_on(&joined(&records, &ending));
    }
}

proptest! {
    #![proptest_config(config(30_000))]

    /// Lines of both kinds mixed: seed runs' records (changed or not), bpftrace's, records
    /// of any type with any data, and lines that are no record.
    #[test]
    fn records_of_both_kinds_mixed_are_read_or_refused(
        lines in prop::collection::vec(line(), 0..12),
        ending in ending(),
    ) {
        let seeds = seeds_once();
        let lines: Vec<String> = lines
            .iter()
            .map(|line| match line {
                Line::Seed(run, at, change) => {
                    let run: &Vec<String> = run.get(seeds);
                    let line = at.get(run);
                    change.as_ref().map_or_else(|| line.clone(), |c| apply(line, c))
                }
                Line::Bpftrace(text) | Line::Any(text) | Line::Text(text) => text.clone(),
            })
            .collect();
        report_on(&joined(&lines, &ending));
    }
}

/// The seeds, made once for all the cases of a test binary.
fn seeds_once() -> &'static Vec<Vec<String>> {
    static SEEDS: std::sync::OnceLock<Vec<Vec<String>>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(|| seeds().into_iter().filter(|run| !run.is_empty()).collect())
}

/// The seeds are the runs they stand for: each reads back, so that the cases start from
/// files the reader takes.
#[test]
fn every_seed_reads_back() {
    for run in seeds_once() {
        let text: String = run.iter().map(|l| format!("{l}\n")).collect();
        if let Err(error) = saved::parse(text.as_bytes()) {
            panic!("{error:#}\n{text}");
        }
    }
    assert!(seeds_once().len() >= 10);
}
