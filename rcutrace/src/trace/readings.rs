//! The programs' cumulative counters, read from the live maps without stopping the probes,
//! and what was added between two readings. Every counter only ever grows (per-CPU slots,
//! atomically added hash-map values, the kernel's skipped-hit counts), so differences of
//! successive readings count each event in exactly one period: nothing lost, nothing twice.
//! A kprobe registered again between two readings (`--sample-readers` detaches and attaches
//! the reader probe) is a new kprobe, whose count starts from zero: its whole count is the
//! period's.

use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

use anyhow::Result;
use rcutrace_common::attribution::Attribution;

use crate::{kernel::kprobe_table::Counted, marks, trace::probes::Probe, trace::tracer::Tracer};

/// The per-CPU arrays of counters: `count`'s per-function counts and its losses, the
/// latency programs' per-function statistics, and `gp`'s counts and what its programs could
/// not send, and `run`'s account of its command's threads and work.
const ARRAYS: [&str; 7] = [
    "COUNTS",
    "COUNT_LOSSES",
    "STATS",
    "GP_LOSSES",
    "GP_COUNTS",
    "OWN_STATS",
    "FOLLOW_COUNTS",
];

/// Counters as read at one moment, or the differences between two such readings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// Each array's slots, summed over the CPUs.
    arrays: HashMap<&'static str, Vec<u64>>,
    /// The `--by` count map, when it is in use.
    keyed: HashMap<Attribution, u64>,
    /// Hits the kernel's BPF layer skipped, by program id.
    missed: HashMap<u32, u64>,
    /// What the kprobe layer counted for each kprobe: the hits it skipped (`nmissed`), never
    /// seen by the program.
    kprobe_missed: Vec<(Probe, Counted)>,
}

impl Reading {
    /// Reads every counter now; the keyed map only when `keyed` (walking it is not free), and
    /// the arrays only where a loaded program uses them (the others read as empty).
    pub fn take(tracer: &Tracer, keyed: bool) -> Result<Self> {
        Ok(Self::take_timed(tracer, keyed)?.0)
    }

    /// `take`, with the CPU time this thread spent reading the per-CPU arrays: the part of a
    /// reading that grows with the CPU count (a value per CPU for every slot).
    pub fn take_timed(tracer: &Tracer, keyed: bool) -> Result<(Self, Duration)> {
        let started = marks::thread_cpu();
        let mut arrays = HashMap::new();
        for name in ARRAYS.into_iter().filter(|name| tracer.array_in_use(name)) {
            arrays.insert(name, tracer.per_cpu_sums(name)?);
        }
        let arrays_cpu = marks::thread_cpu().saturating_sub(started);
        let keyed = if keyed {
            tracer.keyed_counts()?.into_iter().collect()
        } else {
            HashMap::new()
        };
        let reading = Reading {
            arrays,
            keyed,
            missed: tracer.missed_by_program_id(),
            kprobe_missed: tracer.kprobe_misses(),
        };
        Ok((reading, arrays_cpu))
    }

    /// What was added from `earlier` to this reading. A key this reading did not see (a walk
    /// of a hash map that is being written can miss one) counts nothing now and its events
    /// land in the next period, since `advance` keeps its earlier value.
    pub fn since(&self, earlier: &Reading) -> Reading {
        let difference =
            |now: &u64, before: Option<&u64>| now.wrapping_sub(before.copied().unwrap_or(0));
        let arrays = self
            .arrays
            .iter()
            .map(|(name, now)| {
                let before = earlier.arrays.get(name);
                let slots = now
                    .iter()
                    .enumerate()
                    .map(|(i, n)| difference(n, before.and_then(|b| b.get(i))))
                    .collect();
                (*name, slots)
            })
            .collect();
        let keyed = self
            .keyed
            .iter()
            .map(|(key, n)| (*key, difference(n, earlier.keyed.get(key))))
            .filter(|(_, n)| *n != 0)
            .collect();
        let missed = self
            .missed
            .iter()
            .map(|(id, n)| (*id, difference(n, earlier.missed.get(id))))
            .collect();
        let kprobe_missed = self
            .kprobe_missed
            .iter()
            .map(|(probe, now)| {
                let before = earlier
                    .kprobe_missed
                    .iter()
                    .find(|(p, c)| p == probe && c.address == now.address)
                    .map(|(_, c)| *c)
                    .unwrap_or_default();
                let counted = Counted {
                    address: now.address,
                    nmissed: now.nmissed.saturating_sub(before.nmissed),
                    returns_dropped: now.returns_dropped.saturating_sub(before.returns_dropped),
                };
                (*probe, counted)
            })
            .collect();
        Reading {
            arrays,
            keyed,
            missed,
            kprobe_missed,
        }
    }

    /// Moves this reading forward to `now`, keeping the values of keys `now` did not see.
    pub fn advance(&mut self, now: Reading) {
        self.arrays = now.arrays;
        self.keyed.extend(now.keyed);
        self.missed.extend(now.missed);
        for (probe, counted) in now.kprobe_missed {
            match self.kprobe_missed.iter_mut().find(|(p, _)| *p == probe) {
                Some(kept) => kept.1 = counted,
                None => self.kprobe_missed.push((probe, counted)),
            }
        }
    }

    /// Takes the slots of array `name` from a read of it made at another moment.
    pub fn set_array(&mut self, name: &'static str, slots: Vec<u64>) {
        self.arrays.insert(name, slots);
    }

    /// The slots of per-CPU array `name` (empty if it was not read).
    pub fn array(&self, name: &str) -> &[u64] {
        self.arrays.get(name).map_or(&[], Vec::as_slice)
    }

    /// The entries of the `--by` count map.
    pub fn keyed_counts(&self) -> impl Iterator<Item = (&Attribution, u64)> {
        self.keyed.iter().map(|(k, n)| (k, *n))
    }

    /// Hits the kernel skipped for `probes`: those its BPF layer skipped (counted for the
    /// programs serving them) and those its kprobe layer skipped.
    pub fn missed(&self, tracer: &Tracer, probes: &[Probe]) -> u64 {
        let by_programs: u64 = tracer
            .program_ids(probes)
            .filter_map(|id| self.missed.get(&id))
            .sum();
        by_programs + self.kprobe_layer_missed(probes)
    }

    /// `missed` for each program serving `probes`: the probes it serves (all of a kprobe-multi
    /// link's, or one), with the hits the kernel skipped, counted once for them all.
    pub fn missed_by_program(&self, tracer: &Tracer, probes: &[Probe]) -> Vec<(Vec<Probe>, u64)> {
        by_program(probes, |probe| {
            tracer.program_ids(std::slice::from_ref(probe)).collect()
        })
        .into_iter()
        .map(|served| {
            let missed = self.missed(tracer, &served);
            (served, missed)
        })
        .collect()
    }

    /// `missed_by_program` for the programs the kernel skipped any hit of, named by the hooks
    /// they serve (joined by commas where one serves several).
    pub fn missed_by_hook(&self, tracer: &Tracer, probes: &[Probe]) -> BTreeMap<String, u64> {
        self.missed_by_program(tracer, probes)
            .into_iter()
            .filter(|(_, missed)| *missed > 0)
            .map(|(served, missed)| {
                let names: Vec<String> = served.iter().map(Probe::hook_name).collect();
                (names.join(","), missed)
            })
            .collect()
    }

    /// Hits the kprobe layer skipped for `probes` (which never reached their programs).
    pub fn kprobe_layer_missed(&self, probes: &[Probe]) -> u64 {
        self.kprobe_missed
            .iter()
            .filter(|(p, _)| probes.contains(p))
            .map(|(_, c)| c.nmissed)
            .sum()
    }
}

/// `probes` grouped by the programs serving them (`programs_of`), in the order first seen: a
/// program's skipped hits are counted once, for all the hooks it serves. A probe served by no
/// known program is a group of its own (its kprobe's own skips are still its).
fn by_program(probes: &[Probe], programs_of: impl Fn(&Probe) -> Vec<u32>) -> Vec<Vec<Probe>> {
    let mut groups: Vec<(Vec<u32>, Vec<Probe>)> = Vec::new();
    for probe in probes {
        let programs = programs_of(probe);
        match groups
            .iter_mut()
            .find(|(served_by, _)| !programs.is_empty() && *served_by == programs)
        {
            Some((_, served)) => served.push(*probe),
            None => groups.push((programs, vec![*probe])),
        }
    }
    groups.into_iter().map(|(_, served)| served).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(counts: &[u64], keyed: &[(u32, u64)], missed: &[(u32, u64)]) -> Reading {
        Reading {
            arrays: [("COUNTS", counts.to_vec())].into_iter().collect(),
            keyed: keyed
                .iter()
                .map(|&(event, n)| {
                    (
                        Attribution {
                            event,
                            ..Default::default()
                        },
                        n,
                    )
                })
                .collect(),
            missed: missed.iter().copied().collect(),
            kprobe_missed: Vec::new(),
        }
    }

    /// Hooks one program serves are one group; hooks without a known program each their own.
    #[test]
    fn hooks_are_grouped_by_the_program_serving_them() {
        use crate::trace::probes::{GRACE_PERIODS, Side};
        let probes: Vec<Probe> = GRACE_PERIODS.in_attach_order().to_vec();
        let (first, second, third) = (probes[0], probes[1], probes[2]);
        let programs_of = |probe: &Probe| {
            if *probe == first || *probe == third {
                vec![5]
            } else if *probe == second {
                vec![]
            } else {
                vec![6]
            }
        };
        let groups = by_program(&[first, second, third, second], programs_of);
        assert_eq!(groups, vec![vec![first, third], vec![second], vec![second]]);
        let names: Vec<String> = probes.iter().map(Probe::hook_name).collect();
        assert!(
            probes
                .iter()
                .zip(&names)
                .all(|(p, n)| (p.side == Side::Return) == n.ends_with("%return")),
            "{names:?}"
        );
    }

    /// Three periods of a run add up to the whole run, even when one walk of the hash map
    /// missed a key.
    #[test]
    fn periods_add_up_to_the_whole() {
        let open = reading(&[10, 0], &[], &[(7, 1)]);
        let readings = [
            reading(&[15, 2], &[(1, 4)], &[(7, 1)]),
            // Key 1 grew to 9, but this walk did not see it.
            reading(&[15, 3], &[(2, 1)], &[(7, 3)]),
            reading(&[20, u64::MAX], &[(1, 10), (2, 2)], &[(7, 4)]),
        ];
        let whole = readings[2].since(&open);
        let mut baseline = open;
        let mut sums = reading(&[0, 0], &[], &[]);
        for now in readings {
            let period = now.since(&baseline);
            for (i, n) in period.array("COUNTS").iter().enumerate() {
                sums.arrays.get_mut("COUNTS").unwrap()[i] =
                    sums.array("COUNTS")[i].wrapping_add(*n);
            }
            for (k, n) in period.keyed_counts() {
                *sums.keyed.entry(*k).or_default() += n;
            }
            for (id, n) in &period.missed {
                *sums.missed.entry(*id).or_default() += n;
            }
            baseline.advance(now);
        }
        assert_eq!(sums.array("COUNTS"), whole.array("COUNTS"));
        assert_eq!(sums.array("COUNTS"), [10, u64::MAX]);
        assert_eq!(sums.keyed, whole.keyed);
        assert_eq!(sums.missed, whole.missed);
        assert_eq!(sums.missed[&7], 3);
    }

    /// The kprobe layer's counts add up over periods too, and a kprobe registered again (a
    /// new address) counts from zero: its whole count is the period's.
    #[test]
    fn a_kprobe_registered_again_counts_from_zero() {
        use crate::trace::probes::READERS;
        let with = |address: u64, nmissed: u64| {
            let mut r = reading(&[], &[], &[]);
            r.kprobe_missed = vec![(
                READERS.probe,
                Counted {
                    address,
                    nmissed,
                    returns_dropped: 0,
                },
            )];
            r
        };
        let probes = [READERS.probe];
        let mut baseline = with(0xa0, 5);
        let mut total = 0;
        for now in [with(0xa0, 9), with(0xb0, 2), with(0xb0, 2), with(0xb0, 7)] {
            total += now.since(&baseline).kprobe_layer_missed(&probes);
            baseline.advance(now);
        }
        assert_eq!(total, 4 + 2 + 5);
        assert_eq!(baseline.kprobe_missed.len(), 1);
    }
}
