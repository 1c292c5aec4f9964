//! The commands, as thin compositions of the shared machinery: the tracing engine
//! (`trace::engine`) checks privileges, loads, attaches from the probe table, traces for a
//! window and detaches; each command then reads and renders. What they share as commands is
//! here: running the one the command line names, printing and saving a run's reports, and
//! naming its stacks.

pub mod callbacks;
pub mod count;
pub mod gp;
pub mod latency;
pub mod publish;
pub mod report;
pub mod run;
pub mod serve;
pub mod stall;
pub mod timed_calls;
pub mod top;

use std::process::ExitCode;

use anyhow::Result;

use self::publish::{Sink, ToSink};
use crate::{
    cli::{Cli, Command},
    kernel,
    kernel::environment,
    kernel::symbols::keeper::{Names, SymbolKeeper},
    model::{Report, Summary},
    render::Format,
    trace::engine::{AtOpen, Hooks, MakeReport, Period, Request, trace_with},
    trace::launch::Launch,
    trace::session::Consume,
    trace::tracer::Tracer,
};

/// `stall --exit-on-warning` ends with this status at its first warning.
const STALL_WARNED: u8 = 3;

/// How a command ended, its output published: the exit status, and the run `--flamegraph`
/// draws (`report`: from one file only).
pub struct Ended {
    pub status: ExitCode,
    pub run: Option<Report>,
}

/// Runs the command the command line names.
pub fn run(cli: &Cli) -> Result<Ended> {
    let sink = Sink::new(cli.format);
    // Only JSON output and saved runs carry what a run ran on.
    environment::record_only_if(cli.format == Format::Json || cli.save.is_some());
    if let Command::Report(args) = &cli.command {
        let read = report::run(args, cli.format, cli.flamegraph.is_some())?;
        output_read(sink.text(&read.output))?;
        return Ok(Ended {
            status: read.status,
            run: read.run,
        });
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
            Command::Count(args) => count::run(args, sink).await.map(Some),
            Command::Gplat(args) => latency::gplat(args, sink).await.map(Some),
            Command::Srlat(args) => latency::srlat(args, sink).await.map(Some),
            Command::Serve(args) => serve::run(args, sink).await.map(|()| None),
            Command::Top(args) => top::run(args, sink).await.map(|()| None),
            Command::Callbacks(args) => callbacks::run(args, sink).await.map(Some),
            Command::Gp(args) => gp::run(args, sink).await.map(Some),
            Command::Stall(args) => stall::run(args, sink).await.map(Some),
            Command::Run(args) => run::run(args, sink).await.map(Some),
            Command::Report(_) => Err(anyhow::anyhow!("report reads files, it does not trace")),
        }
    })?;
    let Some(report) = report else {
        return Ok(Ended {
            status: ExitCode::SUCCESS,
            run: None,
        });
    };
    output_read(sink.report(&report))?;
    let status = match &report.summary {
        Summary::Stall(s) if s.stopped_at_warning => ExitCode::from(STALL_WARNED),
        // The command's own status, as a shell's would be (128 + the signal that ended it).
        Summary::Run(run) => run::exit_code(&run.figures),
        _ => ExitCode::SUCCESS,
    };
    Ok(Ended {
        status,
        run: Some(report),
    })
}

/// The last output, published: a reader that stopped reading (`| head`) still leaves the
/// files to write.
fn output_read(published: Result<()>) -> Result<()> {
    match published {
        Err(e) if !e.is::<publish::ReaderGone>() => Err(e),
        _ => Ok(()),
    }
}

/// Loads, attaches the probes, prints bpftrace's banner, traces for the window, and returns
/// the report `make_report` makes of it. With an interval, the reports of the intervals
/// before the last one are published as they are made, each after its time.
pub async fn trace(
    request: Request<'_>,
    consume: Option<Consume<'_>>,
    make_report: MakeReport<'_>,
    sink: Sink,
) -> Result<Report> {
    let interval = match request.reporting {
        crate::trace::engine::Reporting::Every(interval) => Some(interval),
        _ => None,
    };
    let mut first = true;
    let mut make_stamped = |period: &Period<'_>| {
        let mut report = make_report(period)?;
        if let Some(interval) = interval {
            report.time = Some(crate::model::Stamp {
                time: kernel::local_time(),
                cumulative: interval.cumulative,
            });
            // The environment describes the run: said once, in its first interval.
            if !std::mem::take(&mut first) {
                report.environment = None;
            }
        }
        Ok(report)
    };
    trace_with(request, consume, &mut make_stamped, &mut ToSink(sink)).await
}

/// The hooks of a run that names kernel addresses by `symbols` (kept from the window's
/// opening, read at once where a command launched in the window may unload what they name)
/// and that may launch a command in the window (`-c`, `run`), which it then watches.
fn hooks<'a>(symbols: Option<&'a SymbolKeeper>, launch: Option<&'a Launch>) -> Hooks<'a> {
    Hooks {
        at_open: symbols.map(|symbols| -> AtOpen<'a> {
            Box::new(move || {
                if launch.is_some() {
                    symbols.read_now();
                }
                symbols.keep_while_tracing();
            })
        }),
        watch: launch.map(Launch::watch),
        at_close: None,
    }
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
