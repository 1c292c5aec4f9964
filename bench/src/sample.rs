//! What the guest driver measures and how it tells the host: `sample METRIC CONFIG VALUE`
//! lines, written and read through the same types, so that the two ends cannot disagree on a
//! name.
//!
//! The attach mechanisms (`Mechanism`, and the `Hook`s each puts on a function) are here too:
//! a configuration names them, and `floor` builds its empty programs from them.

use std::collections::HashMap;

pub use crate::footprint::{Family, Footprinted};
use crate::stats::median;

/// Everything the guest driver measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Wall-clock ns per getppid() call.
    GetppidNs,
    /// `__rcu_read_lock` events a tracer counted per getppid() call.
    EventsPerCall,
    /// Wall-clock ns per membarrier() call (mean).
    MembarrierWallNs,
    /// The calling thread's CPU ns per membarrier() call (median).
    MembarrierCpuNs,
    /// Time the tracer's BPF programs ran per event (bpf_stats).
    ProgramNs,
    /// From launch until attached.
    StartupMs,
    /// From launch until the banner.
    BannerMs,
    /// User CPU from launch until attached.
    StartupUtimeMs,
    /// From launch until the first probe was attached (rcutrace's log).
    FirstAttachMs,
    /// Start-up phases from rcutrace's timing marks (see `marks`): the BTF pass, the object's
    /// load, attaching every probe; the attaches, the shortest and the longest.
    StartupBtfPassMs,
    StartupObjectMs,
    StartupAttachingMs,
    Attaches,
    AttachMinMs,
    AttachMaxMs,
    /// The object's programs given to aya, and all it holds.
    ProgramsKept,
    ProgramsInObject,
    /// The kernel's CPU for one attach (the attaching thread's system time across it, from
    /// the marks): the shortest, the median and the longest.
    AttachSystemMinMs,
    AttachSystemMedianMs,
    AttachSystemMaxMs,
    /// The start's one pass over /proc/kallsyms: its thread's CPU (user and system), and how
    /// long the window's opening waited for it once every probe was attached.
    KallsymsPassCpuMs,
    KallsymsWaitMs,
    /// The attaching thread's own CPU (user) and the kernel's for it (system) over all the
    /// attaches, from the object loaded to the last probe attached.
    AttachingUserMs,
    AttachingSystemMs,
    /// Functions ftrace can patch (`available_filter_functions`): each kprobe or trampoline
    /// attached updates ftrace's code, which walks every one of their records.
    FtraceRecords,
    /// Peak RSS.
    RssKib,
    /// From SIGINT until the tracer was reaped: its report, its detaching and its exit.
    ExitMs,
    /// The CPU `rcutrace count --interval 1` uses per report (its threads, user and system).
    IntervalCpuMs,
    /// Of that, reading the counters (the median report, as rcutrace logs it).
    IntervalReadMs,
    /// Of the reading, the per-CPU arrays (a value per CPU for each slot read).
    IntervalArraysMs,
    /// User CPU over the tracer's whole run.
    RunUtimeMs,
    /// The tracer's whole run, launch to exit.
    RunS,
    /// User and system CPU of all the tracer's threads during the window only.
    WindowCpuMs,
    /// User CPU during the window only.
    WindowUtimeMs,
    /// Time to read /proc/kallsyms once.
    KallsymsReadMs,
    /// Lines of /proc/kallsyms.
    KallsymsLines,
    /// Size of the kernel's BTF.
    BtfKib,
    /// Wall-clock ns per getppid() call of a steady load on a thread of its own, over a
    /// tracer's window (the sampled reader mode needs many of its periods).
    LoadGetppidNs,
    /// `__rcu_read_lock` events per getppid() call of the paced load, from the readers per
    /// second a tracer reported (counted, or estimated by the sampled reader mode) and the
    /// calls per second the load made meanwhile.
    PacedEventsPerCall,
    /// The sampled reader mode's stated 95% margin under the paced load, % of its estimate.
    SampledMarginPct,
    /// getppid() calls per second the paced load made while a tracer ran.
    PacedCallsPerS,
    /// The paced load's calls per second inside the sampled reader mode's windows over its
    /// calls per second over the whole measured run.
    PacedWindowSpeed,
    /// An always-on command's added CPU over its window, % of one CPU: its threads' time on a
    /// CPU plus its BPF programs' run time (bpf_stats), per second of the window.
    AddedCpuPct,
    /// The same added CPU per context switch the guest made over the window (/proc/stat).
    AddedNsPerSwitch,
    /// The BPF programs' run time over the window (bpf_stats).
    WindowProgramMs,
    /// The BPF programs' runs per second of the window.
    ProgramRunsPerS,
    /// The guest's context switches per second of the window.
    SwitchesPerS,
    /// Times per second of the window the tracer's threads were put on a CPU (schedstat).
    TracerRunsPerS,
    /// The calls of one family of RCU functions that one run of a tracer caused, by its start
    /// and exit (see `footprint`).
    Footprint(Family),
    /// Wall-clock ns per network namespace created and dropped (`rcu-workload netns`), as
    /// the load timed itself.
    NetnsNs,
}

impl Metric {
    pub const ALL: [Metric; 53] = [
        Metric::GetppidNs,
        Metric::EventsPerCall,
        Metric::MembarrierWallNs,
        Metric::MembarrierCpuNs,
        Metric::ProgramNs,
        Metric::StartupMs,
        Metric::BannerMs,
        Metric::StartupUtimeMs,
        Metric::FirstAttachMs,
        Metric::StartupBtfPassMs,
        Metric::StartupObjectMs,
        Metric::StartupAttachingMs,
        Metric::Attaches,
        Metric::AttachMinMs,
        Metric::AttachMaxMs,
        Metric::ProgramsKept,
        Metric::ProgramsInObject,
        Metric::AttachSystemMinMs,
        Metric::AttachSystemMedianMs,
        Metric::AttachSystemMaxMs,
        Metric::KallsymsPassCpuMs,
        Metric::KallsymsWaitMs,
        Metric::AttachingUserMs,
        Metric::AttachingSystemMs,
        Metric::FtraceRecords,
        Metric::RssKib,
        Metric::ExitMs,
        Metric::IntervalCpuMs,
        Metric::IntervalReadMs,
        Metric::IntervalArraysMs,
        Metric::RunUtimeMs,
        Metric::RunS,
        Metric::WindowCpuMs,
        Metric::WindowUtimeMs,
        Metric::KallsymsReadMs,
        Metric::KallsymsLines,
        Metric::BtfKib,
        Metric::LoadGetppidNs,
        Metric::PacedEventsPerCall,
        Metric::SampledMarginPct,
        Metric::PacedCallsPerS,
        Metric::PacedWindowSpeed,
        Metric::AddedCpuPct,
        Metric::AddedNsPerSwitch,
        Metric::WindowProgramMs,
        Metric::ProgramRunsPerS,
        Metric::SwitchesPerS,
        Metric::TracerRunsPerS,
        Metric::Footprint(Family::Queued),
        Metric::Footprint(Family::Kvfree),
        Metric::Footprint(Family::Waits),
        Metric::Footprint(Family::GracePeriods),
        Metric::NetnsNs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::GetppidNs => "getppid_ns",
            Metric::EventsPerCall => "events_per_call",
            Metric::MembarrierWallNs => "membarrier_wall_ns",
            Metric::MembarrierCpuNs => "membarrier_cpu_ns",
            Metric::ProgramNs => "program_ns",
            Metric::StartupMs => "startup_ms",
            Metric::BannerMs => "banner_ms",
            Metric::StartupUtimeMs => "startup_utime_ms",
            Metric::FirstAttachMs => "first_attach_ms",
            Metric::StartupBtfPassMs => "startup_btf_pass_ms",
            Metric::StartupObjectMs => "startup_object_ms",
            Metric::StartupAttachingMs => "startup_attaching_ms",
            Metric::Attaches => "attaches",
            Metric::AttachMinMs => "attach_min_ms",
            Metric::AttachMaxMs => "attach_max_ms",
            Metric::ProgramsKept => "programs_kept",
            Metric::ProgramsInObject => "programs_in_object",
            Metric::AttachSystemMinMs => "attach_system_min_ms",
            Metric::AttachSystemMedianMs => "attach_system_median_ms",
            Metric::AttachSystemMaxMs => "attach_system_max_ms",
            Metric::KallsymsPassCpuMs => "kallsyms_pass_cpu_ms",
            Metric::KallsymsWaitMs => "kallsyms_wait_ms",
            Metric::AttachingUserMs => "attaching_user_ms",
            Metric::AttachingSystemMs => "attaching_system_ms",
            Metric::FtraceRecords => "ftrace_records",
            Metric::RssKib => "rss_kib",
            Metric::ExitMs => "exit_ms",
            Metric::IntervalCpuMs => "interval_cpu_ms",
            Metric::IntervalReadMs => "interval_read_ms",
            Metric::IntervalArraysMs => "interval_arrays_ms",
            Metric::RunUtimeMs => "run_utime_ms",
            Metric::RunS => "run_s",
            Metric::WindowCpuMs => "window_cpu_ms",
            Metric::WindowUtimeMs => "window_utime_ms",
            Metric::KallsymsReadMs => "kallsyms_read_ms",
            Metric::KallsymsLines => "kallsyms_lines",
            Metric::BtfKib => "btf_kib",
            Metric::LoadGetppidNs => "load_getppid_ns",
            Metric::PacedEventsPerCall => "paced_events_per_call",
            Metric::SampledMarginPct => "sampled_margin_pct",
            Metric::PacedCallsPerS => "paced_calls_per_s",
            Metric::PacedWindowSpeed => "paced_window_speed",
            Metric::AddedCpuPct => "added_cpu_pct",
            Metric::AddedNsPerSwitch => "added_ns_per_switch",
            Metric::WindowProgramMs => "window_program_ms",
            Metric::ProgramRunsPerS => "program_runs_per_s",
            Metric::SwitchesPerS => "switches_per_s",
            Metric::TracerRunsPerS => "tracer_runs_per_s",
            Metric::Footprint(Family::Queued) => "footprint_queued",
            Metric::Footprint(Family::Kvfree) => "footprint_kvfree",
            Metric::Footprint(Family::Waits) => "footprint_waits",
            Metric::Footprint(Family::GracePeriods) => "footprint_grace_periods",
            Metric::NetnsNs => "netns_ns",
        }
    }

    fn from_name(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// Who traces during a measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tracer {
    None,
    /// rcutrace with an `--attach` choice (`Auto` is what a user gets).
    Rcutrace(Attach),
    /// bpftrace running the seed's scripts.
    Bpftrace,
    /// bpftrace running empty programs on the same hooks: the mechanism's own cost.
    Floor(Mechanism),
    /// `rcutrace count --sample-readers` as `SAMPLE_READERS` says.
    RcutraceSampled,
    /// `rcutrace run -- LOAD`: the load's waits, its work's and its time off the CPU.
    RcutraceRun,
    /// `rcutrace srlat -c LOAD` on the same waiting functions: the nearest a latency command
    /// comes to `run`.
    RcutraceSrlatCommand,
}

/// rcutrace's `--attach` choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Attach {
    Auto,
    Kprobe,
    Fentry,
}

impl Attach {
    pub const ALL: [Attach; 3] = [Attach::Auto, Attach::Kprobe, Attach::Fentry];

    /// As rcutrace's `--attach` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Attach::Auto => "auto",
            Attach::Kprobe => "kprobe",
            Attach::Fentry => "fentry",
        }
    }
}

impl Tracer {
    /// rcutrace as a user runs it.
    pub const RCUTRACE: Tracer = Tracer::Rcutrace(Attach::Auto);

    pub const ALL: [Tracer; 11] = [
        Tracer::None,
        Tracer::RCUTRACE,
        Tracer::Rcutrace(Attach::Kprobe),
        Tracer::Rcutrace(Attach::Fentry),
        Tracer::Bpftrace,
        Tracer::Floor(Mechanism::Kprobe),
        Tracer::Floor(Mechanism::KprobeFexit),
        Tracer::Floor(Mechanism::Fentry),
        Tracer::RcutraceSampled,
        Tracer::RcutraceRun,
        Tracer::RcutraceSrlatCommand,
    ];

    /// As written in a sample line: `rcutrace`, `rcutrace-fentry`, `floor-kprobe-fexit`.
    pub fn name(self) -> String {
        match self {
            Tracer::None => "none".into(),
            Tracer::RCUTRACE => "rcutrace".into(),
            Tracer::Rcutrace(Attach::Kprobe) => "rcutrace-kprobe".into(),
            Tracer::Rcutrace(Attach::Fentry) => "rcutrace-fentry".into(),
            Tracer::Bpftrace => "bpftrace".into(),
            Tracer::Floor(mechanism) => format!("floor-{}", mechanism.name()),
            Tracer::RcutraceSampled => "rcutrace-sampled".into(),
            Tracer::RcutraceRun => "rcutrace-run".into(),
            Tracer::RcutraceSrlatCommand => "rcutrace-srlat-c".into(),
        }
    }
}

/// What the tracer traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Job {
    /// Every `__rcu_read_lock()` (rcutrace also counts its updater and grace-period functions).
    Count,
    /// synchronize_rcu() latency.
    Srlat,
}

impl Job {
    pub fn name(self) -> &'static str {
        match self {
            Job::Count => "count",
            Job::Srlat => "srlat",
        }
    }

    /// The tracers the job's timed work runs under (its getppid() loop for `Count`, its
    /// membarrier() loop for `Srlat`), in the order of the first repetition. The sampled reader
    /// mode is not among them: it needs a load that lasts many of its periods, and rcu-bench
    /// measures it apart (`sampled_readers`).
    pub fn tracers(self) -> &'static [Tracer] {
        match self {
            Job::Count => &[
                Tracer::None,
                Tracer::RCUTRACE,
                Tracer::Bpftrace,
                Tracer::Floor(Mechanism::Kprobe),
            ],
            Job::Srlat => &[
                Tracer::None,
                Tracer::RCUTRACE,
                Tracer::Rcutrace(Attach::Kprobe),
                Tracer::Rcutrace(Attach::Fentry),
                Tracer::Bpftrace,
                Tracer::Floor(Mechanism::Kprobe),
                Tracer::Floor(Mechanism::KprobeFexit),
                Tracer::Floor(Mechanism::Fentry),
            ],
        }
    }
}

/// One program's place on the hooked function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hook {
    Kprobe,
    Kretprobe,
    Fentry,
    Fexit,
}

impl Hook {
    /// As rcutrace's log names it (`synchronize_rcu: attached by fexit (...)`).
    pub fn name(self) -> &'static str {
        match self {
            Hook::Kprobe => "kprobe",
            Hook::Kretprobe => "kretprobe",
            Hook::Fentry => "fentry",
            Hook::Fexit => "fexit",
        }
    }

    /// Patched in through a BPF trampoline rather than a kprobe.
    pub fn is_trampoline(self) -> bool {
        matches!(self, Hook::Fentry | Hook::Fexit)
    }
}

/// How a function's programs are attached: its entry alone (the reader), or its entry and its
/// return (synchronize_rcu()).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// kprobe at entry, kretprobe at return.
    Kprobe,
    /// kprobe at entry, fexit at return.
    KprobeFexit,
    /// fentry at entry, fexit at return.
    Fentry,
}

impl Mechanism {
    pub const ALL: [Mechanism; 3] = [Mechanism::Kprobe, Mechanism::KprobeFexit, Mechanism::Fentry];

    /// As written in a sample line's configuration.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Kprobe => "kprobe",
            Mechanism::KprobeFexit => "kprobe-fexit",
            Mechanism::Fentry => "fentry",
        }
    }

    /// The hooks it puts on `job`'s function, entry first; `None` where it must never be used.
    pub fn hooks(self, job: Job) -> Option<Vec<Hook>> {
        let (entry, ret) = match self {
            Mechanism::Kprobe => (Hook::Kprobe, Hook::Kretprobe),
            Mechanism::KprobeFexit => (Hook::Kprobe, Hook::Fexit),
            Mechanism::Fentry => (Hook::Fentry, Hook::Fexit),
        };
        match job {
            // The BPF trampoline takes rcu_read_lock() itself: on the reader it recurses
            // (6.4+ refuse it, Debian's 6.1 hangs). Readers are kprobes, entry only.
            Job::Count => (!entry.is_trampoline()).then(|| vec![entry]),
            Job::Srlat => Some(vec![entry, ret]),
        }
    }

    /// The hooks on `job`'s function, as a table row names them: "kprobe + kretprobe".
    pub fn label(self, job: Job) -> String {
        self.hooks(job)
            .unwrap_or_default()
            .iter()
            .map(|h| h.name())
            .collect::<Vec<_>>()
            .join(" + ")
    }

    /// The mechanism `tracer` uses on `job`'s function; `None` for no tracer.
    pub fn of(tracer: Tracer, job: Job) -> Option<Mechanism> {
        match (tracer, job) {
            (Tracer::None, _) => None,
            (Tracer::Floor(mechanism), _) => Some(mechanism),
            // Readers are always kprobes, whatever the tracer.
            (_, Job::Count) => Some(Mechanism::Kprobe),
            // The seed's latency script.
            (Tracer::Bpftrace, Job::Srlat) => Some(Mechanism::Kprobe),
            (Tracer::Rcutrace(Attach::Kprobe), Job::Srlat) => Some(Mechanism::Kprobe),
            (Tracer::Rcutrace(Attach::Fentry), Job::Srlat) => Some(Mechanism::Fentry),
            // rcutrace's probe table prefers a kprobe at the entry of a function whose return
            // it also hooks (a second program on one trampoline would make the kernel replace
            // it, running grace periods of rcutrace's own); the driver checks its log.
            (Tracer::Rcutrace(Attach::Auto), Job::Srlat) => Some(Mechanism::KprobeFexit),
            // A reader mode only; the namespace load's tracers time no synchronize_rcu() loop.
            (
                Tracer::RcutraceSampled | Tracer::RcutraceRun | Tracer::RcutraceSrlatCommand,
                Job::Srlat,
            ) => None,
        }
    }
}

/// An rcutrace command meant to run always: what it costs is the CPU it adds while it
/// watches the machine, not a cost per call of a timed loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Watcher {
    /// `rcutrace gp --secs 0`: every grace period taken apart.
    Gp,
    /// `rcutrace stall`: the grace period in progress watched for its age.
    Stall,
}

impl Watcher {
    pub const ALL: [Watcher; 2] = [Watcher::Gp, Watcher::Stall];

    pub fn name(self) -> &'static str {
        match self {
            Watcher::Gp => "gp",
            Watcher::Stall => "stall",
        }
    }

    /// rcutrace's arguments, as a user runs it until Ctrl-C.
    pub fn args(self) -> &'static [&'static str] {
        match self {
            Watcher::Gp => &["gp", "--secs", "0"],
            Watcher::Stall => &["stall"],
        }
    }
}

/// What the guest does while an always-on command watches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Load {
    /// Nothing but the guest's own background.
    Idle,
    /// The steady `getppid()` load of the CPU window, on a thread of its own.
    Busy,
}

impl Load {
    pub const ALL: [Load; 2] = [Load::Idle, Load::Busy];

    pub fn name(self) -> &'static str {
        match self {
            Load::Idle => "idle",
            Load::Busy => "busy",
        }
    }
}

/// What a sample was measured under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Config {
    /// The workload under a tracer (or none), whatever it traced.
    Under(Tracer),
    /// A tracer doing a job: its own start-up, memory, program time.
    Running(Tracer, Job),
    /// An always-on command watching the guest under a load: its added CPU; its start-up on
    /// the idle guest, its peak RSS under the load.
    Watching(Watcher, Load),
    /// One run of a command, from launch to exit, for its footprint: rcutrace, or bpftrace
    /// hooking what rcutrace hooked.
    Footprint(Tracer, Footprinted),
    /// A fact about the kernel.
    Kernel,
}

impl Config {
    /// As written in a sample line: `rcutrace`, `bpftrace-srlat`, `kernel`.
    pub fn name(self) -> String {
        match self {
            Config::Under(tracer) => tracer.name(),
            Config::Running(tracer, job) => format!("{}-{}", tracer.name(), job.name()),
            Config::Watching(watcher, load) => {
                format!("rcutrace-{}-{}", watcher.name(), load.name())
            }
            Config::Footprint(tracer, command) => {
                format!("{}-footprint-{}", tracer.name(), command.name())
            }
            Config::Kernel => "kernel".into(),
        }
    }

    /// Every configuration a sample can have.
    pub fn all() -> Vec<Config> {
        let mut all = vec![Config::Kernel];
        for tracer in Tracer::ALL {
            all.push(Config::Under(tracer));
            all.push(Config::Running(tracer, Job::Count));
            all.push(Config::Running(tracer, Job::Srlat));
        }
        for watcher in Watcher::ALL {
            all.extend(Load::ALL.map(|load| Config::Watching(watcher, load)));
        }
        for tracer in [Tracer::RCUTRACE, Tracer::Bpftrace] {
            all.extend(Footprinted::ALL.map(|command| Config::Footprint(tracer, command)));
        }
        all
    }

    fn from_name(name: &str) -> Option<Config> {
        Config::all().into_iter().find(|c| c.name() == name)
    }
}

/// One measured value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub metric: Metric,
    pub config: Config,
    pub value: f64,
}

impl Sample {
    /// The line the guest prints: `sample METRIC CONFIG VALUE`.
    pub fn line(&self) -> String {
        format!(
            "sample {} {} {:.3}",
            self.metric.name(),
            self.config.name(),
            self.value
        )
    }

    /// A line the guest printed; `None` for any other line.
    pub fn parse(line: &str) -> Option<Sample> {
        let mut words = line.split_whitespace();
        if words.next() != Some("sample") {
            return None;
        }
        let sample = Sample {
            metric: Metric::from_name(words.next()?)?,
            config: Config::from_name(words.next()?)?,
            value: words.next()?.parse().ok()?,
        };
        words.next().is_none().then_some(sample)
    }
}

/// Every value measured, by metric and configuration.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Samples(HashMap<(Metric, Config), Vec<f64>>);

impl Samples {
    /// The sample lines in the guest's output.
    pub fn parse(stdout: &str) -> Self {
        let mut samples = Samples::default();
        for sample in stdout.lines().filter_map(Sample::parse) {
            samples.add(sample);
        }
        samples
    }

    pub fn add(&mut self, sample: Sample) {
        self.0
            .entry((sample.metric, sample.config))
            .or_default()
            .push(sample.value);
    }

    /// A metric's values under a configuration, in the order measured.
    pub fn values(&self, metric: Metric, config: Config) -> &[f64] {
        self.0.get(&(metric, config)).map_or(&[], Vec::as_slice)
    }

    /// The median of a metric's values under a configuration.
    pub fn median(&self, metric: Metric, config: Config) -> Option<f64> {
        median(self.0.get(&(metric, config))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_and_config_survives_a_line() {
        for metric in Metric::ALL {
            for config in Config::all() {
                let sample = Sample {
                    metric,
                    config,
                    value: 1.5,
                };
                assert_eq!(
                    Sample::parse(&sample.line()),
                    Some(sample),
                    "{}",
                    sample.line()
                );
            }
        }
    }

    #[test]
    fn other_lines_are_not_samples() {
        for line in [
            "info kernel 6.12.0",
            "sample getppid_ns none",
            "sample getppid_ns none 1 2",
            "sample unknown_metric none 1",
            "sample getppid_ns nobody 1",
            "sample getppid_ns none many",
        ] {
            assert_eq!(Sample::parse(line), None, "{line}");
        }
        let samples = Samples::parse("sample getppid_ns none 3\nsample getppid_ns none 1\nx\n");
        assert_eq!(
            samples.median(Metric::GetppidNs, Config::Under(Tracer::None)),
            Some(2.0)
        );
    }
}
