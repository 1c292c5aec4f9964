//! `srlat --stages`: each timed `synchronize_rcu()` / `synchronize_rcu_expedited()` call
//! joined to the grace period it waited for, and its latency split at that grace period's
//! milestones into stages that add up to it exactly. Pure logic over the sample ring's
//! records, in arrival order (the order the programs reserved them, which follows causality:
//! a call's entry events come before its sample, a grace period's end before the wake-up it
//! causes).
//!
//! Which grace period: the caller's entry events carry the sequence counter as it was
//! (`rcu_state.gp_seq`, or `expedited_sequence` for the expedited path); the first grace
//! period that began after that read is the one the kernel's `rcu_seq_snap()` makes the call
//! wait for, found by its number. A call that came while its grace period was being set up
//! waited nothing for it to start; a grace period whose end came after the caller's own
//! wake-up (the kernel lets callbacks run once cleanup has marked their node done) ends, for
//! that call, where the wake-up began. Such calls are counted as adjusted. Records in an order
//! no call has (its callback invoked before its grace period began) are moved into order the
//! same way, never left to cross a clamp's bounds, and counted apart as out of order.

use std::collections::{BTreeMap, HashMap};

use rcutrace_common::{
    gp::GpEvent,
    latency::{RECORD_SAMPLE, Sample, read_record, record_kind},
    stages::{self as events, in_progress_of, seq_snap},
};

use super::{
    SeriesStats, Unit,
    aggregate::{Layout, Series},
    anatomy::{Assembler, GracePeriod},
};

/// Which way a call waited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// A normal grace period, and on 6.1 and 6.12 (`rcu_normal_wake_from_gp=0`) a
    /// `wakeme_after_rcu()` callback queued behind the others.
    Normal,
    Expedited,
}

impl Path {
    pub fn name(self) -> &'static str {
        match self {
            Path::Normal => "normal",
            Path::Expedited => "expedited",
        }
    }

    /// The stages of this path: `(key, text)`, in order.
    pub fn stages(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Path::Normal => &NORMAL_STAGES,
            Path::Expedited => &EXPEDITED_STAGES,
        }
    }
}

/// A normal call's stages. The third and fourth are known where its `wakeme_after_rcu()`
/// callback was seen; otherwise (`rcu_normal_wake_from_gp=1`, where the grace-period kthread
/// wakes callers itself) the time after the grace period is the fifth.
pub const NORMAL_STAGES: [(&str, &str); 5] = [
    ("gp_start_wait", "waiting for a grace period to start"),
    (
        "grace_period",
        "the grace period (rcu_gp_init() to rcu_gp_cleanup())",
    ),
    (
        "callback_wait",
        "its wakeme_after_rcu() callback waiting to be invoked",
    ),
    ("wake_up", "the woken caller waiting to run"),
    (
        "after_grace_period",
        "the grace period's end to the caller running (no callback)",
    ),
];
/// Where the callback's wait is among `NORMAL_STAGES`: what waking callers from the
/// grace-period kthread would save.
pub const CALLBACK_WAIT: usize = 2;

/// An expedited call's stages.
pub const EXPEDITED_STAGES: [(&str, &str); 4] = [
    (
        "funnel",
        "funnel: waiting for an expedited grace period to start",
    ),
    ("select_cpus", "selecting CPUs and sending their IPIs"),
    (
        "reports",
        "waiting for the CPUs' reports, then waking the waiters",
    ),
    ("wake_up", "the woken caller waiting to run"),
];

/// A kernel stack is this big on x86_64: a request on the stack below a caller's entry stack
/// pointer by less than this is that caller's.
const THREAD_STACK_BYTES: u64 = 16 * 1024;

/// Grace periods kept for calls still to come; older ones can no longer be waited for.
const KEPT_GRACE_PERIODS: usize = 4096;

/// Calls listed one by one (JSON) per report; the rest are counted.
pub const MAX_LISTED_CALLS: usize = 10_000;

/// One call taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedCall {
    /// Index of the timed function.
    pub timed: u32,
    pub path: Path,
    pub tid: u32,
    pub started_ns: u64,
    pub latency_ns: u64,
    /// The grace period waited for: `rcu_state.gp_seq` while it ran, or for the expedited
    /// path the `expedited_sequence` value that ended it.
    pub gp_seq: u64,
    /// Per stage of the path, in nanoseconds; `None` for a stage this call did not have.
    /// The others add up to `latency_ns`.
    pub stages_ns: Vec<Option<u64>>,
    /// Expedited: whether another caller's request ran the grace period (`None`: the worker's
    /// request was not seen).
    pub piggy_backed: Option<bool>,
    /// Expedited: IPI handlers run for the grace period.
    pub ipis: Option<u64>,
    /// A milestone was moved to keep the stages in order (see the module's comment).
    pub adjusted: bool,
    /// Of those, one that came before the milestone it must follow: the records are in an
    /// order no call has.
    pub out_of_order: bool,
}

/// Why a call could not be taken apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotTakenApart {
    /// Its entry's stage event was not seen (lost, or the call took another way).
    pub entry_not_seen: u64,
    /// The grace period it waited for was not seen whole.
    pub grace_period_not_seen: u64,
}

/// The stages of one path over a period's calls.
#[derive(Clone, Debug, PartialEq)]
pub struct PathStages {
    pub path: Path,
    pub calls: u64,
    /// The calls' latencies added up, exactly; every stage's sum adds up to it.
    pub latency_sum_ns: u128,
    pub stages: Vec<StageStats>,
    /// Expedited: calls whose own request ran the grace period, calls that rode on another
    /// caller's, and calls for which that is unknown.
    pub own: u64,
    pub piggy_backed: u64,
    /// IPI handlers, over the distinct expedited grace periods waited for.
    pub ipis: u64,
    pub expedited_grace_periods: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StageStats {
    pub key: String,
    pub name: String,
    pub sum_ns: u128,
    pub stats: SeriesStats,
}

/// `srlat --stages`' summary of one timed function.
#[derive(Clone, Debug, PartialEq)]
pub struct StagesSummary {
    pub map_name: String,
    pub unit: Unit,
    /// Paths that had calls, normal first.
    pub paths: Vec<PathStages>,
    pub not_taken_apart: NotTakenApart,
    pub adjusted: u64,
    /// Of the adjusted calls, those whose records came in an order no call has.
    pub out_of_order: u64,
    /// Grace-period and stage events of the whole run that the sample ring had no room for
    /// (the programs' `GP_LOST_EVENTS`): a call they were about is not taken apart.
    pub events_lost: u64,
    /// `/sys/module/rcutree/parameters/rcu_normal_wake_from_gp`; `None` where the kernel
    /// has no such parameter (it wakes every caller by callback).
    pub wake_from_gp: Option<bool>,
    /// The calls one by one, in the order they returned, at most `MAX_LISTED_CALLS`.
    pub calls: Vec<StagedCall>,
    pub calls_not_listed: u64,
}

/// A timed function's calls as they are tallied.
#[derive(Clone, Debug)]
struct FunctionTally {
    normal: PathTally,
    expedited: PathTally,
    not_taken_apart: NotTakenApart,
    adjusted: u64,
    out_of_order: u64,
    calls: Vec<StagedCall>,
    calls_not_listed: u64,
}

#[derive(Clone, Debug)]
struct PathTally {
    path: Path,
    calls: u64,
    latency_sum_ns: u128,
    stages: Vec<Series>,
    own: u64,
    piggy_backed: u64,
    /// IPIs by expedited grace period, each counted once.
    ipis: BTreeMap<u64, u64>,
}

impl PathTally {
    fn new(path: Path) -> Self {
        PathTally {
            path,
            calls: 0,
            latency_sum_ns: 0,
            stages: path
                .stages()
                .iter()
                .map(|_| Series::new(Layout::Log2))
                .collect(),
            own: 0,
            piggy_backed: 0,
            ipis: BTreeMap::new(),
        }
    }

    fn add(&mut self, call: &StagedCall) {
        self.calls += 1;
        self.latency_sum_ns += u128::from(call.latency_ns);
        for (series, ns) in self.stages.iter_mut().zip(&call.stages_ns) {
            if let Some(ns) = ns {
                series.record(*ns, 1);
            }
        }
        match call.piggy_backed {
            Some(true) => self.piggy_backed += 1,
            Some(false) => self.own += 1,
            None => {}
        }
        if let Some(ipis) = call.ipis {
            self.ipis.insert(call.gp_seq, ipis);
        }
    }

    fn summary(&self) -> PathStages {
        PathStages {
            path: self.path,
            calls: self.calls,
            latency_sum_ns: self.latency_sum_ns,
            stages: self
                .path
                .stages()
                .iter()
                .zip(&self.stages)
                .map(|((key, name), series)| StageStats {
                    key: key.to_string(),
                    name: name.to_string(),
                    sum_ns: series.sum_ns(),
                    stats: series.stats(None),
                })
                .collect(),
            own: self.own,
            piggy_backed: self.piggy_backed,
            ipis: self.ipis.values().sum(),
            expedited_grace_periods: self.ipis.len() as u64,
        }
    }
}

impl FunctionTally {
    fn new() -> Self {
        FunctionTally {
            normal: PathTally::new(Path::Normal),
            expedited: PathTally::new(Path::Expedited),
            not_taken_apart: NotTakenApart::default(),
            adjusted: 0,
            out_of_order: 0,
            calls: Vec::new(),
            calls_not_listed: 0,
        }
    }

    fn add(&mut self, call: StagedCall) {
        match call.path {
            Path::Normal => self.normal.add(&call),
            Path::Expedited => self.expedited.add(&call),
        }
        self.adjusted += u64::from(call.adjusted);
        self.out_of_order += u64::from(call.out_of_order);
        if self.calls.len() < MAX_LISTED_CALLS {
            self.calls.push(call);
        } else {
            self.calls_not_listed += 1;
        }
    }
}

/// A normal grace period's milestones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NormalGp {
    started_ns: u64,
    ended_ns: u64,
}

/// An expedited grace period as its worker ran it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ExpeditedGp {
    /// The request it took (`rcu_exp_work` address), if seen.
    work: Option<u64>,
    select_ns: u64,
    select_end_ns: Option<u64>,
    /// The sequence value that ends it (`rcu_exp_wait_wake()`'s `s`).
    ends_seq: Option<u64>,
    ended_ns: Option<u64>,
    ipis: u64,
}

/// What a traced thread's entry events said about its call in progress.
#[derive(Clone, Copy, Debug, Default)]
struct Caller {
    /// `(at, rcu_state.gp_seq)` at its `synchronize_rcu()` entry.
    sync: Option<(u64, u64)>,
    /// `(at, expedited_sequence, stack pointer)` at its `synchronize_rcu_expedited()` entry.
    expedited: Option<(u64, u64, u64)>,
    /// `(at, rcu_head)` of its waker callback, and when that was invoked.
    wakeme: Option<(u64, u64)>,
    wakeme_invoked_ns: Option<u64>,
}

/// A call whose grace period has not been seen whole yet.
#[derive(Clone, Copy, Debug)]
struct Pending {
    timed: u32,
    tid: u32,
    path: Path,
    started_ns: u64,
    ended_ns: u64,
    /// Normal: the grace period's `gp_seq`; expedited: the sequence value that ends it.
    gp_seq: u64,
    sp: u64,
    wakeme_invoked_ns: Option<u64>,
}

/// A timed function taken apart: its index, what it is, and how its summary prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedFunction {
    pub timed: u32,
    pub staged: Staged,
    pub map_name: String,
    pub unit: Unit,
}

/// What a timed function taken apart is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Staged {
    /// `synchronize_rcu()`: normal, or expedited where it called
    /// `synchronize_rcu_expedited()`.
    SynchronizeRcu,
    SynchronizeRcuExpedited,
}

/// Joins calls to grace periods as the records arrive.
#[derive(Debug)]
pub struct Joiner {
    staged: Vec<StagedFunction>,
    wake_from_gp: Option<bool>,
    assembler: Assembler,
    /// By sequence number as a signed value: the counters start below zero and wrap soon
    /// after boot, and so stay in order.
    normal: BTreeMap<i64, NormalGp>,
    expedited: BTreeMap<i64, ExpeditedGp>,
    /// Expedited grace periods under way, by the worker thread running each.
    expedited_running: HashMap<u32, ExpeditedGp>,
    /// The request each worker thread took last, for its next grace period.
    expedited_work: HashMap<u32, u64>,
    callers: HashMap<u32, Caller>,
    /// When each thread's last call of each timed function returned: entry events before it
    /// belong to an earlier call.
    last_return: HashMap<(u32, u32), u64>,
    pending: Vec<Pending>,
    tallies: BTreeMap<u32, FunctionTally>,
    /// Records of no kind this joiner knows.
    pub malformed: u64,
}

impl Joiner {
    /// `wake_from_gp`: the kernel's `rcu_normal_wake_from_gp`, for the summary to say.
    pub fn new(staged: Vec<StagedFunction>, wake_from_gp: Option<bool>) -> Self {
        let tallies = staged
            .iter()
            .map(|f| (f.timed, FunctionTally::new()))
            .collect();
        Joiner {
            staged,
            wake_from_gp,
            assembler: Assembler::bounds_only(),
            normal: BTreeMap::new(),
            expedited: BTreeMap::new(),
            expedited_running: HashMap::new(),
            expedited_work: HashMap::new(),
            callers: HashMap::new(),
            last_return: HashMap::new(),
            pending: Vec::new(),
            tallies,
            malformed: 0,
        }
    }

    /// Adds one ring record: a latency sample, a grace-period event or a stage event.
    /// Returns the sample, for the histograms.
    pub fn add(&mut self, record: &[u8]) -> Option<Sample> {
        match record_kind(record) {
            Some(RECORD_SAMPLE) if let Some(sample) = read_record::<Sample>(record) => {
                self.add_sample(&sample);
                Some(sample)
            }
            Some(kind)
                if kind < RECORD_SAMPLE
                    && let Some(event) = read_record::<GpEvent>(record) =>
            {
                self.add_event(&event);
                None
            }
            _ => {
                self.malformed += 1;
                None
            }
        }
    }

    pub fn add_event(&mut self, event: &GpEvent) {
        let at = event.at_ns;
        match event.kind {
            events::EVENT_SYNC => {
                // A new call: what earlier calls of this thread left is no longer its.
                self.callers.insert(
                    event.pid,
                    Caller {
                        sync: Some((at, event.value)),
                        ..Caller::default()
                    },
                );
            }
            events::EVENT_SYNC_EXPEDITED => {
                self.callers.entry(event.pid).or_default().expedited =
                    Some((at, event.value, event.extra));
            }
            events::EVENT_WAKEME_QUEUED => {
                // A head on a stack another thread once had is this thread's now.
                for caller in self.callers.values_mut() {
                    if caller.wakeme.is_some_and(|(_, head)| head == event.value) {
                        caller.wakeme = None;
                    }
                }
                let caller = self.callers.entry(event.pid).or_default();
                caller.wakeme = Some((at, event.value));
                caller.wakeme_invoked_ns = None;
            }
            events::EVENT_WAKEME_INVOKED => {
                // The head is on its caller's stack: the caller whose queued one it is now.
                if let Some(caller) = self
                    .callers
                    .values_mut()
                    .find(|c| c.wakeme.is_some_and(|(_, head)| head == event.value))
                {
                    caller.wakeme_invoked_ns.get_or_insert(at);
                }
            }
            events::EVENT_EXP_WORK => {
                self.expedited_work.insert(event.pid, event.value);
            }
            events::EVENT_EXP_SELECT => {
                let work = self.expedited_work.remove(&event.pid);
                self.expedited_running.insert(
                    event.pid,
                    ExpeditedGp {
                        work,
                        select_ns: at,
                        ..ExpeditedGp::default()
                    },
                );
            }
            events::EVENT_EXP_SELECT_END => {
                if let Some(gp) = self.expedited_running.get_mut(&event.pid) {
                    gp.select_end_ns = Some(at);
                }
            }
            events::EVENT_EXP_IPI => {
                // The handler runs on the CPU the IPI went to: the grace period selecting
                // or waiting now (one at a time; the latest begun).
                if let Some(gp) = self
                    .expedited_running
                    .values_mut()
                    .filter(|gp| gp.ended_ns.is_none())
                    .max_by_key(|gp| gp.select_ns)
                {
                    gp.ipis += 1;
                }
            }
            events::EVENT_EXP_WAIT => {
                if let Some(gp) = self.expedited_running.get_mut(&event.pid) {
                    gp.ends_seq = Some(event.value);
                }
            }
            events::EVENT_EXP_WAIT_END => {
                if let Some(mut gp) = self.expedited_running.remove(&event.pid)
                    && let Some(seq) = gp.ends_seq
                {
                    gp.ended_ns = Some(at);
                    keep(&mut self.expedited, seq, gp);
                    self.resolve();
                }
            }
            _ => {
                self.assembler.add(event);
                let done = self.assembler.take_done();
                if !done.is_empty() {
                    for gp in done {
                        self.add_grace_period(&gp);
                    }
                    self.resolve();
                }
            }
        }
    }

    fn add_grace_period(&mut self, gp: &GracePeriod) {
        let normal = NormalGp {
            started_ns: gp.started_ns,
            ended_ns: gp.started_ns.saturating_add(gp.duration_ns),
        };
        keep(&mut self.normal, gp.gp_seq, normal);
    }

    pub fn add_sample(&mut self, sample: &Sample) {
        let timed = sample.key.event;
        let Some(staged) = self
            .staged
            .iter()
            .find(|f| f.timed == timed)
            .map(|f| f.staged)
        else {
            return;
        };
        let started = sample.start_ns;
        let ended = started.saturating_add(sample.nanos);
        let previous = self
            .last_return
            .insert((sample.tid, timed), ended)
            .unwrap_or(0);
        // An entry event of this call: after this thread's previous call of this function
        // returned, not after this one did.
        let this_call = |at: u64| at > previous && at <= ended;
        let caller = self.callers.get(&sample.tid).copied().unwrap_or_default();
        let expedited = caller.expedited.filter(|(at, ..)| this_call(*at));
        let sync = caller.sync.filter(|(at, _)| this_call(*at));
        let pending = match (staged, expedited, sync) {
            (_, Some((_, seq, sp)), _) => Some((Path::Expedited, seq_snap(seq), sp)),
            (Staged::SynchronizeRcu, None, Some((_, seq))) => {
                Some((Path::Normal, in_progress_of(seq_snap(seq)), 0))
            }
            _ => None,
        };
        let Some((path, gp_seq, sp)) = pending else {
            if let Some(tally) = self.tallies.get_mut(&timed) {
                tally.not_taken_apart.entry_not_seen += 1;
            }
            return;
        };
        let wakeme_invoked_ns = caller
            .wakeme
            .filter(|(at, _)| this_call(*at))
            .and(caller.wakeme_invoked_ns)
            .filter(|&at| at <= ended);
        self.pending.push(Pending {
            timed,
            tid: sample.tid,
            path,
            started_ns: started,
            ended_ns: ended,
            gp_seq,
            sp,
            wakeme_invoked_ns,
        });
        self.resolve();
    }

    /// Takes apart every pending call whose grace period is now known; a call whose grace
    /// period can no longer come (a later one ended) is counted as not taken apart.
    fn resolve(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for call in pending {
            match self.take_apart(&call) {
                Some(staged) => {
                    if let Some(tally) = self.tallies.get_mut(&call.timed) {
                        tally.add(staged);
                    }
                }
                None if self.overtaken(&call) => {
                    if let Some(tally) = self.tallies.get_mut(&call.timed) {
                        tally.not_taken_apart.grace_period_not_seen += 1;
                    }
                }
                None => self.pending.push(call),
            }
        }
    }

    /// Whether a grace period later than the call's ended before the call returned, while
    /// its own was never seen: it will not be.
    fn overtaken(&self, call: &Pending) -> bool {
        match call.path {
            Path::Normal => self
                .normal
                .range(later(call.gp_seq))
                .any(|(_, gp)| gp.ended_ns <= call.ended_ns),
            Path::Expedited => self
                .expedited
                .range(later(call.gp_seq))
                .any(|(_, gp)| gp.ended_ns.is_some_and(|end| end <= call.ended_ns)),
        }
    }

    fn take_apart(&self, call: &Pending) -> Option<StagedCall> {
        let (t0, t3) = (call.started_ns, call.ended_ns.max(call.started_ns));
        let (mut adjusted, mut out_of_order) = (false, false);
        // Each milestone between the one before it and the call's return. Bounds that cross
        // (the one before it came after the one it must not pass) are records in an order no
        // call has: the upper one is moved up to the lower, never handed to `u64::clamp`,
        // which panics on them.
        let mut clamp = |at: u64, low: u64, high: u64| {
            if high < low {
                out_of_order = true;
            }
            let clamped = at.clamp(low, high.max(low));
            adjusted |= clamped != at || high < low;
            clamped
        };
        let (stages, piggy_backed, ipis) = match call.path {
            Path::Normal => {
                let gp = self.normal.get(&(call.gp_seq as i64))?;
                if gp.started_ns > t3 {
                    return None;
                }
                let t1 = clamp(gp.started_ns, t0, t3);
                // Woken before its grace period began crosses these bounds: out of order.
                let woken = call.wakeme_invoked_ns.map(|at| at.min(t3));
                let t2 = clamp(gp.ended_ns, t1, woken.unwrap_or(t3));
                let woken = woken.map(|at| clamp(at, t2, t3));
                let stages = match woken {
                    Some(tw) => vec![
                        Some(t1 - t0),
                        Some(t2 - t1),
                        Some(tw - t2),
                        Some(t3 - tw),
                        None,
                    ],
                    None => vec![Some(t1 - t0), Some(t2 - t1), None, None, Some(t3 - t2)],
                };
                (stages, None, None)
            }
            Path::Expedited => {
                let gp = self.expedited.get(&(call.gp_seq as i64))?;
                if gp.select_ns > t3 {
                    return None;
                }
                let t1 = clamp(gp.select_ns, t0, t3);
                let t2 = clamp(gp.select_end_ns.unwrap_or(gp.select_ns), t1, t3);
                let tw = clamp(gp.ended_ns.unwrap_or(t3), t2, t3);
                let stages = vec![Some(t1 - t0), Some(t2 - t1), Some(tw - t2), Some(t3 - tw)];
                // The request lies in its requester's frame, just below its entry's stack
                // pointer.
                let own = gp
                    .work
                    .map(|work| work < call.sp && call.sp - work < THREAD_STACK_BYTES);
                (stages, own.map(|own| !own), Some(gp.ipis))
            }
        };
        Some(StagedCall {
            timed: call.timed,
            path: call.path,
            tid: call.tid,
            started_ns: t0,
            latency_ns: t3 - t0,
            gp_seq: call.gp_seq,
            stages_ns: stages,
            piggy_backed,
            ipis,
            adjusted,
            out_of_order,
        })
    }

    /// The summary of timed function `timed` since the last take; `closing` at the end of
    /// the window, when calls still waiting for their grace period will not get it.
    pub fn take(&mut self, timed: u32, closing: bool) -> StagesSummary {
        if closing {
            let (unresolved, still): (Vec<Pending>, Vec<Pending>) =
                self.pending.drain(..).partition(|p| p.timed == timed);
            self.pending = still;
            if let Some(tally) = self.tallies.get_mut(&timed) {
                tally.not_taken_apart.grace_period_not_seen += unresolved.len() as u64;
            }
        }
        let tally = self
            .tallies
            .insert(timed, FunctionTally::new())
            .unwrap_or_else(FunctionTally::new);
        self.summarize(timed, tally)
    }

    /// As `take`, but everything stays for later reports (`--cumulative`).
    pub fn copy(&self, timed: u32) -> StagesSummary {
        let tally = self
            .tallies
            .get(&timed)
            .cloned()
            .unwrap_or_else(FunctionTally::new);
        self.summarize(timed, tally)
    }

    fn summarize(&self, timed: u32, tally: FunctionTally) -> StagesSummary {
        let function = self.staged.iter().find(|f| f.timed == timed);
        summarize(
            tally,
            function.map_or(Unit::Ms, |f| f.unit),
            function.map_or("", |f| &f.map_name),
            self.wake_from_gp,
        )
    }
}

fn summarize(
    tally: FunctionTally,
    unit: Unit,
    map_name: &str,
    wake_from_gp: Option<bool>,
) -> StagesSummary {
    let paths = [&tally.normal, &tally.expedited]
        .into_iter()
        .filter(|p| p.calls > 0)
        .map(PathTally::summary)
        .collect();
    StagesSummary {
        map_name: map_name.to_string(),
        unit,
        paths,
        not_taken_apart: tally.not_taken_apart,
        adjusted: tally.adjusted,
        out_of_order: tally.out_of_order,
        // The run's counters say, not the joiner: see `commands::latency`.
        events_lost: 0,
        wake_from_gp,
        calls: tally.calls,
        calls_not_listed: tally.calls_not_listed,
    }
}

/// The grace periods numbered after `seq`, as the map keys them (none after the largest).
fn later(seq: u64) -> (std::ops::Bound<i64>, std::ops::Bound<i64>) {
    (
        std::ops::Bound::Excluded(seq as i64),
        std::ops::Bound::Unbounded,
    )
}

/// Keeps a grace period by its number, forgetting the oldest beyond what calls can still need.
fn keep<V>(map: &mut BTreeMap<i64, V>, seq: u64, value: V) {
    map.insert(seq as i64, value);
    while map.len() > KEPT_GRACE_PERIODS {
        map.pop_first();
    }
}

#[cfg(test)]
pub(crate) mod tests;
