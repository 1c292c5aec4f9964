//! This run's table against the one it replaces in BENCHMARKS.md: whether two full runs agree.
//! Absolute figures move with the host's speed, which differs from one run to the next under
//! emulation; the ratios between rcutrace and bpftrace, measured side by side in one guest,
//! should not.

use std::fmt::Write as _;

/// How far apart two runs' ratios may be and still agree.
pub const AGREE_WITHIN_PCT: f64 = 20.0;

/// One row of a rendered table: its label, rcutrace's figure and the ratio, where present.
#[derive(Debug, PartialEq)]
struct Row<'a> {
    label: &'a str,
    rcutrace: Option<f64>,
    ratio: Option<f64>,
}

/// The rows of the table in a BENCHMARKS.md (or of a table alone), in order.
fn rows(md: &str) -> Vec<Row<'_>> {
    md.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line
                .strip_prefix('|')?
                .strip_suffix('|')?
                .split('|')
                .map(str::trim)
                .collect();
            // label, no tracer, empty program, rcutrace, bpftrace, ratio, target, met
            let [label, _, _, rcutrace, _, ratio, _, _] = cells.as_slice() else {
                return None;
            };
            let number = |cell: &str| cell.parse::<f64>().ok();
            (!label.starts_with("Median") && !label.starts_with("---")).then(|| Row {
                label,
                rcutrace: number(rcutrace),
                ratio: number(ratio),
            })
        })
        .collect()
}

/// The value of a `- Key: value` line of the file's header.
fn header<'a>(md: &'a str, key: &str) -> Option<&'a str> {
    md.lines().find_map(|line| {
        line.strip_prefix("- ")?
            .strip_prefix(key)?
            .strip_prefix(": ")
    })
}

/// The kernel's series and the guest's shape (`6.12`, `(Debian), 2 CPUs, ...`) from the
/// `Kernel` line: runs on two releases of one series compare, on two CPU counts not.
fn machine(md: &str) -> Option<(String, &str)> {
    let kernel = header(md, "Kernel")?.strip_prefix('`')?;
    let (release, shape) = kernel.split_once('`')?;
    Some((crate::document::series(release)?, shape))
}

/// How far `now` is from `before`, in % of `before`; `None` when `before` is 0 and `now` not.
fn apart_pct(before: f64, now: f64) -> Option<f64> {
    if before == 0.0 {
        return (now == 0.0).then_some(0.0);
    }
    Some(((now - before) / before).abs() * 100.0)
}

/// The section comparing this run's table with the one it replaces, or `None` when there is
/// nothing to compare with: no earlier table, or one from another kernel series or guest.
pub fn against(previous_md: &str, current_md: &str) -> Option<String> {
    if machine(previous_md)? != machine(current_md)? {
        return None;
    }
    let before = rows(previous_md);
    let now = rows(current_md);
    // (row before, row now, ratio before, ratio now), for the rows with a ratio in both.
    let compared: Vec<(&Row, &Row, f64, f64)> = now
        .iter()
        .filter_map(|now| {
            let then = before.iter().find(|b| b.label == now.label)?;
            Some((then, now, then.ratio?, now.ratio?))
        })
        .collect();
    if compared.is_empty() {
        return None;
    }
    let date = header(previous_md, "Date").unwrap_or("?");
    let mut out = format!(
        "\n### Against the previous full run\n\n\
         This run's ratios beside those of the table it replaced (date: {date}), on the same \
         kernel. The ratios are measured side by side in one guest, so the host's speed, which \
         differs between runs under emulation, cancels out of them; rcutrace's own figures \
         move with it, and are shown for that.\n\n\
         | Row | rcutrace / bpftrace, before | now | apart (%) | rcutrace, before | now | apart (%) |\n\
         |---|--:|--:|--:|--:|--:|--:|\n"
    );
    let mut disagree = Vec::new();
    for &(then, now, r0, r1) in &compared {
        let ratio_apart = apart_pct(r0, r1);
        if ratio_apart.is_none_or(|apart| apart > AGREE_WITHIN_PCT) {
            disagree.push(now.label);
        }
        let percent = |apart: Option<f64>| apart.map_or("∞".into(), |a| format!("{a:.0}"));
        let figure = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        let figure_apart = match (then.rcutrace, now.rcutrace) {
            (Some(a), Some(b)) => percent(apart_pct(a, b)),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "| {} | {r0:.3} | {r1:.3} | {} | {} | {} | {figure_apart} |",
            now.label,
            percent(ratio_apart),
            figure(then.rcutrace),
            figure(now.rcutrace),
        );
    }
    let _ = write!(
        out,
        "\n{} of {} ratios agree with the previous run's within {AGREE_WITHIN_PCT:.0} %",
        compared.len() - disagree.len(),
        compared.len()
    );
    if disagree.is_empty() {
        out.push_str(".\n");
    } else {
        let _ = writeln!(out, "; not: {}.", disagree.join("; "));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "`6.12.117+deb12-cloud-amd64` (Debian), 2 CPUs";

    fn file(date: &str, rows: &str) -> String {
        on(KERNEL, date, rows)
    }

    fn on(kernel: &str, date: &str, rows: &str) -> String {
        format!(
            "# Benchmarks\n\n- Kernel: {kernel}\n- Date: {date}; whole guest run 1872 s\n\n\
             | Median of 5 runs | no tracer | empty program | rcutrace | bpftrace | rcutrace / bpftrace | target | met |\n\
             |---|--:|--:|--:|--:|--:|:-:|:-:|\n{rows}\nTargets:\n\n- a line | with | bars\n"
        )
    }

    #[test]
    fn reads_each_row_of_a_table() {
        let md = file(
            "2026-12-01",
            "| `getppid()` call (ns) | 913.4 | 3278.2 | 3951.3 | 3825.6 |  |  |  |\n\
             | Start-up to attached, count (ms) |  |  | 998 | 2830 | 0.353 | ≤ 0.15 | **no** |\n",
        );
        assert_eq!(
            rows(&md),
            vec![
                Row {
                    label: "`getppid()` call (ns)",
                    rcutrace: Some(3951.3),
                    ratio: None
                },
                Row {
                    label: "Start-up to attached, count (ms)",
                    rcutrace: Some(998.0),
                    ratio: Some(0.353)
                },
            ]
        );
        assert_eq!(
            header(&md, "Date"),
            Some("2026-12-01; whole guest run 1872 s")
        );
    }

    #[test]
    fn compares_the_ratios_both_runs_have() {
        let before = file(
            "2026-11-30",
            "| A (ns) |  |  | 100 | 200 | 0.500 |  |  |\n\
             | B (ns) |  |  | 100 | 100 | 1.000 |  |  |\n\
             | C (ns) |  |  | 7 |  |  |  |  |\n\
             | Gone (ns) |  |  | 1 | 1 | 1.000 |  |  |\n",
        );
        let now = file(
            "2026-12-01",
            "| A (ns) |  |  | 150 | 290 | 0.517 |  |  |\n\
             | B (ns) |  |  | 130 | 100 | 1.300 |  |  |\n\
             | C (ns) |  |  | 8 |  |  |  |  |\n\
             | New (ns) |  |  | 1 | 1 | 1.000 |  |  |\n",
        );
        let section = against(&before, &now).unwrap();
        assert!(
            section.contains("(date: 2026-11-30; whole guest run 1872 s)"),
            "{section}"
        );
        assert!(
            section.contains("| A (ns) | 0.500 | 0.517 | 3 | 100 | 150 | 50 |"),
            "{section}"
        );
        assert!(
            section.contains("| B (ns) | 1.000 | 1.300 | 30 | 100 | 130 | 30 |"),
            "{section}"
        );
        assert!(
            !section.contains("| C (ns)") && !section.contains("Gone") && !section.contains("New")
        );
        assert!(
            section
                .contains("1 of 2 ratios agree with the previous run's within 20 %; not: B (ns)."),
            "{section}"
        );
    }

    #[test]
    fn zeros_agree_with_zeros_only() {
        assert_eq!(apart_pct(0.0, 0.0), Some(0.0));
        assert_eq!(apart_pct(0.0, 1.0), None);
        assert_eq!(apart_pct(2.0, 3.0), Some(50.0));
        let before = file("d", "| Z (ms) |  |  | 0 | 30 | 0.000 |  |  |\n");
        let now = file("d", "| Z (ms) |  |  | 1 | 30 | 0.033 |  |  |\n");
        let section = against(&before, &now).unwrap();
        assert!(
            section.contains("| Z (ms) | 0.000 | 0.033 | ∞ | 0 | 1 | ∞ |"),
            "{section}"
        );
        assert!(section.contains("0 of 1 ratios agree"), "{section}");
        assert!(against(&before, &before).unwrap().contains("| 0 | 0 | 0 |"));
    }

    #[test]
    fn nothing_to_compare_with_another_kernel_or_no_file() {
        let row = "| A (ns) |  |  | 100 | 200 | 0.500 |  |  |\n";
        let md = file("2026-12-01", row);
        let other = on("`6.1.0-57-cloud-amd64` (Debian), 2 CPUs", "2026-12-01", row);
        assert!(against(&other, &md).is_none());
        assert!(against("", &md).is_none());
        assert!(against(&md, &md).unwrap().contains("1 of 1 ratios agree"));
        // Another release of the series compares; another guest shape does not.
        let update = on(
            "`6.12.118+deb12-cloud-amd64` (Debian), 2 CPUs",
            "2026-12-04",
            row,
        );
        assert!(against(&md, &update).is_some());
        let wider = on(
            "`6.12.118+deb12-cloud-amd64` (Debian), 64 CPUs",
            "2026-12-04",
            row,
        );
        assert!(against(&md, &wider).is_none());
    }
}
