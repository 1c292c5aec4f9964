//! Two saved runs side by side: what differs in their environment, and for each map present
//! in both, the counts (or the histogram buckets and statistics) of each with their ratio.
//! Pure logic over the report model; `render` prints the result.

use std::collections::BTreeSet;

use rcutrace_common::records::Environment;

use crate::model::{
    Buckets, CallbackCounts, CallbackRow, CallbackTotals, CallbacksSummary, CountMap, CountSummary,
    HistMap, Map, PerGracePeriod, Report, SeriesStats, Summary, Unit,
};

/// The comparison of run A with run B.
#[derive(Debug, PartialEq)]
pub struct Comparison {
    /// When A and B ran different commands, or timed different functions: said first.
    pub different_runs: Option<String>,
    /// What differs between the environments, in the order A records them.
    pub environment: EnvironmentDifference,
    pub counts: Vec<CountComparison>,
    /// `count`'s figures, where both runs are `count` runs: `(figure, A, B)`.
    pub rates: Vec<(&'static str, Option<f64>, Option<f64>)>,
    pub hists: Vec<HistComparison>,
    /// Maps only one run has: `(name, true)` for A's, `(name, false)` for B's.
    pub unmatched: Vec<(String, bool)>,
    /// Keys of a keyed histogram both runs have that only one run has: `(map, key, true)`
    /// for A's, `false` for B's.
    pub keys_unmatched: Vec<(String, String, bool)>,
}

#[derive(Debug, PartialEq)]
pub enum EnvironmentDifference {
    /// A run without an environment record (bpftrace's, or an older rcutrace's).
    NotRecorded { a: bool, b: bool },
    /// `(setting, value in A, value in B)` for each setting that differs.
    Differs(Vec<(String, Option<String>, Option<String>)>),
}

/// One count map of both runs: `(key, count in A, count in B)`, in bpftrace's order of A.
#[derive(Debug, PartialEq)]
pub struct CountComparison {
    pub name: String,
    pub rows: Vec<(String, Option<u64>, Option<u64>)>,
}

/// One histogram (one key of a keyed map) of both runs.
#[derive(Debug, PartialEq)]
pub struct HistComparison {
    pub name: String,
    pub key: Option<String>,
    /// Both sets of buckets, when their layouts match (so that rows line up).
    pub buckets: Option<(Buckets, Buckets)>,
    /// rcutrace's exact statistics, where both runs have them, in A's unit.
    pub stats: Option<(SeriesStats, SeriesStats, Unit)>,
}

/// B relative to A; none where A is zero.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (a != 0.0).then(|| b / a)
}

pub fn compare(a: &Report, b: &Report) -> Comparison {
    let names =
        |r: &Report| -> BTreeSet<String> { r.maps.iter().map(|m| m.name().to_string()).collect() };
    let (names_a, names_b) = (names(a), names(b));
    let mut counts = Vec::new();
    let mut hists = Vec::new();
    let mut keys_unmatched = Vec::new();
    for name in names_a.intersection(&names_b) {
        counts.extend(compare_counts(name, a, b));
        let (compared, unmatched) = compare_hists(name, a, b);
        hists.extend(compared);
        keys_unmatched.extend(unmatched);
    }
    let unmatched = names_a
        .difference(&names_b)
        .map(|n| (n.clone(), true))
        .chain(names_b.difference(&names_a).map(|n| (n.clone(), false)))
        .collect();
    if let (Summary::Callbacks(ca), Summary::Callbacks(cb)) = (&a.summary, &b.summary) {
        counts.extend(compare_callbacks(ca, cb));
    }
    let rates = match (&a.summary, &b.summary) {
        (Summary::Count(sa), Summary::Count(sb)) => count_figures(sa)
            .into_iter()
            .zip(count_figures(sb))
            .map(|((figure, va), (_, vb))| (figure, va, vb))
            .collect(),
        _ => Vec::new(),
    };
    Comparison {
        different_runs: different_runs(a, b),
        environment: compare_environments(a.environment.as_ref(), b.environment.as_ref()),
        counts,
        rates,
        hists,
        unmatched,
        keys_unmatched,
    }
}

/// What a run ran, as far as its records tell: the command, and the functions it timed.
fn what_ran(report: &Report) -> Option<(&'static str, Vec<String>)> {
    match &report.summary {
        Summary::Count(_) => Some(("count", Vec::new())),
        Summary::Callbacks(_) => Some(("callbacks", Vec::new())),
        Summary::GracePeriods(_) => Some(("gp", Vec::new())),
        Summary::Stall(_) => Some(("stall", Vec::new())),
        Summary::Run(run) => Some((
            "run",
            run.latency
                .iter()
                .map(|s| s.map_name.trim_start_matches('@').to_string())
                .collect(),
        )),
        // bpftrace's runs have no summaries: nothing to tell.
        Summary::Latency(summaries) if summaries.is_empty() => None,
        Summary::Latency(summaries) if summaries.iter().any(|s| s.map_name == "@gplat") => {
            Some(("gplat", Vec::new()))
        }
        Summary::Latency(summaries) => Some((
            "srlat",
            summaries
                .iter()
                .map(|s| match s.map_name.as_str() {
                    "@srlat" => "synchronize_rcu".to_string(),
                    "@srelat" => "synchronize_rcu_expedited".to_string(),
                    name => name.trim_start_matches('@').to_string(),
                })
                .collect(),
        )),
    }
}

/// A sentence for runs that are not two runs of one experiment.
fn different_runs(a: &Report, b: &Report) -> Option<String> {
    let ((command_a, timed_a), (command_b, timed_b)) = (what_ran(a)?, what_ran(b)?);
    if command_a != command_b {
        return Some(format!(
            "A and B are runs of different commands: A of `{command_a}`, B of `{command_b}`; \
             only the maps both have are compared."
        ));
    }
    if timed_a.iter().collect::<BTreeSet<_>>() == timed_b.iter().collect::<BTreeSet<_>>() {
        return None;
    }
    let shared = timed_a.iter().filter(|f| timed_b.contains(f)).count();
    Some(format!(
        "A and B timed different functions: A {}, B {}; {}.",
        timed_a.join(", "),
        timed_b.join(", "),
        if shared == 0 {
            "they have none in common, so no histogram is compared"
        } else {
            "only the functions both timed are compared"
        }
    ))
}

fn compare_environments(a: Option<&Environment>, b: Option<&Environment>) -> EnvironmentDifference {
    let (Some(a), Some(b)) = (a, b) else {
        return EnvironmentDifference::NotRecorded {
            a: a.is_none(),
            b: b.is_none(),
        };
    };
    let (a, b) = (settings(a), settings(b));
    let mut names: Vec<&String> = a.iter().map(|(n, _)| n).collect();
    names.extend(
        b.iter()
            .map(|(n, _)| n)
            .filter(|n| !a.iter().any(|(m, _)| m == *n)),
    );
    let value = |list: &[(String, String)], name: &str| {
        list.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    };
    EnvironmentDifference::Differs(
        names
            .into_iter()
            .map(|name| (name.clone(), value(&a, name), value(&b, name)))
            .filter(|(_, va, vb)| va != vb)
            .collect(),
    )
}

/// Every recorded setting by a name a reader knows it by.
fn settings(e: &Environment) -> Vec<(String, String)> {
    let mut settings = vec![
        ("kernel".to_string(), e.kernel_release.clone()),
        ("kernel build".to_string(), e.kernel_version.clone()),
        ("CPUs".to_string(), e.cpus.to_string()),
    ];
    let optional = [
        ("HZ", e.hz.map(|hz| hz.to_string())),
        ("preemption", e.preemption.clone()),
        ("rcu_expedited", e.rcu_expedited.clone()),
        ("rcu_normal", e.rcu_normal.clone()),
    ];
    settings.extend(
        optional
            .into_iter()
            .filter_map(|(name, value)| Some((name.to_string(), value?))),
    );
    settings.extend(
        e.rcutree_parameters
            .0
            .iter()
            .map(|(name, value)| (format!("rcutree.{name}"), value.clone())),
    );
    settings.extend(
        e.attach
            .0
            .iter()
            .map(|(function, method)| (format!("{function} attached by"), method.clone())),
    );
    settings
}

/// The figures `count` prints after its map, by name; none where not traced (or no window).
fn count_figures(s: &CountSummary) -> Vec<(&'static str, Option<f64>)> {
    let per_gp = |count| match s.per_grace_period(count) {
        PerGracePeriod::Ratio(r) => Some(r),
        _ => None,
    };
    vec![
        ("seconds", Some(s.elapsed.as_secs_f64())),
        ("grace periods/s", s.per_second(s.grace_periods)),
        ("RCU readers per grace period", per_gp(s.readers)),
        ("call_rcu() per grace period", per_gp(s.call_rcu)),
        ("callbacks per grace period", per_gp(s.callbacks)),
        ("RCU readers/s", s.per_second(s.readers)),
        ("callbacks/s", s.per_second(s.callbacks)),
    ]
}

/// `callbacks`' rows, queued and invoked, by function and entry point, in A's order (most
/// queued first), then the rows `--top` left out and the totals over every row: each total is
/// the sum of the rows above it.
fn compare_callbacks(a: &CallbacksSummary, b: &CallbacksSummary) -> Vec<CountComparison> {
    let key = |row: &CallbackRow| format!("{} via {}", row.function, row.via);
    /// A figure's name, its value in a row, in the rows not shown, and over every row.
    type Figure = (
        &'static str,
        fn(&CallbackRow) -> u64,
        fn(&CallbackCounts) -> u64,
        fn(&CallbackTotals) -> u64,
    );
    let figures: [Figure; 2] = [
        ("callbacks queued", |r| r.queued, |c| c.queued, |t| t.queued),
        (
            "callbacks invoked",
            |r| r.invoked,
            |c| c.invoked,
            |t| t.invoked,
        ),
    ];
    figures
        .into_iter()
        .map(|(name, of_row, of_hidden, of_totals)| {
            let mut rows: Vec<(String, Option<u64>, Option<u64>)> = a
                .rows
                .iter()
                .map(|ra| {
                    let in_b = b.rows.iter().find(|rb| key(rb) == key(ra)).map(of_row);
                    (key(ra), Some(of_row(ra)), in_b)
                })
                .collect();
            for rb in &b.rows {
                if !a.rows.iter().any(|ra| key(ra) == key(rb)) {
                    rows.push((key(rb), None, Some(of_row(rb))));
                }
            }
            if a.rows_not_shown + b.rows_not_shown > 0 {
                let hidden =
                    |s: &CallbacksSummary| (s.rows_not_shown > 0).then(|| of_hidden(&s.not_shown));
                rows.push(("rows not shown".into(), hidden(a), hidden(b)));
            }
            rows.push((
                "all rows".into(),
                Some(of_totals(&a.totals)),
                Some(of_totals(&b.totals)),
            ));
            CountComparison {
                name: name.to_string(),
                rows,
            }
        })
        .collect()
}

fn compare_counts(name: &str, a: &Report, b: &Report) -> Option<CountComparison> {
    // A single value is a map of one entry without a key.
    let count_map = |r: &Report| {
        r.maps.iter().find_map(|m| match m {
            Map::Count(c) if c.name == name => Some(c.clone()),
            Map::Scalar(s) if s.name == name => Some(CountMap {
                name: s.name.clone(),
                entries: vec![(String::new(), s.value)],
            }),
            _ => None,
        })
    };
    let (a, b) = (count_map(a)?, count_map(b)?);
    let mut rows: Vec<(String, Option<u64>, Option<u64>)> = a
        .entries_in_order()
        .into_iter()
        .map(|(key, n)| {
            let in_b = b.entries.iter().find(|(k, _)| k == key).map(|(_, n)| *n);
            (key.clone(), Some(*n), in_b)
        })
        .collect();
    for (key, n) in b.entries_in_order() {
        if !a.entries.iter().any(|(k, _)| k == key) {
            rows.push((key.clone(), None, Some(*n)));
        }
    }
    Some(CountComparison {
        name: name.to_string(),
        rows,
    })
}

/// The histograms of map `name` both runs have, and the keys only one has.
fn compare_hists(
    name: &str,
    a: &Report,
    b: &Report,
) -> (Vec<HistComparison>, Vec<(String, String, bool)>) {
    let hists = |r: &Report| -> Vec<HistMap> {
        crate::model::maps_in_order(&r.maps)
            .into_iter()
            .filter_map(|m| match m {
                Map::Hist(h) if h.name == name => Some(h.clone()),
                _ => None,
            })
            .collect()
    };
    let (in_a, in_b) = (hists(a), hists(b));
    let only = |these: &[HistMap], those: &[HistMap], in_a: bool| {
        these
            .iter()
            .filter(|h| !those.iter().any(|o| o.key == h.key))
            .filter_map(|h| Some((name.to_string(), h.key.clone()?, in_a)))
            .collect::<Vec<_>>()
    };
    let mut unmatched = only(&in_a, &in_b, true);
    unmatched.extend(only(&in_b, &in_a, false));
    let compared = in_a
        .iter()
        .filter_map(|ha| {
            let hb = in_b.iter().find(|h| h.key == ha.key)?;
            let (stats_a, stats_b) = (stats(a, name, &ha.key), stats(b, name, &ha.key));
            // Buckets of one layout in two units hold different values.
            let same_unit = match (&stats_a, &stats_b) {
                (Some((_, ua)), Some((_, ub))) => ua == ub,
                _ => true,
            };
            Some(HistComparison {
                name: name.to_string(),
                key: ha.key.clone(),
                buckets: aligned(&ha.buckets, &hb.buckets).filter(|_| same_unit),
                stats: stats_a
                    .zip(stats_b)
                    .map(|((sa, unit), (sb, _))| (sa, sb, unit)),
            })
        })
        .collect();
    (compared, unmatched)
}

/// Both bucket sets on one layout; none where the layouts differ.
fn aligned(a: &Buckets, b: &Buckets) -> Option<(Buckets, Buckets)> {
    match (a, b) {
        (Buckets::Log2(_), Buckets::Log2(_)) => Some((a.clone(), b.clone())),
        (Buckets::Linear(la, _), Buckets::Linear(lb, _)) if la == lb => {
            Some((a.clone(), b.clone()))
        }
        (Buckets::Sparse { step: sa, .. }, Buckets::Sparse { step: sb, .. }) if sa == sb => {
            Some((a.clone(), b.clone()))
        }
        _ => None,
    }
}

fn stats(report: &Report, name: &str, key: &Option<String>) -> Option<(SeriesStats, Unit)> {
    let summaries = report.summary.latency()?;
    let summary = summaries.iter().find(|s| s.map_name == name)?;
    let series = summary.series.iter().find(|s| &s.key == key)?;
    Some((series.clone(), summary.unit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LatencySummary, Losses};
    use rcutrace_common::{hist::LOG2_SLOTS, records::Members};
    use std::time::Duration;

    fn environment(expedited: &str, attach: &str) -> Environment {
        Environment {
            kernel_release: "6.12.57+deb13-cloud-amd64".into(),
            kernel_version: "#1 SMP PREEMPT_DYNAMIC Debian".into(),
            cpus: 2,
            rcu_expedited: Some(expedited.into()),
            rcu_normal: Some("0".into()),
            rcutree_parameters: Members(vec![("enable_rcu_lazy".into(), "Y".into())]),
            attach: Members(vec![("synchronize_rcu".into(), attach.into())]),
            ..Environment::default()
        }
    }

    #[test]
    fn only_what_differs_in_the_environment() {
        let a = Report::of_counts(&[], Some(environment("0", "kprobe+fexit")));
        let b = Report::of_counts(&[], Some(environment("1", "kprobe+kretprobe")));
        assert_eq!(
            compare(&a, &b).environment,
            EnvironmentDifference::Differs(vec![
                ("rcu_expedited".into(), Some("0".into()), Some("1".into())),
                (
                    "synchronize_rcu attached by".into(),
                    Some("kprobe+fexit".into()),
                    Some("kprobe+kretprobe".into())
                ),
            ])
        );
        let mut c = environment("0", "kprobe+fexit");
        c.hz = Some(250);
        c.rcutree_parameters.0.clear();
        assert_eq!(
            compare(&a, &Report::of_counts(&[], Some(c))).environment,
            EnvironmentDifference::Differs(vec![
                ("rcutree.enable_rcu_lazy".into(), Some("Y".into()), None),
                ("HZ".into(), None, Some("250".into())),
            ])
        );
        assert_eq!(
            compare(&a, &Report::of_counts(&[], None)).environment,
            EnvironmentDifference::NotRecorded { a: false, b: true }
        );
    }

    #[test]
    fn counts_line_up_by_key_in_the_order_of_a() {
        let a = Report::of_counts(&[("call_rcu", 30), ("synchronize_rcu", 10)], None);
        let b = Report::of_counts(&[("synchronize_rcu", 25), ("kvfree_call_rcu", 4)], None);
        let comparison = compare(&a, &b);
        assert_eq!(
            comparison.counts,
            [CountComparison {
                name: "@".into(),
                rows: vec![
                    ("synchronize_rcu".into(), Some(10), Some(25)),
                    ("call_rcu".into(), Some(30), None),
                    ("kvfree_call_rcu".into(), None, Some(4)),
                ],
            }]
        );
        assert!(comparison.unmatched.is_empty());
        // Without grace periods traced, the ratios are not there; the window always is.
        assert_eq!(comparison.rates[0], ("seconds", Some(0.0), Some(0.0)));
        assert!(
            comparison.rates[1..]
                .iter()
                .all(|(_, a, b)| a.is_none() && b.is_none())
        );
        assert_eq!(ratio(10.0, 25.0), Some(2.5));
        assert_eq!(ratio(0.0, 4.0), None);
    }

    #[test]
    fn single_values_compare_as_one_entry() {
        let scalar = |value| Report {
            time: None,
            maps: vec![Map::Scalar(crate::model::ScalarMap {
                name: "@".into(),
                value,
            })],
            summary: Summary::Latency(Vec::new()),
            environment: None,
        };
        assert_eq!(
            compare(&scalar(4), &scalar(6)).counts,
            [CountComparison {
                name: "@".into(),
                rows: vec![(String::new(), Some(4), Some(6))],
            }]
        );
    }

    #[test]
    fn count_figures_line_up() {
        let run = |gps, readers| Report {
            time: None,
            maps: Vec::new(),
            summary: Summary::Count(CountSummary {
                elapsed: Duration::from_secs(5),
                grace_periods: Some(gps),
                readers: Some(readers),
                ..CountSummary::default()
            }),
            environment: None,
        };
        let rates = compare(&run(100, 1000), &run(50, 1000)).rates;
        assert_eq!(rates[1], ("grace periods/s", Some(20.0), Some(10.0)));
        assert_eq!(
            rates[2],
            ("RCU readers per grace period", Some(10.0), Some(20.0))
        );
        assert_eq!(rates[4], ("callbacks per grace period", None, None));
        assert!(
            compare(&run(1, 1), &latency("@srlat", &[], 0.0))
                .rates
                .is_empty()
        );
    }

    #[test]
    fn callbacks_line_up_by_function_and_entry_point() {
        let row = |function: &str, via: &str, queued, invoked| CallbackRow {
            function: function.into(),
            via: via.into(),
            queued,
            invoked,
            pending_at_exit: 0,
            queued_before_tracing: 0,
            unrecorded: 0,
            requeued: 0,
            latency: SeriesStats {
                key: None,
                count: invoked,
                min_ns: None,
                max_ns: None,
                mean_ns: None,
                percentiles_exact: false,
                percentiles: Vec::new(),
            },
        };
        let run = |rows: Vec<CallbackRow>, queued, invoked| Report {
            time: None,
            maps: Vec::new(),
            summary: Summary::Callbacks(CallbacksSummary {
                elapsed: Duration::from_secs(5),
                unit: Unit::Ms,
                rows,
                rows_not_shown: 0,
                not_shown: CallbackCounts::default(),
                percentile_error: 0.0,
                totals: CallbackTotals {
                    queued,
                    invoked,
                    ..CallbackTotals::default()
                },
                entry_points_not_traced: Vec::new(),
                entry_points: Vec::new(),
                cross_checks: Vec::new(),
            }),
            environment: None,
        };
        let a = run(
            vec![row("f", "call_rcu", 10, 8), row("g", "call_rcu", 3, 3)],
            13,
            11,
        );
        let b = run(
            vec![row("f", "call_rcu_hurry", 4, 4), row("g", "call_rcu", 6, 5)],
            10,
            9,
        );
        let counts = compare(&a, &b).counts;
        assert_eq!(counts.len(), 2);
        assert_eq!(counts[0].name, "callbacks queued");
        assert_eq!(
            counts[0].rows,
            [
                ("f via call_rcu".to_string(), Some(10), None),
                ("g via call_rcu".into(), Some(3), Some(6)),
                ("f via call_rcu_hurry".into(), None, Some(4)),
                ("all rows".into(), Some(13), Some(10)),
            ]
        );
        assert_eq!(
            counts[1].rows[3],
            ("all rows".to_string(), Some(11), Some(9))
        );
    }

    fn latency(name: &str, slots: &[(usize, u64)], mean: f64) -> Report {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        for &(slot, n) in slots {
            counts[slot] = n;
        }
        let total = slots.iter().map(|(_, n)| n).sum();
        Report {
            time: None,
            maps: vec![Map::Hist(HistMap {
                name: name.into(),
                key: None,
                buckets: Buckets::Log2(counts),
            })],
            summary: Summary::Latency(vec![LatencySummary {
                map_name: name.into(),
                unit: Unit::Ms,
                series: vec![SeriesStats {
                    key: None,
                    count: total,
                    min_ns: Some(1),
                    max_ns: Some(9),
                    mean_ns: Some(mean),
                    percentiles_exact: false,
                    percentiles: vec![(0.5, mean)],
                }],
                percentile_error: 0.0078125,
                losses: Losses::default(),
                stages: None,
                cross_checks: Vec::new(),
                grace_periods: Vec::new(),
            }]),
            environment: None,
        }
    }

    #[test]
    fn histograms_of_one_layout_line_up_with_their_statistics() {
        let a = latency("@srlat", &[(25, 3)], 20e6);
        let b = latency("@srlat", &[(23, 5), (24, 1)], 5e6);
        let comparison = compare(&a, &b);
        assert_eq!(comparison.hists.len(), 1);
        let hist = &comparison.hists[0];
        let (Buckets::Log2(ca), Buckets::Log2(cb)) = hist.buckets.clone().unwrap() else {
            panic!("not log2");
        };
        assert_eq!((ca[25], cb[23], cb[24]), (3, 5, 1));
        let (sa, sb, unit) = hist.stats.clone().unwrap();
        assert_eq!((sa.count, sb.count, unit), (3, 6, Unit::Ms));
        assert_eq!(ratio(sa.mean_ns.unwrap(), sb.mean_ns.unwrap()), Some(0.25));
        // Another map in B only is named, not compared.
        let c = latency("@srelat", &[(10, 1)], 1.0);
        let comparison = compare(&a, &c);
        assert!(comparison.hists.is_empty());
        assert_eq!(
            comparison.unmatched,
            [("@srlat".to_string(), true), ("@srelat".to_string(), false)]
        );
    }

    /// A keyed histogram's keys only one run has are named, not left out unsaid.
    #[test]
    fn keys_only_one_run_has_are_named() {
        let keyed = |keys: &[&str]| {
            let mut report = latency("@srlat", &[(25, 3)], 20e6);
            report.maps = keys
                .iter()
                .map(|key| {
                    Map::Hist(HistMap {
                        name: "@srlat".into(),
                        key: Some(key.to_string()),
                        buckets: Buckets::Log2(vec![0, 1]),
                    })
                })
                .collect();
            report
        };
        let comparison = compare(
            &keyed(&["loadgen", "kworker/0:1"]),
            &keyed(&["loadgen", "sh"]),
        );
        assert_eq!(comparison.hists.len(), 1);
        assert_eq!(
            comparison.keys_unmatched,
            [
                ("@srlat".to_string(), "kworker/0:1".to_string(), true),
                ("@srlat".to_string(), "sh".to_string(), false)
            ]
        );
        let text = crate::render::comparison(&comparison, "a", "b");
        assert!(
            text.ends_with("\n@srlat[kworker/0:1]: only in A\n@srlat[sh]: only in B\n"),
            "{text}"
        );
    }

    #[test]
    fn different_layouts_are_not_lined_up() {
        let a = latency("@srlat", &[(25, 3)], 20e6);
        let mut b = a.clone();
        b.maps = vec![Map::Hist(HistMap {
            name: "@srlat".into(),
            key: None,
            buckets: Buckets::Sparse {
                step: 100,
                buckets: vec![(1, 3)],
            },
        })];
        let comparison = compare(&a, &b);
        assert_eq!(comparison.hists[0].buckets, None);
        assert!(comparison.hists[0].stats.is_some());
        // The same layout in another unit is not lined up either; the statistics are, in A's.
        let mut c = a.clone();
        if let Summary::Latency(summaries) = &mut c.summary {
            summaries[0].unit = Unit::Us;
        }
        let comparison = compare(&a, &c);
        assert_eq!(comparison.hists[0].buckets, None);
        assert_eq!(comparison.hists[0].stats.as_ref().unwrap().2, Unit::Ms);
    }

    fn latency_run(maps: &[&str]) -> Report {
        Report {
            time: None,
            maps: Vec::new(),
            summary: Summary::Latency(
                maps.iter()
                    .map(|name| crate::model::LatencySummary {
                        map_name: name.to_string(),
                        unit: Unit::Ms,
                        series: Vec::new(),
                        percentile_error: 0.0,
                        losses: crate::model::Losses::default(),
                        stages: None,
                        cross_checks: Vec::new(),
                        grace_periods: Vec::new(),
                    })
                    .collect(),
            ),
            environment: None,
        }
    }

    #[test]
    fn runs_of_different_commands_or_functions_are_said_first() {
        let count = Report {
            summary: Summary::Count(CountSummary::default()),
            ..latency_run(&[])
        };
        assert_eq!(
            compare(&latency_run(&["@gplat"]), &count)
                .different_runs
                .as_deref(),
            Some(
                "A and B are runs of different commands: A of `gplat`, B of `count`; only the \
                 maps both have are compared."
            )
        );
        assert_eq!(
            compare(&latency_run(&["@srlat"]), &latency_run(&["@srelat"]))
                .different_runs
                .as_deref(),
            Some(
                "A and B timed different functions: A synchronize_rcu, B \
                 synchronize_rcu_expedited; they have none in common, so no histogram is \
                 compared."
            )
        );
        let both = compare(
            &latency_run(&["@rcu_barrier", "@srlat"]),
            &latency_run(&["@srlat"]),
        );
        assert!(
            both.different_runs
                .unwrap()
                .ends_with("only the functions both timed are compared."),
        );
        assert_eq!(
            compare(&latency_run(&["@srlat"]), &latency_run(&["@srlat"])).different_runs,
            None
        );
        // bpftrace's runs say nothing of what ran.
        assert_eq!(compare(&latency_run(&[]), &count).different_runs, None);
    }
}
