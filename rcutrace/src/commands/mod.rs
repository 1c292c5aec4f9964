//! The commands, as thin compositions of the shared machinery: the tracing engine
//! (`trace::engine`) checks privileges, loads, attaches from the probe table, traces for a
//! window and detaches; each command then reads and makes its report. This file is the
//! registry: it runs the command the command line names and publishes its last report.
//! What the tracing commands share: `window` (a window traced, its reports published, a
//! command launched in it), `naming` (stacks and SRCU domains named), `publish` (the one
//! place output leaves).

pub mod callbacks;
pub mod count;
mod followed_flavours;
pub mod gp;
pub mod latency;
mod naming;
mod publish;
pub mod report;
pub mod run;
pub mod serve;
pub mod stall;
pub mod timed_calls;
pub mod top;
mod window;

use std::process::ExitCode;

use anyhow::Result;

use self::publish::Sink;
use crate::{
    cli::{Cli, Command},
    kernel::environment,
    model::{Report, Summary},
    render::Format,
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
    });
    // A reader that stopped reading during the window ended the output, not the run's
    // success: there is nothing left to print or draw.
    let report = match report {
        Err(e) if e.is::<publish::ReaderGone>() => None,
        report => report?,
    };
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
