//! Shared parts of the VM tests: boot a kernel with rcutrace and the workload, run traced
//! experiments in the guest, and pick the results apart.

#![allow(dead_code)]

use std::{collections::HashMap, sync::OnceLock, time::Duration};

use rcutrace_common::records::{
    CallbackRow, CallbacksSummary, GracePeriod, GracePeriodsSummary, HistValue, LastHoldout,
    Record, StallWarning,
};
use xtask::bpftrace::HOST_BPFTRACE;
use xtask::vm::{self, GuestJob, GuestOutput, Kernel};

/// Both binaries, built once per test process.
fn binaries() -> &'static (std::path::PathBuf, std::path::PathBuf) {
    static BINARIES: OnceLock<(std::path::PathBuf, std::path::PathBuf)> = OnceLock::new();
    BINARIES.get_or_init(|| xtask::build::build_all().expect("building rcutrace and rcu-workload"))
}

/// Shell functions for the guest. `traced NAME 'RCUTRACE ARGS' 'WORKLOAD'` starts the workload
/// held behind a gate, starts rcutrace (WPID in its arguments becomes the workload's pid),
/// opens the gate once rcutrace has printed its banner (text or JSON; on stderr with -f
/// folded), waits for the workload, then interrupts rcutrace like Ctrl-C and prints every
/// output under `=== NAME.PART` headers. `watched` is the same, for a script that defines a
/// `traced` of its own.
const PRELUDE: &str = r#"
traced() { watched "$@"; }
watched() {
    name=$1; args=$2; work=$3
    rm -f /tmp/go
    sh -c "while [ ! -e /tmp/go ]; do sleep 0.05; done; exec $work" >/tmp/$name.work 2>&1 &
    wpid=$!
    args=$(echo "$args" | sed "s/WPID/$wpid/g")
    /bin/rcutrace $args >/tmp/$name.out 2>/tmp/$name.err &
    tpid=$!
    i=0
    while ! grep -q -e '^Attaching' -e '"attached_probes"' /tmp/$name.out /tmp/$name.err 2>/dev/null && kill -0 $tpid 2>/dev/null && [ $i -lt 600 ]; do
        sleep 0.1; i=$((i + 1))
    done
    touch /tmp/go
    wait $wpid; wstatus=$?
    kill -INT $tpid 2>/dev/null
    wait $tpid; tstatus=$?
    echo "=== $name.out"; cat /tmp/$name.out
    echo "=== $name.err"; cat /tmp/$name.err
    echo "=== $name.work"; cat /tmp/$name.work
    echo "=== $name.status"; echo "$tstatus $wstatus"
}
"#;

/// Boots `series` with rcutrace at /bin/rcutrace and the workload at /bin/rcu-workload.
pub fn boot(series: &str, script: &str) -> GuestOutput {
    run_job(guest_job(series, script))
}

/// `boot`, with options added to the guest kernel's command line.
pub fn boot_with_kernel_args(series: &str, script: &str, kernel_args: &[&str]) -> GuestOutput {
    let mut job = guest_job(series, script);
    job.kernel_args = kernel_args.iter().map(|a| a.to_string()).collect();
    run_job(job)
}

/// Like `boot`, with the test module for `series` at /lib/rcutrace_test.ko (the script
/// loads it: `insmod /lib/rcutrace_test.ko`).
pub fn boot_with_module(series: &str, script: &str) -> GuestOutput {
    boot_with_module_within(series, script, Duration::from_secs(300))
}

/// `boot_with_module` for jobs that need more than the usual five minutes of emulation.
pub fn boot_with_module_within(series: &str, script: &str, limit: Duration) -> GuestOutput {
    let mut job = guest_job(series, script)
        .with_test_module()
        .expect("building the test module");
    job.timeout = limit;
    run_job(job)
}

/// `boot_with_module_within`, with options added to the guest kernel's command line.
pub fn boot_with_module_and_kernel_args(
    series: &str,
    script: &str,
    kernel_args: &[&str],
    limit: Duration,
) -> GuestOutput {
    boot_with_module_on(
        series,
        script,
        vm::DEFAULT_CPUS,
        vm::DEFAULT_MEMORY_MB,
        kernel_args,
        limit,
    )
}

/// `boot_with_module_and_kernel_args` on a guest of `cpus` CPUs and `memory_mb` of memory:
/// the machines users run, with their trees of `rcu_node`s.
pub fn boot_with_module_on(
    series: &str,
    script: &str,
    cpus: u32,
    memory_mb: u32,
    kernel_args: &[&str],
    limit: Duration,
) -> GuestOutput {
    run_job(module_job_on(
        series,
        script,
        cpus,
        memory_mb,
        kernel_args,
        limit,
    ))
}

/// `boot_with_module_on`, with room for `max_cpus` in all (the rest possible, not online).
pub fn boot_with_module_on_max(
    series: &str,
    script: &str,
    (cpus, max_cpus): (u32, u32),
    memory_mb: u32,
    kernel_args: &[&str],
    limit: Duration,
) -> GuestOutput {
    let mut job = module_job_on(series, script, cpus, memory_mb, kernel_args, limit);
    job.max_cpus = Some(max_cpus);
    run_job(job)
}

fn module_job_on(
    series: &str,
    script: &str,
    cpus: u32,
    memory_mb: u32,
    kernel_args: &[&str],
    limit: Duration,
) -> GuestJob {
    let mut job = guest_job(series, script)
        .with_test_module()
        .expect("building the test module");
    job.cpus = cpus;
    job.memory_mb = memory_mb;
    job.kernel_args = kernel_args.iter().map(|a| a.to_string()).collect();
    job.timeout = limit;
    job
}

/// `boot_with_module_within`, with more host files at guest paths.
pub fn boot_with_module_and_files(
    series: &str,
    script: &str,
    files: &[(std::path::PathBuf, String)],
    limit: Duration,
) -> GuestOutput {
    let mut job = guest_job(series, script)
        .with_test_module()
        .expect("building the test module");
    job.files.extend(files.iter().cloned());
    job.timeout = limit;
    run_job(job)
}

/// Like `boot`, with more host files at guest paths.
pub fn boot_with_files(
    series: &str,
    script: &str,
    files: &[(std::path::PathBuf, String)],
) -> GuestOutput {
    let mut job = guest_job(series, script);
    job.files.extend(files.iter().cloned());
    run_job(job)
}

/// Like `boot`, with Debian's bpftrace at /usr/bin/bpftrace (and the memory its libraries
/// need in the initramfs), to count beside rcutrace in the same guest.
pub fn boot_with_bpftrace(series: &str, script: &str) -> GuestOutput {
    let mut job = guest_job(series, script).file(HOST_BPFTRACE, HOST_BPFTRACE);
    job.memory_mb = vm::BPFTRACE_MEMORY_MB;
    run_job(job)
}

fn guest_job(series: &str, script: &str) -> GuestJob {
    let (rcutrace, workload) = binaries();
    let mut job = GuestJob::new(
        Kernel::Series(series.into()),
        format!("{PRELUDE}\n{script}"),
    )
    .file(rcutrace, "/bin/rcutrace")
    .file(workload, "/bin/rcu-workload");
    job.timeout = Duration::from_secs(300);
    job
}

fn run_job(job: GuestJob) -> GuestOutput {
    let out = vm::run(&job, false).expect("running the guest");
    assert_eq!(
        out.status,
        Some(0),
        "guest job failed\nstdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    out
}

/// The `=== NAME.PART` sections of a guest's stdout.
pub fn sections(stdout: &str) -> HashMap<String, String> {
    let mut sections = HashMap::new();
    let mut current: Option<(String, String)> = None;
    for line in stdout.lines() {
        if let Some(name) = line.strip_prefix("=== ") {
            if let Some((n, body)) = current.take() {
                sections.insert(n, body);
            }
            current = Some((name.to_string(), String::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((n, body)) = current {
        sections.insert(n, body);
    }
    sections
}

/// One traced experiment's outputs.
pub struct Run {
    pub out: String,
    pub err: String,
    pub work: String,
    pub rcutrace_status: i32,
    pub workload_status: i32,
}

pub fn run_named(sections: &HashMap<String, String>, name: &str) -> Run {
    let part = |p: &str| {
        sections
            .get(&format!("{name}.{p}"))
            .cloned()
            .unwrap_or_else(|| panic!("no {name}.{p} in the guest output: {sections:#?}"))
    };
    let status = part("status");
    let mut statuses = status.split_whitespace().map(|s| s.parse::<i32>().unwrap());
    Run {
        out: part("out"),
        err: part("err"),
        work: part("work"),
        rcutrace_status: statuses.next().unwrap(),
        workload_status: statuses.next().unwrap(),
    }
}

impl Run {
    /// Fails unless both processes ended well.
    pub fn assert_ok(&self, name: &str) {
        assert_eq!(
            (self.rcutrace_status, self.workload_status),
            (0, 0),
            "{name}: rcutrace stdout:\n{}\nstderr:\n{}\nworkload:\n{}",
            self.out,
            self.err,
            self.work
        );
        assert!(!self.err.contains("panicked"), "{name}: {}", self.err);
        // rcutrace's own reading of the kprobe layer never fails in a guest (it once did,
        // refused a file while the loader was being made).
        assert!(
            !self
                .err
                .contains("the kprobe layer's own count could not be read"),
            "{name}: {}",
            self.err
        );
    }

    /// The output's JSON lines (`-f json`), decoded into the records the renderer writes.
    pub fn records(&self) -> Vec<Record> {
        self.out
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
            .collect()
    }

    /// The value of `@[key]: N` in the output.
    pub fn count(&self, key: &str) -> Option<u64> {
        let prefix = format!("@[{key}]: ");
        self.out
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map(|n| n.trim().parse().unwrap())
    }

    /// The number after `word` in the line that starts with `line_prefix`,
    /// e.g. `("@srlat count", "count")`.
    pub fn number_after(&self, line_prefix: &str, word: &str) -> Option<f64> {
        let line = self.out.lines().find(|l| l.starts_with(line_prefix))?;
        let mut words = line.split([' ', ',']).filter(|w| !w.is_empty());
        words.find(|w| *w == word)?;
        words.next()?.parse().ok()
    }

    /// `(label, count)` for each row of the histogram printed in the output.
    pub fn hist_rows(&self) -> Vec<(String, u64)> {
        self.out
            .lines()
            .filter(|l| l.ends_with('|') && l.len() > 24)
            .map(|l| {
                let (left, _) = l.split_once(" |").unwrap();
                let label = left[..16.min(left.len())].trim().to_string();
                let count = left[16..].trim().parse().unwrap();
                (label, count)
            })
            .collect()
    }
}

/// The number printed after `key:` by rcu-workload.
pub fn workload_value(work: &str, key: &str) -> u64 {
    let prefix = format!("{key}: ");
    work.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {key} in workload output {work:?}"))
        .trim()
        .parse()
        .unwrap()
}

/// The number after `key:` in the test module's read-out (`cat /proc/rcutrace_test`).
pub fn readout_number(readout: &str, key: &str) -> u64 {
    let prefix = format!("{key}: ");
    readout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no `{key}` in the module's read-out:\n{readout}"))
        .trim()
        .parse()
        .unwrap()
}

/// `callbacks`' summary record.
pub fn callbacks_summary(records: &[Record]) -> &CallbacksSummary {
    records
        .iter()
        .find_map(|r| match r {
            Record::CallbacksSummary(s) => Some(s),
            _ => None,
        })
        .expect("a callbacks summary record")
}

/// The callbacks table's row of `function` queued through `via`.
/// rcutrace's first `callbacks` run after boot, in an idle guest: attaching its trampolines
/// queues the freeing of the kernel's old tables of direct calls (`register_ftrace_direct_cb`),
/// whose invocations come in the window. They are said to be its own doing, and are in no row
/// (they once read as invoked callbacks queued before tracing). Callbacks the idle system
/// queued before tracing may still be invoked in the window: those are the system's.
pub fn assert_own_callbacks_left_out(name: &str, run: &Run) {
    run.assert_ok(name);
    let records = run.records();
    let summary = callbacks_summary(&records);
    assert!(summary.own_queued > 0, "{name}: {summary:#?}");
    assert!(
        !summary
            .rows
            .iter()
            .any(|r| r.function.starts_with("register_ftrace_direct")),
        "{name}: {summary:#?}"
    );
}

pub fn callback_row<'a>(
    summary: &'a CallbacksSummary,
    function: &str,
    via: &str,
) -> &'a CallbackRow {
    summary
        .rows
        .iter()
        .find(|r| r.function == function && r.via == via)
        .unwrap_or_else(|| panic!("no row {function} via {via}: {:#?}", summary.rows))
}

/// Samples in `@cblat[function]`.
pub fn callback_latency_samples(records: &[Record], function: &str) -> u64 {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Hist(maps) => maps.get("@cblat"),
            _ => None,
        })
        .filter_map(|h| match h {
            HistValue::Keyed(keys) => keys.get(function),
            HistValue::Buckets(_) => None,
        })
        .map(|buckets| buckets.iter().map(|b| b.count).sum::<u64>())
        .sum()
}

/// `(frames, count)` of every stack key of `@[...]` in bpftrace's kstack layout.
pub fn stack_counts(out: &str) -> Vec<(Vec<String>, u64)> {
    let mut stacks = Vec::new();
    let mut frames: Option<Vec<String>> = None;
    for line in out.lines() {
        if line == "@[" {
            frames = Some(Vec::new());
        } else if let Some(count) = line.strip_prefix("]: ") {
            if let Some(frames) = frames.take() {
                stacks.push((frames, count.trim().parse().unwrap()));
            }
        } else if let Some(frames) = frames.as_mut() {
            frames.push(line.trim().to_string());
        }
    }
    stacks
}

pub const MS: u64 = 1_000_000;

/// `gp`'s summary record.
pub fn gp_summary(records: &[Record]) -> &GracePeriodsSummary {
    records
        .iter()
        .find_map(|r| match r {
            Record::GracePeriodsSummary(s) => Some(s),
            _ => None,
        })
        .expect("an rcutrace_gp_summary record")
}

/// The normal grace periods listed.
pub fn grace_periods(records: &[Record]) -> Vec<&GracePeriod> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::GracePeriod(g) if !g.expedited => Some(g),
            _ => None,
        })
        .collect()
}

/// The expedited grace periods listed.
pub fn expedited_grace_periods(records: &[Record]) -> Vec<&GracePeriod> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::GracePeriod(g) if g.expedited => Some(g),
            _ => None,
        })
        .collect()
}

/// The listed grace period that was under way when the hold ended (it started before the
/// end and ended after it).
pub fn held(records: &[Record], hold_end_ns: u64) -> &GracePeriod {
    grace_periods(records)
        .into_iter()
        .find(|g| g.started_ns <= hold_end_ns && g.started_ns + g.duration_ns >= hold_end_ns)
        .unwrap_or_else(|| {
            panic!(
                "no listed grace period spans the hold's end at {hold_end_ns}: {:#?}",
                grace_periods(records)
            )
        })
}

/// The grace period under way when a hold of `ms` from `start` to `end` ended was held by
/// it: its last report came after the hold ended, and it ended at least `ms` after the hold
/// began (the hold requested a grace period, so one was under way throughout).
pub fn assert_held(g: &GracePeriod, start: u64, end: u64, ms: u64) {
    assert!(
        g.started_ns + g.init_ns.unwrap() + g.held_ns.unwrap() >= end,
        "last report before the hold ended at {end}: {g:#?}"
    );
    assert!(
        g.started_ns + g.duration_ns >= start + ms * MS,
        "hold from {start}: {g:#?}"
    );
}

/// What holds for every run: phases that add up, a count the counter agrees with, and
/// nothing lost.
pub fn assert_gp_consistent(name: &str, run: &Run, records: &[Record]) {
    run.assert_ok(name);
    let s = gp_summary(records);
    assert!(s.grace_periods > 0, "{name}: {s:#?}");
    assert_eq!(s.by_gp_seq, Some(s.grace_periods), "{name}: {s:#?}");
    // The same, as the cross-check the record carries: it agrees.
    let [check] = s.cross_checks.as_slice() else {
        panic!("{name}: one cross-check expected: {s:#?}");
    };
    assert_eq!(
        (check.value, check.expected, check.agrees),
        (s.grace_periods, s.grace_periods, true),
        "{name}: {check:#?}"
    );
    // The skipped hits by hook make up their total (each of gp's hooks has a program of its
    // own), and name only hooks that were attached.
    assert_eq!(
        s.missed_by_hook.values().sum::<u64>(),
        s.missed_by_kernel,
        "{name}: {s:#?}"
    );
    // Every report seen: the report is hooked by trampoline, which a kprobe's handler
    // running on the same CPU does not make the kernel skip.
    let attach = records
        .iter()
        .find_map(|r| match r {
            Record::Environment(e) => Some(&e.attach),
            _ => None,
        })
        .expect("an environment record");
    assert_eq!(
        attach.get("rcu_report_qs_rnp").map(String::as_str),
        Some("fentry"),
        "{name}: {attach:?}"
    );
    assert!(
        s.missed_by_hook
            .keys()
            .flat_map(|hooks| hooks.split(','))
            .all(|hook| attach.get(hook.trim_end_matches("%return")).is_some()),
        "{name}: {:?} {attach:?}",
        s.missed_by_hook
    );
    assert_eq!(s.without_report, 0, "{name}: {s:#?}");
    // The kthread's milestones are hooked by trampoline: no grace period is seen in part or
    // missed whole.
    assert_eq!(
        (s.lost_events, s.kernel_reads_failed, s.incomplete, s.unseen),
        (0, 0, 0, 0),
        "{name}: {s:#?}"
    );
    for g in grace_periods(records) {
        assert_eq!(
            [
                g.init_ns,
                g.quiescent_wait_ns,
                g.kthread_wake_ns,
                g.cleanup_ns
            ]
            .iter()
            .map(|phase| phase.unwrap())
            .sum::<u64>(),
            g.duration_ns,
            "{name}: {g:#?}"
        );
        assert!(g.last_holdout.is_some(), "{name}: {g:#?}");
    }
}

/// Exactly N queued, N invoked and N latency samples, none pending or from before tracing.
pub fn assert_callbacks_exact(records: &[Record], function: &str, via: &str, n: u64) {
    let r = callback_row(callbacks_summary(records), function, via);
    assert_eq!(
        (
            r.queued,
            r.invoked,
            r.pending_at_exit,
            r.queued_before_tracing,
            r.not_recorded
        ),
        (n, n, 0, 0, 0),
        "{function} via {via}: {r:#?}"
    );
    assert_eq!(callback_latency_samples(records, function), n, "{function}");
    assert!(r.min_ns.is_some_and(|min| min > 0), "{r:#?}");
}

/// When the module's last `hold_cpu` or `block_reader` began and ended holding, from its
/// read-out; it held at least `ms`.
pub fn hold_interval(readout: &str, ms: u64) -> (u64, u64) {
    let (start, end) = (
        readout_number(readout, "hold_start_ns"),
        readout_number(readout, "hold_end_ns"),
    );
    assert!(end - start >= ms * MS, "{readout}");
    (start, end)
}

/// The module's spinning function is on a stack sampled on the CPU it held, unless the tick
/// landed in a retpoline thunk, from which the kernel's unwinder goes no further (seen on 6.1
/// and 6.12).
pub fn assert_hold_spin_sampled(stack: &[String], context: &dyn std::fmt::Debug) {
    assert!(
        stack
            .iter()
            .any(|f| f.starts_with("rcutrace_test_hold_spin"))
            || stack
                .last()
                .is_some_and(|f| f.starts_with("__x86_indirect_thunk")),
        "{context:#?}"
    );
}

/// `g`'s last holdout is the module's reader `writer`, switched out inside its critical
/// section during the module's hold `(start, end)` (from its read-out) and blocked until it
/// left after the hold's end, with the module's function where it was switched out.
///
/// How soon after `start` the reader was switched out is the host's doing, not rcutrace's:
/// an emulated vCPU can stop for milliseconds between the module's clock read and its
/// switch (a 400 ms hold was blocked for 399.8 ms of it in a busy CI run), so the block is
/// checked against the hold's two ends, not against a length.
pub fn assert_blocked_reader(
    g: &GracePeriod,
    writer: u32,
    (start, end): (u64, u64),
) -> &LastHoldout {
    let h = g.last_holdout.as_ref().expect("a last holdout");
    assert_eq!(
        (h.kind.as_str(), h.pid, h.comm.as_deref()),
        ("task", Some(writer), Some("rcu-workload")),
        "{g:#?}"
    );
    let (at, blocked) = (
        h.blocked_at_ns.expect("when the reader blocked"),
        h.blocked_ns.expect("how long the reader was blocked"),
    );
    assert!(
        (start..=end).contains(&at),
        "blocked at {at}, outside the hold {start}..{end}: {g:#?}"
    );
    assert!(
        at + blocked >= end,
        "blocked until {}, before the hold ended at {end}: {g:#?}",
        at + blocked
    );
    assert!(
        h.stack
            .iter()
            .any(|f| f.starts_with("rcutrace_test_block_in_reader")),
        "{g:#?}"
    );
    assert!(g.blocked_readers.unwrap() >= 1, "{g:#?}");
    h
}

/// `stall`'s warnings about normal grace periods.
pub fn stall_warnings(records: &[Record]) -> Vec<&StallWarning> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::StallWarning(w) => Some(w),
            _ => None,
        })
        .collect()
}
