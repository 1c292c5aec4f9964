//! `rcutrace report FILE [FILE2]`: a saved `-f json` run printed again, through the same
//! renderers as a live run; or two runs compared. Reads files only: no privileges needed.

use anyhow::Result;

use crate::{cli::ReportArgs, render, runs::compare, runs::saved};

pub fn run(args: &ReportArgs, format: render::Format) -> Result<String> {
    match &args.files[..] {
        [file] => {
            let run = saved::read(file)?;
            let banner = run
                .probes
                .map_or(String::new(), |n| render::banner(format, n as usize));
            Ok(banner + &render::report(format, &run.report))
        }
        [a, b] => {
            let (run_a, run_b) = (saved::read(a)?, saved::read(b)?);
            let comparison = compare::compare(&run_a.report, &run_b.report);
            Ok(render::comparison(
                &comparison,
                &a.display().to_string(),
                &b.display().to_string(),
            ))
        }
        _ => Err(anyhow::anyhow!(
            "report takes one saved run, or two to compare"
        )),
    }
}
