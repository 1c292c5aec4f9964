//! What every command that times calls shares (`srlat`, `gplat`, `run`): the timed functions
//! of a run, and the histograms and statistics of one period's samples, with what was not
//! measured and why.

use std::collections::HashMap;

use anyhow::{Result, bail};
use rcutrace_common::latency::*;

use crate::{
    cli::ByArgs,
    kernel,
    kernel::cgroups::CgroupPaths,
    kernel::symbols::keeper::SymbolKeeper,
    model::aggregate::{Aggregate, Layout, Series},
    model::attribution::{By, Namers, fold_top, key_text, takes_srcu_domain},
    model::checks::{self, CrossCheck},
    model::stats::PERCENTILE_ERROR,
    model::{HistMap, LatencySummary, Losses, Map, Report, Summary, Unit},
    render::Format,
    trace::engine::Period,
    trace::probes::Timed,
    trace::tracer::{Constant, Tracer},
};

/// One timed function of a run: what is timed, the map it prints as, and its unit.
#[derive(Clone, Debug)]
pub struct Timing {
    pub timed: Timed,
    pub map_name: String,
    pub unit: Unit,
}

/// Names once, on stderr, the functions asked for that this kernel lacks.
pub fn say_not_timed(absent: &[&str]) {
    if !absent.is_empty() {
        eprintln!(
            "rcutrace: not on this kernel (absent or inlined), not timed: {}",
            absent.join(", ")
        );
    }
}

/// The timed programs' load-time constants: which calls end at their own function's return,
/// whose calls count (`target_tgid`, 0 for everyone's), and whether the calls on an SRCU
/// domain read it (`--by srcu`, `run`, `gp --flavor`).
pub fn constants(timings: &[Timing], target_tgid: u32, read_domains: bool) -> Vec<Constant> {
    let same_function = timings
        .iter()
        .filter(|t| t.timed.same_function())
        .fold(0u32, |mask, t| mask | 1 << t.timed.index());
    let domains = if read_domains {
        srcu_domain_mask(timings)
    } else {
        0
    };
    vec![
        Constant::U32("SAME_FUNCTION_MASK", same_function),
        Constant::U32("TARGET_TGID", target_tgid),
        Constant::U32("DOMAIN_ARG_MASK", domains),
    ]
}

/// `DOMAIN_ARG_MASK`: bit `index` set for each timed function whose first argument is the
/// SRCU domain it waits on, whose programs then read it.
fn srcu_domain_mask(timings: &[Timing]) -> u32 {
    timings
        .iter()
        .filter(|t| takes_srcu_domain(t.timed.entry.function))
        .fold(0u32, |mask, t| mask | 1 << t.timed.index())
}

/// Expedited grace periods take microseconds, normal ones milliseconds.
pub fn default_unit(function: &str) -> Unit {
    if function.contains("expedited") {
        Unit::Us
    } else {
        Unit::Ms
    }
}

/// When a report's samples are checked against the entries, and how a disagreement is said.
#[derive(Clone, Copy)]
pub struct Checking {
    /// Every report covers the window from its opening (the in-flight calls at a period's
    /// start are known only there).
    pub whole_window: bool,
    pub format: Format,
}

/// The histograms and statistics of the samples that arrived in one period.
pub fn period_report(
    period: &Period<'_>,
    timings: &[Timing],
    by: &ByArgs,
    aggregate: &mut Aggregate,
    symbols: &SymbolKeeper,
    checking: Checking,
    cgroups: &mut CgroupPaths,
) -> Result<Report> {
    if aggregate.malformed > 0 {
        bail!(
            "{} records in the sample buffer were not samples (rcutrace's eBPF object and loader disagree)",
            aggregate.malformed
        );
    }
    let mut maps = Vec::new();
    let mut summaries = Vec::new();
    for timing in timings {
        let index = timing.timed.index();
        let series = if period.cumulative {
            aggregate.copy(index)
        } else {
            aggregate.take(index)
        };
        let layout = aggregate.layout();
        let series = keyed(series, layout, period.tracer, by, symbols, cgroups);
        let mut stats = Vec::new();
        for (key, s) in &series {
            maps.push(Map::Hist(HistMap {
                name: timing.map_name.clone(),
                key: key.clone(),
                buckets: s.buckets(),
            }));
            stats.push(s.stats(key.clone()));
        }
        // In the order bpftrace prints the histograms: by count, the largest last.
        stats.sort_by(|a, b| a.count.cmp(&b.count).then_with(|| a.key.cmp(&b.key)));
        let (losses, left_behind) = losses(period, timing, by.by)?;
        // Calls in flight at a period's start are unknown: only a period that starts at the
        // window's opening can account for every entry.
        let cross_checks = if checking.whole_window {
            let samples: u64 = stats.iter().map(|s| s.count).sum();
            vec![entries_check(period, timing, samples + left_behind)]
        } else {
            Vec::new()
        };
        super::publish::warn_disagreements(checking.format, &cross_checks);
        summaries.push(LatencySummary {
            map_name: timing.map_name.clone(),
            unit: timing.unit,
            series: stats,
            percentile_error: PERCENTILE_ERROR,
            losses,
            stages: None,
            cross_checks,
            grace_periods: Vec::new(),
        });
    }
    // In bpftrace's order of maps, as the histograms print.
    summaries.sort_by(|a, b| a.map_name.as_bytes().cmp(b.map_name.as_bytes()));
    Ok(Report {
        time: None,
        maps,
        summary: Summary::Latency(summaries),
        environment: period.environment(),
    })
}

/// The series of one function with printable keys, the smallest folded beyond `--top`.
/// Without `--by` there is exactly one series, empty if nothing was measured.
fn keyed(
    series: Vec<(rcutrace_common::attribution::Attribution, Series)>,
    layout: Layout,
    tracer: &Tracer,
    by: &ByArgs,
    symbols: &SymbolKeeper,
    cgroups: &mut CgroupPaths,
) -> Vec<(Option<String>, Series)> {
    let Some(key_by) = by.by else {
        let all = series.into_iter().map(|(_, s)| s).reduce(|mut a, b| {
            a.merge(b);
            a
        });
        return vec![(None, all.unwrap_or_else(|| Series::new(layout)))];
    };
    // A call whose domain was read for another key (`gp --flavor`'s SRCU waiters by stack)
    // is keyed by both, as bpftrace prints `@[domain, kstack]`. Named first, and apart: a
    // namer holds the symbols from its first use until it is dropped.
    let domains: HashMap<u64, String> = if key_by == By::Srcu {
        HashMap::new()
    } else {
        let mut domain = super::naming::domain_names(tracer, symbols);
        series
            .iter()
            .filter(|(key, _)| key.domain != 0)
            .map(|(key, _)| (key.domain, domain(key.domain)))
            .collect()
    };
    let mut frames = super::naming::stack_frames(tracer, symbols);
    let mut cgroup = |id| cgroups.path(id);
    let mut domain = super::naming::domain_names(tracer, symbols);
    let mut names = Namers {
        frames: &mut frames,
        cgroup: &mut cgroup,
        domain: &mut domain,
    };
    let texts: Vec<(String, Series)> = series
        .into_iter()
        .map(|(key, s)| {
            let text = key_text(key_by, &key, &mut names);
            match domains.get(&key.domain) {
                Some(domain) => (format!("{domain}, {text}"), s),
                None => (text, s),
            }
        })
        .collect();
    fold_top(texts, by.top, Series::count, Series::merge)
        .into_iter()
        .map(|(k, s)| (Some(k), s))
        .collect()
}

/// The entries of one timed function against what became of each: a sample, or left
/// behind (see `losses`).
fn entries_check(period: &Period<'_>, timing: &Timing, accounted: u64) -> CrossCheck {
    let stats = period.counters.array("STATS");
    let index = timing.timed.index();
    let entries = stats
        .get((index * STAT_SLOTS + STAT_ENTRIES) as usize)
        .copied()
        .unwrap_or(0);
    checks::samples_against_entries(
        timing.timed.entry.function,
        entries,
        accounted,
        found_nothing_skipped(period, timing),
    )
}

/// Hits the kernel skipped at the return that ends a call finding nothing to do (none where
/// the timing has no such return): each leaves its call to be replaced by the next entry,
/// unseen.
fn found_nothing_skipped(period: &Period<'_>, timing: &Timing) -> u64 {
    timing
        .timed
        .found_nothing
        .map_or(0, |probe| period.counters.missed(period.tracer, &[probe]))
}

/// What could not be measured for one timed function in the period, and how many entries
/// left no sample behind them: each is in the in-flight map at the end, was replaced there
/// by its thread's next entry (a lost return), or could not be recorded or sent.
fn losses(period: &Period<'_>, timing: &Timing, by: Option<By>) -> Result<(Losses, u64)> {
    let tracer = period.tracer;
    let stats = period.counters.array("STATS");
    let index = timing.timed.index();
    let stat = |stat: u32| {
        stats
            .get((index * STAT_SLOTS + stat) as usize)
            .copied()
            .unwrap_or(0)
    };
    let entries_skipped = period.counters.missed(tracer, &[timing.timed.entry]);
    let found_nothing_skipped = found_nothing_skipped(period, timing);
    let returns_skipped = period.counters.missed(tracer, &[timing.timed.exit]);
    // A kprobe and a kretprobe on one function share its address: a hit the kprobe layer
    // skips there is counted by both, and is one call that neither program saw.
    let skipped_together = if timing.timed.same_function() {
        let counters = &period.counters;
        counters
            .kprobe_layer_missed(&[timing.timed.entry])
            .min(counters.kprobe_layer_missed(&[timing.timed.exit]))
    } else {
        0
    };
    let entries_skipped_alone = entries_skipped - skipped_together;
    let returns_skipped_alone = returns_skipped - skipped_together;
    // Calls left in the in-flight map: still inside the function, or returned with the return
    // not seen: dropped by the kernel (a kretprobe out of instances) or its program skipped (a
    // trampoline's program is skipped when its thread was preempted inside it and another
    // thread entered it on that CPU). A thread that has gone has certainly returned; a live
    // thread is taken to be still inside (its kernel stack cannot tell: the function may have
    // tail-called its way off the stack).
    let mut in_flight = 0;
    let mut returned = 0;
    for (tid, timed) in tracer.in_flight()? {
        if timed != index {
            continue;
        }
        if kernel::task_exists(tid) {
            in_flight += 1;
        } else {
            returned += 1;
        }
    }
    log::debug!(
        "{}: entries skipped {entries_skipped}, returns skipped {returns_skipped}, \
         in flight {in_flight}, of gone threads {returned}",
        timing.timed.entry.function
    );
    // A return skipped alone leaves its start behind, like a dropped return: count it once.
    let returns_dropped =
        (stat(STAT_RETURNS_MISSED) + returned).saturating_sub(returns_skipped_alone);
    let lost_to_full_map = stat(STAT_LOST_START_MAP_FULL) + stat(STAT_LOST_RING_FULL);
    let own_calls = stat(STAT_OWN_CALLS);
    // Calls that ended with no grace period started: not a loss, nothing to time.
    let found_nothing = stat(STAT_FOUND_NOTHING);
    let left_behind = in_flight
        + returned
        + stat(STAT_RETURNS_MISSED)
        + lost_to_full_map
        + own_calls
        + found_nothing;
    let losses = Losses {
        in_flight_at_exit: in_flight,
        returns_lost: returns_dropped,
        // An entry skipped alone makes its return look unmatched: count it once, as missed.
        began_before_tracing: stat(STAT_UNMATCHED_RETURNS).saturating_sub(entries_skipped_alone),
        missed_by_kernel: entries_skipped + returns_skipped_alone + found_nothing_skipped,
        lost_to_full_map,
        stacks_lost: (by == Some(By::Stack)).then(|| stat(STAT_LOST_STACK)),
        own_calls_left_out: own_calls,
    };
    Ok((losses, left_behind))
}
