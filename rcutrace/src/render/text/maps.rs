//! Maps and histograms exactly as bpftrace 0.17 prints them, and its banner: bpftrace's
//! formats, kept apart from rcutrace's own lines.

use std::fmt::Write as _;

use rcutrace_common::hist::{Linear, SlotBounds, log2_bounds, sparse_bounds};

use crate::model::{
    Buckets, CountMap, HistMap, Map, Unit, maps_in_order, shown_slots, sparse_in_order,
};

const BAR_WIDTH: f32 = 52.0;

/// The line bpftrace prints once its probes are attached.
pub fn banner(probes: usize) -> String {
    let plural = if probes == 1 { "probe" } else { "probes" };
    format!("Attaching {probes} {plural}...\n")
}

/// All maps, ordered by name as bytes (`@` included).
pub(super) fn maps(maps: &[Map], unit_of: &dyn Fn(&str) -> Option<Unit>) -> String {
    let mut out = String::new();
    for map in maps_in_order(maps) {
        match map {
            Map::Count(m) => count_map(&mut out, m),
            Map::Hist(h) => hist_map(&mut out, h, unit_of(&h.name)),
            Map::Scalar(s) => {
                let _ = writeln!(out, "{}: {}", s.name, s.value);
            }
        }
    }
    out
}

/// bpftrace prints a map that was never written as one empty line.
const EMPTY_MAP: &str = "\n";

fn count_map(out: &mut String, map: &CountMap) {
    if map.entries.is_empty() {
        out.push_str(EMPTY_MAP);
    }
    for (key, value) in map.entries_in_order() {
        let _ = writeln!(out, "{}[{key}]: {value}", map.name);
    }
}

fn hist_map(out: &mut String, map: &HistMap, unit: Option<Unit>) {
    if map.is_empty() {
        out.push_str(EMPTY_MAP);
        return;
    }
    match &map.key {
        Some(key) => {
            let _ = writeln!(out, "{}[{key}]: ", map.name);
        }
        None => {
            let _ = writeln!(out, "{}: ", map.name);
        }
    }
    match &map.buckets {
        Buckets::Log2(counts) => rows(out, counts, log2_label),
        Buckets::Linear(linear, counts) => rows(out, counts, |slot| linear_label(linear, slot)),
        Buckets::Sparse { step, buckets } => {
            for (bucket, count) in sparse_in_order(buckets) {
                if let SlotBounds::Range { low, high } = sparse_bounds(bucket, *step) {
                    let unit = unit.map_or(String::new(), |u| format!(" {}", u.suffix()));
                    let _ = writeln!(out, "[{low}, {high}){unit}: {count}");
                }
            }
        }
    }
    out.push('\n');
}

/// Rows from the first to the last non-empty slot; bars relative to the largest count.
fn rows(out: &mut String, counts: &[u64], label: impl Fn(usize) -> String) {
    let max = counts.iter().copied().max().unwrap_or(0);
    for (slot, count) in shown_slots(counts) {
        let _ = writeln!(
            out,
            "{:<16}{:>8} |{:<52}|",
            label(slot),
            count,
            "@".repeat(bar_width(count, max))
        );
    }
}

/// bpftrace computes the bar in single precision; f64 gives different widths (26 vs 15).
fn bar_width(count: u64, max: u64) -> usize {
    if max == 0 {
        return 0;
    }
    (count as f32 / max as f32 * BAR_WIDTH) as usize
}

/// A power of two with bpftrace's binary suffixes: 1K, 512K, 4G, 8E.
fn power_of_two(value: u64) -> String {
    const SUFFIXES: [&str; 7] = ["", "K", "M", "G", "T", "P", "E"];
    let power = value.max(1).ilog2();
    format!(
        "{}{}",
        1u64 << (power % 10),
        SUFFIXES[(power / 10) as usize]
    )
}

pub(in crate::render) fn log2_label(slot: usize) -> String {
    match log2_bounds(slot as u32) {
        SlotBounds::Below(bound) => format!("(..., {bound})"),
        // 0 and 1 have a slot each.
        SlotBounds::Range { low, high } if high == low + 1 => format!("[{low}]"),
        SlotBounds::Range { low, high } => {
            format!("[{}, {})", power_of_two(low), power_of_two(high))
        }
        SlotBounds::From(bound) => format!("[{}, ...)", power_of_two(bound)),
    }
}

/// Linear bounds print with K/M suffixes only when the step is a multiple of 1024.
fn linear_number(value: u64, step: u64) -> String {
    if step.is_multiple_of(1024) && value != 0 {
        if value.is_multiple_of(1 << 20) {
            return format!("{}M", value >> 20);
        }
        if value.is_multiple_of(1024) {
            return format!("{}K", value >> 10);
        }
    }
    value.to_string()
}

pub(in crate::render) fn linear_label(linear: &Linear, slot: usize) -> String {
    let number = |v| linear_number(v, linear.step);
    match linear.bounds(slot as u64) {
        SlotBounds::Below(bound) => format!("(..., {})", number(bound)),
        SlotBounds::Range { low, high } => format!("[{}, {})", number(low), number(high)),
        SlotBounds::From(bound) => format!("[{}, ...)", number(bound)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LatencySummary, Report, Summary};
    use rcutrace_common::hist::{LOG2_SLOTS, log2_slot};

    fn log2_of(values: &[i64]) -> Vec<u64> {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        for &v in values {
            counts[log2_slot(v) as usize] += 1;
        }
        counts
    }

    fn hist(name: &str, buckets: Buckets) -> String {
        let mut out = String::new();
        hist_map(
            &mut out,
            &HistMap {
                name: name.into(),
                key: None,
                buckets,
            },
            None,
        );
        out
    }

    const FULL: &str = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@";
    const HALF: &str = "@@@@@@@@@@@@@@@@@@@@@@@@@@                          ";
    const NONE: &str = "                                                    ";

    #[test]
    fn log2_vector() {
        let expected = format!(
            "@: \n\
             (..., 0)               1 |{HALF}|\n\
             [0]                    0 |{NONE}|\n\
             [1]                    0 |{NONE}|\n\
             [2, 4)                 2 |{FULL}|\n\
             [4, 8)                 1 |{HALF}|\n\
             [8, 16)                0 |{NONE}|\n\
             [16, 32)               1 |{HALF}|\n\
             \n"
        );
        assert_eq!(
            hist("@", Buckets::Log2(log2_of(&[-1, 2, 3, 7, 20]))),
            expected
        );
    }

    #[test]
    fn linear_vector() {
        let linear = Linear {
            min: 0,
            max: 10,
            step: 2,
        };
        let mut counts = vec![0; linear.buckets() as usize + 2];
        for v in [2i64, 3, 7, -1, 11] {
            let slot = if v < 0 { 0 } else { linear.slot(v as u64) };
            counts[slot as usize] += 1;
        }
        let expected = format!(
            "@: \n\
             (..., 0)               1 |{HALF}|\n\
             [0, 2)                 0 |{NONE}|\n\
             [2, 4)                 2 |{FULL}|\n\
             [4, 6)                 0 |{NONE}|\n\
             [6, 8)                 1 |{HALF}|\n\
             [8, 10)                0 |{NONE}|\n\
             [10, ...)              1 |{HALF}|\n\
             \n"
        );
        assert_eq!(hist("@", Buckets::Linear(linear, counts)), expected);
    }

    #[test]
    fn bars_use_single_precision() {
        let mut counts = vec![0; LOG2_SLOTS as usize];
        counts[4] = 26;
        counts[5] = 15;
        let expected = format!(
            "@h: \n\
             [4, 8)                26 |{FULL}|\n\
             [8, 16)               15 |{:<52}|\n\
             \n",
            "@".repeat(30)
        );
        assert_eq!(hist("@h", Buckets::Log2(counts)), expected);
        assert_eq!(bar_width(15, 26), 30);
    }

    #[test]
    fn whole_run_vector() {
        let mut h = vec![0; LOG2_SLOTS as usize];
        h[log2_slot(5) as usize] = 1;
        let mut hk1 = vec![0; LOG2_SLOTS as usize];
        hk1[log2_slot(1) as usize] = 1;
        let mut hk2 = vec![0; LOG2_SLOTS as usize];
        hk2[log2_slot(100) as usize] = 1;
        hk2[log2_slot(200) as usize] = 1;
        let all = vec![
            Map::Hist(HistMap {
                name: "@hk".into(),
                key: Some("2".into()),
                buckets: Buckets::Log2(hk2),
            }),
            Map::Count(CountMap {
                name: "@a".into(),
                entries: vec![("y".into(), 2), ("x".into(), 1)],
            }),
            Map::Hist(HistMap {
                name: "@h".into(),
                key: None,
                buckets: Buckets::Log2(h),
            }),
            Map::Hist(HistMap {
                name: "@hk".into(),
                key: Some("1".into()),
                buckets: Buckets::Log2(hk1),
            }),
        ];
        let out = banner(1) + "\n\n" + &maps(&all, &|_| None);
        let expected = format!(
            "Attaching 1 probe...\n\
             \n\
             \n\
             @a[x]: 1\n\
             @a[y]: 2\n\
             @h: \n\
             [4, 8)                 1 |{FULL}|\n\
             \n\
             @hk[1]: \n\
             [1]                    1 |{FULL}|\n\
             \n\
             @hk[2]: \n\
             [64, 128)              1 |{FULL}|\n\
             [128, 256)             1 |{FULL}|\n\
             \n"
        );
        assert_eq!(out, expected);
    }

    #[test]
    fn count_ties_sort_by_key() {
        let mut out = String::new();
        count_map(
            &mut out,
            &CountMap {
                name: "@".into(),
                entries: vec![("b".into(), 3), ("c".into(), 1), ("a".into(), 3)],
            },
        );
        assert_eq!(out, "@[c]: 1\n@[a]: 3\n@[b]: 3\n");
    }

    #[test]
    fn labels_at_the_edges() {
        assert_eq!(log2_label(11), "[512, 1K)");
        assert_eq!(log2_label(12), "[1K, 2K)");
        assert_eq!(log2_label(21), "[512K, 1M)");
        assert_eq!(log2_label(33), "[2G, 4G)");
        assert_eq!(log2_label(34), "[4G, 8G)");
        assert_eq!(log2_label(64), "[4E, 8E)");
        let kib = Linear {
            min: 0,
            max: 4096,
            step: 1024,
        };
        assert_eq!(linear_label(&kib, 1), "[0, 1K)");
        assert_eq!(linear_label(&kib, 2), "[1K, 2K)");
        assert_eq!(linear_label(&kib, 5), "[4K, ...)");
        let mib = Linear {
            min: 1 << 20,
            max: 3 << 20,
            step: 1 << 20,
        };
        assert_eq!(linear_label(&mib, 0), "(..., 1M)");
        assert_eq!(linear_label(&mib, 2), "[2M, 3M)");
        // A step that is not a multiple of 1024 never abbreviates (bpftrace 0.17 could).
        let plain = Linear {
            min: 0,
            max: 1_250_000,
            step: 5_000,
        };
        assert_eq!(linear_label(&plain, 126), "[625000, 630000)");
    }

    #[test]
    fn long_labels_and_counts_push_the_row() {
        let linear = Linear {
            min: 1_000_000_000_000,
            max: 1_000_000_000_010,
            step: 10,
        };
        let counts = vec![0, 123_456_789_012, 0];
        let out = hist("@", Buckets::Linear(linear, counts));
        assert!(
            out.contains("[1000000000000, 1000000000010)123456789012 |"),
            "{out}"
        );
    }

    #[test]
    fn sparse_buckets_print_every_non_empty_bucket_ascending() {
        let out = hist(
            "@srlat",
            Buckets::Sparse {
                step: 100,
                buckets: vec![(2, 4), (1, 20), (70, 1)],
            },
        );
        assert_eq!(
            out,
            "@srlat: \n[100, 200): 20\n[200, 300): 4\n[7000, 7100): 1\n\n"
        );
        // `--buckets 3`: each row with its unit.
        let report = Report {
            time: None,
            maps: vec![Map::Hist(HistMap {
                name: "@srlat".into(),
                key: None,
                buckets: Buckets::Sparse {
                    step: 3,
                    buckets: vec![(3, 2)],
                },
            })],
            summary: Summary::Latency(vec![LatencySummary {
                map_name: "@srlat".into(),
                unit: Unit::Ms,
                series: Vec::new(),
                percentile_error: 0.0,
                losses: crate::model::Losses::default(),
                stages: None,
                cross_checks: Vec::new(),
                grace_periods: Vec::new(),
            }]),
            environment: None,
        };
        assert!(
            super::super::report(&report).contains("\n@srlat: \n[9, 12) ms: 2\n"),
            "{}",
            super::super::report(&report)
        );
    }

    /// bpftrace 0.17 prints a map it never wrote as an empty line: no header, no rows.
    #[test]
    fn empty_maps_print_as_bpftrace_prints_them() {
        assert_eq!(hist("@x", Buckets::Log2(vec![0; 65])), "\n");
        let linear = Linear {
            min: 0,
            max: 10,
            step: 5,
        };
        assert_eq!(hist("@x", Buckets::Linear(linear, vec![0; 4])), "\n");
        let sparse = Buckets::Sparse {
            step: 10,
            buckets: vec![],
        };
        assert_eq!(hist("@x", sparse), "\n");
        let mut out = String::new();
        count_map(
            &mut out,
            &CountMap {
                name: "@".into(),
                entries: vec![],
            },
        );
        assert_eq!(out, "\n");
    }
}
