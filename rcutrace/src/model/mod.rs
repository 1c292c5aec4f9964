//! The one data model every command produces and every renderer consumes: counter maps,
//! histograms with their slots, latency statistics and what was lost. `aggregate` turns
//! latency samples into histograms, `stats` derives percentiles, and `attribution` keys
//! events by who caused them; `anatomy` assembles grace periods from the kernel's events and
//! `grace_periods` tallies them (`flavour_grace_periods`: SRCU's and tasks RCU's), `stall` judges
//! when the one in progress is worth a warning;
//! `stacks` takes a report's kernel stacks with their weights, for flame graphs; `tree`
//! decodes a quiescent-state report by the kernel's tree of `rcu_node`s; `detach` is
//! rcutrace's own detaching as a run ends.

pub mod aggregate;
pub mod anatomy;
pub mod attribution;
pub mod checks;
pub mod detach;
pub mod flavour_grace_periods;
pub mod flavour_stall;
pub mod grace_periods;
pub mod run;
pub mod stacks;
pub mod stages;
pub mod stall;
pub mod stats;
pub mod top;
pub mod tree;

use std::{collections::BTreeMap, time::Duration};

use rcutrace_common::hist::Linear;
/// What a run ran on: plain data, the same as its JSON record.
pub use rcutrace_common::records::Environment;

/// A bpftrace-style map of counts, `@name[key]: count`.
#[derive(Clone, Debug, PartialEq)]
pub struct CountMap {
    /// Map name including the `@` (`"@"` for bpftrace's anonymous map).
    pub name: String,
    pub entries: Vec<(String, u64)>,
}

impl CountMap {
    /// bpftrace's order: ascending by count, ties by key.
    pub fn entries_in_order(&self) -> Vec<&(String, u64)> {
        let mut entries: Vec<&(String, u64)> = self.entries.iter().collect();
        entries.sort_by(|(ka, va), (kb, vb)| va.cmp(vb).then_with(|| ka.cmp(kb)));
        entries
    }
}

/// How a histogram's slots are laid out.
#[derive(Clone, Debug, PartialEq)]
pub enum Buckets {
    /// bpftrace `hist()`: 65 slots (negative, 0, 1, then powers of two); a saved run's
    /// stop at their last non-empty slot.
    Log2(Vec<u64>),
    /// bpftrace `lhist()`: underflow, `(max - min) / step` buckets, overflow.
    Linear(Linear, Vec<u64>),
    /// Exact buckets of width `step`, only the non-empty ones: `(value / step, count)`.
    Sparse { step: u64, buckets: Vec<(u64, u64)> },
}

/// The slots bpftrace shows: `(slot, count)` from the first to the last non-empty one.
pub fn shown_slots(counts: &[u64]) -> impl Iterator<Item = (usize, u64)> + '_ {
    let first = counts.iter().position(|&c| c != 0).unwrap_or(counts.len());
    let end = counts
        .iter()
        .rposition(|&c| c != 0)
        .map_or(0, |last| last + 1);
    counts.iter().copied().enumerate().take(end).skip(first)
}

/// Sparse buckets in ascending order.
pub fn sparse_in_order(buckets: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut sorted = buckets.to_vec();
    sorted.sort();
    sorted
}

/// One histogram: a whole map (`@name: `), or one key's histogram of a keyed map
/// (`@name[key]: `), which bpftrace prints one after the other.
#[derive(Clone, Debug, PartialEq)]
pub struct HistMap {
    pub name: String,
    pub key: Option<String>,
    pub buckets: Buckets,
}

impl HistMap {
    /// All samples in the histogram, by which bpftrace orders the keys of a map.
    /// The buckets' counts summed, at most `u64::MAX` (a saved run's counts can be anything).
    pub fn total(&self) -> u64 {
        let add = |total: u64, n: &u64| total.saturating_add(*n);
        match &self.buckets {
            Buckets::Log2(counts) | Buckets::Linear(_, counts) => counts.iter().fold(0, add),
            Buckets::Sparse { buckets, .. } => buckets.iter().map(|(_, n)| n).fold(0, add),
        }
    }

    /// No sample: bpftrace would never have written the map, and prints it as such.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }
}

/// A map of one value, `@name: value`: bpftrace's `@ = count()`, read back from its JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalarMap {
    pub name: String,
    pub value: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Map {
    Count(CountMap),
    Hist(HistMap),
    Scalar(ScalarMap),
}

impl Map {
    pub fn name(&self) -> &str {
        match self {
            Map::Count(m) => &m.name,
            Map::Hist(h) => &h.name,
            Map::Scalar(s) => &s.name,
        }
    }
}

/// bpftrace's order of maps: by full name as bytes, `@` included; the keys of a keyed
/// histogram by their total count, the largest last, ties by key.
pub fn maps_in_order(maps: &[Map]) -> Vec<&Map> {
    let mut sorted: Vec<&Map> = maps.iter().collect();
    let key_order = |map: &Map| match map {
        Map::Hist(h) => (h.total(), h.key.clone()),
        Map::Count(_) | Map::Scalar(_) => (0, None),
    };
    sorted.sort_by(|a, b| {
        a.name()
            .as_bytes()
            .cmp(b.name().as_bytes())
            .then_with(|| key_order(a).cmp(&key_order(b)))
    });
    sorted
}

/// Time unit of a latency histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Unit {
    Ms,
    Us,
    Ns,
}

impl Unit {
    pub fn nanos(self) -> u64 {
        match self {
            Unit::Ms => 1_000_000,
            Unit::Us => 1_000,
            Unit::Ns => 1,
        }
    }

    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::Us => "us",
            Unit::Ns => "ns",
        }
    }
}

/// What bpftrace's histograms hide, for one timed function: exact statistics per key and
/// what could not be measured.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencySummary {
    pub map_name: String,
    pub unit: Unit,
    /// One per key (a single unkeyed one without `--by`), in the order the histograms print.
    pub series: Vec<SeriesStats>,
    /// Largest relative error of a percentile estimate (e.g. 0.0078 for 0.78 %).
    pub percentile_error: f64,
    pub losses: Losses,
    /// With `srlat --stages`: each call taken apart at its grace period's milestones.
    pub stages: Option<Box<stages::StagesSummary>>,
    /// The entries against what became of them (samples, in flight, lost), where the report
    /// covers the window from its opening.
    pub cross_checks: Vec<checks::CrossCheck>,
    /// With `gp --flavor`: the slowest grace periods of the histograms, whole, for `-f json`.
    pub grace_periods: Vec<rcutrace_common::records::GracePeriod>,
}

/// Exact statistics of one histogram.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesStats {
    pub key: Option<String>,
    pub count: u64,
    /// Exact, in nanoseconds; `None` without samples.
    pub min_ns: Option<u64>,
    pub max_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    /// `(quantile, estimate in ns)`, e.g. `(0.99, 2.5e7)`.
    pub percentiles: Vec<(f64, f64)>,
    /// The percentiles are exact: nearest rank of every sample, kept because they were few.
    pub percentiles_exact: bool,
}

/// Calls that were seen but could not be measured or kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Losses {
    /// Calls still inside the function when tracing stopped: no end, so no latency.
    pub in_flight_at_exit: u64,
    /// Calls that returned but whose return the kernel did not report (a kretprobe has a
    /// limited number of instances).
    pub returns_lost: u64,
    /// Returns whose call began before tracing started.
    pub began_before_tracing: u64,
    /// Entry or return hits the kernel skipped (a BPF program, or another kprobe's handler,
    /// already running on that CPU); a call skipped at both ends by one kprobe hit counts once.
    pub missed_by_kernel: u64,
    /// Calls lost because the in-flight map or the sample buffer was full.
    pub lost_to_full_map: u64,
    /// Calls whose caller's stack could not be kept (`--by stack` only).
    pub stacks_lost: Option<u64>,
    /// Calls left out as rcutrace's own doing: the tasks-RCU kthreads' and SRCU workers'
    /// work for its attaching and detaching (`rcutrace_common::own_work`).
    pub own_calls_left_out: u64,
}

/// What `count` adds to its map: the ratios the bpftrace scripts leave to a calculator.
/// A count is `None` where its function was not traced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CountSummary {
    pub elapsed: Duration,
    pub readers: Option<u64>,
    pub call_rcu: Option<u64>,
    /// call_rcu, call_rcu_hurry and kvfree_call_rcu: every way a callback is queued.
    pub callbacks: Option<u64>,
    /// The functions of those this kernel had, whose calls `callbacks` adds up.
    pub callbacks_of: Vec<String>,
    pub grace_periods: Option<u64>,
    /// Hits of the updater and grace-period probes that the kernel skipped.
    pub missed: u64,
    /// Calls of counted functions left out as rcutrace's own doing: the tasks-RCU kthreads'
    /// work for its attaching and detaching (`rcutrace_common::own_work`).
    pub own_calls_left_out: u64,
    /// With `--by`: events lost because the keyed map was full, and stacks not kept.
    pub keyed_losses: Option<KeyedLosses>,
    /// With `--sample-readers`: `readers` is this estimate's.
    pub readers_estimate: Option<ReadersEstimate>,
    /// Counts of the same events by two hooks, which must agree (`count --all`: grace
    /// periods by `rcu_gp_init()` and by `rcu_gp_fqs_loop()`).
    pub cross_checks: Vec<checks::CrossCheck>,
}

/// Readers estimated from windows in which the reader probe was attached
/// (`count --sample-readers`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadersEstimate {
    /// Over the whole period; `None` if no window was sampled.
    pub readers: Option<u64>,
    /// Counted exactly, in the windows.
    pub counted: u64,
    /// The windows' time together.
    pub sampled: Duration,
    pub windows: u32,
    /// Half the width of the estimate's 95% interval, in readers; `None` with fewer than two
    /// windows (nothing to judge the spread by).
    pub margin: Option<u64>,
    /// Grace periods that ended while rcutrace attached or detached the reader probe: at most
    /// this many of the grace periods counted are rcutrace's own doing.
    pub switching_grace_periods: u64,
    /// Updater calls the tasks-RCU kthreads made in the window (switching the probe makes
    /// them: each detach waits for tasks-RCU grace periods): left out of the counts.
    pub switching_calls_left_out: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyedLosses {
    pub map_full: u64,
    pub stacks_lost: u64,
}

/// Shorter windows (an interrupt during attaching) give no per-second rates.
pub const MIN_RATE_WINDOW_SECS: f64 = 0.01;

/// A count divided by the number of grace periods.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PerGracePeriod {
    NotTraced,
    NoGracePeriod,
    Ratio(f64),
}

impl CountSummary {
    pub fn per_grace_period(&self, count: Option<u64>) -> PerGracePeriod {
        match (count, self.grace_periods) {
            (None, _) | (_, None) => PerGracePeriod::NotTraced,
            (Some(_), Some(0)) => PerGracePeriod::NoGracePeriod,
            (Some(n), Some(gps)) => PerGracePeriod::Ratio(n as f64 / gps as f64),
        }
    }

    /// `None` where the count was not traced or the window was too short to give a rate.
    pub fn per_second(&self, count: Option<u64>) -> Option<f64> {
        let secs = self.elapsed.as_secs_f64();
        count
            .filter(|_| secs >= MIN_RATE_WINDOW_SECS)
            .map(|n| n as f64 / secs)
    }
}

/// A command's whole result, as the renderers take it.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// With `--interval`: when the interval ended, printed before the maps as bpftrace's
    /// `time()` prints it.
    pub time: Option<Stamp>,
    pub maps: Vec<Map>,
    pub summary: Summary,
    /// Recorded by the commands that trace; the text shows it only in a comparison.
    pub environment: Option<Environment>,
}

impl Report {
    /// Adds the maps and latency summaries of `other` (timed calls beside another command's
    /// figures, such as `gp --flavor`'s waiters), in the order bpftrace prints maps.
    pub fn add_latency(&mut self, other: Report) {
        self.maps.extend(other.maps);
        if let (Summary::Latency(ours), Summary::Latency(theirs)) =
            (&mut self.summary, other.summary)
        {
            ours.extend(theirs);
            ours.sort_by(|a, b| a.map_name.as_bytes().cmp(b.map_name.as_bytes()));
        }
    }
}

#[cfg(test)]
impl Report {
    /// `count`'s report of one map `@` with these keys and calls, for the tests.
    pub fn of_counts(entries: &[(&str, u64)], environment: Option<Environment>) -> Report {
        Report {
            time: None,
            maps: vec![Map::Count(CountMap {
                name: "@".into(),
                entries: entries.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            })],
            summary: Summary::Count(CountSummary::default()),
            environment,
        }
    }
}

/// One interval's stamp.
#[derive(Clone, Debug, PartialEq)]
pub struct Stamp {
    /// The local time, `HH:MM:SS`.
    pub time: String,
    /// The figures are the totals since tracing began (`--cumulative`), not the interval's.
    pub cumulative: bool,
}

#[cfg(test)]
impl Stamp {
    pub fn interval(time: &str) -> Stamp {
        Stamp {
            time: time.into(),
            cumulative: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Summary {
    Count(CountSummary),
    Latency(Vec<LatencySummary>),
    Callbacks(CallbacksSummary),
    GracePeriods(Box<GracePeriodsSummary>),
    Stall(StallSummary),
    Run(Box<run::RunSummary>),
}

impl Summary {
    /// The latency summaries of a report that times calls (`srlat`, `gplat`, `run`).
    pub fn latency(&self) -> Option<&[LatencySummary]> {
        match self {
            Summary::Latency(summaries) => Some(summaries),
            Summary::Run(run) => Some(&run.latency),
            _ => None,
        }
    }
}

/// What `rcutrace stall` says when its window ends.
#[derive(Clone, Debug, PartialEq)]
pub struct StallSummary {
    pub elapsed: Duration,
    pub thresholds: Vec<Duration>,
    /// Those of the other flavours watched (`--flavor`), if any.
    pub flavor_thresholds: Vec<Duration>,
    pub warnings: u64,
    /// Of `warnings`, those about expedited grace periods.
    pub expedited_warnings: u64,
    pub kernel_warnings: u64,
    pub stalls_ended: u64,
    pub stopped_at_warning: bool,
}

/// One thing `rcutrace stall` reports as it happens.
#[derive(Clone, Debug, PartialEq)]
pub enum StallEvent {
    /// With each holdout CPU's and blocked reader's stack symbolized, in their order.
    Warning {
        time: String,
        warning: stall::StallWarning,
        cpu_stacks: Vec<Vec<String>>,
        blocked_stacks: Vec<Vec<String>>,
    },
    KernelWarning {
        time: String,
        rcuname: String,
        msg: String,
        cpu: u32,
        rcutrace_earlier: Option<Duration>,
    },
    Ended {
        time: String,
        ended: stall::StallEnded,
    },
    ExpeditedWarning {
        time: String,
        warning: stall::ExpeditedWarning,
        /// `None` where kernel memory could not be read (said once on stderr).
        waiting_for: Option<stall::ExpeditedHoldouts>,
    },
    ExpeditedEnded {
        time: String,
        ended: stall::ExpeditedEnded,
    },
    /// A tasks-RCU or SRCU grace period passed a threshold (`stall --flavor`), its key named.
    FlavorWarning {
        time: String,
        flavor: &'static str,
        key: String,
        warning: flavour_stall::FlavourStallWarning,
    },
    FlavorEnded {
        time: String,
        flavor: &'static str,
        key: String,
        ended: flavour_stall::FlavourStallEnded,
    },
}

/// What `rcutrace gp` adds to its latency histogram: each grace period taken apart.
#[derive(Clone, Debug, PartialEq)]
pub struct GracePeriodsSummary {
    pub elapsed: Duration,
    /// Exact statistics of the `@gplat` histogram (the grace periods' durations).
    pub latency: LatencySummary,
    /// Each phase's statistics, in order: the wait before init (outside the duration), then
    /// the four phases the duration splits into.
    pub phases: Vec<PhaseStats>,
    /// Grace periods whose last holdout was a CPU, by CPU, most first: every CPU.
    pub holdouts_by_cpu: Vec<CpuHoldouts>,
    /// How many of them the text lists (`--top`); it sums the rest on one line, so that the
    /// table stays short on a machine of hundreds of CPUs. JSON keeps every CPU.
    pub holdout_cpus_shown: usize,
    /// Grace periods whose last holdout was a blocked reader, by task, most first.
    pub holdouts_by_task: Vec<TaskHoldouts>,
    /// The slowest grace periods, slowest first (`--top`).
    pub slowest: Vec<GracePeriodRow>,
    /// Grace periods `rcu_state.gp_seq` says ended from the first listed to the last: equal
    /// to the count unless some were lost.
    pub by_gp_seq: Option<u64>,
    /// Grace periods without a quiescent-state report seen from every CPU (a hook that never
    /// fired, or one the kernel skipped): their last holdout is unknown.
    pub without_report: u64,
    pub unassembled: anatomy::Unassembled,
    pub lost: GracePeriodLosses,
    /// The CPUs of each leaf `rcu_node` of the kernel's tree, as cpulists: the shape every
    /// report was decoded by.
    pub rcu_node_leaves: Vec<String>,
    /// The expedited grace periods, where they were followed.
    pub expedited: Option<Box<ExpeditedGracePeriods>>,
}

/// `gp`'s expedited grace periods, each from the selection of its CPUs to its waiters woken.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpeditedGracePeriods {
    /// Their durations' statistics (`count` is how many were assembled).
    pub durations: SeriesStats,
    /// Last holdouts that were CPUs, by CPU, most first; `found_by_pass` counts those found
    /// idle or offline when the CPUs were selected.
    pub holdouts_by_cpu: Vec<CpuHoldouts>,
    pub holdouts_by_task: Vec<TaskHoldouts>,
    /// The slowest, slowest first (`--top`).
    pub slowest: Vec<GracePeriodRow>,
    /// How many `rcu_state.expedited_sequence` says ended from the first listed to the last.
    pub by_sequence: Option<u64>,
    /// Those with no report seen: their last holdout is unknown.
    pub without_report: u64,
    /// `began_before_tracing`, `incomplete` and `undecoded_reports` apply.
    pub unassembled: anatomy::Unassembled,
}

impl ExpeditedGracePeriods {
    /// The expedited grace periods assembled against the advance of
    /// `rcu_state.expedited_sequence`, where it was read.
    pub fn cross_checks(&self) -> Vec<checks::CrossCheck> {
        self.by_sequence
            .map(|n| checks::expedited_by_sequence(self.durations.count, n))
            .into_iter()
            .collect()
    }
}

impl GracePeriodsSummary {
    /// The grace periods assembled against the advance of `rcu_state.gp_seq`, where it was
    /// read.
    pub fn normal_cross_checks(&self) -> Vec<checks::CrossCheck> {
        let assembled = self.latency.series.first().map_or(0, |s| s.count);
        self.by_gp_seq
            .map(|n| checks::grace_periods_by_gp_seq(assembled, n))
            .into_iter()
            .collect()
    }

    /// The normal grace periods' check, then the expedited ones', where each was read.
    pub fn cross_checks(&self) -> Vec<checks::CrossCheck> {
        let mut checks = self.normal_cross_checks();
        if let Some(expedited) = &self.expedited {
            checks.extend(expedited.cross_checks());
        }
        checks
    }
}

/// One phase: `name` as printed, and its statistics over the grace periods.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseStats {
    pub name: String,
    pub stats: SeriesStats,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CpuHoldouts {
    /// The CPUs of the reports that ended the wait: one, or all those a pass found at once
    /// (a whole idle leaf), which are one holdout.
    pub cpus: Vec<u32>,
    pub grace_periods: u64,
    /// Of those, reported by a force-quiescent-state pass (found idle or quiescent).
    pub found_by_pass: u64,
    /// Time they held grace periods up, from init's end to their report, summed.
    pub held_ns: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TaskHoldouts {
    pub pid: u32,
    pub comm: String,
    pub grace_periods: u64,
    pub held_ns: u64,
}

/// One grace period of the slowest, with its holdout's stack symbolized.
#[derive(Clone, Debug, PartialEq)]
pub struct GracePeriodRow {
    pub grace_period: anatomy::GracePeriod,
    /// `name+offset` frames, deepest first; empty without a stack.
    pub stack: Vec<String>,
}

/// Events the programs could not send or complete.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GracePeriodLosses {
    pub events: u64,
    pub stacks: u64,
    pub blocked_readers: u64,
    pub kernel_reads: u64,
    /// Hook hits the kernel skipped.
    pub missed_by_kernel: u64,
    /// Of those, each hook's that had any, by the functions its program serves.
    pub missed_by_hook: BTreeMap<String, u64>,
}

/// One callback function queued one way: what `rcutrace callbacks` prints per row.
#[derive(Clone, Debug, PartialEq)]
pub struct CallbackRow {
    /// Symbolized, `name [module]` for a module's function.
    pub function: String,
    /// The entry point that queued it (`call_rcu`, `call_rcu_hurry`, ...), `barrier`,
    /// `other`, or `?` when it was only seen invoked.
    pub via: String,
    /// Queued while tracing.
    pub queued: u64,
    /// Invoked while tracing, queueing seen: the latency samples.
    pub invoked: u64,
    /// Queued while tracing, not invoked when it stopped.
    pub pending_at_exit: u64,
    /// Invoked while tracing but queued before it began (no latency).
    pub queued_before_tracing: u64,
    /// Queued while tracing, but not recorded (pending map full), so never timed.
    pub unrecorded: u64,
    /// Queued again while still pending: the invocation in between was missed.
    pub requeued: u64,
    /// Queue-to-invoke latency of the `invoked` callbacks.
    pub latency: SeriesStats,
}

/// The columns of some rows added up: QUEUED, INVOKED, PENDING and BEFORE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallbackCounts {
    pub queued: u64,
    pub invoked: u64,
    pub pending_at_exit: u64,
    pub queued_before_tracing: u64,
}

impl CallbackCounts {
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a CallbackRow>) -> CallbackCounts {
        rows.into_iter()
            .fold(CallbackCounts::default(), |sum, row| CallbackCounts {
                queued: sum.queued + row.queued,
                invoked: sum.invoked + row.invoked,
                pending_at_exit: sum.pending_at_exit + row.pending_at_exit,
                queued_before_tracing: sum.queued_before_tracing + row.queued_before_tracing,
            })
    }
}

/// Totals over all rows (each the sum of its column, the rows `--top` leaves out included),
/// and everything that could not be attributed or timed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallbackTotals {
    pub queued: u64,
    pub invoked: u64,
    pub pending_at_exit: u64,
    /// Invocations of callbacks queued before tracing began, over all rows.
    pub queued_before_tracing: u64,
    /// Heads queued again before their invocation was seen, over all rows.
    pub requeued: u64,
    /// Objects given to kvfree_call_rcu() (kfree_rcu() and kvfree_rcu()), if traced.
    pub kvfree_queued: Option<u64>,
    pub pending_map_full: u64,
    pub rows_map_full_queued: u64,
    pub rows_map_full_invoked: u64,
    /// Probe hits the kernel skipped (a BPF program, or another kprobe's handler, already
    /// running on that CPU).
    pub missed_by_kernel: u64,
    /// Of `missed_by_kernel`, those the kprobe layer skipped (another kprobe's handler).
    pub missed_by_kprobe_layer: u64,
    /// Of `missed_by_kernel`, those of the invocation hook: invocations not seen.
    pub invocations_missed: u64,
    /// Callbacks rcutrace's own attaching, reading and detaching queued: in no row.
    pub own_queued: u64,
}

/// A traced entry point of `rcutrace callbacks`: its calls in the window, and the notes of
/// those calls that their queueing did not take (their callbacks count as `other`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryPointCalls {
    pub function: String,
    pub calls: u64,
    pub notes: checks::Notes,
}

/// What `rcutrace callbacks` adds to its histograms: the rows and the totals.
#[derive(Clone, Debug, PartialEq)]
pub struct CallbacksSummary {
    pub elapsed: Duration,
    pub unit: Unit,
    /// Most queued first; at most `--top` of them.
    pub rows: Vec<CallbackRow>,
    /// Rows left out by `--top`, and their columns added up.
    pub rows_not_shown: usize,
    pub not_shown: CallbackCounts,
    pub percentile_error: f64,
    pub totals: CallbackTotals,
    /// Entry points that could not be traced: their callbacks count as `other`.
    pub entry_points_not_traced: Vec<String>,
    /// Each traced entry point's calls, and what became of their notes.
    pub entry_points: Vec<EntryPointCalls>,
    /// Each traced entry point's calls against the callbacks seen queued through it.
    pub cross_checks: Vec<checks::CrossCheck>,
}

/// What `serve` exposes on each scrape: totals since its window opened. `cpu` is set only
/// with `--by cpu`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Calls of each traced function, `count --all`'s table.
    pub calls: Vec<Labelled<u64>>,
    /// rcu_gp_fqs_loop() calls: one per grace period.
    pub grace_periods: Vec<Labelled<u64>>,
    /// __rcu_read_lock() calls.
    pub readers: Vec<Labelled<u64>>,
    /// Internal grace-period latency, rcu_gp_init() entry to rcu_gp_cleanup() return.
    pub grace_period_latency: Vec<Labelled<LatencyHistogram>>,
    /// Time callers waited in each synchronize function.
    pub synchronize_latency: Vec<Labelled<LatencyHistogram>>,
    /// Every probe attached: function, side (`entry` or `return`), what its program does
    /// (`count` or `latency`; a function can have one of each) and the method.
    pub probes: Vec<ProbeInfo>,
    /// Hits the kernel skipped, by function.
    pub kernel_skipped: Vec<(String, u64)>,
    /// Events that could not be kept, by cause.
    pub lost: Vec<(&'static str, u64)>,
    /// The grace periods' state and anatomy, where their hooks are attached.
    pub grace_period: Option<GracePeriodMetrics>,
    /// The other flavours' grace periods (`--flavor`).
    pub flavours: Option<FlavourMetrics>,
    /// When the window opened, in seconds since the Unix epoch.
    pub start_time_s: f64,
}

/// The grace period in progress at a scrape, the stall warnings so far, and how the grace
/// periods completed so far were spent and held up.
#[derive(Clone, Debug, PartialEq)]
pub struct GracePeriodMetrics {
    /// How long the grace period in progress has waited for quiescent states (0 while none
    /// is in progress).
    pub age_s: f64,
    /// How long the expedited grace period in progress has run (0 while none is); `None`
    /// where its hooks could not be attached.
    pub expedited_age_s: Option<f64>,
    /// CPUs it still waits for.
    pub holdout_cpus: u64,
    /// Stall warnings by source: `rcutrace` (grace periods older than 1 s, each once) and
    /// `kernel` (its own stall warnings).
    pub stall_warnings: Vec<(&'static str, u64)>,
    /// The phases of the grace periods completed since the window opened, by phase label
    /// (`model::grace_periods::PHASE_LABELS`).
    pub phases: Vec<(&'static str, LatencyHistogram)>,
    /// Those grace periods by their last holdout.
    pub last_holdouts: Vec<(LastHoldout, u64)>,
    /// Grace periods not in the phases, by cause: `began_before_tracing`, `incomplete` (an
    /// event lost), `unseen` (a gap in `gp_seq`), `in_progress` (under way at the scrape).
    pub partial: Vec<(&'static str, u64)>,
}

/// What ended a grace period's wait, as `serve` counts it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LastHoldout {
    /// The quiescent state of these CPUs: one, or several reported at once (a pass that
    /// found a whole idle leaf), which are one holdout.
    Cpus(Vec<u32>),
    /// A blocked reader leaving its critical section, on any CPU.
    Task,
    /// Not seen: a CPU's report was missed (the kernel skips a hook while another BPF
    /// program runs on that CPU), or the wait ended in a way the hooks miss.
    Unseen,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProbeInfo {
    pub function: String,
    pub side: &'static str,
    pub program: &'static str,
    pub method: String,
}

/// A value with its optional `function`, `cpu` and `cgroup` labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Labelled<V> {
    pub function: Option<String>,
    pub cpu: Option<u32>,
    pub cgroup: Option<String>,
    pub value: V,
}

/// The grace periods of the flavours `serve --flavor` follows (tasks RCU's, SRCU's), each
/// series by its flavour and what runs it (a tasks-RCU flavour, an SRCU domain), named.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlavourMetrics {
    /// Their lengths, since the window opened.
    pub grace_periods: Vec<FlavourSeries<LatencyHistogram>>,
    /// Each phase's length (`phase` set).
    pub phases: Vec<FlavourSeries<LatencyHistogram>>,
    /// How long the grace period in progress has run (0 while none is), per key seen.
    pub age_s: Vec<FlavourSeries<f64>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FlavourSeries<V> {
    pub flavor: &'static str,
    pub key: String,
    pub phase: Option<&'static str>,
    pub value: V,
}

impl<V> FlavourSeries<V> {
    /// The series of `(flavor, key)`, of `phase` where one is given.
    pub fn of(
        (flavor, key): (&'static str, String),
        phase: Option<&'static str>,
        value: V,
    ) -> Self {
        FlavourSeries {
            flavor,
            key,
            phase,
            value,
        }
    }
}

/// Latencies in nanoseconds, in bpftrace's log2 slots (`rcutrace_common::hist::log2_slot`).
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyHistogram {
    pub log2_slots: Vec<u64>,
    pub count: u64,
    pub sum_ns: u128,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn latency(map_name: &str) -> LatencySummary {
        LatencySummary {
            map_name: map_name.into(),
            unit: Unit::Ms,
            series: Vec::new(),
            percentile_error: 0.0,
            losses: Losses::default(),
            stages: None,
            cross_checks: Vec::new(),
            grace_periods: Vec::new(),
        }
    }

    fn report(maps: &[&str]) -> Report {
        Report {
            time: None,
            maps: maps
                .iter()
                .map(|name| {
                    Map::Count(CountMap {
                        name: name.to_string(),
                        entries: Vec::new(),
                    })
                })
                .collect(),
            summary: Summary::Latency(maps.iter().map(|name| latency(name)).collect()),
            environment: None,
        }
    }

    #[test]
    fn timed_calls_join_a_report_in_map_order() {
        let mut gp = report(&["@tasks_gp"]);
        gp.add_latency(report(&["@synchronize_rcu_tasks", "@rcu_barrier_tasks"]));
        let names: Vec<&str> = gp
            .summary
            .latency()
            .unwrap()
            .iter()
            .map(|s| s.map_name.as_str())
            .collect();
        assert_eq!(
            names,
            ["@rcu_barrier_tasks", "@synchronize_rcu_tasks", "@tasks_gp"]
        );
        assert_eq!(gp.maps.len(), 3);
    }
}
