//! `rcutrace count`: how often RCU is read, updated, and how many grace periods that took.

use std::time::Duration;

use anyhow::Result;
use rcutrace_common::{
    attribution::{Attribution, NO_STACK},
    counters::{self, CounterSlot},
    own_work,
};

use super::{
    naming::{domain_names, stack_frames},
    window::trace,
};
use crate::{
    cli::{ByArgs, CountArgs},
    commands::publish::Sink,
    kernel,
    kernel::cgroups::CgroupPaths,
    kernel::symbols::keeper::SymbolKeeper,
    model::attribution::{By, Namers, fold_top, key_text},
    model::checks,
    model::{CountMap, CountSummary, KeyedLosses, Map, Report, Summary},
    render::Format,
    trace::engine::{Ends, Need, Period, Reporting, Request},
    trace::probes::{
        COUNTED, Counted, CountedSet, GP_INIT_FOUND_NOTHING, Probe, SRCU_DOMAIN_INIT,
        counted_functions,
    },
    trace::sampling,
    trace::tracer::Constant,
};

pub async fn run(args: &CountArgs, sink: Sink) -> Result<Report> {
    let format = sink.format();
    let set = match (args.by.by, args.all) {
        (Some(By::Srcu), _) => CountedSet::Srcu,
        (_, true) => CountedSet::All,
        (_, false) => CountedSet::Default,
    };
    let mut probes: Vec<Probe> = counted_functions(set).map(|c| c.probe).collect();
    if args.all {
        // Tells the inits that started a grace period from those that found none.
        probes.push(GP_INIT_FOUND_NOTHING);
    }
    if set == CountedSet::Srcu {
        // First, so that a domain initialised as the counting starts is named.
        probes.insert(0, SRCU_DOMAIN_INIT);
    }
    // Switching the sampled reader probe makes these threads call updaters for rcutrace:
    // their calls are left out (and counted as such) only then.
    let constants = match args.sample_readers {
        Some(_) => vec![Constant::Pids(
            "TASKS_RCU_PIDS",
            kernel::tasks_rcu_kthreads(),
        )],
        None => Vec::new(),
    };
    // Kept for every interval.
    let symbols = SymbolKeeper::new();
    let launch = super::window::launch_of(args.common.length.command())?;
    let mut cgroups = CgroupPaths::new();
    let report = trace(
        Request {
            probes: &probes,
            constants,
            choice: args.common.attach,
            by: args.by.by,
            need: Need::Any,
            ends: Ends::after(args.common.length.duration()),
            reporting: Reporting::every(args.over_time.interval()),
            sample_readers: args.sample_readers,
            hooks: super::window::hooks(
                matches!(args.by.by, Some(By::Stack | By::Srcu)).then_some(&symbols),
                launch.as_ref(),
            ),
        },
        None,
        &mut |period| report_of(period, &args.by, &symbols, format, &mut cgroups),
        sink,
    )
    .await?;
    super::window::launched(launch.as_ref())?;
    Ok(report)
}

/// The counts of one period, as a map and their ratios.
fn report_of(
    period: &Period<'_>,
    by: &ByArgs,
    symbols: &SymbolKeeper,
    format: Format,
    cgroups: &mut CgroupPaths,
) -> Result<Report> {
    let totals = period.counters.array("COUNTS");
    // Sampled readers: what the switches counted is in no window; the estimate replaces the
    // count.
    let readers_estimate = period.sampled_readers.as_ref().map(|sampled| {
        let losses = period.counters.array("COUNT_LOSSES");
        let left_out = losses.get(counters::LEFT_OUT_SWITCHING as usize);
        sampling::estimate(sampled, period.elapsed, left_out.copied().unwrap_or(0))
    });
    let counts: Vec<(&Counted, u64)> = COUNTED
        .iter()
        .filter(|c| period.attached.iter().any(|(probe, _)| *probe == c.probe))
        .filter_map(|c| match readers_estimate {
            Some(estimate) if c.slot() == counters::READ_LOCK => estimate.readers.map(|n| (c, n)),
            _ => Some((c, totals.get(c.slot() as usize).copied().unwrap_or(0))),
        })
        .collect();
    let (counts, entries, keyed_losses) = match by.by {
        None => {
            let entries = counts
                .iter()
                .map(|(c, n)| match readers_estimate {
                    Some(_) if c.slot() == counters::READ_LOCK => {
                        (format!("{} (estimated)", c.function()), *n)
                    }
                    _ => (c.function().to_string(), *n),
                })
                .collect();
            (counts, entries, None)
        }
        Some(key_by) => keyed(period, counts, key_by, by.top, symbols, cgroups),
    };
    // Reader kprobe skips are the tracer's own nested rcu_read_lock(), not lost readers.
    let not_readers: Vec<Probe> = counts
        .iter()
        .filter(|(c, _)| c.slot() != counters::READ_LOCK)
        .map(|(c, _)| c.probe)
        .collect();
    let found_nothing = period
        .attached
        .iter()
        .any(|(probe, _)| *probe == GP_INIT_FOUND_NOTHING)
        .then(|| {
            let slot = counters::GP_INIT_FOUND_NOTHING as usize;
            totals.get(slot).copied().unwrap_or(0)
        });
    let mut summary = summarize(
        &counts,
        found_nothing,
        period.elapsed,
        period.counters.missed(period.tracer, &not_readers),
    );
    summary.own_calls_left_out = period
        .counters
        .array("OWN_STATS")
        .get(own_work::STAT_CALLS_LEFT_OUT as usize)
        .copied()
        .unwrap_or(0);
    summary.keyed_losses = keyed_losses;
    summary.readers_estimate = readers_estimate;
    super::publish::warn_disagreements(format, &summary.cross_checks);
    Ok(Report {
        time: None,
        maps: vec![Map::Count(CountMap {
            name: "@".into(),
            entries,
        })],
        summary: Summary::Count(summary),
        environment: period.environment(),
    })
}

/// Each traced function's count.
type Counts<'a> = Vec<(&'a Counted, u64)>;

type Keyed<'a> = (Counts<'a>, Vec<(String, u64)>, Option<KeyedLosses>);

/// With `--by`: the map's entries are `KEY, function`, the largest `top` kept; the totals per
/// function (for the summary) are the sums over every key.
fn keyed<'a>(
    period: &Period<'_>,
    counts: Vec<(&'a Counted, u64)>,
    by: By,
    top: usize,
    symbols: &SymbolKeeper,
    cgroups: &mut CgroupPaths,
) -> Keyed<'a> {
    let mut frames = stack_frames(period.tracer, symbols);
    let mut cgroup = |id| cgroups.path(id);
    let mut domain = domain_names(period.tracer, symbols);
    let mut names = Namers {
        frames: &mut frames,
        cgroup: &mut cgroup,
        domain: &mut domain,
    };
    let (totals, entries) =
        keyed_entries(&counts, period.counters.keyed_counts(), by, top, &mut names);
    let losses = period.counters.array("COUNT_LOSSES");
    let loss = |slot: u32| losses.get(slot as usize).copied().unwrap_or(0);
    let keyed_losses = KeyedLosses {
        map_full: loss(counters::LOST_KEYED_MAP_FULL),
        stacks_lost: loss(counters::LOST_STACK),
    };
    (totals, entries, Some(keyed_losses))
}

/// The map's entries from the programs' keyed counts (`KEY, function`, folded to the largest
/// `top`), and each traced function's total over every key.
fn keyed_entries<'a, 'k>(
    counts: &[(&'a Counted, u64)],
    keyed: impl IntoIterator<Item = (&'k Attribution, u64)>,
    by: By,
    top: usize,
    names: &mut Namers<'_>,
) -> (Counts<'a>, Vec<(String, u64)>) {
    let mut totals: Vec<(&Counted, u64)> = counts.iter().map(|(c, _)| (*c, 0)).collect();
    let mut entries = Vec::new();
    for (key, n) in keyed {
        let Some(total) = totals.iter_mut().find(|(c, _)| c.slot() == key.event) else {
            continue;
        };
        total.1 += n;
        let function = total.0.function();
        let text = match by {
            // The stack's first frame is the function itself.
            By::Stack if key.stack != NO_STACK => key_text(by, key, names),
            _ => format!("{}, {function}", key_text(by, key, names)),
        };
        entries.push((text, n));
    }
    (totals, fold_top(entries, top, |n| *n, |a, b| *a += b))
}

/// The counts the ratios are made of, from the traced functions' counts; `found_nothing`: the
/// `rcu_gp_init()` calls that started no grace period, where they were counted.
fn summarize(
    counts: &[(&Counted, u64)],
    found_nothing: Option<u64>,
    elapsed: Duration,
    missed: u64,
) -> CountSummary {
    let count = |slot: CounterSlot| {
        counts
            .iter()
            .find(|(c, _)| c.slot() == slot)
            .map(|(_, n)| *n)
    };
    let queuers: Vec<&(&Counted, u64)> = counts
        .iter()
        .filter(|(c, _)| {
            [
                counters::CALL_RCU,
                counters::CALL_RCU_HURRY,
                counters::KVFREE_CALL_RCU,
            ]
            .contains(&c.slot())
        })
        .collect();
    let callbacks = queuers.iter().map(|(_, n)| *n).reduce(|a, b| a + b);
    let inits = counts
        .iter()
        .find(|(c, _)| c.function() == GRACE_PERIOD_INIT)
        .map(|(_, n)| *n);
    let cross_checks = inits
        .zip(found_nothing)
        .zip(count(counters::GP_FQS_LOOP))
        .map(|((inits, nothing), loops)| checks::grace_period_inits(inits, nothing, loops))
        .into_iter()
        .collect();
    CountSummary {
        elapsed,
        readers: count(counters::READ_LOCK),
        call_rcu: count(counters::CALL_RCU),
        callbacks,
        callbacks_of: queuers
            .iter()
            .map(|(c, _)| c.function().to_string())
            .collect(),
        grace_periods: count(counters::GP_FQS_LOOP),
        missed,
        own_calls_left_out: 0,
        keyed_losses: None,
        readers_estimate: None,
        cross_checks,
    }
}

/// Counted with `--all`: the grace-period kthread's other call per grace period.
const GRACE_PERIOD_INIT: &str = "rcu_gp_init";

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
            let counted = COUNTED.iter().find(|c| c.function() == *name).unwrap();
            (counted, *n)
        })
        .collect();
        let summary = summarize(&counts, None, Duration::from_secs(10), 3);
        assert_eq!(
            summary,
            CountSummary {
                elapsed: Duration::from_secs(10),
                readers: Some(100_000),
                call_rcu: Some(30),
                // call_rcu_hurry was not traced (6.1 has none): the others still add up,
                // and only they are named.
                callbacks: Some(40),
                callbacks_of: vec!["call_rcu".into(), "kvfree_call_rcu".into()],
                grace_periods: Some(20),
                missed: 3,
                own_calls_left_out: 0,
                keyed_losses: None,
                readers_estimate: None,
                cross_checks: Vec::new(),
            }
        );
        let nothing = summarize(&[], None, Duration::ZERO, 0);
        assert_eq!((nothing.readers, nothing.callbacks), (None, None));
    }

    /// `count --by cpu` on `cpus` CPUs as text, `--top` at its default (20): each CPU's
    /// `__rcu_read_lock` 10 000 + its number, its `call_rcu` 7, but `hot`'s (function, CPU,
    /// count); and the total of every count.
    fn by_cpu_text(cpus: u32, hot: &[(&str, u32, u64)]) -> (String, u64) {
        let counted = |name: &str| COUNTED.iter().find(|c| c.function() == name).unwrap();
        let counts = vec![(counted("__rcu_read_lock"), 0), (counted("call_rcu"), 0)];
        let mut keys = Vec::new();
        for cpu in 0..cpus {
            for (function, usual) in [
                ("__rcu_read_lock", 10_000 + u64::from(cpu)),
                ("call_rcu", 7),
            ] {
                let n = hot
                    .iter()
                    .find(|(f, c, _)| *f == function && *c == cpu)
                    .map_or(usual, |(.., n)| *n);
                let key = Attribution {
                    event: counted(function).slot(),
                    cpu,
                    ..Default::default()
                };
                keys.push((key, n));
            }
        }
        let (totals, entries) = keyed_entries(
            &counts,
            keys.iter().map(|(k, n)| (k, *n)),
            By::Cpu,
            default_top(),
            &mut Namers {
                frames: &mut |_| Vec::new(),
                cgroup: &mut |_| String::new(),
                domain: &mut |_| String::new(),
            },
        );
        let total = totals.iter().map(|(_, n)| n).sum();
        let report = Report {
            time: None,
            maps: vec![Map::Count(CountMap {
                name: "@".into(),
                entries,
            })],
            summary: Summary::Count(summarize(&totals, None, Duration::from_secs(10), 0)),
            environment: None,
        };
        (
            crate::render::output(crate::render::Format::Text, &report),
            total,
        )
    }

    /// `--top` as `count --by cpu` takes it without one.
    fn default_top() -> usize {
        use clap::Parser as _;
        let cli = crate::cli::Cli::try_parse_from(["rcutrace", "count", "--by", "cpu"]).unwrap();
        match cli.command {
            crate::cli::Command::Count(args) => args.by.top,
            _ => unreachable!(),
        }
    }

    /// The `@[...]: N` lines, and what they add up to.
    fn map_lines(text: &str) -> (Vec<&str>, u64) {
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("@[")).collect();
        let sum = lines
            .iter()
            .map(|l| l.rsplit(": ").next().unwrap().parse::<u64>().unwrap())
            .sum();
        (lines, sum)
    }

    #[test]
    fn by_cpu_on_384_cpus_prints_the_20_largest_keys_and_folds_the_rest() {
        let (text, total) = by_cpu_text(
            384,
            &[("__rcu_read_lock", 17, 900_000), ("call_rcu", 200, 50_000)],
        );
        let (lines, sum) = map_lines(&text);
        // bpftrace's order, the largest last; the fold says how many keys it holds and how
        // much, so that the lines add up to every count.
        assert_eq!(
            lines,
            [
                "@[366, __rcu_read_lock]: 10366",
                "@[367, __rcu_read_lock]: 10367",
                "@[368, __rcu_read_lock]: 10368",
                "@[369, __rcu_read_lock]: 10369",
                "@[370, __rcu_read_lock]: 10370",
                "@[371, __rcu_read_lock]: 10371",
                "@[372, __rcu_read_lock]: 10372",
                "@[373, __rcu_read_lock]: 10373",
                "@[374, __rcu_read_lock]: 10374",
                "@[375, __rcu_read_lock]: 10375",
                "@[376, __rcu_read_lock]: 10376",
                "@[377, __rcu_read_lock]: 10377",
                "@[378, __rcu_read_lock]: 10378",
                "@[379, __rcu_read_lock]: 10379",
                "@[380, __rcu_read_lock]: 10380",
                "@[381, __rcu_read_lock]: 10381",
                "@[382, __rcu_read_lock]: 10382",
                "@[383, __rcu_read_lock]: 10383",
                "@[200, call_rcu]: 50000",
                "@[17, __rcu_read_lock]: 900000",
                "@[[other: 748 keys]]: 3719459",
            ]
        );
        assert_eq!((sum, total), (4_856_200, 4_856_200));
        // The map and the summary after it: no line per CPU, none wider than 100 columns.
        assert!(text.lines().count() < 40, "{text}");
        assert!(text.lines().all(|l| l.len() <= 100), "{text}");
    }

    #[test]
    fn by_cpu_on_64_cpus_prints_the_20_largest_keys_and_folds_the_rest() {
        let (text, total) = by_cpu_text(
            64,
            &[("__rcu_read_lock", 17, 900_000), ("call_rcu", 40, 50_000)],
        );
        let (lines, sum) = map_lines(&text);
        assert_eq!(lines.len(), 21, "{text}");
        assert_eq!(lines[0], "@[46, __rcu_read_lock]: 10046");
        assert_eq!(lines[17], "@[63, __rcu_read_lock]: 10063");
        assert_eq!(lines[18], "@[40, call_rcu]: 50000");
        // The fold holds less than the hottest key here: it prints before it.
        assert_eq!(lines[19], "@[[other: 108 keys]]: 451459");
        assert_eq!(lines[20], "@[17, __rcu_read_lock]: 900000");
        assert_eq!((sum, total), (1_582_440, 1_582_440));
    }
}
