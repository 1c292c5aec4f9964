//! The grace periods of one period, tallied as they complete: the duration histogram with
//! exact statistics, each phase's statistics, the last holdouts by CPU and by task, and the
//! slowest few kept whole. Memory stays bounded however long the window runs.

use std::collections::{BTreeMap, HashMap};

use super::{
    CpuHoldouts, PhaseStats, TaskHoldouts, Unit,
    aggregate::{Layout, Series},
    anatomy::{GracePeriod, Holdout, grace_periods_by_gp_seq},
};

/// The phases as printed, in order: the wait before init, then the four the duration is
/// made of.
pub const PHASES: [&str; 5] = [
    "requested to init (before the grace period)",
    "init",
    "waiting for quiescent states",
    "kthread wake-up after the last report",
    "cleanup",
];

/// The same phases as metric labels, in the same order.
pub const PHASE_LABELS: [&str; 5] = [
    "request_wait",
    "init",
    "quiescent_wait",
    "kthread_wake",
    "cleanup",
];

#[derive(Clone, Debug)]
pub struct Tally {
    unit: Unit,
    top: usize,
    duration: Series,
    phases: [Series; 5],
    by_cpu: BTreeMap<Vec<u32>, CpuHoldouts>,
    by_task: HashMap<(u32, String), TaskHoldouts>,
    /// Slowest first, at most `top`.
    slowest: Vec<GracePeriod>,
    first_gp_seq: Option<u64>,
    last_gp_seq: Option<u64>,
    without_report: u64,
}

impl Tally {
    pub fn new(layout: Layout, unit: Unit, top: usize) -> Self {
        Tally {
            unit,
            top,
            duration: Series::new(layout),
            phases: std::array::from_fn(|_| Series::new(Layout::Log2)),
            by_cpu: BTreeMap::new(),
            by_task: HashMap::new(),
            slowest: Vec::new(),
            first_gp_seq: None,
            last_gp_seq: None,
            without_report: 0,
        }
    }

    pub fn add(&mut self, gp: GracePeriod) {
        self.duration.record(gp.duration_ns, self.unit.nanos());
        let p = gp.phases;
        if let Some(wait) = gp.request_wait_ns {
            self.phases[0].record(wait, 1);
        }
        for (series, ns) in self.phases[1..].iter_mut().zip([
            p.init_ns,
            p.quiescent_wait_ns,
            p.kthread_wake_ns,
            p.cleanup_ns,
        ]) {
            series.record(ns, 1);
        }
        match &gp.last_holdout {
            Some(Holdout::Cpu {
                cpus,
                found_by_pass,
                ..
            }) => {
                let row = self.by_cpu.entry(cpus.clone()).or_insert(CpuHoldouts {
                    cpus: cpus.clone(),
                    grace_periods: 0,
                    found_by_pass: 0,
                    held_ns: 0,
                });
                row.grace_periods += 1;
                row.found_by_pass += u64::from(*found_by_pass);
                row.held_ns += gp.held_ns;
            }
            Some(Holdout::Task { task, .. } | Holdout::Readers { task, .. }) => {
                let row =
                    self.by_task
                        .entry((task.pid, task.comm.clone()))
                        .or_insert(TaskHoldouts {
                            pid: task.pid,
                            comm: task.comm.clone(),
                            grace_periods: 0,
                            held_ns: 0,
                        });
                row.grace_periods += 1;
                row.held_ns += gp.held_ns;
            }
            None => self.without_report += 1,
        }
        self.first_gp_seq.get_or_insert(gp.gp_seq);
        self.last_gp_seq = Some(gp.gp_seq);
        keep_slowest(&mut self.slowest, gp, self.top, |g| g.duration_ns);
    }

    pub fn duration(&self) -> &Series {
        &self.duration
    }

    /// Each phase's nanoseconds (log2), by its metric label.
    pub fn phase_series(&self) -> impl Iterator<Item = (&'static str, &Series)> {
        PHASE_LABELS.into_iter().zip(&self.phases)
    }

    /// Grace periods whose last holdout was a blocked reader, whichever task.
    pub fn task_holdouts(&self) -> u64 {
        self.by_task.values().map(|t| t.grace_periods).sum()
    }

    pub fn phases(&self) -> Vec<PhaseStats> {
        PHASES
            .iter()
            .zip(&self.phases)
            .map(|(name, series)| PhaseStats {
                name: name.to_string(),
                stats: series.stats(None),
            })
            .collect()
    }

    /// Most grace periods first, then by CPU.
    pub fn holdouts_by_cpu(&self) -> Vec<CpuHoldouts> {
        let mut rows: Vec<CpuHoldouts> = self.by_cpu.values().cloned().collect();
        rows.sort_by(|a, b| {
            b.grace_periods
                .cmp(&a.grace_periods)
                .then(a.cpus.cmp(&b.cpus))
        });
        rows
    }

    pub fn holdouts_by_task(&self) -> Vec<TaskHoldouts> {
        let mut rows: Vec<TaskHoldouts> = self.by_task.values().cloned().collect();
        rows.sort_by(|a, b| {
            b.grace_periods
                .cmp(&a.grace_periods)
                .then(a.pid.cmp(&b.pid))
                .then(a.comm.cmp(&b.comm))
        });
        rows
    }

    pub fn slowest(&self) -> &[GracePeriod] {
        &self.slowest
    }

    /// What `rcu_state.gp_seq` says about the number of grace periods tallied.
    pub fn by_gp_seq(&self) -> Option<u64> {
        Some(grace_periods_by_gp_seq(
            self.first_gp_seq?,
            self.last_gp_seq?,
        ))
    }

    pub fn without_report(&self) -> u64 {
        self.without_report
    }
}

/// Keeps `item` among the `top` slowest of `slowest` (slowest first, the earlier first among
/// equals) by `duration`; `top == 0` keeps none.
pub fn keep_slowest<T>(slowest: &mut Vec<T>, item: T, top: usize, duration: impl Fn(&T) -> u64) {
    let at = slowest.partition_point(|kept| duration(kept) >= duration(&item));
    if at < top {
        slowest.insert(at, item);
        slowest.truncate(top);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::anatomy::{Phases, Task};

    fn gp(gp_seq: u64, duration_ns: u64, holdout: Option<Holdout>) -> GracePeriod {
        GracePeriod {
            gp_seq,
            started_ns: 0,
            duration_ns,
            phases: Phases {
                init_ns: 10,
                quiescent_wait_ns: duration_ns - 40,
                kthread_wake_ns: 10,
                cleanup_ns: 20,
            },
            request_wait_ns: (gp_seq % 8 == 1).then_some(5),
            fqs_passes: 1,
            cpus_reported: 2,
            blocked_readers: 0,
            last_holdout: holdout,
            held_ns: duration_ns - 40,
            expedited: false,
        }
    }

    fn cpu(cpu: u32, found_by_pass: bool) -> Option<Holdout> {
        Some(Holdout::Cpu {
            cpus: vec![cpu],
            found_by_pass,
            sample: None,
        })
    }

    #[test]
    fn tallies_holdouts_phases_and_keeps_the_slowest() {
        let mut tally = Tally::new(Layout::Log2, Unit::Ms, 2);
        let task = Task {
            pid: 7,
            tgid: 7,
            comm: "blocker".into(),
        };
        tally.add(gp(0x101, 1000, cpu(1, false)));
        tally.add(gp(0x105, 5000, cpu(1, true)));
        tally.add(gp(
            0x109,
            3000,
            Some(Holdout::Task {
                task,
                cpu: 0,
                blocked_ns: 9000,
                blocked_at_ns: None,
                stack: None,
            }),
        ));
        tally.add(gp(0x10d, 2000, None));
        assert_eq!(tally.duration().count(), 4);
        assert_eq!(tally.by_gp_seq(), Some(4));
        assert_eq!(tally.without_report(), 1);
        let slowest: Vec<u64> = tally.slowest().iter().map(|g| g.gp_seq).collect();
        assert_eq!(slowest, [0x105, 0x109]);
        assert_eq!(
            tally.holdouts_by_cpu(),
            [CpuHoldouts {
                cpus: vec![1],
                grace_periods: 2,
                found_by_pass: 1,
                held_ns: 960 + 4960
            }]
        );
        let tasks = tally.holdouts_by_task();
        assert_eq!(
            (tasks[0].pid, tasks[0].grace_periods, tasks[0].held_ns),
            (7, 1, 2960)
        );
        let phases = tally.phases();
        assert_eq!(phases.len(), 5);
        // Only the grace periods whose request was seen have a wait before init.
        assert_eq!(phases[0].stats.count, 2);
        assert!(phases[1..].iter().all(|p| p.stats.count == 4));
        assert_eq!(phases[4].stats.max_ns, Some(20));
    }

    #[test]
    fn a_whole_leaf_found_at_once_is_one_holdout_apart_from_its_first_cpu() {
        let mut tally = Tally::new(Layout::Log2, Unit::Ms, 0);
        let leaf = || {
            Some(Holdout::Cpu {
                cpus: (48..64).collect(),
                found_by_pass: true,
                sample: None,
            })
        };
        tally.add(gp(0x105, 1000, leaf()));
        tally.add(gp(0x109, 3000, leaf()));
        tally.add(gp(0x10d, 2000, cpu(48, false)));
        let rows: Vec<(Vec<u32>, u64, u64)> = tally
            .holdouts_by_cpu()
            .into_iter()
            .map(|r| (r.cpus, r.grace_periods, r.found_by_pass))
            .collect();
        assert_eq!(rows, [((48..64).collect(), 2, 2), (vec![48], 1, 0)]);
    }
}
