//! Boots the real Debian kernels under QEMU and checks the runner against real kernel behaviour.
//! Needs what scripts/setup installs (QEMU, busybox, target/kernels/{6.1,6.12}).

use std::time::Duration;

use xtask::vm::{self, GuestJob, Kernel};

fn kernel(series: &str) -> Kernel {
    Kernel::Series(series.to_string())
}

fn channels_are_separate(series: &str) {
    let script = "cat /proc/sys/kernel/osrelease\n\
                  grep -c ' __rcu_read_lock$' /proc/kallsyms\n\
                  echo 'to stderr' >&2\n\
                  exit 7\n";
    let out = vm::run(&GuestJob::new(kernel(series), script), false).unwrap();
    eprintln!(
        "{series}: boot {:?}, whole run {:?}",
        out.boot_time, out.elapsed
    );

    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "stdout: {:?}", out.stdout);
    assert!(
        lines[0].starts_with(&format!("{series}.")),
        "release {:?} is not {series}.*",
        lines[0]
    );
    // PREEMPT_RCU kernels have exactly one out-of-line __rcu_read_lock.
    assert_eq!(lines[1], "1", "stdout: {:?}", out.stdout);
    assert!(!out.stdout.contains('\r'), "stdout: {:?}", out.stdout);
    assert_eq!(out.stderr, "to stderr\n");
    assert_eq!(out.status, Some(7));
    // The job's output never reaches the kernel console.
    assert!(!out.console.contains("to stderr"), "{}", out.console);
    assert!(
        out.console.contains("xtask-vm: job start"),
        "{}",
        out.console
    );
    assert!(out.boot_time.is_some());
}

#[test]
fn channels_are_separate_6_1() {
    channels_are_separate("6.1");
}

#[test]
fn channels_are_separate_6_12() {
    channels_are_separate("6.12");
}

/// Debian's newest kernel (trixie-backports), fetched by scripts/setup beside the others.
#[test]
fn channels_are_separate_7_3() {
    channels_are_separate("7.3");
}

fn workload_runs(series: &str) {
    let workload = xtask::build::build_workload().unwrap();
    let script = "/bin/rcu-workload membarrier 20 && /bin/rcu-workload getppid 1000\n\
                  /bin/rcu-workload bogus; echo \"bad usage: $?\"\n\
                  /bin/rcu-workload background & pid=$!\n\
                  sleep 1; kill $pid; wait $pid; echo \"background: $?\"\n";
    let job = GuestJob::new(kernel(series), script).file(workload, "/bin/rcu-workload");
    let out = vm::run(&job, false).unwrap();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines.len(),
        7,
        "stdout: {}\nstderr: {}",
        out.stdout,
        out.stderr
    );
    assert_eq!(lines[0], "membarrier: 20");
    let number = |line: &str, key: &str| -> u64 {
        line.strip_prefix(key)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {key}: {}", out.stdout))
    };
    let slowest = number(lines[1], "slowest_ns: ");
    let elapsed = number(lines[2], "elapsed_ns: ");
    // The slowest call is one of the loop's; the loop slept through grace periods.
    assert!(slowest > 0 && slowest <= elapsed, "{}", out.stdout);
    assert!(number(lines[3], "cpu_ns: ") < elapsed, "{}", out.stdout);
    assert_eq!(
        lines[4..],
        ["getppid: 1000", "bad usage: 2", "background: 143"]
    );
    assert!(
        out.stderr.contains("unknown subcommand `bogus`"),
        "{}",
        out.stderr
    );
    assert_eq!(out.status, Some(0));
}

#[test]
fn workload_runs_6_1() {
    workload_runs("6.1");
}

#[test]
fn workload_runs_6_12() {
    workload_runs("6.12");
}

#[test]
fn workload_runs_7_3() {
    workload_runs("7.3");
}

#[test]
fn kernel_panic_is_an_error_with_the_console() {
    // sysrq 'c' crashes the kernel on purpose; panic=-1 then ends QEMU without a status.
    let job = GuestJob::new(kernel("6.12"), "echo c > /proc/sysrq-trigger\nsleep 60\n");
    let err = vm::run(&job, false).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("without reporting"), "{msg}");
    assert!(
        msg.contains("sysrq") || msg.contains("Kernel panic"),
        "{msg}"
    );
}

#[test]
fn timeout_kills_the_guest() {
    let mut job = GuestJob::new(kernel("6.12"), "sleep 600\n");
    job.timeout = Duration::from_secs(2);
    let err = vm::run(&job, false).unwrap_err();
    assert!(format!("{err:#}").contains("timed out"), "{err:#}");
}
