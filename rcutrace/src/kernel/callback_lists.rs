//! How many callbacks normal RCU's per-CPU lists hold right now, read from kernel memory:
//! each possible CPU's `rcu_data.cblist.len`. On a CPU whose callbacks are offloaded that
//! length already counts its bypass list (the kernel adds to it before the bypass enqueue),
//! and it drops only after a batch of invoked callbacks, so it never counts short. The
//! per-CPU copy of `rcu_data` lies at the symbol's address plus that CPU's
//! `__per_cpu_offset`, both from /proc/kallsyms (zero-based per-CPU symbols on 6.1 and 6.12,
//! absolute ones on 7.3: the sum is the same), and the fields' offsets come from the BTF.

use anyhow::{Context as _, Result};

use super::{btf, kcore::KernelMemory};

const CBLIST: btf::Field = ("rcu_data", "cblist");
const CBLIST_LEN: btf::Field = ("rcu_segcblist", "len");

/// The fields read, for the run's one pass over the BTF (`rcu_state::fields`).
pub const FIELDS: [btf::Field; 2] = [CBLIST, CBLIST_LEN];

/// Where each CPU's list length is.
pub struct CallbackLists {
    memory: KernelMemory,
    /// The address of each CPU's length.
    lengths: Vec<u64>,
}

impl CallbackLists {
    /// Finds the lists; fails saying what this kernel does not give.
    pub fn locate() -> Result<CallbackLists> {
        let offsets = btf::field_offsets(&FIELDS)
            .context("reading the callback lists' layout from the kernel BTF")?;
        let offset = |field: btf::Field| offsets.get(&field).map(|&o| u64::from(o));
        let cblist_len = offset(CBLIST)
            .zip(offset(CBLIST_LEN))
            .map(|(a, b)| a + b)
            .context("this kernel's BTF has no rcu_data.cblist.len")?;
        let [rcu_data, per_cpu_offsets] =
            super::variable_addresses(["rcu_data", "__per_cpu_offset"])?;
        let rcu_data = rcu_data.context("kallsyms gives no address for rcu_data")?;
        let per_cpu_offsets =
            per_cpu_offsets.context("kallsyms gives no address for __per_cpu_offset")?;
        let memory = KernelMemory::open()?;
        let lengths = (0..u64::from(super::possible_cpus()?))
            .map(|cpu| {
                let base = rcu_data.wrapping_add(memory.read_u64(per_cpu_offsets + 8 * cpu)?);
                Ok(base + cblist_len)
            })
            .collect::<Result<_>>()?;
        Ok(CallbackLists { memory, lengths })
    }

    /// The callbacks on every CPU's list now. The lengths are read one after the other, not
    /// at one instant: a callback moves between lists only when its CPU goes offline.
    pub fn callbacks(&self) -> Result<u64> {
        let mut total = 0u64;
        for address in &self.lengths {
            // A length is a signed long; a negative one would be a kernel bug, not callbacks.
            let length = self.memory.read_u64(*address)? as i64;
            total += length.max(0) as u64;
        }
        Ok(total)
    }
}
