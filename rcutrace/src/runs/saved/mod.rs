//! A saved `-f json` run read back into the report model, so that `rcutrace report` prints it
//! with the very renderer the live run used. rcutrace's runs carry every figure the text
//! shows; bpftrace's own JSON carries its maps and histograms (a histogram's layout is then
//! told from its bucket bounds). The file is read as a stream, one line at a time, keeping
//! only the model: a run of a million records needs no copy of its text.
//!
//! What is not one whole run is refused with the line where it goes wrong: an empty file,
//! two runs in one file, a run cut short before its summaries.

mod grace_periods;
mod histograms;
mod stages;
mod summaries;

use std::{io::BufRead, path::Path};

use anyhow::{Context as _, Result, anyhow, bail};
use rcutrace_common::records::{self, Bucket, HistLayout, HistValue, MapValue, Record};

use self::histograms::{infer_layout, model_buckets};
use self::summaries::{callbacks, count, latency_summary};

use crate::{
    model::run::RunSummary,
    model::{
        CallbacksSummary, CountMap, CountSummary, Environment, HistMap, LatencySummary, Map,
        Report, ScalarMap, Stamp, Summary,
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
            // Normal RCU's are taken apart in gp's summary; the other flavours' follow the
            // losses of their histograms' map (`gp --flavor`), whose summary lists them.
            Record::GracePeriod(g) if g.flavor == "normal" => self.grace_periods.push(g),
            Record::GracePeriod(g) => match self.latency.last_mut() {
                Some(summary) => summary.grace_periods.push(g),
                None => bail!(
                    "line {line}: a {} grace period before the summary of its grace periods",
                    g.flavor
                ),
            },
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
            | Record::FlavorStallWarning(_)
            | Record::FlavorStallEnded(_)
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
            summary.stages = Some(Box::new(stages::summary(s, &calls)?));
        }
        let summary =
            match (self.count_summary, self.callbacks_summary, self.gp_summary) {
                (Some(summary), _, _) => Summary::Count(summary),
                (None, Some(summary), _) => Summary::Callbacks(summary),
                (None, None, Some(summary)) => Summary::GracePeriods(Box::new(
                    grace_periods::summary(&summary, &self.grace_periods, latency)?,
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

#[cfg(test)]
pub(crate) mod tests;
