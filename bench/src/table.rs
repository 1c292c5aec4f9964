//! The table: one row per figure, medians per configuration, rcutrace/bpftrace ratios, and the
//! targets the issues set. The "empty program" column is the floor (see `floor`): the same
//! figure under empty programs attached by the same mechanism.

use std::fmt::Write as _;

use crate::sample::{
    Attach, Config, Family, Footprinted, Job, Load, Mechanism, Metric, Samples, Tracer, Watcher,
};
use crate::{NAMESPACES, SAMPLE_READERS, Sizes};

/// Every row of the table, in order; rows are found by this, never by their label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowId {
    GetppidCall,
    EventsPerCall,
    ReaderAdded,
    ReaderOwn,
    ReaderProgram,
    /// `count --sample-readers`: its added cost per reader event, its estimate on a load of
    /// nothing but readers, and its estimate against an exact count of a paced load.
    SampledReaderAdded,
    SampledEventsPerCall,
    PacedCounted,
    PacedEstimated,
    PacedEstimateOverCount,
    /// How fast the paced load ran inside the sampled windows, and the estimate with that
    /// allowed for.
    PacedWindowSpeed,
    PacedEstimateAllowed,
    MembarrierWall,
    MembarrierAddedWall,
    MembarrierCpu,
    SyncAddedCpu,
    /// The added CPU time by one mechanism: its floor, rcutrace attached that way, and
    /// bpftrace where its script uses it.
    SyncAddedBy(Mechanism),
    SyncOwn,
    SyncProgram,
    StartupCount,
    StartupSrlat,
    BannerCount,
    StartupUtimeCount,
    RssCount,
    RssSrlat,
    /// From Ctrl-C until srlat exited, hooked by kprobes or by trampolines: the detach of a
    /// trampoline waits for tasks-RCU grace periods.
    ExitSrlat(Attach),
    RunUtime,
    UserCpuShare,
    WindowUtime,
    WindowCpu,
    /// An always-on command's added CPU, % of one CPU (its own time on a CPU and its BPF
    /// programs' run time, per second of tracing).
    WatchCpu(Watcher, Load),
    /// The same per context switch of the guest.
    WatchPerSwitch(Watcher, Load),
    StartupStall,
    RssStall,
    /// The calls of one family of RCU functions that one run of a command causes by its start
    /// and exit: rcutrace's, and bpftrace's hooking the same functions the same way.
    Footprint(Footprinted, Family),
    /// The namespace load: its wall time per namespace with no tracer, under `rcutrace run`
    /// and under bpftrace timing the same waits; what each adds; what `srlat -c` on the same
    /// functions adds; and `run`'s addition over `srlat -c`'s.
    NetnsWall,
    NetnsAdded,
    NetnsSrlatAdded,
    NetnsRunOverSrlat,
}

impl RowId {
    /// The row's label in the table, for a window of `window` seconds.
    fn label(self, window: u64) -> String {
        match self {
            RowId::GetppidCall => "`getppid()` call (ns)".into(),
            RowId::EventsPerCall => "`__rcu_read_lock` events per `getppid()`".into(),
            RowId::ReaderAdded => "Added per `__rcu_read_lock` event (ns)".into(),
            RowId::ReaderOwn => {
                "Program's own share per `__rcu_read_lock` event (added − empty program, ns)".into()
            }
            RowId::ReaderProgram => "BPF program time per `__rcu_read_lock` event (ns)".into(),
            RowId::SampledReaderAdded => format!(
                "Added per `__rcu_read_lock` event, `count --sample-readers {SAMPLE_READERS}` \
                 (ns, {window} s of a `getppid()` load)"
            ),
            RowId::SampledEventsPerCall => format!(
                "`__rcu_read_lock` events per `getppid()` estimated by `--sample-readers \
                 {SAMPLE_READERS}` on that load"
            ),
            RowId::PacedCounted => {
                "`__rcu_read_lock` events per `getppid()` of a paced load, counted".into()
            }
            RowId::PacedEstimated => {
                format!("The same, estimated by `--sample-readers {SAMPLE_READERS}`")
            }
            RowId::PacedEstimateOverCount => format!(
                "`--sample-readers {SAMPLE_READERS}` estimate ÷ count, per call of the paced load"
            ),
            RowId::PacedWindowSpeed => "The paced load's calls per second inside the sampled \
                windows ÷ over the whole run (below 1: slowed by the probe while it counts)"
                .into(),
            RowId::PacedEstimateAllowed => {
                "Estimate ÷ count, the load's speed inside the windows allowed for".into()
            }
            RowId::NetnsWall => format!(
                "Network namespace created and dropped (`rcu-workload netns {NAMESPACES}`), \
                 wall clock per namespace: `rcutrace run` / bpftrace timing the same waits by \
                 stack (ms)"
            ),
            RowId::NetnsAdded => "Added per namespace (ms)".into(),
            RowId::NetnsSrlatAdded => {
                "Added per namespace by `rcutrace srlat -c` on the same functions (ms)".into()
            }
            RowId::NetnsRunOverSrlat => {
                "Added per namespace by `rcutrace run` − by `rcutrace srlat -c` (ms)".into()
            }
            RowId::MembarrierWall => "`membarrier()` call, wall clock, mean (µs)".into(),
            RowId::MembarrierAddedWall => "Added per `membarrier()` call, wall clock (µs)".into(),
            RowId::MembarrierCpu => "`membarrier()` call, caller's CPU time, median (µs)".into(),
            RowId::SyncAddedCpu => {
                "Added CPU per `synchronize_rcu()` call, each tracer as it runs by default (ns)"
                    .into()
            }
            RowId::SyncAddedBy(mechanism) => {
                let rcutrace = match rcutrace_attach(mechanism) {
                    Some(Attach::Auto) => "; rcutrace's default".into(),
                    Some(attach) => format!("; rcutrace `--attach {}`", attach.name()),
                    None => String::new(),
                };
                format!(
                    "Added CPU per `synchronize_rcu()` call by {} (ns{rcutrace})",
                    mechanism.label(Job::Srlat)
                )
            }
            RowId::SyncOwn => "Program's own share per `synchronize_rcu()` call \
                (added − empty programs by the same mechanism, ns)"
                .into(),
            RowId::SyncProgram => "BPF program time per `synchronize_rcu()` call (ns)".into(),
            RowId::StartupCount => "Start-up to attached, count (ms)".into(),
            RowId::StartupSrlat => "Start-up to attached, srlat (ms)".into(),
            RowId::BannerCount => "Start-up to banner, count (ms)".into(),
            RowId::StartupUtimeCount => "User CPU until attached, count (ms)".into(),
            RowId::RssCount => "Peak RSS, count (MiB)".into(),
            RowId::RssSrlat => "Peak RSS, srlat (MiB)".into(),
            RowId::ExitSrlat(Attach::Fentry) => {
                "Exit after Ctrl-C, srlat by trampolines (`--attach fentry`) (ms)".into()
            }
            RowId::ExitSrlat(attach) => format!(
                "Exit after Ctrl-C, srlat by kprobes (`--attach {}`; bpftrace's script the same \
                 way) (ms)",
                attach.name()
            ),
            RowId::RunUtime => format!("User CPU, whole {window} s count run (ms)"),
            RowId::UserCpuShare => "User CPU, share of the whole count run (%)".into(),
            RowId::WindowUtime => format!("User CPU while tracing, {window} s window (ms)"),
            RowId::WindowCpu => {
                format!("CPU while tracing, user + system, {window} s window (ms)")
            }
            RowId::WatchCpu(watcher, load) => format!(
                "Added CPU, `rcutrace {}`, {} (% of one CPU: its own + its BPF programs')",
                watcher.args().join(" "),
                load_text(load)
            ),
            RowId::WatchPerSwitch(watcher, load) => format!(
                "Added CPU per context switch, `rcutrace {}`, {} (ns)",
                watcher.args().join(" "),
                load_text(load)
            ),
            RowId::StartupStall => {
                "Start-up to attached, stall (ms; bpftrace: its count, the target's basis)".into()
            }
            RowId::RssStall => "Peak RSS, stall (MiB)".into(),
            RowId::Footprint(command, family) => format!(
                "Footprint of one `{}` run: {} (calls its start and exit cause)",
                command.name(),
                family.label()
            ),
        }
    }
}

/// The load an always-on command watched, as a row names it.
fn load_text(load: Load) -> &'static str {
    match load {
        Load::Idle => "idle guest",
        Load::Busy => "steady `getppid()` load",
    }
}

/// The most CPU an always-on command may add, % of one CPU, where the issues set it: `gp` on
/// the busy load, `stall` (meant to run always) on any.
pub fn watch_cpu_target(watcher: Watcher, load: Load) -> Option<(f64, &'static str)> {
    match (watcher, load) {
        (Watcher::Gp, Load::Busy) => Some((0.5, "rcutrace ≤ 0.5 %")),
        (Watcher::Gp, Load::Idle) => None,
        (Watcher::Stall, _) => Some((0.1, "rcutrace ≤ 0.1 %")),
    }
}

/// The `--attach` choice that makes `rcutrace srlat` hook synchronize_rcu() by `mechanism`.
fn rcutrace_attach(mechanism: Mechanism) -> Option<Attach> {
    Attach::ALL
        .into_iter()
        .find(|a| Mechanism::of(Tracer::Rcutrace(*a), Job::Srlat) == Some(mechanism))
}

/// Start-up to attached, at most this share of bpftrace's.
pub const STARTUP_RATIO: f64 = 0.15;
/// Peak RSS, at most this many MiB.
pub const RSS_MIB: f64 = 10.0;
/// A footprint this close to bpftrace's (or to zero) meets its target: the idle guest's own
/// calls, taken away as a rate, leave about this much either way.
pub const FOOTPRINT_NOISE: f64 = 2.0;
/// Nor does a footprint within this share of bpftrace's miss it: the kthreads batch the work of
/// the same hooks differently from one run to the next (the waits of rcutrace's and bpftrace's
/// runs with the same hooks differed by up to this much on 6.12).
pub const FOOTPRINT_SPREAD: f64 = 0.05;

/// What a target judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// The rcutrace/bpftrace ratio.
    Ratio,
    /// rcutrace's own figure, a percentage.
    RcutracePercent,
    /// rcutrace's own figure.
    RcutraceValue,
}

/// A target a row must meet.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// As written in the table, e.g. "≤ 0.5".
    pub text: &'static str,
    pub judged: Judged,
    pub met: bool,
}

/// One line of the table: medians per configuration, and the rcutrace/bpftrace ratio.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: RowId,
    pub label: String,
    pub none: Option<f64>,
    /// Under empty programs attached the same way (the floor).
    pub floor: Option<f64>,
    pub rcutrace: Option<f64>,
    pub bpftrace: Option<f64>,
    pub ratio: Option<f64>,
    pub target: Option<Target>,
    /// Decimal places for the values.
    pub decimals: usize,
    /// Whether the row has a no-tracer figure, a floor, a bpftrace figure and a ratio.
    pub has_baseline: bool,
    pub has_floor: bool,
    pub has_bpftrace: bool,
    pub has_ratio: bool,
    /// Shown instead of a ratio that cannot be computed from measured figures.
    pub ratio_note: Option<&'static str>,
}

impl Row {
    fn new(id: RowId, sizes: Sizes, decimals: usize) -> Self {
        Row {
            id,
            label: id.label(sizes.window_secs),
            none: None,
            floor: None,
            rcutrace: None,
            bpftrace: None,
            ratio: None,
            target: None,
            decimals,
            has_baseline: false,
            has_floor: false,
            has_bpftrace: true,
            has_ratio: false,
            ratio_note: None,
        }
    }

    /// The figures under each tracer.
    fn traced(mut self, (rcutrace, bpftrace): (Option<f64>, Option<f64>)) -> Self {
        self.rcutrace = rcutrace;
        self.bpftrace = bpftrace;
        self
    }

    /// rcutrace's figure alone, for rows bpftrace has none (a mechanism its script does not use).
    fn rcutrace_only(mut self, rcutrace: Option<f64>) -> Self {
        self.rcutrace = rcutrace;
        self.has_bpftrace = false;
        self
    }

    /// The figure under empty programs, for rows that have one.
    fn floored(mut self, floor: Option<f64>) -> Self {
        self.has_floor = true;
        self.floor = floor;
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
            && (!self.has_bpftrace || finite(self.bpftrace))
            && (!self.has_baseline || finite(self.none))
            && (!self.has_floor || finite(self.floor))
            && (!self.has_ratio || finite(self.ratio) || self.ratio_note.is_some())
    }

    /// The ratio must be at most `limit`.
    fn ratio_at_most(mut self, limit: f64, text: &'static str) -> Self {
        self.target = Some(Target {
            text,
            judged: Judged::Ratio,
            met: self.ratio.is_some_and(|r| r <= limit),
        });
        self
    }

    /// rcutrace's own figure, a percentage, must be below `limit`.
    fn rcutrace_percent_below(mut self, limit: f64, text: &'static str) -> Self {
        self.target = Some(Target {
            text,
            judged: Judged::RcutracePercent,
            met: self.rcutrace.is_some_and(|s| s < limit),
        });
        self
    }

    /// rcutrace's own figure, a percentage, must be at most `limit`.
    fn rcutrace_percent_at_most(mut self, limit: f64, text: &'static str) -> Self {
        self.target = Some(Target {
            text,
            judged: Judged::RcutracePercent,
            met: self.rcutrace.is_some_and(|s| s <= limit),
        });
        self
    }

    /// The target `target` sets, if any.
    fn percent_target(self, target: Option<(f64, &'static str)>) -> Self {
        match target {
            Some((limit, text)) => self.rcutrace_percent_at_most(limit, text),
            None => self,
        }
    }

    /// rcutrace's own figure must be within `tolerance` of `center`.
    fn rcutrace_within(mut self, center: f64, tolerance: f64, text: &'static str) -> Self {
        self.target = Some(Target {
            text,
            judged: Judged::RcutraceValue,
            met: self
                .rcutrace
                .is_some_and(|v| (v - center).abs() <= tolerance),
        });
        self
    }

    /// rcutrace's own figure must be at most `limit`.
    fn rcutrace_at_most(mut self, limit: f64, text: &'static str) -> Self {
        self.target = Some(Target {
            text,
            judged: Judged::RcutraceValue,
            met: self.rcutrace.is_some_and(|v| v <= limit),
        });
        self
    }

    /// rcutrace's footprint must be at most bpftrace's, give or take the spread of what neither
    /// controls (a figure within it of zero is at most anything).
    fn footprint_target(mut self) -> Self {
        let met = match (self.rcutrace, self.bpftrace) {
            (Some(r), Some(b)) => {
                let b = b.max(0.0);
                r <= b + FOOTPRINT_NOISE.max(b * FOOTPRINT_SPREAD)
            }
            _ => false,
        };
        self.target = Some(Target {
            text: "rcutrace ≤ bpftrace (± 5 %)",
            judged: Judged::RcutraceValue,
            met,
        });
        self
    }

    /// Whether the row has a target it misses.
    pub fn misses_target(&self) -> bool {
        self.target.as_ref().is_some_and(|t| !t.met)
    }
}

/// The medians the table shows, and the figures derived from them.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub sizes: Sizes,
    pub rows: Vec<Row>,
    /// Every value measured, for the figures the table does not show.
    samples: Samples,
}

use Config::{Running, Under};
use Job::{Count, Srlat};
use Tracer::{Bpftrace, Floor};
const RCUTRACE: Tracer = Tracer::RCUTRACE;
const SAMPLED: Tracer = Tracer::RcutraceSampled;

impl Summary {
    pub fn new(samples: &Samples, sizes: Sizes) -> Self {
        let m = |metric: Metric, config: Config| samples.median(metric, config);
        // A metric under both tracers, or in both tracers' runs of a job.
        let under = |metric| (m(metric, Under(RCUTRACE)), m(metric, Under(Bpftrace)));
        let running = |metric, job| {
            (
                m(metric, Running(RCUTRACE, job)),
                m(metric, Running(Bpftrace, job)),
            )
        };
        let both = |f: &dyn Fn(Tracer) -> Option<f64>| (f(RCUTRACE), f(Bpftrace));
        let none = |metric| m(metric, Under(Tracer::None));
        let added = |metric, tracer| Some(m(metric, Under(tracer))? - none(metric)?);
        let events_per_call = m(Metric::EventsPerCall, Under(RCUTRACE));
        let us = |(r, b): (Option<f64>, Option<f64>)| (r.map(|v| v / 1e3), b.map(|v| v / 1e3));
        let mib =
            |(r, b): (Option<f64>, Option<f64>)| (r.map(|k| k / 1024.0), b.map(|k| k / 1024.0));

        // What a tracer adds per event of a job: per `__rcu_read_lock`, or the CPU time per
        // synchronize_rcu() call; and what is left of that above the floor of its mechanism.
        let added_per_event = |tracer, job| match job {
            Count => Some(added(Metric::GetppidNs, tracer)? / events_per_call?),
            Srlat => added(Metric::MembarrierCpuNs, tracer),
        };
        let floor = |mechanism, job| added_per_event(Floor(mechanism), job);
        let own_share = |tracer, job| {
            let mechanism = Mechanism::of(tracer, job)?;
            Some(added_per_event(tracer, job)? - floor(mechanism, job)?)
        };
        let share =
            both(&|t| Some(m(Metric::RunUtimeMs, Under(t))? / (m(Metric::RunS, Under(t))? * 10.0)));
        let reader_mechanism = Mechanism::of(RCUTRACE, Count).expect("rcutrace hooks readers");
        let paced_per_call = |tracer| m(Metric::PacedEventsPerCall, Under(tracer));
        let window_speed = m(Metric::PacedWindowSpeed, Under(SAMPLED));
        // The sampled mode's cost: its steady load against the same load with no tracer.
        let sampled_added = m(Metric::LoadGetppidNs, Under(SAMPLED))
            .zip(m(Metric::LoadGetppidNs, Under(Tracer::None)))
            .map(|(sampled, none)| sampled - none);

        let row = |id, decimals| Row::new(id, sizes, decimals);
        let sync_by = |mechanism| {
            let row = row(RowId::SyncAddedBy(mechanism), 0).floored(floor(mechanism, Srlat));
            let rcutrace = rcutrace_attach(mechanism)
                .and_then(|a| added_per_event(Tracer::Rcutrace(a), Srlat));
            if Mechanism::of(Bpftrace, Srlat) == Some(mechanism) {
                row.traced((rcutrace, added_per_event(Bpftrace, Srlat)))
                    .with_ratio()
            } else {
                row.rcutrace_only(rcutrace)
            }
        };
        let mut rows = vec![
            row(RowId::GetppidCall, 1)
                .untraced(none(Metric::GetppidNs))
                .floored(m(Metric::GetppidNs, Under(Floor(reader_mechanism))))
                .traced(under(Metric::GetppidNs)),
            row(RowId::EventsPerCall, 3).traced(under(Metric::EventsPerCall)),
            row(RowId::ReaderAdded, 1)
                .floored(floor(reader_mechanism, Count))
                .traced(both(&|t| added_per_event(t, Count)))
                .with_ratio()
                .ratio_at_most(0.5, "≤ 0.5"),
            row(RowId::ReaderOwn, 1)
                .traced(both(&|t| own_share(t, Count)))
                .with_ratio_of_added(),
            row(RowId::ReaderProgram, 1)
                .floored(m(
                    Metric::ProgramNs,
                    Running(Floor(reader_mechanism), Count),
                ))
                .traced(running(Metric::ProgramNs, Count))
                .with_ratio(),
            row(RowId::SampledReaderAdded, 1)
                .untraced(m(Metric::LoadGetppidNs, Under(Tracer::None)))
                .traced((
                    sampled_added.and_then(|ns| Some(ns / events_per_call?)),
                    added_per_event(Bpftrace, Count),
                ))
                .with_ratio()
                .ratio_at_most(0.1, "≤ 0.1"),
            row(RowId::SampledEventsPerCall, 3)
                .rcutrace_only(m(Metric::EventsPerCall, Under(SAMPLED))),
            // Per call of the load, each from its own run: the load's speed varies from one
            // run to the next under emulation, its readers per call do not.
            row(RowId::PacedCounted, 3).rcutrace_only(paced_per_call(RCUTRACE)),
            row(RowId::PacedEstimated, 3).rcutrace_only(paced_per_call(SAMPLED)),
            row(RowId::PacedEstimateOverCount, 3)
                .rcutrace_only(
                    paced_per_call(SAMPLED)
                        .zip(paced_per_call(RCUTRACE))
                        .map(|(estimate, count)| estimate / count),
                )
                .rcutrace_within(1.0, 0.02, "within 2 %"),
            row(RowId::PacedWindowSpeed, 3).rcutrace_only(window_speed),
            row(RowId::PacedEstimateAllowed, 3).rcutrace_only(
                paced_per_call(SAMPLED)
                    .zip(paced_per_call(RCUTRACE))
                    .zip(window_speed)
                    .map(|((estimate, count), speed)| estimate / count / speed),
            ),
            row(RowId::MembarrierWall, 1)
                .untraced(none(Metric::MembarrierWallNs).map(|v| v / 1e3))
                .traced(us(under(Metric::MembarrierWallNs))),
            row(RowId::MembarrierAddedWall, 1)
                .traced(us(both(&|t| added(Metric::MembarrierWallNs, t))))
                .with_ratio_of_added(),
            row(RowId::MembarrierCpu, 2)
                .untraced(none(Metric::MembarrierCpuNs).map(|v| v / 1e3))
                .traced(us(under(Metric::MembarrierCpuNs))),
            row(RowId::SyncAddedCpu, 0)
                .traced(both(&|t| added_per_event(t, Srlat)))
                .with_ratio(),
        ];
        rows.extend(Mechanism::ALL.map(sync_by));
        rows.extend([
            row(RowId::SyncOwn, 0)
                .traced(both(&|t| own_share(t, Srlat)))
                .with_ratio_of_added(),
            row(RowId::SyncProgram, 1)
                .traced(running(Metric::ProgramNs, Srlat))
                .with_ratio(),
            row(RowId::StartupCount, 0)
                .traced(running(Metric::StartupMs, Count))
                .with_ratio()
                .ratio_at_most(STARTUP_RATIO, "≤ 0.15"),
            row(RowId::StartupSrlat, 0)
                .traced(running(Metric::StartupMs, Srlat))
                .with_ratio()
                .ratio_at_most(STARTUP_RATIO, "≤ 0.15"),
            row(RowId::BannerCount, 0)
                .traced(running(Metric::BannerMs, Count))
                .with_ratio(),
            row(RowId::StartupUtimeCount, 0)
                .traced(running(Metric::StartupUtimeMs, Count))
                .with_ratio(),
            row(RowId::RssCount, 1)
                .traced(mib(running(Metric::RssKib, Count)))
                .with_ratio()
                .rcutrace_at_most(RSS_MIB, "rcutrace ≤ 10 MiB"),
            row(RowId::RssSrlat, 1)
                .traced(mib(running(Metric::RssKib, Srlat)))
                .with_ratio()
                .rcutrace_at_most(RSS_MIB, "rcutrace ≤ 10 MiB"),
            row(RowId::ExitSrlat(Attach::Kprobe), 0)
                .traced((
                    m(
                        Metric::ExitMs,
                        Running(Tracer::Rcutrace(Attach::Kprobe), Srlat),
                    ),
                    m(Metric::ExitMs, Running(Bpftrace, Srlat)),
                ))
                .with_ratio(),
            row(RowId::ExitSrlat(Attach::Fentry), 0).rcutrace_only(m(
                Metric::ExitMs,
                Running(Tracer::Rcutrace(Attach::Fentry), Srlat),
            )),
            row(RowId::RunUtime, 0)
                .traced(under(Metric::RunUtimeMs))
                .with_ratio(),
            row(RowId::UserCpuShare, 2)
                .traced(share)
                .with_ratio()
                .rcutrace_percent_below(1.0, "rcutrace < 1 %"),
            row(RowId::WindowUtime, 0)
                .traced(under(Metric::WindowUtimeMs))
                .with_ratio(),
            row(RowId::WindowCpu, 1)
                .traced(under(Metric::WindowCpuMs))
                .with_ratio(),
        ]);
        let watching = |metric, watcher, load| m(metric, Config::Watching(watcher, load));
        for watcher in Watcher::ALL {
            rows.extend(Load::ALL.map(|load| {
                row(RowId::WatchCpu(watcher, load), 3)
                    .rcutrace_only(watching(Metric::AddedCpuPct, watcher, load))
                    .percent_target(watch_cpu_target(watcher, load))
            }));
        }
        // Its context-switch hook is gp's busiest; stall runs the same programs.
        rows.extend(Load::ALL.map(|load| {
            row(RowId::WatchPerSwitch(Watcher::Gp, load), 0).rcutrace_only(watching(
                Metric::AddedNsPerSwitch,
                Watcher::Gp,
                load,
            ))
        }));
        rows.extend([
            // On the idle guest, as the other commands' start-up; under the load, as their RSS.
            row(RowId::StartupStall, 0)
                .traced((
                    watching(Metric::StartupMs, Watcher::Stall, Load::Idle),
                    m(Metric::StartupMs, Running(Bpftrace, Count)),
                ))
                .with_ratio()
                .ratio_at_most(STARTUP_RATIO, "≤ 0.15"),
            row(RowId::RssStall, 1)
                .rcutrace_only(
                    watching(Metric::RssKib, Watcher::Stall, Load::Busy).map(|k| k / 1024.0),
                )
                .rcutrace_at_most(RSS_MIB, "rcutrace ≤ 10 MiB"),
        ]);
        let footprint = |tracer, command, family| {
            m(
                Metric::Footprint(family),
                Config::Footprint(tracer, command),
            )
        };
        let ms = |v: Option<f64>| v.map(|ns| ns / 1e6);
        let netns_added = |tracer| added(Metric::NetnsNs, tracer);
        let run_over_srlat = netns_added(Tracer::RcutraceRun)
            .zip(netns_added(Tracer::RcutraceSrlatCommand))
            .map(|(run, srlat)| run - srlat);
        rows.extend([
            row(RowId::NetnsWall, 2)
                .untraced(ms(none(Metric::NetnsNs)))
                .traced((
                    ms(m(Metric::NetnsNs, Under(Tracer::RcutraceRun))),
                    ms(m(Metric::NetnsNs, Under(Bpftrace))),
                )),
            row(RowId::NetnsAdded, 2)
                .traced((
                    ms(netns_added(Tracer::RcutraceRun)),
                    ms(netns_added(Bpftrace)),
                ))
                .with_ratio_of_added(),
            row(RowId::NetnsSrlatAdded, 2)
                .rcutrace_only(ms(netns_added(Tracer::RcutraceSrlatCommand))),
            row(RowId::NetnsRunOverSrlat, 2)
                .rcutrace_only(ms(run_over_srlat))
                .rcutrace_at_most(0.0, "≤ 0"),
        ]);
        for command in Footprinted::ALL {
            rows.extend(Family::ALL.map(|family| {
                row(RowId::Footprint(command, family), 0)
                    .traced((
                        footprint(RCUTRACE, command, family),
                        footprint(Bpftrace, command, family),
                    ))
                    .with_ratio_of_added()
                    .footprint_target()
            }));
        }
        Summary {
            sizes,
            rows,
            samples: samples.clone(),
        }
    }

    /// Every value of a metric under a configuration, in the order measured.
    pub fn values(&self, metric: Metric, config: Config) -> &[f64] {
        self.samples.values(metric, config)
    }

    /// The median of a metric under a configuration.
    pub fn get(&self, metric: Metric, config: Config) -> Option<f64> {
        self.samples.median(metric, config)
    }

    pub fn row(&self, id: RowId) -> Option<&Row> {
        self.rows.iter().find(|r| r.id == id)
    }

    /// The table in Markdown (it reads as plain text too).
    pub fn table(&self) -> String {
        let mut out = format!(
            "| Median of {} | no tracer | empty program | rcutrace | bpftrace | rcutrace / bpftrace \
             | target | met |\n\
             |---|--:|--:|--:|--:|--:|:-:|:-:|\n",
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
                "| {} | {} | {} | {} | {} | {ratio} | {target} | {met} |",
                row.label,
                value(row.none),
                value(row.floor),
                value(row.rcutrace),
                value(row.bpftrace),
            );
        }
        out
    }

    /// One line per target: met or not, and by how much.
    pub fn targets(&self) -> String {
        let mut out = String::new();
        for row in &self.rows {
            let Some(target) = &row.target else { continue };
            let figure = match target.judged {
                Judged::RcutracePercent => row
                    .rcutrace
                    .map_or("not measured".into(), |v| format!("{v:.*} %", row.decimals)),
                Judged::Ratio => row
                    .ratio
                    .map_or("not measured".into(), |r| format!("ratio {r:.3}")),
                Judged::RcutraceValue => row
                    .rcutrace
                    .map_or("not measured".into(), |v| format!("{v:.*}", row.decimals)),
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

#[cfg(test)]
pub(super) mod tests;
