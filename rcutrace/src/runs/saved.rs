//! A saved `-f json` run read back into the report model, so that `rcutrace report` prints it
//! with the very renderer the live run used. rcutrace's runs carry every figure the text
//! shows; bpftrace's own JSON carries its maps and histograms (a histogram's layout is then
//! told from its bucket bounds). The file is read as a stream, one line at a time, keeping
//! only the model: a run of a million records needs no copy of its text.
//!
//! What is not one whole run is refused with the line where it goes wrong: an empty file,
//! two runs in one file, a run cut short before its summaries.

use std::{io::BufRead, path::Path, time::Duration};

use anyhow::{Context as _, Result, anyhow, bail};
use rcutrace_common::{
    hist::{LOG2_SLOTS, Linear, SlotBounds, log2_bounds},
    records::{self, Bucket, HistLayout, HistValue, MapValue, Record},
};

use super::figures::{percentiles, seconds, unit};
use crate::{
    model::checks::CrossCheck,
    model::run::RunSummary,
    model::stats::PERCENTILE_ERROR,
    model::{
        Buckets, CallbackCounts, CallbackRow, CallbackTotals, CallbacksSummary, CountMap,
        CountSummary, Environment, HistMap, KeyedLosses, LatencySummary, Losses, Map,
        ReadersEstimate, Report, ScalarMap, SeriesStats, Stamp, Summary, Unit,
    },
};

/// A run as it was saved.
#[derive(Debug)]
pub struct Saved {
    /// From the `attached_probes` record: the text's banner.
    pub probes: Option<u64>,
    /// The one window's report, or with `--interval` one report per interval, in order.
    pub reports: Vec<Report>,
}

pub fn read(path: &Path) -> Result<Saved> {
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    parse(std::io::BufReader::new(file))
        .with_context(|| format!("reading the saved run {}", path.display()))
}

/// Reads the JSON lines of one run. Records of types rcutrace does not know (bpftrace's
/// `printf`, `lost_events`, ...) carry nothing the report shows and are skipped.
pub fn parse(mut input: impl BufRead) -> Result<Saved> {
    let mut run = Run::default();
    let mut line = String::new();
    let mut number = 0;
    loop {
        line.clear();
        if input
            .read_line(&mut line)
            .with_context(|| format!("line {}", number + 1))?
            == 0
        {
            break;
        }
        number += 1;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        match decode(text) {
            Ok(Some(record)) => run.add(record, number)?,
            Ok(None) => {}
            // A last line without its newline was being written when the file was cut.
            Err(error) if !line.ends_with('\n') => {
                return Err(error.context(format!(
                    "line {number}, the last, is cut short: the file ends in the middle of \
                     a record"
                )));
            }
            Err(error) => return Err(error.context(format!("line {number}"))),
        }
    }
    run.finish(number)
}

/// One line as a record; `None` for a type rcutrace does not read.
fn decode(line: &str) -> Result<Option<Record>> {
    match serde_json::from_str::<Record>(line) {
        Ok(record) => Ok(Some(record)),
        Err(error) => {
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| anyhow!("not JSON: {e}"))?;
            match value.get("type").and_then(|t| t.as_str()) {
                Some(kind) if !kind.starts_with("rcutrace_") && !BPFTRACE_TYPES.contains(&kind) => {
                    log::info!("record type {kind:?} skipped");
                    Ok(None)
                }
                _ => Err(anyhow!("{error}")),
            }
        }
    }
}

/// bpftrace's record types that rcutrace reads.
const BPFTRACE_TYPES: [&str; 4] = ["attached_probes", "map", "hist", "time"];

/// The run read so far.
#[derive(Default)]
struct Run {
    /// The `attached_probes` record's figure, and its line.
    probes: Option<(u64, usize)>,
    reports: Vec<Report>,
    current: ReportBeingRead,
    /// Lines that held a record.
    records: usize,
    /// The line of the first record of rcutrace's own types: such a run ends each window
    /// with its summaries, which bpftrace's runs do not have.
    rcutrace_record: Option<usize>,
    /// The line of the environment record.
    environment: Option<usize>,
}

/// The records of one report (the whole window, or one interval) being read.
#[derive(Default)]
struct ReportBeingRead {
    /// The line it starts at.
    from: usize,
    time: Option<Stamp>,
    environment: Option<Environment>,
    maps: Vec<Map>,
    /// Histograms wait for their layout, which the summaries after them carry.
    hists: Vec<(String, Option<String>, Vec<Bucket>)>,
    layouts: Vec<(String, HistLayout)>,
    count_summary: Option<CountSummary>,
    callbacks_summary: Option<CallbacksSummary>,
    /// `gp`'s tables and its slowest grace periods.
    gp_summary: Option<records::GracePeriodsSummary>,
    /// `run`'s account of its command.
    run_summary: Option<records::RunSummary>,
    grace_periods: Vec<records::GracePeriod>,
    /// `srlat --stages`: each function's stages and the calls taken apart.
    stages: Vec<records::StagesSummary>,
    staged_calls: Vec<records::CallStages>,
    latency: Vec<LatencySummary>,
    /// Latency statistics waiting for their function's `rcutrace_not_measured` record.
    series: Vec<records::LatencySummary>,
    /// The line of the first summary record: the window's maps are all before it.
    summarized: Option<usize>,
    records: usize,
}

impl Run {
    fn add(&mut self, record: Record, line: usize) -> Result<()> {
        self.records += 1;
        let own = !matches!(
            record,
            Record::AttachedProbes { .. } | Record::Map(_) | Record::Hist(_) | Record::Time(_)
        );
        if own && self.rcutrace_record.is_none() {
            self.rcutrace_record = Some(line);
        }
        match &record {
            Record::AttachedProbes { probes } => {
                if let Some((_, first)) = self.probes {
                    bail!(
                        "line {line}: a second run starts here (its own attached_probes \
                         record; the first run's is on line {first}): a file holds one saved \
                         run, save each run to a file of its own"
                    );
                }
                if self.records > 1 {
                    bail!(
                        "line {line}: a run's attached_probes record after other records: \
                         two runs in one file? A file holds one saved run"
                    );
                }
                self.probes = Some((*probes, line));
                return Ok(());
            }
            Record::Time(time) => {
                self.close_window(line)?;
                self.current.from = line;
                self.current.time = Some(Stamp {
                    time: time.trim_end_matches('\n').to_string(),
                    cumulative: false,
                });
                return Ok(());
            }
            Record::Environment(_) => {
                if let Some(first) = self.environment {
                    bail!(
                        "line {line}: a second run starts here (its own environment record; \
                         the first run's is on line {first}): a file holds one saved run"
                    );
                }
                self.environment = Some(line);
            }
            _ => {}
        }
        self.current.add(record, line)
    }

    /// Ends the window being read, if it has anything, at the record on `line` (the next
    /// window's time record) or at the end of the file.
    fn close_window(&mut self, line: usize) -> Result<()> {
        let window = std::mem::take(&mut self.current);
        if window.records == 0 && window.time.is_none() {
            return Ok(());
        }
        if let Some(own) = self.rcutrace_record {
            window.check_summarized(own, line, self.records)?;
        }
        self.reports.push(window.into_report()?);
        Ok(())
    }

    fn finish(mut self, lines: usize) -> Result<Saved> {
        if self.records == 0 {
            bail!(
                "it holds no record ({}): not a run saved with -f json or --save",
                if lines == 0 {
                    "the file is empty"
                } else {
                    "only empty lines"
                }
            );
        }
        self.close_window(lines + 1)?;
        Ok(Saved {
            probes: self.probes.map(|(n, _)| n),
            reports: self.reports,
        })
    }
}

impl ReportBeingRead {
    fn add(&mut self, record: Record, line: usize) -> Result<()> {
        match record {
            // Taken by the run.
            Record::AttachedProbes { .. } | Record::Time(_) => {}
            Record::Interval { cumulative } => match self.time.as_mut() {
                Some(stamp) if self.records == 0 => stamp.cumulative = cumulative,
                _ => bail!(
                    "line {line}: an rcutrace_interval record that does not follow a time record"
                ),
            },
            Record::Environment(e) => self.environment = Some(e),
            Record::EmptyMap { map } => {
                self.map_allowed(line)?;
                // It printed as one empty line, whatever kind of map it was.
                self.maps.push(Map::Count(CountMap {
                    name: map,
                    entries: Vec::new(),
                }));
            }
            Record::Map(members) => {
                self.map_allowed(line)?;
                for (name, value) in members.0 {
                    self.maps.push(match value {
                        MapValue::Keyed(entries) => Map::Count(CountMap {
                            name,
                            entries: entries.0,
                        }),
                        MapValue::Scalar(value) => Map::Scalar(ScalarMap { name, value }),
                    });
                }
            }
            Record::Hist(members) => {
                self.map_allowed(line)?;
                for (name, value) in members.0 {
                    match value {
                        HistValue::Buckets(buckets) => self.hists.push((name, None, buckets)),
                        HistValue::Keyed(keys) => {
                            for (key, buckets) in keys.0 {
                                self.hists.push((name.clone(), Some(key), buckets));
                            }
                        }
                    }
                }
            }
            Record::CountSummary(s) => {
                self.one_summary(line)?;
                self.count_summary = Some(count(&s));
            }
            Record::CallbacksSummary(s) => {
                self.one_summary(line)?;
                self.callbacks_summary = Some(callbacks(&s));
            }
            Record::GracePeriodsSummary(s) => {
                self.summarized.get_or_insert(line);
                self.gp_summary = Some(s);
            }
            Record::GracePeriod(g) => self.grace_periods.push(g),
            Record::RunSummary(s) => {
                self.summarized.get_or_insert(line);
                self.run_summary = Some(s);
            }
            Record::StagesSummary(s) => {
                self.summarized.get_or_insert(line);
                self.stages.push(s);
            }
            Record::CallStages(c) => self.staged_calls.push(c),
            Record::StallWarning(_)
            | Record::KernelStallWarning(_)
            | Record::StallEnded(_)
            | Record::ExpeditedStallWarning(_)
            | Record::ExpeditedStallEnded(_)
            | Record::StallSummary(_) => bail!(
                "line {line}: this is a `stall` run: its warnings were its output, and report \
                 does not print them again (read its JSON lines directly)"
            ),
            Record::LatencySummary(s) => {
                self.summarized.get_or_insert(line);
                if let Some(layout) = s.layout
                    && !self.layouts.iter().any(|(name, _)| *name == s.map)
                {
                    self.layouts.push((s.map.clone(), layout));
                }
                self.series.push(s);
            }
            Record::NotMeasured(losses) => {
                self.summarized.get_or_insert(line);
                let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.series)
                    .into_iter()
                    .partition(|s| s.map == losses.map);
                self.series = others;
                let mine: Vec<&records::LatencySummary> = mine.iter().collect();
                self.latency.push(latency_summary(&mine, &losses));
            }
        }
        self.records += 1;
        Ok(())
    }

    /// A window's maps come before its summaries: one after them starts another run.
    fn map_allowed(&self, line: usize) -> Result<()> {
        match self.summarized {
            Some(summary) => bail!(
                "line {line}: a map after the summary of its window (line {summary}), with no \
                 time record between: two runs in one file? A file holds one saved run"
            ),
            None => Ok(()),
        }
    }

    fn one_summary(&mut self, line: usize) -> Result<()> {
        if let Some(summary) = self.summarized {
            bail!(
                "line {line}: a second summary in one window (the first on line {summary}): \
                 two runs in one file? A file holds one saved run"
            );
        }
        self.summarized = Some(line);
        Ok(())
    }

    /// rcutrace ends every window with its summaries: one without them was cut short.
    fn check_summarized(&self, own_record: usize, next: usize, records: usize) -> Result<()> {
        let what = if self.time.is_some() {
            format!("the interval that starts on line {}", self.from)
        } else {
            "the run".to_string()
        };
        let latency_names: Vec<&str> = self.latency.iter().map(|l| l.map_name.as_str()).collect();
        let unsummarized = self
            .hists
            .iter()
            .map(|(name, _, _)| name.as_str())
            .find(|name| !latency_names.contains(name));
        let complete = self.count_summary.is_some()
            || self.callbacks_summary.is_some()
            || self.gp_summary.is_some()
            || (!self.latency.is_empty() && self.series.is_empty() && unsummarized.is_none());
        if complete {
            return Ok(());
        }
        let missing = match (unsummarized, self.series.first()) {
            (_, Some(s)) => format!("{}'s rcutrace_not_measured record", s.map),
            (Some(name), None) => format!("{name}'s summary records"),
            (None, None) => "its summary".to_string(),
        };
        let at = if next > records {
            "the file ends".to_string()
        } else {
            format!("line {next} starts the next interval")
        };
        bail!(
            "{what} has no {missing}: {at} before it (an rcutrace run, by its records from \
             line {own_record} on, ends each window with its summaries): the file was cut short"
        )
    }

    fn into_report(self) -> Result<Report> {
        let mut maps = self.maps;
        for (name, key, buckets) in self.hists {
            let layout = self
                .layouts
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, layout)| *layout)
                .map_or_else(|| infer_layout(&buckets), Ok)
                .with_context(|| format!("histogram {name}"))?;
            let buckets =
                model_buckets(layout, &buckets).with_context(|| format!("histogram {name}"))?;
            maps.push(Map::Hist(HistMap { name, key, buckets }));
        }
        let mut latency = self.latency;
        for s in &self.stages {
            let summary = latency
                .iter_mut()
                .find(|l| l.map_name == s.map)
                .with_context(|| format!("stages of {} without its latency summary", s.map))?;
            let calls: Vec<&records::CallStages> = self.staged_calls.iter().collect();
            summary.stages = Some(Box::new(super::stages::summary(s, &calls)?));
        }
        let summary = match (self.count_summary, self.callbacks_summary, self.gp_summary) {
            (Some(summary), _, _) => Summary::Count(summary),
            (None, Some(summary), _) => Summary::Callbacks(summary),
            (None, None, Some(summary)) => Summary::GracePeriods(Box::new(
                super::grace_periods::summary(&summary, &self.grace_periods, latency)?,
            )),
            (None, None, None) => match self.run_summary {
                Some(figures) => Summary::Run(Box::new(RunSummary { latency, figures })),
                None => Summary::Latency(latency),
            },
        };
        Ok(Report {
            time: self.time,
            maps,
            summary,
            environment: self.environment,
        })
    }
}

fn count(s: &records::CountSummary) -> CountSummary {
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

fn callbacks(s: &records::CallbacksSummary) -> CallbacksSummary {
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

fn latency_summary(
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
    }
}

/// A bucket's values, as the slot arithmetic states them.
fn bounds(bucket: &Bucket) -> Result<SlotBounds> {
    let u64_of = |v: i128| u64::try_from(v).map_err(|_| anyhow!("bucket bound {v} out of range"));
    Ok(match (bucket.min, bucket.max) {
        (None, Some(max)) => SlotBounds::Below(u64_of(max + 1)?),
        // bpftrace 0.17 writes the bounds of a log2 bucket at or above 2^31 as 32-bit numbers
        // that wrapped (`"min": -2147483648, "max": 0` for [2G, 4G)): the lower bound, read
        // back as unsigned, places the bucket in the log2 sequence, which gives its upper one.
        (Some(min), Some(_)) if min < 0 => {
            let low = i32::try_from(min)
                .map(|wrapped| u64::from(wrapped as u32))
                .map_err(|_| anyhow!("bucket bound {min} out of range"))?;
            if !low.is_power_of_two() || low < 1 << 31 {
                bail!("bucket bound {min} is neither a value nor a wrapped log2 bound");
            }
            SlotBounds::Range { low, high: low * 2 }
        }
        (Some(min), Some(max)) => SlotBounds::Range {
            low: u64_of(min)?,
            high: u64_of(max + 1)?,
        },
        (Some(min), None) => SlotBounds::From(u64_of(min)?),
        (None, None) => bail!("a bucket with neither bound"),
    })
}

/// bpftrace's JSON does not say how a histogram was made: log2 if every bucket is a log2
/// bucket, else linear with the step of its buckets and the bounds they show.
fn infer_layout(buckets: &[Bucket]) -> Result<HistLayout> {
    let all = buckets.iter().map(bounds).collect::<Result<Vec<_>>>()?;
    if all
        .iter()
        .all(|b| (0..LOG2_SLOTS).any(|slot| log2_bounds(slot) == *b))
    {
        return Ok(HistLayout::Log2);
    }
    let ranges = || {
        all.iter().filter_map(|b| match b {
            SlotBounds::Range { low, high } => Some((*low, *high)),
            _ => None,
        })
    };
    let (low, high) = ranges()
        .next()
        .ok_or_else(|| anyhow!("its buckets show neither a log2 nor a linear layout"))?;
    let min = all
        .iter()
        .find_map(|b| match b {
            SlotBounds::Below(bound) => Some(*bound),
            _ => None,
        })
        .unwrap_or(low);
    let max = all
        .iter()
        .find_map(|b| match b {
            SlotBounds::From(bound) => Some(*bound),
            _ => None,
        })
        .or_else(|| ranges().next_back().map(|(_, high)| high))
        .unwrap_or(high);
    Ok(HistLayout::Linear {
        min,
        max,
        step: high - low,
    })
}

/// The model's slots for `buckets` laid out as `layout`; every bucket must be one of its slots.
fn model_buckets(layout: HistLayout, buckets: &[Bucket]) -> Result<Buckets> {
    let mismatch = |b: &Bucket| anyhow!("bucket {b:?} is not a bucket of its {layout:?} layout");
    match layout {
        HistLayout::Log2 => {
            let mut counts = vec![0; LOG2_SLOTS as usize];
            for bucket in buckets {
                let b = bounds(bucket)?;
                let slot = (0..LOG2_SLOTS)
                    .find(|&slot| log2_bounds(slot) == b)
                    .ok_or_else(|| mismatch(bucket))?;
                counts[slot as usize] += bucket.count;
            }
            // A file may hold a million small histograms: each keeps only the slots up to
            // its last non-empty one.
            let end = counts
                .iter()
                .rposition(|&c| c != 0)
                .map_or(0, |last| last + 1);
            counts.truncate(end);
            counts.shrink_to_fit();
            Ok(Buckets::Log2(counts))
        }
        HistLayout::Linear { min, max, step } => {
            let linear = Linear { min, max, step };
            // bpftrace's own limits, which also keep a file from asking for a huge histogram.
            if step == 0 || min >= max || linear.buckets() > 1000 {
                bail!("linear layout {min},{max},{step} is not one lhist() accepts");
            }
            let slots = linear.buckets() + 2;
            let mut counts = vec![0; slots as usize];
            for bucket in buckets {
                let b = bounds(bucket)?;
                let slot = (0..slots)
                    .find(|&slot| linear.bounds(slot) == b)
                    .ok_or_else(|| mismatch(bucket))?;
                counts[slot as usize] += bucket.count;
            }
            Ok(Buckets::Linear(linear, counts))
        }
        HistLayout::Sparse { step } => {
            let buckets = buckets
                .iter()
                .map(|bucket| match bounds(bucket)? {
                    SlotBounds::Range { low, high } if step > 0 && high - low == step => {
                        Ok((low / step, bucket.count))
                    }
                    _ => Err(mismatch(bucket)),
                })
                .collect::<Result<_>>()?;
            Ok(Buckets::Sparse { step, buckets })
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::render::{self, Format};
    use rcutrace_common::{hist::log2_slot, records::Environment};

    /// What a live run printed in `format`: banner, then its report.
    pub(crate) fn live(format: Format, report: &Report) -> String {
        render::banner(format, 2) + &render::report(format, report)
    }

    fn replayed(report: &Report) -> String {
        let saved = parse(live(Format::Json, report).as_bytes()).unwrap();
        assert_eq!(saved.probes, Some(2));
        render::banner(Format::Text, 2) + &render::report(Format::Text, &saved.reports[0])
    }

    pub(crate) fn log2(values: &[i64]) -> Buckets {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        for &v in values {
            counts[log2_slot(v) as usize] += 1;
        }
        Buckets::Log2(counts)
    }

    pub(crate) fn series(key: Option<&str>, count: u64) -> SeriesStats {
        SeriesStats {
            key: key.map(String::from),
            count,
            min_ns: (count > 0).then_some(1_234_567),
            max_ns: (count > 0).then_some(23_456_789),
            mean_ns: (count > 0).then_some(12_345_678.9),
            percentiles_exact: false,
            percentiles: if count > 0 {
                vec![
                    (0.5, 11_111_111.1),
                    (0.9, 2e7),
                    (0.99, 2.3e7),
                    (0.999, 2.3e7),
                ]
            } else {
                vec![]
            },
        }
    }

    pub(crate) fn latency(maps: Vec<Map>, series: Vec<SeriesStats>, unit: Unit) -> Report {
        Report {
            time: None,
            maps,
            summary: Summary::Latency(vec![LatencySummary {
                map_name: "@srlat".into(),
                unit,
                series,
                percentile_error: PERCENTILE_ERROR,
                losses: Losses {
                    in_flight_at_exit: 1,
                    returns_lost: 2,
                    stacks_lost: Some(3),
                    ..Losses::default()
                },
                stages: None,
                cross_checks: Vec::new(),
            }]),
            environment: Some(Environment {
                kernel_release: "6.12.57+deb13-cloud-amd64".into(),
                cpus: 2,
                ..Environment::default()
            }),
        }
    }

    pub(crate) fn hist(key: Option<&str>, buckets: Buckets) -> Map {
        Map::Hist(HistMap {
            name: "@srlat".into(),
            key: key.map(String::from),
            buckets,
        })
    }

    #[test]
    fn every_layout_prints_again_byte_for_byte() {
        let linear = Linear {
            min: 0,
            max: 10240,
            step: 1024,
        };
        let mut linear_counts = vec![0; 12];
        linear_counts[0] = 1;
        linear_counts[3] = 4;
        linear_counts[11] = 2;
        for report in [
            latency(
                vec![hist(None, log2(&[-1, 0, 5, 20, 1 << 40]))],
                vec![series(None, 5)],
                Unit::Ms,
            ),
            latency(
                vec![hist(None, Buckets::Linear(linear, linear_counts))],
                vec![series(None, 7)],
                Unit::Us,
            ),
            latency(
                vec![hist(
                    None,
                    Buckets::Sparse {
                        step: 100,
                        buckets: vec![(7, 1), (2, 3)],
                    },
                )],
                vec![series(None, 4)],
                Unit::Ns,
            ),
        ] {
            assert_eq!(replayed(&report), live(Format::Text, &report));
        }
    }

    /// `run`'s report of two synchronize_rcu() calls, keyed by stack.
    pub(crate) fn run_report() -> Report {
        use crate::model::run::{RunFigures, RunWait};
        let key = "\n    synchronize_rcu+5\n    __x64_sys_membarrier+490\n";
        let Summary::Latency(latency) = latency(
            vec![hist(Some(key), log2(&[16_000_000, 20_000_000]))],
            vec![series(Some(key), 2)],
            Unit::Ms,
        )
        .summary
        else {
            unreachable!()
        };
        Report {
            time: None,
            maps: vec![hist(Some(key), log2(&[16_000_000, 20_000_000]))],
            summary: Summary::Run(Box::new(RunSummary {
                latency,
                figures: RunFigures {
                    command: "rcu-workload membarrier 2".into(),
                    exit_status: Some(0),
                    wall_ns: 40_000_000,
                    off_cpu_asleep_ns: 35_000_000,
                    in_waits_asleep_ns: 35_000_000,
                    threads: 1,
                    rcu_wait_ns: 36_000_000,
                    waits: vec![RunWait {
                        function: "synchronize_rcu".into(),
                        domain: None,
                        caused_work: false,
                        calls: 2,
                        total_ns: 36_000_000,
                        max_ns: 20_000_000,
                    }],
                    ..Default::default()
                },
            })),
            environment: None,
        }
    }

    /// `run`'s report: the waits' histograms by stack, then the command's account, printed
    /// again as it was, and its stacks drawn as the live run's.
    #[test]
    fn a_run_prints_again_byte_for_byte() {
        let report = run_report();
        let text = live(Format::Text, &report);
        assert!(
            text.contains("Command: rcu-workload membarrier 2"),
            "{text}"
        );
        assert_eq!(replayed(&report), text);
        let saved = parse(live(Format::Json, &report).as_bytes()).unwrap();
        assert_eq!(
            crate::model::stacks::of_report(&saved.reports[0]),
            crate::model::stacks::of_report(&report)
        );
        assert!(crate::model::stacks::of_report(&report).is_ok());
    }

    #[test]
    fn stages_print_again_byte_for_byte() {
        let mut report = latency(
            vec![hist(None, log2(&[6, 0]))],
            vec![series(None, 2)],
            Unit::Ms,
        );
        let stages = crate::model::stages::tests::both_paths();
        assert_eq!(stages.paths.len(), 2);
        assert_eq!(stages.calls.len(), 2);
        if let Summary::Latency(summaries) = &mut report.summary {
            summaries[0].stages = Some(Box::new(stages));
        }
        let text = live(Format::Text, &report);
        assert!(
            text.contains("Expedited grace period, 1 calls (ms)"),
            "{text}"
        );
        assert_eq!(replayed(&report), text);
        // And the calls, one by one, come back too.
        let json = live(Format::Json, &report);
        let saved = parse(json.as_bytes()).unwrap();
        assert_eq!(
            render::banner(Format::Json, 2) + &render::report(Format::Json, &saved.reports[0]),
            json
        );
        // Calls out of order and events lost: 0 in every JSON summary, the text's line said
        // only where there are some; both come back.
        assert!(
            json.contains("\"out_of_order\": 0, \"events_lost\": 0"),
            "{json}"
        );
        assert!(!json.contains("\"out_of_order\": false"), "{json}");
        assert!(!text.contains("in an order no call has"), "{text}");
        assert!(
            text.contains("0 grace period not seen whole; 0 grace-period and stage events of the run lost to a full ring\n"),
            "{text}"
        );
        if let Summary::Latency(summaries) = &mut report.summary {
            let stages = summaries[0].stages.as_mut().unwrap();
            (stages.adjusted, stages.out_of_order, stages.events_lost) = (1, 1, 5);
            (stages.calls[0].adjusted, stages.calls[0].out_of_order) = (true, true);
        }
        let text = live(Format::Text, &report);
        assert!(
            text.contains("@srlat stages: 1 calls' records came in an order no call has"),
            "{text}"
        );
        assert!(
            text.contains("; 5 grace-period and stage events of the run lost to a full ring\n")
        );
        assert_eq!(replayed(&report), text);
        let json = live(Format::Json, &report);
        assert!(
            json.contains("\"out_of_order\": 1, \"events_lost\": 5"),
            "{json}"
        );
        assert!(
            json.contains("\"adjusted\": true, \"out_of_order\": true"),
            "{json}"
        );
        let saved = parse(json.as_bytes()).unwrap();
        let Summary::Latency(summaries) = &saved.reports[0].summary else {
            panic!("{saved:?}")
        };
        let stages = summaries[0].stages.as_ref().unwrap();
        assert_eq!(
            (stages.adjusted, stages.out_of_order, stages.events_lost),
            (1, 1, 5)
        );
        let calls: Vec<bool> = stages.calls.iter().map(|c| c.out_of_order).collect();
        assert_eq!(calls, [true, false]);
    }

    #[test]
    fn keyed_and_empty_histograms_print_again() {
        let keyed = latency(
            vec![
                hist(Some("kworker/0:1"), log2(&[5, 6])),
                hist(
                    Some("\n    synchronize_rcu+5\n    do_syscall_64+135\n"),
                    log2(&[100]),
                ),
            ],
            vec![
                series(Some("\n    synchronize_rcu+5\n    do_syscall_64+135\n"), 1),
                series(Some("kworker/0:1"), 2),
            ],
            Unit::Ms,
        );
        assert_eq!(replayed(&keyed), live(Format::Text, &keyed));
        let empty = latency(vec![hist(None, log2(&[]))], vec![series(None, 0)], Unit::Ms);
        let text = live(Format::Text, &empty);
        assert!(text.contains("\n\n\n\n@srlat count 0\n"), "{text:?}");
        assert_eq!(replayed(&empty), text);
        let no_key = latency(vec![], vec![], Unit::Ms);
        assert_eq!(replayed(&no_key), live(Format::Text, &no_key));
    }

    #[test]
    fn count_prints_again_with_its_ratios() {
        for entries in [
            vec![
                ("call_rcu".to_string(), 6697),
                ("__rcu_read_lock".into(), 1_400_220),
            ],
            vec![],
        ] {
            for readers_estimate in [
                None,
                Some(ReadersEstimate {
                    readers: Some(1_400_220),
                    counted: 140_000,
                    sampled: Duration::from_nanos(501_012_345),
                    windows: 5,
                    margin: Some(20_000),
                    switching_grace_periods: 12,
                    switching_calls_left_out: 9,
                }),
            ] {
                let report = Report {
                    time: None,
                    maps: vec![Map::Count(CountMap {
                        name: "@".into(),
                        entries: entries.clone(),
                    })],
                    summary: Summary::Count(CountSummary {
                        elapsed: Duration::from_nanos(5_010_123_456),
                        readers: Some(1_400_220),
                        call_rcu: Some(6697),
                        callbacks: Some(8777),
                        callbacks_of: vec!["call_rcu".into(), "kvfree_call_rcu".into()],
                        grace_periods: Some(462),
                        missed: 3,
                        own_calls_left_out: 0,
                        keyed_losses: Some(KeyedLosses {
                            map_full: 1,
                            stacks_lost: 2,
                        }),
                        readers_estimate,
                        cross_checks: Vec::new(),
                    }),
                    environment: None,
                };
                assert_eq!(replayed(&report), live(Format::Text, &report));
            }
        }
    }

    /// A `callbacks` run: two rows, one of them without an invocation.
    pub(crate) fn callbacks_report() -> Report {
        let row = |function: &str, invoked| CallbackRow {
            function: function.into(),
            via: "call_rcu".into(),
            queued: invoked + 2,
            invoked,
            pending_at_exit: 2,
            queued_before_tracing: 1,
            unrecorded: 0,
            requeued: 0,
            latency: if invoked > 0 {
                series(None, invoked)
            } else {
                series(None, 0)
            },
        };
        Report {
            time: None,
            maps: vec![
                Map::Hist(HistMap {
                    name: "@cblat".into(),
                    key: Some("rcu_work_rcufn".into()),
                    buckets: log2(&[3_000_000, 20_000_000]),
                }),
                Map::Count(CountMap {
                    name: "@cpu_pending".into(),
                    entries: Vec::new(),
                }),
                Map::Count(CountMap {
                    name: "@cpu_queued".into(),
                    entries: vec![("0".into(), 4), ("1".into(), 2)],
                }),
            ],
            summary: Summary::Callbacks(CallbacksSummary {
                elapsed: Duration::from_nanos(5_004_999_999),
                unit: Unit::Ms,
                rows: vec![row("rcu_work_rcufn", 2), row("delayed_put_task_struct", 0)],
                rows_not_shown: 3,
                not_shown: CallbackCounts {
                    queued: 9,
                    invoked: 8,
                    pending_at_exit: 1,
                    queued_before_tracing: 4,
                },
                percentile_error: 0.0039,
                totals: CallbackTotals {
                    queued: 20,
                    invoked: 12,
                    kvfree_queued: Some(7),
                    missed_by_kernel: 1,
                    ..CallbackTotals::default()
                },
                entry_points_not_traced: vec!["call_rcu_hurry".into()],
                entry_points: vec![crate::model::EntryPointCalls {
                    function: "call_rcu".into(),
                    calls: 21,
                    notes: crate::model::checks::Notes {
                        overwritten: 1,
                        waiting_at_close: 0,
                        from_before: 0,
                    },
                }],
                cross_checks: Vec::new(),
            }),
            environment: None,
        }
    }

    #[test]
    fn callbacks_print_again() {
        let report = callbacks_report();
        let text = live(Format::Text, &report);
        assert!(text.contains("rcu_work_rcufn"), "{text}");
        assert_eq!(replayed(&report), text);
    }

    /// A gp run of 384 CPUs, each a last holdout, with its ten slowest grace periods (`--top`
    /// 10): JSON keeps every CPU, and `report` lists the same ten as the live text did.
    #[test]
    fn a_gp_run_of_384_cpus_keeps_every_cpu_and_prints_the_same_ten() {
        use crate::model::{
            CpuHoldouts, GracePeriodRow, GracePeriodsSummary,
            anatomy::{GracePeriod, Holdout},
        };
        let top = 10;
        let holdouts: Vec<CpuHoldouts> = (0..384u32)
            .map(|i| {
                // Most grace periods first, as the tally sorts them.
                let cpu = (i * 7) % 384;
                CpuHoldouts {
                    cpus: vec![cpu],
                    grace_periods: 1000 - u64::from(i),
                    found_by_pass: u64::from(i % 3),
                    held_ns: 1_000_000 + u64::from(cpu),
                }
            })
            .collect();
        let slowest = (0..top as u64)
            .map(|i| GracePeriodRow {
                grace_period: GracePeriod {
                    gp_seq: 4 * i,
                    started_ns: i,
                    duration_ns: 90_000_000 - i,
                    phases: Default::default(),
                    request_wait_ns: None,
                    fqs_passes: 1,
                    cpus_reported: 384,
                    blocked_readers: 0,
                    last_holdout: Some(Holdout::Cpu {
                        cpus: vec![7],
                        found_by_pass: false,
                        sample: None,
                    }),
                    held_ns: 80_000_000,
                },
                stack: Vec::new(),
            })
            .collect();
        let count = holdouts.iter().map(|h| h.grace_periods).sum();
        let report = Report {
            time: None,
            maps: vec![Map::Hist(HistMap {
                name: "@gplat".into(),
                key: None,
                buckets: log2(&[3_000_000, 20_000_000]),
            })],
            summary: Summary::GracePeriods(Box::new(GracePeriodsSummary {
                elapsed: Duration::from_secs(10),
                latency: LatencySummary {
                    map_name: "@gplat".into(),
                    unit: Unit::Ms,
                    series: vec![series(None, count)],
                    percentile_error: PERCENTILE_ERROR,
                    losses: Losses::default(),
                    stages: None,
                    cross_checks: Vec::new(),
                },
                phases: Vec::new(),
                holdouts_by_cpu: holdouts,
                holdout_cpus_shown: top,
                holdouts_by_task: Vec::new(),
                slowest,
                by_gp_seq: Some(count),
                without_report: 0,
                unassembled: Default::default(),
                lost: Default::default(),
                rcu_node_leaves: Vec::new(),
            })),
            environment: None,
        };
        let json = live(Format::Json, &report);
        let saved = parse(json.as_bytes()).unwrap();
        let Summary::GracePeriods(s) = &saved.reports[0].summary else {
            panic!("{json}");
        };
        assert_eq!(s.holdouts_by_cpu.len(), 384);
        assert_eq!(s.holdout_cpus_shown, top);
        let text = live(Format::Text, &report);
        assert!(
            text.contains(
                "Last holdouts, by CPU, most grace periods first (10 of 384 CPUs, --top):\n"
            ),
            "{text}"
        );
        assert!(text.contains("\n  ... 374 more CPUs: "), "{text}");
        assert_eq!(replayed(&report), text);
    }

    /// bpftrace 0.17's own JSON of the keyed-map run in docs (kstack, comm, pid keys).
    #[test]
    fn bpftrace_json_prints_as_bpftrace_printed_it() {
        let json = r#"{"type": "attached_probes", "data": {"probes": 2}}
{"type": "map", "data": {"@": {"\n    synchronize_rcu+5\n    __x64_sys_membarrier+490\n    do_syscall_64+135\n    entry_SYSCALL_64_after_hwframe+118\n": 3}}}
{"type": "map", "data": {"@c": {"kworker/1:2": 1, "loadgen": 3}}}
{"type": "hist", "data": {"@h": {"loadgen": [{"min": 4, "max": 7, "count": 3}]}}}
{"type": "map", "data": {"@p": {"152, loadgen": 3}}}
{"type": "lost_events", "data": {"events": 0}}
{"type": "hist", "data": {"@l": [{"max": -1, "count": 1}, {"min": 0, "max": 1, "count": 0}, {"min": 2, "max": 3, "count": 2}, {"min": 4, "max": 5, "count": 0}, {"min": 6, "max": 7, "count": 0}, {"min": 8, "max": 9, "count": 0}, {"min": 10, "count": 1}]}}
"#;
        let saved = parse(json.as_bytes()).unwrap();
        let text = render::banner(Format::Text, saved.probes.unwrap() as usize)
            + &render::report(Format::Text, &saved.reports[0]);
        let bars = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@";
        let half = "@@@@@@@@@@@@@@@@@@@@@@@@@@                          ";
        let none = "                                                    ";
        assert_eq!(
            text,
            format!(
                "Attaching 2 probes...\n\n\n\
                 @[\n    synchronize_rcu+5\n    __x64_sys_membarrier+490\n    do_syscall_64+135\n    \
                 entry_SYSCALL_64_after_hwframe+118\n]: 3\n\
                 @c[kworker/1:2]: 1\n@c[loadgen]: 3\n\
                 @h[loadgen]: \n[4, 8)                 3 |{bars}|\n\n\
                 @l: \n(..., 0)               1 |{half}|\n[0, 2)                 0 |{none}|\n\
                 [2, 4)                 2 |{bars}|\n[4, 6)                 0 |{none}|\n\
                 [6, 8)                 0 |{none}|\n[8, 10)                0 |{none}|\n\
                 [10, ...)              1 |{half}|\n\n\
                 @p[152, loadgen]: 3\n"
            )
        );
    }

    /// The seed scripts' `@ = count()`, as bpftrace 0.17 saves it.
    #[test]
    fn bpftrace_scalars_print_as_bpftrace_printed_them() {
        let json = "{\"type\": \"attached_probes\", \"data\": {\"probes\": 1}}\n\
                    {\"type\": \"map\", \"data\": {\"@\": 1400220}}\n\
                    {\"type\": \"map\", \"data\": {\"@b\": 1}}\n";
        let saved = parse(json.as_bytes()).unwrap();
        let text =
            render::banner(Format::Text, 1) + &render::report(Format::Text, &saved.reports[0]);
        assert_eq!(text, "Attaching 1 probe...\n\n\n@: 1400220\n@b: 1\n");
        assert_eq!(
            render::banner(Format::Json, 1) + &render::report(Format::Json, &saved.reports[0]),
            json
        );
    }

    #[test]
    fn what_cannot_be_read_is_said() {
        let err = parse("{\"type\": \"hist\", \"data\": {\"@h\": 3}}\nnot json\n".as_bytes())
            .unwrap_err();
        assert!(format!("{err:#}").contains("line 1"), "{err:#}");
        let huge = "{\"type\": \"hist\", \"data\": {\"@h\": [{\"min\": 0, \"max\": 0, \"count\": 1}, \
                    {\"min\": 18446744073709551614, \"count\": 1}]}}\n";
        let err = parse(huge.as_bytes()).unwrap_err();
        assert!(
            format!("{err:#}").contains("not one lhist() accepts"),
            "{err:#}"
        );
        let err = parse("{}\nnot json\n".as_bytes()).unwrap_err();
        assert!(format!("{err:#}").contains("line 1"), "{err:#}");
    }

    fn refused(json: &str) -> String {
        format!("{:#}", parse(json.as_bytes()).unwrap_err())
    }

    pub(crate) fn count_report(time: Option<&str>, calls: u64, environment: bool) -> Report {
        Report {
            time: time.map(Stamp::interval),
            maps: vec![Map::Count(CountMap {
                name: "@".into(),
                entries: vec![("call_rcu".into(), calls)],
            })],
            summary: Summary::Count(CountSummary {
                elapsed: Duration::from_secs(1),
                call_rcu: Some(calls),
                grace_periods: Some(3),
                ..CountSummary::default()
            }),
            environment: environment.then(Environment::default),
        }
    }

    /// `count --interval 1`: every interval prints again as it printed, time first.
    #[test]
    fn interval_runs_print_every_interval_again() {
        let intervals = [
            count_report(Some("10:00:01"), 5, true),
            count_report(Some("10:00:02"), 7, false),
            count_report(Some("10:00:02"), 1, false),
        ];
        let (mut json, mut text) = (
            render::banner(Format::Json, 2),
            render::banner(Format::Text, 2),
        );
        for interval in &intervals {
            json += &render::report(Format::Json, interval);
            text += &render::report(Format::Text, interval);
        }
        let saved = parse(json.as_bytes()).unwrap();
        assert_eq!(saved.reports, intervals);
        let again = saved
            .reports
            .iter()
            .fold(render::banner(Format::Text, 2), |out, r| {
                out + &render::report(Format::Text, r)
            });
        assert_eq!(again, text);
        assert!(text.contains("\n10:00:02\n@[call_rcu]: 1\n"), "{text}");
        // A latency run's intervals too; the environment is said once, in the first.
        let mut json = render::banner(Format::Json, 2);
        let mut expected = Vec::new();
        for (i, time) in ["10:00:01", "10:00:02"].into_iter().enumerate() {
            let mut report = latency(
                vec![hist(None, log2(&[5, 20]))],
                vec![series(None, 2)],
                Unit::Ms,
            );
            report.time = Some(Stamp::interval(time));
            if i > 0 {
                report.environment = None;
            }
            json += &render::report(Format::Json, &report);
            expected.push(report);
        }
        let again = parse(json.as_bytes()).unwrap().reports;
        let as_json = |reports: &[Report]| -> String {
            reports
                .iter()
                .map(|r| render::report(Format::Json, r))
                .collect()
        };
        assert_eq!(as_json(&again), as_json(&expected));
        // A second environment is a second run.
        let twice = json.clone() + &render::report(Format::Json, &expected[0]);
        assert!(refused(&twice).contains("a second run starts here (its own environment"));
    }

    /// bpftrace's `interval:s:1 { time(); print(@); clear(@); }`.
    #[test]
    fn bpftrace_time_records_start_intervals() {
        let json = "{\"type\": \"attached_probes\", \"data\": {\"probes\": 2}}\n\
                    {\"type\": \"time\", \"data\": \"10:00:01\\n\"}\n\
                    {\"type\": \"map\", \"data\": {\"@\": {\"call_rcu\": 4}}}\n\
                    {\"type\": \"time\", \"data\": \"10:00:02\\n\"}\n\
                    {\"type\": \"map\", \"data\": {\"@\": {\"call_rcu\": 6}}}\n";
        let saved = parse(json.as_bytes()).unwrap();
        let text = saved.reports.iter().fold(String::new(), |out, r| {
            out + &render::report(Format::Text, r)
        });
        assert_eq!(text, "10:00:01\n@[call_rcu]: 4\n10:00:02\n@[call_rcu]: 6\n");
    }

    #[test]
    fn what_is_not_one_whole_run_is_refused_with_its_line() {
        assert_eq!(
            refused(""),
            "it holds no record (the file is empty): not a run saved with -f json or --save"
        );
        assert!(refused("\n\n").contains("no record (only empty lines)"));
        // Two runs concatenated: the second banner, or without banners the second summary.
        let one = live(Format::Json, &count_report(None, 5, true));
        let err = refused(&(one.clone() + &one));
        let lines = one.lines().count();
        assert!(
            err.starts_with(&format!("line {}: a second run starts here", lines + 1)),
            "{err}"
        );
        let bare = render::report(Format::Json, &count_report(None, 5, false));
        let err = refused(&(bare.clone() + &bare));
        assert!(
            err.starts_with(&format!(
                "line {}: a map after the summary of its window (line {})",
                bare.lines().count() + 1,
                bare.lines().count()
            )),
            "{err}"
        );
        // Cut before its summaries: by whole lines, and in the middle of one.
        let run = live(
            Format::Json,
            &latency(
                vec![hist(None, log2(&[5, 20]))],
                vec![series(None, 2)],
                Unit::Ms,
            ),
        );
        let lines: Vec<&str> = run.lines().collect();
        let kept = lines.len() - 1;
        let cut = lines[..kept].join("\n") + "\n";
        let err = refused(&cut);
        assert!(
            err.starts_with("the run has no @srlat's rcutrace_not_measured record: the file ends"),
            "{err}"
        );
        assert!(err.contains("the file was cut short"), "{err}");
        let cut = lines[..kept - 1].join("\n") + "\n";
        assert!(refused(&cut).contains("the file was cut short"));
        let err = refused(&run[..run.len() - 10]);
        assert!(
            err.starts_with(&format!("line {}, the last, is cut short", lines.len())),
            "{err}"
        );
        // An interval cut short before the next one begins.
        let mut json = render::banner(Format::Json, 2)
            + &render::report(Format::Json, &count_report(Some("10:00:01"), 5, true));
        let second = render::report(Format::Json, &count_report(Some("10:00:02"), 5, false));
        let second: Vec<&str> = second.lines().collect();
        json += &(second[..second.len() - 1].join("\n") + "\n");
        let err = refused(&json);
        assert!(
            err.starts_with("the interval that starts on line "),
            "{err}"
        );
        // bpftrace's own runs have no summaries to miss.
        assert!(parse("{\"type\": \"map\", \"data\": {\"@\": 3}}\n".as_bytes()).is_ok());
    }

    /// bpftrace 0.17's own output (`bpftrace -f json` and `bpftrace` of the scripts beside
    /// them in golden/): log2 buckets at or above 2^31 have wrapped 32-bit bounds in its JSON,
    /// and print as its text printed them.
    #[test]
    fn bpftrace_wrapped_bounds_print_as_bpftrace_printed_them() {
        for (json, text) in [
            (
                include_str!("golden/bpftrace-0.17-issue.json"),
                include_str!("golden/bpftrace-0.17-issue.txt"),
            ),
            (
                include_str!("golden/bpftrace-0.17-large-values.json"),
                include_str!("golden/bpftrace-0.17-large-values.txt"),
            ),
        ] {
            assert!(json.contains("\"min\": -2147483648, \"max\": 0"));
            let saved = parse(json.as_bytes()).unwrap();
            let printed = saved.reports.iter().fold(
                render::banner(Format::Text, saved.probes.unwrap() as usize),
                |out, r| out + &render::report(Format::Text, r),
            );
            assert_eq!(printed, text);
        }
        // Anything else negative is still refused.
        let err = parse(
            "{\"type\": \"hist\", \"data\": {\"@h\": [{\"min\": -5, \"max\": 0, \"count\": 1}]}}\n"
                .as_bytes(),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("neither a value nor a wrapped log2 bound"));
    }
}
