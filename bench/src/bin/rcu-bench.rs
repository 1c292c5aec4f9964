//! Guest-side driver for `cargo xtask bench`: times RCU-heavy system calls with no tracer, under
//! rcutrace and under bpftrace, in one boot, and prints raw samples for the host to summarise.
//! Its command line and the order of the measurements are here; the measurements themselves
//! are in `rcu_bench::guest`.

use std::process::exit;
use std::time::Duration;

use rcu_bench::NAMESPACE_TRACERS;
use rcu_bench::guest::procfs::set_bpf_stats;
use rcu_bench::guest::{Options, phases, rotated};
use rcu_bench::sample::{Job, Load, Tracer, Watcher};

const USAGE: &str = "\
rcu-bench: measures rcutrace against bpftrace and against no tracer (run as root in the guest)

USAGE:
    rcu-bench [--reps R] [--calls N] [--membarriers M] [--window SECS]
              [--rcutrace PATH] [--bpftrace PATH] [--scaling]

Each repetition runs, for no tracer, `rcutrace count`, bpftrace's reader count and an empty
kprobe on __rcu_read_lock (the order rotates from one repetition to the next):
    N getppid() calls (readers), timed;
then, for no tracer, `rcutrace srlat` (with --attach auto, kprobe and fentry), bpftrace's
synchronize_rcu() latency script and empty programs on synchronize_rcu()'s entry and return
(kprobe + kretprobe, kprobe + fexit, fentry + fexit):
    M membarrier(MEMBARRIER_CMD_GLOBAL) calls, timed by the clock and by the caller's CPU time;
then each tracer's count for SECS seconds under a getppid() load, for its CPU time;
then `rcutrace gp --secs 0` and `rcutrace stall`, each for SECS seconds on the idle guest and
under the getppid() load, with /proc/sys/kernel/bpf_stats_enabled set: the CPU each adds (its
threads' time on a CPU and its BPF programs' run time), per second and per context switch;
then the footprint of count, srlat, callbacks, gp and stall: the RCU updater calls and grace
periods one run of each causes by its start and exit, counted by a bpftrace referee (kprobes
on every RCU updater function the kernel has) less the idle guest's own rate, for rcutrace and
for bpftrace hooking what rcutrace hooked.
A last pass with /proc/sys/kernel/bpf_stats_enabled set reads each one's BPF program time,
checks that its programs ran for every timed call, and that rcutrace attached as expected.
The empty programs are bpftrace scripts with empty blocks.

With --scaling, only what grows with the CPU count, for a guest of few CPUs and one of many:
each repetition launches `rcutrace count` (with its start-up timing marks) and bpftrace's
reader count, each stopped once attached; runs `rcutrace count --interval 1` for SECS seconds
for the CPU it uses per report; and `rcutrace gp --secs 0` and `rcutrace stall` for SECS
seconds each on the idle guest, with bpf_stats on.

Every tracer launch is timed until attached (its banner, and for a kprobe its entry in
/sys/kernel/debug/kprobes/list), then stopped with SIGINT and reaped with wait4() for its peak
RSS and CPU time. Output: `sample METRIC CONFIG VALUE` and `info KEY VALUE...` lines on stdout,
progress on stderr.

Defaults: --reps 5 --calls 1000000 --membarriers 100 --window 10
          --rcutrace /bin/rcutrace --bpftrace /usr/bin/bpftrace
";

fn main() {
    let opts = parse_args();
    if let Err(e) = bench(&opts) {
        eprintln!("rcu-bench: error: {e}");
        exit(1);
    }
}

fn usage_error(msg: &str) -> ! {
    eprintln!("rcu-bench: {msg}\n(rcu-bench --help for usage)");
    exit(2)
}

fn parse_args() -> Options {
    let mut opts = Options {
        reps: 5,
        calls: 1_000_000,
        membarriers: 100,
        window: Duration::from_secs(10),
        rcutrace: "/bin/rcutrace".into(),
        bpftrace: "/usr/bin/bpftrace".into(),
        scaling: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            print!("{USAGE}");
            exit(0);
        }
        if flag == "--scaling" {
            opts.scaling = true;
            continue;
        }
        let Some(value) = args.next() else {
            usage_error(&format!("`{flag}` needs a value"))
        };
        let number = |v: &str| -> u64 {
            v.parse()
                .ok()
                .filter(|n| *n > 0)
                .unwrap_or_else(|| usage_error(&format!("{flag} needs a positive integer")))
        };
        match flag.as_str() {
            "--reps" => {
                opts.reps = u32::try_from(number(&value))
                    .unwrap_or_else(|_| usage_error("--reps is too large"))
            }
            "--calls" => opts.calls = number(&value),
            "--membarriers" => opts.membarriers = number(&value),
            "--window" => opts.window = Duration::from_secs(number(&value)),
            "--rcutrace" => opts.rcutrace = value,
            "--bpftrace" => opts.bpftrace = value,
            _ => usage_error(&format!("unknown option `{flag}`")),
        }
    }
    opts
}

fn bench(opts: &Options) -> Result<(), String> {
    phases::begin(opts)?;
    if opts.scaling {
        return scaling(opts);
    }

    for rep in 0..opts.reps {
        let tag = format!("[{}/{}]", rep + 1, opts.reps);
        phases::kernel_facts();
        for tracer in rotated(Job::Count.tracers(), rep) {
            phases::reader_path(opts, tracer, &tag)?;
        }
        for tracer in rotated(Job::Srlat.tracers(), rep) {
            phases::latency_path(opts, tracer, &tag)?;
        }
        for tracer in rotated(&[Tracer::RCUTRACE, Tracer::Bpftrace], rep) {
            phases::cpu_window(opts, tracer, &tag)?;
        }
        phases::sampled_readers(opts, &tag)?;
        phases::stall_startup(opts, &tag)?;
        // Their programs' run time is part of what they add: bpf_stats on for these windows.
        set_bpf_stats(true)?;
        let watched = rotated(&Watcher::ALL, rep)
            .into_iter()
            .try_for_each(|watcher| {
                Load::ALL
                    .into_iter()
                    .try_for_each(|load| phases::watching(opts, watcher, load, &tag))
            });
        set_bpf_stats(false)?;
        watched?;
        phases::footprints(opts, rep, &tag)?;
        for tracer in rotated(&NAMESPACE_TRACERS, rep) {
            phases::namespace_load(opts, tracer, &tag)?;
        }
    }
    set_bpf_stats(true)?;
    let result = phases::program_times(opts);
    set_bpf_stats(false)?;
    result
}

/// What grows with the CPU count (`--scaling`), in the order of the full run's.
fn scaling(opts: &Options) -> Result<(), String> {
    for rep in 0..opts.reps {
        let tag = format!("[{}/{}]", rep + 1, opts.reps);
        phases::kernel_facts();
        for tracer in rotated(&[Tracer::RCUTRACE, Tracer::Bpftrace], rep) {
            phases::count_startup(opts, tracer, &tag)?;
        }
        phases::interval_reports(opts, &tag)?;
        set_bpf_stats(true)?;
        let watched = rotated(&Watcher::ALL, rep)
            .into_iter()
            .try_for_each(|watcher| phases::watching(opts, watcher, Load::Idle, &tag));
        set_bpf_stats(false)?;
        watched?;
    }
    Ok(())
}
