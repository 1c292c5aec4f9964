//! The only place that formats results: bpftrace's text (`text`) or its JSON lines (`json`),
//! both from the same `model::Report`; its kernel stacks as folded lines (`folded`) or an SVG
//! flame graph (`flamegraph`).

mod comparison;
mod figure;
mod flamegraph;
mod folded;
mod gate;
mod json;
mod openmetrics;
mod text;
pub mod top;

use crate::{
    model::stacks,
    model::{Metrics, Report, StallEvent, detach::OwnDetach},
    runs::compare::Comparison,
    runs::gate::Verdicts,
};

/// Output format, as bpftrace's `-f`, and the folded stacks of flame graph tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
    /// One line per kernel stack, root first, `;` between frames, then its weight.
    Folded,
}

/// What is printed as soon as the probes are attached (folded lines have no banner: every
/// line is a stack).
pub fn banner(format: Format, probes: usize) -> String {
    match format {
        Format::Text => text::banner(probes),
        Format::Json => json::banner(probes),
        Format::Folded => String::new(),
    }
}

/// Everything printed when tracing ends. Folded, a report without stacks prints nothing:
/// the command line lets only runs with stacks get there (see `cli::check` and `report`).
pub fn output(format: Format, report: &Report) -> String {
    match format {
        Format::Text => text::report(report),
        Format::Json => json::report(report),
        Format::Folded => stacks::of_report(report)
            .map(|stacks| folded::lines(&stacks))
            .unwrap_or_default(),
    }
}

/// rcutrace's own detaching as a run ends: a line for stderr, in every format (stdout's
/// records and lines stay the run's).
pub fn detach_line(detach: &OwnDetach) -> String {
    text::detach_line(detach)
}

/// The report's stacks as an SVG flame graph; an error where it has none.
pub fn flamegraph(report: &Report) -> anyhow::Result<Vec<u8>> {
    let stacks = stacks::of_report(report)
        .map_err(|why| anyhow::anyhow!("no kernel stacks to draw: {}", why.0))?;
    flamegraph::svg(report, &stacks)
}

/// One of `rcutrace stall`'s events, printed as it happens (`stall` takes no -f folded).
pub fn stall_event(format: Format, event: &StallEvent) -> String {
    match format {
        Format::Text | Format::Folded => text::stall_event(event),
        Format::Json => json::stall_event(event),
    }
}

/// `serve`'s metrics, in the OpenMetrics text format.
pub fn openmetrics(metrics: &Metrics) -> String {
    openmetrics::exposition(metrics)
}

/// Two runs side by side, as text.
pub fn comparison(comparison: &Comparison, a_name: &str, b_name: &str) -> String {
    self::comparison::comparison(comparison, a_name, b_name)
}

/// The verdicts of `report A B --fail-if`: one line per failed condition.
pub fn verdicts(verdicts: &Verdicts) -> String {
    gate::lines(verdicts)
}

/// The same verdicts as JUnit XML, for CI systems to display.
pub fn junit(verdicts: &Verdicts) -> anyhow::Result<String> {
    gate::junit(verdicts)
}
