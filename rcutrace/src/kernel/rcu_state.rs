//! Where RCU's own state lies in this kernel's memory, for the programs that read it: the
//! address of `rcu_state` (from kallsyms) and the byte offsets of the fields read, from
//! the kernel's BTF. Layouts differ between kernels (`task_struct.rcu_read_lock_nesting` is at
//! byte 2036 on Debian's 6.1 and 2044 on its 6.12), so nothing here is assumed.

use std::collections::HashMap;

use anyhow::{Context as _, Result, bail};

use super::{
    btf::{self, Field},
    rcu_tree::{NODE_GRPLO, NODE_LEVEL},
};
use crate::model::tree::RcuTree;

const GP_SEQ: Field = ("rcu_state", "gp_seq");
const NODE_QSMASK: Field = ("rcu_node", "qsmask");
const NODE_EXPMASK: Field = ("rcu_node", "expmask");
const TASK_NESTING: Field = ("task_struct", "rcu_read_lock_nesting");

const STALL_TIMEOUT: &str = "/sys/module/rcupdate/parameters/rcu_cpu_stall_timeout";

/// What the grace-period programs need to read RCU's state, and the tree of `rcu_node`s
/// that decodes their reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RcuLayout {
    pub rcu_state: u64,
    pub gp_seq: u32,
    pub node_qsmask: u32,
    pub node_grplo: u32,
    pub node_level: u32,
    pub tree: RcuTree,
    pub task_nesting: u32,
    /// Offsets of `rcuname` and `msg` in the stall-warning tracepoint's record, where the
    /// kernel has that tracepoint.
    pub stall_warning: Option<(u32, u32)>,
    /// `rcu_state.expedited_sequence`, where the kernel has it.
    pub expedited_sequence: Option<u32>,
    /// What the expedited reports' programs read, where the kernel has it all.
    pub expedited: Option<ExpeditedLayout>,
}

/// Where the expedited grace periods' reports are (beside `RcuLayout::expedited_sequence`):
/// each `rcu_node`'s `expmask`, and which argument of `rcu_report_exp_cpu_mult()` is its mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpeditedLayout {
    pub node_expmask: u32,
    pub report_mask_arg: u32,
}

/// The function whose mask argument moves between kernels (`rnp, mask, wake` on 6.1 and
/// 6.12; `rnp, flags, mask_in, wake` on 7.3).
pub const EXPEDITED_REPORT_FUNCTION: &str = "rcu_report_exp_cpu_mult";

/// The expedited layout, or `None` (said in the debug log) where this kernel lacks a part.
pub fn expedited_layout() -> Result<Option<ExpeditedLayout>> {
    let fields = [EXPEDITED_SEQUENCE, NODE_EXPMASK];
    let offsets = btf::field_offsets(&fields)
        .context("reading the expedited grace periods' fields from the kernel BTF")?;
    let (Some(_), Some(&node_expmask)) =
        (offsets.get(&EXPEDITED_SEQUENCE), offsets.get(&NODE_EXPMASK))
    else {
        log::debug!("no rcu_state.expedited_sequence or rcu_node.expmask in the kernel BTF");
        return Ok(None);
    };
    let Some(report_mask_arg) =
        btf::parameter_position(EXPEDITED_REPORT_FUNCTION, &["mask", "mask_in"])?
    else {
        log::debug!("no {EXPEDITED_REPORT_FUNCTION}() taking a mask in the kernel BTF");
        return Ok(None);
    };
    Ok(Some(ExpeditedLayout {
        node_expmask,
        report_mask_arg,
    }))
}

/// Reads this kernel's layout; fails naming what is missing (a kernel without preemptible
/// RCU has no reader nesting in its tasks, for one).
pub fn layout() -> Result<RcuLayout> {
    let fields = [GP_SEQ, NODE_QSMASK, NODE_GRPLO, NODE_LEVEL, TASK_NESTING];
    let offsets = btf::field_offsets(&[fields.as_slice(), &[EXPEDITED_SEQUENCE]].concat())
        .context("reading RCU's structures from the kernel BTF")?;
    let missing: Vec<String> = fields
        .iter()
        .filter(|field| !offsets.contains_key(*field))
        .map(|(structure, member)| format!("{structure}.{member}"))
        .collect();
    if !missing.is_empty() {
        bail!(
            "this kernel's BTF has no {} (grace-period tracing needs tree RCU with \
             CONFIG_PREEMPT_RCU)",
            missing.join(", ")
        );
    }
    // The start's one symbol lookup (shared with the kprobe table's): a
    // machine whose CPU ids fit in one leaf needs only rcu_state's address (its tree is one
    // node), a larger one the tree's size too.
    use super::rcu_tree::{Lookup, VARIABLES};
    let symbols = super::start_symbols().map_err(anyhow::Error::msg)?;
    let address = |name: &str| symbols.get(name).copied();
    let lookup = match super::rcu_tree::one_leaf()? {
        Some(cpus) => Lookup::OneLeaf { cpus },
        None => Lookup::Tree(VARIABLES.map(address)),
    };
    let rcu_state = address("rcu_state").context(
        "kallsyms gives no address for rcu_state (kernel.kptr_restrict hides \
         addresses, or the kernel lacks CONFIG_KALLSYMS_ALL)",
    )?;
    crate::marks::mark("rcu_state (and on a tree of nodes, its size) found");
    let tree =
        super::rcu_tree::read(rcu_state, lookup).context("reading the kernel's rcu_node tree")?;
    Ok(RcuLayout {
        rcu_state,
        gp_seq: offsets[&GP_SEQ],
        node_qsmask: offsets[&NODE_QSMASK],
        node_grplo: offsets[&NODE_GRPLO],
        node_level: offsets[&NODE_LEVEL],
        tree,
        task_nesting: offsets[&TASK_NESTING],
        stall_warning: stall_warning_offsets(),
        expedited_sequence: offsets.get(&EXPEDITED_SEQUENCE).copied(),
        expedited: None,
    })
}

/// Where the stall-warning tracepoint's `rcuname` and `msg` pointers are in its record;
/// `None` where the kernel (or tracefs) does not have it.
fn stall_warning_offsets() -> Option<(u32, u32)> {
    let format = super::tracefs::format("rcu", "rcu_stall_warning")?;
    Some((
        super::tracefs::field_offset(&format, "rcuname")?,
        super::tracefs::field_offset(&format, "msg")?,
    ))
}

/// The kernel's RCU CPU stall timeout (`rcu_cpu_stall_timeout`, seconds; writable at run
/// time, so read when a watch starts).
pub fn stall_timeout() -> Result<std::time::Duration> {
    let text = std::fs::read_to_string(STALL_TIMEOUT)
        .with_context(|| format!("reading {STALL_TIMEOUT}"))?;
    let secs: u64 = text
        .trim()
        .parse()
        .with_context(|| format!("{STALL_TIMEOUT} holds {text:?}, not a number of seconds"))?;
    Ok(std::time::Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SRCU's fields at 6.12-like offsets, with the segments' numbers `gp_seq_size` bytes each.
    fn srcu_offsets(gp_seq_size: u32) -> HashMap<Field, u32> {
        let mut offsets: HashMap<Field, u32> = SRCU_FIELDS
            .iter()
            .enumerate()
            .map(|(i, field)| (*field, 8 * i as u32))
            .collect();
        offsets.insert(("srcu_usage", "work"), 400);
        offsets.insert(("delayed_work", "work"), 0);
        offsets.insert(("rcu_segcblist", "gp_seq"), 40);
        offsets.insert(("rcu_segcblist", "len"), 40 + 4 * gp_seq_size);
        offsets
    }

    #[test]
    fn srcu_layout_sizes_the_segments_numbers_from_the_next_field() {
        // 6.12: an unsigned long per segment; 7.3: a struct rcu_gp_seq (normal, expedited).
        for size in [8, 16] {
            let layout = srcu_layout(&srcu_offsets(size)).unwrap();
            assert_eq!(
                (layout.segcblist_gp_seq, layout.segcblist_gp_seq_size),
                (40, size)
            );
            assert_eq!(layout.usage_work, 400);
        }
        // 6.1 has no srcu_usage: nothing to follow.
        let mut old = srcu_offsets(8);
        old.remove(&("srcu_usage", "srcu_gp_seq"));
        assert_eq!(srcu_layout(&old), None);
    }
}

const EXPEDITED_SEQUENCE: Field = ("rcu_state", "expedited_sequence");

/// What `srlat --stages` reads: the grace-period counters and the callback that wakes a
/// normal `synchronize_rcu()` caller, plus which of the callback queueing functions exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagesLayout {
    pub rcu_state: u64,
    pub gp_seq: u32,
    pub expedited_sequence: u32,
    /// `None` on a kernel that wakes every caller from the grace-period kthread instead.
    pub wakeme_after_rcu: Option<u64>,
    /// Of `call_rcu` and `call_rcu_hurry`, the ones this kernel has.
    pub queueing_functions: Vec<&'static str>,
}

pub fn stages_layout() -> Result<StagesLayout> {
    let fields = [GP_SEQ, EXPEDITED_SEQUENCE];
    let offsets =
        btf::field_offsets(&fields).context("reading rcu_state's layout from the kernel BTF")?;
    let (Some(&gp_seq), Some(&expedited_sequence)) =
        (offsets.get(&GP_SEQ), offsets.get(&EXPEDITED_SEQUENCE))
    else {
        bail!(
            "this kernel's BTF has no rcu_state.gp_seq and expedited_sequence (taking calls \
             apart needs tree RCU)"
        );
    };
    const QUEUEING: [&str; 2] = ["call_rcu", "call_rcu_hurry"];
    let symbols =
        super::kernel_symbols(&["rcu_state", "wakeme_after_rcu", QUEUEING[0], QUEUEING[1]])?;
    let rcu_state = *symbols.get("rcu_state").context(
        "kallsyms gives no address for rcu_state (kernel.kptr_restrict hides \
         addresses, or the kernel lacks CONFIG_KALLSYMS_ALL)",
    )?;
    Ok(StagesLayout {
        rcu_state,
        gp_seq,
        expedited_sequence,
        wakeme_after_rcu: symbols.get("wakeme_after_rcu").copied(),
        queueing_functions: QUEUEING
            .into_iter()
            .filter(|f| symbols.contains_key(*f))
            .collect(),
    })
}

/// Where the own-work programs (`rcutrace_common::own_work`) find a tasks-RCU kthread's
/// callback list and check that a list is one (its `rcu_tasks_percpu`'s flavour names that
/// kthread), and where a task's stack is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnWorkLayout {
    pub segcblist_tails: u32,
    pub percpu_cblist: u32,
    pub percpu_rtpp: u32,
    pub tasks_kthread_ptr: u32,
    pub task_stack: u32,
    /// SRCU's grace periods, where the kernel has all that is read of them (6.1 keeps SRCU's
    /// update side in `srcu_struct` itself: no `srcu_usage`).
    pub srcu: Option<SrcuLayout>,
}

/// Where the own-work programs find the SRCU domain whose grace-period work a kworker runs
/// (its `worker.current_work` is `srcu_usage.work`), that grace period's number, and the
/// segments of the callback list rcutrace queued on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrcuLayout {
    pub task_flags: u32,
    /// A kthread's `struct kthread`.
    pub task_worker_private: u32,
    /// A kworker's `struct worker`.
    pub kthread_data: u32,
    pub worker_current_work: u32,
    /// `srcu_usage.work.work`: the delayed work's own `work_struct`.
    pub usage_work: u32,
    pub usage_ssp: u32,
    pub usage_gp_seq: u32,
    pub usage_size_state: u32,
    pub struct_sup: u32,
    pub data_cblist: u32,
    pub data_ssp: u32,
    pub segcblist_gp_seq: u32,
    /// The size of one segment's number: an `unsigned long` until 7.3 made it a
    /// `struct rcu_gp_seq` (normal, expedited).
    pub segcblist_gp_seq_size: u32,
}

const TASKS_FIELDS: [Field; 5] = [
    ("rcu_segcblist", "tails"),
    ("rcu_tasks_percpu", "cblist"),
    ("rcu_tasks_percpu", "rtpp"),
    ("rcu_tasks", "kthread_ptr"),
    ("task_struct", "stack"),
];

/// The last field is only there for the size of the one before (`gp_seq`, of as many
/// elements as there are segments).
const SRCU_FIELDS: [Field; 14] = [
    ("task_struct", "flags"),
    ("task_struct", "worker_private"),
    ("kthread", "data"),
    ("worker", "current_work"),
    ("srcu_usage", "work"),
    ("delayed_work", "work"),
    ("srcu_usage", "srcu_ssp"),
    ("srcu_usage", "srcu_gp_seq"),
    ("srcu_usage", "srcu_size_state"),
    ("srcu_struct", "srcu_sup"),
    ("srcu_data", "srcu_cblist"),
    ("srcu_data", "ssp"),
    ("rcu_segcblist", "gp_seq"),
    ("rcu_segcblist", "len"),
];

/// Every field read here, for one pass over the BTF that answers them all (`btf::read_ahead`).
pub fn fields() -> Vec<Field> {
    [GP_SEQ, NODE_QSMASK, TASK_NESTING, EXPEDITED_SEQUENCE]
        .iter()
        .chain(&super::rcu_tree::FIELDS)
        .chain(&super::expedited_holdouts::FIELDS)
        .chain(&super::grace_counters::FIELDS)
        .chain(&TASKS_FIELDS)
        .chain(&SRCU_FIELDS)
        .chain(&super::callback_lists::FIELDS)
        .chain(&super::tasks_holdouts::FIELDS)
        .copied()
        .collect()
}

/// The segments of a callback list (`RCU_CBLIST_NSEGS`).
const SEGMENTS: u32 = 4;

pub fn own_work_layout() -> Result<OwnWorkLayout> {
    let fields: Vec<Field> = TASKS_FIELDS.iter().chain(&SRCU_FIELDS).copied().collect();
    let offsets = btf::field_offsets(&fields)
        .context("reading the tasks-RCU and SRCU callback lists' layout from the kernel BTF")?;
    let offset = |field: Field| {
        offsets
            .get(&field)
            .copied()
            .with_context(|| format!("this kernel's BTF has no {}.{}", field.0, field.1))
    };
    let srcu = srcu_layout(&offsets);
    Ok(OwnWorkLayout {
        segcblist_tails: offset(TASKS_FIELDS[0])?,
        percpu_cblist: offset(TASKS_FIELDS[1])?,
        percpu_rtpp: offset(TASKS_FIELDS[2])?,
        tasks_kthread_ptr: offset(TASKS_FIELDS[3])?,
        task_stack: offset(TASKS_FIELDS[4])?,
        srcu,
    })
}

/// SRCU's layout, if the kernel has every field of it.
fn srcu_layout(offsets: &HashMap<Field, u32>) -> Option<SrcuLayout> {
    match SRCU_FIELDS.map(|field| offsets.get(&field).copied()) {
        [
            Some(task_flags),
            Some(task_worker_private),
            Some(kthread_data),
            Some(worker_current_work),
            Some(usage_delayed_work),
            Some(delayed_work_work),
            Some(usage_ssp),
            Some(usage_gp_seq),
            Some(usage_size_state),
            Some(struct_sup),
            Some(data_cblist),
            Some(data_ssp),
            Some(segcblist_gp_seq),
            Some(segcblist_len),
        ] if segcblist_len > segcblist_gp_seq => Some(SrcuLayout {
            task_flags,
            task_worker_private,
            kthread_data,
            worker_current_work,
            usage_work: usage_delayed_work + delayed_work_work,
            usage_ssp,
            usage_gp_seq,
            usage_size_state,
            struct_sup,
            data_cblist,
            data_ssp,
            segcblist_gp_seq,
            segcblist_gp_seq_size: (segcblist_len - segcblist_gp_seq) / SEGMENTS,
        }),
        _ => None,
    }
}
