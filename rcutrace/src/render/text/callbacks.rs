//! `rcutrace callbacks`' table of callback functions, its totals and what was not timed.

use std::fmt::Write as _;

use super::disagreements;
use crate::{
    model::{CallbackCounts, CallbacksSummary},
    render::figure,
};

/// `rcutrace callbacks`' table: one row per callback function and entry point, most queued
/// first, then the totals and everything that could not be timed.
pub(super) fn callbacks_summary(summary: &CallbacksSummary) -> String {
    let unit = summary.unit;
    let mut out = String::new();
    // The percentiles have as many digits as their bound needs, and no more.
    let digits = figure::digits_for(summary.percentile_error);
    let _ = writeln!(
        out,
        "Callbacks over {:.2} s (latency: queued to invoked, in {}; percentiles within {}%):",
        summary.elapsed.as_secs_f64(),
        unit.suffix(),
        figure::percent_bound(summary.percentile_error + figure::rounding_error(digits))
    );
    let estimate = |ns: f64| figure::estimate_number(ns, unit);
    // One precision per column: the exact extremes with the decimals the most precise needs.
    let places = figure::places_needed(
        summary
            .rows
            .iter()
            .flat_map(|r| [r.latency.min_ns, r.latency.max_ns])
            .flatten(),
        unit,
    );
    let exact = |ns: u64| figure::exact_number_places(ns, unit, places);
    let header = [
        "FUNCTION", "VIA", "QUEUED", "INVOKED", "PENDING", "BEFORE", "MIN", "MEAN", "MAX", "P50",
        "P90", "P99",
    ];
    let mut table: Vec<Vec<String>> = vec![header.map(String::from).to_vec()];
    for row in &summary.rows {
        let latency = &row.latency;
        let percentile = |q: f64| {
            let found = latency.percentiles.iter().find(|(p, _)| *p == q);
            found.map_or("-".into(), |&(_, ns)| {
                // An exact extreme prints as its column does, never rounded below it.
                match [latency.min_ns, latency.max_ns]
                    .into_iter()
                    .flatten()
                    .find(|&e| e as f64 == ns)
                {
                    Some(extreme) => exact(extreme),
                    None => figure::estimate_digits(ns, unit, digits),
                }
            })
        };
        table.push(vec![
            row.function.clone(),
            row.via.clone(),
            row.queued.to_string(),
            row.invoked.to_string(),
            row.pending_at_exit.to_string(),
            row.queued_before_tracing.to_string(),
            latency.min_ns.map_or("-".into(), exact),
            latency.mean_ns.map_or("-".into(), estimate),
            latency.max_ns.map_or("-".into(), exact),
            percentile(0.5),
            percentile(0.9),
            percentile(0.99),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|column| table.iter().map(|r| r[column].len()).max().unwrap_or(0))
        .collect();
    for cells in &table {
        let mut line = String::from(" ");
        for (column, cell) in cells.iter().enumerate() {
            let width = widths[column];
            // Names left-aligned, numbers right-aligned.
            if column < 2 {
                let _ = write!(line, " {cell:<width$}");
            } else {
                let _ = write!(line, " {cell:>width$}");
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    // Each total is its column added up over every row, the rows not shown included.
    let counts = |c: &CallbackCounts| {
        format!(
            "{} queued, {} invoked, {} pending, {} before",
            c.queued, c.invoked, c.pending_at_exit, c.queued_before_tracing
        )
    };
    if summary.rows_not_shown > 0 {
        let _ = writeln!(
            out,
            "  ... {} more rows: {}; --top 0 shows all",
            summary.rows_not_shown,
            counts(&summary.not_shown)
        );
    }
    let totals = &summary.totals;
    let _ = writeln!(
        out,
        "  all rows: {}",
        counts(&CallbackCounts {
            queued: totals.queued,
            invoked: totals.invoked,
            pending_at_exit: totals.pending_at_exit,
            queued_before_tracing: totals.queued_before_tracing,
        })
    );
    if let Some(kvfree) = totals.kvfree_queued {
        let _ = writeln!(
            out,
            "  kvfree_call_rcu: {kvfree} objects queued (kfree_rcu(), kvfree_rcu()); the kernel \
             frees them in batches, not through a callback each, so they are counted, not timed"
        );
    }
    let _ = writeln!(
        out,
        "  not timed: {} queued before tracing began (BEFORE), {} not recorded (pending map \
         full), {} requeued before their invocation was seen, {} missed by the kernel, {} \
         queued and {} invoked lost to a full row map",
        totals.queued_before_tracing,
        totals.pending_map_full,
        totals.requeued,
        totals.missed_by_kernel,
        totals.rows_map_full_queued,
        totals.rows_map_full_invoked,
    );
    if totals.invocations_missed > 0 {
        let _ = writeln!(
            out,
            "  of those missed by the kernel, {} invocations: their callbacks look pending, or \
             are in no row if their queueing went unseen too",
            totals.invocations_missed
        );
    }
    if totals.own_queued > 0 {
        let _ = writeln!(
            out,
            "  not counted, as rcutrace's own doing: {} callbacks its attaching, reading and \
             detaching queued",
            totals.own_queued
        );
    }
    let untied: Vec<String> = summary
        .entry_points
        .iter()
        .filter(|e| e.notes.not_taken() > 0 || e.notes.from_before > 0)
        .map(|e| {
            format!(
                "{} {} of {} calls ({} overwritten on their CPU, {} waiting at the close; {} \
                 queued from a call before tracing)",
                e.function,
                e.notes.not_taken(),
                e.calls,
                e.notes.overwritten,
                e.notes.waiting_at_close,
                e.notes.from_before
            )
        })
        .collect();
    if !untied.is_empty() {
        let _ = writeln!(
            out,
            "  calls whose queueing did not take their note (callback via other, or queued after \
             the close): {}",
            untied.join(", ")
        );
    }
    if !summary.entry_points_not_traced.is_empty() {
        let _ = writeln!(
            out,
            "  entry points not traced (not on this kernel): {}",
            summary.entry_points_not_traced.join(", ")
        );
    }
    out.push_str(&disagreements(&summary.cross_checks));
    out
}
