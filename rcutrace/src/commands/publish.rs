//! The one place a run's output leaves: bpftrace's banner, each report as it is due (printed
//! in the run's format and saved to `--save`'s file), `stall`'s events, and what `report`
//! reads back. A reader that stops reading (`| head`) ends the output, not as a failure.

use std::{
    fmt,
    io::{IsTerminal as _, Write as _},
};

use anyhow::{Context as _, Result};

use crate::{
    kernel::environment,
    model::{Report, StallEvent, detach::OwnDetach},
    render::{self, Format},
    runs,
    trace::engine::Publisher,
    trace::session::Due,
};

/// Where the output goes, in the run's format. A copy can be given to a thread that prints
/// (`stall`'s events): what it holds besides the format (the save file) is the process's.
#[derive(Clone, Copy, Debug)]
pub struct Sink {
    format: Format,
}

impl Sink {
    pub fn new(format: Format) -> Sink {
        Sink { format }
    }

    pub fn format(self) -> Format {
        self.format
    }

    /// The window is open with `probes` probes: bpftrace's banner. Folded output is stacks
    /// only, so that tracing has begun is said on stderr there.
    pub fn banner(self, probes: usize) -> Result<()> {
        match self.format {
            Format::Folded => {
                eprint!("{}", render::banner(Format::Text, probes));
                Ok(())
            }
            format => print(&render::banner(format, probes)),
        }
    }

    /// A report: saved (`--save`), then printed.
    pub fn report(self, report: &Report) -> Result<()> {
        save(report);
        print(&render::output(self.format, report))
    }

    /// One of `stall`'s events, as it happens.
    pub fn stall_event(self, event: &StallEvent) -> Result<()> {
        print(&render::stall_event(self.format, event))
    }

    /// rcutrace's own detaching, done: on stderr where that is a terminal, whatever the
    /// format; elsewhere (a file, a pipe) in the log at info level, so that a script's stderr
    /// stays empty on success, as bpftrace's does.
    pub fn detached(self, detach: &OwnDetach) {
        let line = render::detach_line(detach);
        if std::io::stderr().is_terminal() {
            eprint!("{line}");
        } else {
            log::info!("{}", line.trim_start_matches("rcutrace: ").trim_end());
        }
    }

    /// Text made elsewhere (`report`'s reading of saved runs).
    pub fn text(self, text: &str) -> Result<()> {
        print(text)
    }
}

/// In JSON, the records carry the cross-checks and the text's warnings are not printed: say
/// the disagreements on stderr too, so that no one misses them.
pub fn warn_disagreements(format: Format, checks: &[crate::model::checks::CrossCheck]) {
    if format == Format::Json {
        for check in crate::model::checks::disagreeing(checks) {
            eprintln!("rcutrace: warning: {}", check.warning());
        }
    }
}

/// The reports made during the window, published through the sink.
pub struct ToSink(pub Sink);

impl Publisher<Report> for ToSink {
    fn opened(&mut self, probes: usize) -> Result<()> {
        self.0.banner(probes)
    }

    fn publish(&mut self, report: Report, _: Due) -> Result<()> {
        self.0.report(&report)
    }

    fn detached(&mut self, detach: &OwnDetach) -> Result<()> {
        self.0.detached(detach);
        Ok(())
    }
}

/// Reports that go elsewhere than stdout (a server's responses, a screen's frames): the
/// banner through the sink, each report to `deliver`. The detaching is kept for the caller
/// to say once the terminal is its own again (`say_detached`).
pub struct Delivering<'a, R> {
    pub sink: Sink,
    pub deliver: &'a mut dyn FnMut(R, Due) -> Result<()>,
    pub detached: Option<OwnDetach>,
}

impl<'a, R> Delivering<'a, R> {
    pub fn new(sink: Sink, deliver: &'a mut dyn FnMut(R, Due) -> Result<()>) -> Self {
        Delivering {
            sink,
            deliver,
            detached: None,
        }
    }

    /// Says how the detaching went, if it was done.
    pub fn say_detached(&self) {
        if let Some(detach) = &self.detached {
            self.sink.detached(detach);
        }
    }
}

impl<R> Publisher<R> for Delivering<'_, R> {
    fn opened(&mut self, probes: usize) -> Result<()> {
        self.sink.banner(probes)
    }

    fn publish(&mut self, report: R, due: Due) -> Result<()> {
        (self.deliver)(report, due)
    }

    fn detached(&mut self, detach: &OwnDetach) -> Result<()> {
        self.detached = Some(detach.clone());
        Ok(())
    }
}

/// stdout was closed by its reader: nothing more can be said there, and nothing failed.
#[derive(Debug)]
pub struct ReaderGone;

impl fmt::Display for ReaderGone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stdout was closed by its reader")
    }
}

impl std::error::Error for ReaderGone {}

/// Writes `text` to stdout and flushes it, so that what is printed while the window is open
/// (the banner, intervals, `stall`'s events) is seen as it is printed.
fn print(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(ReaderGone.into()),
        Err(e) => Err(e).context("writing to stdout"),
    }
}

/// `--save`: writes `report` to the run's save file, if it has one, as `-f json` prints it.
fn save(report: &Report) {
    runs::save::write(|first| json_lines(report, first));
}

/// A report's JSON lines, after the banner if they are the first of the run.
fn json_lines(report: &Report, first: bool) -> String {
    let mut json = String::new();
    if first {
        let probes = report.environment.as_ref().map_or(0, environment::probes);
        json = render::banner(Format::Json, probes);
    }
    json += &render::output(Format::Json, report);
    json
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CountMap, CountSummary, Map, Summary};

    /// A saved run is what `-f json` prints: the banner once, before the first report.
    #[test]
    fn a_saved_run_is_the_json_output() {
        let report = |count| Report {
            time: Some(crate::model::Stamp::interval("12:00:01")),
            maps: vec![Map::Count(CountMap {
                name: "@".into(),
                entries: vec![("call_rcu".into(), count)],
            })],
            summary: Summary::Count(CountSummary::default()),
            environment: None,
        };
        assert_eq!(
            json_lines(&report(1), true) + &json_lines(&report(2), false),
            render::banner(Format::Json, 0)
                + &render::output(Format::Json, &report(1))
                + &render::output(Format::Json, &report(2))
        );
    }
}
