//! The commands, as thin compositions of the shared machinery: the tracing engine
//! (`trace::engine`) checks privileges, loads, attaches from the probe table, traces for a
//! window and detaches; each command then reads and renders. What they share as commands is
//! here: running the one the command line names, printing and saving a run's reports, and
//! naming its stacks.

pub mod callbacks;
pub mod count;
pub mod gp;
pub mod latency;
pub mod report;
pub mod run;
pub mod serve;
pub mod stall;
pub mod timed_calls;
pub mod top;

use std::process::ExitCode;

use anyhow::Result;

use crate::{
    cli::{Cli, Command},
    kernel,
    kernel::environment,
    kernel::symbols::keeper::{Names, SymbolKeeper},
    model::{Report, Summary},
    render::{self, Format},
    runs,
    trace::engine::{MakeReport, Period, Request, print, trace_with},
    trace::launch::Launch,
    trace::session::{Consume, Due},
    trace::tracer::Tracer,
};

/// `stall --exit-on-warning` ends with this status at its first warning.
const STALL_WARNED: u8 = 3;

/// What a command leaves to print: its output, the exit status after it, and the run
/// `--flamegraph` draws (`report`: from one file only).
pub struct Printed {
    pub output: String,
    pub status: ExitCode,
    pub run: Option<Report>,
}

/// Runs the command the command line names.
pub fn run(cli: &Cli) -> Result<Printed> {
    let format = cli.format;
    // Only JSON output and saved runs carry what a run ran on.
    environment::record_only_if(format == Format::Json || cli.save.is_some());
    if let Command::Report(args) = &cli.command {
        return report::run(args, format, cli.flamegraph.is_some());
    }
    // Before anything reads the kernel: without privileges, kallsyms gives no addresses,
    // and a command that needs them would blame kptr_restrict instead.
    crate::kernel::check_privileges()?;
    crate::marks::mark("privileges checked");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        match &cli.command {
            Command::Count(args) => count::run(args, format).await.map(Some),
            Command::Gplat(args) => latency::gplat(args, format).await.map(Some),
            Command::Srlat(args) => latency::srlat(args, format).await.map(Some),
            Command::Serve(args) => serve::run(args).await.map(|()| None),
            Command::Top(args) => top::run(args).await.map(|()| None),
            Command::Callbacks(args) => callbacks::run(args, format).await.map(Some),
            Command::Gp(args) => gp::run(args, format).await.map(Some),
            Command::Stall(args) => stall::run(args, format).await.map(Some),
            Command::Run(args) => run::run(args, format).await.map(Some),
            Command::Report(_) => Err(anyhow::anyhow!("report reads files, it does not trace")),
        }
    })?;
    let Some(report) = report else {
        return Ok(Printed {
            output: String::new(),
            status: ExitCode::SUCCESS,
            run: None,
        });
    };
    save(&report);
    let status = match &report.summary {
        Summary::Stall(s) if s.stopped_at_warning => ExitCode::from(STALL_WARNED),
        // The command's own status, as a shell's would be (128 + the signal that ended it).
        Summary::Run(run) => run::exit_code(&run.figures),
        _ => ExitCode::SUCCESS,
    };
    Ok(Printed {
        output: render::report(format, &report),
        status,
        run: Some(report),
    })
}

/// Loads, attaches the probes, prints bpftrace's banner, traces for the window, and returns
/// the report `make_report` makes of it. With an interval, the reports of the intervals
/// before the last one are printed as they are made, each after its time.
pub async fn trace(
    request: Request<'_>,
    consume: Option<Consume<'_>>,
    make_report: MakeReport<'_>,
) -> Result<Report> {
    let format = request.format;
    let stamped = request.interval.is_some();
    let cumulative = request.interval.is_some_and(|i| i.cumulative);
    let mut first = true;
    let mut make_stamped = |period: &Period<'_>| {
        let mut report = make_report(period)?;
        if stamped {
            report.time = Some(crate::model::Stamp {
                time: kernel::local_time(),
                cumulative,
            });
            // The environment describes the run: said once, in its first interval.
            if !std::mem::take(&mut first) {
                report.environment = None;
            }
        }
        Ok(report)
    };
    let mut print_report = |report: Report, _: Due| {
        save(&report);
        print(&render::report(format, &report))
    };
    trace_with(request, consume, &mut make_stamped, &mut print_report).await
}

/// `-c CMD`: the command to run in the window, where one is given.
fn launch_of(command: Option<&str>) -> Result<Option<Launch>> {
    command
        .map(|line| Launch::from_line(line, None))
        .transpose()
}

/// The error that ended a `-c` command's window (it could not start, or waiting for it
/// failed), if one did.
fn launched(launch: Option<&Launch>) -> Result<()> {
    match launch.and_then(Launch::take_failure) {
        Some(error) => Err(error),
        None => Ok(()),
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
    json += &render::report(Format::Json, report);
    json
}

/// Symbolized frames of the kernel stacks the programs kept, by stack id, `name+offset`
/// deepest first, named as they were when captured; the symbols are asked for on first use,
/// once for all the stacks, so reports without stacks never pay for them.
pub fn stack_frames<'a>(
    tracer: &'a Tracer,
    symbols: &'a SymbolKeeper,
) -> impl FnMut(u64) -> Vec<String> + 'a {
    let mut names = None;
    move |stack| {
        symbolize(
            names.get_or_insert_with(|| symbols.names()),
            tracer.stack(stack),
        )
    }
}

/// Names SRCU domains by the symbol at their address, as the kernel had it when they were
/// seen (kept by `symbols`), or by the address.
pub fn domain_names(symbols: &SymbolKeeper) -> impl FnMut(u64) -> String + '_ {
    let mut names = None;
    move |address| {
        let names = names.get_or_insert_with(|| symbols.names());
        crate::model::attribution::domain_name(&names.frame(address))
    }
}

/// A kernel stack's addresses as frames, or why it could not be read.
pub fn symbolize(names: &Names<'_>, addresses: Result<Vec<u64>>) -> Vec<String> {
    match addresses {
        Ok(addresses) => addresses.iter().map(|&a| names.frame(a)).collect(),
        Err(e) => vec![format!("[stack unreadable: {e:#}]")],
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
                + &render::report(Format::Json, &report(1))
                + &render::report(Format::Json, &report(2))
        );
    }
}
