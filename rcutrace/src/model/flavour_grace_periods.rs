//! The grace periods of the flavours other than normal RCU's, assembled from `gp
//! --flavor`'s events, keyed by what runs them: an SRCU domain (`struct srcu_struct *`), or a
//! tasks-RCU flavour (`struct rcu_tasks *`).
//!
//! SRCU: one begins at `srcu_gp_start()`, which sends the domain's number as it was (idle);
//! `rcu_seq_start()` then makes it odd in its state bits, and `rcu_seq_end()` moves it to the
//! next idle number. It ends at the first event of its domain whose number has reached that:
//! the return of the grace-period work that ended it, or (6.1, where `srcu_gp_end()` starts
//! the next at once) the next one's start. A scan of the domain's readers that finds some
//! names the CPUs where they entered: those are kept with the grace period in progress.
//!
//! Tasks RCU: the flavour's kthread runs one grace period in each call of its wait function
//! (`rcu_tasks_wait_gp()`, `rcu_tasks_rude_wait_gp()`): from its entry to its return. Classic
//! tasks RCU passes over the tasks it still waits for until none is left: the tasks listed
//! as its last pass began are the grace period's last holdouts.
//!
//! Each grace period is also taken apart into its kernel's own phases: tasks RCU's steps
//! (`TASKS_PHASES`, marked by the kthread's phase functions), SRCU's two scans of its readers
//! and what follows them (`SRCU_PHASES`, marked by each scan that found none left). A phase
//! is timed only where both its bounds were seen.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use rcutrace_common::attribution::NO_STACK;
use rcutrace_common::gp::{
    EVENT_SRCU_CALLBACKS, EVENT_SRCU_READERS, EVENT_SRCU_SCAN_CLEAR, EVENT_SRCU_START,
    EVENT_SRCU_WORK_DONE, EVENT_TASKS_END, EVENT_TASKS_HOLDOUT, EVENT_TASKS_HOLDOUT_SAMPLE,
    EVENT_TASKS_PASS, EVENT_TASKS_PHASE, EVENT_TASKS_START, GP_SEQ_STATE_BITS, GpEvent,
};

use crate::model::{
    aggregate::{Layout, Series},
    attribution::comm,
    flavour_stall::InProgress as InProgressNow,
    grace_periods::keep_slowest,
};

const STATE_MASK: u64 = (1 << GP_SEQ_STATE_BITS) - 1;

/// A tasks-RCU grace period's phases, in the order its kthread runs them, as the kernel's
/// `tasks_gp_state` names them: the pre-GP step (classic tasks RCU waits there for normal
/// RCU's readers), the scan of the task list for holdouts, the post-scan step (exiting
/// tasks), the passes over the holdouts until none is left, the post-GP step. Indexed by the
/// programs' `TASKS_PHASE_*`. The rude flavour has none of these steps.
pub const TASKS_PHASES: [&str; 5] = [
    "pre_gp",
    "scan_tasklist",
    "post_scan",
    "holdouts",
    "post_gp",
];
/// An SRCU grace period's: until a scan finds no reader left on the index new readers no
/// longer enter, then (after the flip) on the one they entered until then, then to its end
/// (`srcu_gp_end()`, which schedules the callbacks). Indexed by the scan's number.
pub const SRCU_PHASES: [&str; 3] = ["scan1", "scan2", "gp_end"];

/// When each phase of a grace period in progress began, by its index; the first as the grace
/// period did.
#[derive(Clone, Debug, Default)]
struct PhaseMarks(Vec<Option<u64>>);

impl PhaseMarks {
    fn starting(phases: usize, at: u64) -> Self {
        let mut marks = vec![None; phases];
        if let Some(first) = marks.first_mut() {
            *first = Some(at);
        }
        PhaseMarks(marks)
    }

    /// Phase `index` began at `at` (the first mark of it counts).
    fn mark(&mut self, index: u64, at: u64) {
        if let Some(mark @ None) = usize::try_from(index).ok().and_then(|i| self.0.get_mut(i)) {
            *mark = Some(at);
        }
    }

    /// Each phase's length, named, of a grace period that ended at `end`: those whose begin
    /// and the next one's (or the end) were both seen.
    fn lengths(&self, names: &[&'static str], end: u64) -> Vec<(&'static str, u64)> {
        let ends = self.0.iter().skip(1).copied().chain([Some(end)]);
        names
            .iter()
            .zip(self.0.iter().zip(ends))
            .filter_map(|(&name, (begin, end))| Some((name, end?.checked_sub((*begin)?)?)))
            .collect()
    }
}

/// One grace period, whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlavourGracePeriod {
    /// What ran it: an SRCU domain, or a tasks-RCU flavour's `struct rcu_tasks`.
    pub key: u64,
    /// SRCU: its `srcu_gp_seq` while in progress (0 for tasks RCU).
    pub gp_seq: u64,
    pub started_ns: u64,
    pub duration_ns: u64,
    /// SRCU: the CPUs where readers that held it up entered, ascending.
    pub reader_cpus: Vec<u32>,
    /// Classic tasks RCU: the tasks still listed as its last pass over the holdouts began.
    pub last_holdouts: Vec<HoldoutTask>,
    /// Whether that pass listed more tasks than were named.
    pub holdouts_unnamed: bool,
    /// Its phases (`TASKS_PHASES`, `SRCU_PHASES`) in order, each whose bounds were seen.
    pub phases: Vec<(&'static str, u64)>,
    /// Tasks RCU: how many passes over the holdouts it made.
    pub holdout_passes: u32,
    /// The waits in flight over its whole length (`gp --flavor`'s timed waits, the first
    /// `MAX_WAITERS_KEPT` seen to return), of any tasks-RCU flavour: its own are told when
    /// it is named.
    pub waiters: Vec<Waiter>,
    /// Such waits past those kept.
    pub waiters_unkept: u64,
}

/// At most this many waits are kept per grace period; the rest are counted.
pub const MAX_WAITERS_KEPT: usize = 64;

/// A wait that returned: a call of one of the functions that wait for a grace period.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiter {
    /// Its index among the timed functions.
    pub timed: u32,
    pub tid: u32,
    /// The SRCU domain it waited on (0 for the others).
    pub domain: u64,
    pub started_ns: u64,
    pub waited_ns: u64,
    /// Its caller's stack, kept in the stack map.
    pub stack: u64,
}

impl FlavourGracePeriod {
    /// Lists `wait` if it was in flight over this grace period's whole length (called
    /// before it began, returned after it ended): it waited through it. SRCU's only on its
    /// domain.
    pub fn waited_through_by(&mut self, wait: &Waiter, srcu: bool) {
        let ended = self.started_ns.saturating_add(self.duration_ns);
        let spans = wait.started_ns <= self.started_ns
            && wait.started_ns.saturating_add(wait.waited_ns) >= ended;
        if !spans || (srcu && wait.domain != self.key) {
            return;
        }
        if self.waiters.len() < MAX_WAITERS_KEPT {
            self.waiters.push(wait.clone());
        } else {
            self.waiters_unkept += 1;
        }
    }
}

/// A task a tasks-RCU grace period waited for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HoldoutTask {
    pub comm: String,
    pub pid: u32,
    /// The CPU it last ran on, as the pass began.
    pub cpu: u32,
    /// Its kernel stack as a tick last sampled it in the grace period (classic tasks RCU's
    /// holdouts, while busy), kept in the stack map.
    pub stack: Option<u64>,
}

impl HoldoutTask {
    /// As `-f json` gives it, but for its stack, which needs naming.
    pub fn record(&self) -> rcutrace_common::records::HoldoutTaskRecord {
        rcutrace_common::records::HoldoutTaskRecord {
            pid: self.pid,
            comm: self.comm.clone(),
            cpu: self.cpu,
            stack: Vec::new(),
        }
    }
}

/// A tasks-RCU grace period in progress.
#[derive(Debug, Default)]
struct TasksInProgress {
    started_ns: u64,
    phases: PhaseMarks,
    passes: u32,
    /// The holdouts sent for the pass now beginning.
    listing: Vec<HoldoutTask>,
    last_holdouts: Vec<HoldoutTask>,
    holdouts_unnamed: bool,
    /// When the last pass over the holdouts began, and the one before it. Every task the
    /// last pass lists was still holding when the one before checked it, just after it
    /// began: a sample taken by then is of the task holding the grace period up, one taken
    /// later may be of it after its quiescent state, its flag not yet cleared (a tick in
    /// its exit path).
    last_pass_ns: Option<u64>,
    pass_before_ns: Option<u64>,
}

/// An SRCU grace period in progress.
#[derive(Debug)]
struct InProgress {
    /// The number it ends at.
    end: u64,
    started_ns: u64,
    reader_cpus: BTreeSet<u32>,
    phases: PhaseMarks,
}

/// Whether an event of `kind` is one of these flavours' (not normal RCU's).
pub fn is_flavour_event(kind: u32) -> bool {
    matches!(
        kind,
        EVENT_SRCU_START
            | EVENT_SRCU_READERS
            | EVENT_SRCU_WORK_DONE
            | EVENT_SRCU_CALLBACKS
            | EVENT_TASKS_START
            | EVENT_TASKS_END
            | EVENT_TASKS_HOLDOUT
            | EVENT_TASKS_PASS
            | EVENT_TASKS_PHASE
            | EVENT_TASKS_HOLDOUT_SAMPLE
            | EVENT_SRCU_SCAN_CLEAR
    )
}

/// The number a grace period begun at idle number `gp_seq` ends at (`rcu_seq_endval()` of
/// the number `rcu_seq_start()` makes of it).
fn end_of(gp_seq: u64) -> u64 {
    (gp_seq.wrapping_add(1) | STATE_MASK).wrapping_add(1)
}

/// Whether number `gp_seq` has reached `end` (as the kernel compares them, past wrapping).
fn reached(gp_seq: u64, end: u64) -> bool {
    gp_seq.wrapping_sub(end) as i64 >= 0
}

/// What an assembler has finished and not yet handed on.
#[derive(Debug, Default)]
pub struct Finished {
    done: Vec<FlavourGracePeriod>,
    /// Grace periods seen to end whose start came before tracing (or was not sent).
    began_before_tracing: u64,
}

/// What `gp --flavor` assembles its events with.
pub trait Assemble {
    fn add(&mut self, event: &GpEvent);
    /// Grace periods begun and not yet seen to end.
    fn in_progress(&self) -> u64;
    /// Those grace periods, each with what holds it as last seen.
    fn in_progress_now(&self) -> Vec<InProgressNow>;
    fn finished(&mut self) -> &mut Finished;

    /// The grace periods ended since the last call, in the order they ended.
    fn take_done(&mut self) -> Vec<FlavourGracePeriod> {
        std::mem::take(&mut self.finished().done)
    }

    /// Grace periods seen to end whose start was not seen, since the last call.
    fn take_began_before_tracing(&mut self) -> u64 {
        std::mem::take(&mut self.finished().began_before_tracing)
    }
}

#[derive(Debug, Default)]
pub struct SrcuAssembler {
    /// Per domain, the grace period in progress.
    in_progress: HashMap<u64, InProgress>,
    /// Per domain, the end of a grace period seen in progress whose start was not seen.
    unseen: HashMap<u64, u64>,
    finished: Finished,
}

impl Assemble for SrcuAssembler {
    fn add(&mut self, event: &GpEvent) {
        self.assemble(event);
    }

    fn in_progress(&self) -> u64 {
        self.in_progress.len() as u64
    }

    fn in_progress_now(&self) -> Vec<InProgressNow> {
        self.in_progress
            .iter()
            .map(|(&key, gp)| InProgressNow {
                key,
                started_ns: gp.started_ns,
                holdouts: Vec::new(),
                reader_cpus: gp.reader_cpus.iter().copied().collect(),
            })
            .collect()
    }

    fn finished(&mut self) -> &mut Finished {
        &mut self.finished
    }
}

/// Samples kept per holdout task: at one each 100 ms, a few seconds' worth, more than the
/// longest time between two passes over the holdouts (1 s).
const SAMPLES_KEPT: usize = 32;

/// The stack of a holdout task's sample (`samples`, oldest first) for the grace period begun
/// at `started_ns`: the last one taken by `held_until` (the start of the pass before the
/// last, when the task was still holding it up), else the first in the grace period.
fn held_sample(
    samples: &VecDeque<(u64, u64)>,
    started_ns: u64,
    held_until: Option<u64>,
) -> Option<u64> {
    let mut in_gp = samples.iter().filter(|(at, _)| *at >= started_ns);
    let first = in_gp.clone().next();
    held_until
        .and_then(|until| in_gp.rfind(|(at, _)| *at <= until))
        .or(first)
        .map(|&(_, stack)| stack)
}

/// Tasks RCU's grace periods: each from its wait function's entry to its return, per flavour.
#[derive(Debug, Default)]
pub struct TasksAssembler {
    /// Per flavour, the grace period in progress.
    in_progress: HashMap<u64, TasksInProgress>,
    /// Per task, when a tick sampled it as a holdout and its stack, while a grace period is
    /// in progress: the latest `SAMPLES_KEPT` (see `held_sample`).
    samples: HashMap<u32, VecDeque<(u64, u64)>>,
    finished: Finished,
}

impl Assemble for TasksAssembler {
    fn add(&mut self, event: &GpEvent) {
        let (flavour, at) = (event.value, event.at_ns);
        match event.kind {
            EVENT_TASKS_START => {
                let started = TasksInProgress {
                    started_ns: at,
                    phases: PhaseMarks::starting(TASKS_PHASES.len(), at),
                    ..TasksInProgress::default()
                };
                self.in_progress.insert(flavour, started);
            }
            EVENT_TASKS_HOLDOUT => {
                if let Some(gp) = self.in_progress.get_mut(&flavour) {
                    gp.listing.push(HoldoutTask {
                        comm: comm(&event.text),
                        pid: (event.extra >> 32) as u32,
                        cpu: event.extra as u32,
                        stack: None,
                    });
                }
            }
            EVENT_TASKS_PASS => {
                if let Some(gp) = self.in_progress.get_mut(&flavour) {
                    gp.last_holdouts = std::mem::take(&mut gp.listing);
                    gp.holdouts_unnamed = event.extra != 0;
                    gp.passes += 1;
                    gp.pass_before_ns = gp.last_pass_ns.replace(at);
                }
            }
            EVENT_TASKS_PHASE => {
                if let Some(gp) = self.in_progress.get_mut(&flavour) {
                    gp.phases.mark(event.extra, at);
                }
            }
            EVENT_TASKS_HOLDOUT_SAMPLE
                if event.stack != NO_STACK && !self.in_progress.is_empty() =>
            {
                let samples = self.samples.entry(event.pid).or_default();
                if samples.len() == SAMPLES_KEPT {
                    samples.pop_front();
                }
                samples.push_back((at, event.stack));
            }
            EVENT_TASKS_END => match self.in_progress.remove(&flavour) {
                Some(mut gp) => {
                    // Each last holdout's stack, if a tick sampled it in this grace period.
                    for task in &mut gp.last_holdouts {
                        task.stack = self.samples.get(&task.pid).and_then(|samples| {
                            held_sample(samples, gp.started_ns, gp.pass_before_ns)
                        });
                    }
                    self.finished.done.push(FlavourGracePeriod {
                        key: flavour,
                        gp_seq: 0,
                        started_ns: gp.started_ns,
                        duration_ns: at.saturating_sub(gp.started_ns),
                        reader_cpus: Vec::new(),
                        last_holdouts: gp.last_holdouts,
                        holdouts_unnamed: gp.holdouts_unnamed,
                        phases: gp.phases.lengths(&TASKS_PHASES, at),
                        holdout_passes: gp.passes,
                        ..FlavourGracePeriod::default()
                    });
                    // Samples older than every grace period still in progress are no one's.
                    let oldest = self.in_progress.values().map(|g| g.started_ns).min();
                    self.samples.retain(|_, samples| {
                        samples.retain(|(sampled, _)| oldest.is_some_and(|o| *sampled >= o));
                        !samples.is_empty()
                    });
                }
                None => self.finished.began_before_tracing += 1,
            },
            _ => {}
        }
    }

    fn in_progress(&self) -> u64 {
        self.in_progress.len() as u64
    }

    fn in_progress_now(&self) -> Vec<InProgressNow> {
        self.in_progress
            .iter()
            .map(|(&key, gp)| InProgressNow {
                key,
                started_ns: gp.started_ns,
                holdouts: gp.last_holdouts.clone(),
                reader_cpus: Vec::new(),
            })
            .collect()
    }

    fn finished(&mut self) -> &mut Finished {
        &mut self.finished
    }
}

impl SrcuAssembler {
    fn assemble(&mut self, event: &GpEvent) {
        let (domain, gp_seq, at) = (event.value, event.extra, event.at_ns);
        match event.kind {
            EVENT_SRCU_START => {
                self.passed(domain, gp_seq, at);
                let started = InProgress {
                    end: end_of(gp_seq),
                    started_ns: at,
                    reader_cpus: BTreeSet::new(),
                    phases: PhaseMarks::starting(SRCU_PHASES.len(), at),
                };
                self.in_progress.insert(domain, started);
            }
            EVENT_SRCU_READERS => {
                if let Some(gp) = self.in_progress.get_mut(&domain) {
                    gp.reader_cpus.insert((event.extra >> 32) as u32);
                }
            }
            EVENT_SRCU_SCAN_CLEAR => {
                // The scan numbered N over: phase N (from 0) begins.
                if let Some(gp) = self.in_progress.get_mut(&domain) {
                    gp.phases.mark(event.extra, at);
                }
            }
            // The domain's number as its work returned or its callbacks began to run,
            // whichever comes first: each is after the grace periods it has passed ended.
            EVENT_SRCU_WORK_DONE | EVENT_SRCU_CALLBACKS => {
                self.passed(domain, gp_seq, at);
                if gp_seq & STATE_MASK != 0 && !self.in_progress.contains_key(&domain) {
                    self.unseen
                        .entry(domain)
                        .or_insert((gp_seq | STATE_MASK).wrapping_add(1));
                }
            }
            _ => {}
        }
    }

    /// `domain`'s number is `gp_seq` at `at`: ends what that number has passed.
    fn passed(&mut self, domain: u64, gp_seq: u64, at: u64) {
        if self
            .in_progress
            .get(&domain)
            .is_some_and(|gp| reached(gp_seq, gp.end))
            && let Some(gp) = self.in_progress.remove(&domain)
        {
            self.finished.done.push(FlavourGracePeriod {
                key: domain,
                gp_seq: gp.end.wrapping_sub(STATE_MASK + 1) | 1,
                started_ns: gp.started_ns,
                duration_ns: at.saturating_sub(gp.started_ns),
                reader_cpus: gp.reader_cpus.into_iter().collect(),
                phases: gp.phases.lengths(&SRCU_PHASES, at),
                ..FlavourGracePeriod::default()
            });
        }
        if let Some(&end) = self.unseen.get(&domain)
            && reached(gp_seq, end)
        {
            self.unseen.remove(&domain);
            self.finished.began_before_tracing += 1;
        }
    }
}

/// The durations of the grace periods of a period, per key; per key and CPU how many were
/// held up by readers that entered there (SRCU), and per key and task how many it held up to
/// their last pass (tasks RCU).
#[derive(Clone, Debug)]
pub struct FlavourTally {
    layout: Layout,
    unit_ns: u64,
    /// How many of the slowest grace periods are kept whole.
    top: usize,
    /// The slowest, slowest first (the earlier first among equals).
    pub slowest: Vec<FlavourGracePeriod>,
    pub by_key: BTreeMap<u64, Series>,
    /// Per key and phase, the phases' lengths.
    pub by_phase: BTreeMap<(u64, &'static str), Series>,
    pub held_by_readers_on: BTreeMap<(u64, u32), u64>,
    /// Keyed by the task's comm and pid (its CPU differs from one pass to the next).
    pub held_by_tasks: BTreeMap<(u64, String, u32), u64>,
    /// Grace periods whose last pass listed more holdouts than were named.
    pub holdouts_unnamed: u64,
}

impl FlavourTally {
    pub fn new(layout: Layout, unit_ns: u64, top: usize) -> Self {
        FlavourTally {
            layout,
            unit_ns,
            top,
            slowest: Vec::new(),
            by_key: BTreeMap::new(),
            by_phase: BTreeMap::new(),
            held_by_readers_on: BTreeMap::new(),
            held_by_tasks: BTreeMap::new(),
            holdouts_unnamed: 0,
        }
    }

    pub fn add(&mut self, gp: &FlavourGracePeriod) {
        self.by_key
            .entry(gp.key)
            .or_insert_with(|| Series::new(self.layout))
            .record(gp.duration_ns, self.unit_ns);
        for &(phase, ns) in &gp.phases {
            self.by_phase
                .entry((gp.key, phase))
                .or_insert_with(|| Series::new(self.layout))
                .record(ns, self.unit_ns);
        }
        for &cpu in &gp.reader_cpus {
            *self.held_by_readers_on.entry((gp.key, cpu)).or_default() += 1;
        }
        for task in &gp.last_holdouts {
            *self
                .held_by_tasks
                .entry((gp.key, task.comm.clone(), task.pid))
                .or_default() += 1;
        }
        self.holdouts_unnamed += u64::from(gp.holdouts_unnamed);
        if self.top > 0 {
            keep_slowest(&mut self.slowest, gp.clone(), self.top, |g| g.duration_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASKS: u64 = 0xffff_ffff_82cc_dcc0;
    const RUDE: u64 = 0xffff_ffff_82cc_db60;

    const A: u64 = 0xffff_ffff_a040_2000;
    const B: u64 = 0xffff_8880_0123_4000;

    fn event(kind: u32, domain: u64, gp_seq: u64, at_ns: u64) -> GpEvent {
        GpEvent {
            kind,
            value: domain,
            extra: gp_seq,
            at_ns,
            ..GpEvent::default()
        }
    }

    #[test]
    fn a_grace_period_ends_at_the_work_that_moved_its_number_on() {
        let mut assembler = SrcuAssembler::default();
        assembler.add(&event(EVENT_SRCU_START, A, 8, 1_000));
        // A scan that found readers entered on CPU 3 (twice), then a run of the work: still
        // in progress. Another domain's readers are not this grace period's.
        assembler.add(&event(EVENT_SRCU_READERS, A, 3 << 32 | 1, 1_500));
        assembler.add(&event(EVENT_SRCU_READERS, B, 5 << 32 | 1, 1_500));
        assembler.add(&event(EVENT_SRCU_READERS, A, 3 << 32 | 1, 1_800));
        assembler.add(&event(EVENT_SRCU_WORK_DONE, A, 9, 2_000));
        assert!(assembler.take_done().is_empty());
        let now = assembler.in_progress_now();
        assert_eq!(
            now.iter()
                .map(|gp| (gp.key, gp.started_ns, gp.reader_cpus.clone()))
                .collect::<Vec<_>>(),
            [(A, 1_000, vec![3])]
        );
        assert_eq!(Assemble::in_progress(&assembler), 1);
        assembler.add(&event(EVENT_SRCU_WORK_DONE, A, 12, 5_000));
        assert_eq!(
            assembler.take_done(),
            [FlavourGracePeriod {
                key: A,
                gp_seq: 9,
                started_ns: 1_000,
                duration_ns: 4_000,
                reader_cpus: vec![3],
                last_holdouts: Vec::new(),
                holdouts_unnamed: false,
                phases: Vec::new(),
                holdout_passes: 0,
                waiters: Vec::new(),
                waiters_unkept: 0,
            }]
        );
        assert_eq!(Assemble::in_progress(&assembler), 0);
    }

    #[test]
    fn a_grace_period_ends_by_its_callbacks_run_when_that_comes_before_its_work_returns() {
        // As a 6.1 guest ran it: the callbacks ran on another CPU, and woke the wait, while the
        // work that ended the grace period had not returned yet.
        let mut assembler = SrcuAssembler::default();
        assembler.add(&event(EVENT_SRCU_START, A, 8, 1_000));
        assembler.add(&event(EVENT_SRCU_CALLBACKS, A, 12, 2_900));
        let mut done = assembler.take_done();
        assert_eq!(
            done.iter()
                .map(|gp| (gp.gp_seq, gp.started_ns, gp.duration_ns))
                .collect::<Vec<_>>(),
            [(9, 1_000, 1_900)]
        );
        // The wait those callbacks woke returned before the work did: it waited through it.
        let woken = Waiter {
            timed: 0,
            tid: 259,
            domain: A,
            started_ns: 900,
            waited_ns: 2_050,
            stack: 1,
        };
        done[0].waited_through_by(&woken, true);
        assert_eq!(done[0].waiters, [woken]);
        // The work's return, and another CPU's callbacks, end nothing more.
        assembler.add(&event(EVENT_SRCU_WORK_DONE, A, 12, 3_000));
        assembler.add(&event(EVENT_SRCU_CALLBACKS, A, 12, 3_100));
        assert!(assembler.take_done().is_empty());
        assert_eq!(assembler.take_began_before_tracing(), 0);
    }

    #[test]
    fn the_next_start_ends_the_one_before_when_it_comes_first() {
        // 6.1: srcu_gp_end() starts the next grace period before the work returns.
        let mut assembler = SrcuAssembler::default();
        assembler.add(&event(EVENT_SRCU_START, A, 12, 1_000));
        assembler.add(&event(EVENT_SRCU_START, A, 16, 3_000));
        assembler.add(&event(EVENT_SRCU_WORK_DONE, A, 17, 3_500));
        assembler.add(&event(EVENT_SRCU_WORK_DONE, A, 20, 9_000));
        let done = assembler.take_done();
        assert_eq!(
            done.iter()
                .map(|g| (g.gp_seq, g.started_ns, g.duration_ns))
                .collect::<Vec<_>>(),
            [(13, 1_000, 2_000), (17, 3_000, 6_000)]
        );
    }

    #[test]
    fn domains_are_apart() {
        let mut assembler = SrcuAssembler::default();
        assembler.add(&event(EVENT_SRCU_START, A, 4, 100));
        assembler.add(&event(EVENT_SRCU_START, B, 400, 200));
        // B's number says nothing of A's grace period.
        assembler.add(&event(EVENT_SRCU_WORK_DONE, B, 404, 300));
        assembler.add(&event(EVENT_SRCU_WORK_DONE, A, 8, 1_100));
        let done: Vec<_> = assembler
            .take_done()
            .iter()
            .map(|g| (g.key, g.duration_ns))
            .collect();
        assert_eq!(done, [(B, 100), (A, 1_000)]);
        let mut tally = FlavourTally::new(Layout::Log2, 1, 10);
        for g in [(A, 5), (A, 7), (B, 9)] {
            tally.add(&FlavourGracePeriod {
                key: g.0,
                gp_seq: 1,
                started_ns: 0,
                duration_ns: g.1,
                reader_cpus: if g.1 == 7 { vec![0, 2] } else { vec![2] },
                last_holdouts: Vec::new(),
                holdouts_unnamed: false,
                phases: Vec::new(),
                holdout_passes: 0,
                waiters: Vec::new(),
                waiters_unkept: 0,
            });
        }
        assert_eq!(
            tally
                .held_by_readers_on
                .iter()
                .map(|(k, n)| (*k, *n))
                .collect::<Vec<_>>(),
            [((B, 2), 1), ((A, 0), 1), ((A, 2), 2)]
        );
        let counts: Vec<_> = tally.by_key.iter().map(|(d, s)| (*d, s.count())).collect();
        assert_eq!(counts, [(B, 1), (A, 2)]);
    }

    #[test]
    fn the_slowest_are_kept_whole_slowest_first() {
        let mut tally = FlavourTally::new(Layout::Log2, 1, 2);
        for (started_ns, duration_ns) in [(1, 50), (2, 70), (3, 10), (4, 70), (5, 90)] {
            tally.add(&FlavourGracePeriod {
                key: A,
                gp_seq: 1,
                started_ns,
                duration_ns,
                reader_cpus: Vec::new(),
                last_holdouts: Vec::new(),
                holdouts_unnamed: false,
                phases: Vec::new(),
                holdout_passes: 0,
                waiters: Vec::new(),
                waiters_unkept: 0,
            });
        }
        let kept: Vec<_> = tally
            .slowest
            .iter()
            .map(|g| (g.started_ns, g.duration_ns))
            .collect();
        assert_eq!(kept, [(5, 90), (2, 70)]);
        assert_eq!(tally.by_key[&A].count(), 5);
        assert!(FlavourTally::new(Layout::Log2, 1, 0).slowest.is_empty());
    }

    #[test]
    fn one_begun_before_tracing_is_counted_not_timed() {
        let mut assembler = SrcuAssembler::default();
        // In progress when first seen, then over.
        assembler.add(&event(EVENT_SRCU_WORK_DONE, A, 21, 100));
        assembler.add(&event(EVENT_SRCU_WORK_DONE, A, 24, 900));
        assert!(assembler.take_done().is_empty());
        assert_eq!(assembler.finished.began_before_tracing, 1);
        // An idle domain's work says nothing.
        assembler.add(&event(EVENT_SRCU_WORK_DONE, B, 40, 1_000));
        assert_eq!(assembler.finished.began_before_tracing, 1);
    }

    #[test]
    fn numbers_compare_past_wrapping() {
        let mut assembler = SrcuAssembler::default();
        let near_the_end = u64::MAX - 3;
        assembler.add(&event(EVENT_SRCU_START, A, near_the_end, 10));
        assembler.add(&event(EVENT_SRCU_WORK_DONE, A, 0, 30));
        assert_eq!(assembler.take_done().len(), 1);
    }

    #[test]
    fn a_tasks_grace_period_is_its_wait_function_call() {
        let mut assembler = TasksAssembler::default();
        // The rude flavour's ends first; one flavour's end never ends another's.
        assembler.add(&event(EVENT_TASKS_START, TASKS, 0, 1_000));
        assembler.add(&event(EVENT_TASKS_START, RUDE, 0, 1_500));
        assembler.add(&event(EVENT_TASKS_END, RUDE, 0, 2_000));
        assert_eq!(assembler.in_progress(), 1);
        assembler.add(&event(EVENT_TASKS_END, TASKS, 0, 901_000));
        let done: Vec<_> = assembler
            .take_done()
            .iter()
            .map(|g| (g.key, g.started_ns, g.duration_ns))
            .collect();
        assert_eq!(done, [(RUDE, 1_500, 500), (TASKS, 1_000, 900_000)]);
        // An end whose start came before tracing: counted once, then taken.
        assembler.add(&event(EVENT_TASKS_END, TASKS, 0, 950_000));
        assert_eq!(assembler.take_began_before_tracing(), 1);
        assert_eq!(assembler.take_began_before_tracing(), 0);
    }

    fn holdout(flavour: u64, comm: &str, pid: u32, cpu: u32, at_ns: u64) -> GpEvent {
        let mut text = [0u8; 16];
        text[..comm.len()].copy_from_slice(comm.as_bytes());
        GpEvent {
            text,
            ..event(
                EVENT_TASKS_HOLDOUT,
                flavour,
                u64::from(pid) << 32 | u64::from(cpu),
                at_ns,
            )
        }
    }

    #[test]
    fn the_last_pass_names_the_last_holdouts() {
        let mut assembler = TasksAssembler::default();
        assembler.add(&event(EVENT_TASKS_START, TASKS, 0, 1_000));
        // The first pass lists two tasks; the second only the one still busy, on CPU 3;
        // a pass of a flavour with no grace period in progress is nobody's.
        assembler.add(&holdout(TASKS, "sh", 150, 0, 2_000));
        assembler.add(&holdout(TASKS, "spin", 160, 3, 2_000));
        assembler.add(&event(EVENT_TASKS_PASS, TASKS, 0, 2_000));
        assembler.add(&holdout(RUDE, "kworker/1:1", 30, 1, 2_500));
        assembler.add(&event(EVENT_TASKS_PASS, RUDE, 0, 2_500));
        assembler.add(&holdout(TASKS, "spin", 160, 3, 100_000));
        assembler.add(&event(EVENT_TASKS_PASS, TASKS, 1, 100_000));
        // In progress, held by what the last pass listed.
        let now = assembler.in_progress_now();
        assert_eq!(
            now.iter()
                .map(|gp| (gp.key, gp.started_ns, gp.holdouts.len()))
                .collect::<Vec<_>>(),
            [(TASKS, 1_000, 1)]
        );
        // Listed as a pass began that the end came before: not a last pass.
        assembler.add(&holdout(TASKS, "late", 170, 1, 200_000));
        assembler.add(&event(EVENT_TASKS_END, TASKS, 0, 300_000));
        let done = assembler.take_done();
        assert_eq!(done.len(), 1);
        assert_eq!(
            done[0].last_holdouts,
            [HoldoutTask {
                comm: "spin".into(),
                pid: 160,
                cpu: 3,
                stack: None,
            }]
        );
        assert!(done[0].holdouts_unnamed);
        assert!(assembler.in_progress_now().is_empty());
        let mut tally = FlavourTally::new(Layout::Log2, 1, 10);
        tally.add(&done[0]);
        tally.add(&done[0]);
        assert_eq!(
            tally.held_by_tasks.into_iter().collect::<Vec<_>>(),
            [((TASKS, "spin".to_string(), 160), 2)]
        );
        assert_eq!(tally.holdouts_unnamed, 2);
    }

    fn phase(flavour: u64, phase: u64, at_ns: u64) -> GpEvent {
        event(EVENT_TASKS_PHASE, flavour, phase, at_ns)
    }

    #[test]
    fn a_tasks_grace_period_is_taken_apart_at_its_phase_steps() {
        use rcutrace_common::gp::{
            TASKS_PHASE_HOLDOUTS, TASKS_PHASE_POST_GP, TASKS_PHASE_POST_SCAN,
            TASKS_PHASE_SCAN_TASKLIST,
        };
        let mut assembler = TasksAssembler::default();
        assembler.add(&event(EVENT_TASKS_START, TASKS, 0, 1_000));
        assembler.add(&phase(TASKS, TASKS_PHASE_SCAN_TASKLIST, 4_000));
        assembler.add(&phase(TASKS, TASKS_PHASE_POST_SCAN, 4_500));
        assembler.add(&phase(TASKS, TASKS_PHASE_HOLDOUTS, 5_000));
        for at in [5_100, 105_000, 300_000] {
            assembler.add(&event(EVENT_TASKS_PASS, TASKS, 0, at));
        }
        // Another flavour's step is not this grace period's; a repeated mark is not a
        // phase's begin.
        assembler.add(&phase(RUDE, TASKS_PHASE_POST_GP, 350_000));
        assembler.add(&phase(TASKS, TASKS_PHASE_POST_GP, 400_000));
        assembler.add(&phase(TASKS, TASKS_PHASE_POST_GP, 410_000));
        assembler.add(&event(EVENT_TASKS_END, TASKS, 0, 403_000));
        let done = assembler.take_done();
        assert_eq!(
            done[0].phases,
            [
                ("pre_gp", 3_000),
                ("scan_tasklist", 500),
                ("post_scan", 500),
                ("holdouts", 395_000),
                ("post_gp", 3_000)
            ]
        );
        assert_eq!(done[0].holdout_passes, 3);
        // The phases seen add up to the whole.
        let sum: u64 = done[0].phases.iter().map(|p| p.1).sum();
        assert_eq!(sum, done[0].duration_ns);
    }

    #[test]
    fn a_phase_whose_bound_went_unseen_is_not_timed() {
        use rcutrace_common::gp::{TASKS_PHASE_HOLDOUTS, TASKS_PHASE_SCAN_TASKLIST};
        let mut assembler = TasksAssembler::default();
        assembler.add(&event(EVENT_TASKS_START, TASKS, 0, 1_000));
        assembler.add(&phase(TASKS, TASKS_PHASE_SCAN_TASKLIST, 2_000));
        // The post-scan step's entry unseen: the scan's end and the post-scan's begin are
        // unknown, so neither is timed (nor stretched into the other); an unknown phase
        // number marks nothing.
        assembler.add(&phase(TASKS, TASKS_PHASE_HOLDOUTS, 3_000));
        assembler.add(&event(EVENT_TASKS_PHASE, TASKS, 99, 3_500));
        assembler.add(&event(EVENT_TASKS_END, TASKS, 0, 9_000));
        // The rude flavour has no steps: no phases at all.
        assembler.add(&event(EVENT_TASKS_START, RUDE, 0, 10_000));
        assembler.add(&event(EVENT_TASKS_END, RUDE, 0, 11_000));
        let done = assembler.take_done();
        assert_eq!(done[0].phases, [("pre_gp", 1_000)]);
        assert!(done[1].phases.is_empty());
    }

    #[test]
    fn an_srcu_grace_period_is_taken_apart_at_its_clear_scans() {
        let mut assembler = SrcuAssembler::default();
        assembler.add(&event(EVENT_SRCU_START, A, 8, 1_000));
        // A scan that found readers is no bound; the first scan clear ends scan1, the
        // second scan2.
        assembler.add(&event(EVENT_SRCU_READERS, A, 3 << 32 | 1, 2_000));
        assembler.add(&event(EVENT_SRCU_SCAN_CLEAR, A, 1, 301_000));
        assembler.add(&event(EVENT_SRCU_SCAN_CLEAR, B, 2, 301_500));
        assembler.add(&event(EVENT_SRCU_SCAN_CLEAR, A, 2, 302_000));
        assembler.add(&event(EVENT_SRCU_WORK_DONE, A, 12, 302_100));
        let done = assembler.take_done();
        assert_eq!(
            done[0].phases,
            [("scan1", 300_000), ("scan2", 1_000), ("gp_end", 100)]
        );
        assert_eq!(done[0].reader_cpus, [3]);
    }

    fn sample(pid: u32, stack: u64, at_ns: u64) -> GpEvent {
        GpEvent {
            pid,
            stack,
            ..event(EVENT_TASKS_HOLDOUT_SAMPLE, 0, 0, at_ns)
        }
    }

    #[test]
    fn a_last_holdout_carries_its_stack_as_sampled_while_it_held() {
        let mut assembler = TasksAssembler::default();
        // Sampled while no grace period was in progress: no one's.
        assembler.add(&sample(160, 7, 500));
        assembler.add(&event(EVENT_TASKS_START, TASKS, 0, 1_000));
        assembler.add(&sample(160, 8, 1_500));
        assembler.add(&sample(160, 9, 2_500));
        assembler.add(&sample(170, NO_STACK, 2_600));
        assembler.add(&holdout(TASKS, "spin", 160, 3, 3_000));
        assembler.add(&holdout(TASKS, "sh", 170, 1, 3_000));
        assembler.add(&event(EVENT_TASKS_PASS, TASKS, 0, 3_000));
        assembler.add(&event(EVENT_TASKS_END, TASKS, 0, 4_000));
        // A grace period begun after the last sample has no stack for the task.
        assembler.add(&event(EVENT_TASKS_START, TASKS, 0, 5_000));
        assembler.add(&holdout(TASKS, "spin", 160, 3, 6_000));
        assembler.add(&event(EVENT_TASKS_PASS, TASKS, 0, 6_000));
        assembler.add(&event(EVENT_TASKS_END, TASKS, 0, 7_000));
        let stacks: Vec<Vec<(u32, Option<u64>)>> = assembler
            .take_done()
            .iter()
            .map(|gp| gp.last_holdouts.iter().map(|t| (t.pid, t.stack)).collect())
            .collect();
        // One pass only: the first sample in the grace period.
        assert_eq!(
            stacks,
            [vec![(160, Some(8)), (170, None)], vec![(160, None)]]
        );
        assert!(assembler.samples.is_empty());

        // Passes at 12_000 and 14_000 both list the task: it was still holding when the first
        // one checked it, so its last sample by then is where it held; the one after (a tick
        // in its way out, the flag not yet cleared) is not.
        assembler.add(&event(EVENT_TASKS_START, TASKS, 0, 10_000));
        assembler.add(&sample(160, 21, 11_000));
        assembler.add(&sample(160, 22, 11_500));
        assembler.add(&holdout(TASKS, "spin", 160, 3, 12_000));
        assembler.add(&event(EVENT_TASKS_PASS, TASKS, 0, 12_000));
        assembler.add(&sample(160, 23, 13_000));
        assembler.add(&holdout(TASKS, "spin", 160, 3, 14_000));
        assembler.add(&event(EVENT_TASKS_PASS, TASKS, 0, 14_000));
        assembler.add(&event(EVENT_TASKS_END, TASKS, 0, 15_000));
        let done = assembler.take_done();
        assert_eq!(done[0].last_holdouts[0].stack, Some(22));
    }

    #[test]
    fn a_holdouts_samples_are_kept_a_few_seconds_deep() {
        let mut samples = VecDeque::new();
        // None in the grace period; the last by the bound; none by it, the first after it.
        assert_eq!(held_sample(&samples, 100, Some(150)), None);
        samples.extend([(90, 1), (110, 2), (140, 3), (160, 4)]);
        assert_eq!(held_sample(&samples, 100, Some(150)), Some(3));
        assert_eq!(held_sample(&samples, 100, Some(105)), Some(2));
        assert_eq!(held_sample(&samples, 100, None), Some(2));
        let mut assembler = TasksAssembler::default();
        assembler.add(&event(EVENT_TASKS_START, TASKS, 0, 0));
        for at in 1..=SAMPLES_KEPT as u64 + 5 {
            assembler.add(&sample(160, at, at));
        }
        let kept = &assembler.samples[&160];
        assert_eq!(kept.len(), SAMPLES_KEPT);
        assert_eq!(kept.front(), Some(&(6, 6)));
    }

    #[test]
    fn a_grace_period_is_waited_through_by_the_waits_in_flight_over_all_of_it() {
        let mut gp = FlavourGracePeriod {
            key: A,
            started_ns: 1_000,
            duration_ns: 500,
            ..FlavourGracePeriod::default()
        };
        let wait = |domain, started_ns, waited_ns| Waiter {
            timed: 0,
            tid: 7,
            domain,
            started_ns,
            waited_ns,
            stack: 3,
        };
        // Through all of it; called after it began (it waits for the next); returned before
        // it ended; another domain's (SRCU).
        for w in [
            wait(A, 900, 700),
            wait(A, 1_100, 900),
            wait(A, 900, 300),
            wait(B, 900, 700),
        ] {
            gp.waited_through_by(&w, true);
        }
        assert_eq!(gp.waiters, [wait(A, 900, 700)]);
        // Tasks RCU's: any domain (none), sorted out by name later; kept up to the cap.
        for _ in 0..MAX_WAITERS_KEPT + 2 {
            gp.waited_through_by(&wait(0, 1_000, 500), false);
        }
        assert_eq!(gp.waiters.len(), MAX_WAITERS_KEPT);
        assert_eq!(gp.waiters_unkept, 3);
    }
}
