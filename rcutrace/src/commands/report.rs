//! `rcutrace report FILE [FILE2]`: a saved `-f json` run printed again, through the same
//! renderers as a live run (every interval of an `--interval` run, as it was printed; folded,
//! its stacks); or two runs compared, each as a whole (or the interval `--interval-index`
//! names), and judged by `--fail-if`. Reads files only: no privileges needed.

use std::{path::Path, process::ExitCode};

use anyhow::{Context as _, Result, anyhow, bail};

use crate::{
    cli::ReportArgs,
    model::{Report, stacks},
    render,
    runs::{compare, gate, intervals, saved},
};

/// What `report` prints, its exit status, and the run a flame graph draws (one file only).
pub struct Printed {
    pub output: String,
    pub status: ExitCode,
    pub run: Option<Report>,
}

/// `draw`: the run is wanted whole, for `--flamegraph`.
pub fn run(args: &ReportArgs, format: render::Format, draw: bool) -> Result<Printed> {
    let index = args.interval_index.map(|i| i as usize);
    match &args.files[..] {
        [file] if format == render::Format::Folded => {
            let (whole, _) = one_report(file, index)?;
            if let Err(why) = stacks::of_report(&whole) {
                bail!("{} has no kernel stacks to fold: {}", file.display(), why.0);
            }
            Ok(Printed {
                output: render::report(format, &whole),
                status: ExitCode::SUCCESS,
                run: Some(whole),
            })
        }
        [file] if draw => {
            let (whole, _) = one_report(file, index)?;
            let mut printed = run(args, format, false)?;
            printed.run = Some(whole);
            Ok(printed)
        }
        [file] => {
            let run = saved::read(file)?;
            let reports = chosen(run.reports, index, file)?;
            let banner = run
                .probes
                .map_or(String::new(), |n| render::banner(format, n as usize));
            let output = reports
                .iter()
                .fold(banner, |out, report| out + &render::report(format, report));
            Ok(Printed {
                output,
                status: ExitCode::SUCCESS,
                run: None,
            })
        }
        [a, b] => {
            let (report_a, name_a) = one_report(a, index)?;
            let (report_b, name_b) = one_report(b, index)?;
            let comparison = compare::compare(&report_a, &report_b);
            let mut output = render::comparison(&comparison, &name_a, &name_b);
            let mut status = ExitCode::SUCCESS;
            if !args.fail_if.is_empty() {
                let verdicts = gate::judge(
                    &args.fail_if,
                    &comparison,
                    &a.display().to_string(),
                    &b.display().to_string(),
                );
                output.push('\n');
                output += &render::verdicts(&verdicts);
                if let Some(path) = &args.junit {
                    let xml = render::junit(&verdicts)?;
                    std::fs::write(path, xml)
                        .with_context(|| format!("writing the JUnit XML to {}", path.display()))?;
                }
                if verdicts.failed() {
                    status = ExitCode::FAILURE;
                }
            }
            Ok(Printed {
                output,
                status,
                run: None,
            })
        }
        _ => Err(anyhow!("report takes one saved run, or two to compare")),
    }
}

/// A saved run as one report, for a comparison, and how the heading names it.
fn one_report(file: &Path, index: Option<usize>) -> Result<(Report, String)> {
    let run = saved::read(file)?;
    let intervals = run.reports.len();
    // The environment is recorded with the first interval only.
    let environment = run.reports.iter().find_map(|r| r.environment.clone());
    let mut whole = intervals::whole(chosen(run.reports, index, file)?);
    whole.environment = environment;
    let name = match index {
        Some(i) => format!("{} (interval {i} of {intervals})", file.display()),
        None => format!("{}{}", file.display(), intervals::describe(intervals)),
    };
    Ok((whole, name))
}

/// Every report of the run, or the interval `index` names (from 1).
fn chosen(reports: Vec<Report>, index: Option<usize>, file: &Path) -> Result<Vec<Report>> {
    let Some(index) = index else {
        return Ok(reports);
    };
    if reports.first().is_none_or(|r| r.time.is_none()) {
        bail!(
            "--interval-index {index}: {} is a run of one window, saved without --interval",
            file.display()
        );
    }
    let intervals = reports.len();
    match reports.into_iter().nth(index - 1) {
        Some(report) => Ok(vec![report]),
        None => bail!(
            "--interval-index {index}: {} has {intervals} intervals; it takes 1 to {intervals}",
            file.display()
        ),
    }
}
