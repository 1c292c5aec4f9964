//! `rcutrace gplat` and `rcutrace srlat`: one latency pipeline, two choices of functions.

use anyhow::Result;
use rcutrace_common::{
    hist::{LOG2_SLOTS, Linear},
    latency::*,
};

use super::{Need, Traced, trace};
use crate::{
    cli::{LatencyArgs, SrlatArgs},
    model::{Buckets, HistMap, LatencySummary, Losses, Map, Report, Summary, Unit},
    probes::{self, Latency},
    render::Format,
    stats::{PERCENTILE_ERROR, QUANTILES, percentile},
    tracer::Constant,
};

pub async fn gplat(args: &LatencyArgs, format: Format) -> Result<Report> {
    run(&probes::GP_LATENCY, args, Unit::Ms, None, format).await
}

pub async fn srlat(args: &SrlatArgs, format: Format) -> Result<Report> {
    let (latency, default_unit) = if args.expedited {
        (&probes::SYNCHRONIZE_RCU_EXPEDITED_LATENCY, Unit::Us)
    } else {
        (&probes::SYNCHRONIZE_RCU_LATENCY, Unit::Ms)
    };
    run(latency, &args.latency, default_unit, args.pid, format).await
}

/// The display histogram's layout, as chosen on the command line.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    Log2,
    Linear(Linear),
    Sparse(u64),
}

impl Layout {
    fn of(args: &LatencyArgs) -> Self {
        match (args.linear, args.buckets) {
            (Some(linear), _) => Layout::Linear(linear),
            (None, Some(step)) => Layout::Sparse(step),
            (None, None) => Layout::Log2,
        }
    }

    fn constants(self) -> [Constant; 4] {
        let (mode, linear) = match self {
            Layout::Log2 => (
                MODE_LOG2,
                Linear {
                    min: 0,
                    max: 1,
                    step: 1,
                },
            ),
            Layout::Linear(linear) => (MODE_LINEAR, linear),
            Layout::Sparse(step) => (
                MODE_BUCKETS,
                Linear {
                    min: 0,
                    max: step,
                    step,
                },
            ),
        };
        [
            Constant::U32("HIST_MODE", mode),
            Constant::U64("LINEAR_MIN", linear.min),
            Constant::U64("LINEAR_MAX", linear.max),
            Constant::U64("LINEAR_STEP", linear.step),
        ]
    }
}

async fn run(
    latency: &Latency,
    args: &LatencyArgs,
    default_unit: Unit,
    pid: Option<u32>,
    format: Format,
) -> Result<Report> {
    let unit = args.unit.unwrap_or(default_unit);
    let layout = Layout::of(args);
    let mut constants = layout.constants().to_vec();
    constants.push(Constant::U64("UNIT_NS", unit.nanos()));
    constants.push(Constant::U32("TARGET_TGID", pid.unwrap_or(0)));
    let same_function = latency.entry.function == latency.exit.function;
    constants.push(Constant::U32("SAME_FUNCTION", same_function.into()));
    let traced = trace(
        &[latency.entry, latency.exit],
        &constants,
        args.common.attach,
        Need::All,
        args.common.duration(),
        pid,
        format,
    )
    .await?;

    let buckets = read_buckets(&traced, layout)?;
    let summary = read_summary(&traced, latency, unit)?;
    Ok(Report {
        maps: vec![Map::Hist(HistMap {
            name: latency.map_name.into(),
            buckets,
        })],
        summary: Summary::Latency(summary),
    })
}

fn read_buckets(traced: &Traced, layout: Layout) -> Result<Buckets> {
    let tracer = &traced.tracer;
    Ok(match layout {
        Layout::Log2 => {
            let mut slots = tracer.per_cpu_sums("DISPLAY")?;
            slots.truncate(LOG2_SLOTS as usize);
            Buckets::Log2(slots)
        }
        Layout::Linear(linear) => {
            let mut slots = tracer.per_cpu_sums("DISPLAY")?;
            slots.truncate(linear.buckets() as usize + 2);
            Buckets::Linear(linear, slots)
        }
        Layout::Sparse(step) => Buckets::Sparse {
            step,
            buckets: tracer.hash_entries("BUCKETS")?,
        },
    })
}

fn read_summary(traced: &Traced, latency: &Latency, unit: Unit) -> Result<LatencySummary> {
    let tracer = &traced.tracer;
    let stats = tracer.per_cpu_sums("STATS")?;
    let stat = |index: u32| stats.get(index as usize).copied().unwrap_or(0);
    let count = stat(STAT_COUNT);
    let per_cpu_max = |index| -> Result<u64> {
        Ok(tracer
            .per_cpu_values("STATS", index)?
            .into_iter()
            .max()
            .unwrap_or(0))
    };
    let (min_ns, max_ns, mean_ns) = if count == 0 {
        (None, None, None)
    } else {
        (
            Some(!per_cpu_max(STAT_MIN_INVERTED)?),
            Some(per_cpu_max(STAT_MAX)?),
            Some(stat(STAT_SUM_NS) as f64 / count as f64),
        )
    };
    let fine = tracer.per_cpu_sums("FINE")?;
    let percentiles = match (min_ns, max_ns) {
        (Some(min), Some(max)) => QUANTILES
            .iter()
            .filter_map(|&q| percentile(&fine, q, min, max).map(|ns| (q, ns)))
            .collect(),
        _ => Vec::new(),
    };
    Ok(LatencySummary {
        map_name: latency.map_name.into(),
        unit,
        count,
        min_ns,
        max_ns,
        mean_ns,
        percentiles,
        percentile_error: PERCENTILE_ERROR,
        losses: Losses {
            in_flight_at_exit: tracer.hash_len("IN_FLIGHT")?,
            began_before_tracing: stat(STAT_UNMATCHED_RETURNS),
            in_flight_map_full: stat(STAT_LOST_START_MAP_FULL),
            bucket_map_full: stat(STAT_LOST_BUCKET_MAP_FULL),
            missed_by_kernel: missed_by_kernel(traced, latency, stat(STAT_RETURNS_MISSED)),
        },
    })
}

/// Hits the kernel skipped (program recursion), or the returns the programs saw go missing,
/// whichever is larger: a skipped return program shows up in both.
fn missed_by_kernel(traced: &Traced, latency: &Latency, returns_missed: u64) -> u64 {
    let reported = traced.tracer.missed(&[latency.entry, latency.exit]);
    reported.max(returns_missed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(linear: Option<Linear>, buckets: Option<u64>) -> LatencyArgs {
        LatencyArgs {
            common: crate::cli::Common {
                secs: 1,
                attach: Default::default(),
            },
            unit: None,
            linear,
            buckets,
        }
    }

    #[test]
    fn layout_constants() {
        let linear = Linear {
            min: 0,
            max: 1000,
            step: 100,
        };
        assert_eq!(
            Layout::of(&args(Some(linear), None)),
            Layout::Linear(linear)
        );
        assert_eq!(Layout::of(&args(None, Some(5))), Layout::Sparse(5));
        assert_eq!(Layout::of(&args(None, None)), Layout::Log2);
        let constants = Layout::Sparse(5).constants();
        assert!(matches!(
            constants[0],
            Constant::U32("HIST_MODE", MODE_BUCKETS)
        ));
        assert!(matches!(constants[3], Constant::U64("LINEAR_STEP", 5)));
        // The largest linear histogram fits the kernel's display array.
        let widest = Linear {
            min: 0,
            max: 1000,
            step: 1,
        };
        assert!(widest.buckets() + 2 <= DISPLAY_SLOTS as u64);
    }
}
