//! rcutrace's JSON lines (`-f json`) as typed records: one `Record` per line.
//!
//! bpftrace's own records (`attached_probes`, `map`, `hist`) have bpftrace 0.17's shape, so
//! that tools reading bpftrace's JSON keep working; rcutrace's summaries are records of their
//! own types. The renderer writes these types and the tests read them back, so the output and
//! what is checked cannot drift apart.

extern crate alloc;

use alloc::{collections::BTreeMap, string::String, vec::Vec};
use core::{fmt, marker::PhantomData};

use serde::{
    Deserialize, Deserializer, Serialize, Serializer,
    de::{
        MapAccess, SeqAccess, Visitor,
        value::{MapAccessDeserializer, SeqAccessDeserializer},
    },
    ser::SerializeMap as _,
};

/// One line of output: `{"type": TYPE, "data": DATA}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum Record {
    /// Printed once the probes are attached: `{"probes": 3}`.
    AttachedProbes { probes: u64 },
    /// bpftrace's `time()`: the wall-clock time as it formats it by default, `"HH:MM:SS\n"`.
    /// With `--interval`, each interval's records follow one.
    Time(String),
    /// One map of values, by map name (bpftrace prints one map per record).
    Map(Members<MapValue>),
    /// One histogram map, by map name.
    Hist(Members<HistValue>),
    #[serde(rename = "rcutrace_count_summary")]
    CountSummary(CountSummary),
    #[serde(rename = "rcutrace_latency_summary")]
    LatencySummary(LatencySummary),
    #[serde(rename = "rcutrace_not_measured")]
    NotMeasured(NotMeasured),
    #[serde(rename = "rcutrace_callbacks_summary")]
    CallbacksSummary(CallbacksSummary),
    #[serde(rename = "rcutrace_gp_summary")]
    GracePeriodsSummary(GracePeriodsSummary),
    /// One of `rcutrace gp`'s slowest grace periods, slowest first.
    #[serde(rename = "rcutrace_grace_period")]
    GracePeriod(GracePeriod),
    /// `rcutrace stall`: a grace period passed a warning threshold.
    #[serde(rename = "rcutrace_stall_warning")]
    StallWarning(StallWarning),
    /// `rcutrace stall`: the kernel printed its own stall warning.
    #[serde(rename = "rcutrace_kernel_stall_warning")]
    KernelStallWarning(KernelStallWarning),
    /// `rcutrace stall`: a grace period it warned about ended.
    #[serde(rename = "rcutrace_stall_ended")]
    StallEnded(StallEnded),
    /// `rcutrace stall`: an expedited grace period passed a warning threshold.
    #[serde(rename = "rcutrace_expedited_stall_warning")]
    ExpeditedStallWarning(ExpeditedStallWarning),
    /// `rcutrace stall`: an expedited grace period it warned about ended.
    #[serde(rename = "rcutrace_expedited_stall_ended")]
    ExpeditedStallEnded(ExpeditedStallEnded),
    /// `rcutrace stall --flavor`: a tasks-RCU or SRCU grace period passed a warning threshold.
    #[serde(rename = "rcutrace_flavor_stall_warning")]
    FlavorStallWarning(FlavorStallWarning),
    /// `rcutrace stall --flavor`: one it warned about ended.
    #[serde(rename = "rcutrace_flavor_stall_ended")]
    FlavorStallEnded(FlavorStallEnded),
    #[serde(rename = "rcutrace_stall_summary")]
    StallSummary(StallSummary),
    /// `rcutrace run`: where the command's time went, after the histograms of its waits.
    #[serde(rename = "rcutrace_run_summary")]
    RunSummary(RunSummary),
    /// `srlat --stages`: one timed function's calls taken apart, per path and stage.
    #[serde(rename = "rcutrace_stages_summary")]
    StagesSummary(StagesSummary),
    /// `srlat --stages`: one call taken apart, in the order the calls returned.
    #[serde(rename = "rcutrace_call_stages")]
    CallStages(CallStages),
    #[serde(rename = "rcutrace_environment")]
    Environment(Environment),
    /// A map the run printed with no entry (one empty line), which bpftrace would not have
    /// written and so has no `map` or `hist` record.
    #[serde(rename = "rcutrace_empty_map")]
    EmptyMap { map: String },
    /// After each interval's `time` record: whether the interval's figures are the totals
    /// since tracing began (`--cumulative`) or what happened since the interval before.
    #[serde(rename = "rcutrace_interval")]
    Interval { cumulative: bool },
}

/// For `skip_serializing_if`: a flag written only when set, so that older files still match.
fn is_false(flag: &bool) -> bool {
    !flag
}

/// A JSON object whose members keep their order: bpftrace orders a map's entries by value,
/// not by key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Members<V>(pub Vec<(String, V)>);

impl<V> Members<V> {
    /// The value of member `key`, if present.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// A map's value: keyed (`{"@": {"call_rcu": 3}}`) or a scalar (`{"@s": 1}`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MapValue {
    Keyed(Members<u64>),
    Scalar(u64),
}

/// A histogram map's value: its buckets, or for a keyed histogram the buckets of each key.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum HistValue {
    Buckets(Vec<Bucket>),
    Keyed(Members<Vec<Bucket>>),
}

/// One histogram bucket with inclusive bounds; a missing bound is open (the underflow bucket
/// has no `min`, the overflow bucket no `max`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i128>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i128>,
    pub count: u64,
}

/// `rcutrace count`'s ratios. A figure is `null` where a function it needs was not traced
/// (or, for a ratio, where no grace period completed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CountSummary {
    pub elapsed_s: f64,
    /// The window exactly, for `rcutrace report` to print what the run printed.
    #[serde(default)]
    pub elapsed_ns: Option<u64>,
    /// The counts behind the ratios (`null` where not traced).
    #[serde(default)]
    pub readers: Option<u64>,
    #[serde(default)]
    pub call_rcu: Option<u64>,
    /// call_rcu, call_rcu_hurry and kvfree_call_rcu together, those of them that were traced.
    #[serde(default)]
    pub callbacks: Option<u64>,
    /// The functions `callbacks` adds up (absent in older files: all three).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callbacks_of: Option<Vec<String>>,
    pub grace_periods: Option<u64>,
    pub readers_per_grace_period: Option<f64>,
    pub call_rcu_per_grace_period: Option<f64>,
    pub callbacks_per_grace_period: Option<f64>,
    pub call_rcu_per_second: Option<f64>,
    /// Updater and grace-period probe hits the kernel skipped.
    pub missed_by_kernel: u64,
    /// Calls left out as rcutrace's own doing (the tasks-RCU kthreads' work for its
    /// attaching and detaching); absent when none was.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub own_calls_left_out: u64,
    /// With `--by`: events lost because the keyed map was full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_lost_to_full_map: Option<u64>,
    /// With `--by`: events whose kernel stack could not be kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks_lost: Option<u64>,
    /// With `--sample-readers`: `readers` is estimated, from these windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readers_estimated: Option<ReadersEstimated>,
    /// Counts of the same events by two hooks (`count --all`), agreeing or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross_checks: Vec<CrossCheck>,
}

/// Two hooks' counts of the same events: `agrees` is false when they differ by more than
/// `bound`, which means one hook missed events (the run also warned).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrossCheck {
    /// What `value` counts, e.g. `callbacks queued via call_rcu`.
    pub counted: String,
    pub value: u64,
    /// What it is checked against, e.g. `call_rcu() calls`.
    pub against: String,
    pub expected: u64,
    pub bound: u64,
    pub agrees: bool,
    /// `expected` is a ceiling: `value` may be any amount below it, at most `bound` above.
    #[serde(default, skip_serializing_if = "is_false")]
    pub at_most: bool,
}

/// How `count --sample-readers` estimated the readers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadersEstimated {
    /// Readers counted exactly while the probe was attached.
    pub counted: u64,
    /// The time the probe was attached, in all.
    pub sampled_ns: u64,
    pub windows: u32,
    /// Half the width of the 95% interval around `readers`; `null` with fewer than two windows.
    pub margin_95: Option<u64>,
    /// Grace periods that ended while rcutrace attached or detached the reader probe.
    pub switching_grace_periods: u64,
    /// Updater calls the tasks-RCU kthreads made for those switches, left out of the counts.
    #[serde(default)]
    pub switching_calls_left_out: u64,
}

/// What a latency histogram hides: exact extremes and mean, and percentiles. One record per
/// histogram: per key of a keyed map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// The histogram map this summary belongs to, e.g. `@srlat`.
    pub map: String,
    /// The key, for a keyed map (`--by`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The histogram's unit: `ms`, `us` or `ns`.
    pub unit: String,
    pub count: u64,
    pub min_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    pub max_ns: Option<u64>,
    /// Estimates by name (`p50`, `p99.9`), each within `percentile_error` of the true value.
    pub percentiles_ns: Members<f64>,
    pub percentile_error: f64,
    /// The percentiles are exact (nearest rank of every sample), not estimates.
    #[serde(default, skip_serializing_if = "is_false")]
    pub percentiles_exact: bool,
    /// How the histogram's buckets are laid out, which its `hist` record does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<HistLayout>,
}

/// `srlat --stages`' summary of one timed function: its calls taken apart, per path (normal
/// or expedited grace period), each stage with its statistics and sum. Every path's stage
/// sums add up to its `latency_sum_ns`, as each call's stages add up to its latency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StagesSummary {
    pub map: String,
    /// The unit the text prints the stages in: `ms`, `us` or `ns`.
    pub unit: String,
    pub paths: Vec<PathStages>,
    /// Calls not taken apart: their entry's stage event was not seen, or the grace period
    /// they waited for was not seen whole.
    pub entry_not_seen: u64,
    pub grace_period_not_seen: u64,
    /// Calls with a milestone moved to keep their stages in order.
    pub adjusted: u64,
    /// Of those, calls whose records came in an order no call has (its callback invoked
    /// before its grace period began). Absent from files written before it was counted.
    #[serde(default)]
    pub out_of_order: u64,
    /// Grace-period and stage events of the run the sample ring had no room for.
    #[serde(default)]
    pub events_lost: u64,
    /// The kernel's `rcu_normal_wake_from_gp`; absent where it has no such parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_from_gp: Option<bool>,
    /// Calls in the statistics without an `rcutrace_call_stages` record of their own.
    pub calls_not_listed: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathStages {
    /// `normal` or `expedited`.
    pub path: String,
    pub calls: u64,
    pub latency_sum_ns: u64,
    pub stages: Vec<StageRecord>,
    /// Expedited: calls whose own request ran their grace period, and calls that rode on
    /// another caller's (the rest: unknown).
    pub own: u64,
    pub piggy_backed: u64,
    /// Expedited: IPI handlers run, over this many distinct expedited grace periods.
    pub ipis: u64,
    pub expedited_grace_periods: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageRecord {
    /// Short name (`gp_start_wait`, `grace_period`, `callback_wait`, `wake_up`, ...).
    pub key: String,
    /// As the text prints it.
    pub name: String,
    pub count: u64,
    pub sum_ns: u64,
    pub min_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    pub max_ns: Option<u64>,
    pub percentiles_ns: Members<f64>,
}

/// One call taken apart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallStages {
    pub map: String,
    /// `normal` or `expedited`.
    pub path: String,
    pub tid: u32,
    /// CLOCK_MONOTONIC.
    pub started_ns: u64,
    pub latency_ns: u64,
    /// The grace period waited for: `rcu_state.gp_seq` while it ran, or for the expedited
    /// path the `expedited_sequence` value that ended it.
    pub gp_seq: u64,
    /// The stages this call had, by short name, in order; they add up to `latency_ns`.
    pub stages_ns: Members<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub piggy_backed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipis: Option<u64>,
    pub adjusted: bool,
    /// A milestone came before the one it must follow (see `StagesSummary::out_of_order`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub out_of_order: bool,
}

/// The bucket layout of a histogram, as the text labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HistLayout {
    /// bpftrace's `hist()`.
    Log2,
    /// bpftrace's `lhist(v, min, max, step)`.
    Linear { min: u64, max: u64, step: u64 },
    /// Only the non-empty buckets of width `step`.
    Sparse { step: u64 },
}

/// What the run ran on: the kernel and the RCU settings that change the figures, and how
/// each function was hooked. `rcutrace report A B` prints what differs between two runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`: the build, with its preemption flags.
    pub kernel_version: String,
    /// CPUs online.
    pub cpus: u64,
    /// CONFIG_HZ, where the kernel's configuration can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hz: Option<u64>,
    /// Preemption model: the current one of /sys/kernel/debug/sched/preempt, else from `uname -v`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<String>,
    /// /sys/kernel/rcu_expedited and /sys/kernel/rcu_normal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcu_expedited: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcu_normal: Option<String>,
    /// /sys/module/rcutree/parameters/*, by name (lazy and NOCB settings among them).
    #[serde(default)]
    pub rcutree_parameters: Members<String>,
    /// How each traced function was hooked, e.g. `"synchronize_rcu": "kprobe+fexit"`.
    #[serde(default)]
    pub attach: Members<String>,
    /// Why the hits the kernel skipped may be more than it counted on this run (each
    /// `missed_by_kernel` is then a lower bound); absent when every skip was counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missed_by_kernel_lower_bound: Vec<String>,
}

/// `rcutrace gp`'s tables: each phase, the last holdouts, and what was not assembled. The
/// duration's statistics are the `@gplat` latency summary's; the slowest grace periods follow
/// as `rcutrace_grace_period` records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GracePeriodsSummary {
    pub elapsed_s: f64,
    #[serde(default)]
    pub elapsed_ns: Option<u64>,
    /// The tables' unit: `ms`, `us` or `ns`.
    pub unit: String,
    pub grace_periods: u64,
    /// How many ended by `rcu_state.gp_seq`, from the first listed to the last.
    pub by_gp_seq: Option<u64>,
    /// `grace_periods` against `by_gp_seq`, where it was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross_checks: Vec<CrossCheck>,
    pub without_report: u64,
    pub phases: Vec<PhaseRecord>,
    pub holdouts_by_cpu: Vec<CpuHoldoutsRecord>,
    pub holdouts_by_task: Vec<TaskHoldoutsRecord>,
    pub begun_before_tracing: u64,
    pub incomplete: u64,
    /// Grace periods between two seen of which nothing was seen (a gap in `gp_seq`).
    #[serde(default)]
    pub unseen: u64,
    pub spurious_inits: u64,
    /// Reports from no `rcu_node` of the tree read at start-up, left out.
    #[serde(default)]
    pub undecoded_reports: u64,
    pub lost_events: u64,
    pub lost_stacks: u64,
    pub blocked_readers_not_followed: u64,
    pub kernel_reads_failed: u64,
    pub missed_by_kernel: u64,
    /// Of `missed_by_kernel`, each hook's that had any, named by the function (or functions)
    /// its program serves: which events may be missing from the assembly (absent when none
    /// was skipped, and in runs saved before).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub missed_by_hook: BTreeMap<String, u64>,
    /// The CPUs of each leaf of the kernel's tree of `rcu_node`s (cpulists, `0-15`), which
    /// every report was decoded by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rcu_node_leaves: Vec<String>,
    /// The expedited grace periods, where they were followed (absent in runs saved before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expedited: Option<ExpeditedGracePeriodsRecord>,
}

/// `gp`'s expedited grace periods: each from the selection of its CPUs
/// (`sync_rcu_exp_select_cpus()`) to its waiters woken (`rcu_exp_wait_wake()` returned).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExpeditedGracePeriodsRecord {
    pub grace_periods: u64,
    /// How many ended by `rcu_state.expedited_sequence`, from the first listed to the last.
    pub by_expedited_sequence: Option<u64>,
    /// `grace_periods` against `by_expedited_sequence`, where it was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross_checks: Vec<CrossCheck>,
    pub min_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    pub max_ns: Option<u64>,
    pub percentiles_ns: Members<f64>,
    #[serde(default)]
    pub percentiles_exact: bool,
    pub without_report: u64,
    /// `found_by_pass` counts CPUs found idle or offline when the CPUs were selected.
    pub holdouts_by_cpu: Vec<CpuHoldoutsRecord>,
    pub holdouts_by_task: Vec<TaskHoldoutsRecord>,
    pub begun_before_tracing: u64,
    pub incomplete: u64,
    pub undecoded_reports: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseRecord {
    pub name: String,
    pub count: u64,
    pub min_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    pub max_ns: Option<u64>,
    pub percentiles_ns: Members<f64>,
    /// The percentiles are exact (few enough samples to keep them all).
    #[serde(default)]
    pub percentiles_exact: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuHoldoutsRecord {
    pub cpu: u32,
    /// Where the reports named several CPUs at once (a pass finding a whole idle leaf): all
    /// of them, in the kernel's cpulist format (`48-63`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_list: Option<String>,
    pub grace_periods: u64,
    pub found_by_pass: u64,
    pub held_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskHoldoutsRecord {
    pub pid: u32,
    pub comm: String,
    pub grace_periods: u64,
    pub held_ns: u64,
}

/// One grace period. Normal RCU's are taken apart: the four phases add up to `duration_ns`.
/// The other flavours' (`gp --flavor`) give their length, what ran them and what held them;
/// the fields of normal RCU's anatomy are absent there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GracePeriod {
    /// `normal`, `srcu` or `tasks` (also `tasks_rude`, `tasks_trace`): what kind of grace
    /// period it is.
    #[serde(default = "normal_flavor")]
    pub flavor: String,
    /// What ran it, for the other flavours: the SRCU domain or the tasks-RCU flavour, named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `rcu_state.gp_seq` while it was in progress, signed as the kernel prints it (SRCU:
    /// the domain's `srcu_gp_seq`; tasks RCU: 0).
    pub gp_seq: i64,
    /// When it began (normal RCU: `rcu_gp_init()` was entered), CLOCK_MONOTONIC.
    pub started_ns: u64,
    pub duration_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiescent_wait_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kthread_wake_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_ns: Option<u64>,
    /// From the request that woke the kthread to init; `null` where none was seen.
    #[serde(default)]
    pub request_wait_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fqs_passes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_reported: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_readers: Option<u32>,
    /// From the end of init to the last holdout's report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_ns: Option<u64>,
    /// `null` if no report was seen.
    #[serde(default)]
    pub last_holdout: Option<LastHoldout>,
    /// An expedited grace period (absent for normal ones): `gp_seq` is then
    /// `rcu_state.expedited_sequence`, `started_ns` the selection of its CPUs, the wait
    /// `quiescent_wait_ns` and `kthread_wake_ns` (the wake-up after the last report) its only
    /// phases, and `found_by_pass` a CPU found idle or offline at selection.
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    pub expedited: bool,
    /// SRCU: the CPUs where readers that held it up entered, ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reader_cpus: Vec<u32>,
    /// Classic tasks RCU: the tasks still listed as its last pass over the holdouts began.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holdout_tasks: Vec<HoldoutTaskRecord>,
    /// The other flavours: its phases as its kernel names them (tasks RCU: `pre_gp`,
    /// `scan_tasklist`, `post_scan`, `holdouts`, `post_gp`; SRCU: `scan1`, `scan2`,
    /// `gp_end`), in order, each whose bounds were seen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseLength>,
    /// Tasks RCU: how many passes over its holdouts it made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holdout_passes: Option<u32>,
    /// The other flavours: the waits of its flavour (SRCU: on its domain) in flight over its
    /// whole length, seen to return (`gp --flavor` times them), at most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiters: Vec<WaiterRecord>,
    /// Such waits past those listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiters_unlisted: Option<u64>,
}

/// A call that waited through a grace period.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaiterRecord {
    /// The thread that called.
    pub pid: u32,
    pub function: String,
    pub waited_ns: u64,
    /// Its caller's stack, deepest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<String>,
}

/// One phase of a grace period and how long it took.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseLength {
    pub name: String,
    pub ns: u64,
}

fn normal_flavor() -> String {
    "normal".into()
}

/// A task a tasks-RCU grace period waited for, as its last pass over them began.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldoutTaskRecord {
    pub pid: u32,
    pub comm: String,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// Its kernel stack as a tick last sampled it while it held the grace period, deepest
    /// first (`gp --flavor tasks`; absent where none was: a holdout preempted or asleep).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<String>,
}

/// The CPU or blocked reader whose report ended a grace period's wait.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastHoldout {
    /// `cpu` or `task`.
    pub kind: String,
    /// The CPU (for a task: the one it was switched out on).
    pub cpu: u32,
    /// CPUs in the report that ended the wait (`cpu` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Those CPUs in the kernel's cpulist format (`48-63`); for a `task` holdout whose
    /// blocking was not seen, the CPUs of the leaf whose readers held it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_list: Option<String>,
    /// Reported by a force-quiescent-state pass, not by the CPU itself (`cpu` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_by_pass: Option<bool>,
    /// The task: the blocked reader, or what a tick found running on the CPU.
    pub pid: Option<u32>,
    #[serde(default)]
    pub tgid: Option<u32>,
    pub comm: Option<String>,
    /// What the tick interrupted: `kernel`, `user` or `idle` (`cpu` only, where sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// How long the reader was blocked (`task` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_ns: Option<u64>,
    /// When the reader was switched out, on the clock of the grace period's `started_ns`
    /// (`task` only, where its block was seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_at_ns: Option<u64>,
    /// Kernel stack frames, deepest first: sampled on the CPU, or where the reader blocked.
    #[serde(default)]
    pub stack: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallWarning {
    /// Local time, `HH:MM:SS`.
    pub time: String,
    pub gp_seq: i64,
    pub age_ns: u64,
    pub threshold_ns: u64,
    /// The CPUs that have not reported, then the blocked readers holding it up.
    pub holdouts: Vec<StallHoldout>,
    pub kthread_pid: u32,
    /// How long the grace-period kthread has not been seen running, when over 2 s.
    pub kthread_not_run_ns: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallHoldout {
    /// `cpu` or `task`.
    pub kind: String,
    /// The CPU (for a task: the one it was switched out on).
    pub cpu: u32,
    /// The task: what a tick found running on the CPU, or the blocked reader.
    pub pid: Option<u32>,
    pub comm: Option<String>,
    /// What the tick interrupted on the CPU: `kernel`, `user` or `idle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Whether the CPU's tick still arrives (`null`: never sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_arriving: Option<bool>,
    /// How long the reader has been blocked (`task` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_ns: Option<u64>,
    /// Kernel stack frames, deepest first.
    #[serde(default)]
    pub stack: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelStallWarning {
    pub time: String,
    /// The RCU flavour, e.g. `rcu_preempt`.
    pub rcuname: String,
    /// The kernel's word for it, e.g. `StallDetected`.
    pub msg: String,
    pub cpu: u32,
    /// How much earlier rcutrace warned about the grace period in progress, if it did.
    pub rcutrace_earlier_ns: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallEnded {
    pub time: String,
    pub gp_seq: i64,
    pub duration_ns: u64,
    pub warnings: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpeditedStallWarning {
    pub time: String,
    pub age_ns: u64,
    pub threshold_ns: u64,
    /// What it still waited for, from the kernel's `rcu_node` leaves; absent where kernel
    /// memory could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<ExpeditedWaitingFor>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpeditedWaitingFor {
    /// The CPUs that had not reported.
    pub cpus: Vec<u32>,
    /// Whether tasks blocked inside a reader held it too.
    pub blocked_tasks: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpeditedStallEnded {
    pub time: String,
    /// From its CPU selection to the return of the wait that woke its waiters (where a later
    /// one overwrote that record between two looks: to the later one's start, an upper bound).
    pub duration_ns: u64,
    pub warnings: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlavorStallWarning {
    pub time: String,
    /// `srcu` or `tasks`, as the grace-period records say it.
    pub flavor: String,
    /// The SRCU domain or tasks-RCU flavour, named.
    pub key: String,
    pub age_ns: u64,
    pub threshold_ns: u64,
    /// Tasks RCU: the tasks its last pass over the holdouts listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holdout_tasks: Vec<HoldoutTaskRecord>,
    /// SRCU: the CPUs where readers that held it entered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reader_cpus: Vec<u32>,
    /// The tasks blocked in the flavour's waits as the warning was due (SRCU's: on any
    /// domain), found by their kernel stacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_tasks: Vec<BlockedTaskRecord>,
}

/// A task blocked in a wait, with its kernel stack (deepest first).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedTaskRecord {
    pub pid: u32,
    pub comm: String,
    pub stack: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlavorStallEnded {
    pub time: String,
    pub flavor: String,
    pub key: String,
    pub duration_ns: u64,
    pub warnings: u32,
}

/// `rcutrace run`'s account of one command: its time, the RCU waits in it and in the work it
/// caused, and what an expedited grace period would have saved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The command line as given.
    pub command: String,
    /// Its exit status, where it exited; the signal that ended it, where one did; neither
    /// where tracing ended first (Ctrl-C).
    pub exit_status: Option<i32>,
    pub signal: Option<i32>,
    /// From its start to its exit (or to the end of tracing).
    pub wall_ns: u64,
    /// Its processes' CPU time, user and system, as the kernel reports it at their exit.
    pub cpu_ns: Option<u64>,
    /// Its threads' time switched out: asleep (or blocked), and runnable but waiting for a
    /// CPU; summed over the threads.
    pub off_cpu_asleep_ns: u64,
    pub off_cpu_runnable_ns: u64,
    /// Of that, the part inside RCU waits (the threads slept there, or waited for a CPU).
    #[serde(default)]
    pub in_waits_asleep_ns: u64,
    #[serde(default)]
    pub in_waits_runnable_ns: u64,
    /// Threads followed (the command's first included), and forks the programs had no room
    /// to follow.
    pub threads: u64,
    pub threads_lost: u64,
    /// Switches back in whose switch out was not seen (the off-CPU map was full): not counted.
    pub off_cpu_unseen: u64,
    /// The time the command's threads spent inside RCU waits, each moment once (a wait inside
    /// another counts once), summed over the threads.
    pub rcu_wait_ns: u64,
    /// The same for the work items it caused.
    pub caused_rcu_wait_ns: u64,
    /// Each waiting function, in the command and in the work it caused.
    pub waits: Vec<RunWait>,
    /// Work items queued by the command (or by work it caused), run to their end, not
    /// followed for want of room, and still queued or running when tracing ended.
    pub work_queued: u64,
    pub work_done: u64,
    pub work_lost: u64,
    pub work_unfinished: u64,
    /// Tracing ended at `--linger` with work still unfinished.
    pub linger_expired: bool,
    /// The mean synchronize_rcu_expedited() seen in this run, where one was.
    pub expedited_mean_ns: Option<u64>,
    /// The kernel's `rcutree.rcu_normal_wake_from_gp`, where it has the parameter.
    pub normal_wake_from_gp: Option<bool>,
}

/// One waiting function's calls, by the command itself or by work it caused.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunWait {
    pub function: String,
    /// The domain waited on, where the function takes one (synchronize_srcu()'s
    /// `srcu_struct`: its symbol, `NAME [module]`, or its address where no symbol names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub caused_work: bool,
    pub calls: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StallSummary {
    pub elapsed_s: f64,
    pub thresholds_ns: Vec<u64>,
    /// Those of the other flavours watched (`--flavor`), if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavor_thresholds_ns: Vec<u64>,
    pub warnings: u64,
    /// Of `warnings`, those about expedited grace periods.
    #[serde(default)]
    pub expedited_warnings: u64,
    pub kernel_warnings: u64,
    pub stalls_ended: u64,
    /// The window ended at the first warning (`--exit-on-warning`).
    pub stopped_at_warning: bool,
}

/// The calls of one timed function that were seen but not measured, by cause.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotMeasured {
    pub map: String,
    /// Still inside the function when tracing stopped.
    pub in_flight_at_exit: u64,
    /// Returned, but the kernel did not report the return (kretprobe instances exhausted).
    pub returns_lost: u64,
    pub begun_before_tracing: u64,
    /// Entry or return hits the kernel skipped (a BPF program already running on that CPU).
    pub missed_by_kernel: u64,
    pub lost_to_full_map: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks_lost: Option<u64>,
    /// Calls left out as rcutrace's own doing (other threads' work for its attaching and
    /// detaching): not timed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub own_calls_left_out: u64,
    /// The entries against the samples, calls in flight and losses above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross_checks: Vec<CrossCheck>,
}

/// `rcutrace callbacks`' rows (most queued first, at most `--top`) and totals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallbacksSummary {
    pub elapsed_s: f64,
    /// The window exactly, for `rcutrace report` to print what the run printed.
    #[serde(default)]
    pub elapsed_ns: Option<u64>,
    /// The latency histograms' unit: `ms`, `us` or `ns`.
    pub unit: String,
    pub percentile_error: f64,
    pub rows: Vec<CallbackRow>,
    pub rows_not_shown: u64,
    /// The columns of the rows not shown, added up.
    pub queued_not_shown: u64,
    #[serde(default)]
    pub invoked_not_shown: u64,
    #[serde(default)]
    pub pending_not_shown: u64,
    #[serde(default)]
    pub before_not_shown: u64,
    /// The columns of every row added up: queued and invoked while tracing, pending at its
    /// end (`not_timed.queued_before_tracing` is the BEFORE column's).
    pub queued: u64,
    pub invoked: u64,
    #[serde(default)]
    pub pending_at_exit: u64,
    /// Objects given to kvfree_call_rcu(): freed in batches, never timed; `null` if untraced.
    pub kvfree_queued: Option<u64>,
    pub not_timed: CallbacksNotTimed,
    /// Entry points this kernel lacks or refused: their callbacks show `via` `other`.
    pub entry_points_not_traced: Vec<String>,
    /// Callbacks rcutrace's own attaching, reading and detaching queued: in no row.
    #[serde(default)]
    pub own_queued: u64,
    /// Each traced entry point's calls and what became of their notes (absent from runs
    /// saved before they were counted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entry_points: Vec<EntryPointNotes>,
    /// Each traced entry point's calls against the callbacks seen queued through it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross_checks: Vec<CrossCheck>,
}

/// An entry point of `rcutrace callbacks`: each call leaves its CPU a note of the head it
/// queues, and the queueing hook takes the note whose head matches; a callback whose note was
/// not taken counts as `other`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryPointNotes {
    pub entry_point: String,
    /// Calls while tracing.
    pub calls: u64,
    /// Notes of those calls replaced on their CPU by another call's before their queueing
    /// took them (an interrupt's or another task's call in between, a caller moved to another
    /// CPU, a queueing hit the kernel skipped).
    pub notes_overwritten: u64,
    /// Notes of those calls still waiting at the close (queued after it, or on another CPU).
    pub notes_waiting_at_close: u64,
    /// Queueings while tracing that took the note of a call made before tracing began.
    pub notes_from_before: u64,
}

/// One callback function queued one way.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallbackRow {
    pub function: String,
    pub via: String,
    pub queued: u64,
    /// Invoked with their queueing seen: the latency samples.
    pub invoked: u64,
    pub pending_at_exit: u64,
    pub queued_before_tracing: u64,
    pub not_recorded: u64,
    pub requeued: u64,
    pub min_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    pub max_ns: Option<u64>,
    pub percentiles_ns: Members<f64>,
}

/// Callbacks seen but not timed, by cause.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallbacksNotTimed {
    pub queued_before_tracing: u64,
    pub pending_map_full: u64,
    pub requeued: u64,
    pub missed_by_kernel: u64,
    /// Of `missed_by_kernel`, the hits the kprobe layer skipped (another kprobe's handler
    /// running on that CPU); the rest the BPF layer skipped (another BPF program running).
    /// Absent from records written before it was kept.
    #[serde(default)]
    pub missed_by_kprobe_layer: u64,
    /// Of `missed_by_kernel`, the hits of the invocation hook: invocations not seen (their
    /// callbacks look pending, or are nowhere if their queueing went unseen too). Absent from
    /// records written before it was kept.
    #[serde(default)]
    pub invocations_missed: u64,
    pub row_map_full_queued: u64,
    pub row_map_full_invoked: u64,
}

impl<V: Serialize> Serialize for Members<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Members<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InOrder<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for InOrder<V> {
            type Value = Members<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = access.next_entry()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(InOrder(PhantomData))
    }
}

// The two shapes of a value are told apart by their JSON type, read directly: serde's
// `untagged` buffers the value first, and its buffer cannot hold the 128-bit bounds.
impl<'de> Deserialize<'de> for MapValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Shape;
        impl<'de> Visitor<'de> for Shape {
            type Value = MapValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a count or an object of counts")
            }
            fn visit_u64<E>(self, value: u64) -> Result<MapValue, E> {
                Ok(MapValue::Scalar(value))
            }
            fn visit_map<A: MapAccess<'de>>(self, access: A) -> Result<MapValue, A::Error> {
                Members::deserialize(MapAccessDeserializer::new(access)).map(MapValue::Keyed)
            }
        }
        deserializer.deserialize_any(Shape)
    }
}

impl<'de> Deserialize<'de> for HistValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Shape;
        impl<'de> Visitor<'de> for Shape {
            type Value = HistValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of buckets or an object of them")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, access: A) -> Result<HistValue, A::Error> {
                Vec::deserialize(SeqAccessDeserializer::new(access)).map(HistValue::Buckets)
            }
            fn visit_map<A: MapAccess<'de>>(self, access: A) -> Result<HistValue, A::Error> {
                Members::deserialize(MapAccessDeserializer::new(access)).map(HistValue::Keyed)
            }
        }
        deserializer.deserialize_any(Shape)
    }
}

/// For counts written only when there is something to say.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests;
