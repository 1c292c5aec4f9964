//! Grace periods assembled from the kernel's event stream (`rcutrace_common::gp`): when each
//! was requested, initialised, waited for and cleaned up, which CPU or blocked reader was the
//! last to let it end, and what that holdout was doing. Pure logic: the events arrive in the
//! order the programs reserved their ring-buffer records, which follows causality (the last
//! report wakes the kthread that then cleans up), so one pass in arrival order is enough.
//! Each report is decoded by the kernel's tree of `rcu_node`s (`tree`): on a machine of more
//! than one leaf, a report to an inner node is a leaf's last blocked reader leaving, never a
//! CPU.

use crate::model::attribution::comm;
use std::collections::{BTreeSet, HashMap};

use rcutrace_common::{
    attribution::NO_STACK,
    gp::{self, GP_SEQ_STATE_BITS, GpEvent},
};

use super::tree::{RcuTree, Reported};

/// The phases a grace period's duration (`rcu_gp_init()` entry to `rcu_gp_cleanup()`
/// return, as `gplat` measures it) splits into; they add up to it exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Phases {
    /// `rcu_gp_init()`: setting up the nodes.
    pub init_ns: u64,
    /// From the end of init to the last quiescent state (or blocked reader) reported.
    pub quiescent_wait_ns: u64,
    /// From that report to the kthread starting cleanup: how long the woken kthread took.
    pub kthread_wake_ns: u64,
    /// `rcu_gp_cleanup()`.
    pub cleanup_ns: u64,
}

/// What a CPU was doing when a tick found it holding a grace period up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Kernel,
    User,
    Idle,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Kernel => "kernel",
            Mode::User => "user",
            Mode::Idle => "idle",
        }
    }
}

/// A task as the programs saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    pub pid: u32,
    pub tgid: u32,
    pub comm: String,
}

/// What a tick saw on a CPU that held a grace period up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    pub task: Task,
    pub mode: Mode,
    /// Stack id in the programs' stack map.
    pub stack: Option<u64>,
}

/// Whose report ended the wait for quiescent states.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holdout {
    Cpu {
        /// Every CPU in the report that ended the wait, ascending, never empty (a
        /// force-quiescent-state pass reports several at once: a whole idle leaf of 16).
        cpus: Vec<u32>,
        /// Reported by the kthread's pass (found idle or quiescent), not by the CPU itself.
        found_by_pass: bool,
        /// The first tick sample during this grace period of the first of those CPUs that
        /// was sampled.
        sample: Option<Sample>,
    },
    /// A reader switched out inside its critical section, queued on its node.
    Task {
        task: Task,
        /// The CPU it was switched out on.
        cpu: u32,
        /// How long it was blocked inside the reader.
        blocked_ns: u64,
        /// When it was switched out (CLOCK_MONOTONIC); unknown in a run saved before it
        /// was recorded.
        blocked_at_ns: Option<u64>,
        /// Where it was switched out.
        stack: Option<u64>,
    },
    /// The blocked readers of a leaf, the last of which left without having been seen to
    /// block (it blocked before tracing began): the leaf's report to its parent names the
    /// leaf, and the reporter is that reader.
    Readers {
        /// The last reader to leave.
        task: Task,
        /// The CPUs of the leaf (or leaves) whose readers held it.
        cpus: Vec<u32>,
    },
}

impl Holdout {
    /// The CPU it names first: a CPU holdout's first CPU, the CPU a reader blocked on, the
    /// first CPU of a leaf whose readers held it.
    pub fn cpu(&self) -> u32 {
        match self {
            Holdout::Cpu { cpus, .. } | Holdout::Readers { cpus, .. } => {
                cpus.first().copied().unwrap_or_default()
            }
            Holdout::Task { cpu, .. } => *cpu,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Holdout::Cpu { .. } => "cpu",
            Holdout::Task { .. } | Holdout::Readers { .. } => "task",
        }
    }
}

/// One complete grace period.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GracePeriod {
    /// `rcu_state.gp_seq` while it was in progress.
    pub gp_seq: u64,
    /// When `rcu_gp_init()` was entered (CLOCK_MONOTONIC).
    pub started_ns: u64,
    pub duration_ns: u64,
    pub phases: Phases,
    /// From the request that woke the kthread to its init; `None` when no waking request was
    /// seen (it was requested while the previous one ran, and the kthread went straight on).
    pub request_wait_ns: Option<u64>,
    pub fqs_passes: u32,
    /// CPUs whose quiescent states were reported to the grace period.
    pub cpus_reported: u32,
    /// Blocked readers that held this grace period up and left their critical section.
    pub blocked_readers: u32,
    /// `None` if no report was seen (a hook that never fired; the cross-check says so).
    pub last_holdout: Option<Holdout>,
    /// How long the last holdout held it, from the end of init to its report.
    pub held_ns: u64,
    /// An expedited grace period: `gp_seq` is `rcu_state.expedited_sequence` while it was in
    /// progress, the duration runs from the selection of its CPUs to its waiters woken, the
    /// phases are only the wait for reports (`quiescent_wait_ns`, to the last) and the
    /// wake-up after it (`kthread_wake_ns`), `found_by_pass` a CPU found idle or offline at
    /// selection, and `fqs_passes` 0.
    pub expedited: bool,
}

/// A blocked reader being followed.
#[derive(Clone, Debug)]
struct Blocked {
    since_ns: u64,
    task: Task,
    cpu: u32,
    /// Blocked while its CPU still owed the grace period in progress then (this one).
    blocks_gp_seq: Option<u64>,
    stack: Option<u64>,
}

impl Blocked {
    /// A reader holds up the grace periods whose initialisation ended while it was blocked
    /// (init makes every reader already queued on a node one the grace period waits for),
    /// and the one in progress if its CPU had not reported yet when it blocked.
    fn holds(&self, gp: &InProgress) -> bool {
        self.since_ns < gp.init_end_ns.unwrap_or(u64::MAX)
            || (self.blocks_gp_seq.is_some() && self.blocks_gp_seq == gp.gp_seq)
    }

    /// It as a holdout, leaving its reader at `at`.
    fn left_at(&self, at: u64) -> Holdout {
        Holdout::Task {
            blocked_ns: at.saturating_sub(self.since_ns),
            blocked_at_ns: Some(self.since_ns),
            task: self.task.clone(),
            cpu: self.cpu,
            stack: self.stack,
        }
    }
}

/// The reader that reports its leaf as it leaves, named from its block, where its unlock was
/// not seen (the kernel skipped that hook's hit) but its block was: the report is made by the
/// leaving reader itself, so its pid names it.
fn leaving(blocked: &mut HashMap<u32, Blocked>, event: &GpEvent, at: u64) -> Option<Holdout> {
    blocked.remove(&event.pid).map(|reader| reader.left_at(at))
}

/// A blocked reader that just left its critical section.
#[derive(Clone, Debug)]
struct Left {
    /// It as a holdout (`Holdout::Task`).
    holdout: Holdout,
    /// Whether it was counted as holding the grace period in progress when it left.
    counted: bool,
}

/// The expedited grace period being assembled.
#[derive(Clone, Debug)]
struct ExpeditedInProgress {
    started_ns: u64,
    sequence: u64,
    cpus_reported: u32,
    blocked_readers: u32,
    last: Option<(u64, Holdout)>,
}

/// The grace period being assembled.
#[derive(Clone, Debug)]
struct InProgress {
    started_ns: u64,
    kthread_pid: u32,
    request_ns: Option<u64>,
    gp_seq: Option<u64>,
    init_end_ns: Option<u64>,
    cleanup_start_ns: Option<u64>,
    fqs_passes: u32,
    cpus_reported: u32,
    blocked_readers: u32,
    last: Option<(u64, Holdout)>,
    /// CPUs whose quiescent states were reported so far.
    reported: BTreeSet<u32>,
    /// The kthread's last event (init, a pass, a report it made): when it last ran, as far
    /// as the hooks can tell.
    kthread_seen_ns: u64,
    /// Whether `rcu_gp_init()`'s entry was seen: without it the grace period's start is
    /// unknown, and it is counted incomplete when it ends (or begun before tracing, when no
    /// grace period was seen to start before it).
    start_seen: bool,
}

/// The grace period in progress, as a stall watch sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Current {
    /// `None` until init has returned.
    pub gp_seq: Option<u64>,
    pub started_ns: u64,
    pub reported: BTreeSet<u32>,
    pub kthread_pid: u32,
    pub kthread_seen_ns: u64,
}

/// A reader blocked inside its critical section that holds up the grace period in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedReader {
    pub task: Task,
    pub cpu: u32,
    pub since_ns: u64,
    pub stack: Option<u64>,
}

/// What the stream could not make whole grace periods of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unassembled {
    /// Grace periods under way when tracing started (their beginning was not seen).
    pub began_before_tracing: u64,
    /// A grace period seen in part after tracing began: its start or end, or its number,
    /// was not seen (an event lost).
    pub incomplete: u64,
    /// Grace periods between two seen of which nothing was seen: their number is the gap
    /// in `rcu_state.gp_seq` that no grace period counted here fills (the kernel skipped
    /// the hooks of both their start and their end).
    pub unseen: u64,
    /// Times the kthread ran init for nothing (`rcu_gp_init()` returned false).
    pub spurious_inits: u64,
    /// Reports to an address that is no node of the tree read at start-up, or of bits that
    /// are no CPU or child of it: left out of every grace period.
    pub undecoded_reports: u64,
}

/// Builds grace periods from events, one at a time.
#[derive(Debug)]
pub struct Assembler {
    /// The kernel's tree of `rcu_node`s, which every report is decoded by.
    tree: RcuTree,
    /// The CPUs every grace period waits for (the online ones), where known: a grace period
    /// cleaned up without a report seen from each had a report hook skipped by the kernel
    /// (another BPF program was running on that CPU), so what ended its wait is unknown.
    awaited_cpus: BTreeSet<u32>,
    current: Option<InProgress>,
    pending_request_ns: Option<u64>,
    blocked: HashMap<u32, Blocked>,
    /// The blocked readers that left during the grace period in progress, by pid: on a tree
    /// of more than one level, each one's leaf report to the parent follows in the same task,
    /// and readers on other CPUs may leave in between.
    left: HashMap<u32, Left>,
    /// Per CPU, the grace period's tick samples by stack, which say what held the CPU up.
    samples: HashMap<u32, Tally>,
    /// The latest tick sample per CPU, with its grace period and time: what runs there now,
    /// and does its tick still come.
    latest: HashMap<u32, (u64, u64, Sample)>,
    done: Vec<GracePeriod>,
    pub unassembled: Unassembled,
    /// The number of the latest grace period seen to start (`rcu_gp_init()` returning true).
    last_gp_seq: Option<u64>,
    /// Grace periods counted incomplete since `last_gp_seq` without a number of their own:
    /// they fill part of the next gap in `gp_seq`.
    unnumbered: u64,
    /// Whether any grace period was seen to start: an end without a start after that is
    /// an incomplete grace period, not one that began before tracing.
    start_seen: bool,
    /// The expedited grace period in progress, those completed since the last
    /// `take_done_expedited`, what could not be made whole of them (`undecoded_reports`
    /// counts their reports that no node or leaf explains), and whether one was seen to
    /// start.
    /// Oldest first: the next one can start before the last one's end is seen (its waiter,
    /// woken inside `rcu_exp_wait_wake()`, lets the next begin before that returns).
    expedited: Vec<ExpeditedInProgress>,
    done_expedited: Vec<GracePeriod>,
    pub unassembled_expedited: Unassembled,
    expedited_start_seen: bool,
    /// The blocked readers that left while an expedited grace period was in progress, by
    /// pid: the report of a reader's leaf follows in the same task, and readers on other
    /// CPUs may leave in between. Cleared as the next one starts, which the reports of the
    /// last one all came before.
    reader_left: HashMap<u32, Holdout>,
}

/// One CPU's tick samples of one grace period, by stack. What held the CPU up is the stack
/// most of its ticks found, among those inside a reader where any tick was: a spin's ticks land
/// on its stack again and again, while the tick before the reader or the spin began (a page
/// fault, a worker about to run it) and the one that found it gone come once each.
#[derive(Debug, Default)]
struct Tally {
    gp_seq: u64,
    seen: Vec<Seen>,
    ticks: u64,
}

#[derive(Debug)]
struct Seen {
    in_reader: bool,
    count: u64,
    first_tick: u64,
    last_tick: u64,
    sample: Sample,
}

impl Tally {
    fn add(&mut self, in_reader: bool, sample: Sample) {
        let tick = self.ticks;
        self.ticks += 1;
        match self
            .seen
            .iter_mut()
            .find(|s| s.in_reader == in_reader && s.sample.same_place(&sample))
        {
            Some(seen) => {
                seen.count += 1;
                seen.last_tick = tick;
            }
            None => self.seen.push(Seen {
                in_reader,
                count: 1,
                first_tick: tick,
                last_tick: tick,
                sample,
            }),
        }
    }

    /// The sample that shows what held the CPU up: the most frequent stack, inside a reader
    /// where any tick was; of stacks as frequent, inside a reader the latest (the reader's
    /// own, not what ran before it), else the earliest (what held it when it became old).
    fn shown(&self) -> Option<&Sample> {
        let in_reader = self.seen.iter().any(|s| s.in_reader);
        self.seen
            .iter()
            .filter(|s| s.in_reader == in_reader)
            .max_by(|a, b| {
                a.count.cmp(&b.count).then_with(|| {
                    if in_reader {
                        a.last_tick.cmp(&b.last_tick)
                    } else {
                        b.first_tick.cmp(&a.first_tick)
                    }
                })
            })
            .map(|s| &s.sample)
    }
}

impl Sample {
    /// Whether two ticks found the CPU at the same place: the same stack, in the same mode.
    fn same_place(&self, other: &Sample) -> bool {
        self.stack == other.stack && self.mode == other.mode
    }
}

fn stack(id: u64) -> Option<u64> {
    (id != NO_STACK).then_some(id)
}

fn task(event: &GpEvent) -> Task {
    Task {
        pid: event.pid,
        tgid: event.tgid,
        comm: comm(&event.comm),
    }
}

impl Assembler {
    /// An assembler of grace periods' bounds only, for runs that hook no report (`srlat
    /// --stages`): any report would be left undecoded, and counted.
    pub fn bounds_only() -> Self {
        Assembler::new(RcuTree::modelled(1, 1, 2), &[])
    }

    /// An assembler for grace periods on `tree` that wait for each of `cpus`.
    pub fn new(tree: RcuTree, cpus: &[u32]) -> Self {
        Assembler {
            tree,
            awaited_cpus: cpus.iter().copied().collect(),
            current: None,
            pending_request_ns: None,
            blocked: HashMap::new(),
            left: HashMap::new(),
            samples: HashMap::new(),
            latest: HashMap::new(),
            done: Vec::new(),
            unassembled: Unassembled::default(),
            last_gp_seq: None,
            unnumbered: 0,
            start_seen: false,
            expedited: Vec::new(),
            done_expedited: Vec::new(),
            unassembled_expedited: Unassembled::default(),
            expedited_start_seen: false,
            reader_left: HashMap::new(),
        }
    }

    /// Follows a grace period from `at`, where the kthread `pid` began it (`start_seen`) or
    /// was first seen in it; the request waiting is its.
    fn begin(&mut self, at: u64, pid: u32, start_seen: bool) -> &mut InProgress {
        self.left.clear();
        self.current.insert(InProgress {
            started_ns: at,
            kthread_pid: pid,
            request_ns: self.pending_request_ns.take(),
            gp_seq: None,
            init_end_ns: None,
            cleanup_start_ns: None,
            fqs_passes: 0,
            cpus_reported: 0,
            blocked_readers: 0,
            last: None,
            reported: BTreeSet::new(),
            kthread_seen_ns: at,
            start_seen,
        })
    }

    /// Counts a grace period seen in part; `numbered`: its `gp_seq` was seen.
    fn incomplete(&mut self, numbered: bool) {
        self.unassembled.incomplete += 1;
        if !numbered {
            self.unnumbered += 1;
        }
    }

    /// A grace period numbered `gp_seq` started: the grace periods since the last one
    /// numbered that were counted nowhere were skipped whole.
    fn numbered(&mut self, gp_seq: u64) {
        if let Some(last) = self.last_gp_seq {
            let advance = gp_seq.wrapping_sub(last);
            // Numbers only grow (and wrap around the word).
            if (advance as i64) > 0 {
                let between = (advance >> GP_SEQ_STATE_BITS).saturating_sub(1);
                self.unassembled.unseen += between.saturating_sub(self.unnumbered);
            }
        }
        self.last_gp_seq = Some(gp_seq);
        self.unnumbered = 0;
    }

    pub fn add(&mut self, event: &GpEvent) {
        let at = event.at_ns;
        match event.kind {
            gp::EVENT_REQUEST => {
                // A request while a grace period is being set up or waited for is for a
                // later one: kept until the next init.
                self.pending_request_ns.get_or_insert(at);
            }
            gp::EVENT_INIT_START => {
                if let Some(unfinished) = self.current.take() {
                    self.incomplete(unfinished.gp_seq.is_some());
                }
                self.start_seen = true;
                self.begin(at, event.pid, true);
            }
            gp::EVENT_INIT_END => match (&mut self.current, event.extra != 0) {
                (Some(current), true) => {
                    current.gp_seq = Some(event.value);
                    current.init_end_ns = Some(at);
                    current.kthread_seen_ns = at;
                    self.numbered(event.value);
                }
                (Some(current), false) => {
                    // The request that woke it still waits for a grace period.
                    self.pending_request_ns = current.request_ns;
                    self.current = None;
                    self.unassembled.spurious_inits += 1;
                }
                (None, true) => {
                    // Its start was skipped, or came before tracing did: followed from here,
                    // counted incomplete or begun before tracing when it ends.
                    let current = self.begin(at, event.pid, false);
                    current.gp_seq = Some(event.value);
                    current.init_end_ns = Some(at);
                    self.numbered(event.value);
                }
                (None, false) => {}
            },
            gp::EVENT_FQS => {
                if let Some(current) = &mut self.current {
                    current.fqs_passes += 1;
                    current.kthread_seen_ns = at;
                }
            }
            gp::EVENT_REPORT => {
                let Some(current) = &mut self.current else {
                    return;
                };
                if event.pid == current.kthread_pid {
                    current.kthread_seen_ns = at;
                }
                match self.tree.decode(event.extra, event.value) {
                    Some(Reported::Cpus(cpus)) if !cpus.is_empty() => {
                        current.cpus_reported += cpus.len() as u32;
                        current.reported.extend(&cpus);
                        let holdout = Holdout::Cpu {
                            cpus,
                            found_by_pass: event.pid == current.kthread_pid,
                            sample: None,
                        };
                        current.last = Some((at, holdout));
                    }
                    Some(Reported::Children(cpus)) if !cpus.is_empty() => {
                        // A leaf's last blocked reader left, and this is that reader telling
                        // the leaf's parent: the reader is the holdout, whether or not the
                        // assembler judged it to hold this grace period when it left.
                        let holdout = match self.left.remove(&event.pid) {
                            Some(left) => {
                                if !left.counted {
                                    current.blocked_readers += 1;
                                }
                                left.holdout
                            }
                            _ => {
                                current.blocked_readers += 1;
                                match leaving(&mut self.blocked, event, at) {
                                    Some(holdout) => {
                                        // The same unlock reports to the expedited grace
                                        // period next (`rcu_read_unlock_special()` reports
                                        // the normal one first): it finds the reader here.
                                        if !self.expedited.is_empty() {
                                            self.reader_left.insert(event.pid, holdout.clone());
                                        }
                                        holdout
                                    }
                                    None => Holdout::Readers {
                                        task: task(event),
                                        cpus,
                                    },
                                }
                            }
                        };
                        current.last = Some((at, holdout));
                    }
                    _ => self.unassembled.undecoded_reports += 1,
                }
            }
            gp::EVENT_BLOCK => {
                // In a new reader: whatever it left before has been reported, or never will.
                self.forget_left(event.pid);
                self.blocked.insert(
                    event.pid,
                    Blocked {
                        since_ns: at,
                        task: task(event),
                        cpu: event.cpu,
                        blocks_gp_seq: (event.extra != 0).then_some(event.extra),
                        stack: stack(event.stack),
                    },
                );
            }
            gp::EVENT_UNBLOCK => {
                let Some(blocked) = self.blocked.remove(&event.pid) else {
                    // A reader whose block was not followed: its report names its leaf.
                    self.forget_left(event.pid);
                    return;
                };
                let holdout = blocked.left_at(at);
                if !self.expedited.is_empty() {
                    self.reader_left.insert(event.pid, holdout.clone());
                }
                let Some(current) = &mut self.current else {
                    return;
                };
                let holds = blocked.holds(current) && current.cleanup_start_ns.is_none();
                if holds {
                    current.blocked_readers += 1;
                    current.last = Some((at, holdout.clone()));
                }
                self.left.insert(
                    event.pid,
                    Left {
                        holdout,
                        counted: holds,
                    },
                );
            }
            gp::EVENT_HOLDOUT_SAMPLE => {
                let in_reader = event.value & gp::SAMPLE_IN_READER != 0;
                let mode = match event.value & !gp::SAMPLE_IN_READER {
                    gp::MODE_USER => Mode::User,
                    gp::MODE_IDLE => Mode::Idle,
                    _ => Mode::Kernel,
                };
                let sample = Sample {
                    task: task(event),
                    mode,
                    stack: stack(event.stack),
                };
                self.latest
                    .insert(event.cpu, (event.extra, at, sample.clone()));
                let tally = self.samples.entry(event.cpu).or_default();
                if tally.gp_seq != event.extra {
                    *tally = Tally {
                        gp_seq: event.extra,
                        ..Default::default()
                    };
                }
                tally.add(in_reader, sample);
            }
            gp::EVENT_CLEANUP_START => {
                if let Some(current) = &mut self.current {
                    current.cleanup_start_ns = Some(at);
                    current.kthread_seen_ns = at;
                    // A report not seen may have been the last: the wait's end is unknown.
                    if !self.awaited_cpus.is_subset(&current.reported) {
                        current.last = None;
                    }
                }
            }
            gp::EVENT_CLEANUP_END => match self.current.take() {
                Some(current) if !current.start_seen && !self.start_seen => {
                    self.unassembled.began_before_tracing += 1;
                }
                Some(current) => {
                    let numbered = current.gp_seq.is_some();
                    match self.finish(current, at) {
                        Some(done) => self.done.push(done),
                        None => self.incomplete(numbered),
                    }
                }
                // Before any start was seen, the end of one under way when tracing began;
                // after, one whose start and number were both skipped.
                None if self.start_seen => self.incomplete(false),
                None => self.unassembled.began_before_tracing += 1,
            },
            gp::EVENT_EXPEDITED_START
            | gp::EVENT_EXPEDITED_END
            | gp::EVENT_EXPEDITED_REPORT
            | gp::EVENT_EXPEDITED_READER_REPORT => self.add_expedited(event),
            _ => {}
        }
    }

    /// Forgets that `pid` left a reader, so that no later report of its takes that reader.
    fn forget_left(&mut self, pid: u32) {
        self.left.remove(&pid);
        self.reader_left.remove(&pid);
    }

    /// An expedited grace period's event. The kernel runs one at a time, but the next one
    /// can start before the hook at the end of the last one ran: reports belong to the
    /// newest, and an end to the newest that started before `expedited_sequence` read there.
    fn add_expedited(&mut self, event: &GpEvent) {
        let at = event.at_ns;
        match event.kind {
            gp::EVENT_EXPEDITED_START => {
                // At most one can be waiting for its end to be seen beside the one starting:
                // older ones lost their end event.
                while self.expedited.len() > 1 {
                    self.expedited.remove(0);
                    self.unassembled_expedited.incomplete += 1;
                }
                self.expedited_start_seen = true;
                self.reader_left.clear();
                self.expedited.push(ExpeditedInProgress {
                    started_ns: at,
                    sequence: event.value,
                    cpus_reported: 0,
                    blocked_readers: 0,
                    last: None,
                });
            }
            gp::EVENT_EXPEDITED_REPORT => {
                let Some(current) = self.expedited.last_mut() else {
                    return;
                };
                match self.tree.decode(event.extra, event.value) {
                    Some(Reported::Cpus(cpus)) if !cpus.is_empty() => {
                        current.cpus_reported += cpus.len() as u32;
                        // The IPI handler (or the reader it deferred to) reports its own CPU
                        // alone; the selection reports the CPUs it found idle or offline.
                        let found_by_pass = cpus != [event.cpu];
                        let holdout = Holdout::Cpu {
                            cpus,
                            found_by_pass,
                            sample: None,
                        };
                        current.last = Some((at, holdout));
                    }
                    _ => self.unassembled_expedited.undecoded_reports += 1,
                }
            }
            gp::EVENT_EXPEDITED_READER_REPORT => {
                let Some(current) = self.expedited.last_mut() else {
                    return;
                };
                let leaf_level = self.tree.leaf_level();
                let Some(leaf) = self
                    .tree
                    .node(event.extra)
                    .filter(|node| node.level == leaf_level)
                else {
                    self.unassembled_expedited.undecoded_reports += 1;
                    return;
                };
                current.blocked_readers += 1;
                let holdout = match self.reader_left.remove(&event.pid) {
                    Some(holdout) => holdout,
                    // It blocked before tracing began (or its block was not followed): the
                    // leaf's CPUs name where it was.
                    _ => {
                        leaving(&mut self.blocked, event, at).unwrap_or_else(|| Holdout::Readers {
                            task: task(event),
                            cpus: (leaf.grplo..=leaf.grphi).collect(),
                        })
                    }
                };
                current.last = Some((at, holdout));
            }
            gp::EVENT_EXPEDITED_END => {
                // The ones that started before the sequence read at the end (it has passed
                // their start); where it could not be read (0, counted), the oldest.
                let ended = if event.value == 0 {
                    usize::from(!self.expedited.is_empty())
                } else {
                    self.expedited
                        .iter()
                        .take_while(|g| (event.value.wrapping_sub(g.sequence) as i64) > 0)
                        .count()
                };
                if ended == 0 {
                    if self.expedited_start_seen {
                        self.unassembled_expedited.incomplete += 1;
                    } else {
                        self.unassembled_expedited.began_before_tracing += 1;
                    }
                    return;
                }
                let mut ended: Vec<ExpeditedInProgress> = self.expedited.drain(..ended).collect();
                // Of several, all but the newest lost their end event.
                self.unassembled_expedited.incomplete += ended.len() as u64 - 1;
                let Some(current) = ended.pop() else { return };
                let wait_end = current
                    .last
                    .as_ref()
                    .map_or(at, |(last, _)| (*last).max(current.started_ns).min(at));
                let held_ns = wait_end.saturating_sub(current.started_ns);
                self.done_expedited.push(GracePeriod {
                    gp_seq: current.sequence,
                    started_ns: current.started_ns,
                    duration_ns: at.saturating_sub(current.started_ns),
                    phases: Phases {
                        init_ns: 0,
                        quiescent_wait_ns: held_ns,
                        kthread_wake_ns: at.saturating_sub(wait_end),
                        cleanup_ns: 0,
                    },
                    request_wait_ns: None,
                    fqs_passes: 0,
                    cpus_reported: current.cpus_reported,
                    blocked_readers: current.blocked_readers,
                    last_holdout: current.last.map(|(_, holdout)| holdout),
                    held_ns,
                    expedited: true,
                });
            }
            _ => {}
        }
    }

    /// The expedited grace periods completed since the last call.
    pub fn take_done_expedited(&mut self) -> Vec<GracePeriod> {
        std::mem::take(&mut self.done_expedited)
    }

    fn finish(&mut self, current: InProgress, ended_ns: u64) -> Option<GracePeriod> {
        if !current.start_seen {
            return None;
        }
        let gp_seq = current.gp_seq?;
        let init_end = current.init_end_ns?;
        // Cleanup seen to begin before init ended is no grace period's order of events.
        let cleanup_start = current.cleanup_start_ns.filter(|&c| c >= init_end)?;
        let (wait_end, last_holdout) = match current.last {
            Some((at, holdout)) => (at.clamp(init_end, cleanup_start), Some(holdout)),
            None => (cleanup_start, None),
        };
        let last_holdout = last_holdout.map(|holdout| match holdout {
            Holdout::Cpu {
                cpus,
                found_by_pass,
                ..
            } => Holdout::Cpu {
                sample: cpus.iter().find_map(|cpu| {
                    self.samples
                        .get(cpu)
                        .filter(|tally| tally.gp_seq == gp_seq)
                        .and_then(Tally::shown)
                        .cloned()
                }),
                cpus,
                found_by_pass,
            },
            task => task,
        });
        Some(GracePeriod {
            gp_seq,
            started_ns: current.started_ns,
            duration_ns: ended_ns.saturating_sub(current.started_ns),
            phases: Phases {
                init_ns: init_end.saturating_sub(current.started_ns),
                quiescent_wait_ns: wait_end - init_end,
                kthread_wake_ns: cleanup_start - wait_end,
                cleanup_ns: ended_ns.saturating_sub(cleanup_start),
            },
            request_wait_ns: current
                .request_ns
                .map(|requested| current.started_ns.saturating_sub(requested)),
            fqs_passes: current.fqs_passes,
            cpus_reported: current.cpus_reported,
            blocked_readers: current.blocked_readers,
            last_holdout,
            held_ns: wait_end - init_end,
            expedited: false,
        })
    }

    /// The grace periods completed since the last call.
    pub fn take_done(&mut self) -> Vec<GracePeriod> {
        std::mem::take(&mut self.done)
    }

    /// Whether a grace period is being assembled (began in the window, not yet over).
    pub fn in_progress(&self) -> bool {
        self.current.is_some()
    }

    /// The `gp_seq` of the grace period in progress, once its init returned and until it
    /// ended.
    pub fn current_gp_seq(&self) -> Option<u64> {
        self.current.as_ref()?.gp_seq
    }

    /// The grace period in progress, once its init returned and until its cleanup began.
    pub fn waiting(&self) -> Option<Current> {
        let c = self.current.as_ref()?;
        if c.init_end_ns.is_none() || c.cleanup_start_ns.is_some() {
            return None;
        }
        Some(Current {
            gp_seq: c.gp_seq,
            started_ns: c.started_ns,
            reported: c.reported.clone(),
            kthread_pid: c.kthread_pid,
            kthread_seen_ns: c.kthread_seen_ns,
        })
    }

    /// The latest tick sample of `cpu` for grace period `gp_seq` (what runs there now, as
    /// a stall watch wants it), and when it was taken.
    pub fn sample_of(&self, cpu: u32, gp_seq: u64) -> Option<(&Sample, u64)> {
        let (_, at, sample) = self.latest.get(&cpu).filter(|(g, _, _)| *g == gp_seq)?;
        Some((sample, *at))
    }

    /// The blocked readers holding up the grace period in progress.
    pub fn blocked_holding(&self) -> Vec<BlockedReader> {
        let Some(current) = &self.current else {
            return Vec::new();
        };
        let mut readers: Vec<BlockedReader> = self
            .blocked
            .values()
            .filter(|b| b.holds(current))
            .map(|b| BlockedReader {
                task: b.task.clone(),
                cpu: b.cpu,
                since_ns: b.since_ns,
                stack: b.stack,
            })
            .collect();
        readers.sort_by_key(|r| (r.since_ns, r.task.pid));
        readers
    }
}

/// How many grace periods `rcu_state.gp_seq` says ended from the first of these to the last,
/// both included: the cross-check of the assembled ones' count.
pub fn grace_periods_by_gp_seq(first: u64, last: u64) -> u64 {
    (last.wrapping_sub(first) >> GP_SEQ_STATE_BITS) + 1
}

#[cfg(test)]
mod tests;
