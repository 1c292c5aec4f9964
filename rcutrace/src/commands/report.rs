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
    runs::{compare, gate, intervals, save::SaveFile, saved},
};

/// What `report` read: its output, the exit status after it, and the run `--flamegraph`
/// draws (from one file only).
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
                output: render::output(format, &whole),
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
                .fold(banner, |out, report| out + &render::output(format, report));
            Ok(Printed {
                output,
                status: ExitCode::SUCCESS,
                run: None,
            })
        }
        [a, b] => {
            let (report_a, name_a) = one_report(a, index)?;
            let (report_b, name_b) = one_report(b, index)?;
            // Opened before anything is judged: a path that cannot be written fails the gate
            // with nothing printed, and leaves nothing behind.
            let mut junit = match &args.junit {
                Some(path) => Some(
                    SaveFile::open_for("--junit", "writing the JUnit XML", path)
                        .map_err(|message| anyhow!(message))?,
                ),
                None => None,
            };
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
                if let Some(mut file) = junit.take() {
                    match render::junit(&verdicts) {
                        Ok(xml) => file.append(xml.as_bytes()),
                        Err(error) => {
                            file.discard();
                            return Err(error);
                        }
                    }
                    file.finish()?;
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
    let mut whole = intervals::whole(chosen(run.reports, index, file)?)
        .with_context(|| format!("{} as one whole run", file.display()))?;
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
    if reports.is_empty() {
        bail!(
            "--interval-index {index}: {} has no interval: it records no map (bpftrace writes \
             none for maps that stayed empty)",
            file.display()
        );
    }
    if reports.first().is_none_or(|r| r.time.is_none()) {
        bail!(
            "--interval-index {index}: {} is a run of one window, saved without --interval",
            file.display()
        );
    }
    let intervals = reports.len();
    match index
        .checked_sub(1)
        .and_then(|i| reports.into_iter().nth(i))
    {
        Some(report) => Ok(vec![report]),
        None => bail!(
            "--interval-index {index}: {} has {intervals} intervals; it takes 1 to {intervals}",
            file.display()
        ),
    }
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CountMap, CountSummary, Map, Summary};

    /// A saved `count` run with these entries, in a file of its own.
    fn saved_count(name: &str, entries: &[(&str, u64)]) -> std::path::PathBuf {
        let report = Report {
            time: None,
            maps: vec![Map::Count(CountMap {
                name: "@".into(),
                entries: entries.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            })],
            summary: Summary::Count(CountSummary::default()),
            environment: None,
        };
        let path =
            std::env::temp_dir().join(format!("rcutrace-{name}-{}.json", std::process::id()));
        let json = render::banner(render::Format::Json, 1)
            + &render::output(render::Format::Json, &report);
        std::fs::write(&path, json).unwrap();
        path
    }

    fn args(files: Vec<std::path::PathBuf>) -> ReportArgs {
        ReportArgs {
            files,
            interval_index: None,
            fail_if: Vec::new(),
            junit: None,
        }
    }

    #[test]
    fn a_saved_run_folds_its_stacks_or_says_it_has_none() {
        let stacks = saved_count(
            "stacks",
            &[("\n    synchronize_rcu+0\n    __x64_sys_membarrier+20\n", 30)],
        );
        let printed = run(&args(vec![stacks.clone()]), render::Format::Folded, true).unwrap();
        assert_eq!(
            printed.output,
            "__x64_sys_membarrier_[k];synchronize_rcu_[k] 30\n"
        );
        assert!(printed.run.is_some());
        let plain = saved_count("plain", &[("synchronize_rcu", 30)]);
        let error = run(&args(vec![plain.clone()]), render::Format::Folded, false)
            .err()
            .unwrap();
        assert!(
            error
                .to_string()
                .contains("has no kernel stacks to fold: its counts are not keyed by kernel stack"),
            "{error}"
        );
        // Drawn from the text report of the same file: the whole run comes with it.
        let printed = run(&args(vec![plain.clone()]), render::Format::Text, true).unwrap();
        assert!(
            printed.output.contains("@[synchronize_rcu]: 30"),
            "{}",
            printed.output
        );
        assert!(render::flamegraph(&printed.run.unwrap()).is_err());
        for path in [stacks, plain] {
            let _ = std::fs::remove_file(path);
        }
    }

    /// bpftrace's `-f json` of a run whose maps stayed empty: only its `attached_probes`
    /// record. Every way `report` reads it gives a result or an error, never a panic.
    #[test]
    fn a_bpftrace_run_without_a_map_is_reported_as_empty() {
        let path =
            std::env::temp_dir().join(format!("rcutrace-probes-only-{}.json", std::process::id()));
        std::fs::write(
            &path,
            "{\"type\": \"attached_probes\", \"data\": {\"probes\": 2}}\n",
        )
        .unwrap();
        // Printed again: bpftrace's banner, and no map.
        let printed = run(&args(vec![path.clone()]), render::Format::Text, false).unwrap();
        assert_eq!(printed.output, "Attaching 2 probes...\n");
        // Compared with itself: nothing differs and no map is compared.
        let printed = run(
            &args(vec![path.clone(), path.clone()]),
            render::Format::Text,
            false,
        )
        .unwrap();
        assert_eq!(printed.status, ExitCode::SUCCESS);
        let name = path.display();
        assert!(
            printed.output.starts_with(&format!(
                "A: {name} (no map recorded)\nB: {name} (no map recorded)\n"
            )),
            "{}",
            printed.output
        );
        // A gate finds nothing to judge, and so fails.
        let mut gated = args(vec![path.clone(), path.clone()]);
        gated.fail_if = vec!["count < 10".parse().unwrap()];
        let printed = run(&gated, render::Format::Text, false).unwrap();
        assert_eq!(printed.status, ExitCode::FAILURE);
        assert!(
            printed.output.contains("nothing to judge"),
            "{}",
            printed.output
        );
        // Folded: no stack, as a live run's window without one prints none.
        let printed = run(&args(vec![path.clone()]), render::Format::Folded, false).unwrap();
        assert_eq!(printed.output, "");
        // One interval of it: there is none.
        let mut one = args(vec![path.clone()]);
        one.interval_index = Some(1);
        let error = run(&one, render::Format::Text, false).err().unwrap();
        assert!(error.to_string().contains("has no interval"), "{error}");
        // A flame graph: the run comes whole, and drawing it says there is nothing to draw.
        let printed = run(&args(vec![path.clone()]), render::Format::Text, true).unwrap();
        assert_eq!(printed.output, "Attaching 2 probes...\n");
        let error = render::flamegraph(&printed.run.unwrap()).unwrap_err();
        assert!(
            error.to_string().contains("no kernel stack was recorded"),
            "{error}"
        );
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_gate_that_fails_exits_1_and_writes_its_junit() {
        let a = saved_count("gate-a", &[("synchronize_rcu", 30)]);
        let b = saved_count("gate-b", &[("synchronize_rcu", 10)]);
        let junit = std::env::temp_dir().join(format!("rcutrace-gate-{}.xml", std::process::id()));
        let mut gated = args(vec![a.clone(), b.clone()]);
        gated.fail_if = vec!["count < -50%".parse().unwrap()];
        gated.junit = Some(junit.clone());
        let printed = run(&gated, render::Format::Text, false).unwrap();
        assert_eq!(printed.status, ExitCode::FAILURE);
        assert!(
            printed
                .output
                .contains("FAILED 'count < -50%' on @[synchronize_rcu]: A 30, B 10, limit 15\n"),
            "{}",
            printed.output
        );
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(xml.contains("failures=\"1\""), "{xml}");
        gated.fail_if = vec!["count < -80%".parse().unwrap()];
        assert_eq!(
            run(&gated, render::Format::Text, false).unwrap().status,
            ExitCode::SUCCESS
        );
        // A JUnit file that cannot be written is said before anything is judged.
        gated.junit = Some("/proc/version".into());
        let error = run(&gated, render::Format::Text, false).err().unwrap();
        assert!(
            error
                .to_string()
                .contains("--junit /proc/version: cannot be written"),
            "{error}"
        );
        for path in [a, b, junit] {
            let _ = std::fs::remove_file(path);
        }
    }
}
