//! The summaries of rcutrace's count, callbacks and latency records back into the model.

use rcutrace_common::records::{self};

use crate::runs::figures::{percentiles, seconds, unit};
use crate::{
    model::checks::CrossCheck,
    model::stats::PERCENTILE_ERROR,
    model::{
        CallbackCounts, CallbackRow, CallbackTotals, CallbacksSummary, CountSummary, KeyedLosses,
        LatencySummary, Losses, ReadersEstimate, SeriesStats, Unit,
    },
};
use std::time::Duration;

pub(super) fn count(s: &records::CountSummary) -> CountSummary {
    // Files from before the counts were recorded: back from the ratios.
    let from_ratio = |ratio: Option<f64>| {
        ratio
            .zip(s.grace_periods)
            .map(|(r, gps)| (r * gps as f64).round() as u64)
    };
    CountSummary {
        elapsed: s
            .elapsed_ns
            .map_or_else(|| seconds(s.elapsed_s), Duration::from_nanos),
        readers: s.readers.or_else(|| from_ratio(s.readers_per_grace_period)),
        call_rcu: s
            .call_rcu
            .or_else(|| from_ratio(s.call_rcu_per_grace_period)),
        callbacks: s
            .callbacks
            .or_else(|| from_ratio(s.callbacks_per_grace_period)),
        // What runs from before the names were recorded printed.
        callbacks_of: s.callbacks_of.clone().unwrap_or_else(|| {
            ["call_rcu", "call_rcu_hurry", "kvfree_call_rcu"]
                .map(String::from)
                .to_vec()
        }),
        grace_periods: s.grace_periods,
        missed: s.missed_by_kernel,
        own_calls_left_out: s.own_calls_left_out,
        keyed_losses: s.keys_lost_to_full_map.map(|map_full| KeyedLosses {
            map_full,
            stacks_lost: s.stacks_lost.unwrap_or(0),
        }),
        readers_estimate: s.readers_estimated.as_ref().map(|e| ReadersEstimate {
            readers: s.readers,
            counted: e.counted,
            sampled: Duration::from_nanos(e.sampled_ns),
            windows: e.windows,
            margin: e.margin_95,
            switching_grace_periods: e.switching_grace_periods,
            switching_calls_left_out: e.switching_calls_left_out,
        }),
        cross_checks: cross_checks(&s.cross_checks),
    }
}

fn cross_checks(checks: &[records::CrossCheck]) -> Vec<CrossCheck> {
    checks
        .iter()
        .map(|c| CrossCheck {
            counted: c.counted.clone(),
            value: c.value,
            against: c.against.clone(),
            expected: c.expected,
            bound: c.bound,
            at_most: c.at_most,
        })
        .collect()
}

pub(super) fn callbacks(s: &records::CallbacksSummary) -> CallbacksSummary {
    let unit = unit(&s.unit).unwrap_or(Unit::Ms);
    CallbacksSummary {
        elapsed: s
            .elapsed_ns
            .map_or_else(|| seconds(s.elapsed_s), Duration::from_nanos),
        unit,
        rows: s
            .rows
            .iter()
            .map(|row| CallbackRow {
                function: row.function.clone(),
                via: row.via.clone(),
                queued: row.queued,
                invoked: row.invoked,
                pending_at_exit: row.pending_at_exit,
                queued_before_tracing: row.queued_before_tracing,
                unrecorded: row.not_recorded,
                requeued: row.requeued,
                latency: SeriesStats {
                    key: None,
                    count: row.invoked,
                    min_ns: row.min_ns,
                    max_ns: row.max_ns,
                    mean_ns: row.mean_ns,
                    percentiles_exact: false,
                    percentiles: percentiles(&row.percentiles_ns),
                },
            })
            .collect(),
        rows_not_shown: s.rows_not_shown as usize,
        not_shown: CallbackCounts {
            queued: s.queued_not_shown,
            invoked: s.invoked_not_shown,
            pending_at_exit: s.pending_not_shown,
            queued_before_tracing: s.before_not_shown,
        },
        percentile_error: s.percentile_error,
        totals: CallbackTotals {
            queued: s.queued,
            invoked: s.invoked,
            pending_at_exit: s.pending_at_exit,
            queued_before_tracing: s.not_timed.queued_before_tracing,
            requeued: s.not_timed.requeued,
            kvfree_queued: s.kvfree_queued,
            pending_map_full: s.not_timed.pending_map_full,
            rows_map_full_queued: s.not_timed.row_map_full_queued,
            rows_map_full_invoked: s.not_timed.row_map_full_invoked,
            missed_by_kernel: s.not_timed.missed_by_kernel,
            missed_by_kprobe_layer: s.not_timed.missed_by_kprobe_layer,
            invocations_missed: s.not_timed.invocations_missed,
            own_queued: s.own_queued,
        },
        entry_points_not_traced: s.entry_points_not_traced.clone(),
        entry_points: s
            .entry_points
            .iter()
            .map(|e| crate::model::EntryPointCalls {
                function: e.entry_point.clone(),
                calls: e.calls,
                notes: crate::model::checks::Notes {
                    overwritten: e.notes_overwritten,
                    waiting_at_close: e.notes_waiting_at_close,
                    from_before: e.notes_from_before,
                },
            })
            .collect(),
        cross_checks: cross_checks(&s.cross_checks),
    }
}

pub(super) fn latency_summary(
    series: &[&records::LatencySummary],
    losses: &records::NotMeasured,
) -> LatencySummary {
    LatencySummary {
        map_name: losses.map.clone(),
        unit: series
            .first()
            .and_then(|s| unit(&s.unit))
            .unwrap_or(Unit::Ms),
        series: series
            .iter()
            .map(|s| SeriesStats {
                key: s.key.clone(),
                count: s.count,
                min_ns: s.min_ns,
                max_ns: s.max_ns,
                mean_ns: s.mean_ns,
                percentiles_exact: s.percentiles_exact,
                percentiles: percentiles(&s.percentiles_ns),
            })
            .collect(),
        percentile_error: series
            .first()
            .map_or(PERCENTILE_ERROR, |s| s.percentile_error),
        losses: Losses {
            in_flight_at_exit: losses.in_flight_at_exit,
            returns_lost: losses.returns_lost,
            began_before_tracing: losses.begun_before_tracing,
            missed_by_kernel: losses.missed_by_kernel,
            lost_to_full_map: losses.lost_to_full_map,
            stacks_lost: losses.stacks_lost,
            own_calls_left_out: losses.own_calls_left_out,
        },
        stages: None,
        cross_checks: cross_checks(&losses.cross_checks),
        grace_periods: Vec::new(),
    }
}
