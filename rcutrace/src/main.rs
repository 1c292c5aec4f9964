//! rcutrace: see how the Linux kernel uses RCU.
//!
//! Layout, one folder per room: `cli` parses; `commands` runs the command named, each a thin
//! composition of the rest; `trace` is the tracing machinery (the engine that runs a window,
//! the probe table, the tracer that attaches it through aya, the window and what it reads
//! while it runs); `kernel` holds facts about the running kernel (its functions, BTF, symbols,
//! skipped hits, environment); `model` is the data model every command fills (results,
//! statistics, histograms, attribution); `runs` reads saved runs back and compares them;
//! `render` is the only place that formats output; `memory` is the process's allocator and
//! `descriptors` its table of file descriptors, both kept so as not to make RCU work as it
//! runs. This file only parses, sets up and says how the run ended.

mod cli;
mod commands;
mod descriptors;
#[cfg(test)]
mod docs_check;
mod generate;
mod kernel;
mod marks;
mod memory;
mod model;
mod render;
mod runs;
mod trace;

use std::process::ExitCode;

use clap::Parser as _;

use crate::cli::Cli;

/// Memory kept until exit: giving it back would be RCU work in the kernel being measured.
#[global_allocator]
static ALLOCATOR: memory::RetainingAllocator = memory::RetainingAllocator;

fn main() -> ExitCode {
    marks::start();
    if let Some(dir) = generate::requested() {
        return match generate::write_all(&dir) {
            Ok(written) => {
                written.iter().for_each(|w| println!("{w}"));
                ExitCode::SUCCESS
            }
            Err(error) => fail(&error),
        };
    }
    // Usage errors exit here with status 2 and clap's explanation.
    let cli = Cli::parse();
    if let Err(error) = cli::check(&cli) {
        error.exit();
    }
    // Before any other thread starts (see the functions).
    descriptors::reserve_table();
    trace::tracer::prepare_loader();
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
    // The output is printed as the run goes; what is left is the files, and the status.
    match commands::run(&cli) {
        Ok(commands::Ended { status, run }) => {
            // The results are out whatever became of the files: now say if one failed.
            let drawn = flamegraph.map(|file| draw(file, run.as_ref()));
            match runs::save::take().map(runs::save::SaveFile::finish) {
                Some(Err(error)) => fail(&error),
                _ => match drawn {
                    Some(Err(error)) => fail(&error),
                    _ => status,
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
            fail(&error)
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

/// Runtime failures: the error and its causes, one per line, and exit status 1.
fn fail(error: &anyhow::Error) -> ExitCode {
    // `run`'s command could not be started: said as a shell says it, with its status.
    if let Some(not_started) = error.downcast_ref::<trace::launch::NotStarted>() {
        eprintln!("rcutrace: {not_started}");
        return ExitCode::from(not_started.status);
    }
    eprintln!("rcutrace: error: {error}");
    for cause in error.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
    ExitCode::FAILURE
}
