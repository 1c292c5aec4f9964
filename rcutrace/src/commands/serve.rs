//! `rcutrace serve`: one window that lasts until SIGTERM or Ctrl-C, every probe of `count
//! --all` plus the grace-period and synchronize timings attached once, and on each scrape the
//! totals since the window opened, as OpenMetrics.

use std::{
    cell::RefCell,
    collections::BTreeMap,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Result, bail};
use rcutrace_common::{
    attribution::Attribution,
    counters::{self, CounterSlot},
    gp::{CpuState, GP_COUNT_KERNEL_STALL_WARNINGS, GpState},
    latency::{STAT_LOST_RING_FULL, STAT_LOST_START_MAP_FULL, STAT_RETURNS_MISSED, STAT_SLOTS},
};

use super::{Need, Period, Request, Watch, WatchNext, trace_with};
use crate::{
    cli::{ServeArgs, ServeBy},
    kernel,
    model::aggregate::{Aggregate, Layout, Series},
    model::attribution::By,
    model::stall::StallCounter,
    model::{Buckets, GracePeriodNow, Labelled, LatencyHistogram, Metrics, ProbeInfo},
    render::{self, Format},
    trace::probes::{
        self, GRACE_PERIODS_NEEDED, KERNEL_STALL_WARNING, Probe, Programs, Side, Timed,
        counted_functions,
    },
    trace::server,
    trace::session::Due,
    trace::tracer::{Constant, Tracer},
};

/// The timed functions, each with the histogram it feeds.
const TIMED: [(Timed, Histogram); 3] = [
    (probes::GP_LATENCY, Histogram::GracePeriod),
    (
        probes::timed_call(1, "synchronize_rcu"),
        Histogram::Synchronize,
    ),
    (
        probes::timed_call(2, "synchronize_rcu_expedited"),
        Histogram::Synchronize,
    ),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Histogram {
    GracePeriod,
    Synchronize,
}

/// A grace period older than this counts as one of rcutrace's stall warnings (`stall`'s
/// first default threshold).
const STALL_WARNING_AGE: Duration = Duration::from_secs(1);

pub async fn run(args: &ServeArgs) -> Result<()> {
    // Before anything is loaded: a port in use fails at once.
    let listener = server::listen(args.listen).await?;
    let by = args.by.map(|ServeBy::Cpu| By::Cpu);
    let mut probes: Vec<Probe> = counted_functions(true).map(|c| c.probe).collect();
    probes.extend(TIMED.iter().flat_map(|(t, _)| [t.entry, t.exit]));
    // The grace period in progress, kept by the kernel side of `gp` without sending events;
    // where the kernel's layout cannot be read, the other metrics are served without it.
    let layout = match kernel::rcu_state::layout() {
        Ok(layout) => Some(layout),
        Err(e) => {
            eprintln!("rcutrace: warning: no grace-period age or holdout metrics: {e:#}");
            None
        }
    };
    let mut constants = vec![
        Constant::U32("SAME_FUNCTION_MASK", same_function_mask()),
        Constant::U32("TARGET_TGID", 0),
    ];
    let online = kernel::online_cpus()?;
    if let Some(layout) = &layout {
        probes.extend_from_slice(GRACE_PERIODS_NEEDED);
        if layout.stall_warning.is_some() {
            probes.push(KERNEL_STALL_WARNING);
        }
        constants.extend(super::gp::constants(
            layout,
            kernel::possible_cpus()?,
            false,
        ));
    }
    let stalls = RefCell::new(StallCounter::default());
    let mut watch_stalls = |tracer: &Tracer| {
        if let Some(now) = grace_period_now(tracer, &online)? {
            stalls
                .borrow_mut()
                .observe(now.gp_seq, now.age, STALL_WARNING_AGE);
        }
        Ok(WatchNext::Continue)
    };
    // Nanosecond log2 slots: one display unit is one nanosecond.
    let aggregate = RefCell::new(Aggregate::new(Layout::Log2, vec![1; TIMED.len()]));
    let mut consume = |record: &[u8]| aggregate.borrow_mut().add(record);
    trace_with(
        Request {
            probes: &probes,
            constants,
            choice: args.attach,
            by,
            need: Need::Any,
            duration: None,
            interval: None,
            listener: Some(&listener),
            traced_process: None,
            sample_readers: None,
            watch: layout.is_some().then_some(Watch {
                every: Duration::from_millis(100),
                check: &mut watch_stalls,
            }),
            format: Format::Text,
        },
        Some(&mut consume),
        &mut |period| {
            let mut metrics = metrics(period, by, &aggregate.borrow())?;
            if layout.is_some() {
                let now = grace_period_now(period.tracer, &online)?;
                let kernel_warnings = period
                    .counters
                    .array("GP_COUNTS")
                    .get(GP_COUNT_KERNEL_STALL_WARNINGS as usize)
                    .copied()
                    .unwrap_or(0);
                metrics.grace_period = Some(GracePeriodNow {
                    age_s: now.as_ref().map_or(0.0, |n| n.age.as_secs_f64()),
                    holdout_cpus: now.map_or(0, |n| n.holdout_cpus),
                    stall_warnings: vec![
                        ("rcutrace", stalls.borrow().count),
                        ("kernel", kernel_warnings),
                    ],
                });
            }
            Ok(metrics)
        },
        &mut |metrics, due| {
            if let Due::Connection(stream) = due {
                server::answer(stream, render::openmetrics(&metrics));
            }
            Ok(())
        },
    )
    .await?;
    eprintln!("rcutrace: stopped serving; probes detached");
    Ok(())
}

fn same_function_mask() -> u32 {
    TIMED
        .iter()
        .filter(|(t, _)| t.same_function())
        .fold(0u32, |mask, (t, _)| mask | 1 << t.index())
}

/// The grace period waiting for quiescent states now, as the programs keep it.
struct Waiting {
    gp_seq: u64,
    age: Duration,
    holdout_cpus: u64,
}

fn grace_period_now(tracer: &Tracer, online: &[u32]) -> Result<Option<Waiting>> {
    let Some(state) = tracer.array_entries::<GpState>("GP_STATE", 1)?.pop() else {
        return Ok(None);
    };
    if state.waiting_since_ns == 0 {
        return Ok(None);
    }
    let cpus: Vec<CpuState> =
        tracer.array_entries("CPU_STATE", online.iter().max().map_or(0, |m| m + 1))?;
    log::debug!("grace period in progress: {state:?}; per CPU: {cpus:?}");
    let holdout_cpus = online
        .iter()
        .filter(|&&cpu| {
            cpus.get(cpu as usize)
                .is_some_and(|c| c.reported_gp_seq != state.gp_seq)
        })
        .count() as u64;
    Ok(Some(Waiting {
        gp_seq: state.gp_seq,
        age: Duration::from_nanos(kernel::monotonic_ns().saturating_sub(state.waiting_since_ns)),
        holdout_cpus,
    }))
}

/// The totals of the window so far.
fn metrics(period: &Period<'_>, by: Option<By>, aggregate: &Aggregate) -> Result<Metrics> {
    if aggregate.malformed > 0 {
        bail!(
            "{} records in the sample buffer were not samples (rcutrace's eBPF object and loader disagree)",
            aggregate.malformed
        );
    }
    let by_cpu = by == Some(By::Cpu);
    let counts = counts(period, by_cpu);
    let counted = |slot: CounterSlot, function: bool| -> Vec<Labelled<u64>> {
        counts
            .iter()
            .filter(|((s, _), _)| *s == slot)
            .map(|((s, cpu), n)| Labelled {
                function: function.then(|| slot_function(*s).to_string()),
                cpu: *cpu,
                value: *n,
            })
            .collect()
    };
    let mut calls = Vec::new();
    for c in counted_functions(true) {
        if period.attached.iter().any(|(p, _)| *p == c.probe) {
            calls.extend(counted(c.slot(), true));
        }
    }
    let mut grace_period_latency = Vec::new();
    let mut synchronize_latency = Vec::new();
    for (timed, histogram) in &TIMED {
        let function =
            (*histogram == Histogram::Synchronize).then(|| timed.entry.function.to_string());
        let histograms = latency(aggregate.copy(timed.index()), by_cpu, function);
        match histogram {
            Histogram::GracePeriod => grace_period_latency.extend(histograms),
            Histogram::Synchronize => synchronize_latency.extend(histograms),
        }
    }
    let mut kernel_skipped: BTreeMap<&str, u64> = BTreeMap::new();
    for (probe, _) in period.attached {
        *kernel_skipped.entry(probe.function).or_default() +=
            period.counters.missed(period.tracer, &[*probe]);
    }
    let count_losses = period.counters.array("COUNT_LOSSES");
    let stats = period.counters.array("STATS");
    let stat = |slot: u32| -> u64 {
        TIMED
            .iter()
            .map(|(t, _)| {
                stats
                    .get((t.index() * STAT_SLOTS + slot) as usize)
                    .copied()
                    .unwrap_or(0)
            })
            .sum()
    };
    let started = SystemTime::now()
        .checked_sub(period.elapsed)
        .unwrap_or(UNIX_EPOCH)
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    Ok(Metrics {
        calls,
        grace_periods: counted(counters::GP_FQS_LOOP, false),
        readers: counted(counters::READ_LOCK, false),
        grace_period_latency,
        synchronize_latency,
        probes: period
            .attached
            .iter()
            .map(|(probe, method)| ProbeInfo {
                function: probe.function.to_string(),
                side: match probe.side {
                    Side::Entry => "entry",
                    Side::Return => "return",
                },
                program: match probe.programs {
                    Programs::Counter(_) => "count",
                    Programs::Timed(_) => "latency",
                    Programs::Callbacks(_) => "callbacks",
                    Programs::GracePeriod(_) => "grace_periods",
                    Programs::Stages(_) => "stages",
                    Programs::OwnWork(_) => "own_work",
                },
                method: method.to_string(),
            })
            .collect(),
        kernel_skipped: kernel_skipped
            .into_iter()
            .map(|(f, n)| (f.to_string(), n))
            .collect(),
        lost: vec![
            (
                "keyed_map_full",
                count_losses
                    .get(counters::LOST_KEYED_MAP_FULL as usize)
                    .copied()
                    .unwrap_or(0),
            ),
            ("in_flight_map_full", stat(STAT_LOST_START_MAP_FULL)),
            ("ring_buffer_full", stat(STAT_LOST_RING_FULL)),
            ("returns_missed", stat(STAT_RETURNS_MISSED)),
        ],
        start_time_s: started.as_secs_f64(),
        grace_period: None,
    })
}

/// Counts by `(counter slot, cpu)`; `cpu` only when keyed by CPU.
fn counts(period: &Period<'_>, by_cpu: bool) -> BTreeMap<(CounterSlot, Option<u32>), u64> {
    let mut counts = BTreeMap::new();
    if by_cpu {
        for (key, n) in period.counters.keyed_counts() {
            *counts.entry((key.event, Some(key.cpu))).or_default() += n;
        }
    } else {
        for (slot, n) in period.counters.array("COUNTS").iter().enumerate() {
            counts.insert((slot as CounterSlot, None), *n);
        }
    }
    counts
}

fn slot_function(slot: CounterSlot) -> &'static str {
    counted_functions(true)
        .find(|c| c.slot() == slot)
        .map_or("unknown", |c| c.function())
}

/// One histogram per CPU, or one for all; always at least one, so the metric exists from
/// the first scrape.
fn latency(
    series: Vec<(Attribution, Series)>,
    by_cpu: bool,
    function: Option<String>,
) -> Vec<Labelled<LatencyHistogram>> {
    let mut merged: BTreeMap<Option<u32>, Series> = BTreeMap::new();
    for (key, s) in series {
        let cpu = by_cpu.then_some(key.cpu);
        match merged.remove(&cpu) {
            Some(mut m) => {
                m.merge(s);
                merged.insert(cpu, m);
            }
            None => {
                merged.insert(cpu, s);
            }
        }
    }
    if merged.is_empty() && !by_cpu {
        merged.insert(None, Series::new(Layout::Log2));
    }
    merged
        .into_iter()
        .map(|(cpu, s)| {
            let log2_slots = match s.buckets() {
                Buckets::Log2(slots) => slots,
                _ => Vec::new(),
            };
            Labelled {
                function: function.clone(),
                cpu,
                value: LatencyHistogram {
                    log2_slots,
                    count: s.count(),
                    sum_ns: s.sum_ns(),
                },
            }
        })
        .collect()
}
