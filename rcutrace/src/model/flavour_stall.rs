//! `rcutrace stall --flavor`: when a grace period of a flavour other than normal RCU's (a
//! tasks-RCU flavour's, an SRCU domain's) has been in progress long enough to warn about, and
//! when one warned about ends. Each grace period is warned about once per threshold it
//! passes, naming what holds it as its assembler last saw: the tasks of the last pass over
//! the holdouts (tasks RCU), or the CPUs whose readers held it (SRCU).

use std::{collections::HashMap, time::Duration};

use crate::model::flavour_grace_periods::{FlavourGracePeriod, HoldoutTask};

/// The kernel warns about a tasks-RCU grace period after 10 minutes
/// (`rcupdate.rcu_task_stall_timeout`) and never about an SRCU one: these warn in seconds,
/// past what a busy machine's grace periods of these flavours take (classic tasks RCU's
/// passes over its holdouts alone come up to a second apart).
pub const DEFAULT_THRESHOLDS: [Duration; 3] = [
    Duration::from_secs(2),
    Duration::from_secs(10),
    Duration::from_secs(60),
];

/// A grace period in progress, as its assembler sees it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InProgress {
    /// What runs it: an SRCU domain, or a tasks-RCU flavour's `struct rcu_tasks`.
    pub key: u64,
    pub started_ns: u64,
    /// Tasks RCU: the tasks its last pass over the holdouts listed (none before the first).
    pub holdouts: Vec<HoldoutTask>,
    /// SRCU: the CPUs where readers that held it entered, as its scans found them.
    pub reader_cpus: Vec<u32>,
}

/// A task blocked in one of a flavour's waits as a warning about it is due: behind the
/// grace period warned about (or, for SRCU, behind one of some domain's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedTask {
    pub pid: u32,
    pub comm: String,
    /// Its kernel stack, `name+offset` deepest first.
    pub stack: Vec<String>,
}

/// A grace period that has passed a threshold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlavourStallWarning {
    pub grace_period: InProgress,
    pub age: Duration,
    pub threshold: Duration,
    /// The tasks blocked behind it, found as the warning is due (filled in by the caller).
    pub blocked: Vec<BlockedTask>,
}

/// A grace period warned about has ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlavourStallEnded {
    pub key: u64,
    pub duration: Duration,
    pub warnings: u32,
}

/// Which thresholds each grace period in progress has passed.
#[derive(Debug)]
pub struct FlavourStallWatch {
    thresholds: Vec<Duration>,
    /// Per grace period (key and start), the thresholds it was warned about.
    warned: HashMap<(u64, u64), u32>,
}

impl FlavourStallWatch {
    /// `thresholds` ascending, without repeats.
    pub fn new(thresholds: Vec<Duration>) -> Self {
        FlavourStallWatch {
            thresholds,
            warned: HashMap::new(),
        }
    }

    pub fn thresholds(&self) -> &[Duration] {
        &self.thresholds
    }

    /// The warnings due at `now_ns`: one per grace period in `in_progress` (every one in
    /// progress) that has passed a threshold it was not yet warned about (the highest it
    /// passed, when a look comes late), oldest first. Those no longer in progress are
    /// forgotten: their end went unseen.
    pub fn check(&mut self, in_progress: &[InProgress], now_ns: u64) -> Vec<FlavourStallWarning> {
        self.warned.retain(|&(key, started), _| {
            in_progress
                .iter()
                .any(|gp| gp.key == key && gp.started_ns == started)
        });
        let mut warnings = Vec::new();
        for gp in in_progress {
            let age = Duration::from_nanos(now_ns.saturating_sub(gp.started_ns));
            let passed = self.thresholds.iter().filter(|&&t| age >= t).count() as u32;
            let warned = self.warned.entry((gp.key, gp.started_ns)).or_insert(0);
            if passed > *warned {
                *warned = passed;
                warnings.push(FlavourStallWarning {
                    grace_period: gp.clone(),
                    age,
                    threshold: self.thresholds[passed as usize - 1],
                    blocked: Vec::new(),
                });
            }
        }
        warnings.sort_by_key(|w| (w.grace_period.started_ns, w.grace_period.key));
        warnings
    }

    /// The end of `gp`, if it was warned about.
    pub fn ended(&mut self, gp: &FlavourGracePeriod) -> Option<FlavourStallEnded> {
        let warnings = self.warned.remove(&(gp.key, gp.started_ns))?;
        (warnings > 0).then(|| FlavourStallEnded {
            key: gp.key,
            duration: Duration::from_nanos(gp.duration_ns),
            warnings,
        })
    }

    /// How long from `now_ns` until the next grace period in progress passes its next
    /// threshold, if one will.
    pub fn next_due(&self, in_progress: &[InProgress], now_ns: u64) -> Option<Duration> {
        in_progress
            .iter()
            .filter_map(|gp| {
                let warned = self
                    .warned
                    .get(&(gp.key, gp.started_ns))
                    .copied()
                    .unwrap_or(0);
                let next = *self.thresholds.get(warned as usize)?;
                let age = Duration::from_nanos(now_ns.saturating_sub(gp.started_ns));
                Some(next.saturating_sub(age))
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASKS: u64 = 0xffff_ffff_82cc_dcc0;
    const DOMAIN: u64 = 0xffff_ffff_a040_2000;
    const S: u64 = 1_000_000_000;

    fn gp(key: u64, started_ns: u64) -> InProgress {
        InProgress {
            key,
            started_ns,
            holdouts: vec![HoldoutTask {
                comm: "spin".into(),
                pid: 160,
                cpu: 3,
                stack: None,
            }],
            reader_cpus: Vec::new(),
        }
    }

    fn watch() -> FlavourStallWatch {
        FlavourStallWatch::new(vec![Duration::from_secs(2), Duration::from_secs(10)])
    }

    #[test]
    fn each_threshold_warns_once_then_the_end_is_said() {
        let mut watch = watch();
        let held = [gp(TASKS, 100 * S)];
        assert!(watch.check(&held, 101 * S).is_empty());
        assert_eq!(watch.next_due(&held, 101 * S), Some(Duration::from_secs(1)));
        let warned = watch.check(&held, 102 * S + 5);
        assert_eq!(
            warned
                .iter()
                .map(|w| (w.threshold, w.grace_period.holdouts[0].pid))
                .collect::<Vec<_>>(),
            [(Duration::from_secs(2), 160)]
        );
        // Not again for the same threshold; the next is due 8 s later.
        assert!(watch.check(&held, 103 * S).is_empty());
        assert_eq!(watch.next_due(&held, 103 * S), Some(Duration::from_secs(7)));
        assert_eq!(watch.warned.len(), 1);
        let done = FlavourGracePeriod {
            key: TASKS,
            gp_seq: 0,
            started_ns: 100 * S,
            duration_ns: 5 * S,
            reader_cpus: Vec::new(),
            last_holdouts: Vec::new(),
            holdouts_unnamed: false,
            phases: Vec::new(),
            holdout_passes: 0,
            waiters: Vec::new(),
            waiters_unkept: 0,
        };
        assert_eq!(
            watch.ended(&done),
            Some(FlavourStallEnded {
                key: TASKS,
                duration: Duration::from_secs(5),
                warnings: 1
            })
        );
        assert!(watch.warned.is_empty());
        // An end not warned about says nothing.
        assert_eq!(watch.ended(&done), None);
    }

    #[test]
    fn a_late_look_warns_once_at_the_highest_threshold_passed() {
        let mut watch = watch();
        let held = [gp(DOMAIN, 0), gp(TASKS, S)];
        let warned = watch.check(&held, 12 * S);
        assert_eq!(
            warned
                .iter()
                .map(|w| (w.grace_period.key, w.threshold))
                .collect::<Vec<_>>(),
            [
                (DOMAIN, Duration::from_secs(10)),
                (TASKS, Duration::from_secs(10))
            ]
        );
        // Every threshold passed: nothing more is due.
        assert_eq!(watch.next_due(&held, 12 * S), None);
        // One gone without its end seen is forgotten.
        assert!(watch.check(&held[1..], 13 * S).is_empty());
        assert_eq!(watch.warned.len(), 1);
    }
}
