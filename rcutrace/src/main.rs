//! rcutrace: see how the Linux kernel uses RCU.
//!
//! Layout, one folder per room: `cli` parses; `commands` are thin compositions of the rest;
//! `trace` is the tracing machinery (the probe table, the tracer that attaches it through aya,
//! the window and what it reads while it runs); `kernel` holds facts about the running kernel
//! (its functions, BTF, symbols, skipped hits, environment); `model` is the data model every
//! command fills (results, statistics, histograms, attribution); `runs` reads saved runs back
//! and compares them; `render` is the only place that formats output; `memory` is the
//! process's allocator.

mod cli;
mod commands;
mod generate;
mod kernel;
mod memory;
mod model;
mod render;
mod runs;
mod trace;

use std::{io::Write as _, process::ExitCode};

use clap::Parser as _;

use crate::cli::{Cli, Command};

/// Memory kept until exit: giving it back would be RCU work in the kernel being measured.
#[global_allocator]
static ALLOCATOR: memory::RetainingAllocator = memory::RetainingAllocator;

fn main() -> ExitCode {
    trace::marks::start();
    if let Some(dir) = generate::requested() {
        return match generate::write_all(&dir) {
            Ok(written) => {
                written.iter().for_each(|w| println!("{w}"));
                ExitCode::SUCCESS
            }
            Err(error) => report(&error),
        };
    }
    // Usage errors exit here with status 2 and clap's explanation.
    let cli = Cli::parse();
    if let Err(error) = cli::check(&cli) {
        error.exit();
    }
    // A path that cannot be written is said now, before a long run is traced for nothing.
    if let Some(path) = &cli.save {
        match runs::save::SaveFile::open(path) {
            Ok(file) => runs::save::set(file),
            Err(message) => cli::usage_error(&message).exit(),
        }
    }
    let flamegraph = cli.flamegraph.as_ref().map(|path| {
        runs::save::SaveFile::open_for("--flamegraph", "writing the flame graph", path)
            .unwrap_or_else(|message| cli::usage_error(&message).exit())
    });
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp(None)
        .init();
    match run(&cli) {
        Ok((output, status, run)) => {
            let mut stdout = std::io::stdout().lock();
            let printed = match stdout
                .write_all(output.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => status,
                // A closed pipe (`| head`) is the reader's choice, not a failure worth a message.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => report(&anyhow::Error::new(e).context("writing the results")),
            };
            // The results are out whatever became of the files: now say if one failed.
            let drawn = flamegraph.map(|file| draw(file, run.as_ref()));
            match runs::save::take().map(runs::save::SaveFile::finish) {
                Some(Err(error)) => report(&error),
                _ => match drawn {
                    Some(Err(error)) => report(&error),
                    _ => printed,
                },
            }
        }
        Err(error) => {
            if let Some(file) = runs::save::take() {
                file.discard();
            }
            if let Some(file) = flamegraph {
                file.discard();
            }
            report(&error)
        }
    }
}

/// `--flamegraph`: the run's stacks drawn into its file (opened before the run).
fn draw(mut file: runs::save::SaveFile, run: Option<&model::Report>) -> anyhow::Result<()> {
    let Some(run) = run else {
        file.discard();
        anyhow::bail!("--flamegraph: this command made no run to draw");
    };
    match render::flamegraph(run) {
        Ok(svg) => {
            file.append(&svg);
            file.finish()
        }
        Err(error) => {
            file.discard();
            Err(error.context("drawing the flame graph"))
        }
    }
}

/// `stall --exit-on-warning` ends with this status at its first warning.
const STALL_WARNED: u8 = 3;

/// The output to print, the exit status after it, and the run `--flamegraph` draws.
fn run(cli: &Cli) -> anyhow::Result<(String, ExitCode, Option<model::Report>)> {
    let format = cli.format;
    // Only JSON output and saved runs carry what a run ran on.
    kernel::environment::record_only_if(format == render::Format::Json || cli.save.is_some());
    if let Command::Report(args) = &cli.command {
        let printed = commands::report::run(args, format, cli.flamegraph.is_some())?;
        return Ok((printed.output, printed.status, printed.run));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        match &cli.command {
            Command::Count(args) => commands::count::run(args, format).await.map(Some),
            Command::Gplat(args) => commands::latency::gplat(args, format).await.map(Some),
            Command::Srlat(args) => commands::latency::srlat(args, format).await.map(Some),
            Command::Serve(args) => commands::serve::run(args).await.map(|()| None),
            Command::Top(args) => commands::top::run(args).await.map(|()| None),
            Command::Callbacks(args) => commands::callbacks::run(args, format).await.map(Some),
            Command::Gp(args) => commands::gp::run(args, format).await.map(Some),
            Command::Stall(args) => commands::stall::run(args, format).await.map(Some),
            Command::Report(_) => Err(anyhow::anyhow!("report reads files, it does not trace")),
        }
    })?;
    let Some(report) = report else {
        return Ok((String::new(), ExitCode::SUCCESS, None));
    };
    runs::save::write(&report);
    let status = match &report.summary {
        model::Summary::Stall(s) if s.stopped_at_warning => ExitCode::from(STALL_WARNED),
        _ => ExitCode::SUCCESS,
    };
    Ok((render::report(format, &report), status, Some(report)))
}

/// Runtime failures: the error and its causes, one per line, and exit status 1.
fn report(error: &anyhow::Error) -> ExitCode {
    eprintln!("rcutrace: error: {error}");
    for cause in error.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
    ExitCode::FAILURE
}
