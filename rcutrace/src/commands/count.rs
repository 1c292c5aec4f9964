//! `rcutrace count`: how often RCU is read, updated, and how many grace periods that took.

use std::time::Duration;

use anyhow::Result;
use rcutrace_common::counters::{self, CounterSlot};

use super::{Need, trace};
use crate::{
    cli::Common,
    model::{CountMap, CountSummary, Map, Report, Summary},
    probes::{COUNTED, Probe},
    render::Format,
};

pub async fn run(args: &Common, format: Format) -> Result<Report> {
    let probes: Vec<Probe> = COUNTED.iter().map(|c| c.probe).collect();
    let traced = trace(
        &probes,
        &[],
        args.attach,
        Need::Any,
        args.duration(),
        format,
    )
    .await?;
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
    // Reader kprobe skips are the tracer's own nested rcu_read_lock(), not lost readers.
    let missed = traced
        .attached
        .iter()
        .filter(|(probe, _)| probe.function != "__rcu_read_lock")
        .map(|(probe, _)| traced.tracer.missed(probe))
        .sum();
    let summary = summarize(&entries, traced.window.elapsed, missed);
    Ok(Report {
        maps: vec![Map::Count(CountMap {
            name: "@".into(),
            entries,
        })],
        summary: Summary::Count(summary),
    })
}

/// The counts the ratios are made of, from `(function, count)` entries.
fn summarize(entries: &[(String, u64)], elapsed: Duration, missed: u64) -> CountSummary {
    let count = |slot: CounterSlot| {
        let counted = COUNTED.iter().find(|c| c.slot == slot)?;
        entries
            .iter()
            .find(|(name, _)| name == counted.probe.function)
            .map(|(_, n)| *n)
    };
    let callbacks = [
        counters::CALL_RCU,
        counters::CALL_RCU_HURRY,
        counters::KVFREE_CALL_RCU,
    ]
    .map(count)
    .into_iter()
    .flatten()
    .reduce(|a, b| a + b);
    CountSummary {
        elapsed,
        readers: count(counters::READ_LOCK),
        call_rcu: count(counters::CALL_RCU),
        callbacks,
        grace_periods: count(counters::GP_FQS_LOOP),
        missed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_takes_each_count_from_its_function() {
        let entries: Vec<(String, u64)> = [
            ("__rcu_read_lock", 100_000),
            ("call_rcu", 30),
            ("kvfree_call_rcu", 10),
            ("rcu_gp_fqs_loop", 20),
            ("synchronize_rcu", 4),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
        let summary = summarize(&entries, Duration::from_secs(10), 3);
        assert_eq!(
            summary,
            CountSummary {
                elapsed: Duration::from_secs(10),
                readers: Some(100_000),
                call_rcu: Some(30),
                // call_rcu_hurry was not traced: the others still add up.
                callbacks: Some(40),
                grace_periods: Some(20),
                missed: 3,
            }
        );
        let nothing = summarize(&[], Duration::ZERO, 0);
        assert_eq!((nothing.readers, nothing.callbacks), (None, None));
    }
}
