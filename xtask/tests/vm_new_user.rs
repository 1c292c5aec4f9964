//! What a new user tripped over, in 6.1, 6.12 and 7.3 guests, each scenario as it was met: a
//! `--save` path that cannot be written (refused before tracing) or that fails at the end
//! (results printed all the same); `callbacks` interrupted half a second in, whose totals must
//! be the sums of their columns; `report` of `--interval` runs; and `report` of files that
//! are not one whole run, or of two runs of different commands; messages that misled (an
//! absent `--func`, `serve`'s options and announcement, 6.1's summary line); and numbers that
//! looked wrong (percentiles of few samples, `--buckets` rows, the callbacks table's digits).

mod support;

use std::collections::HashMap;

use rcutrace_common::records::{CallbacksSummary, MapValue, Record};
use support::{Run, boot, run_named, sections};

/// Shell functions beside the prelude's `traced`: `interrupted NAME SECONDS ARGS...` runs
/// rcutrace and sends it SIGINT SECONDS after its banner; `plain NAME ARGS...` runs it to its
/// end. Both print `=== NAME.*` sections as `traced` does.
const HELPERS: &str = r#"
show() {
    echo "=== $1.out"; cat /tmp/$1.out
    echo "=== $1.err"; cat /tmp/$1.err
    echo "=== $1.work"
    echo "=== $1.status"; echo "$2 0"
}
interrupted() {
    name=$1; delay=$2; shift 2
    /bin/rcutrace "$@" >/tmp/$name.out 2>/tmp/$name.err &
    pid=$!
    i=0
    while ! grep -q -e '^Attaching' -e '"attached_probes"' /tmp/$name.out 2>/dev/null && kill -0 $pid 2>/dev/null && [ $i -lt 600 ]; do
        sleep 0.1; i=$((i + 1))
    done
    sleep $delay
    kill -INT $pid
    wait $pid
    show $name $?
}
plain() {
    name=$1; shift
    /bin/rcutrace "$@" >/tmp/$name.out 2>/tmp/$name.err
    show $name $?
}
"#;

fn all_sections(series: &str, script: &str) -> HashMap<String, String> {
    sections(&boot(series, &format!("{HELPERS}\n{script}")).stdout)
}

fn records(run: &Run) -> Vec<Record> {
    run.records()
}

/// The `callbacks` table's columns QUEUED, INVOKED, PENDING and BEFORE, added up over its rows.
fn column_sums(text: &str) -> [u64; 4] {
    let mut sums = [0; 4];
    for line in text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("FUNCTION "))
        .skip(1)
        .take_while(|l| !l.starts_with("  all rows: ") && !l.starts_with("  ... "))
    {
        let cells: Vec<&str> = line.split_whitespace().collect();
        for (sum, cell) in sums.iter_mut().zip(&cells[2..6]) {
            *sum += cell.parse::<u64>().unwrap_or_else(|_| panic!("{line}"));
        }
    }
    sums
}

/// `  all rows: Q queued, I invoked, P pending, B before`.
fn total_line(text: &str) -> [u64; 4] {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("  all rows: "))
        .unwrap_or_else(|| panic!("no total line:\n{text}"));
    let numbers: Vec<u64> = line
        .split(", ")
        .map(|part| part.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    numbers.try_into().unwrap()
}

fn callbacks_summary(records: &[Record]) -> &CallbacksSummary {
    records
        .iter()
        .find_map(|r| match r {
            Record::CallbacksSummary(s) => Some(s),
            _ => None,
        })
        .expect("a callbacks summary")
}

fn per_cpu_sum(records: &[Record], name: &str) -> u64 {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Map(maps) => maps.get(name),
            _ => None,
        })
        .map(|m| match m {
            MapValue::Keyed(keys) => keys.0.iter().map(|(_, n)| n).sum(),
            MapValue::Scalar(n) => *n,
        })
        .sum()
}

fn lost_and_wrong(series: &str) {
    let script = "\
plain cbfirst callbacks --secs 5 -f json
/bin/rcu-workload background >/dev/null 2>&1 &
sleep 2
plain badpath count --secs 1 --save /nonexistent/dir/x.json
plain proc count --secs 1 --save /proc/version
mkdir -p /mnt/small && mount -t tmpfs -o size=8k tmpfs /mnt/small
dd if=/dev/zero of=/mnt/small/fill bs=1k count=8 2>/dev/null
plain full count --secs 1 --save /mnt/small/x.json
interrupted cbtext 0.5 callbacks --secs 0 --top 0
interrupted cbcpu 0.5 callbacks --secs 0 --top 0 --by cpu -f json
interrupted cbtop 0.5 callbacks --secs 0 --top 2 --by cpu --save /tmp/cbtop.json
plain cbcompare report /tmp/cbtop.json /tmp/cbtop.json
";
    let parts = all_sections(series, script);

    // 0. The first callbacks run after boot, in the idle guest: its own doing left out.
    support::assert_own_callbacks_left_out("cbfirst", &run_named(&parts, "cbfirst"));

    // 1. Refused before anything is attached: no banner, status 2, what is accepted.
    for name in ["badpath", "proc"] {
        let run = run_named(&parts, name);
        assert_eq!(run.rcutrace_status, 2, "{name}: {}", run.err);
        assert!(run.out.is_empty(), "{name}: {}", run.out);
        assert!(run.err.contains("cannot be written"), "{name}: {}", run.err);
        assert!(
            run.err.contains("can be created or overwritten"),
            "{name}: {}",
            run.err
        );
    }
    // A disk that fills during the run: the results are printed, then the failure, status 1.
    let full = run_named(&parts, "full");
    assert_eq!(full.rcutrace_status, 1, "{}\n{}", full.out, full.err);
    assert!(full.out.contains("\n@[synchronize_rcu]: "), "{}", full.out);
    assert!(full.out.contains("\nOver "), "{}", full.out);
    assert!(
        full.err
            .contains("rcutrace: error: saving the run to /mnt/small/x.json"),
        "{}",
        full.err
    );
    assert!(full.err.contains("No space left on device"), "{}", full.err);

    // 2. Interrupted half a second in: the invocations seen were mostly of callbacks queued
    // before tracing (BEFORE); the total line adds up the columns and names them apart.
    let text = run_named(&parts, "cbtext");
    text.assert_ok("cbtext");
    let columns = column_sums(&text.out);
    assert_eq!(total_line(&text.out), columns, "{}", text.out);
    // (Usually some of them were queued before tracing; on a loaded host the attach can take
    // long enough that none were, and the sums must hold either way.)
    let cpu = run_named(&parts, "cbcpu");
    cpu.assert_ok("cbcpu");
    let records = records(&cpu);
    let s = callbacks_summary(&records);
    let sum = |f: fn(&rcutrace_common::records::CallbackRow) -> u64| -> u64 {
        s.rows.iter().map(f).sum()
    };
    assert_eq!(
        [
            s.queued,
            s.invoked,
            s.pending_at_exit,
            s.not_timed.queued_before_tracing
        ],
        [
            sum(|r| r.queued),
            sum(|r| r.invoked),
            sum(|r| r.pending_at_exit),
            sum(|r| r.queued_before_tracing)
        ],
        "{s:#?}"
    );
    assert_eq!(
        [
            per_cpu_sum(&records, "@cpu_queued"),
            per_cpu_sum(&records, "@cpu_invoked"),
            per_cpu_sum(&records, "@cpu_pending"),
            per_cpu_sum(&records, "@cpu_before"),
        ],
        [
            s.queued,
            s.invoked,
            s.pending_at_exit,
            s.not_timed.queued_before_tracing
        ],
        "{s:#?}"
    );
    // With --top 2 the rows left out are added up on their own line: shown + left out = all.
    let top = run_named(&parts, "cbtop");
    top.assert_ok("cbtop");
    let shown = column_sums(&top.out);
    let left_out = top
        .out
        .lines()
        .find_map(|l| l.strip_prefix("  ... "))
        .map(|l| {
            let counts = l.split_once(": ").unwrap().1.split(';').next().unwrap();
            let numbers: Vec<u64> = counts
                .split(", ")
                .map(|p| p.split_whitespace().next().unwrap().parse().unwrap())
                .collect();
            <[u64; 4]>::try_from(numbers).unwrap()
        })
        .unwrap_or([0; 4]);
    let all = total_line(&top.out);
    for i in 0..4 {
        assert_eq!(shown[i] + left_out[i], all[i], "{}", top.out);
    }
    // The comparison's totals are the sums of the rows above them, the rows not shown too.
    let compare = &run_named(&parts, "cbcompare").out;
    for figure in ["callbacks queued", "callbacks invoked"] {
        let block: Vec<Vec<&str>> = compare
            .lines()
            .skip_while(|l| !l.starts_with(figure))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(|l| l.split_whitespace().collect())
            .collect();
        let (total, rows) = block.split_last().unwrap_or_else(|| panic!("{compare}"));
        assert_eq!(total[..2], ["all", "rows"], "{compare}");
        let a = |cells: &Vec<&str>| -> u64 { cells[cells.len() - 3].parse().unwrap_or(0) };
        assert_eq!(rows.iter().map(a).sum::<u64>(), a(total), "{compare}");
    }
}

#[test]
fn lost_and_wrong_on_6_1() {
    lost_and_wrong("6.1");
}

#[test]
fn lost_and_wrong_on_6_12() {
    lost_and_wrong("6.12");
}

#[test]
fn lost_and_wrong_on_7_3() {
    lost_and_wrong("7.3");
}

fn report_reads_what_it_should(series: &str) {
    let script = "\
/bin/rcu-workload background >/dev/null 2>&1 &
plain count count --interval 1 --secs 20 --save /tmp/count.json
plain countjson -f json count --interval 1 --secs 3
kill $!
traced srlat 'srlat --interval 1 --secs 0 --pid WPID --save /tmp/srlat.json' '/bin/rcu-workload bursts 3 5 1000'
traced expedited 'srlat --expedited --secs 0 --pid WPID --save /tmp/expedited.json' '/bin/rcu-workload membarrier 5'
traced gplat 'gplat --secs 2 --save /tmp/gplat.json' 'sleep 1'
traced callbacks 'callbacks --secs 2 --save /tmp/callbacks.json' 'sleep 1'
/bin/rcutrace report /tmp/count.json >/tmp/count.report
echo '=== count.same'; cmp /tmp/count.out /tmp/count.report && echo identical
/bin/rcutrace report /tmp/srlat.json >/tmp/srlat.report
echo '=== srlat.same'; cmp /tmp/srlat.out /tmp/srlat.report && echo identical
cp /tmp/countjson.out /tmp/countjson.json
/bin/rcutrace -f json report /tmp/countjson.json >/tmp/countjson.report
echo '=== countjson.same'; cmp /tmp/countjson.out /tmp/countjson.report && echo identical
plain third report --interval-index 3 /tmp/count.json
plain whole report /tmp/srlat.json /tmp/srlat.json
plain index report --interval-index 2 /tmp/count.json /tmp/count.json
plain outofrange report --interval-index 99 /tmp/count.json
: > /tmp/empty.json
plain empty report /tmp/empty.json
plain devnull report /dev/null
cat /tmp/gplat.json /tmp/gplat.json > /tmp/two.json
plain two report /tmp/two.json
head -n 3 /tmp/gplat.json > /tmp/cut.json
plain cut report /tmp/cut.json
head -c $(($(wc -c < /tmp/gplat.json) - 20)) /tmp/gplat.json > /tmp/mid.json
plain mid report /tmp/mid.json
plain commands report /tmp/gplat.json /tmp/callbacks.json
plain functions report /tmp/srlat.json /tmp/expedited.json
";
    let parts = all_sections(series, script);
    for run in [
        "count",
        "countjson",
        "srlat",
        "expedited",
        "gplat",
        "callbacks",
    ] {
        run_named(&parts, run).assert_ok(run);
    }
    // 3. Every interval prints again, byte for byte, as the run printed it.
    for run in ["count", "srlat", "countjson"] {
        assert_eq!(
            parts[&format!("{run}.same")],
            "identical\n",
            "{run}: {}",
            run_named(&parts, run).out
        );
    }
    let count = run_named(&parts, "count").out;
    let times = |text: &str| {
        text.lines()
            .filter(|l| l.len() == 8 && l.as_bytes()[2] == b':' && l.as_bytes()[5] == b':')
            .count()
    };
    assert_eq!(times(&count), 20, "{count}");
    // One interval: its time, then its maps.
    let third = run_named(&parts, "third");
    third.assert_ok("third");
    assert_eq!(times(&third.out), 1, "{}", third.out);
    let third_time = count
        .lines()
        .filter(|l| l.len() == 8 && l.as_bytes()[2] == b':')
        .nth(2)
        .unwrap();
    assert!(third.out.starts_with("Attaching "), "{}", third.out);
    assert_eq!(third.out.lines().nth(1), Some(third_time), "{}", third.out);
    // Compared whole: every call of both runs, each ratio 1.
    let whole = run_named(&parts, "whole");
    whole.assert_ok("whole");
    assert!(
        whole.out.starts_with("A: /tmp/srlat.json (its "),
        "{}",
        whole.out
    );
    let count_row: Vec<&str> = whole
        .out
        .lines()
        .find(|l| l.trim_start().starts_with("count "))
        .unwrap_or_else(|| panic!("{}", whole.out))
        .split_whitespace()
        .collect();
    assert_eq!(count_row, ["count", "15", "15", "1.00"], "{}", whole.out);
    let index = run_named(&parts, "index");
    index.assert_ok("index");
    assert!(
        index
            .out
            .starts_with("A: /tmp/count.json (interval 2 of 20)\n"),
        "{}",
        index.out
    );
    let outofrange = run_named(&parts, "outofrange");
    assert_eq!(outofrange.rcutrace_status, 1);
    assert!(
        outofrange
            .err
            .contains("has 20 intervals; it takes 1 to 20"),
        "{}",
        outofrange.err
    );

    // 4. Refused, with status 1, saying what is wrong and where.
    for (name, says) in [
        ("empty", "it holds no record (the file is empty)"),
        ("devnull", "it holds no record (the file is empty)"),
        ("two", "a second run starts here"),
        ("cut", "the file was cut short"),
        (
            "mid",
            "is cut short: the file ends in the middle of a record",
        ),
    ] {
        let run = run_named(&parts, name);
        assert_eq!(run.rcutrace_status, 1, "{name}: {}{}", run.out, run.err);
        assert!(run.out.is_empty(), "{name}: {}", run.out);
        assert!(run.err.contains(says), "{name}: {}", run.err);
        assert!(!run.err.contains("panicked"), "{name}: {}", run.err);
    }
    assert!(
        run_named(&parts, "two").err.contains("line "),
        "{}",
        run_named(&parts, "two").err
    );
    // Different commands, different functions: said first.
    let commands = run_named(&parts, "commands");
    commands.assert_ok("commands");
    assert!(
        commands
            .out
            .contains("\n\nA and B are runs of different commands: A of `gplat`, B of `callbacks`"),
        "{}",
        commands.out
    );
    let functions = run_named(&parts, "functions");
    functions.assert_ok("functions");
    assert!(
        functions.out.contains(
            "\n\nA and B timed different functions: A synchronize_rcu, B \
             synchronize_rcu_expedited"
        ),
        "{}",
        functions.out
    );
}

#[test]
fn report_reads_what_it_should_on_6_1() {
    report_reads_what_it_should("6.1");
}

#[test]
fn report_reads_what_it_should_on_6_12() {
    report_reads_what_it_should("6.12");
}

#[test]
fn report_reads_what_it_should_on_7_3() {
    report_reads_what_it_should("7.3");
}

/// `(cells of the callbacks table's rows)`, split on whitespace.
fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .skip_while(|l| !l.trim_start().starts_with("FUNCTION "))
        .skip(1)
        .take_while(|l| !l.starts_with("  all rows: ") && !l.starts_with("  ... "))
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

fn significant_digits(number: &str) -> usize {
    number
        .trim_start_matches(['0', '.'])
        .chars()
        .filter(char::is_ascii_digit)
        .count()
}

fn messages_and_numbers(series: &str) {
    let script = "\
echo '=== rude.present'; grep -c ' rcu_barrier_tasks_rude$' /proc/kallsyms
plain rude srlat --func rcu_barrier_tasks_rude --secs 1
traced both 'srlat --func rcu_barrier_tasks_rude --func synchronize_rcu --secs 0 --pid WPID' '/bin/rcu-workload membarrier 20'
plain nine srlat --func synchronize_rcu --func synchronize_rcu_expedited --func synchronize_srcu --func synchronize_srcu_expedited --func synchronize_rcu_tasks --func synchronize_rcu_tasks_rude --func rcu_barrier --func rcu_barrier_tasks --func srcu_barrier
plain servejson -f json serve
plain servesave serve --save /tmp/serve.json
ip link set lo up
/bin/rcutrace serve --listen 127.0.0.1:9750 >/tmp/serve.out 2>/tmp/serve.err &
spid=$!
i=0; while ! grep -q listening /tmp/serve.err && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
echo '=== serve.banner'; cat /tmp/serve.out
kill -TERM $spid; wait $spid
show serve $?
plain summary count --secs 1
traced few 'srlat --secs 0 --pid WPID' '/bin/rcu-workload membarrier 19'
traced buckets 'srlat --secs 0 --pid WPID --buckets 3' '/bin/rcu-workload membarrier 10'
/bin/rcu-workload background >/dev/null 2>&1 &
sleep 1
plain table callbacks --secs 3 --top 0
kill $!
";
    let parts = all_sections(series, script);
    let absent = parts["rude.present"].trim() == "0";

    // 6. An absent --func is named once, and whatever else was asked for is timed.
    let rude = run_named(&parts, "rude");
    let both = run_named(&parts, "both");
    both.assert_ok("both");
    assert_eq!(
        both.number_after("@srlat count", "count"),
        Some(20.0),
        "{}",
        both.out
    );
    if absent {
        assert_eq!(rude.rcutrace_status, 1, "{}", rude.err);
        assert_eq!(
            rude.err.matches("rcu_barrier_tasks_rude").count(),
            1,
            "{}",
            rude.err
        );
        assert!(rude.err.contains("not on this kernel"), "{}", rude.err);
        assert!(!rude.err.contains("CONFIG_KPROBES"), "{}", rude.err);
        assert!(!rude.err.contains("None of the functions"), "{}", rude.err);
        assert_eq!(
            both.err
                .lines()
                .filter(|l| l.contains("rcu_barrier_tasks_rude"))
                .collect::<Vec<_>>(),
            ["rcutrace: not on this kernel (absent or inlined), not timed: rcu_barrier_tasks_rude"],
            "{}",
            both.err
        );
    } else {
        rude.assert_ok("rude");
        assert!(both.out.contains("@rcu_barrier_tasks_rude"), "{}", both.out);
    }
    // 7, 8. Usage errors, status 2, before anything is attached.
    for (name, says) in [
        (
            "nine",
            "at most 8 functions can be timed in one run (9 given)",
        ),
        (
            "servejson",
            "serve answers in the OpenMetrics text format only",
        ),
        ("servesave", "--save is for the commands that print a run"),
    ] {
        let run = run_named(&parts, name);
        assert_eq!(run.rcutrace_status, 2, "{name}: {}", run.err);
        assert!(run.out.is_empty(), "{name}: {}", run.out);
        assert!(run.err.contains(says), "{name}: {}", run.err);
    }
    // serve announces its address once its probes are attached: the banner is out by then.
    let serve = run_named(&parts, "serve");
    assert_eq!(serve.rcutrace_status, 0, "{}", serve.err);
    assert!(
        parts["serve.banner"].starts_with("Attaching "),
        "{}",
        parts["serve.banner"]
    );
    assert_eq!(
        serve
            .err
            .lines()
            .filter(|l| l.contains("listening on"))
            .collect::<Vec<_>>(),
        ["rcutrace: listening on http://127.0.0.1:9750/metrics"],
        "{}",
        serve.err
    );
    // 11. The summary names only the callback functions it traced.
    let summary = run_named(&parts, "summary");
    summary.assert_ok("summary");
    let line = summary
        .out
        .lines()
        .find(|l| l.trim_start().starts_with("callbacks per grace period:"))
        .unwrap_or_else(|| panic!("{}", summary.out));
    let hurry = series != "6.1";
    let names = if hurry {
        "(call_rcu, call_rcu_hurry, kvfree_call_rcu)"
    } else {
        "(call_rcu, kvfree_call_rcu)"
    };
    assert!(line.ends_with(names), "{line}\n{}", summary.err);
    assert_eq!(
        summary.err.contains("call_rcu_hurry"),
        !hurry,
        "{}",
        summary.err
    );

    // 12. Nineteen samples: exact percentiles, the top ones the exact maximum.
    let few = run_named(&parts, "few");
    few.assert_ok("few");
    let stats = few
        .out
        .lines()
        .find(|l| l.starts_with("@srlat count 19, "))
        .unwrap_or_else(|| panic!("{}", few.out));
    let max = stats.split("max ").nth(1).unwrap();
    let percentiles = few
        .out
        .lines()
        .find(|l| l.starts_with("@srlat p50 "))
        .unwrap();
    assert!(
        percentiles.ends_with(&format!(
            "p99 {max}, p99.9 {max} (exact: nearest rank of the 19 samples)"
        )),
        "{percentiles}\n{stats}"
    );
    let buckets = run_named(&parts, "buckets");
    buckets.assert_ok("buckets");
    let rows: Vec<&str> = buckets
        .out
        .lines()
        .skip_while(|l| !l.starts_with("@srlat: "))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(!rows.is_empty(), "{}", buckets.out);
    let total: u64 = rows
        .iter()
        .map(|row| {
            let (bounds, count) = row.split_once(" ms: ").unwrap_or_else(|| panic!("{row}"));
            assert!(bounds.starts_with('[') && bounds.ends_with(')'), "{row}");
            count.parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(total, 10, "{}", buckets.out);
    // The callbacks table: four digits for a 3.2% bound, one precision per exact column.
    let table = run_named(&parts, "table");
    table.assert_ok("table");
    assert!(
        table.out.contains("percentiles within 3.2%):"),
        "{}",
        table.out
    );
    let rows = table_rows(&table.out);
    assert!(rows.len() > 2, "{}", table.out);
    let (header_len, mut timed) = (12, 0);
    for row in rows
        .iter()
        .filter(|r| r.len() >= header_len && r[r.len() - 6] != "-")
    {
        timed += 1;
        let cells = &row[row.len() - 6..];
        let (min, max) = (&cells[0], &cells[2]);
        for p in &cells[3..] {
            assert!(
                p == min || p == max || significant_digits(p) <= 4,
                "{row:?}\n{}",
                table.out
            );
        }
    }
    assert!(timed > 0, "{}", table.out);
    for column in [6, 8] {
        let decimals: Vec<usize> = rows
            .iter()
            .filter(|r| r.len() >= header_len && r[r.len() - 6] != "-")
            .map(|r| {
                r[r.len() - 12 + column]
                    .split_once('.')
                    .map_or(0, |(_, f)| f.len())
            })
            .collect();
        assert!(
            decimals.windows(2).all(|w| w[0] == w[1]),
            "{decimals:?}\n{}",
            table.out
        );
    }
}

#[test]
fn messages_and_numbers_on_6_1() {
    messages_and_numbers("6.1");
}

#[test]
fn messages_and_numbers_on_6_12() {
    messages_and_numbers("6.12");
}

#[test]
fn messages_and_numbers_on_7_3() {
    messages_and_numbers("7.3");
}
