//! How many grace periods of each flavour have ended so far, read from kernel memory: the
//! sequence numbers the kernel keeps (`rcu_state.gp_seq`, and each tasks flavour's
//! `tasks_gp_seq`). Two readings around a stretch of time say how many ended within it:
//! those rcutrace's own detaching waited for among them.

use std::collections::HashMap;

use anyhow::{Context as _, Result};

use super::{btf, kcore::KernelMemory};

const GP_SEQ: btf::Field = ("rcu_state", "gp_seq");
const TASKS_GP_SEQ: btf::Field = ("rcu_tasks", "tasks_gp_seq");

/// The fields read, for the run's one pass over the BTF (`rcu_state::fields`).
pub const FIELDS: [btf::Field; 2] = [GP_SEQ, TASKS_GP_SEQ];

/// The flavours counted, by the kernel variable that holds each one's state. Tasks-trace
/// RCU is left out: only sleepable programs wait for it, and since 7.0 it is SRCU.
pub const FLAVOURS: [(Flavour, &str); 3] = [
    (Flavour::Normal, "rcu_state"),
    (Flavour::Tasks, "rcu_tasks"),
    (Flavour::TasksRude, "rcu_tasks_rude"),
];

/// The kernel variables whose addresses are needed (`kernel_symbols`).
pub const SYMBOLS: [&str; 3] = [FLAVOURS[0].1, FLAVOURS[1].1, FLAVOURS[2].1];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flavour {
    Normal,
    Tasks,
    TasksRude,
}

impl Flavour {
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Normal => "normal",
            Flavour::Tasks => "tasks-RCU",
            Flavour::TasksRude => "tasks-rude-RCU",
        }
    }
}

/// The low bits of an RCU sequence number say whether a grace period is in progress
/// (`RCU_SEQ_CTR_SHIFT`); the rest counts those that ended.
const SEQ_STATE_BITS: u32 = 2;
/// The counts of ended grace periods wrap at this many bits: the sequence numbers wrap at 64,
/// and normal RCU's starts 300 grace periods short of wrapping (`rcu_state.gp_seq`'s
/// initial value), so a machine not long booted crosses it.
const COUNT_BITS: u32 = u64::BITS - SEQ_STATE_BITS;

/// Where each flavour's sequence number lies; a flavour this kernel lacks is left out.
pub struct GraceCounters {
    memory: KernelMemory,
    sequences: Vec<(Flavour, u64)>,
}

/// Grace periods ended so far, by flavour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended(Vec<(Flavour, u64)>);

impl GraceCounters {
    /// Finds the sequence numbers from the kernel's symbols (`symbols`, the start's symbol
    /// lookup, which looked for `SYMBOLS`) and the BTF.
    pub fn locate(symbols: &HashMap<String, u64>) -> Result<GraceCounters> {
        let offsets = btf::field_offsets(&FIELDS)
            .context("reading the grace-period sequence numbers' offsets from the kernel BTF")?;
        let sequences = FLAVOURS
            .iter()
            .filter_map(|&(flavour, variable)| {
                let field = match flavour {
                    Flavour::Normal => GP_SEQ,
                    Flavour::Tasks | Flavour::TasksRude => TASKS_GP_SEQ,
                };
                Some((
                    flavour,
                    symbols.get(variable)? + u64::from(*offsets.get(&field)?),
                ))
            })
            .collect();
        Ok(GraceCounters {
            memory: KernelMemory::open().context("reading grace-period sequence numbers")?,
            sequences,
        })
    }

    pub fn read(&self) -> Result<Ended> {
        self.sequences
            .iter()
            .map(|&(flavour, address)| {
                let seq = self.memory.read_u64(address)?;
                Ok((flavour, seq >> SEQ_STATE_BITS))
            })
            .collect::<Result<_>>()
            .map(Ended)
    }
}

impl Ended {
    /// How many of each flavour ended between `self` and the later reading `after`.
    pub fn since(&self, after: &Ended) -> Vec<(Flavour, u64)> {
        self.0
            .iter()
            .filter_map(|&(flavour, before)| {
                let (_, later) = after.0.iter().find(|(f, _)| *f == flavour)?;
                Some((
                    flavour,
                    later.wrapping_sub(before) & ((1 << COUNT_BITS) - 1),
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_grace_periods_that_ended_between_two_readings() {
        // A grace period in progress (state bits set) that ends counts once; so does one
        // that starts and ends in between.
        let before = Ended(vec![
            (Flavour::Normal, 0x1235 >> 2),
            (Flavour::Tasks, 40 >> 2),
        ]);
        let after = Ended(vec![
            (Flavour::Normal, 0x1240 >> 2),
            (Flavour::Tasks, 48 >> 2),
        ]);
        assert_eq!(
            before.since(&after),
            vec![(Flavour::Normal, 3), (Flavour::Tasks, 2)]
        );
        // A flavour read only once is left out.
        let tasks_only = Ended(vec![(Flavour::Tasks, 12)]);
        assert_eq!(before.since(&tasks_only), vec![(Flavour::Tasks, 2)]);
    }

    #[test]
    fn counts_across_the_wrap_a_new_boot_crosses() {
        // rcu_state.gp_seq begins at (0 - 300) << 2: 6 grace periods before the wrap, and
        // 40 after.
        let start = 0u64.wrapping_sub(6) << 2;
        let before = Ended(vec![(Flavour::Normal, start >> SEQ_STATE_BITS)]);
        let after = Ended(vec![(Flavour::Normal, (40u64 << 2) >> SEQ_STATE_BITS)]);
        assert_eq!(before.since(&after), vec![(Flavour::Normal, 46)]);
    }
}
