//! `rcutrace stall`'s judgement: given the grace period in progress (from `anatomy`) and the
//! time now, is a warning due, and what does it say. The kernel's own escalation sets the
//! default thresholds: it asks for urgent quiescent states within 100-200 ms, flags readers at
//! 1 s and sends IPIs near half its stall timeout; rcutrace warns at 1 s and at 25%, 50% and
//! 75% of that timeout, each once per grace period. Pure logic over the assembler's state.

use std::time::Duration;

use super::anatomy::{Assembler, BlockedReader, GracePeriod, Sample};

/// A grace-period kthread that has not run for this long is starving (Debian builds without
/// RCU_BOOST, so real-time tasks can starve it).
pub const KTHREAD_STARVED_AFTER: Duration = Duration::from_secs(2);

/// A CPU's tick counts as still arriving if a sample came this recently (ticks come every
/// few ms, but events reach user space in batches up to a few hundred ms apart).
const TICK_FRESH: Duration = Duration::from_millis(500);

/// The default thresholds for a kernel stall timeout: 1 s, then 25%, 50% and 75% of it
/// (those above 1 s), ascending.
pub fn default_thresholds(stall_timeout: Duration) -> Vec<Duration> {
    let mut thresholds = vec![Duration::from_secs(1)];
    for quarter in [1, 2, 3] {
        let at = stall_timeout * quarter / 4;
        if at > Duration::from_secs(1) {
            thresholds.push(at);
        }
    }
    thresholds
}

/// How many of the (ascending) thresholds a grace period `age` old has passed.
fn thresholds_passed(thresholds: &[Duration], age: Duration) -> usize {
    thresholds.iter().take_while(|t| **t <= age).count()
}

/// Which thresholds the watch must itself look at on time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Looks {
    /// Every one.
    All,
    /// Those after the first: the kernel side wakes the watch as a grace period passes the
    /// first (`EVENT_STALL_WAKE`), so most grace periods, which end younger, cost no look.
    AfterTheFirst,
}

/// How long after `now_ns` a grace period that began at `started_ns` passes the threshold
/// after the first `passed` (at once if it already has); `None` past the last, or for the
/// first when the kernel side wakes the watch for it.
fn next_threshold_in(
    thresholds: &[Duration],
    passed: usize,
    started_ns: u64,
    now_ns: u64,
    looks: Looks,
) -> Option<Duration> {
    if passed == 0 && looks == Looks::AfterTheFirst {
        return None;
    }
    let next = thresholds.get(passed)?;
    let due_ns = started_ns.saturating_add(next.as_nanos() as u64);
    Some(Duration::from_nanos(due_ns.saturating_sub(now_ns)))
}

/// A CPU that has not reported its quiescent state for the grace period in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoldoutCpu {
    pub cpu: u32,
    /// What a tick found running there, once the grace period was old enough to sample.
    pub sample: Option<Sample>,
    /// Whether its tick still arrives (a sample within the last 500 ms); `None` if never
    /// sampled.
    pub tick_arriving: Option<bool>,
}

/// One early warning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StallWarning {
    pub gp_seq: u64,
    pub age: Duration,
    /// The threshold this warning is for.
    pub threshold: Duration,
    pub cpus: Vec<HoldoutCpu>,
    pub blocked: Vec<(BlockedReader, Duration)>,
    /// How long the grace-period kthread has not been seen running, if over
    /// `KTHREAD_STARVED_AFTER`.
    pub kthread_starved: Option<(u32, Duration)>,
}

/// The end of a grace period rcutrace warned about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StallEnded {
    pub gp_seq: u64,
    pub duration: Duration,
    pub warnings: u32,
}

/// The warnings of one window.
#[derive(Debug)]
pub struct StallWatch {
    thresholds: Vec<Duration>,
    /// The grace period warned about last.
    warned: Option<Warned>,
}

#[derive(Clone, Copy, Debug)]
struct Warned {
    gp_seq: u64,
    thresholds_passed: usize,
    warnings: u32,
    /// CLOCK_MONOTONIC ns.
    first_ns: u64,
}

impl StallWatch {
    /// `thresholds` ascending, at least one.
    pub fn new(thresholds: Vec<Duration>) -> Self {
        StallWatch {
            thresholds,
            warned: None,
        }
    }

    /// The warning due now, if any: the grace period in progress has passed a threshold it
    /// has not been warned about.
    pub fn check(
        &mut self,
        stream: &Assembler,
        now_ns: u64,
        online_cpus: &[u32],
    ) -> Option<StallWarning> {
        let current = stream.waiting()?;
        let gp_seq = current.gp_seq?;
        let age = Duration::from_nanos(now_ns.saturating_sub(current.started_ns));
        let passed = thresholds_passed(&self.thresholds, age);
        let warned = match self.warned {
            Some(w) if w.gp_seq == gp_seq => w,
            _ => Warned {
                gp_seq,
                thresholds_passed: 0,
                warnings: 0,
                first_ns: now_ns,
            },
        };
        if passed <= warned.thresholds_passed {
            return None;
        }
        self.warned = Some(Warned {
            thresholds_passed: passed,
            warnings: warned.warnings + 1,
            ..warned
        });
        let cpus = online_cpus
            .iter()
            .filter(|cpu| !current.reported.contains(cpu))
            .map(|&cpu| {
                let sampled = stream.sample_of(cpu, gp_seq);
                HoldoutCpu {
                    cpu,
                    sample: sampled.map(|(s, _)| s.clone()),
                    tick_arriving: sampled.map(|(_, last)| {
                        now_ns.saturating_sub(last) <= TICK_FRESH.as_nanos() as u64
                    }),
                }
            })
            .collect();
        let blocked = stream
            .blocked_holding()
            .into_iter()
            .map(|b| {
                let blocked_for = Duration::from_nanos(now_ns.saturating_sub(b.since_ns));
                (b, blocked_for)
            })
            .collect();
        let idle = Duration::from_nanos(now_ns.saturating_sub(current.kthread_seen_ns));
        Some(StallWarning {
            gp_seq,
            age,
            threshold: self.thresholds[passed - 1],
            cpus,
            blocked,
            kthread_starved: (idle > KTHREAD_STARVED_AFTER).then_some((current.kthread_pid, idle)),
        })
    }

    /// How long until the grace period in progress passes a threshold it has not been warned
    /// about (of those `looks` names), as of `now_ns`; `None` with none in progress or every
    /// threshold passed. The watch looks then, not every few milliseconds: most grace
    /// periods end long before.
    pub fn next_due(&self, stream: &Assembler, now_ns: u64, looks: Looks) -> Option<Duration> {
        let current = stream.waiting()?;
        let gp_seq = current.gp_seq?;
        let passed = match self.warned {
            Some(w) if w.gp_seq == gp_seq => w.thresholds_passed,
            _ => 0,
        };
        next_threshold_in(&self.thresholds, passed, current.started_ns, now_ns, looks)
    }

    /// Whether the grace period warned about last is still in progress: its end is to be
    /// said when it comes.
    pub fn awaits_end(&self, stream: &Assembler) -> bool {
        self.warned
            .is_some_and(|w| stream.current_gp_seq() == Some(w.gp_seq))
    }

    /// The longest the watch may wait between looks without warning late: a grace period
    /// that begins just after one look is under the first threshold at the next.
    pub fn longest_wait(&self, at_most: Duration) -> Duration {
        self.thresholds
            .first()
            .map_or(at_most, |first| at_most.min(*first))
    }

    /// Says so when a grace period rcutrace warned about ends.
    pub fn ended(&mut self, gp: &GracePeriod) -> Option<StallEnded> {
        let warned = self.warned.filter(|w| w.gp_seq == gp.gp_seq)?;
        self.warned = None;
        Some(StallEnded {
            gp_seq: gp.gp_seq,
            duration: Duration::from_nanos(gp.duration_ns),
            warnings: warned.warnings,
        })
    }

    /// When the first warning about the grace period in progress was given.
    pub fn first_warning_ns(&self) -> Option<u64> {
        self.warned.map(|w| w.first_ns)
    }
}

/// What an expedited grace period still waits for when it is warned about, as the kernel's
/// `rcu_node` leaves say (`kernel::expedited_holdouts`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpeditedHoldouts {
    /// The CPUs that have not reported, ascending.
    pub cpus: Vec<u32>,
    /// Tasks blocked inside a reader hold it up too.
    pub blocked_tasks: bool,
}

/// An expedited grace period that passed a threshold. The programs follow only its start
/// and end; what it still waits for is read from kernel memory when it is warned about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpeditedWarning {
    pub age: Duration,
    pub threshold: Duration,
}

/// The end of an expedited grace period rcutrace warned about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpeditedEnded {
    pub duration: Duration,
    /// False where a later one's record overwrote its end: it had ended by then, at most
    /// `duration` after its start.
    pub exact: bool,
    pub warnings: u32,
}

/// What the programs keep of the expedited grace periods (CLOCK_MONOTONIC ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpeditedState {
    /// When the one in progress began; 0 while none is.
    pub since_ns: u64,
    /// The start and end of the last one that ended (0 and 0 before any).
    pub last_start_ns: u64,
    pub last_end_ns: u64,
}

/// The warnings about expedited grace periods, from the state the programs keep.
#[derive(Debug)]
pub struct ExpeditedWatch {
    thresholds: Vec<Duration>,
    /// The one warned about: its start, thresholds passed, warnings given, when first.
    warned: Option<(u64, usize, u32, u64)>,
}

/// What a look at the expedited grace periods found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpeditedNews {
    Warning(ExpeditedWarning),
    Ended(ExpeditedEnded),
}

impl ExpeditedWatch {
    /// `thresholds` ascending, at least one.
    pub fn new(thresholds: Vec<Duration>) -> Self {
        ExpeditedWatch {
            thresholds,
            warned: None,
        }
    }

    /// What is new since the last look: the end of the one warned about (said first), else a
    /// warning about the one in progress.
    pub fn check(&mut self, state: ExpeditedState, now_ns: u64) -> Option<ExpeditedNews> {
        if let Some((started, _, warnings, _)) = self.warned
            && started != state.since_ns
        {
            self.warned = None;
            // Its end is exact once the programs recorded it; otherwise a later one ended
            // since, overwriting it, and it had ended by the time the next one began (the
            // worker runs them one at a time).
            let exact = state.last_start_ns == started;
            let end_ns = if exact {
                state.last_end_ns
            } else {
                [state.since_ns, state.last_start_ns]
                    .into_iter()
                    .filter(|&at| at > started)
                    .min()
                    .unwrap_or(now_ns)
            };
            return Some(ExpeditedNews::Ended(ExpeditedEnded {
                duration: Duration::from_nanos(end_ns.saturating_sub(started)),
                exact,
                warnings,
            }));
        }
        if state.since_ns == 0 {
            return None;
        }
        let age = Duration::from_nanos(now_ns.saturating_sub(state.since_ns));
        let passed = thresholds_passed(&self.thresholds, age);
        let (already, warnings, first_ns) = match self.warned {
            Some((_, n, w, first)) => (n, w, first),
            None => (0, 0, now_ns),
        };
        if passed <= already {
            return None;
        }
        self.warned = Some((state.since_ns, passed, warnings + 1, first_ns));
        Some(ExpeditedNews::Warning(ExpeditedWarning {
            age,
            threshold: self.thresholds[passed - 1],
        }))
    }

    /// When the first warning about the one in progress was given.
    pub fn first_warning_ns(&self) -> Option<u64> {
        self.warned.map(|(_, _, _, first)| first)
    }

    /// Whether an expedited grace period was warned about whose end has not been said.
    pub fn awaits_end(&self) -> bool {
        self.warned.is_some()
    }

    /// How long until the one in progress passes a threshold not yet warned about (of those
    /// `looks` names), or its end is to be said (at once).
    pub fn next_due(&self, state: ExpeditedState, now_ns: u64, looks: Looks) -> Option<Duration> {
        let passed = match self.warned {
            Some((started, _, _, _)) if started != state.since_ns => return Some(Duration::ZERO),
            Some((_, passed, _, _)) => passed,
            None => 0,
        };
        if state.since_ns == 0 {
            return None;
        }
        next_threshold_in(&self.thresholds, passed, state.since_ns, now_ns, looks)
    }
}

/// Grace periods that grew older than a threshold, each counted once: `serve`'s count of
/// rcutrace's warnings, from the grace period's age alone.
#[derive(Debug, Default)]
pub struct StallCounter {
    counted_gp_seq: Option<u64>,
    pub count: u64,
}

impl StallCounter {
    /// Takes note of grace period `gp_seq` at `age`.
    pub fn observe(&mut self, gp_seq: u64, age: Duration, threshold: Duration) {
        if age >= threshold && self.counted_gp_seq != Some(gp_seq) {
            self.counted_gp_seq = Some(gp_seq);
            self.count += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use rcutrace_common::gp::{self, GpEvent};

    use super::*;

    const MS: u64 = 1_000_000;
    const KTHREAD: u32 = 15;

    /// An assembler for a 2-CPU machine, whose one rcu_node is at `ROOT`.
    fn two_cpus() -> Assembler {
        let tree = crate::model::tree::RcuTree::modelled(2, 16, 64);
        assert_eq!(tree.nodes()[0].address, ROOT);
        Assembler::new(tree, &[])
    }

    const ROOT: u64 = 0xffff_ffff_8300_0000;

    fn event(at_ns: u64, kind: u32, pid: u32, value: u64, extra: u64) -> GpEvent {
        GpEvent {
            at_ns,
            kind,
            pid,
            tgid: pid,
            value,
            extra,
            ..Default::default()
        }
    }

    /// A grace period 0x105 that began at 1 s, CPU 0 reported, CPU 1 sampled spinning.
    fn stalled() -> Assembler {
        let mut a = two_cpus();
        let mut sample = event(
            1_020 * MS,
            gp::EVENT_HOLDOUT_SAMPLE,
            77,
            gp::MODE_KERNEL,
            0x105,
        );
        sample.cpu = 1;
        sample.comm[..4].copy_from_slice(b"spin");
        for e in [
            event(1_000 * MS, gp::EVENT_INIT_START, KTHREAD, 0, 0),
            event(1_001 * MS, gp::EVENT_INIT_END, KTHREAD, 0x105, 1),
            event(1_010 * MS, gp::EVENT_REPORT, 300, 0b01, ROOT),
            sample,
        ] {
            a.add(&e);
        }
        a
    }

    #[test]
    fn an_expedited_grace_period_is_warned_about_once_per_threshold_then_ended() {
        let s = Duration::from_secs;
        let in_progress = |since_ns| ExpeditedState {
            since_ns,
            ..Default::default()
        };
        let mut watch = ExpeditedWatch::new(vec![s(1), s(3)]);
        assert_eq!(watch.check(in_progress(0), 5_000 * MS), None);
        assert_eq!(watch.check(in_progress(4_000 * MS), 4_900 * MS), None);
        assert_eq!(
            watch.next_due(in_progress(4_000 * MS), 4_900 * MS, Looks::All),
            Some(Duration::from_millis(100))
        );
        // The kernel side wakes the watch for the first threshold.
        assert_eq!(
            watch.next_due(in_progress(4_000 * MS), 4_900 * MS, Looks::AfterTheFirst),
            None
        );
        assert!(!watch.awaits_end());
        let warning = ExpeditedNews::Warning(ExpeditedWarning {
            age: Duration::from_millis(1_100),
            threshold: s(1),
        });
        assert_eq!(
            watch.check(in_progress(4_000 * MS), 5_100 * MS),
            Some(warning)
        );
        assert_eq!(watch.check(in_progress(4_000 * MS), 5_200 * MS), None);
        assert_eq!(watch.first_warning_ns(), Some(5_100 * MS));
        for looks in [Looks::All, Looks::AfterTheFirst] {
            assert_eq!(
                watch.next_due(in_progress(4_000 * MS), 5_200 * MS, looks),
                Some(Duration::from_millis(1_800))
            );
        }
        assert!(watch.awaits_end());
        assert!(matches!(
            watch.check(in_progress(4_000 * MS), 7_500 * MS),
            Some(ExpeditedNews::Warning(w)) if w.threshold == s(3)
        ));
        assert_eq!(
            watch.next_due(in_progress(4_000 * MS), 7_500 * MS, Looks::All),
            None
        );
        // It ended at 7.9 s, as the programs recorded: said at the next look, exactly.
        let ended = ExpeditedState {
            since_ns: 0,
            last_start_ns: 4_000 * MS,
            last_end_ns: 7_900 * MS,
        };
        assert_eq!(
            watch.next_due(ended, 8_500 * MS, Looks::AfterTheFirst),
            Some(Duration::ZERO)
        );
        assert_eq!(
            watch.check(ended, 8_500 * MS),
            Some(ExpeditedNews::Ended(ExpeditedEnded {
                duration: Duration::from_millis(3_900),
                exact: true,
                warnings: 2
            }))
        );
        assert_eq!(watch.check(ended, 9_000 * MS), None);
        assert_eq!(watch.next_due(ended, 9_000 * MS, Looks::All), None);
        assert!(!watch.awaits_end());
        assert!(matches!(
            watch.check(in_progress(9_500 * MS), 11_000 * MS),
            Some(ExpeditedNews::Warning(_))
        ));
        // Two more began (and one ended) between two looks: the warned one had ended when
        // the first of them began.
        let next = ExpeditedState {
            since_ns: 11_050 * MS,
            last_start_ns: 11_040 * MS,
            last_end_ns: 11_045 * MS,
        };
        assert!(matches!(
            watch.check(next, 11_100 * MS),
            Some(ExpeditedNews::Ended(e))
                if e.warnings == 1 && e.duration == Duration::from_millis(1_540) && !e.exact
        ));
    }

    #[test]
    fn a_stall_is_counted_once_however_often_it_is_seen() {
        let mut counter = StallCounter::default();
        let s = Duration::from_secs;
        counter.observe(5, Duration::from_millis(900), s(1));
        assert_eq!(counter.count, 0);
        counter.observe(5, s(1), s(1));
        counter.observe(5, s(7), s(1));
        assert_eq!(counter.count, 1);
        counter.observe(9, s(2), s(1));
        assert_eq!(counter.count, 2);
    }

    #[test]
    fn thresholds_follow_the_kernels_timeout() {
        let s = Duration::from_secs;
        assert_eq!(
            default_thresholds(s(21)),
            [
                s(1),
                Duration::from_millis(5250),
                Duration::from_millis(10500),
                Duration::from_millis(15750)
            ]
        );
        assert_eq!(
            default_thresholds(s(3)),
            [
                s(1),
                Duration::from_millis(1500),
                Duration::from_millis(2250)
            ]
        );
    }

    #[test]
    fn warns_once_per_threshold_naming_the_cpu_that_has_not_reported() {
        let a = stalled();
        let mut watch = StallWatch::new(default_thresholds(Duration::from_secs(3)));
        assert_eq!(watch.check(&a, 1_900 * MS, &[0, 1]), None);
        let w = watch
            .check(&a, 2_050 * MS, &[0, 1])
            .expect("a warning past 1 s");
        assert_eq!((w.gp_seq, w.threshold), (0x105, Duration::from_secs(1)));
        assert_eq!(w.age, Duration::from_millis(1050));
        assert_eq!(w.cpus.len(), 1);
        assert_eq!(w.cpus[0].cpu, 1);
        assert_eq!(w.cpus[0].sample.as_ref().unwrap().task.comm, "spin");
        // Its last sample is over 500 ms old.
        assert_eq!(w.cpus[0].tick_arriving, Some(false));
        assert_eq!(w.kthread_starved, None);
        assert_eq!(watch.check(&a, 2_100 * MS, &[0, 1]), None);
        assert_eq!(watch.first_warning_ns(), Some(2_050 * MS));
        // 1.5 s, then both later thresholds passed at once make one warning.
        assert!(watch.check(&a, 2_600 * MS, &[0, 1]).is_some());
        let w = watch.check(&a, 4_000 * MS, &[0, 1]).unwrap();
        assert_eq!(w.threshold, Duration::from_millis(2250));
        // The kthread last ran at init, 3 s ago.
        assert_eq!(
            w.kthread_starved,
            Some((KTHREAD, Duration::from_millis(2999)))
        );
        assert_eq!(watch.check(&a, 9_000 * MS, &[0, 1]), None);
        assert_eq!(watch.first_warning_ns(), Some(2_050 * MS));
    }

    #[test]
    fn the_watch_looks_again_when_the_next_threshold_is_passed() {
        let a = stalled();
        let mut watch = StallWatch::new(default_thresholds(Duration::from_secs(3)));
        // Began at 1.0 s (its initialisation's start): 1 s old at 2.0 s.
        assert_eq!(
            watch.next_due(&a, 1_300 * MS, Looks::All),
            Some(Duration::from_millis(700))
        );
        // The kernel side wakes the watch for the first threshold.
        assert_eq!(watch.next_due(&a, 1_300 * MS, Looks::AfterTheFirst), None);
        assert!(!watch.awaits_end(&a));
        assert!(watch.check(&a, 2_000 * MS, &[0, 1]).is_some());
        assert!(watch.awaits_end(&a));
        for looks in [Looks::All, Looks::AfterTheFirst] {
            assert_eq!(
                watch.next_due(&a, 2_000 * MS, looks),
                Some(Duration::from_millis(500))
            );
            // Overdue: at once.
            assert_eq!(watch.next_due(&a, 2_700 * MS, looks), Some(Duration::ZERO));
        }
        assert!(watch.check(&a, 3_300 * MS, &[0, 1]).is_some());
        assert_eq!(watch.next_due(&a, 3_300 * MS, Looks::All), None);
        // No grace period in progress: nothing due, no end awaited.
        assert_eq!(watch.next_due(&two_cpus(), 0, Looks::All), None);
        assert!(!watch.awaits_end(&two_cpus()));
        assert_eq!(
            watch.longest_wait(Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        let quick = StallWatch::new(vec![Duration::from_millis(200)]);
        assert_eq!(
            quick.longest_wait(Duration::from_secs(1)),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn a_blocked_reader_is_named_with_how_long_it_has_been_blocked() {
        let mut a = two_cpus();
        let mut block = event(500 * MS, gp::EVENT_BLOCK, 321, 1, 0);
        block.comm[..7].copy_from_slice(b"blocker");
        for e in [
            block,
            event(1_000 * MS, gp::EVENT_INIT_START, KTHREAD, 0, 0),
            event(1_001 * MS, gp::EVENT_INIT_END, KTHREAD, 0x105, 1),
            event(1_010 * MS, gp::EVENT_REPORT, 300, 0b11, ROOT),
            event(1_900 * MS, gp::EVENT_FQS, KTHREAD, 0, 0),
        ] {
            a.add(&e);
        }
        let mut watch = StallWatch::new(vec![Duration::from_secs(1)]);
        let w = watch.check(&a, 2_100 * MS, &[0, 1]).unwrap();
        assert!(w.cpus.is_empty());
        assert_eq!(w.blocked.len(), 1);
        let (reader, blocked_for) = &w.blocked[0];
        assert_eq!(
            (reader.task.pid, reader.task.comm.as_str()),
            (321, "blocker")
        );
        assert_eq!(*blocked_for, Duration::from_millis(1600));
        assert_eq!(w.kthread_starved, None);
    }

    #[test]
    fn the_end_of_a_warned_grace_period_is_reported_once() {
        let mut a = stalled();
        let mut watch = StallWatch::new(vec![Duration::from_secs(1)]);
        assert!(watch.check(&a, 2_500 * MS, &[0, 1]).is_some());
        for e in [
            event(3_000 * MS, gp::EVENT_REPORT, 77, 0b10, ROOT),
            event(3_001 * MS, gp::EVENT_CLEANUP_START, KTHREAD, 0, 0),
            event(3_002 * MS, gp::EVENT_CLEANUP_END, KTHREAD, 0, 0),
        ] {
            a.add(&e);
        }
        let done = a.take_done();
        let ended = watch
            .ended(&done[0])
            .expect("the warned grace period ended");
        assert_eq!((ended.gp_seq, ended.warnings), (0x105, 1));
        assert_eq!(ended.duration, Duration::from_millis(2002));
        assert_eq!(watch.ended(&done[0]), None);
        assert_eq!(watch.check(&a, 9_000 * MS, &[0, 1]), None);
    }
}
