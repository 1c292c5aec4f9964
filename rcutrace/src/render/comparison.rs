//! Two runs side by side (`rcutrace report A B`): what differs in their environment, then
//! each map both have, with B's figures relative to A's.

use std::fmt::Write as _;

use rcutrace_common::hist::{SlotBounds, sparse_bounds};

use crate::{
    model::stats,
    model::{Buckets, SeriesStats, Unit, shown_slots},
    render::{figure, text},
    runs::compare::{Comparison, CountComparison, EnvironmentDifference, HistComparison, ratio},
};

/// Half of bpftrace's 52 columns for each run's bar.
const BAR_WIDTH: f32 = 26.0;

pub fn comparison(c: &Comparison, a_name: &str, b_name: &str) -> String {
    let mut out = format!("A: {a_name}\nB: {b_name}\n\n");
    if let Some(different) = &c.different_runs {
        let _ = writeln!(out, "{different}\n");
    }
    environment(&mut out, &c.environment);
    for map in &c.counts {
        out.push('\n');
        counts(&mut out, map);
    }
    if !c.rates.is_empty() {
        out.push('\n');
        rates(&mut out, &c.rates);
    }
    for hist in &c.hists {
        out.push('\n');
        histogram(&mut out, hist);
    }
    if !c.unmatched.is_empty() || !c.keys_unmatched.is_empty() {
        out.push('\n');
    }
    for (name, in_a) in &c.unmatched {
        let _ = writeln!(out, "{name}: only in {}", if *in_a { "A" } else { "B" });
    }
    for (name, key, in_a) in &c.keys_unmatched {
        let _ = writeln!(
            out,
            "{name}[{}]: only in {}",
            text::one_line(key),
            if *in_a { "A" } else { "B" }
        );
    }
    out
}

fn environment(out: &mut String, difference: &EnvironmentDifference) {
    match difference {
        EnvironmentDifference::NotRecorded { a, b } => {
            let which = match (a, b) {
                (true, true) => "A and B",
                (true, false) => "A",
                _ => "B",
            };
            let _ = writeln!(out, "Environment: not recorded in {which}");
        }
        EnvironmentDifference::Differs(settings) if settings.is_empty() => {
            out.push_str("Environment: the same\n");
        }
        EnvironmentDifference::Differs(settings) => {
            let mut rows = vec![row(["Environment, what differs", "A", "B"])];
            for (name, a, b) in settings {
                let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
                rows.push(vec![format!("  {name}"), shown(a), shown(b)]);
            }
            table(out, &rows, 1);
        }
    }
}

fn counts(out: &mut String, map: &CountComparison) {
    let mut rows = vec![row([map.name.as_str(), "A", "B", "B/A"])];
    for (key, a, b) in &map.rows {
        let shown = |n: &Option<u64>| n.map_or("-".to_string(), |n| n.to_string());
        let r = match (a, b) {
            (Some(a), Some(b)) => ratio_text(ratio(*a as f64, *b as f64)),
            _ => "-".to_string(),
        };
        // A map of a single value has one entry without a key.
        let label = if key.is_empty() {
            "value".to_string()
        } else {
            text::one_line(key)
        };
        rows.push(vec![format!("  {label}"), shown(a), shown(b), r]);
    }
    table(out, &rows, 1);
}

/// `count`'s figures with the decimals `count` prints them with; a figure neither run has is
/// left out.
fn rates(out: &mut String, rates: &[(&str, Option<f64>, Option<f64>)]) {
    let mut rows = vec![row(["Over the window", "A", "B", "B/A"])];
    for (figure, a, b) in rates.iter().filter(|(_, a, b)| a.is_some() || b.is_some()) {
        let places = if *figure == "seconds" { 2 } else { 1 };
        let shown = |v: &Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.places$}"));
        let r = ratio_text(a.zip(*b).and_then(|(a, b)| ratio(a, b)));
        rows.push(vec![format!("  {figure}"), shown(a), shown(b), r]);
    }
    table(out, &rows, 1);
}

fn histogram(out: &mut String, hist: &HistComparison) {
    let name = match &hist.key {
        Some(key) => format!("{}[{}]", hist.name, text::one_line(key)),
        None => hist.name.clone(),
    };
    match &hist.buckets {
        Some((a, b)) => {
            let _ = writeln!(out, "{name}: A | B");
            let rows = bucket_rows(a, b);
            let max = rows.iter().map(|(_, a, b)| *a.max(b)).max().unwrap_or(0);
            for (label, a, b) in rows {
                let _ = writeln!(
                    out,
                    "{label:<16}{a:>8} |{:<26}|{b:>8} |{:<26}|",
                    bar(a, max),
                    bar(b, max)
                );
            }
        }
        None => {
            let _ = writeln!(
                out,
                "{name}: buckets laid out differently (layout or unit), not lined up"
            );
        }
    }
    if let Some((a, b, unit)) = &hist.stats {
        out.push('\n');
        statistics(out, &name, a, b, *unit);
    }
}

/// `(label, count in A, count in B)` from the first bucket either run filled to the last.
fn bucket_rows(a: &Buckets, b: &Buckets) -> Vec<(String, u64, u64)> {
    let side_by_side = |ca: &[u64], cb: &[u64], label: &dyn Fn(usize) -> String| {
        let both: Vec<u64> = (0..ca.len().max(cb.len()))
            .map(|i| ca.get(i).copied().unwrap_or(0) + cb.get(i).copied().unwrap_or(0))
            .collect();
        shown_slots(&both)
            .map(|(slot, _)| {
                let at = |c: &[u64]| c.get(slot).copied().unwrap_or(0);
                (label(slot), at(ca), at(cb))
            })
            .collect()
    };
    match (a, b) {
        (Buckets::Log2(ca), Buckets::Log2(cb)) => side_by_side(ca, cb, &text::log2_label),
        (Buckets::Linear(linear, ca), Buckets::Linear(_, cb)) => {
            side_by_side(ca, cb, &|slot| text::linear_label(linear, slot))
        }
        (Buckets::Sparse { step, buckets: ba }, Buckets::Sparse { buckets: bb, .. }) => {
            let mut ids: Vec<u64> = ba.iter().chain(bb).map(|(id, _)| *id).collect();
            ids.sort();
            ids.dedup();
            let count = |list: &[(u64, u64)], id| {
                list.iter().filter(|(i, _)| *i == id).map(|(_, n)| n).sum()
            };
            ids.into_iter()
                .map(|id| {
                    let label = match sparse_bounds(id, *step) {
                        SlotBounds::Range { low, high } => format!("[{low}, {high})"),
                        _ => String::new(),
                    };
                    (label, count(ba, id), count(bb, id))
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Both bars to one scale, so that their lengths compare (single precision, as bpftrace).
fn bar(count: u64, max: u64) -> String {
    let width = if max == 0 {
        0
    } else {
        (count as f32 / max as f32 * BAR_WIDTH) as usize
    };
    "@".repeat(width)
}

fn statistics(out: &mut String, name: &str, a: &SeriesStats, b: &SeriesStats, unit: Unit) {
    let mut rows = vec![row([name, "A", "B", "B/A"])];
    let count_ratio = ratio(a.count as f64, b.count as f64);
    rows.push(vec![
        "  count".into(),
        a.count.to_string(),
        b.count.to_string(),
        ratio_text(count_ratio),
    ]);
    // One precision per column: each run's exact figures with the decimals its most precise
    // one needs.
    let exact_figures = |s: &SeriesStats| {
        let exact_percentiles = s
            .percentiles
            .iter()
            .filter(|_| s.percentiles_exact)
            .map(|&(_, ns)| ns as u64);
        [s.min_ns, s.max_ns]
            .into_iter()
            .flatten()
            .chain(exact_percentiles)
            .collect::<Vec<u64>>()
    };
    let places = |s: &SeriesStats| figure::places_needed(exact_figures(s), unit);
    let (places_a, places_b) = (places(a), places(b));
    let in_column = |places: usize, ns: u64| {
        format!(
            "{} {}",
            figure::exact_number_places(ns, unit, places),
            unit.suffix()
        )
    };
    let exact_a = |v: Option<u64>| v.map_or("-".to_string(), |ns| in_column(places_a, ns));
    let exact_b = |v: Option<u64>| v.map_or("-".to_string(), |ns| in_column(places_b, ns));
    let estimate = |v: Option<f64>| v.map_or("-".to_string(), |ns| figure::estimate(ns, unit));
    let both = |x: Option<f64>, y: Option<f64>| ratio_text(x.zip(y).and_then(|(x, y)| ratio(x, y)));
    let as_f64 = |v: Option<u64>| v.map(|n| n as f64);
    rows.push(vec![
        "  min".into(),
        exact_a(a.min_ns),
        exact_b(b.min_ns),
        both(as_f64(a.min_ns), as_f64(b.min_ns)),
    ]);
    rows.push(vec![
        "  mean".into(),
        estimate(a.mean_ns),
        estimate(b.mean_ns),
        both(a.mean_ns, b.mean_ns),
    ]);
    rows.push(vec![
        "  max".into(),
        exact_a(a.max_ns),
        exact_b(b.max_ns),
        both(as_f64(a.max_ns), as_f64(b.max_ns)),
    ]);
    // Exact percentiles (few samples, all kept) print as exact values do.
    let percentile = |s: &SeriesStats, places: usize, ns: Option<f64>| match ns {
        Some(ns) if s.percentiles_exact => in_column(places, ns as u64),
        ns => estimate(ns),
    };
    for &(q, pa) in &a.percentiles {
        let pb = b
            .percentiles
            .iter()
            .find(|(qb, _)| *qb == q)
            .map(|(_, ns)| *ns);
        rows.push(vec![
            format!("  {}", stats::quantile_name(q)),
            percentile(a, places_a, Some(pa)),
            percentile(b, places_b, pb),
            both(Some(pa), pb),
        ]);
    }
    table(out, &rows, 1);
}

/// Two decimals, and below 0.1 three significant digits, so that a small ratio never reads 0.00.
fn ratio_text(r: Option<f64>) -> String {
    let Some(r) = r else {
        return "-".to_string();
    };
    let magnitude = if r > 0.0 { r.log10().floor() as i32 } else { 0 };
    let places = (2 - magnitude).max(2) as usize;
    format!("{r:.places$}")
}

fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// Columns aligned: the first `left` left-aligned, the rest right-aligned, two spaces apart.
fn table(out: &mut String, rows: &[Vec<String>], left: usize) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let _ = if c < left {
                write!(line, "{cell:<width$}", width = widths[c])
            } else {
                write!(line, "{cell:>width$}", width = widths[c])
            };
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CountMap, CountSummary, Map, Report, Summary};
    use crate::runs::compare::compare;

    #[test]
    fn counts_and_their_ratio_in_aligned_columns() {
        let report = |entries: &[(&str, u64)]| Report {
            time: None,
            maps: vec![Map::Count(CountMap {
                name: "@".into(),
                entries: entries.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            })],
            summary: Summary::Count(CountSummary::default()),
            environment: None,
        };
        let (mut a, mut b) = (
            report(&[("synchronize_rcu", 20), ("call_rcu", 0)]),
            report(&[("synchronize_rcu", 25), ("call_rcu", 7)]),
        );
        for (run, secs) in [(&mut a, 5.0), (&mut b, 2.5)] {
            run.summary = Summary::Count(CountSummary {
                elapsed: std::time::Duration::from_secs_f64(secs),
                ..CountSummary::default()
            });
        }
        assert_eq!(
            comparison(&compare(&a, &b), "a.json", "b.json"),
            "A: a.json\nB: b.json\n\n\
             Environment: not recorded in A and B\n\
             \n\
             @                   A   B   B/A\n  \
               call_rcu          0   7     -\n  \
               synchronize_rcu  20  25  1.25\n\
             \n\
             Over the window     A     B    B/A\n  \
               seconds        5.00  2.50  0.500\n"
        );
    }

    #[test]
    fn the_environment_says_what_differs_first() {
        let mut out = String::new();
        environment(
            &mut out,
            &EnvironmentDifference::Differs(vec![
                ("rcu_expedited".into(), Some("0".into()), Some("1".into())),
                ("HZ".into(), None, Some("250".into())),
            ]),
        );
        assert_eq!(
            out,
            "Environment, what differs  A    B\n  \
               rcu_expedited            0    1\n  \
               HZ                       -  250\n"
        );
        let mut out = String::new();
        environment(&mut out, &EnvironmentDifference::Differs(Vec::new()));
        assert_eq!(out, "Environment: the same\n");
    }

    #[test]
    fn both_bars_on_one_row_to_one_scale() {
        let mut ca = vec![0; 65];
        let mut cb = vec![0; 65];
        ca[4] = 26;
        cb[6] = 52;
        let rows = bucket_rows(&Buckets::Log2(ca), &Buckets::Log2(cb));
        assert_eq!(
            rows,
            [
                ("[4, 8)".to_string(), 26, 0),
                ("[8, 16)".into(), 0, 0),
                ("[16, 32)".into(), 0, 52)
            ]
        );
        assert_eq!(bar(26, 52).len(), 13);
        assert_eq!(bar(52, 52).len(), 26);
        assert_eq!(bar(0, 0), "");
    }

    #[test]
    fn small_ratios_keep_three_digits() {
        let shown: Vec<String> = [
            Some(1.0),
            Some(12.345),
            Some(0.152),
            Some(0.004791),
            Some(0.0),
            None,
        ]
        .into_iter()
        .map(ratio_text)
        .collect();
        assert_eq!(shown, ["1.00", "12.35", "0.152", "0.00479", "0.00", "-"]);
    }

    #[test]
    fn exact_percentiles_compare_as_exact_values() {
        let series = |exact: bool, p50: f64| SeriesStats {
            key: None,
            count: 20,
            min_ns: Some(11_718_555),
            max_ns: Some(17_463_122),
            mean_ns: Some(15_517_000.0),
            percentiles: vec![(0.5, p50)],
            percentiles_exact: exact,
        };
        let mut out = String::new();
        statistics(
            &mut out,
            "@srlat",
            &series(true, 15_925_123.0),
            &series(false, 15_925_123.0),
            Unit::Ms,
        );
        let p50: Vec<&str> = out
            .lines()
            .find(|l| l.trim_start().starts_with("p50"))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            p50,
            ["p50", "15.925123", "ms", "15.925", "ms", "1.00"],
            "{out}"
        );
    }
}
