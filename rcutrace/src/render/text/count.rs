//! `rcutrace count`'s ratios after its map.

use std::{fmt::Write as _, time::Duration};

use super::disagreements;
use crate::model::{CountSummary, MIN_RATE_WINDOW_SECS, PerGracePeriod, ReadersEstimate};

/// The ratios after `count`'s map.
pub(super) fn count_summary(summary: &CountSummary) -> String {
    let mut out = String::new();
    let secs = summary.elapsed.as_secs_f64();
    if secs < MIN_RATE_WINDOW_SECS {
        let _ = writeln!(out, "\nOver {secs:.3} s (too short a window for rates):");
    } else {
        let _ = writeln!(out, "\nOver {secs:.2} s:");
    }
    if let Some(estimate) = &summary.readers_estimate {
        out.push_str(&readers_estimate(estimate, summary.elapsed));
    }
    match summary.grace_periods {
        None => {
            let _ = writeln!(
                out,
                "  grace periods: not traced (rcu_gp_fqs_loop not hooked: not asked for, or not on this kernel)"
            );
        }
        Some(gps) => {
            let rate = summary
                .per_second(Some(gps))
                .map_or(String::new(), |r| format!(" ({r:.1}/s)"));
            let _ = writeln!(out, "  grace periods:                {gps}{rate}");
            if let Some(estimate) = &summary.readers_estimate {
                let _ = writeln!(
                    out,
                    "    up to {} of them ended while rcutrace switched its reader probe;\n    \
                     {} updater calls the tasks-RCU kthreads made for its detaching are not counted",
                    estimate.switching_grace_periods, estimate.switching_calls_left_out
                );
            }
            let estimated = if summary.readers_estimate.is_some() {
                " (estimated)"
            } else {
                ""
            };
            // Only the functions that were traced are named.
            let queuers = match summary.callbacks_of.as_slice() {
                [] => String::new(),
                names => format!(" ({})", names.join(", ")),
            };
            for (label, count, note) in [
                ("RCU readers per grace period: ", summary.readers, estimated),
                ("call_rcu() per grace period:  ", summary.call_rcu, ""),
                (
                    "callbacks per grace period:   ",
                    summary.callbacks,
                    queuers.as_str(),
                ),
            ] {
                let ratio = match summary.per_grace_period(count) {
                    PerGracePeriod::NotTraced => "not traced".to_string(),
                    PerGracePeriod::NoGracePeriod => "n/a (no grace period completed)".to_string(),
                    PerGracePeriod::Ratio(r) => format!("{r:.1}"),
                };
                let rate = summary
                    .per_second(count)
                    .map_or(String::new(), |r| format!(" ({r:.1}/s)"));
                let _ = writeln!(out, "  {label}{ratio}{rate}{note}");
            }
        }
    }
    let _ = writeln!(
        out,
        "  updater and grace-period calls missed by the kernel: {}",
        summary.missed
    );
    if summary.own_calls_left_out > 0 {
        let _ = writeln!(
            out,
            "  not counted, as rcutrace's own doing: {} calls other threads made for its \
             attaching and detaching (tasks-RCU kthreads, SRCU workers)",
            summary.own_calls_left_out
        );
    }
    if let Some(losses) = summary.keyed_losses {
        let _ = writeln!(
            out,
            "  calls lost to a full key map: {}, kernel stacks lost: {}",
            losses.map_full, losses.stacks_lost
        );
    }
    out.push_str(&disagreements(&summary.cross_checks));
    out
}

/// How `--sample-readers` estimated the readers: never passed off as a count.
fn readers_estimate(estimate: &ReadersEstimate, elapsed: Duration) -> String {
    let share = if elapsed.is_zero() {
        100.0
    } else {
        100.0 * estimate.sampled.as_secs_f64() / elapsed.as_secs_f64()
    };
    let sampled = format!(
        "counted {} in {} window{} of the reader probe, {:.3} s ({share:.1}% of the time),",
        estimate.counted,
        estimate.windows,
        if estimate.windows == 1 { "" } else { "s" },
        estimate.sampled.as_secs_f64(),
    );
    let figure = match (estimate.readers, estimate.margin) {
        (None, _) => "not estimated (no window was sampled)".to_string(),
        (Some(n), None) => format!("~{n}, margin unknown (one window)"),
        (Some(n), Some(margin)) => {
            let percent = if n == 0 {
                String::new()
            } else {
                format!(" ({:.1}%)", 100.0 * margin as f64 / n as f64)
            };
            format!("~{n} \u{b1}{margin}{percent} at 95% confidence")
        }
    };
    format!(
        "  RCU readers, estimated:       {figure}\n    {sampled}\n    \
         assuming the load was the same while it was detached\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_summary_of(pairs: [Option<u64>; 4], secs: u64) -> String {
        count_summary(&CountSummary {
            elapsed: std::time::Duration::from_secs(secs),
            readers: pairs[0],
            call_rcu: pairs[1],
            callbacks: pairs[2],
            callbacks_of: ["call_rcu", "call_rcu_hurry", "kvfree_call_rcu"]
                .map(String::from)
                .to_vec(),
            grace_periods: pairs[3],
            missed: 0,
            own_calls_left_out: 0,
            keyed_losses: None,
            readers_estimate: None,
            cross_checks: Vec::new(),
        })
    }

    /// A sampled estimate is never printed as a count: the figure, its margin, how it was
    /// sampled, and the grace periods rcutrace's switching may have caused.
    #[test]
    fn an_estimate_says_so() {
        let estimate = ReadersEstimate {
            readers: Some(1_000_000),
            counted: 99_000,
            sampled: Duration::from_millis(990),
            windows: 10,
            margin: Some(12_345),
            switching_grace_periods: 31,
            switching_calls_left_out: 20,
        };
        let summary = |estimate: ReadersEstimate| {
            count_summary(&CountSummary {
                elapsed: Duration::from_secs(10),
                readers: estimate.readers,
                grace_periods: Some(400),
                readers_estimate: Some(estimate),
                ..CountSummary::default()
            })
        };
        let text = summary(estimate);
        assert!(
            text.contains(
                "  RCU readers, estimated:       ~1000000 \u{b1}12345 (1.2%) at 95% confidence\n    \
                 counted 99000 in 10 windows of the reader probe, 0.990 s (9.9% of the time),\n    \
                 assuming the load was the same while it was detached\n"
            ),
            "{text}"
        );
        assert!(text.contains(
            "    up to 31 of them ended while rcutrace switched its reader probe;\n    \
             20 updater calls the tasks-RCU kthreads made for its detaching are not counted\n"
        ));
        assert!(text.contains("RCU readers per grace period: 2500.0 (100000.0/s) (estimated)"));
        let one = summary(ReadersEstimate {
            windows: 1,
            margin: None,
            ..estimate
        });
        assert!(
            one.contains("~1000000, margin unknown (one window)"),
            "{one}"
        );
        let none = summary(ReadersEstimate {
            readers: None,
            windows: 0,
            ..estimate
        });
        assert!(
            none.contains("not estimated (no window was sampled)"),
            "{none}"
        );
    }

    #[test]
    fn ratios_per_grace_period_and_second() {
        let text = count_summary_of([Some(100_000), Some(30), Some(40), Some(20)], 10);
        assert!(
            text.contains("grace periods:                20 (2.0/s)"),
            "{text}"
        );
        assert!(
            text.contains("RCU readers per grace period: 5000.0 (10000.0/s)"),
            "{text}"
        );
        assert!(
            text.contains("call_rcu() per grace period:  1.5 (3.0/s)"),
            "{text}"
        );
        assert!(
            text.contains("callbacks per grace period:   2.0 (4.0/s)"),
            "{text}"
        );
        assert!(text.contains("missed by the kernel: 0"), "{text}");
    }

    #[test]
    fn what_was_left_out_as_rcutraces_own_doing_is_said() {
        let plain = count_summary_of([Some(100), Some(3), Some(4), Some(2)], 3);
        assert!(!plain.contains("rcutrace's own doing"), "{plain}");
        let summary = CountSummary {
            own_calls_left_out: 5,
            elapsed: std::time::Duration::from_secs(3),
            ..CountSummary::default()
        };
        let text = count_summary(&summary);
        assert!(
            text.contains(
                "not counted, as rcutrace's own doing: 5 calls other threads made for its \
                 attaching and detaching (tasks-RCU kthreads, SRCU workers)"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_window_too_short_gives_no_rates() {
        let text = count_summary_of([Some(100), Some(3), Some(4), Some(2)], 0);
        assert!(text.contains("(too short a window for rates)"), "{text}");
        assert!(text.contains("grace periods:                2\n"), "{text}");
        assert!(!text.contains("/s)"), "{text}");
    }

    #[test]
    fn no_grace_period_is_not_a_division_by_zero() {
        let text = count_summary_of([Some(5), None, None, Some(0)], 1);
        assert!(text.contains("RCU readers per grace period: n/a"), "{text}");
        assert!(
            text.contains("call_rcu() per grace period:  not traced"),
            "{text}"
        );
        let text = count_summary_of([None, Some(1), None, None], 0);
        assert!(text.contains("grace periods: not traced"), "{text}");
        assert!(text.contains("missed by the kernel: 0"), "{text}");
    }
}
