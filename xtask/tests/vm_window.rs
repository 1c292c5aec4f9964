//! The window is exactly the window, and nothing rcutrace does itself is in its numbers: its
//! own attaching, reading and detaching call RCU updaters (trampoline updates wait for grace
//! periods), and so do the tasks-RCU kthreads, for the grace periods that its attaching
//! queued, up to seconds after the attach returned. None of that may be counted or timed;
//! the same work done for another tracer must be. Ground truth in an idle guest:
//! membarrier(MEMBARRIER_CMD_GLOBAL) calls synchronize_rcu() exactly once per call.

mod support;

use std::collections::HashMap;

use support::{boot, boot_with_bpftrace, boot_with_kernel_args, run_named, sections, stack_counts};

const CALLS: u64 = 30;
const BPFTRACE_CALLS: u64 = 40;

/// Waits (up to 60 s) until FILE holds a line starting with WORD. `stop_bpftrace PID`: SIGINT,
/// again every 2 s until it exits (bpftrace 0.17 now and then stays in its event loop after a
/// SIGINT, seen on 7.3 with the referee; what it counted was printed before).
const WAIT_FOR: &str = r#"
wait_for() {
    i=0
    while ! grep -q "^$2" "$1" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
}
stop_bpftrace() {
    kill -INT $1
    i=0
    while kill -0 $1 2>/dev/null && [ $i -lt 300 ]; do
        sleep 0.1; i=$((i + 1)); [ $((i % 20)) = 0 ] && kill -INT $1
    done
    wait $1
}
"#;

/// bpftrace counts every synchronize_rcu() by whoever makes it, through a trampoline
/// (kfunc), whose attaching sets the tasks-RCU kthreads going as rcutrace's does.
const BPFTRACE_COUNT: &str = "kfunc:synchronize_rcu { @[comm] = count(); }";

/// The same, as a referee started before everything else: each `sync` makes it print what it
/// has counted so far, under `=== referee.N` (ended by `=== referee.after`, which also
/// heads what it prints on exit).
const REFEREE: &str = "kfunc:synchronize_rcu { @[comm] = count(); } \
     tracepoint:syscalls:sys_enter_sync { $n = @marks; printf(\"=== referee.%d\\n\", $n); \
     print(@); printf(\"=== referee.after\\n\"); @marks = $n + 1; }";

/// The start's symbols as rcutrace logs them (asked of the kernel), then as /proc/kallsyms
/// lists them: the ground truth.
const SYMBOLS: &str = r#"
echo "=== symbols"
RUST_LOG=rcutrace::kernel=debug /bin/rcutrace count --secs 1 2>&1 >/dev/null \
    | grep -e "the start's symbols:" -e "asking the kernel for symbols"
echo "=== kallsyms"
grep -E ' (rcu_state|rcu_num_lvls|rcu_num_nodes|kprobe_table|rcu_tasks|register_fprobe_ips)$' /proc/kallsyms
"#;

fn own_doing_is_not_counted(series: &str) {
    let script = format!(
        "traced srlat 'srlat --secs 0' '/bin/rcu-workload membarrier {CALLS}'\n\
         traced count 'count --secs 0 --all --by comm --top 0' 'sleep 2'\n{SYMBOLS}"
    );
    let guest = boot(series, &script);
    let sections = sections(&guest.stdout);
    the_kernel_gives_the_symbols_kallsyms_lists(series, &sections);

    // Without --pid, every synchronize_rcu() in the guest is timed: the workload's 30, and
    // none of rcutrace's own (attaching fentry/fexit waits for grace periods).
    let srlat = run_named(&sections, "srlat");
    srlat.assert_ok("srlat");
    let samples = srlat.number_after("@srlat count", "count").unwrap() as u64;
    assert_eq!(samples, CALLS, "{series}: {}", srlat.out);

    // Every update-side call keyed by who made it: rcutrace is never among them.
    let count = run_named(&sections, "count");
    count.assert_ok("count");
    let own: Vec<&str> = count
        .out
        .lines()
        .filter(|l| l.starts_with("@[rcutrace, ") && !l.contains("__rcu_read_lock"))
        .collect();
    assert!(own.is_empty(), "{series}: rcutrace counted itself: {own:?}");
}

/// The start's symbols were asked of the kernel (no fallback to /proc/kallsyms), and each
/// address it gave is the one /proc/kallsyms lists; a symbol only kprobe-multi kernels have
/// is found exactly where kallsyms has it.
fn the_kernel_gives_the_symbols_kallsyms_lists(series: &str, sections: &HashMap<String, String>) {
    let logged = &sections["symbols"];
    assert!(
        !logged.contains("asking the kernel for symbols"),
        "{series}: the kernel was not asked: {logged}"
    );
    let map = logged
        .split_once("the start's symbols: {")
        .and_then(|(_, rest)| rest.split_once('}'))
        .unwrap_or_else(|| panic!("{series}: no symbols logged: {logged}"))
        .0;
    let asked: HashMap<&str, u64> = map
        .split(", ")
        .filter_map(|pair| {
            let (name, address) = pair.split_once(": ")?;
            Some((
                name.trim_matches('"'),
                u64::from_str_radix(address, 16).ok()?,
            ))
        })
        .collect();
    let listed: HashMap<&str, u64> = sections["kallsyms"]
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let address = u64::from_str_radix(fields.next()?, 16).ok()?;
            Some((fields.nth(1)?, address))
        })
        .collect();
    // Every kernel has all but the last, which only kernels with fprobes have.
    let compared = [
        "rcu_state",
        "rcu_num_lvls",
        "rcu_num_nodes",
        "kprobe_table",
        "rcu_tasks",
        "register_fprobe_ips",
    ];
    for name in &compared[..compared.len() - 1] {
        assert!(listed.contains_key(name), "{series}: kallsyms lacks {name}");
    }
    for name in compared {
        assert_eq!(
            asked.get(name),
            listed.get(name),
            "{series}: {name} asked of the kernel and listed by kallsyms differ"
        );
    }
}

/// `@[key]: N` lines of a text block, by key.
fn counts(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (key, n) = line.strip_prefix("@[")?.split_once("]: ")?;
            Some((key.to_string(), n.trim().parse().ok()?))
        })
        .collect()
}

/// The synchronize_rcu() calls of `count --by comm` by comm.
fn synchronize_rcu_by_comm(out: &str) -> HashMap<String, u64> {
    counts(out)
        .into_iter()
        .filter_map(|(key, n)| Some((key.strip_suffix(", synchronize_rcu")?.to_string(), n)))
        .collect()
}

fn tasks_kthreads(by_comm: &HashMap<String, u64>) -> u64 {
    by_comm
        .iter()
        .filter(|(comm, _)| comm.starts_with("rcu_tasks"))
        .map(|(_, n)| n)
        .sum()
}

/// Issue 16's scenarios, with the window open for seconds as a user leaves it: the first
/// command after boot counts none of its own attach's synchronize_rcu() calls; beside
/// bpftrace, rcutrace counts what bpftrace's attaching set going, and not its own. A bpftrace
/// referee, started and settled first, counts everything: between its snapshot before
/// bpftrace starts and its last, it saw exactly what rcutrace must count (bpftrace's whole
/// attach and the workload), and before that rcutrace's own attach, of which rcutrace must
/// count nothing (the guest does nothing else).
fn first_count_and_beside_bpftrace(series: &str) {
    let script = format!(
        "{WAIT_FOR}
/bin/rcutrace count --secs 3 >/tmp/first.out 2>/tmp/first.err
echo \"=== first.out\"; cat /tmp/first.out; echo \"=== first.err\"; cat /tmp/first.err
sleep 8
/bin/rcutrace count --attach fentry --secs 3 >/tmp/trampolines.out 2>/tmp/trampolines.err
echo \"=== trampolines.out\"; cat /tmp/trampolines.out
echo \"=== trampolines.err\"; cat /tmp/trampolines.err
sleep 8
/usr/bin/bpftrace -e '{REFEREE}' >/tmp/referee.out 2>&1 &
referee=$!
wait_for /tmp/referee.out Attaching
sleep 8
sync
/bin/rcutrace count --secs 0 --by comm --top 0 >/tmp/beside.out 2>/tmp/beside.err &
tracer=$!
wait_for /tmp/beside.out Attaching
sleep 4
sync
/usr/bin/bpftrace -e '{BPFTRACE_COUNT}' >/tmp/bpftrace.out 2>&1 &
bpftrace=$!
wait_for /tmp/bpftrace.out Attaching
sleep 4
/bin/rcu-workload membarrier {BPFTRACE_CALLS} >/dev/null
sync
kill -INT $tracer; wait $tracer
stop_bpftrace $bpftrace
stop_bpftrace $referee
echo \"=== beside.out\"; cat /tmp/beside.out; echo \"=== beside.err\"; cat /tmp/beside.err
echo \"=== bpftrace.out\"; cat /tmp/bpftrace.out
cat /tmp/referee.out
"
    );
    let guest = boot_with_bpftrace(series, &script);
    let sections = sections(&guest.stdout);
    let part = |name: &str| {
        sections
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("{series}: no {name} in {}", guest.stdout))
    };

    // On 6.12 and 7.3 plain `count` attaches its functions by one kprobe-multi link, which
    // sets no tasks-RCU work going; 6.1 has no such links and puts trampolines on them.
    let batched = series != "6.1";
    for name in ["first", "trampolines"] {
        let out = part(&format!("{name}.out"));
        let synchronize = counts(&out).get("synchronize_rcu").copied();
        assert_eq!(
            synchronize,
            Some(0),
            "{series}: {name}: the count after boot counted its own attach's \
             synchronize_rcu():\n{out}\n{}",
            part(&format!("{name}.err"))
        );
        // What was left out is said: by trampolines on 6.12 and 7.3 the kthreads' calls for
        // its attaching come into the window (the scenario of the issue); 6.1's made none
        // there in any run seen. By a kprobe-multi link there is nothing to leave out.
        let left_out = number_after(&out, "not counted, as rcutrace's own doing: ");
        if name == "first" && batched {
            assert_eq!(left_out, None, "{series}: {name}: {out}");
        } else {
            assert!(
                series == "6.1" || left_out.is_some_and(|n| n >= 1),
                "{series}: {name}: no word of what was left out as rcutrace's own doing:\n{out}"
            );
        }
    }

    let rcutrace = synchronize_rcu_by_comm(&part("beside.out"));
    let snapshots: Vec<HashMap<String, u64>> = (0..3)
        .map(|n| counts(&part(&format!("referee.{n}"))))
        .collect();
    let since = |from: usize, to: usize| -> HashMap<String, u64> {
        snapshots[to]
            .iter()
            .map(|(comm, n)| {
                (
                    comm.clone(),
                    n - snapshots[from].get(comm).copied().unwrap_or(0),
                )
            })
            // rcutrace's own process is never counted (its membarrier() as its window closes
            // is in the referee's snapshot when bpftrace prints that late).
            .filter(|(comm, n)| *n > 0 && comm != "rcutrace")
            .collect()
    };
    let own_attach = since(0, 1);
    let beside = since(1, 2);
    let context = format!(
        "{series}: rcutrace {rcutrace:?}; the referee saw rcutrace's attach {own_attach:?}, \
         then {beside:?}\n{}\n{}",
        part("beside.err"),
        part("bpftrace.out")
    );
    // The scenario holds: bpftrace's attaching sets the kthreads going, and so does
    // rcutrace's by trampolines (6.1); by a kprobe-multi link (6.12, 7.3) it sets none going.
    if batched {
        assert_eq!(tasks_kthreads(&own_attach), 0, "{context}");
    } else {
        assert!(tasks_kthreads(&own_attach) > 0, "{context}");
    }
    assert!(tasks_kthreads(&beside) > 0, "{context}");
    assert_eq!(
        beside.get("rcu-workload"),
        Some(&BPFTRACE_CALLS),
        "{context}"
    );
    // Exactly what the referee saw from bpftrace's start on, whoever made the calls.
    assert_eq!(rcutrace, beside, "{context}");
}

/// `@srlat count N` of srlat's text summary.
fn srlat_samples(out: &str) -> Option<u64> {
    number_after(out, "@srlat count ")
}

/// The number that follows `prefix` at the start of a line of `text` (leading spaces aside).
fn number_after(text: &str, prefix: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.trim_start().strip_prefix(prefix)?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest[..digits].parse().ok()
    })
}

/// `synchronize_rcu()` and `synchronize_rcu_expedited()` calls of `count --by stack` whose
/// stack has a frame of `function`.
fn waits_under(out: &str, function: &str) -> u64 {
    let frame = format!("{function}+");
    stack_counts(out)
        .into_iter()
        .filter(|(frames, _)| {
            frames.first().is_some_and(|f| {
                f.starts_with("synchronize_rcu+") || f.starts_with("synchronize_rcu_expedited+")
            }) && frames.iter().any(|f| f.starts_with(&frame))
        })
        .map(|(_, n)| n)
        .sum()
}

/// `srlat --secs 0`, 4 s of waiting, 30 membarrier() calls, SIGINT, as the first command
/// after boot: exactly 30 samples. Then a second rcutrace attaching and detaching during a
/// `count` window: the tasks-RCU kthreads' calls for it are counted, and on 7.3 the SRCU
/// grace periods' (its detaching queues on the SRCU-fast tasks-trace and tracepoint domains,
/// whose grace periods call synchronize_rcu() from a kworker), since the first did not cause
/// them; its feature probes' CPU map's free is too, and it made no device map.
/// The tasks-RCU kthread's delay before a grace period for callbacks (see below).
const TASKS_RCU_LAZY_DELAY: &str = "rcupdate.rcu_tasks_lazy_ms=2000";

fn srlat_first_and_a_second_rcutrace(series: &str) {
    let script = format!(
        "{WAIT_FOR}
# srlat NAME ARGS...: srlat ARGS --secs 0, 4 s of waiting, the calls, SIGINT; its output.
srlat() {{
    name=$1; shift
    /bin/rcutrace srlat \"$@\" --secs 0 >/tmp/$name.out 2>/tmp/$name.err &
    tracer=$!
    wait_for /tmp/$name.out Attaching
    sleep 4
    /bin/rcu-workload membarrier {CALLS} >/dev/null
    kill -INT $tracer; wait $tracer
    echo \"=== $name.out\"; cat /tmp/$name.out; echo \"=== $name.err\"; cat /tmp/$name.err
}}
srlat srlat
sleep 8
/bin/rcutrace count --secs 0 --by stack --top 0 >/tmp/first.out 2>/tmp/first.err &
tracer=$!
wait_for /tmp/first.out Attaching
sleep 4
/bin/rcutrace srlat --secs 2 >/tmp/second.out 2>&1
sleep 4
kill -INT $tracer; wait $tracer
echo \"=== first.out\"; cat /tmp/first.out; echo \"=== first.err\"; cat /tmp/first.err
echo \"=== second.out\"; cat /tmp/second.out
sleep 4
srlat fentry --attach fentry
"
    );
    // The fentry run's replaced trampoline image is released by a tasks-RCU callback, whose
    // grace period the kthread starts after a lazy delay (a quarter of a second by default,
    // 6.7 and later). On 7.3 the tasks-trace step before it is a fast SRCU grace period, and
    // with the default delay the kthread's synchronize_rcu() calls land about when the window
    // opens, before it as often as in it (then rightly neither timed nor said). Two seconds
    // put them inside the 4 s window, where they must be left out and said; 6.1 has no delay.
    let guest = boot_with_kernel_args(series, &script, &[TASKS_RCU_LAZY_DELAY]);
    let sections = sections(&guest.stdout);
    let part = |name: &str| {
        sections
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("{series}: no {name} in {}", guest.stdout))
    };
    let srlat = part("srlat.out");
    assert_eq!(
        srlat_samples(&srlat),
        Some(CALLS),
        "{series}: {srlat}\n{}",
        part("srlat.err")
    );
    // Its entries agree with its samples and what it left out as its own doing, if anything
    // (no cross-check warning).
    assert!(!srlat.contains("WARNING"), "{series}: {srlat}");
    // By fentry and fexit, its second program's attach replaces the trampoline's image, whose
    // release waits for a tasks-RCU grace period: the kthread's synchronize_rcu() for it comes
    // into the window. Left out, said, and accounted for in the entries' check.
    let fentry = part("fentry.out");
    assert_eq!(srlat_samples(&fentry), Some(CALLS), "{series}: {fentry}");
    assert!(!fentry.contains("WARNING"), "{series}: {fentry}");
    assert!(
        number_after(&fentry, "@srlat not timed, as rcutrace's own doing: ")
            .is_some_and(|n| n >= 1),
        "{series}: no word of the kthread's calls left out as rcutrace's own doing: {fentry}\n{}",
        part("fentry.err")
    );

    let first = part("first.out");
    assert!(
        waits_under(&first, "rcu_tasks_kthread") > 0,
        "{series}: the kthreads' calls for a second rcutrace's attach were not counted: \
         {first}\n{}",
        part("second.out")
    );
    assert_eq!(
        waits_under(&first, "try_check_zero") > 0,
        series == "7.3",
        "{series}: the SRCU grace periods' calls for a second rcutrace's detach: {first}\n{}",
        part("second.out")
    );
    // aya's feature probes in the second: the CPU map it creates and closes is freed after a
    // grace period, counted; it creates no device map, whose free would wait for one and
    // for an rcu_barrier().
    assert_eq!(
        (
            waits_under(&first, "cpu_map_free"),
            waits_under(&first, "dev_map_free")
        ),
        (1, 0),
        "{series}: the second rcutrace's feature probes' maps: {first}\n{}",
        part("second.out")
    );
}

#[test]
fn own_doing_is_not_counted_on_6_1() {
    own_doing_is_not_counted("6.1");
}

#[test]
fn own_doing_is_not_counted_on_6_12() {
    own_doing_is_not_counted("6.12");
}

#[test]
fn own_doing_is_not_counted_on_7_3() {
    own_doing_is_not_counted("7.3");
}

#[test]
fn first_count_and_beside_bpftrace_on_6_1() {
    first_count_and_beside_bpftrace("6.1");
}

#[test]
fn first_count_and_beside_bpftrace_on_6_12() {
    first_count_and_beside_bpftrace("6.12");
}

#[test]
fn first_count_and_beside_bpftrace_on_7_3() {
    first_count_and_beside_bpftrace("7.3");
}

#[test]
fn srlat_first_and_a_second_rcutrace_on_6_1() {
    srlat_first_and_a_second_rcutrace("6.1");
}

#[test]
fn srlat_first_and_a_second_rcutrace_on_6_12() {
    srlat_first_and_a_second_rcutrace("6.12");
}

#[test]
fn srlat_first_and_a_second_rcutrace_on_7_3() {
    srlat_first_and_a_second_rcutrace("7.3");
}
