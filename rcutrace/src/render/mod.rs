//! The only place that formats results: bpftrace's text (`text`) or its JSON lines (`json`),
//! both from the same `model::Report`.

mod comparison;
mod figure;
mod json;
mod openmetrics;
mod text;
pub mod top;

use crate::{
    model::{Metrics, Report, StallEvent},
    runs::compare::Comparison,
};

/// Output format, as bpftrace's `-f`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
}

/// What is printed as soon as the probes are attached.
pub fn banner(format: Format, probes: usize) -> String {
    match format {
        Format::Text => text::banner(probes),
        Format::Json => json::banner(probes),
    }
}

/// Everything printed when tracing ends.
pub fn report(format: Format, report: &Report) -> String {
    match format {
        Format::Text => text::report(report),
        Format::Json => json::report(report),
    }
}

/// One of `rcutrace stall`'s events, printed as it happens.
pub fn stall_event(format: Format, event: &StallEvent) -> String {
    match format {
        Format::Text => text::stall_event(event),
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
