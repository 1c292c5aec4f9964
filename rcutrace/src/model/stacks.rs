//! A report's kernel stacks, each with its weight, for flame graphs (`-f folded`,
//! `--flamegraph`): `count --by stack` weighs a stack by its calls, `srlat`/`gplat --by stack`
//! by the nanoseconds its callers waited, `gp` its slowest grace periods' last holdouts by how
//! long each held its grace period up. Frames are root first and named as BCC's folded
//! output names kernel frames: the function without its offset, then `_[k]`.

use crate::model::{Map, Report, Summary};

/// What a stack's weight counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    Calls,
    Nanoseconds,
}

impl Weight {
    /// As a flame graph names its unit.
    pub fn name(self) -> &'static str {
        match self {
            Weight::Calls => "calls",
            Weight::Nanoseconds => "ns",
        }
    }
}

/// A report's stacks, in the order of its maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightedStacks {
    pub weight: Weight,
    /// `(frames root first, weight)`; one stack can appear more than once (two maps, two
    /// grace periods), as folded input allows.
    pub stacks: Vec<(Vec<String>, u64)>,
}

impl WeightedStacks {
    /// The stacks' weights summed, if the sum fits a `u64` (a saved run is read back as it
    /// is given, and its counts can be anything).
    pub fn exact_total(&self) -> Option<u64> {
        self.stacks
            .iter()
            .try_fold(0u64, |total, (_, n)| total.checked_add(*n))
    }
}

/// Why a report has no stacks to draw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoStacks(pub &'static str);

/// The stacks of a report of `count`, `srlat` or `gplat` keyed `--by stack`, or of `gp`.
pub fn of_report(report: &Report) -> Result<WeightedStacks, NoStacks> {
    match &report.summary {
        Summary::Count(_) => count_stacks(report),
        Summary::Latency(_) | Summary::Run(_) => {
            let mut stacks = Vec::new();
            for summary in report.summary.latency().unwrap_or_default() {
                for series in &summary.series {
                    let Some(key) = series.key.as_deref().filter(|k| is_stack_key(k)) else {
                        return Err(NoStacks(
                            "its histograms are not keyed by kernel stack (run with --by stack)",
                        ));
                    };
                    stacks.push((frames_of_key(key, &summary.map_name), waited_ns(series)));
                }
            }
            Ok(WeightedStacks {
                weight: Weight::Nanoseconds,
                stacks,
            })
        }
        Summary::GracePeriods(gp) => Ok(WeightedStacks {
            weight: Weight::Nanoseconds,
            stacks: gp
                .slowest
                .iter()
                .map(|row| {
                    let frames = if row.stack.is_empty() {
                        vec!["[no stack]".to_string()]
                    } else {
                        row.stack.iter().rev().map(|f| kernel_frame(f)).collect()
                    };
                    (frames, row.grace_period.held_ns)
                })
                .collect(),
        }),
        Summary::Callbacks(_) | Summary::Stall(_) => Err(NoStacks(
            "only count, srlat and gplat (with --by stack) and gp record kernel stacks",
        )),
    }
}

fn count_stacks(report: &Report) -> Result<WeightedStacks, NoStacks> {
    let mut stacks = Vec::new();
    for map in &report.maps {
        let Map::Count(map) = map else { continue };
        for (key, n) in &map.entries {
            if !is_stack_key(key) {
                return Err(NoStacks(
                    "its counts are not keyed by kernel stack (run with --by stack)",
                ));
            }
            stacks.push((frames_of_key(key, &map.name), *n));
        }
    }
    Ok(WeightedStacks {
        weight: Weight::Calls,
        stacks,
    })
}

/// The nanoseconds a series' calls waited, all together. The statistics keep the exact sum
/// as its mean: below 2^51 ns (26 days of waiting) the product rounds back to it exactly.
fn waited_ns(series: &crate::model::SeriesStats) -> u64 {
    series
        .mean_ns
        .map_or(0, |mean| (mean * series.count as f64).round() as u64)
}

/// A key `--by stack` makes: a stack (`\n    frame\n...`), a call whose stack was lost
/// (`[stack lost]`, with `, function` in count's map), or the keys `--top` folded.
fn is_stack_key(key: &str) -> bool {
    key.starts_with('\n') || key.starts_with("[stack lost]") || is_folded_keys(key)
}

fn is_folded_keys(key: &str) -> bool {
    key.starts_with("[other: ") && key.ends_with(" keys]")
}

/// Root-first frames of one key. Keys that are not a stack become one frame of their own
/// (below the function, for a lost stack of count's), so that their weight stays in the total.
fn frames_of_key(key: &str, map_name: &str) -> Vec<String> {
    if let Some(rest) = key.strip_prefix("[stack lost]") {
        let mut frames = vec!["[stack lost]".to_string()];
        match rest.strip_prefix(", ") {
            Some(function) => frames.push(kernel_frame(function)),
            None => frames.push(format!("[{map_name}]")),
        }
        return frames;
    }
    if is_folded_keys(key) {
        return vec![key.to_string()];
    }
    let frames: Vec<String> = key
        .lines()
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(kernel_frame)
        .collect();
    frames.into_iter().rev().collect()
}

/// `name+offset [module]` (as `kstack` prints a frame) as BCC folds it: `name_[k]`. The offset
/// goes, so that calls from anywhere in a function share its frame; so does the module, which
/// BCC's folded output leaves out too. An address nothing symbolized keeps its hex.
pub fn kernel_frame(frame: &str) -> String {
    let name = frame.split(" [").next().unwrap_or(frame).trim();
    let name = match name.rsplit_once('+') {
        Some((function, offset))
            if !function.is_empty() && offset.bytes().all(|b| b.is_ascii_digit()) =>
        {
            function
        }
        _ => name,
    };
    // `;` separates frames and a space the weight: neither may be inside one.
    let name: String = name
        .chars()
        .map(|c| {
            if c == ';' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect();
    format!("{name}_[k]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GracePeriodRow, LatencySummary, Losses, SeriesStats, Unit};

    /// A saved run's counts are read back as given: two near `u64::MAX` (the fuzz test's
    /// case) have no total, rather than a wrapped one or a panic.
    #[test]
    fn weights_past_a_u64_have_no_total() {
        let stacks = WeightedStacks {
            weight: Weight::Calls,
            stacks: vec![
                (vec!["a".into()], u64::MAX),
                (vec!["b".into()], 13_835_058_055_282_163_712),
            ],
        };
        assert_eq!(stacks.exact_total(), None);
    }

    #[test]
    fn frames_fold_as_bcc_names_kernel_frames() {
        assert_eq!(kernel_frame("synchronize_rcu+5"), "synchronize_rcu_[k]");
        assert_eq!(
            kernel_frame("rcutrace_test_hold_spin+29 [rcutrace_test]"),
            "rcutrace_test_hold_spin_[k]"
        );
        assert_eq!(kernel_frame("0xffffffff81000000"), "0xffffffff81000000_[k]");
        assert_eq!(kernel_frame("a+b"), "a+b_[k]");
    }

    #[test]
    fn count_stacks_are_root_first_and_weighed_by_calls() {
        let stack = "\n    synchronize_rcu+0\n    __do_sys_membarrier+97\n    do_syscall_64+130\n";
        let report = Report::of_counts(
            &[
                (stack, 20),
                ("[stack lost], call_rcu", 2),
                ("[other: 3 keys]", 7),
            ],
            None,
        );
        let stacks = of_report(&report).unwrap();
        assert_eq!(stacks.weight, Weight::Calls);
        assert_eq!(
            stacks.stacks,
            vec![
                (
                    vec![
                        "do_syscall_64_[k]".to_string(),
                        "__do_sys_membarrier_[k]".into(),
                        "synchronize_rcu_[k]".into()
                    ],
                    20
                ),
                (vec!["[stack lost]".into(), "call_rcu_[k]".into()], 2),
                (vec!["[other: 3 keys]".into()], 7),
            ]
        );
        assert_eq!(stacks.exact_total(), Some(29));
        // Keyed by anything else, or not keyed: nothing to draw, and why.
        assert!(of_report(&Report::of_counts(&[("rcu-workload, call_rcu", 3)], None)).is_err());
        assert!(of_report(&Report::of_counts(&[("call_rcu", 3)], None)).is_err());
        // --by stack with nothing called: no stack, and no error.
        assert_eq!(
            of_report(&Report::of_counts(&[], None))
                .unwrap()
                .exact_total(),
            Some(0)
        );
    }

    fn latency_report(series: Vec<SeriesStats>) -> Report {
        Report {
            time: None,
            maps: Vec::new(),
            summary: Summary::Latency(vec![LatencySummary {
                map_name: "@srlat".into(),
                unit: Unit::Ms,
                series,
                percentile_error: 0.0,
                losses: Losses::default(),
                stages: None,
                cross_checks: Vec::new(),
                grace_periods: Vec::new(),
            }]),
            environment: None,
        }
    }

    fn series(key: Option<&str>, count: u64, mean_ns: f64) -> SeriesStats {
        SeriesStats {
            key: key.map(String::from),
            count,
            min_ns: Some(1),
            max_ns: Some(1),
            mean_ns: Some(mean_ns),
            percentiles: Vec::new(),
            percentiles_exact: false,
        }
    }

    #[test]
    fn latency_stacks_are_weighed_by_the_nanoseconds_waited() {
        // 3 calls that waited 10000001, 10000002 and 10000004 ns.
        let sum = 30_000_007u64;
        let report = latency_report(vec![
            series(
                Some("\n    synchronize_rcu+0\n    rcu_barrier_kthread+9\n"),
                3,
                sum as f64 / 3.0,
            ),
            series(Some("[stack lost]"), 1, 42.0),
        ]);
        let stacks = of_report(&report).unwrap();
        assert_eq!(stacks.weight, Weight::Nanoseconds);
        assert_eq!(stacks.stacks[0].1, sum);
        assert_eq!(
            stacks.stacks[1],
            (vec!["[stack lost]".to_string(), "[@srlat]".into()], 42)
        );
        let unkeyed = latency_report(vec![series(None, 3, 1.0)]);
        assert!(of_report(&unkeyed).is_err());
        let by_comm = latency_report(vec![series(Some("rcu-workload"), 3, 1.0)]);
        assert!(of_report(&by_comm).is_err());
    }

    #[test]
    fn sums_near_the_bound_come_back_exactly() {
        for (sum, count) in [(1u64 << 50, 3u64), ((1 << 51) - 7, 1_000_003), (999, 7)] {
            let s = series(Some("\n    f+1\n"), count, sum as f64 / count as f64);
            assert_eq!(waited_ns(&s), sum, "{sum} over {count}");
        }
    }

    #[test]
    fn gp_stacks_are_the_slowest_grace_periods_holdouts() {
        use crate::model::{GracePeriodsSummary, anatomy::GracePeriod};
        let row = |held_ns, stack: &[&str]| GracePeriodRow {
            grace_period: GracePeriod {
                gp_seq: 4,
                started_ns: 0,
                duration_ns: held_ns * 2,
                phases: Default::default(),
                request_wait_ns: None,
                fqs_passes: 0,
                cpus_reported: 2,
                blocked_readers: 0,
                last_holdout: None,
                held_ns,
                expedited: false,
            },
            stack: stack.iter().map(|f| f.to_string()).collect(),
        };
        let summary = GracePeriodsSummary {
            elapsed: Default::default(),
            latency: LatencySummary {
                map_name: "@gplat".into(),
                unit: Unit::Ms,
                series: Vec::new(),
                percentile_error: 0.0,
                losses: Losses::default(),
                stages: None,
                cross_checks: Vec::new(),
                grace_periods: Vec::new(),
            },
            phases: Vec::new(),
            holdouts_by_cpu: Vec::new(),
            holdout_cpus_shown: 10,
            holdouts_by_task: Vec::new(),
            slowest: vec![
                row(500, &["rcu_sched_clock_irq+5", "do_idle+619"]),
                row(300, &[]),
            ],
            by_gp_seq: None,
            without_report: 0,
            unassembled: Default::default(),
            lost: Default::default(),
            rcu_node_leaves: Vec::new(),
            expedited: None,
        };
        let report = Report {
            time: None,
            maps: Vec::new(),
            summary: Summary::GracePeriods(Box::new(summary)),
            environment: None,
        };
        let stacks = of_report(&report).unwrap();
        assert_eq!(
            stacks.stacks,
            vec![
                (
                    vec!["do_idle_[k]".to_string(), "rcu_sched_clock_irq_[k]".into()],
                    500
                ),
                (vec!["[no stack]".into()], 300),
            ]
        );
    }
}
