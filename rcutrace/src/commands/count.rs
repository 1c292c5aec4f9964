//! `rcutrace count`: how often RCU is read, updated, and how many grace periods that took.

use std::time::Duration;

use anyhow::Result;
use rcutrace_common::counters::{self, CounterSlot};

use super::{Need, trace};
use crate::{
    cli::Common,
    model::{CountMap, CountSummary, Map, Report, Summary},
    probes::{COUNTED, Counted, Probe},
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
        None,
        format,
    )
    .await?;
    let sums = traced.tracer.per_cpu_sums("COUNTS")?;
    let counts: Vec<(&Counted, u64)> = COUNTED
        .iter()
        .filter(|c| traced.attached.iter().any(|(probe, _)| *probe == c.probe))
        .map(|c| (c, sums.get(c.slot as usize).copied().unwrap_or(0)))
        .collect();
    // Reader kprobe skips are the tracer's own nested rcu_read_lock(), not lost readers.
    let not_readers: Vec<Probe> = counts
        .iter()
        .filter(|(c, _)| c.slot != counters::READ_LOCK)
        .map(|(c, _)| c.probe)
        .collect();
    let summary = summarize(
        &counts,
        traced.window.elapsed,
        traced.tracer.missed(&not_readers),
    );
    let entries = counts
        .iter()
        .map(|(c, n)| (c.probe.function.to_string(), *n))
        .collect();
    Ok(Report {
        maps: vec![Map::Count(CountMap {
            name: "@".into(),
            entries,
        })],
        summary: Summary::Count(summary),
    })
}

/// The counts the ratios are made of, from the traced functions' counts.
fn summarize(counts: &[(&Counted, u64)], elapsed: Duration, missed: u64) -> CountSummary {
    let count = |slot: CounterSlot| counts.iter().find(|(c, _)| c.slot == slot).map(|(_, n)| *n);
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
        let counts: Vec<(&Counted, u64)> = [
            ("__rcu_read_lock", 100_000),
            ("call_rcu", 30),
            ("kvfree_call_rcu", 10),
            ("rcu_gp_fqs_loop", 20),
            ("synchronize_rcu", 4),
        ]
        .iter()
        .map(|(name, n)| {
            let counted = COUNTED.iter().find(|c| c.probe.function == *name).unwrap();
            (counted, *n)
        })
        .collect();
        let summary = summarize(&counts, Duration::from_secs(10), 3);
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
