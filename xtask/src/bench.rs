//! `cargo xtask bench`: rcutrace against bpftrace and against no tracer, measured side by side
//! in one guest by the rcu-bench driver (`xtask/src/bin/rcu-bench.rs`), summarised as medians.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

use crate::vm::{self, GuestJob, Kernel, shell_quote};
use crate::{build, setup};

/// The seed's reader count, run by bpftrace exactly as written.
pub const BPFTRACE_COUNT: &str = "kprobe:__rcu_read_lock { @ = count(); }";
/// The seed's synchronize_rcu() latency script, run by bpftrace exactly as written.
pub const BPFTRACE_SRLAT: &str = "kprobe:synchronize_rcu { @start[tid] = nsecs; } \
kretprobe:synchronize_rcu /@start[tid]/ { @srlat = hist((nsecs - @start[tid]) / 1000000); \
delete(@start[tid]); }";

/// Debian's bpftrace, which scripts/setup --bench installs.
pub const HOST_BPFTRACE: &str = "/usr/bin/bpftrace";
/// The guest needs room for bpftrace's ~200 MB of libraries in its initramfs.
pub const DEFAULT_MEMORY_MB: u32 = 3072;
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
        // Per repetition: 3 getppid loops of up to ~5 us a call, 3 membarrier loops of up to
        // ~50 ms a call, two windows, and 8 tracer launches of up to ~10 s each.
        let rep = self.calls * 3 * 5_000 + self.membarriers * 3 * 50_000_000;
        let rep = Duration::from_nanos(rep) + Duration::from_secs(2 * self.window_secs + 80);
        let stats = Duration::from_nanos(self.calls * 5_000 + self.membarriers * 50_000_000)
            + Duration::from_secs(40);
        (rep * self.reps + stats) * 3 + Duration::from_secs(180)
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
            memory_mb: DEFAULT_MEMORY_MB,
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
                u64::from(DEFAULT_MEMORY_MB),
            ),
        ] {
            if value != default {
                let _ = write!(cmd, " {flag} {value}");
            }
        }
        cmd
    }
}

/// What one benchmark run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// `uname -r` in the guest.
    pub kernel_release: String,
    /// `info` lines from the driver: versions, sizes, programs, attach methods.
    pub info: Vec<String>,
    pub summary: Summary,
    /// Wall time of the whole guest run.
    pub elapsed: Duration,
}

/// Runs scripts/setup --bench, builds the guest binaries, boots the kernel once and runs the
/// driver in it. With `echo`, the driver's progress is shown as it happens.
pub fn run(opts: &Options, echo: bool) -> Result<Outcome> {
    setup::run_with(&["--bench"])?;
    let missing = vm::missing_host_tools();
    if !missing.is_empty() {
        bail!(
            "still missing after scripts/setup --bench: {}",
            missing.join(", ")
        );
    }
    if !Path::new(HOST_BPFTRACE).is_file() {
        bail!("{HOST_BPFTRACE} is missing after scripts/setup --bench");
    }
    opts.kernel.resolve()?;
    let (rcutrace, _workload) = build::build_all()?;
    let driver = build::build_bench()?;

    let s = opts.sizes;
    let script = format!(
        "/bin/rcu-bench --reps {} --calls {} --membarriers {} --window {} \
         --rcutrace /bin/rcutrace --bpftrace {HOST_BPFTRACE}\n",
        s.reps, s.calls, s.membarriers, s.window_secs
    );
    let job = GuestJob {
        kernel: opts.kernel.clone(),
        cpus: opts.cpus,
        memory_mb: opts.memory_mb,
        files: vec![
            (rcutrace, "/bin/rcutrace".into()),
            (driver, "/bin/rcu-bench".into()),
            (PathBuf::from(HOST_BPFTRACE), HOST_BPFTRACE.into()),
        ],
        script,
        timeout: opts.timeout.unwrap_or_else(|| s.timeout()),
    };
    let out = vm::run(&job, echo)?;
    if out.status != Some(0) {
        bail!(
            "the benchmark driver failed in the guest (status {:?}):\n{}",
            out.status,
            out.stderr.trim_end()
        );
    }
    let samples = Samples::parse(&out.stdout);
    let info: Vec<String> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("info "))
        .map(str::to_string)
        .collect();
    let kernel_release = info
        .iter()
        .find_map(|l| l.strip_prefix("kernel "))
        .context("the driver did not report the kernel release")?
        .to_string();
    Ok(Outcome {
        kernel_release,
        info,
        summary: Summary::new(&samples, s),
        elapsed: out.elapsed,
    })
}

/// Raw samples: `(metric, config)` to every value measured.
#[derive(Debug, Default, Clone)]
pub struct Samples(HashMap<(String, String), Vec<f64>>);

impl Samples {
    /// The driver's `sample METRIC CONFIG VALUE` lines.
    pub fn parse(stdout: &str) -> Self {
        let mut samples = Samples::default();
        for line in stdout.lines() {
            let mut words = line.split_whitespace();
            if words.next() != Some("sample") {
                continue;
            }
            if let (Some(metric), Some(config), Some(Ok(value)), None) = (
                words.next(),
                words.next(),
                words.next().map(str::parse::<f64>),
                words.next(),
            ) {
                samples.add(metric, config, value);
            }
        }
        samples
    }

    pub fn add(&mut self, metric: &str, config: &str, value: f64) {
        self.0
            .entry((metric.to_string(), config.to_string()))
            .or_default()
            .push(value);
    }

    /// The median of a metric's samples for a configuration.
    pub fn median(&self, metric: &str, config: &str) -> Option<f64> {
        median(self.0.get(&(metric.to_string(), config.to_string()))?)
    }
}

/// The median (the mean of the middle two for an even count); `None` for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

/// A target a row must meet.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// As written in the table, e.g. "≤ 0.5".
    pub text: &'static str,
    pub met: bool,
}

/// One line of the table: medians per configuration, and the rcutrace/bpftrace ratio.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub label: String,
    pub none: Option<f64>,
    pub rcutrace: Option<f64>,
    pub bpftrace: Option<f64>,
    pub ratio: Option<f64>,
    pub target: Option<Target>,
    /// Decimal places for the values.
    pub decimals: usize,
    /// Whether the row has a no-tracer figure and a ratio.
    pub has_baseline: bool,
    pub has_ratio: bool,
    /// Shown instead of a ratio that cannot be computed from measured figures.
    pub ratio_note: Option<&'static str>,
}

impl Row {
    fn new(label: impl Into<String>, decimals: usize) -> Self {
        Row {
            label: label.into(),
            none: None,
            rcutrace: None,
            bpftrace: None,
            ratio: None,
            target: None,
            decimals,
            has_baseline: false,
            has_ratio: false,
            ratio_note: None,
        }
    }

    /// The figures under each tracer.
    fn traced(mut self, rcutrace: Option<f64>, bpftrace: Option<f64>) -> Self {
        self.rcutrace = rcutrace;
        self.bpftrace = bpftrace;
        self
    }

    /// The figure with no tracer, for rows that have one.
    fn untraced(mut self, none: Option<f64>) -> Self {
        self.has_baseline = true;
        self.none = none;
        self
    }

    /// Fills the ratio column with rcutrace / bpftrace.
    fn with_ratio(mut self) -> Self {
        self.has_ratio = true;
        match (self.rcutrace, self.bpftrace) {
            (Some(_), Some(0.0)) => self.ratio_note = Some("n/a (÷ 0)"),
            (Some(r), Some(b)) => self.ratio = Some(r / b),
            _ => {}
        }
        self
    }

    /// As `with_ratio` for added costs, which only have a ratio when both stand out of the
    /// noise (are positive).
    fn with_ratio_of_added(self) -> Self {
        let mut row = self.with_ratio();
        if row.rcutrace.is_some_and(|r| r <= 0.0) || row.bpftrace.is_some_and(|b| b <= 0.0) {
            row.ratio = None;
            row.ratio_note = Some("n/a (within noise)");
        }
        row
    }

    /// Whether every cell the row has was measured.
    pub fn is_complete(&self) -> bool {
        let finite = |v: Option<f64>| v.is_some_and(f64::is_finite);
        finite(self.rcutrace)
            && finite(self.bpftrace)
            && (!self.has_baseline || finite(self.none))
            && (!self.has_ratio || finite(self.ratio) || self.ratio_note.is_some())
    }

    /// The ratio must be at most `limit`.
    fn ratio_at_most(mut self, limit: f64, text: &'static str) -> Self {
        self.target = Some(Target {
            text,
            met: self.ratio.is_some_and(|r| r <= limit),
        });
        self
    }
}

/// The medians the table shows, and the figures derived from them.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub sizes: Sizes,
    pub rows: Vec<Row>,
    /// Added ns per reader event outside the BPF program (the kprobe path), per tracer.
    pub reader_mechanism_ns: (Option<f64>, Option<f64>),
    /// The median of every `(metric, config)` measured.
    medians: HashMap<(String, String), f64>,
}

/// Labels of the rows whose targets the issue sets, for the summary under the table.
pub const ROW_READER_ADDED: &str = "Added per `__rcu_read_lock` event (ns)";
pub const ROW_STARTUP_COUNT: &str = "Start-up to attached, count (ms)";
pub const ROW_STARTUP_SRLAT: &str = "Start-up to attached, srlat (ms)";
pub const ROW_RSS_COUNT: &str = "Peak RSS, count (MiB)";
pub const ROW_RSS_SRLAT: &str = "Peak RSS, srlat (MiB)";
pub const ROW_USER_CPU_SHARE: &str = "User CPU, share of the whole count run (%)";

impl Summary {
    pub fn new(samples: &Samples, sizes: Sizes) -> Self {
        let m = |metric: &str, config: &str| samples.median(metric, config);
        let added = |metric: &str, tracer: &str| Some(m(metric, tracer)? - m(metric, "none")?);
        let per_event = |ns: Option<f64>| Some(ns? / m("events_per_call", "rcutrace")?);
        let mib = |config: &str| m("rss_kib", config).map(|k| k / 1024.0);
        let share = |tracer: &str| Some(m("run_utime_ms", tracer)? / (m("run_s", tracer)? * 10.0));
        let us = |v: Option<f64>| v.map(|v| v / 1e3);
        let window = sizes.window_secs;

        let reader_added = (
            per_event(added("getppid_ns", "rcutrace")),
            per_event(added("getppid_ns", "bpftrace")),
        );
        let reader_program = (
            m("program_ns", "rcutrace-count"),
            m("program_ns", "bpftrace-count"),
        );
        let mechanism = |added: Option<f64>, program: Option<f64>| Some(added? - program?);
        let reader_mechanism_ns = (
            mechanism(reader_added.0, reader_program.0),
            mechanism(reader_added.1, reader_program.1),
        );

        let rows = vec![
            Row::new("`getppid()` call (ns)", 1)
                .untraced(m("getppid_ns", "none"))
                .traced(m("getppid_ns", "rcutrace"), m("getppid_ns", "bpftrace")),
            Row::new("`__rcu_read_lock` events per `getppid()`", 3).traced(
                m("events_per_call", "rcutrace"),
                m("events_per_call", "bpftrace"),
            ),
            Row::new(ROW_READER_ADDED, 1)
                .traced(reader_added.0, reader_added.1)
                .with_ratio()
                .ratio_at_most(0.5, "≤ 0.5"),
            Row::new("BPF program time per `__rcu_read_lock` event (ns)", 1)
                .traced(reader_program.0, reader_program.1)
                .with_ratio(),
            Row::new(
                "Kprobe path per `__rcu_read_lock` event (added − program, ns)",
                1,
            )
            .traced(reader_mechanism_ns.0, reader_mechanism_ns.1)
            .with_ratio(),
            Row::new("`membarrier()` call, wall clock, mean (µs)", 1)
                .untraced(us(m("membarrier_wall_ns", "none")))
                .traced(
                    us(m("membarrier_wall_ns", "rcutrace")),
                    us(m("membarrier_wall_ns", "bpftrace")),
                ),
            Row::new("Added per `membarrier()` call, wall clock (µs)", 1)
                .traced(
                    us(added("membarrier_wall_ns", "rcutrace")),
                    us(added("membarrier_wall_ns", "bpftrace")),
                )
                .with_ratio_of_added(),
            Row::new("`membarrier()` call, caller's CPU time, median (µs)", 2)
                .untraced(us(m("membarrier_cpu_ns", "none")))
                .traced(
                    us(m("membarrier_cpu_ns", "rcutrace")),
                    us(m("membarrier_cpu_ns", "bpftrace")),
                ),
            Row::new("Added CPU per `synchronize_rcu()` call (ns)", 0)
                .traced(
                    added("membarrier_cpu_ns", "rcutrace"),
                    added("membarrier_cpu_ns", "bpftrace"),
                )
                .with_ratio(),
            Row::new("BPF program time per `synchronize_rcu()` call (ns)", 1)
                .traced(
                    m("program_ns", "rcutrace-srlat"),
                    m("program_ns", "bpftrace-srlat"),
                )
                .with_ratio(),
            Row::new(ROW_STARTUP_COUNT, 0)
                .traced(
                    m("startup_ms", "rcutrace-count"),
                    m("startup_ms", "bpftrace-count"),
                )
                .with_ratio()
                .ratio_at_most(0.1, "≤ 0.1"),
            Row::new(ROW_STARTUP_SRLAT, 0)
                .traced(
                    m("startup_ms", "rcutrace-srlat"),
                    m("startup_ms", "bpftrace-srlat"),
                )
                .with_ratio()
                .ratio_at_most(0.1, "≤ 0.1"),
            Row::new("Start-up to banner, count (ms)", 0)
                .traced(
                    m("banner_ms", "rcutrace-count"),
                    m("banner_ms", "bpftrace-count"),
                )
                .with_ratio(),
            Row::new("User CPU until attached, count (ms)", 0)
                .traced(
                    m("startup_utime_ms", "rcutrace-count"),
                    m("startup_utime_ms", "bpftrace-count"),
                )
                .with_ratio(),
            Row::new(ROW_RSS_COUNT, 1)
                .traced(mib("rcutrace-count"), mib("bpftrace-count"))
                .with_ratio()
                .ratio_at_most(0.1, "≤ 0.1"),
            Row::new(ROW_RSS_SRLAT, 1)
                .traced(mib("rcutrace-srlat"), mib("bpftrace-srlat"))
                .with_ratio()
                .ratio_at_most(0.1, "≤ 0.1"),
            Row::new(format!("User CPU, whole {window} s count run (ms)"), 0)
                .traced(m("run_utime_ms", "rcutrace"), m("run_utime_ms", "bpftrace"))
                .with_ratio(),
            {
                let mut row = Row::new(ROW_USER_CPU_SHARE, 2)
                    .traced(share("rcutrace"), share("bpftrace"))
                    .with_ratio();
                row.target = Some(Target {
                    text: "rcutrace < 1 %",
                    met: row.rcutrace.is_some_and(|s| s < 1.0),
                });
                row
            },
            Row::new(format!("User CPU while tracing, {window} s window (ms)"), 0)
                .traced(
                    m("window_utime_ms", "rcutrace"),
                    m("window_utime_ms", "bpftrace"),
                )
                .with_ratio(),
            Row::new(
                format!("CPU while tracing, user + system, {window} s window (ms)"),
                1,
            )
            .traced(
                m("window_cpu_ms", "rcutrace"),
                m("window_cpu_ms", "bpftrace"),
            )
            .with_ratio(),
        ];
        let medians = samples
            .0
            .iter()
            .filter_map(|(key, values)| Some((key.clone(), median(values)?)))
            .collect();
        Summary {
            sizes,
            rows,
            reader_mechanism_ns,
            medians,
        }
    }

    /// The median of a metric for a configuration.
    pub fn get(&self, metric: &str, config: &str) -> Option<f64> {
        self.medians
            .get(&(metric.to_string(), config.to_string()))
            .copied()
    }

    pub fn row(&self, label: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.label == label)
    }

    /// The table in Markdown (it reads as plain text too).
    pub fn table(&self) -> String {
        let mut out = format!(
            "| Median of {} | no tracer | rcutrace | bpftrace | rcutrace / bpftrace | target | met |\n\
             |---|--:|--:|--:|--:|:-:|:-:|\n",
            reps_text(self.sizes.reps)
        );
        for row in &self.rows {
            let value = |v: Option<f64>| v.map_or("".into(), |v| format!("{v:.*}", row.decimals));
            let ratio = match (row.ratio, row.ratio_note) {
                (Some(r), _) => format!("{r:.3}"),
                (None, Some(note)) => note.into(),
                (None, None) => String::new(),
            };
            let (target, met) = row
                .target
                .as_ref()
                .map_or(("", ""), |t| (t.text, if t.met { "yes" } else { "**no**" }));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {ratio} | {target} | {met} |",
                row.label,
                value(row.none),
                value(row.rcutrace),
                value(row.bpftrace),
            );
        }
        out
    }

    /// One line per target: met or not, and by how much.
    pub fn targets(&self) -> String {
        let mut out = String::new();
        for row in self.rows.iter().filter(|r| r.target.is_some()) {
            let target = row.target.as_ref().expect("filtered");
            let figure = if row.label == ROW_USER_CPU_SHARE {
                row.rcutrace
                    .map_or("not measured".into(), |v| format!("{v:.2} %"))
            } else {
                row.ratio
                    .map_or("not measured".into(), |r| format!("ratio {r:.3}"))
            };
            let _ = writeln!(
                out,
                "- {}: {figure}, target {}: {}",
                row.label,
                target.text,
                if target.met { "met" } else { "**missed**" }
            );
        }
        out
    }
}

fn reps_text(reps: u32) -> String {
    if reps == 1 {
        "1 run".into()
    } else {
        format!("{reps} runs")
    }
}

/// BENCHMARKS.md: the table, the kernel, the date, the command, and what the figures mean.
pub fn benchmarks_md(outcome: &Outcome, command: &str, date: &str) -> String {
    let summary = &outcome.summary;
    let sizes = summary.sizes;
    let info = |key: &str| {
        outcome
            .info
            .iter()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
            .unwrap_or("?")
    };
    let mut md = String::new();
    let _ = write!(
        md,
        "# Benchmarks\n\n\
         rcutrace against bpftrace and against no tracer, measured side by side in one guest.\n\
         This file is written by `cargo xtask bench` (full-size runs only); edit the generator in\n\
         `xtask/src/bench.rs`, not this file.\n\n\
         - Kernel: `{}` (Debian), {} CPUs, single-threaded QEMU software emulation (TCG)\n\
         - bpftrace: {} (Debian's package); rcutrace: {}\n\
         - Date: {date}; whole guest run {:.0} s\n\
         - Reproduce from a clean clone: `{command}`\n\n",
        outcome.kernel_release,
        info("cpus"),
        info("bpftrace"),
        info("rcutrace"),
        outcome.elapsed.as_secs_f64(),
    );
    md.push_str(&summary.table());
    md.push_str("\nTargets:\n\n");
    md.push_str(&summary.targets());
    md.push_str(&gap_notes(summary));
    let _ = write!(
        md,
        "\n## What was run\n\n\
         Each of the {reps} repetitions runs every configuration in turn (the order rotates between\n\
         repetitions, so drift and order effects hit all alike); every figure is the median over\n\
         the repetitions. Emulation inflates absolute times: the ratios, measured side by side in\n\
         one guest, are the figures that count.\n\n\
         - Reader path: {calls} raw `getppid()` calls, timed, with no tracer, under\n  \
         `rcutrace count --secs 0` and under bpftrace with the seed's reader count:\n\n  \
         ```\n  {count}\n  ```\n\n  \
         Added per event = (ns per call traced − ns per call untraced) / `__rcu_read_lock`\n  \
         events per call, the latter from rcutrace's count of the run.\n\
         - Latency path: {membarriers} `membarrier(MEMBARRIER_CMD_GLOBAL)` calls (one\n  \
         `synchronize_rcu()` each), timed by the clock and by the calling thread's CPU time, with no\n  \
         tracer, under `rcutrace srlat --secs 0` and under the seed's latency script:\n\n  \
         ```\n  {srlat}\n  ```\n\n  \
         The call sleeps for a grace period (a few scheduler ticks), so the probes' cost is lost\n  \
         in the wall time's noise. The caller's CPU time leaves the sleep out and shows that cost\n  \
         per `synchronize_rcu()` call directly (the entry and return probes run on the caller;\n  \
         the median call, after 3 untimed ones). These probes run cold, once per grace period,\n  \
         which under emulation costs far more than the reader probe in its tight loop.\n\
         - BPF program time: one more run of each tracer with `kernel.bpf_stats_enabled=1`, reading\n  \
         `run_time_ns` and `run_cnt` of its programs from `/proc/PID/fdinfo`: the program's own share\n  \
         of the added cost; the rest is the kprobe path both tracers share.\n\
         - Start-up: from launching the tracer until it is attached: its banner for rcutrace (printed\n  \
         after attaching), and for bpftrace (which prints its banner before attaching) its banner and\n  \
         its kprobes listed as enabled in `/sys/kernel/debug/kprobes/list`.\n\
         - Peak RSS and user CPU: `ru_maxrss` and `ru_utime` from `wait4()` after SIGINT. The CPU run\n  \
         traces for {window} s under a steady `getppid()` load; the share is of the tracer's whole\n  \
         life, start-up included. \"CPU while tracing\" is the tracer's time on a CPU (user and\n  \
         system, all threads, from `/proc/PID/task/*/schedstat`) during the {window} s window only.\n",
        reps = sizes.reps,
        calls = sizes.calls,
        membarriers = sizes.membarriers,
        window = sizes.window_secs,
        count = BPFTRACE_COUNT,
        srlat = BPFTRACE_SRLAT,
    );
    let attach: Vec<&String> = outcome
        .info
        .iter()
        .filter(|l| l.starts_with("attach "))
        .collect();
    if !attach.is_empty() {
        md.push_str("\nHow rcutrace attached (its `RUST_LOG=info` log):\n\n```\n");
        for line in attach {
            let _ = writeln!(md, "{}", line.trim_start_matches("attach "));
        }
        md.push_str("```\n");
    }
    md
}

/// For each missed target, the measured gap and what bounds it, from this run's figures.
fn gap_notes(summary: &Summary) -> String {
    let missed = |label: &str| {
        summary
            .row(label)
            .and_then(|r| r.target.as_ref())
            .is_some_and(|t| !t.met)
    };
    let get = |metric: &str, config: &str| summary.get(metric, config);
    let num = |v: Option<f64>, decimals: usize| v.map_or("?".into(), |v| format!("{v:.decimals$}"));
    let mut notes = Vec::new();

    if missed(ROW_READER_ADDED)
        && let Some(row) = summary.row(ROW_READER_ADDED)
    {
        let programs = summary
            .row("BPF program time per `__rcu_read_lock` event (ns)")
            .map_or((None, None), |r| (r.rcutrace, r.bpftrace));
        let (rt_path, bt_path) = summary.reader_mechanism_ns;
        let floor = match (rt_path, row.bpftrace) {
            (Some(path), Some(bt)) if bt > 0.0 => Some(path / bt),
            _ => None,
        };
        let verdict = match floor {
            Some(f) if f > 0.5 => format!(
                "Even a program that cost nothing would leave rcutrace at {f:.2} of bpftrace's \
                 added cost, so 0.5 cannot be reached while readers are counted through a \
                 kprobe; only a cheaper attach mechanism could."
            ),
            Some(f) => format!(
                "A free program would leave rcutrace at {f:.2} of bpftrace's added cost: the \
                 rest of the gap is in rcutrace's program."
            ),
            None => String::new(),
        };
        notes.push(format!(
            "Added cost per `__rcu_read_lock` event: ratio {}, target 0.5. Each event costs \
             rcutrace {} ns and bpftrace {} ns; the BPF programs themselves take {} ns and {} ns \
             (bpf_stats), and the rest, {} ns and {} ns, is the kprobe path both tracers pay \
             around their programs: the ftrace call, the kprobe handler, the perf-event \
             dispatch, and the `rcu_read_lock()` the kernel takes around every BPF program, \
             which re-enters the same kprobe and is skipped. {verdict}",
            num(row.ratio, 3),
            num(row.rcutrace, 0),
            num(row.bpftrace, 0),
            num(programs.0, 1),
            num(programs.1, 1),
            num(rt_path, 0),
            num(bt_path, 0),
        ));
    }

    if missed(ROW_STARTUP_COUNT) || missed(ROW_STARTUP_SRLAT) {
        let budget = get("startup_ms", "bpftrace-count").map(|b| b / 10.0);
        notes.push(format!(
            "Start-up: rcutrace count was attached after {} ms and srlat after {} ms, against \
             bpftrace's {} ms and {} ms; a tenth of bpftrace's count would be {} ms. \
             rcutrace's first probe was attached {} ms after launch (count, with \
             `RUST_LOG=info`). Before that, aya 0.14's loader parses the kernel's whole BTF \
             ({} MiB here) when it is created, whether or not the programs need it, and the \
             kernel verifies the programs; fentry and fexit then need the BTF parsed once more \
             (aya's `FEntry::load` takes a parsed `Btf`). Attaching the count probes (all but \
             the reader's by BPF trampoline, each patched into kernel text) takes the rest. \
             rcutrace reads `/proc/kallsyms` ({} ms for {} symbols in this guest) only to \
             explain an attach that failed. It used {} ms of user CPU until attached, bpftrace \
             {} ms (compiling its script with LLVM); under emulation the first run of any code \
             also pays for its translation.",
            num(get("startup_ms", "rcutrace-count"), 0),
            num(get("startup_ms", "rcutrace-srlat"), 0),
            num(get("startup_ms", "bpftrace-count"), 0),
            num(get("startup_ms", "bpftrace-srlat"), 0),
            num(budget, 0),
            num(get("first_attach_ms", "rcutrace-count"), 0),
            num(get("btf_kib", "kernel").map(|k| k / 1024.0), 1),
            num(get("kallsyms_read_ms", "kernel"), 0),
            num(get("kallsyms_lines", "kernel"), 0),
            num(get("startup_utime_ms", "rcutrace-count"), 0),
            num(get("startup_utime_ms", "bpftrace-count"), 0),
        ));
    }

    if missed(ROW_RSS_COUNT) || missed(ROW_RSS_SRLAT) {
        let mib = |config: &str| get("rss_kib", config).map(|k| k / 1024.0);
        notes.push(format!(
            "Peak RSS: rcutrace {} MiB (count) against bpftrace {} MiB; a tenth would be {} \
             MiB. When it loads the programs, aya reads the kernel's BTF ({} MiB here) and \
             parses all of it into memory, several times the file's size (measured apart on \
             Debian's 6.12: aya 0.14's `Btf::from_sys_fs()` alone took a 2 MiB test program to \
             19 MiB). That \
             is most of rcutrace's peak, and a peak stays even if the BTF is freed later.",
            num(mib("rcutrace-count"), 1),
            num(mib("bpftrace-count"), 1),
            num(mib("bpftrace-count").map(|b| b / 10.0), 1),
            num(get("btf_kib", "kernel").map(|k| k / 1024.0), 1),
        ));
    }

    if missed(ROW_USER_CPU_SHARE) {
        notes.push(format!(
            "User CPU: rcutrace used {} ms of user CPU in its whole run of {} s (1 % would be \
             {} ms), of which {} ms before it was attached and {} ms during the {} s tracing \
             window, where the kernel does all the counting; the rest is reading the maps and \
             detaching at exit. The share is start-up cost (see above), not a cost per second \
             of tracing.",
            num(get("run_utime_ms", "rcutrace"), 0),
            num(get("run_s", "rcutrace"), 1),
            num(get("run_s", "rcutrace").map(|s| s * 10.0), 0),
            num(get("startup_utime_ms", "rcutrace-count"), 0),
            num(get("window_utime_ms", "rcutrace"), 0),
            summary.sizes.window_secs,
        ));
    }

    if notes.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n## Gaps\n\n");
    for note in notes {
        let _ = writeln!(out, "- {note}");
    }
    out
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        / 86_400;
    date_of_day(days)
}

/// The proleptic Gregorian date `days` days after 1970-01-01.
fn date_of_day(mut days: u64) -> String {
    let leap = |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let mut year = 1970;
    loop {
        let len = if leap(year) { 366 } else { 365 };
        if days < len {
            break;
        }
        days -= len;
        year += 1;
    }
    let mut month = 1;
    for len in [
        31,
        if leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ] {
        if days < len {
            break;
        }
        days -= len;
        month += 1;
    }
    format!("{year:04}-{month:02}-{:02}", days + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 2.0]), Some(2.0));
    }

    #[test]
    fn dates() {
        assert_eq!(date_of_day(0), "1970-01-01");
        assert_eq!(date_of_day(31 + 28), "1970-03-01");
        // 2000 is a leap year, 2100 will not be.
        assert_eq!(date_of_day(11_016), "2000-02-29");
        assert_eq!(date_of_day(20_454), "2026-01-01");
        assert_eq!(date_of_day(47_540), "2100-02-28");
        assert_eq!(date_of_day(47_541), "2100-03-01");
    }

    fn samples() -> Samples {
        let text = "\
info kernel 6.12.0-test
sample getppid_ns none 400
sample getppid_ns none 420
sample getppid_ns rcutrace 1400
sample getppid_ns bpftrace 1600
sample events_per_call rcutrace 2.0
sample events_per_call bpftrace 2.0
sample program_ns rcutrace-count 50
sample program_ns bpftrace-count 150
sample program_ns rcutrace-srlat 120
sample program_ns bpftrace-srlat 400
sample membarrier_wall_ns none 10000000
sample membarrier_wall_ns rcutrace 10100000
sample membarrier_wall_ns bpftrace 10300000
sample membarrier_cpu_ns none 9000
sample membarrier_cpu_ns rcutrace 9500
sample membarrier_cpu_ns bpftrace 11000
sample startup_ms rcutrace-count 100
sample startup_ms bpftrace-count 3000
sample startup_ms rcutrace-srlat 90
sample startup_ms bpftrace-srlat 3200
sample banner_ms rcutrace-count 100
sample banner_ms bpftrace-count 2900
sample rss_kib rcutrace-count 8192
sample rss_kib bpftrace-count 102400
sample rss_kib rcutrace-srlat 8192
sample rss_kib bpftrace-srlat 104448
sample run_utime_ms rcutrace 30
sample run_utime_ms bpftrace 2500
sample run_s rcutrace 10.5
sample run_s bpftrace 14
sample window_cpu_ms rcutrace 1
sample window_cpu_ms bpftrace 20
sample window_utime_ms rcutrace 0
sample window_utime_ms bpftrace 10
sample startup_utime_ms rcutrace-count 20
sample startup_utime_ms bpftrace-count 1200
sample first_attach_ms rcutrace-count 60
sample kallsyms_read_ms kernel 250
sample kallsyms_lines kernel 150000
sample btf_kib kernel 4576
sample bogus line
";
        Samples::parse(text)
    }

    #[test]
    fn summary_rows_and_targets() {
        let summary = Summary::new(&samples(), Sizes::FULL);
        let reader = summary.row(ROW_READER_ADDED).unwrap();
        // (1400 - 410) / 2 and (1600 - 410) / 2.
        assert_eq!(reader.rcutrace, Some(495.0));
        assert_eq!(reader.bpftrace, Some(595.0));
        assert!(!reader.target.as_ref().unwrap().met);
        assert_eq!(summary.reader_mechanism_ns, (Some(445.0), Some(445.0)));
        let startup = summary.row(ROW_STARTUP_COUNT).unwrap();
        assert!((startup.ratio.unwrap() - 1.0 / 30.0).abs() < 1e-9);
        assert!(startup.target.as_ref().unwrap().met);
        assert_eq!(summary.row(ROW_RSS_COUNT).unwrap().rcutrace, Some(8.0));
        assert!(
            summary
                .row(ROW_RSS_SRLAT)
                .unwrap()
                .target
                .as_ref()
                .unwrap()
                .met
        );
        let share = summary.row(ROW_USER_CPU_SHARE).unwrap();
        assert!((share.rcutrace.unwrap() - 30.0 / 105.0).abs() < 1e-9);
        assert!(share.target.as_ref().unwrap().met);
        assert!(summary.rows.iter().all(Row::is_complete));

        let table = summary.table();
        assert_eq!(table.lines().count(), summary.rows.len() + 2);
        assert!(table.contains("| Median of 5 runs |"), "{table}");
        assert!(
            table.contains("| Added per `__rcu_read_lock` event (ns) |  | 495.0 | 595.0 | 0.832 | ≤ 0.5 | **no** |"),
            "{table}"
        );
        let targets = summary.targets();
        assert_eq!(targets.lines().count(), 6, "{targets}");
        assert!(
            targets
                .contains("share of the whole count run (%): 0.29 %, target rcutrace < 1 %: met"),
            "{targets}"
        );
    }

    #[test]
    fn ratios_of_noise_and_zero_are_not_computed() {
        let row = Row::new("added", 1)
            .traced(Some(-6.0), Some(37.0))
            .with_ratio_of_added();
        assert_eq!(row.ratio, None);
        assert!(row.is_complete());
        let row = Row::new("cpu", 0).traced(Some(0.0), Some(0.0)).with_ratio();
        assert_eq!((row.ratio, row.ratio_note), (None, Some("n/a (÷ 0)")));
        assert!(row.is_complete());
        let summary = Summary {
            rows: vec![row],
            ..Summary::new(&Samples::default(), Sizes::FULL)
        };
        assert!(
            summary
                .table()
                .contains("| cpu |  | 0 | 0 | n/a (÷ 0) |  |  |")
        );
    }

    #[test]
    fn missing_samples_leave_cells_empty() {
        let summary = Summary::new(&Samples::default(), Sizes::FULL);
        assert!(summary.rows.iter().all(|r| r.rcutrace.is_none()));
        assert!(!summary.rows.iter().any(Row::is_complete));
        let startup = summary.row(ROW_STARTUP_COUNT).unwrap();
        assert!(!startup.target.as_ref().unwrap().met);
        assert!(summary.targets().contains("not measured"));
    }

    #[test]
    fn document_names_kernel_command_and_gap() {
        let outcome = Outcome {
            kernel_release: "6.12.0-test".into(),
            info: vec![
                "kernel 6.12.0-test".into(),
                "cpus 2".into(),
                "bpftrace bpftrace v0.17.0".into(),
                "attach rcutrace-count [INFO rcutrace::tracer] __rcu_read_lock: attached by kprobe"
                    .into(),
            ],
            summary: Summary::new(&samples(), Sizes::FULL),
            elapsed: Duration::from_secs(300),
        };
        let opts = Options::new(Kernel::Series("6.12".into()), Sizes::FULL);
        assert_eq!(opts.command(), "cargo xtask bench --kernel 6.12");
        let md = benchmarks_md(&outcome, &opts.command(), "2026-11-30");
        assert!(md.contains("- Kernel: `6.12.0-test`"), "{md}");
        assert!(md.contains("`cargo xtask bench --kernel 6.12`"), "{md}");
        assert!(md.contains(BPFTRACE_COUNT) && md.contains(BPFTRACE_SRLAT));
        assert!(md.contains("## Gaps"), "{md}");
        assert!(
            md.contains("Added cost per `__rcu_read_lock` event: ratio 0.832"),
            "{md}"
        );
        assert!(md.contains("__rcu_read_lock: attached by kprobe"), "{md}");
    }

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

    #[test]
    fn scripts_are_the_seeds() {
        assert_eq!(BPFTRACE_COUNT, "kprobe:__rcu_read_lock { @ = count(); }");
        assert_eq!(
            BPFTRACE_SRLAT,
            "kprobe:synchronize_rcu { @start[tid] = nsecs; } kretprobe:synchronize_rcu \
             /@start[tid]/ { @srlat = hist((nsecs - @start[tid]) / 1000000); delete(@start[tid]); }"
        );
    }
}
