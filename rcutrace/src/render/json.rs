//! bpftrace's JSON lines (`-f json`): one record a line, `{"type": ..., "data": ...}`, written
//! from the typed records in `rcutrace_common::records` with bpftrace's spacing. rcutrace's
//! extra figures go in records of their own types, so that a consumer of bpftrace's JSON keeps
//! working.

use std::io;

use rcutrace_common::{
    hist::{SlotBounds, log2_bounds, sparse_bounds},
    records::{self, Bucket, HistLayout, HistValue, MapValue, Members, NotMeasured, Record},
};
use serde::Serialize as _;
use serde_json::ser::{CharEscape, Formatter, Serializer};

use crate::{
    model::checks::CrossCheck,
    model::stats,
    model::tree::cpu_list,
    model::{
        Buckets, CallbacksSummary, CountMap, CountSummary, GracePeriodRow, GracePeriodsSummary,
        HistMap, LatencySummary, Map, PerGracePeriod, Report, StallEvent, Summary,
        anatomy::Holdout, maps_in_order, shown_slots, sparse_in_order, stages::StagesSummary,
    },
};

pub fn banner(probes: usize) -> String {
    line(&Record::AttachedProbes {
        probes: probes as u64,
    })
}

pub fn report(report: &Report) -> String {
    records(report).iter().map(line).collect()
}

/// The records of a whole report, in output order.
fn records(report: &Report) -> Vec<Record> {
    // An interval opens with its time, as bpftrace's `time()` prints it, then says what its
    // figures cover.
    let mut records: Vec<Record> = report
        .time
        .iter()
        .flat_map(|stamp| {
            [
                Record::Time(format!("{}\n", stamp.time)),
                Record::Interval {
                    cumulative: stamp.cumulative,
                },
            ]
        })
        .collect();
    records.extend(
        report
            .environment
            .iter()
            .map(|e| Record::Environment(e.clone())),
    );
    let mut keyed_hists: Vec<&HistMap> = Vec::new();
    for map in maps_in_order(&report.maps) {
        // The keys of one histogram map, in order, make one record.
        if let Some(first) = keyed_hists.first()
            && map.name() != first.name
        {
            records.push(keyed_hist_map(&keyed_hists));
            keyed_hists.clear();
        }
        match map {
            // bpftrace prints no record for a map it never wrote; rcutrace says it was there,
            // in a record of its own, so that `report` prints its empty line again.
            Map::Count(m) if m.entries.is_empty() => records.push(empty_map(map)),
            Map::Hist(h) if h.is_empty() => records.push(empty_map(map)),
            Map::Count(m) => records.push(count_map(m)),
            Map::Hist(h) if h.key.is_some() => keyed_hists.push(h),
            Map::Hist(h) => records.push(hist_map(h)),
            Map::Scalar(s) => records.push(Record::Map(Members(vec![(
                s.name.clone(),
                MapValue::Scalar(s.value),
            )]))),
        }
    }
    if !keyed_hists.is_empty() {
        records.push(keyed_hist_map(&keyed_hists));
    }
    match &report.summary {
        Summary::Count(s) => records.push(Record::CountSummary(count_summary(s))),
        Summary::Latency(summaries) => {
            for summary in summaries {
                let layout = report.maps.iter().find_map(|map| match map {
                    Map::Hist(h) if h.name == summary.map_name => Some(hist_layout(&h.buckets)),
                    _ => None,
                });
                records.extend(latency_summary(summary, layout));
            }
        }
        Summary::Callbacks(s) => records.push(Record::CallbacksSummary(callbacks_summary(s))),
        Summary::Run(run) => {
            for summary in &run.latency {
                let layout = report.maps.iter().find_map(|map| match map {
                    Map::Hist(h) if h.name == summary.map_name => Some(hist_layout(&h.buckets)),
                    _ => None,
                });
                records.extend(latency_summary(summary, layout));
            }
            records.push(Record::RunSummary(run.figures.clone()));
        }
        Summary::Stall(s) => records.push(Record::StallSummary(records::StallSummary {
            elapsed_s: s.elapsed.as_secs_f64(),
            thresholds_ns: s.thresholds.iter().map(|t| t.as_nanos() as u64).collect(),
            flavor_thresholds_ns: s
                .flavor_thresholds
                .iter()
                .map(|t| t.as_nanos() as u64)
                .collect(),
            warnings: s.warnings,
            expedited_warnings: s.expedited_warnings,
            kernel_warnings: s.kernel_warnings,
            stalls_ended: s.stalls_ended,
            stopped_at_warning: s.stopped_at_warning,
        })),
        Summary::GracePeriods(s) => {
            let layout = report.maps.iter().find_map(|map| match map {
                Map::Hist(h) if h.name == s.latency.map_name => Some(hist_layout(&h.buckets)),
                _ => None,
            });
            records.extend(latency_summary(&s.latency, layout));
            records.push(Record::GracePeriodsSummary(grace_periods_summary(s)));
            records.extend(
                s.slowest
                    .iter()
                    .chain(s.expedited.iter().flat_map(|e| &e.slowest))
                    .map(|row| Record::GracePeriod(grace_period(row))),
            );
        }
    }
    records
}

/// One of `rcutrace stall`'s events as one JSON line.
pub fn stall_event(event: &StallEvent) -> String {
    let nanos = |d: std::time::Duration| d.as_nanos() as u64;
    let record = match event {
        StallEvent::Warning {
            time,
            warning: w,
            cpu_stacks,
            blocked_stacks,
        } => {
            let cpus = w
                .cpus
                .iter()
                .zip(cpu_stacks)
                .map(|(cpu, stack)| records::StallHoldout {
                    kind: "cpu".into(),
                    cpu: cpu.cpu,
                    pid: cpu.sample.as_ref().map(|s| s.task.pid),
                    comm: cpu.sample.as_ref().map(|s| s.task.comm.clone()),
                    mode: cpu.sample.as_ref().map(|s| s.mode.name().into()),
                    tick_arriving: cpu.tick_arriving,
                    blocked_ns: None,
                    stack: stack.clone(),
                });
            let blocked =
                w.blocked
                    .iter()
                    .zip(blocked_stacks)
                    .map(|((reader, blocked_for), stack)| records::StallHoldout {
                        kind: "task".into(),
                        cpu: reader.cpu,
                        pid: Some(reader.task.pid),
                        comm: Some(reader.task.comm.clone()),
                        mode: None,
                        tick_arriving: None,
                        blocked_ns: Some(nanos(*blocked_for)),
                        stack: stack.clone(),
                    });
            Record::StallWarning(records::StallWarning {
                time: time.clone(),
                gp_seq: w.gp_seq as i64,
                age_ns: nanos(w.age),
                threshold_ns: nanos(w.threshold),
                holdouts: cpus.chain(blocked).collect(),
                kthread_pid: w.kthread_starved.map_or(0, |(pid, _)| pid),
                kthread_not_run_ns: w.kthread_starved.map(|(_, idle)| nanos(idle)),
            })
        }
        StallEvent::KernelWarning {
            time,
            rcuname,
            msg,
            cpu,
            rcutrace_earlier,
        } => Record::KernelStallWarning(records::KernelStallWarning {
            time: time.clone(),
            rcuname: rcuname.clone(),
            msg: msg.clone(),
            cpu: *cpu,
            rcutrace_earlier_ns: rcutrace_earlier.map(nanos),
        }),
        StallEvent::ExpeditedWarning {
            time,
            warning,
            waiting_for,
        } => Record::ExpeditedStallWarning(records::ExpeditedStallWarning {
            time: time.clone(),
            age_ns: nanos(warning.age),
            threshold_ns: nanos(warning.threshold),
            waiting_for: waiting_for.as_ref().map(|w| records::ExpeditedWaitingFor {
                cpus: w.cpus.clone(),
                blocked_tasks: w.blocked_tasks,
            }),
        }),
        StallEvent::ExpeditedEnded { time, ended } => {
            Record::ExpeditedStallEnded(records::ExpeditedStallEnded {
                time: time.clone(),
                duration_ns: nanos(ended.duration),
                warnings: ended.warnings,
            })
        }
        StallEvent::FlavorWarning {
            time,
            flavor,
            key,
            warning,
        } => Record::FlavorStallWarning(records::FlavorStallWarning {
            time: time.clone(),
            flavor: flavor.to_string(),
            key: key.clone(),
            age_ns: nanos(warning.age),
            threshold_ns: nanos(warning.threshold),
            holdout_tasks: warning
                .grace_period
                .holdouts
                .iter()
                .map(|task| task.record())
                .collect(),
            reader_cpus: warning.grace_period.reader_cpus.clone(),
            blocked_tasks: warning
                .blocked
                .iter()
                .map(|task| records::BlockedTaskRecord {
                    pid: task.pid,
                    comm: task.comm.clone(),
                    stack: task.stack.clone(),
                })
                .collect(),
        }),
        StallEvent::FlavorEnded {
            time,
            flavor,
            key,
            ended,
        } => Record::FlavorStallEnded(records::FlavorStallEnded {
            time: time.clone(),
            flavor: flavor.to_string(),
            key: key.clone(),
            duration_ns: nanos(ended.duration),
            warnings: ended.warnings,
        }),
        StallEvent::Ended { time, ended } => Record::StallEnded(records::StallEnded {
            time: time.clone(),
            gp_seq: ended.gp_seq as i64,
            duration_ns: nanos(ended.duration),
            warnings: ended.warnings,
        }),
    };
    line(&record)
}

fn grace_periods_summary(s: &GracePeriodsSummary) -> records::GracePeriodsSummary {
    records::GracePeriodsSummary {
        elapsed_s: s.elapsed.as_secs_f64(),
        elapsed_ns: Some(s.elapsed.as_nanos() as u64),
        unit: s.latency.unit.suffix().into(),
        grace_periods: s.latency.series.first().map_or(0, |series| series.count),
        by_gp_seq: s.by_gp_seq,
        cross_checks: cross_checks(&s.normal_cross_checks()),
        without_report: s.without_report,
        phases: s
            .phases
            .iter()
            .map(|phase| records::PhaseRecord {
                name: phase.name.clone(),
                count: phase.stats.count,
                min_ns: phase.stats.min_ns,
                mean_ns: phase.stats.mean_ns,
                max_ns: phase.stats.max_ns,
                percentiles_ns: percentiles(&phase.stats),
                percentiles_exact: phase.stats.percentiles_exact,
            })
            .collect(),
        holdouts_by_cpu: cpu_holdouts(&s.holdouts_by_cpu),
        holdouts_by_task: task_holdouts(&s.holdouts_by_task),
        begun_before_tracing: s.unassembled.began_before_tracing,
        incomplete: s.unassembled.incomplete,
        unseen: s.unassembled.unseen,
        spurious_inits: s.unassembled.spurious_inits,
        undecoded_reports: s.unassembled.undecoded_reports,
        lost_events: s.lost.events,
        lost_stacks: s.lost.stacks,
        blocked_readers_not_followed: s.lost.blocked_readers,
        kernel_reads_failed: s.lost.kernel_reads,
        missed_by_kernel: s.lost.missed_by_kernel,
        missed_by_hook: s.lost.missed_by_hook.clone(),
        rcu_node_leaves: s.rcu_node_leaves.clone(),
        expedited: s
            .expedited
            .as_ref()
            .map(|e| records::ExpeditedGracePeriodsRecord {
                grace_periods: e.durations.count,
                by_expedited_sequence: e.by_sequence,
                cross_checks: cross_checks(&e.cross_checks()),
                min_ns: e.durations.min_ns,
                mean_ns: e.durations.mean_ns,
                max_ns: e.durations.max_ns,
                percentiles_ns: percentiles(&e.durations),
                percentiles_exact: e.durations.percentiles_exact,
                without_report: e.without_report,
                holdouts_by_cpu: cpu_holdouts(&e.holdouts_by_cpu),
                holdouts_by_task: task_holdouts(&e.holdouts_by_task),
                begun_before_tracing: e.unassembled.began_before_tracing,
                incomplete: e.unassembled.incomplete,
                undecoded_reports: e.unassembled.undecoded_reports,
            }),
    }
}

fn cpu_holdouts(rows: &[crate::model::CpuHoldouts]) -> Vec<records::CpuHoldoutsRecord> {
    rows.iter()
        .map(|row| records::CpuHoldoutsRecord {
            cpu: row.cpus.first().copied().unwrap_or_default(),
            cpu_list: (row.cpus.len() > 1).then(|| cpu_list(&row.cpus)),
            grace_periods: row.grace_periods,
            found_by_pass: row.found_by_pass,
            held_ns: row.held_ns,
        })
        .collect()
}

fn task_holdouts(rows: &[crate::model::TaskHoldouts]) -> Vec<records::TaskHoldoutsRecord> {
    rows.iter()
        .map(|row| records::TaskHoldoutsRecord {
            pid: row.pid,
            comm: row.comm.clone(),
            grace_periods: row.grace_periods,
            held_ns: row.held_ns,
        })
        .collect()
}

fn grace_period(row: &GracePeriodRow) -> records::GracePeriod {
    let gp = &row.grace_period;
    let stack = row.stack.clone();
    let last_holdout = gp.last_holdout.as_ref().map(|holdout| match holdout {
        Holdout::Cpu {
            cpus,
            found_by_pass,
            sample,
        } => records::LastHoldout {
            kind: holdout.kind().into(),
            cpu: holdout.cpu(),
            cpus: Some(cpus.len() as u32),
            cpu_list: Some(cpu_list(cpus)),
            found_by_pass: Some(*found_by_pass),
            pid: sample.as_ref().map(|s| s.task.pid),
            tgid: sample.as_ref().map(|s| s.task.tgid),
            comm: sample.as_ref().map(|s| s.task.comm.clone()),
            mode: sample.as_ref().map(|s| s.mode.name().into()),
            blocked_ns: None,
            blocked_at_ns: None,
            stack,
        },
        Holdout::Task {
            task,
            cpu,
            blocked_ns,
            blocked_at_ns,
            ..
        } => records::LastHoldout {
            kind: holdout.kind().into(),
            cpu: *cpu,
            cpus: None,
            cpu_list: None,
            found_by_pass: None,
            pid: Some(task.pid),
            tgid: Some(task.tgid),
            comm: Some(task.comm.clone()),
            mode: None,
            blocked_ns: Some(*blocked_ns),
            blocked_at_ns: *blocked_at_ns,
            stack,
        },
        Holdout::Readers { task, cpus } => records::LastHoldout {
            kind: holdout.kind().into(),
            cpu: holdout.cpu(),
            cpus: None,
            cpu_list: Some(cpu_list(cpus)),
            found_by_pass: None,
            pid: Some(task.pid),
            tgid: Some(task.tgid),
            comm: Some(task.comm.clone()),
            mode: None,
            blocked_ns: None,
            blocked_at_ns: None,
            stack,
        },
    });
    records::GracePeriod {
        flavor: "normal".into(),
        key: None,
        gp_seq: gp.gp_seq as i64,
        started_ns: gp.started_ns,
        duration_ns: gp.duration_ns,
        init_ns: Some(gp.phases.init_ns),
        quiescent_wait_ns: Some(gp.phases.quiescent_wait_ns),
        kthread_wake_ns: Some(gp.phases.kthread_wake_ns),
        cleanup_ns: Some(gp.phases.cleanup_ns),
        request_wait_ns: gp.request_wait_ns,
        fqs_passes: Some(gp.fqs_passes),
        cpus_reported: Some(gp.cpus_reported),
        blocked_readers: Some(gp.blocked_readers),
        held_ns: Some(gp.held_ns),
        last_holdout,
        expedited: gp.expedited,
        reader_cpus: Vec::new(),
        holdout_tasks: Vec::new(),
        phases: Vec::new(),
        holdout_passes: None,
        waiters: Vec::new(),
        waiters_unlisted: None,
    }
}

fn percentiles(stats: &crate::model::SeriesStats) -> Members<f64> {
    Members(
        stats
            .percentiles
            .iter()
            .map(|&(q, ns)| (stats::quantile_name(q), ns))
            .collect(),
    )
}

fn empty_map(map: &Map) -> Record {
    Record::EmptyMap {
        map: map.name().to_string(),
    }
}

/// One record and its newline, spaced as bpftrace spaces it: `{"a": 1, "b": [2, 3]}`.
fn line(record: &Record) -> String {
    let mut out = Vec::new();
    let mut serializer = Serializer::with_formatter(&mut out, BpftraceStyle);
    // Serializing these types into memory cannot fail: no map key is a non-string.
    let _ = record.serialize(&mut serializer);
    out.push(b'\n');
    String::from_utf8(out).unwrap_or_default()
}

/// serde_json's compact output with bpftrace's separators (`", "`, `": "`), its escapes
/// (`\n`, `\r`, `\t` short, other control characters as `\u00XX`), and numbers as Rust
/// prints them (`7`, not `7.0`).
struct BpftraceStyle;

impl Formatter for BpftraceStyle {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        write!(w, "{value}")
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        match escape {
            CharEscape::Quote => w.write_all(b"\\\""),
            CharEscape::ReverseSolidus => w.write_all(b"\\\\"),
            CharEscape::Solidus => w.write_all(b"/"),
            CharEscape::LineFeed => w.write_all(b"\\n"),
            CharEscape::CarriageReturn => w.write_all(b"\\r"),
            CharEscape::Tab => w.write_all(b"\\t"),
            CharEscape::Backspace => w.write_all(b"\\u0008"),
            CharEscape::FormFeed => w.write_all(b"\\u000c"),
            CharEscape::AsciiControl(byte) => write!(w, "\\u{byte:04x}"),
        }
    }
}

fn count_map(map: &CountMap) -> Record {
    let entries = map
        .entries_in_order()
        .into_iter()
        .map(|(key, value)| (key.clone(), *value))
        .collect();
    Record::Map(Members(vec![(
        map.name.clone(),
        MapValue::Keyed(Members(entries)),
    )]))
}

/// One bucket with bpftrace's inclusive bounds; a missing bound is open.
fn bucket(bounds: SlotBounds, count: u64) -> Bucket {
    let (min, max) = match bounds {
        SlotBounds::Below(bound) => (None, Some(bound as i128 - 1)),
        SlotBounds::Range { low, high } => (Some(low as i128), Some(high as i128 - 1)),
        SlotBounds::From(bound) => (Some(bound as i128), None),
    };
    Bucket { min, max, count }
}

fn hist_map(map: &HistMap) -> Record {
    Record::Hist(Members(vec![(
        map.name.clone(),
        HistValue::Buckets(buckets(map)),
    )]))
}

/// The histograms of one keyed map (all with the same name), as one record.
fn keyed_hist_map(keys: &[&HistMap]) -> Record {
    let members = keys
        .iter()
        .map(|h| (h.key.clone().unwrap_or_default(), buckets(h)))
        .collect();
    Record::Hist(Members(vec![(
        keys[0].name.clone(),
        HistValue::Keyed(Members(members)),
    )]))
}

fn buckets(map: &HistMap) -> Vec<Bucket> {
    match &map.buckets {
        Buckets::Log2(counts) => shown_slots(counts)
            .map(|(slot, count)| bucket(log2_bounds(slot as u32), count))
            .collect(),
        Buckets::Linear(linear, counts) => shown_slots(counts)
            .map(|(slot, count)| bucket(linear.bounds(slot as u64), count))
            .collect(),
        Buckets::Sparse { step, buckets } => sparse_in_order(buckets)
            .into_iter()
            .map(|(b, count)| bucket(sparse_bounds(b, *step), count))
            .collect(),
    }
}

fn count_summary(summary: &CountSummary) -> records::CountSummary {
    let ratio = |count| match summary.per_grace_period(count) {
        PerGracePeriod::Ratio(r) => Some(r),
        _ => None,
    };
    records::CountSummary {
        elapsed_s: summary.elapsed.as_secs_f64(),
        elapsed_ns: u64::try_from(summary.elapsed.as_nanos()).ok(),
        readers: summary.readers,
        call_rcu: summary.call_rcu,
        callbacks: summary.callbacks,
        callbacks_of: Some(summary.callbacks_of.clone()),
        grace_periods: summary.grace_periods,
        readers_per_grace_period: ratio(summary.readers),
        call_rcu_per_grace_period: ratio(summary.call_rcu),
        callbacks_per_grace_period: ratio(summary.callbacks),
        call_rcu_per_second: summary.per_second(summary.call_rcu),
        missed_by_kernel: summary.missed,
        own_calls_left_out: summary.own_calls_left_out,
        keys_lost_to_full_map: summary.keyed_losses.map(|l| l.map_full),
        stacks_lost: summary.keyed_losses.map(|l| l.stacks_lost),
        readers_estimated: summary.readers_estimate.map(|e| records::ReadersEstimated {
            counted: e.counted,
            sampled_ns: u64::try_from(e.sampled.as_nanos()).unwrap_or(u64::MAX),
            windows: e.windows,
            margin_95: e.margin,
            switching_grace_periods: e.switching_grace_periods,
            switching_calls_left_out: e.switching_calls_left_out,
        }),
        cross_checks: cross_checks(&summary.cross_checks),
    }
}

fn cross_checks(checks: &[CrossCheck]) -> Vec<records::CrossCheck> {
    checks
        .iter()
        .map(|c| records::CrossCheck {
            counted: c.counted.clone(),
            value: c.value,
            against: c.against.clone(),
            expected: c.expected,
            bound: c.bound,
            agrees: c.agrees(),
            at_most: c.at_most,
        })
        .collect()
}

/// What the text needs to label a histogram's buckets.
fn hist_layout(buckets: &Buckets) -> HistLayout {
    match buckets {
        Buckets::Log2(_) => HistLayout::Log2,
        Buckets::Linear(linear, _) => HistLayout::Linear {
            min: linear.min,
            max: linear.max,
            step: linear.step,
        },
        Buckets::Sparse { step, .. } => HistLayout::Sparse { step: *step },
    }
}

/// One record per histogram (per key), then the function's losses.
fn latency_summary(summary: &LatencySummary, layout: Option<HistLayout>) -> Vec<Record> {
    let mut records: Vec<Record> = summary
        .series
        .iter()
        .map(|series| {
            Record::LatencySummary(records::LatencySummary {
                map: summary.map_name.clone(),
                key: series.key.clone(),
                unit: summary.unit.suffix().into(),
                count: series.count,
                min_ns: series.min_ns,
                mean_ns: series.mean_ns,
                max_ns: series.max_ns,
                percentiles_ns: Members(
                    series
                        .percentiles
                        .iter()
                        .map(|&(q, ns)| (stats::quantile_name(q), ns))
                        .collect(),
                ),
                percentile_error: summary.percentile_error,
                percentiles_exact: series.percentiles_exact,
                layout,
            })
        })
        .collect();
    let losses = &summary.losses;
    records.push(Record::NotMeasured(NotMeasured {
        map: summary.map_name.clone(),
        in_flight_at_exit: losses.in_flight_at_exit,
        returns_lost: losses.returns_lost,
        begun_before_tracing: losses.began_before_tracing,
        missed_by_kernel: losses.missed_by_kernel,
        lost_to_full_map: losses.lost_to_full_map,
        stacks_lost: losses.stacks_lost,
        own_calls_left_out: losses.own_calls_left_out,
        cross_checks: cross_checks(&summary.cross_checks),
    }));
    records.extend(
        summary
            .grace_periods
            .iter()
            .cloned()
            .map(Record::GracePeriod),
    );
    if let Some(stages) = &summary.stages {
        records.extend(stages_records(stages));
    }
    records
}

/// `srlat --stages`: the summary of one timed function, then each call listed.
fn stages_records(summary: &StagesSummary) -> Vec<Record> {
    let paths = summary
        .paths
        .iter()
        .map(|path| records::PathStages {
            path: path.path.name().into(),
            calls: path.calls,
            latency_sum_ns: u64::try_from(path.latency_sum_ns).unwrap_or(u64::MAX),
            stages: path
                .stages
                .iter()
                .map(|stage| records::StageRecord {
                    key: stage.key.clone(),
                    name: stage.name.clone(),
                    count: stage.stats.count,
                    sum_ns: u64::try_from(stage.sum_ns).unwrap_or(u64::MAX),
                    min_ns: stage.stats.min_ns,
                    mean_ns: stage.stats.mean_ns,
                    max_ns: stage.stats.max_ns,
                    percentiles_ns: Members(
                        stage
                            .stats
                            .percentiles
                            .iter()
                            .map(|&(q, ns)| (stats::quantile_name(q), ns))
                            .collect(),
                    ),
                })
                .collect(),
            own: path.own,
            piggy_backed: path.piggy_backed,
            ipis: path.ipis,
            expedited_grace_periods: path.expedited_grace_periods,
        })
        .collect();
    let mut out = vec![Record::StagesSummary(records::StagesSummary {
        map: summary.map_name.clone(),
        unit: summary.unit.suffix().into(),
        paths,
        entry_not_seen: summary.not_taken_apart.entry_not_seen,
        grace_period_not_seen: summary.not_taken_apart.grace_period_not_seen,
        adjusted: summary.adjusted,
        out_of_order: summary.out_of_order,
        events_lost: summary.events_lost,
        wake_from_gp: summary.wake_from_gp,
        calls_not_listed: summary.calls_not_listed,
    })];
    out.extend(summary.calls.iter().map(|call| {
        let stages_ns = call
            .path
            .stages()
            .iter()
            .zip(&call.stages_ns)
            .filter_map(|((key, _), ns)| Some((key.to_string(), (*ns)?)))
            .collect();
        Record::CallStages(records::CallStages {
            map: summary.map_name.clone(),
            path: call.path.name().into(),
            tid: call.tid,
            started_ns: call.started_ns,
            latency_ns: call.latency_ns,
            gp_seq: call.gp_seq,
            stages_ns: Members(stages_ns),
            piggy_backed: call.piggy_backed,
            ipis: call.ipis,
            adjusted: call.adjusted,
            out_of_order: call.out_of_order,
        })
    }));
    out
}

fn callbacks_summary(summary: &CallbacksSummary) -> records::CallbacksSummary {
    let totals = &summary.totals;
    let rows = summary
        .rows
        .iter()
        .map(|row| records::CallbackRow {
            function: row.function.clone(),
            via: row.via.clone(),
            queued: row.queued,
            invoked: row.invoked,
            pending_at_exit: row.pending_at_exit,
            queued_before_tracing: row.queued_before_tracing,
            not_recorded: row.unrecorded,
            requeued: row.requeued,
            min_ns: row.latency.min_ns,
            mean_ns: row.latency.mean_ns,
            max_ns: row.latency.max_ns,
            percentiles_ns: Members(
                row.latency
                    .percentiles
                    .iter()
                    .map(|&(q, ns)| (stats::quantile_name(q), ns))
                    .collect(),
            ),
        })
        .collect();
    records::CallbacksSummary {
        elapsed_s: summary.elapsed.as_secs_f64(),
        elapsed_ns: u64::try_from(summary.elapsed.as_nanos()).ok(),
        unit: summary.unit.suffix().into(),
        percentile_error: summary.percentile_error,
        rows,
        rows_not_shown: summary.rows_not_shown as u64,
        queued_not_shown: summary.not_shown.queued,
        invoked_not_shown: summary.not_shown.invoked,
        pending_not_shown: summary.not_shown.pending_at_exit,
        before_not_shown: summary.not_shown.queued_before_tracing,
        queued: totals.queued,
        invoked: totals.invoked,
        pending_at_exit: totals.pending_at_exit,
        kvfree_queued: totals.kvfree_queued,
        not_timed: records::CallbacksNotTimed {
            queued_before_tracing: totals.queued_before_tracing,
            pending_map_full: totals.pending_map_full,
            requeued: totals.requeued,
            missed_by_kernel: totals.missed_by_kernel,
            missed_by_kprobe_layer: totals.missed_by_kprobe_layer,
            invocations_missed: totals.invocations_missed,
            row_map_full_queued: totals.rows_map_full_queued,
            row_map_full_invoked: totals.rows_map_full_invoked,
        },
        entry_points_not_traced: summary.entry_points_not_traced.clone(),
        own_queued: totals.own_queued,
        entry_points: summary
            .entry_points
            .iter()
            .map(|e| records::EntryPointNotes {
                entry_point: e.function.clone(),
                calls: e.calls,
                notes_overwritten: e.notes.overwritten,
                notes_waiting_at_close: e.notes.waiting_at_close,
                notes_from_before: e.notes.from_before,
            })
            .collect(),
        cross_checks: cross_checks(&summary.cross_checks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Losses, SeriesStats, Unit};
    use rcutrace_common::hist::{LOG2_SLOTS, Linear, log2_slot};

    fn hist_record(buckets: Buckets) -> String {
        line(&hist_map(&HistMap {
            name: "@h".into(),
            key: None,
            buckets,
        }))
    }

    #[test]
    fn banner_and_maps_follow_bpftrace() {
        assert_eq!(
            banner(3),
            "{\"type\": \"attached_probes\", \"data\": {\"probes\": 3}}\n"
        );
        let out = line(&count_map(&CountMap {
            name: "@c".into(),
            entries: vec![("7".into(), 2), ("1".into(), 1)],
        }));
        assert_eq!(
            out,
            "{\"type\": \"map\", \"data\": {\"@c\": {\"1\": 1, \"7\": 2}}}\n"
        );
    }

    #[test]
    fn log2_buckets_have_inclusive_bounds_and_are_trimmed() {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        for v in [-1i64, 0, 1, 2, 5, 20] {
            counts[log2_slot(v) as usize] += 1;
        }
        assert_eq!(
            hist_record(Buckets::Log2(counts)),
            "{\"type\": \"hist\", \"data\": {\"@h\": [{\"max\": -1, \"count\": 1}, \
             {\"min\": 0, \"max\": 0, \"count\": 1}, {\"min\": 1, \"max\": 1, \"count\": 1}, \
             {\"min\": 2, \"max\": 3, \"count\": 1}, {\"min\": 4, \"max\": 7, \"count\": 1}, \
             {\"min\": 8, \"max\": 15, \"count\": 0}, {\"min\": 16, \"max\": 31, \"count\": 1}]}}\n"
        );
        let mut top = vec![0; LOG2_SLOTS as usize];
        top[64] = 1;
        assert!(hist_record(Buckets::Log2(top)).contains(&format!(
            "{{\"min\": {}, \"max\": {}, \"count\": 1}}",
            1u64 << 62,
            u64::MAX >> 1
        )));
    }

    #[test]
    fn linear_and_sparse_buckets() {
        let linear = Linear {
            min: 0,
            max: 10,
            step: 5,
        };
        assert_eq!(
            hist_record(Buckets::Linear(linear, vec![1, 0, 2, 3])),
            "{\"type\": \"hist\", \"data\": {\"@h\": [{\"max\": -1, \"count\": 1}, \
             {\"min\": 0, \"max\": 4, \"count\": 0}, {\"min\": 5, \"max\": 9, \"count\": 2}, \
             {\"min\": 10, \"count\": 3}]}}\n"
        );
        assert_eq!(
            hist_record(Buckets::Sparse {
                step: 100,
                buckets: vec![(3, 1), (1, 2)]
            }),
            "{\"type\": \"hist\", \"data\": {\"@h\": [{\"min\": 100, \"max\": 199, \"count\": 2}, \
             {\"min\": 300, \"max\": 399, \"count\": 1}]}}\n"
        );
    }

    #[test]
    fn a_keyed_histogram_is_one_record_with_a_member_per_key() {
        let hist = |key: &str, counts: Vec<u64>| {
            Map::Hist(HistMap {
                name: "@h".into(),
                key: Some(key.into()),
                buckets: Buckets::Log2(counts),
            })
        };
        let report = Report {
            time: None,
            maps: vec![
                hist("big", vec![0, 0, 0, 5]),
                hist("small", vec![0, 0, 0, 1]),
            ],
            summary: Summary::Latency(Vec::new()),
            environment: None,
        };
        assert_eq!(
            super::report(&report),
            "{\"type\": \"hist\", \"data\": {\"@h\": {\"small\": [{\"min\": 2, \"max\": 3, \
             \"count\": 1}], \"big\": [{\"min\": 2, \"max\": 3, \"count\": 5}]}}}\n"
        );
    }

    #[test]
    fn summaries_are_records_of_their_own() {
        let report = Report {
            time: None,
            maps: vec![],
            summary: Summary::Latency(vec![LatencySummary {
                map_name: "@srlat".into(),
                unit: Unit::Ms,
                series: vec![SeriesStats {
                    key: None,
                    count: 2,
                    min_ns: Some(5),
                    max_ns: Some(9),
                    mean_ns: Some(7.0),
                    percentiles_exact: false,
                    percentiles: vec![(0.5, 5.0), (0.999, 9.0)],
                }],
                percentile_error: 0.0078125,
                losses: Losses {
                    in_flight_at_exit: 1,
                    ..Losses::default()
                },
                stages: None,
                cross_checks: Vec::new(),
                grace_periods: Vec::new(),
            }]),
            environment: None,
        };
        assert_eq!(
            super::report(&report),
            "{\"type\": \"rcutrace_latency_summary\", \"data\": {\"map\": \"@srlat\", \
             \"unit\": \"ms\", \"count\": 2, \"min_ns\": 5, \"mean_ns\": 7, \"max_ns\": 9, \
             \"percentiles_ns\": {\"p50\": 5, \"p99.9\": 9}, \"percentile_error\": 0.0078125}}\n\
             {\"type\": \"rcutrace_not_measured\", \"data\": {\"map\": \"@srlat\", \
             \"in_flight_at_exit\": 1, \"returns_lost\": 0, \"begun_before_tracing\": 0, \
             \"missed_by_kernel\": 0, \"lost_to_full_map\": 0}}\n"
        );
        let count = line(&Record::CountSummary(count_summary(&CountSummary {
            grace_periods: Some(0),
            readers: Some(3),
            ..CountSummary::default()
        })));
        assert!(
            count.contains("\"readers_per_grace_period\": null"),
            "{count}"
        );
        assert!(count.contains("\"grace_periods\": 0"), "{count}");
    }

    /// bpftrace -f json prints `time()` as `{"type": "time", "data": "HH:MM:SS\n"}`.
    #[test]
    fn an_interval_starts_with_a_time_record() {
        let report = Report {
            environment: None,
            time: Some(crate::model::Stamp::interval("12:00:05")),
            maps: vec![Map::Count(CountMap {
                name: "@".into(),
                entries: vec![("call_rcu".into(), 3)],
            })],
            summary: Summary::Latency(Vec::new()),
        };
        assert_eq!(
            super::report(&report),
            "{\"type\": \"time\", \"data\": \"12:00:05\\n\"}\n\
             {\"type\": \"rcutrace_interval\", \"data\": {\"cumulative\": false}}\n\
             {\"type\": \"map\", \"data\": {\"@\": {\"call_rcu\": 3}}}\n"
        );
    }

    #[test]
    fn strings_are_escaped_as_bpftrace_escapes_them() {
        let out = line(&count_map(&CountMap {
            name: "@".into(),
            entries: vec![("a\"b\\c\n\t\u{1}\u{8}/".into(), 1)],
        }));
        assert_eq!(
            out,
            "{\"type\": \"map\", \"data\": {\"@\": {\"a\\\"b\\\\c\\n\\t\\u0001\\u0008/\": 1}}}\n"
        );
    }

    #[test]
    fn numbers_print_as_before() {
        let out = line(&Record::CountSummary(count_summary(&CountSummary {
            elapsed: std::time::Duration::from_millis(5010),
            grace_periods: Some(462),
            readers: Some(1_400_220),
            call_rcu: Some(6697),
            callbacks: Some(8777),
            callbacks_of: vec!["call_rcu".into()],
            missed: 0,
            own_calls_left_out: 0,
            keyed_losses: None,
            readers_estimate: None,
            cross_checks: Vec::new(),
        })));
        assert_eq!(
            out,
            "{\"type\": \"rcutrace_count_summary\", \"data\": {\"elapsed_s\": 5.01, \
             \"elapsed_ns\": 5010000000, \"readers\": 1400220, \"call_rcu\": 6697, \
             \"callbacks\": 8777, \"callbacks_of\": [\"call_rcu\"], \"grace_periods\": 462, \"readers_per_grace_period\": 3030.779220779221, \
             \"call_rcu_per_grace_period\": 14.495670995670995, \
             \"callbacks_per_grace_period\": 18.9978354978355, \
             \"call_rcu_per_second\": 1336.7265469061877, \"missed_by_kernel\": 0}}\n"
        );
    }

    /// bpftrace's own records leave it out; rcutrace's own record says it was there.
    #[test]
    fn an_empty_map_has_no_bpftrace_record() {
        let report = Report {
            time: None,
            maps: vec![Map::Hist(HistMap {
                name: "@gplat".into(),
                key: None,
                buckets: Buckets::Log2(vec![0; LOG2_SLOTS as usize]),
            })],
            summary: Summary::Count(CountSummary::default()),
            environment: None,
        };
        let out = super::report(&report);
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(
            out.starts_with(
                "{\"type\": \"rcutrace_empty_map\", \"data\": {\"map\": \"@gplat\"}}\n\
                 {\"type\": \"rcutrace_count_summary\""
            ),
            "{out}"
        );
    }

    /// What the renderer writes, a reader of the records gets back.
    #[test]
    fn lines_decode_into_the_same_records() {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        counts[log2_slot(-3) as usize] = 1;
        counts[64] = 2;
        let report = Report {
            time: None,
            maps: vec![
                Map::Hist(HistMap {
                    name: "@h".into(),
                    key: None,
                    buckets: Buckets::Log2(counts),
                }),
                Map::Count(CountMap {
                    name: "@".into(),
                    entries: vec![("call_rcu".into(), 3)],
                }),
            ],
            summary: Summary::Count(CountSummary::default()),
            environment: None,
        };
        let decoded: Vec<Record> = super::report(&report)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(decoded, records(&report));
    }
}
