//! What an expedited grace period still waits for, read from the kernel's memory when `stall`
//! warns about it: each leaf `rcu_node`'s `expmask` (a bit per CPU, `grplo + bit`, cleared as
//! that CPU reports) and `exp_tasks` (the first task blocked inside a reader that it waits
//! for, or none). This is what the kernel's own expedited stall warning prints; read without
//! the node's lock, a CPU may report a moment after its bit was read, never the other way.

use anyhow::{Context as _, Result, bail};

use super::{btf, kcore::KernelMemory};
use crate::model::{
    stall::ExpeditedHoldouts,
    tree::{RcuTree, Reported},
};

const NODE_EXPMASK: btf::Field = ("rcu_node", "expmask");
const NODE_EXP_TASKS: btf::Field = ("rcu_node", "exp_tasks");

/// The fields read, for the run's one pass over the BTF (`rcu_state::fields`).
pub const FIELDS: [btf::Field; 2] = [NODE_EXPMASK, NODE_EXP_TASKS];

/// Reads the leaves' expedited state, the kernel memory and offsets found once.
pub struct ExpeditedHoldoutReader {
    memory: KernelMemory,
    tree: RcuTree,
    expmask: u64,
    exp_tasks: u64,
}

impl ExpeditedHoldoutReader {
    pub fn new(tree: RcuTree) -> Result<Self> {
        let offsets = btf::field_offsets(&FIELDS)
            .context("reading rcu_node's expedited fields from the kernel BTF")?;
        let offset = |field: btf::Field| {
            offsets
                .get(&field)
                .map(|&o| u64::from(o))
                .with_context(|| format!("this kernel's BTF has no {}.{}", field.0, field.1))
        };
        Ok(ExpeditedHoldoutReader {
            expmask: offset(NODE_EXPMASK)?,
            exp_tasks: offset(NODE_EXP_TASKS)?,
            memory: KernelMemory::open()?,
            tree,
        })
    }

    /// The CPUs whose reports the expedited grace period in progress still waits for, and
    /// whether blocked readers hold it too.
    pub fn read(&self) -> Result<ExpeditedHoldouts> {
        let mut holdouts = ExpeditedHoldouts::default();
        for leaf in self.tree.leaves() {
            let mask = self.memory.read_u64(leaf.address + self.expmask)?;
            match self.tree.decode(leaf.address, mask) {
                Some(Reported::Cpus(cpus)) => holdouts.cpus.extend(cpus),
                _ => bail!(
                    "the leaf of CPUs {}-{} has expmask {mask:#x}: bits past its CPUs",
                    leaf.grplo,
                    leaf.grphi
                ),
            }
            if self.memory.read_u64(leaf.address + self.exp_tasks)? != 0 {
                holdouts.blocked_tasks = true;
            }
        }
        holdouts.cpus.sort_unstable();
        Ok(holdouts)
    }
}
