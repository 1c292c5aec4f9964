//! `rcutrace serve`: one window that lasts until SIGTERM or Ctrl-C, every probe of `count
//! --all` plus the grace-period and synchronize timings attached once, and on each scrape the
//! totals since the window opened, as OpenMetrics. Where the kernel's RCU state can be read,
//! `gp`'s programs are attached too: their events are assembled as `gp` assembles them
//! (without stacks), for the phase histograms and the last holdouts. With `--flavor`, tasks
//! RCU's and SRCU's grace periods are followed as `stall --flavor` follows them, and served
//! by flavour and key.

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet, HashMap},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Result, bail};
use rcutrace_common::{
    attribution::Attribution,
    counters::{self, CounterSlot},
    gp::{GP_COUNT_KERNEL_STALL_WARNINGS, GP_LOST_EVENTS},
    latency::{
        RECORD_SAMPLE, STAT_LOST_RING_FULL, STAT_LOST_START_MAP_FULL, STAT_RETURNS_MISSED,
        STAT_SLOTS, record_kind,
    },
};

use crate::{
    cli::{ServeArgs, ServeBy},
    commands::{
        followed_flavours::FollowedFlavours,
        naming,
        publish::{Delivering, Sink},
    },
    kernel,
    kernel::{cgroups::CgroupPaths, symbols::keeper::SymbolKeeper},
    model::aggregate::{Aggregate, Layout, Series},
    model::attribution::{By, StickyTop},
    model::flavour_grace_periods::FlavourTally,
    model::stall::StallCounter,
    model::{
        Buckets, FlavourMetrics, FlavourSeries, GracePeriodMetrics, Labelled, LastHoldout,
        LatencyHistogram, Metrics, ProbeInfo, Unit, anatomy::Assembler, grace_periods::Tally,
    },
    render,
    trace::engine::{Ends, Hooks, Need, Period, Reporting, Request, trace_with},
    trace::grace_periods::{self, GpEvents, expedited_state, grace_period_now},
    trace::probes::{
        self, CountedSet, EXPEDITED_END, EXPEDITED_START, GRACE_PERIODS, KERNEL_STALL_WARNING,
        Probe, Programs, Side, Timed, counted_functions,
    },
    trace::server,
    trace::session::Due,
    trace::tracer::{Constant, Tracer},
    trace::watch::{Watch, WatchNext},
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

pub async fn run(args: &ServeArgs, sink: Sink) -> Result<()> {
    // Before anything is loaded: a port in use fails at once.
    let listener = server::listen(args.listen).await?;
    let by = args.by.map(|by| match by {
        ServeBy::Cpu => By::Cpu,
        ServeBy::Cgroup => By::Cgroup,
    });
    let mut labels = SeriesLabels {
        by,
        cgroups: CgroupPaths::new(),
        top: StickyTop::new(args.top),
    };
    let mut probes: Vec<Probe> = counted_functions(CountedSet::All)
        .map(|c| c.probe)
        .collect();
    probes.extend(TIMED.iter().flat_map(|(t, _)| t.probes()));
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
        probes.extend(GRACE_PERIODS.without_samples());
        probes.extend([EXPEDITED_START, EXPEDITED_END]);
        if layout.stall_warning.is_some() {
            probes.push(KERNEL_STALL_WARNING);
        }
        constants.extend(grace_periods::constants(
            layout,
            kernel::possible_cpus()?,
            GpEvents::WithoutSamples,
        ));
    }
    // The other flavours' grace periods, followed as `stall --flavor` follows them.
    let flavours = if args.flavors.is_empty() {
        None
    } else {
        let (followed, attaching) =
            FollowedFlavours::plan(args.flavors.iter().map(|f| f.flavor()), true)?;
        for probe in attaching.probes {
            if !probes.contains(&probe) {
                probes.push(probe);
            }
        }
        constants.extend(attaching.constants);
        Some(Flavours::new(followed))
    };
    let flavours = RefCell::new(flavours);
    let symbols = SymbolKeeper::new();
    let assembler = match &layout {
        Some(layout) => Assembler::new(layout.tree.clone(), &online),
        // No grace-period program is attached: nothing reaches it.
        None => Assembler::bounds_only(),
    };
    let grace_periods = RefCell::new(GracePeriods::new(assembler));
    let stalls = RefCell::new(StallCounter::default());
    let mut watch_stalls = |tracer: &mut Tracer| {
        if let Some(now) = grace_period_now(tracer, &online)? {
            stalls
                .borrow_mut()
                .observe(now.gp_seq, now.age, STALL_WARNING_AGE);
        }
        Ok(WatchNext::Continue)
    };
    // Nanosecond log2 slots: one display unit is one nanosecond.
    let aggregate = RefCell::new(Aggregate::new(Layout::Log2, vec![1; TIMED.len()]));
    let mut consume = |record: &[u8]| match record_kind(record) {
        Some(kind) if kind < RECORD_SAMPLE => {
            let mut grace_periods = grace_periods.borrow_mut();
            let Some(event) = grace_periods::decode(record) else {
                grace_periods.malformed += 1;
                return;
            };
            if let Some(flavours) = &mut *flavours.borrow_mut()
                && flavours.add(&event)
            {
                return;
            }
            grace_periods.add(&event);
        }
        _ => aggregate.borrow_mut().add(record),
    };
    let mut answer = |metrics: Metrics, due| {
        if let Due::Connection(stream) = due {
            server::answer(stream, render::openmetrics(&metrics));
        }
        Ok(())
    };
    let mut delivering = Delivering::new(sink, &mut answer);
    trace_with(
        Request {
            probes: &probes,
            constants,
            choice: args.attach,
            by,
            need: Need::Any,
            ends: Ends::default(),
            reporting: Reporting::PerConnection(&listener),
            sample_readers: None,
            hooks: Hooks {
                watch: layout.is_some().then(|| Watch {
                    every: Duration::from_millis(100),
                    check: Box::new(&mut watch_stalls),
                    now: None,
                    reads_events: true,
                }),
                ..Hooks::default()
            },
        },
        Some(&mut consume),
        &mut |period| {
            let mut metrics = metrics(period, &mut labels, &aggregate.borrow())?;
            if let Some(flavours) = &*flavours.borrow() {
                let mut name = naming::domain_names(period.tracer, &symbols);
                metrics.flavours = Some(flavours.metrics(&mut name, kernel::monotonic_ns()));
            }
            if layout.is_some() {
                let now = grace_period_now(period.tracer, &online)?;
                let kernel_warnings = period
                    .counters
                    .array("GP_COUNTS")
                    .get(GP_COUNT_KERNEL_STALL_WARNINGS as usize)
                    .copied()
                    .unwrap_or(0);
                let grace_periods = grace_periods.borrow();
                if grace_periods.malformed > 0 {
                    bail!(
                        "{} records in the sample buffer were neither samples nor grace-period \
                         events (rcutrace's eBPF object and loader disagree)",
                        grace_periods.malformed
                    );
                }
                let tally = &grace_periods.tally;
                // One series per holdout: a CPU, or the CPUs one report named at once (a
                // pass that found a whole idle leaf), labelled by their range.
                let mut by_cpus = std::collections::BTreeMap::new();
                for row in tally.holdouts_by_cpu() {
                    *by_cpus.entry(row.cpus).or_insert(0) += row.grace_periods;
                }
                let mut last_holdouts: Vec<(LastHoldout, u64)> = by_cpus
                    .into_iter()
                    .map(|(cpus, grace_periods)| (LastHoldout::Cpus(cpus), grace_periods))
                    .collect();
                last_holdouts.push((LastHoldout::Task, tally.task_holdouts()));
                last_holdouts.push((LastHoldout::Unseen, tally.without_report()));
                let expedited_attached = [EXPEDITED_START, EXPEDITED_END]
                    .iter()
                    .all(|hook| period.attached.iter().any(|(p, _)| p == hook));
                let expedited_age_s = if expedited_attached {
                    Some(expedited_age(period.tracer)?.as_secs_f64())
                } else {
                    None
                };
                metrics.grace_period = Some(GracePeriodMetrics {
                    age_s: now.as_ref().map_or(0.0, |n| n.age.as_secs_f64()),
                    expedited_age_s,
                    holdout_cpus: now.map_or(0, |n| n.holdout_cpus),
                    stall_warnings: vec![
                        ("rcutrace", stalls.borrow().count),
                        ("kernel", kernel_warnings),
                    ],
                    phases: tally
                        .phase_series()
                        .map(|(phase, series)| (phase, histogram(series)))
                        .collect(),
                    last_holdouts,
                    partial: vec![
                        (
                            "began_before_tracing",
                            grace_periods.assembler.unassembled.began_before_tracing,
                        ),
                        ("incomplete", grace_periods.assembler.unassembled.incomplete),
                        ("unseen", grace_periods.assembler.unassembled.unseen),
                        (
                            "in_progress",
                            u64::from(grace_periods.assembler.in_progress()),
                        ),
                    ],
                });
                let gp_losses = period.counters.array("GP_LOSSES");
                metrics.lost.push((
                    "grace_period_events_ring_full",
                    gp_losses.get(GP_LOST_EVENTS as usize).copied().unwrap_or(0),
                ));
            }
            Ok(metrics)
        },
        &mut delivering,
    )
    .await?;
    delivering.say_detached();
    eprintln!("rcutrace: stopped serving; probes detached");
    Ok(())
}

/// The grace periods completed since the window opened, assembled from `gp`'s events.
struct GracePeriods {
    assembler: Assembler,
    tally: Tally,
    malformed: u64,
}

impl GracePeriods {
    fn new(assembler: Assembler) -> Self {
        GracePeriods {
            assembler,
            // Nothing of the duration's or the slowest is served: the duration histogram
            // is `gplat`'s probe pair's.
            tally: Tally::new(Layout::Log2, Unit::Ns, 0),
            malformed: 0,
        }
    }

    fn add(&mut self, event: &rcutrace_common::gp::GpEvent) {
        self.assembler.add(event);
        for gp in self.assembler.take_done() {
            self.tally.add(gp);
        }
    }
}

/// The other flavours' grace periods completed since the window opened (`--flavor`).
struct Flavours {
    followed: FollowedFlavours,
    tally: FlavourTally,
    /// The flavour of each key seen.
    flavour_of: HashMap<u64, &'static str>,
}

impl Flavours {
    fn new(followed: FollowedFlavours) -> Self {
        Flavours {
            followed,
            // Nanosecond log2 slots; none of the slowest kept.
            tally: FlavourTally::new(Layout::Log2, 1, 0),
            flavour_of: HashMap::new(),
        }
    }

    /// Takes `event` if it is one of these flavours'.
    fn add(&mut self, event: &rcutrace_common::gp::GpEvent) -> bool {
        let Some(done) = self.followed.add(event) else {
            return false;
        };
        for (flavor, gp) in done {
            self.flavour_of.insert(gp.key, flavor);
            self.tally.add(&gp);
        }
        true
    }

    /// Every key's series so far, named by `name`, and the age at `now_ns` of the grace
    /// period each has in progress (0 where none is).
    fn metrics(&self, name: &mut impl FnMut(u64) -> String, now_ns: u64) -> FlavourMetrics {
        let (in_progress, in_progress_flavours) = self.followed.in_progress();
        let mut flavour_of = self.flavour_of.clone();
        flavour_of.extend(in_progress_flavours);
        let names: HashMap<u64, String> = flavour_of.keys().map(|&k| (k, name(k))).collect();
        let labels = |key: u64| (flavour_of[&key], names[&key].clone());
        let keys: BTreeSet<u64> = flavour_of.keys().copied().collect();
        FlavourMetrics {
            grace_periods: (self.tally.by_key.iter())
                .map(|(&key, durations)| FlavourSeries::of(labels(key), None, histogram(durations)))
                .collect(),
            phases: (self.tally.by_phase.iter())
                .map(|(&(key, phase), lengths)| {
                    FlavourSeries::of(labels(key), Some(phase), histogram(lengths))
                })
                .collect(),
            age_s: keys
                .into_iter()
                .map(|key| {
                    let started = (in_progress.iter())
                        .filter(|gp| gp.key == key)
                        .map(|gp| gp.started_ns)
                        .min();
                    let age = started.map_or(0, |s| now_ns.saturating_sub(s));
                    FlavourSeries::of(labels(key), None, age as f64 / 1e9)
                })
                .collect(),
        }
    }
}

fn same_function_mask() -> u32 {
    TIMED
        .iter()
        .filter(|(t, _)| t.same_function())
        .fold(0u32, |mask, (t, _)| mask | 1 << t.index())
}

/// How long the expedited grace period in progress has run (zero while none is).
fn expedited_age(tracer: &Tracer) -> Result<Duration> {
    let since = expedited_state(tracer)?.since_ns;
    Ok(match since {
        0 => Duration::ZERO,
        since => Duration::from_nanos(kernel::monotonic_ns().saturating_sub(since)),
    })
}

/// What a series is keyed by beside its function: a CPU, or a cgroup's path.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct SeriesKey {
    cpu: Option<u32>,
    cgroup: Option<String>,
}

/// Makes the `--by` labels of the series: CPUs as they are, cgroups by their paths, at most
/// `--top` of them for the whole run (the rest under `[other]`, so no counter goes down).
struct SeriesLabels {
    by: Option<By>,
    cgroups: CgroupPaths,
    top: StickyTop,
}

impl SeriesLabels {
    fn keyed(&self) -> bool {
        self.by.is_some()
    }

    /// Admits this scrape's cgroups, the busiest first, while `--top` has room.
    fn admit(&mut self, weights: impl Iterator<Item = (u64, u64)>) {
        if self.by != Some(By::Cgroup) {
            return;
        }
        let mut by_path: BTreeMap<String, u64> = BTreeMap::new();
        for (id, n) in weights {
            *by_path.entry(self.cgroups.path(id)).or_default() += n;
        }
        self.top.admit(by_path);
    }

    fn key(&mut self, key: &Attribution) -> SeriesKey {
        match self.by {
            Some(By::Cpu) => SeriesKey {
                cpu: Some(key.cpu),
                cgroup: None,
            },
            Some(By::Cgroup) => SeriesKey {
                cpu: None,
                cgroup: Some(self.top.label(self.cgroups.path(key.cgroup))),
            },
            _ => SeriesKey::default(),
        }
    }
}

/// The totals of the window so far.
fn metrics(
    period: &Period<'_>,
    labels: &mut SeriesLabels,
    aggregate: &Aggregate,
) -> Result<Metrics> {
    if aggregate.malformed > 0 {
        bail!(
            "{} records in the sample buffer were not samples (rcutrace's eBPF object and loader disagree)",
            aggregate.malformed
        );
    }
    let keyed_counts: Vec<(Attribution, u64)> = period
        .counters
        .keyed_counts()
        .map(|(key, n)| (*key, n))
        .collect();
    let timed_series: Vec<Vec<(Attribution, Series)>> = TIMED
        .iter()
        .map(|(timed, _)| aggregate.copy(timed.index()))
        .collect();
    labels.admit(
        keyed_counts.iter().map(|(key, n)| (key.cgroup, *n)).chain(
            timed_series
                .iter()
                .flatten()
                .map(|(key, s)| (key.cgroup, s.count())),
        ),
    );
    let counts = counts(period, &keyed_counts, labels);
    let counted = |slot: CounterSlot, function: bool| -> Vec<Labelled<u64>> {
        counts
            .iter()
            .filter(|((s, _), _)| *s == slot)
            .map(|((s, key), n)| Labelled {
                function: function.then(|| slot_function(*s).to_string()),
                cpu: key.cpu,
                cgroup: key.cgroup.clone(),
                value: *n,
            })
            .collect()
    };
    let mut calls = Vec::new();
    for c in counted_functions(CountedSet::All) {
        if period.attached.iter().any(|(p, _)| *p == c.probe) {
            calls.extend(counted(c.slot(), true));
        }
    }
    let mut grace_period_latency = Vec::new();
    let mut synchronize_latency = Vec::new();
    for ((timed, histogram), series) in TIMED.iter().zip(timed_series) {
        let function =
            (*histogram == Histogram::Synchronize).then(|| timed.entry.function.to_string());
        let histograms = latency(series, labels, function);
        match histogram {
            Histogram::GracePeriod => grace_period_latency.extend(histograms),
            Histogram::Synchronize => synchronize_latency.extend(histograms),
        }
    }
    // By function, a kprobe-multi link's functions together: the kernel counts its skips for
    // its one program. A function hooked at entry and return is one series.
    let mut kernel_skipped: BTreeMap<String, u64> = BTreeMap::new();
    let attached: Vec<Probe> = period.attached.iter().map(|(probe, _)| *probe).collect();
    for (served, missed) in period.counters.missed_by_program(period.tracer, &attached) {
        let functions: Vec<&str> = served.iter().map(|probe| probe.function).collect();
        *kernel_skipped.entry(functions.join(",")).or_default() += missed;
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
        flavours: None,
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
                    Programs::Timed(_) | Programs::TimedFoundNothing(_) => "latency",
                    Programs::Callbacks(_) => "callbacks",
                    Programs::GracePeriod(_) => "grace_periods",
                    Programs::Stages(_) => "stages",
                    Programs::OwnWork(_) => "own_work",
                    Programs::Followed(_) => "followed",
                    Programs::DomainInit => "domain_init",
                },
                method: method.to_string(),
            })
            .collect(),
        kernel_skipped: kernel_skipped.into_iter().collect(),
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

/// Counts by `(counter slot, series key)`; the key is empty unless keyed.
fn counts(
    period: &Period<'_>,
    keyed_counts: &[(Attribution, u64)],
    labels: &mut SeriesLabels,
) -> BTreeMap<(CounterSlot, SeriesKey), u64> {
    let mut counts = BTreeMap::new();
    if labels.keyed() {
        for (key, n) in keyed_counts {
            *counts.entry((key.event, labels.key(key))).or_default() += n;
        }
    } else {
        for (slot, n) in period.counters.array("COUNTS").iter().enumerate() {
            counts.insert((slot as CounterSlot, SeriesKey::default()), *n);
        }
    }
    counts
}

fn slot_function(slot: CounterSlot) -> &'static str {
    counted_functions(CountedSet::All)
        .find(|c| c.slot() == slot)
        .map_or("unknown", |c| c.function())
}

/// One histogram per CPU or cgroup, or one for all; unkeyed, always one, so the metric
/// exists from the first scrape.
fn latency(
    series: Vec<(Attribution, Series)>,
    labels: &mut SeriesLabels,
    function: Option<String>,
) -> Vec<Labelled<LatencyHistogram>> {
    let mut merged: BTreeMap<SeriesKey, Series> = BTreeMap::new();
    for (key, s) in series {
        let key = labels.key(&key);
        match merged.remove(&key) {
            Some(mut m) => {
                m.merge(s);
                merged.insert(key, m);
            }
            None => {
                merged.insert(key, s);
            }
        }
    }
    if merged.is_empty() && !labels.keyed() {
        merged.insert(SeriesKey::default(), Series::new(Layout::Log2));
    }
    merged
        .into_iter()
        .map(|(key, s)| Labelled {
            function: function.clone(),
            cpu: key.cpu,
            cgroup: key.cgroup,
            value: histogram(&s),
        })
        .collect()
}

/// A series of nanoseconds in log2 slots, as a histogram to expose.
fn histogram(series: &Series) -> LatencyHistogram {
    LatencyHistogram {
        log2_slots: match series.buckets() {
            Buckets::Log2(slots) => slots,
            _ => Vec::new(),
        },
        count: series.count(),
        sum_ns: series.sum_ns(),
    }
}
