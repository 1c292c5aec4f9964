//! The benchmark behind `cargo xtask bench`: rcutrace against bpftrace and against no tracer,
//! measured side by side in one guest by the rcu-bench driver (`bench/src/bin/rcu-bench.rs`),
//! summarised as medians. The host side is run by the `bench` binary (`bench/src/main.rs`,
//! which `cargo xtask bench` hands over to); `guest` holds the driver's measurements.
//!
//! One job per file: `run` boots the guest and runs the driver, `sample` is the line format
//! both ends share (metrics, configurations, the attach mechanisms they name), `floor` the
//! empty programs that measure each attach mechanism's own cost, `footprint` the RCU work a
//! tracer's start and exit cause, `marks` rcutrace's start-up timing marks, `stats` the median,
//! `table` the rows and their targets, `prose` BENCHMARKS.md around the table, `previous` this
//! run against the table it replaces, `date` its date stamp; `scaling` is what grows with the
//! CPU count (`--scaling`).

mod date;
pub mod document;
pub mod floor;
pub mod footprint;
pub mod guest;
pub mod marks;
mod previous;
mod prose;
mod run;
pub mod sample;
pub mod scaling;
pub mod stats;
mod table;

use std::fmt::Write as _;
use std::time::Duration;

use sample::{Job, Load, Tracer, Watcher};
use xtask::vm::{self, BPFTRACE_MEMORY_MB, Kernel, shell_quote};

pub use date::today;
pub use previous::against as against_previous;
pub use prose::{benchmarks_md, scaling_md};
pub use run::{Outcome, ScalingOutcome, replay, run, run_scaling};
pub use table::{Row, RowId, Summary, Target};

/// How the benchmark samples readers (`rcutrace count --sample-readers`): 5% of the time, in
/// windows as short as rcutrace allows.
pub const SAMPLE_READERS: &str = "100/2000";

/// Network namespaces each run of the namespace load creates and drops.
pub const NAMESPACES: u64 = 20;

/// The tracers of the namespace load, in the order of the first repetition: none,
/// `rcutrace run`, `rcutrace srlat -c` on the same functions, and bpftrace timing them.
pub const NAMESPACE_TRACERS: [Tracer; 4] = [
    Tracer::None,
    Tracer::RcutraceRun,
    Tracer::RcutraceSrlatCommand,
    Tracer::Bpftrace,
];

/// bpftrace's nearest to `rcutrace run`: each of `functions` timed by its caller's kernel
/// stack, system-wide (bpftrace cannot follow a command's work), for `-c LOAD`.
pub fn bpftrace_waits_script(functions: &[&str]) -> String {
    functions
        .iter()
        .map(|f| {
            format!(
                "kprobe:{f} {{ @start_{f}[tid] = nsecs; }} \
                 kretprobe:{f} /@start_{f}[tid]/ {{ @{f}[kstack] = \
                 hist(nsecs - @start_{f}[tid]); delete(@start_{f}[tid]); }}"
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// User-space work per getppid() call in the paced load, where readers are a small part of
/// the work (as on most machines), so that the probe slowing the readers it samples barely
/// changes the load.
pub const PACED_WORK: Duration = Duration::from_micros(200);

/// Pause before launching a tracer (the kernel may still be freeing the last one's probes) and
/// between attaching and the timed work (so a tracer's own start-up tail is not timed).
pub const SETTLE: Duration = Duration::from_millis(300);

/// How long an always-on command runs before its window: it reads a snapshot of the kernel's
/// symbols as tracing begins (most of a second of CPU in a 64-CPU guest), a cost of its
/// start, not of the hours it then runs.
pub const WATCH_SETTLE: Duration = Duration::from_secs(5);

/// Untimed membarrier() calls before a timed loop: the first calls after a probe is patched in
/// pay for emulating freshly changed code, which is the emulator's cost, not the probe's.
pub const MEMBARRIER_WARMUP: u64 = 3;

/// Where the latest full-size table is kept, relative to the workspace root.
pub const BENCHMARKS_MD: &str = "BENCHMARKS.md";

/// How much work each measurement does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Repetitions of every measurement; medians are quoted.
    pub reps: u32,
    /// getppid() calls per reader-path measurement.
    pub calls: u64,
    /// membarrier() calls per latency-path measurement.
    pub membarriers: u64,
    /// Seconds of each tracer's CPU-time run.
    pub window_secs: u64,
}

impl Sizes {
    /// The sizes of a run worth recording in BENCHMARKS.md.
    pub const FULL: Sizes = Sizes {
        reps: 5,
        calls: 1_000_000,
        membarriers: 100,
        window_secs: 10,
    };

    /// At least the full sizes everywhere.
    pub fn is_full(&self) -> bool {
        self.reps >= Self::FULL.reps
            && self.calls >= Self::FULL.calls
            && self.membarriers >= Self::FULL.membarriers
            && self.window_secs >= Self::FULL.window_secs
    }

    /// A generous limit for the whole guest run: emulation is slow, and the machine may be busy.
    pub fn timeout(&self) -> Duration {
        let tracers = |job: Job| job.tracers().len() as u64;
        let (readers, updaters) = (tracers(Job::Count), tracers(Job::Srlat));
        // Per repetition: a getppid loop of up to ~5 us a call and a membarrier loop of up to
        // ~50 ms a call per configuration, two windows, and up to ~10 s per tracer launch.
        let loops = |readers: u64, updaters: u64| {
            Duration::from_nanos(self.calls * readers * 5_000)
                + Duration::from_nanos(self.membarriers * updaters * 50_000_000)
        };
        // The sampled readers: four windows (a load alone, and three tracer runs).
        let launches = readers + updaters - 2 + 3;
        // The always-on commands: a window each, on the idle guest and under the load.
        let watches = (Watcher::ALL.len() * Load::ALL.len()) as u64;
        // The footprints: an idle window and a run of each command under both tracers, each
        // up to ~20 s with its tail, and the referee's own start.
        let footprints = footprint::IDLE_WINDOW
            + Duration::from_secs(30 + 2 * footprint::Footprinted::ALL.len() as u64 * 20);
        // The namespace load: four runs, each a launch and up to ~20 s of load and its tail.
        let namespaces = Duration::from_secs(4 * 30);
        let rep = loops(readers, updaters)
            + Duration::from_secs((6 + watches) * self.window_secs + 10 * (launches + watches + 2))
            + footprints
            + namespaces;
        // The bpf_stats pass: every tracer once.
        let stats = loops(readers - 1, updaters - 1) + Duration::from_secs(10 * launches);
        (rep * self.reps + stats) * 3 + Duration::from_secs(180)
    }
}

impl Sizes {
    /// A generous limit for one guest of a scaling run (`--scaling`): per repetition two
    /// launches, an interval run and two watches, each up to a window and ~30 s of start and
    /// stop, slower in a guest of many CPUs.
    pub fn scaling_timeout(&self) -> Duration {
        let rep = Duration::from_secs(5 * (self.window_secs + 30));
        rep * self.reps * 4 + Duration::from_secs(300)
    }
}

/// Everything `cargo xtask bench` needs to know.
#[derive(Debug, Clone)]
pub struct Options {
    pub kernel: Kernel,
    pub sizes: Sizes,
    pub cpus: u32,
    pub memory_mb: u32,
    /// Kill the guest after this long; `None`: from the sizes.
    pub timeout: Option<Duration>,
}

impl Options {
    pub fn new(kernel: Kernel, sizes: Sizes) -> Self {
        Options {
            kernel,
            sizes,
            cpus: vm::DEFAULT_CPUS,
            memory_mb: BPFTRACE_MEMORY_MB,
            timeout: None,
        }
    }

    /// The command line that repeats this run, for BENCHMARKS.md.
    pub fn command(&self) -> String {
        let mut cmd = String::from("cargo xtask bench");
        let kernel = match &self.kernel {
            Kernel::Series(series) => series.clone(),
            // A host path means nothing elsewhere: name the image only.
            Kernel::Path(path) => format!(
                "PATH/TO/{}",
                path.file_name()
                    .map_or_else(|| "vmlinuz".into(), |n| n.to_string_lossy().into_owned())
            ),
        };
        let _ = write!(cmd, " --kernel {}", shell_quote(&kernel));
        let (s, full) = (self.sizes, Sizes::FULL);
        for (flag, value, default) in [
            ("--reps", u64::from(s.reps), u64::from(full.reps)),
            ("--calls", s.calls, full.calls),
            ("--membarriers", s.membarriers, full.membarriers),
            ("--window", s.window_secs, full.window_secs),
            ("--cpus", u64::from(self.cpus), u64::from(vm::DEFAULT_CPUS)),
            (
                "--memory-mb",
                u64::from(self.memory_mb),
                u64::from(BPFTRACE_MEMORY_MB),
            ),
        ] {
            if value != default {
                let _ = write!(cmd, " {flag} {value}");
            }
        }
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_sizes() {
        let mut opts = Options::new(
            Kernel::Path("/somewhere/vmlinuz-6.12.9".into()),
            Sizes {
                reps: 1,
                ..Sizes::FULL
            },
        );
        opts.cpus = 4;
        assert_eq!(
            opts.command(),
            "cargo xtask bench --kernel PATH/TO/vmlinuz-6.12.9 --reps 1 --cpus 4"
        );
        assert!(Sizes::FULL.is_full());
        assert!(!opts.sizes.is_full());
        assert!(Sizes::FULL.timeout() > Duration::from_secs(600));
    }
}
