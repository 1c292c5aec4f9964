//! `--flamegraph FILE.svg`: a report's stacks drawn as the interactive SVG flame graph that
//! `cargo flamegraph` draws, by the same library (inferno), from the folded lines `-f folded`
//! prints: the two can never disagree.

use anyhow::{Context as _, Result, bail};
use inferno::flamegraph::{self, Options, color::BasicPalette};

use crate::{
    model::stacks::{Weight, WeightedStacks},
    model::{Report, Summary},
    render::folded,
};

/// The SVG of `stacks`, with a title that says what the widths measure.
pub fn svg(report: &Report, stacks: &WeightedStacks) -> Result<Vec<u8>> {
    match stacks.exact_total() {
        Some(0) => bail!("no kernel stack was recorded in the window: nothing to draw"),
        // The drawing sums them again, as a machine word (a saved run can say anything).
        None => bail!("the stacks' weights add up past 2^64: too large to draw"),
        Some(_) => {}
    }
    let mut options = Options::default();
    options.title = title(report);
    options.subtitle = Some(subtitle(stacks.weight).into());
    options.count_name = stacks.weight.name().into();
    // Hot colours for calls; blue for time spent waiting, as BCC's off-CPU flame graphs.
    options.colors = flamegraph::Palette::Basic(match stacks.weight {
        Weight::Calls => BasicPalette::Hot,
        Weight::Nanoseconds => BasicPalette::Io,
    });
    // The same input always draws the same picture, each function in one colour.
    options.deterministic = true;
    options.hash = true;
    let folded = folded::lines(stacks);
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut options, folded.lines(), &mut svg)
        .context("drawing the flame graph")?;
    Ok(svg)
}

fn title(report: &Report) -> String {
    match &report.summary {
        Summary::Count(_) => "RCU calls by kernel stack".into(),
        Summary::Latency(summaries) => {
            let maps: Vec<&str> = summaries.iter().map(|s| s.map_name.as_str()).collect();
            format!("Time waited by kernel stack ({})", maps.join(", "))
        }
        Summary::Run(run) => format!(
            "Time waited on RCU by kernel stack, in `{}` and the work it caused",
            run.figures.command
        ),
        Summary::GracePeriods(_) => "Slowest grace periods, by their last holdout's stack".into(),
        Summary::Callbacks(_) | Summary::Stall(_) => "Kernel stacks".into(),
    }
}

fn subtitle(weight: Weight) -> &'static str {
    match weight {
        Weight::Calls => "rcutrace: each frame as wide as the calls made through it",
        Weight::Nanoseconds => "rcutrace: each frame as wide as the nanoseconds waited through it",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// inferno's own parser of the folded lines gives the graph's root ("all") their total,
    /// and each frame its own (named without BCC's `_[k]`, which inferno takes off).
    #[test]
    fn the_svg_draws_every_stack_with_the_totals_of_the_folded_lines() {
        let report = Report::of_counts(
            &[
                (
                    "\n    synchronize_rcu+0\n    __do_sys_membarrier+97\n",
                    1234,
                ),
                ("\n    call_rcu+0\n    rcu_gp_kthread+80\n", 66),
            ],
            None,
        );
        let stacks = crate::model::stacks::of_report(&report).unwrap();
        let svg = String::from_utf8(svg(&report, &stacks).unwrap()).unwrap();
        assert!(svg.starts_with("<?xml"), "{svg}");
        assert!(
            svg.contains("<title>all (1,300 calls, 100%)</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>synchronize_rcu (1,234 calls, 94.92%)</title>"),
            "{svg}"
        );
        assert!(svg.contains("RCU calls by kernel stack"), "{svg}");
        // The same run draws the same picture.
        assert_eq!(
            svg.as_bytes(),
            super::svg(&report, &stacks).unwrap().as_slice()
        );
    }

    #[test]
    fn nothing_to_draw_is_an_error() {
        let report = Report::of_counts(&[], None);
        let stacks = crate::model::stacks::of_report(&report).unwrap();
        let error = svg(&report, &stacks).unwrap_err();
        assert!(error.to_string().contains("nothing to draw"), "{error}");
    }
}
