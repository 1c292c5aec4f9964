//! `rcutrace callbacks`: per callback function, how many were queued, invoked and left
//! pending, and how long they waited from queueing to invocation.
//!
//! The eBPF side (`rcutrace-ebpf/src/callbacks.rs`) aggregates per row (function address and
//! entry point); this module reads the maps, names the functions and builds the report.

use std::{
    cell::Cell,
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use anyhow::Result;
use rcutrace_common::{
    callbacks::*,
    hist::{LOG2_SLOTS, fine_slots},
};

use super::{publish::warn_disagreements, window::trace};
use crate::{
    cli::{CallbacksArgs, CallbacksBy},
    commands::publish::Sink,
    kernel::callback_lists::CallbackLists,
    kernel::cgroups::CgroupPaths,
    kernel::symbols::keeper::SymbolKeeper,
    model::attribution::fold_top,
    model::checks::{self, CrossCheck, EntryPoint, Notes},
    model::stats::{QUANTILES, percentile_bits, percentile_error},
    model::{
        Buckets, CallbackCounts, CallbackRow, CallbackTotals, CallbacksSummary, CountMap,
        EntryPointCalls, HistMap, Map, Report, SeriesStats, Summary, Unit,
    },
    trace::engine::{Ends, Hooks, Need, Period, Reporting, Request},
    trace::probes::{CALLBACKS, Probe, SRCU_DOMAIN_INIT},
    trace::tracer::{Constant, Tracer},
};

/// Without these two nothing can be paired.
const NEEDED: &[Probe] = &[CALLBACKS.queue, CALLBACKS.invoke];

pub async fn run(args: &CallbacksArgs, sink: Sink) -> Result<Report> {
    let format = sink.format();
    let mut probes = CALLBACKS.in_attach_order();
    let queued_by = match args.by {
        Some(CallbacksBy::Cgroup) => QUEUED_BY_CGROUP,
        Some(CallbacksBy::Srcu) => QUEUED_BY_DOMAIN,
        Some(CallbacksBy::Cpu) | None => QUEUED_BY_NONE,
    };
    if queued_by == QUEUED_BY_DOMAIN {
        probes.insert(0, SRCU_DOMAIN_INIT);
    }
    // At most 10^6 (ms): fits the program's u32.
    let mut constants = vec![
        Constant::U32("CALLBACK_UNIT_NS", args.unit.nanos() as u32),
        Constant::MaxEntries("PENDING", MAX_PENDING),
        Constant::MaxEntries("ROWS", MAX_ROWS),
        Constant::MaxEntries("EXTREMES", MAX_ROWS),
    ];
    constants.push(Constant::U32("CALLBACKS_BY", queued_by));
    if queued_by != QUEUED_BY_NONE {
        constants.push(Constant::MaxEntries("QUEUED_BY", MAX_QUEUED_BY_ROWS));
    }
    let lists_at_close = Cell::new(None);
    let mut look_at_lists = |tracer: &Tracer| match ListsAtClose::read(tracer) {
        Ok(lists) => lists_at_close.set(Some(lists)),
        Err(e) => {
            log::warn!("the pending callbacks are not checked against the kernel's lists: {e:#}")
        }
    };
    let symbols = SymbolKeeper::new();
    let launch = super::window::launch_of(args.common.length.command())?;
    let request = Request {
        probes: &probes,
        constants,
        choice: args.common.attach,
        by: None,
        need: Need::These(NEEDED),
        ends: Ends::after(args.common.length.duration()),
        // The extremes and pending callbacks are state, not counters: no intervals.
        reporting: Reporting::AtEnd,
        sample_readers: None,
        hooks: Hooks {
            at_close: Some(Box::new(&mut look_at_lists)),
            ..super::window::hooks(Some(&symbols), launch.as_ref())
        },
    };
    let options = Options {
        unit: args.unit,
        top: args.top,
        by_cpu: args.by == Some(CallbacksBy::Cpu),
    };
    let mut cgroups = CgroupPaths::new();
    let mut report_of = |period: &Period<'_>| {
        let mut raw = read(period)?;
        raw.lists_at_close = lists_at_close.get();
        let names = function_names(&raw, &symbols);
        let mut report = assemble(&raw, &names, &options, period.elapsed);
        if let Summary::Callbacks(summary) = &report.summary {
            warn_disagreements(format, &summary.cross_checks);
        }
        match queued_by {
            QUEUED_BY_CGROUP => {
                let mut path = |id| cgroups.path(id);
                let map = queued_by_map(&raw, &names, args.top, QueuedByKind::Cgroup, &mut path);
                report.maps.push(map);
            }
            QUEUED_BY_DOMAIN => {
                let mut domain = super::naming::domain_names(period.tracer, &symbols);
                let map = queued_by_map(&raw, &names, args.top, QueuedByKind::Srcu, &mut domain);
                report.maps.push(map);
            }
            _ => {}
        }
        report.environment = period.environment();
        Ok(report)
    };
    let report = trace(request, None, &mut report_of, sink).await?;
    super::window::launched(launch.as_ref())?;
    Ok(report)
}

/// Everything the eBPF maps hold when tracing stops.
#[derive(Debug, Default)]
struct Raw {
    rows: Vec<(CallbackKey, CallbackStats)>,
    extremes: Vec<(CallbackKey, Vec<Extremes>)>,
    pending: Vec<Pending>,
    /// `CALLBACK_TOTALS` slot by slot, one value per CPU.
    totals: Vec<Vec<u64>>,
    /// Queueings by cgroup id and function (`--by cgroup`).
    queued_by: Vec<(QueuedBy, u64)>,
    kvfree_traced: bool,
    entry_points_not_traced: Vec<String>,
    /// Calls of each traced entry point while tracing, and what became of their notes, by
    /// `Via`.
    entry_calls: Vec<(Via, u64, Notes)>,
    missed_by_kernel: u64,
    missed_by_kprobe_layer: u64,
    /// Of `missed_by_kernel`, the invocation hook's.
    invocations_missed: u64,
    lists_at_close: Option<ListsAtClose>,
}

/// What normal RCU's callback lists held just before the window closed, and the queueings
/// the programs had seen when they were read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ListsAtClose {
    queued_before: u64,
    listed: u64,
}

impl ListsAtClose {
    /// Finding the lists reads /proc/kallsyms: done before the count of queueings, so that
    /// the two readings that matter are close together.
    fn read(tracer: &Tracer) -> Result<ListsAtClose> {
        let lists = CallbackLists::locate()?;
        let slots = QUEUEINGS
            .iter()
            .map(|&slot| tracer.per_cpu_values("CALLBACK_TOTALS", slot))
            .collect::<Result<Vec<_>>>()?;
        let queued_before = queued_so_far(&slots);
        let listed = lists.callbacks()?;
        Ok(ListsAtClose {
            queued_before,
            listed,
        })
    }
}

/// The totals' slots that together count every queueing the programs saw, with a row or
/// without one.
const QUEUEINGS: [u32; 2] = [TOTAL_QUEUED, TOTAL_LOST_ROWS_FULL_QUEUED];

/// The queueings in `QUEUEINGS`' slots, per CPU, added up.
fn queued_so_far(slots: &[Vec<u64>]) -> u64 {
    slots.iter().flatten().sum()
}

fn read(period: &Period<'_>) -> Result<Raw> {
    let tracer = period.tracer;
    let attached = |probe: &Probe| period.attached.iter().any(|(p, _)| p == probe);
    let all: Vec<Probe> = CALLBACKS.in_attach_order();
    Ok(Raw {
        rows: tracer.hash_entries("ROWS")?,
        extremes: tracer.per_cpu_hash_entries("EXTREMES")?,
        pending: tracer
            .hash_entries::<u64, Pending>("PENDING")?
            .into_iter()
            .map(|(_, p)| p)
            .filter(|p| p.via != VIA_OWN)
            .collect(),
        totals: (0..TOTAL_SLOTS)
            .map(|slot| tracer.per_cpu_values("CALLBACK_TOTALS", slot))
            .collect::<Result<_>>()?,
        queued_by: tracer.hash_entries("QUEUED_BY")?,
        kvfree_traced: attached(&CALLBACKS.kvfree),
        entry_points_not_traced: CALLBACKS
            .entry_points
            .iter()
            .filter(|(p, _)| !attached(p))
            .map(|(p, _)| p.function.to_string())
            .collect(),
        entry_calls: entry_calls(tracer, &attached)?,
        missed_by_kernel: period.counters.missed(tracer, &all),
        missed_by_kprobe_layer: period.counters.kprobe_layer_missed(&all),
        invocations_missed: period.counters.missed(tracer, &[CALLBACKS.invoke]),
        lists_at_close: None,
    })
}

/// Each attached entry point's calls and notes. The programs take no note once the window
/// has closed, so the notes still waiting are those of the close; read before the count of
/// overwritten notes, so that a note overwritten in between is counted (twice at worst,
/// never not at all).
fn entry_calls(
    tracer: &Tracer,
    attached: &dyn Fn(&Probe) -> bool,
) -> Result<Vec<(Via, u64, Notes)>> {
    let waiting = tracer.per_cpu_entries::<Caller>("CALLER", 0)?;
    CALLBACKS
        .entry_points
        .iter()
        .filter(|(p, _)| attached(p))
        .map(|&(_, via)| {
            let sum =
                |map: &str| -> Result<u64> { Ok(tracer.per_cpu_values(map, via)?.iter().sum()) };
            let notes = Notes {
                overwritten: sum("NOTES_OVERWRITTEN")?,
                waiting_at_close: waiting_at_close(&waiting, via),
                from_before: sum("NOTES_FROM_BEFORE")?,
            };
            Ok((via, sum("ENTRY_CALLS")?, notes))
        })
        .collect()
}

/// The CPUs whose note, left by a counted call through `via`, no queueing took.
fn waiting_at_close(notes: &[Caller], via: Via) -> u64 {
    notes.iter().filter(|n| n.waiting() && n.via == via).count() as u64
}

/// Names for every function address in the maps, as they were while the callbacks were
/// queued; hex where symbols are unavailable.
fn function_names(raw: &Raw, symbols: &SymbolKeeper) -> BTreeMap<u64, String> {
    let names = symbols.names();
    let addresses = raw
        .rows
        .iter()
        .map(|(k, _)| k.func)
        .chain(raw.pending.iter().map(|p| p.func))
        .chain(raw.queued_by.iter().map(|(k, _)| k.func));
    addresses
        .map(|addr| (addr, names.function_name(addr)))
        .collect()
}

struct Options {
    unit: Unit,
    top: usize,
    by_cpu: bool,
}

/// A row being built: the map's figures for one function and entry point.
struct Building {
    key: CallbackKey,
    row: CallbackRow,
    display: Vec<u64>,
}

/// The report from the maps' contents: rows most queued first, `--top` of them, the
/// histograms of their functions, and (with `--by cpu`) per-CPU totals.
fn assemble(
    raw: &Raw,
    names: &BTreeMap<u64, String>,
    options: &Options,
    elapsed: Duration,
) -> Report {
    let name = |addr: u64| names.get(&addr).cloned().unwrap_or(format!("{addr:#x}"));
    let mut pending: BTreeMap<(u64, Via), u64> = BTreeMap::new();
    for p in &raw.pending {
        *pending.entry((p.func, p.via)).or_default() += 1;
    }
    let mut rows: Vec<Building> = Vec::new();
    let mut unpaired: BTreeMap<u64, u64> = BTreeMap::new();
    for (key, stats) in &raw.rows {
        if key.via == VIA_NOT_SEEN {
            *unpaired.entry(key.func).or_default() += stats.invoked_unpaired;
            continue;
        }
        let extremes = raw
            .extremes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, per_cpu)| per_cpu.as_slice())
            .unwrap_or(&[]);
        rows.push(Building {
            key: *key,
            row: CallbackRow {
                function: name(key.func),
                via: via_name(key.via).to_string(),
                queued: stats.queued,
                invoked: stats.invoked,
                pending_at_exit: pending.get(&(key.func, key.via)).copied().unwrap_or(0),
                queued_before_tracing: 0,
                unrecorded: stats.queued_unrecorded,
                requeued: stats.requeued,
                latency: latency_stats(stats, extremes),
            },
            display: stats.display.to_vec(),
        });
    }
    // An invocation whose queueing was not seen belongs to its function's row if there is
    // only one; otherwise (none, or several ways of queueing) to a row of its own.
    for (func, count) in unpaired {
        let mut same: Vec<&mut Building> = rows.iter_mut().filter(|b| b.key.func == func).collect();
        if let [only] = same.as_mut_slice() {
            only.row.queued_before_tracing += count;
            continue;
        }
        rows.push(Building {
            key: CallbackKey {
                func,
                via: VIA_NOT_SEEN,
                _pad: 0,
            },
            row: CallbackRow {
                function: name(func),
                via: "?".into(),
                queued: 0,
                invoked: 0,
                pending_at_exit: 0,
                queued_before_tracing: count,
                unrecorded: 0,
                requeued: 0,
                latency: no_samples(),
            },
            display: vec![0; LOG2_SLOTS as usize],
        });
    }
    rows.sort_by(|a, b| {
        let activity = |r: &CallbackRow| (r.queued, r.invoked + r.queued_before_tracing);
        activity(&b.row)
            .cmp(&activity(&a.row))
            .then_with(|| a.row.function.cmp(&b.row.function))
            .then_with(|| a.key.cmp(&b.key))
    });

    let totals = totals(raw, &rows);
    let mut cross_checks = entry_point_checks(raw, &rows, &totals);
    cross_checks.extend(pending_check(raw));
    let rows_kept: BTreeSet<(u64, Via)> = rows.iter().map(|b| (b.key.func, b.key.via)).collect();
    let shown = if options.top == 0 {
        rows.len()
    } else {
        options.top.min(rows.len())
    };
    let hidden = &rows[shown..];
    let rows_not_shown = hidden.len();
    let not_shown = CallbackCounts::of(hidden.iter().map(|b| &b.row));
    rows.truncate(shown);

    let mut maps = latency_histograms(&rows);
    if options.by_cpu {
        maps.extend(per_cpu_maps(raw, &rows_kept, options.top));
    }
    Report {
        time: None,
        maps,
        summary: Summary::Callbacks(CallbacksSummary {
            elapsed,
            unit: options.unit,
            rows: rows.into_iter().map(|b| b.row).collect(),
            rows_not_shown,
            not_shown,
            percentile_error: percentile_error(CALLBACK_FINE_BITS),
            totals,
            entry_points_not_traced: raw.entry_points_not_traced.clone(),
            entry_points: raw
                .entry_calls
                .iter()
                .map(|&(via, calls, notes)| EntryPointCalls {
                    function: via_name(via).to_string(),
                    calls,
                    notes,
                })
                .collect(),
            cross_checks,
        }),
        environment: None,
    }
}

fn via_name(via: Via) -> &'static str {
    VIA_NAMES.get(via as usize).copied().unwrap_or("other")
}

fn latency_stats(stats: &CallbackStats, extremes: &[Extremes]) -> SeriesStats {
    if stats.invoked == 0 {
        return no_samples();
    }
    let max_ns = extremes.iter().map(|e| e.max).max().unwrap_or(0);
    let min_ns = extremes
        .iter()
        .filter(|e| e.min_inverted != 0)
        .map(|e| !e.min_inverted)
        .min()
        .unwrap_or(0);
    debug_assert_eq!(stats.fine.len(), fine_slots(CALLBACK_FINE_BITS) as usize);
    let percentiles = QUANTILES
        .iter()
        .filter_map(|&q| {
            percentile_bits(&stats.fine, CALLBACK_FINE_BITS, q, min_ns, max_ns).map(|ns| (q, ns))
        })
        .collect();
    SeriesStats {
        key: None,
        count: stats.invoked,
        min_ns: Some(min_ns),
        max_ns: Some(max_ns),
        mean_ns: Some(stats.sum_ns as f64 / stats.invoked as f64),
        percentiles,
        // The kernel keeps a histogram of them, not the samples.
        percentiles_exact: false,
    }
}

fn no_samples() -> SeriesStats {
    SeriesStats {
        key: None,
        count: 0,
        min_ns: None,
        max_ns: None,
        mean_ns: None,
        percentiles_exact: false,
        percentiles: Vec::new(),
    }
}

/// The columns added up over every row, and the losses from the programs' totals.
fn totals(raw: &Raw, rows: &[Building]) -> CallbackTotals {
    let total = |slot: u32| -> u64 {
        raw.totals
            .get(slot as usize)
            .map_or(0, |per_cpu| per_cpu.iter().sum())
    };
    let columns = CallbackCounts::of(rows.iter().map(|b| &b.row));
    CallbackTotals {
        queued: columns.queued,
        invoked: columns.invoked,
        pending_at_exit: columns.pending_at_exit,
        queued_before_tracing: columns.queued_before_tracing,
        requeued: rows.iter().map(|b| b.row.requeued).sum(),
        kvfree_queued: raw.kvfree_traced.then(|| total(TOTAL_KVFREE)),
        pending_map_full: total(TOTAL_LOST_PENDING_FULL),
        rows_map_full_queued: total(TOTAL_LOST_ROWS_FULL_QUEUED),
        rows_map_full_invoked: total(TOTAL_LOST_ROWS_FULL_INVOKED),
        missed_by_kernel: raw.missed_by_kernel,
        missed_by_kprobe_layer: raw.missed_by_kprobe_layer,
        invocations_missed: raw.invocations_missed,
        own_queued: total(TOTAL_OWN_QUEUED),
    }
}

/// Each traced entry point's calls against the callbacks seen queued through it (every row,
/// those `--top` leaves out too).
fn entry_point_checks(raw: &Raw, rows: &[Building], totals: &CallbackTotals) -> Vec<CrossCheck> {
    let entry_points: Vec<EntryPoint<'_>> = raw
        .entry_calls
        .iter()
        .map(|&(via, calls, notes)| EntryPoint {
            function: via_name(via),
            calls,
            notes,
            queued: rows
                .iter()
                .filter(|b| b.key.via == via)
                .map(|b| b.row.queued)
                .sum(),
        })
        .collect();
    checks::callbacks_by_entry_point(&entry_points, totals.rows_map_full_queued)
}

/// The callbacks queued through normal RCU's entry points and left pending, against what
/// its lists held shortly before the close (`checks::pending_against_lists`).
fn pending_check(raw: &Raw) -> Option<CrossCheck> {
    let lists = raw.lists_at_close?;
    let pending = raw
        .pending
        .iter()
        .filter(|p| matches!(p.via, VIA_CALL_RCU | VIA_CALL_RCU_HURRY))
        .count() as u64;
    let slots: Vec<Vec<u64>> = QUEUEINGS
        .iter()
        .map(|&slot| raw.totals.get(slot as usize).cloned().unwrap_or_default())
        .collect();
    let queued = queued_so_far(&slots);
    let cpus = raw.totals.first().map_or(1, Vec::len) as u64;
    Some(checks::pending_against_lists(
        pending,
        lists.listed,
        queued.saturating_sub(lists.queued_before),
        cpus,
        raw.missed_by_kernel,
    ))
}

/// `@cblat[function]`: the shown rows' latency histograms, one per function (its entry
/// points together), as bpftrace's `@cblat[ksym(func)] = hist(latency)` would print them.
fn latency_histograms(rows: &[Building]) -> Vec<Map> {
    let mut by_function: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for b in rows.iter().filter(|b| b.row.invoked > 0) {
        let slots = by_function
            .entry(b.row.function.as_str())
            .or_insert_with(|| vec![0; LOG2_SLOTS as usize]);
        for (total, n) in slots.iter_mut().zip(&b.display) {
            *total += n;
        }
    }
    by_function
        .into_iter()
        .map(|(function, slots)| {
            Map::Hist(HistMap {
                name: "@cblat".into(),
                key: Some(function.to_string()),
                buckets: Buckets::Log2(slots),
            })
        })
        .collect()
}

/// `@cpu_queued[cpu]`, `@cpu_invoked[cpu]`, `@cpu_before[cpu]` and `@cpu_pending[cpu]` (the
/// CPU whose list holds it): each adds up to its column over every row (QUEUED, INVOKED,
/// BEFORE, PENDING). CPUs with nothing to count are left out, as bpftrace leaves out keys
/// never set; past the `top` busiest CPUs of each map the rest are folded into one entry, so
/// that a machine of hundreds of CPUs takes a dozen lines and the sums stay whole.
fn per_cpu_maps(raw: &Raw, rows: &BTreeSet<(u64, Via)>, top: usize) -> Vec<Map> {
    let by_cpu = |values: &[u64]| -> Vec<(String, u64)> {
        let entries = values
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(cpu, n)| (cpu.to_string(), *n))
            .collect();
        fold_top(entries, top, |n| *n, |a, b| *a += b)
    };
    let slot = |s: u32| raw.totals.get(s as usize).cloned().unwrap_or_default();
    let mut pending = vec![0u64; raw.totals.first().map_or(0, Vec::len)];
    // A pending callback without a row (the row map was full) is on the not-timed line.
    for p in raw
        .pending
        .iter()
        .filter(|p| rows.contains(&(p.func, p.via)))
    {
        let cpu = p.cpu as usize;
        if cpu >= pending.len() {
            pending.resize(cpu + 1, 0);
        }
        pending[cpu] += 1;
    }
    [
        ("@cpu_queued", slot(TOTAL_QUEUED)),
        ("@cpu_invoked", slot(TOTAL_INVOKED)),
        ("@cpu_before", slot(TOTAL_INVOKED_BEFORE)),
        ("@cpu_pending", pending),
    ]
    .into_iter()
    .map(|(name, values)| {
        Map::Count(CountMap {
            name: name.into(),
            entries: by_cpu(&values),
        })
    })
    .collect()
}

/// What the queueings are also counted by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum QueuedByKind {
    Cgroup,
    Srcu,
}

/// `@cgroup_queued[path, function]`: callbacks queued by tasks of each cgroup, by function,
/// which add up to the QUEUED column; or `@srcu_queued[domain, function]`: those queued by
/// call_srcu() on each SRCU domain, which add up to the call_srcu rows' QUEUED. The largest
/// `top` are kept; queueings the map had no room for are counted under a key of their own.
fn queued_by_map(
    raw: &Raw,
    names: &BTreeMap<u64, String>,
    top: usize,
    kind: QueuedByKind,
    name: &mut dyn FnMut(u64) -> String,
) -> Map {
    let mut entries: BTreeMap<String, u64> = BTreeMap::new();
    for (key, n) in &raw.queued_by {
        let function = names
            .get(&key.func)
            .cloned()
            .unwrap_or(format!("{:#x}", key.func));
        *entries
            .entry(format!("{}, {function}", name(key.by)))
            .or_default() += n;
    }
    let lost: u64 = raw
        .totals
        .get(TOTAL_LOST_QUEUED_BY_FULL as usize)
        .map_or(0, |per_cpu| per_cpu.iter().sum());
    let (map_name, full) = match kind {
        QueuedByKind::Cgroup => ("@cgroup_queued", "[cgroup map full]"),
        QueuedByKind::Srcu => ("@srcu_queued", "[domain map full]"),
    };
    if lost > 0 {
        entries.insert(full.into(), lost);
    }
    let entries = fold_top(entries.into_iter().collect(), top, |n| *n, |a, b| *a += b);
    Map::Count(CountMap {
        name: map_name.into(),
        entries,
    })
}

#[cfg(test)]
mod tests;
