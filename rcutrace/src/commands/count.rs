//! `rcutrace count`: how often RCU is read, updated, and how many grace periods that took.

use std::{fmt::Write as _, time::Duration};

use anyhow::Result;
use rcutrace_common::counters;

use super::{Need, trace};
use crate::{
    cli::Common,
    model::{CountMap, Map},
    probes::{COUNTED, Probe},
    render,
};

pub async fn run(args: &Common) -> Result<String> {
    let probes: Vec<Probe> = COUNTED.iter().map(|c| c.probe).collect();
    let traced = trace(&probes, &[], args.attach, Need::Any, args.duration()).await?;
    let sums = traced.tracer.per_cpu_sums("COUNTS")?;
    let entries: Vec<(String, u64)> = traced
        .attached
        .iter()
        .filter_map(|(probe, _)| {
            let counted = COUNTED
                .iter()
                .find(|c| c.probe.function == probe.function)?;
            Some((
                probe.function.to_string(),
                sums.get(counted.slot as usize).copied()?,
            ))
        })
        .collect();
    let mut counts = Counts::from_entries(&entries);
    // Reader kprobe skips are the tracer's own nested rcu_read_lock(), not lost readers.
    counts.missed = traced
        .attached
        .iter()
        .filter(|(probe, _)| probe.function != "__rcu_read_lock")
        .map(|(probe, _)| traced.tracer.missed(probe))
        .sum();
    let mut out = render::maps(&[Map::Count(CountMap {
        name: "@".into(),
        entries,
    })]);
    out.push_str(&counts.summary(traced.window.elapsed));
    Ok(out)
}

/// The counts the summary ratios are made of; `None` where the function was not traced.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    readers: Option<u64>,
    call_rcu: Option<u64>,
    /// call_rcu, call_rcu_hurry and kvfree_call_rcu: every way a callback is queued.
    callbacks: Option<u64>,
    grace_periods: Option<u64>,
    /// Hits of the updater and grace-period probes that the kernel skipped.
    missed: u64,
}

impl Counts {
    fn from_entries(entries: &[(String, u64)]) -> Self {
        let count = |slot| {
            let counted = COUNTED.iter().find(|c| c.slot == slot)?;
            entries
                .iter()
                .find(|(name, _)| name == counted.probe.function)
                .map(|(_, n)| *n)
        };
        let queued = [
            counters::CALL_RCU,
            counters::CALL_RCU_HURRY,
            counters::KVFREE_CALL_RCU,
        ]
        .map(count);
        let callbacks = queued.iter().flatten().copied().reduce(|a, b| a + b);
        Counts {
            readers: count(counters::READ_LOCK),
            call_rcu: count(counters::CALL_RCU),
            callbacks,
            grace_periods: count(counters::GP_FQS_LOOP),
            missed: 0,
        }
    }

    /// The ratios the bpftrace scripts leave to the reader's calculator.
    fn summary(&self, elapsed: Duration) -> String {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let mut out = String::new();
        let _ = writeln!(out, "\nOver {secs:.2} s:");
        let Some(gps) = self.grace_periods else {
            let _ = writeln!(
                out,
                "  grace periods: not traced (rcu_gp_fqs_loop unavailable)"
            );
            out.push_str(&self.missed_line());
            return out;
        };
        let _ = writeln!(
            out,
            "  grace periods:                {gps} ({:.1}/s)",
            gps as f64 / secs
        );
        let per_gp = |n: Option<u64>| match (n, gps) {
            (None, _) => "not traced".to_string(),
            (Some(_), 0) => "n/a (no grace period completed)".to_string(),
            (Some(n), gps) => format!("{:.1}", n as f64 / gps as f64),
        };
        let per_sec =
            |n: Option<u64>| n.map_or(String::new(), |n| format!(" ({:.1}/s)", n as f64 / secs));
        let _ = writeln!(
            out,
            "  RCU readers per grace period: {}{}",
            per_gp(self.readers),
            per_sec(self.readers)
        );
        let _ = writeln!(
            out,
            "  call_rcu() per grace period:  {}{}",
            per_gp(self.call_rcu),
            per_sec(self.call_rcu)
        );
        let _ = writeln!(
            out,
            "  callbacks per grace period:   {}{} (call_rcu, call_rcu_hurry, kvfree_call_rcu)",
            per_gp(self.callbacks),
            per_sec(self.callbacks)
        );
        out.push_str(&self.missed_line());
        out
    }

    fn missed_line(&self) -> String {
        format!(
            "  updater and grace-period calls missed by the kernel: {}\n",
            self.missed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn ratios_per_grace_period_and_second() {
        let counts = Counts::from_entries(&entries(&[
            ("__rcu_read_lock", 100_000),
            ("call_rcu", 30),
            ("kvfree_call_rcu", 10),
            ("rcu_gp_fqs_loop", 20),
            ("synchronize_rcu", 4),
        ]));
        assert_eq!(
            counts,
            Counts {
                readers: Some(100_000),
                call_rcu: Some(30),
                callbacks: Some(40),
                grace_periods: Some(20),
                missed: 0,
            }
        );
        let text = counts.summary(Duration::from_secs(10));
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
    }

    #[test]
    fn no_grace_period_is_not_a_division_by_zero() {
        let counts =
            Counts::from_entries(&entries(&[("__rcu_read_lock", 5), ("rcu_gp_fqs_loop", 0)]));
        let text = counts.summary(Duration::from_secs(1));
        assert!(text.contains("RCU readers per grace period: n/a"), "{text}");
        assert!(
            text.contains("call_rcu() per grace period:  not traced"),
            "{text}"
        );
        let text = Counts::from_entries(&entries(&[("call_rcu", 1)])).summary(Duration::ZERO);
        assert!(text.contains("grace periods: not traced"), "{text}");
    }
}
