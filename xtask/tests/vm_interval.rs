//! `--interval`: the periods of one window add up to its ground truth, read while the probes
//! keep running. membarrier(MEMBARRIER_CMD_GLOBAL) calls synchronize_rcu() exactly once per
//! call, so one process making bursts of calls spread over several intervals gives an exact
//! total to compare the sum against: selected by `--pid`, or by its name with `--by comm`
//! (an earlier run's deferred teardown also calls synchronize_rcu(), from a kworker).

mod support;

use rcutrace_common::records::{MapValue, Record};
use support::{boot, run_named, sections};

const BURSTS: u64 = 5;
const PER_BURST: u64 = 10;
const CALLS: u64 = BURSTS * PER_BURST;

/// `HH:MM:SS`, as bpftrace's time() prints it.
fn is_time(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() == 8
        && b[2] == b':'
        && b[5] == b':'
        && line
            .split(':')
            .all(|p| p.len() == 2 && p.bytes().all(|c| c.is_ascii_digit()))
}

/// The text output cut at each time line: one string per interval.
fn text_intervals(out: &str) -> Vec<String> {
    let mut intervals: Vec<String> = Vec::new();
    for line in out.lines() {
        if is_time(line) {
            intervals.push(String::new());
        } else if let Some(current) = intervals.last_mut() {
            current.push_str(line);
            current.push('\n');
        }
    }
    intervals
}

/// `@srlat count N` of one interval's text.
fn srlat_count(interval: &str) -> u64 {
    let line = interval
        .lines()
        .find(|l| l.starts_with("@srlat count "))
        .unwrap_or_else(|| panic!("no @srlat count in {interval}"));
    line["@srlat count ".len()..]
        .split(',')
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn intervals_add_up(series: &str) {
    let work = format!("/bin/rcu-workload bursts {BURSTS} {PER_BURST} 700");
    let script = format!(
        "traced srlat 'srlat --secs 0 --interval 1 --pid WPID' '{work}'\n\
         traced cumulative 'srlat --secs 0 --interval 1 --cumulative --pid WPID' '{work}'\n\
         traced count 'count --secs 0 --interval 1 --by comm -f json' '{work}'\n"
    );
    let guest = boot(series, &script);
    let sections = sections(&guest.stdout);

    // Per interval: the counts of the intervals add up to every call, and the calls really
    // were spread over several intervals.
    let srlat = run_named(&sections, "srlat");
    srlat.assert_ok("srlat");
    let counts: Vec<u64> = text_intervals(&srlat.out)
        .iter()
        .map(|i| srlat_count(i))
        .collect();
    assert!(counts.len() >= 3, "{series}: {counts:?}\n{}", srlat.out);
    assert!(
        counts.iter().filter(|&&n| n > 0).count() >= 2,
        "{series}: {counts:?}"
    );
    assert_eq!(
        counts.iter().sum::<u64>(),
        CALLS,
        "{series}: {counts:?}\n{}\n{}\n{}",
        srlat.out,
        srlat.err,
        srlat.work
    );
    // Each interval's histogram holds exactly its own samples.
    for interval in text_intervals(&srlat.out) {
        let rows: u64 = interval
            .lines()
            .filter(|l| l.starts_with('[') && l.ends_with('|'))
            .map(|l| {
                l[16..]
                    .split(" |")
                    .next()
                    .unwrap()
                    .trim()
                    .parse::<u64>()
                    .unwrap()
            })
            .sum();
        assert_eq!(rows, srlat_count(&interval), "{series}: {interval}");
    }

    // --cumulative: each report holds everything so far; the last one every call.
    let cumulative = run_named(&sections, "cumulative");
    cumulative.assert_ok("cumulative");
    let totals: Vec<u64> = text_intervals(&cumulative.out)
        .iter()
        .map(|i| srlat_count(i))
        .collect();
    assert!(totals.len() >= 3, "{series}: {totals:?}");
    assert!(totals.windows(2).all(|w| w[0] <= w[1]), "{totals:?}");
    assert_eq!(totals.last().copied(), Some(CALLS), "{series}: {totals:?}");

    // -f json: a time record opens each interval; the workload's synchronize_rcu() in the
    // keyed map, over the intervals, adds up to every call.
    let count = run_named(&sections, "count");
    count.assert_ok("count");
    let records: Vec<Record> = count
        .out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let mut intervals: Vec<u64> = Vec::new();
    for record in &records {
        match record {
            Record::Time(time) => {
                assert!(time.ends_with('\n') && is_time(time.trim_end()), "{time:?}");
                intervals.push(0);
            }
            Record::Map(maps) => {
                let Some(MapValue::Keyed(counts)) = maps.get("@") else {
                    panic!("no @ map: {record:?}");
                };
                let current = intervals.last_mut().expect("a map before any time record");
                *current += counts
                    .get("rcu-workload, synchronize_rcu")
                    .copied()
                    .unwrap_or(0);
            }
            _ => {}
        }
    }
    assert!(intervals.len() >= 3, "{series}: {}", count.out);
    assert_eq!(
        intervals.iter().sum::<u64>(),
        CALLS,
        "{series}: {intervals:?}\n{}",
        count.out
    );
    let environments = records
        .iter()
        .filter(|r| matches!(r, Record::Environment(_)))
        .count();
    assert_eq!(environments, 1, "{}", count.out);
    let summaries = records
        .iter()
        .filter(|r| matches!(r, Record::CountSummary(_)))
        .count();
    assert_eq!(summaries, intervals.len(), "{}", count.out);
}

#[test]
fn intervals_add_up_on_6_12() {
    intervals_add_up("6.12");
}

#[test]
fn intervals_add_up_on_7_3() {
    intervals_add_up("7.3");
}

#[test]
fn intervals_add_up_on_6_1() {
    intervals_add_up("6.1");
}
