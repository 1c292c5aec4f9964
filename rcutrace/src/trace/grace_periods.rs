//! The grace-period programs as every command that follows grace periods uses them (`gp`,
//! `stall`, `serve`, `top`): their load-time constants, their events decoded, and the state
//! they keep for reading (the grace period in progress, the expedited one).

use std::time::Duration;

use anyhow::Result;
use rcutrace_common::{
    attribution::MAX_STACKS,
    gp::{
        CpuState, EXPEDITED_LAST_END, EXPEDITED_LAST_START, EXPEDITED_SINCE, EXPEDITED_SLOTS,
        GpEvent, GpState, MAX_BLOCKED, MAX_TASKS_HOLDOUTS_SAMPLED,
    },
};

use crate::{
    kernel::{
        self, rcu_state::RcuLayout, srcu_layout::SrcuGpLayout, tasks_holdouts::HoldoutLayout,
    },
    model::stall::ExpeditedState,
    trace::tracer::{Constant, Tracer},
};

/// A CPU that has held a grace period up this long is sampled at each of its ticks (a few
/// ticks at HZ=250: past the first force-quiescent-state pass).
const HOLDOUT_SAMPLE_AFTER_NS: u64 = 10_000_000;

/// What the grace-period programs send to user space.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum GpEvents {
    /// Nothing: they keep the grace period's state and counts for reading (`top`).
    None,
    /// Every event, with stacks sampled on holdout CPUs (`gp`).
    WithSamples,
    /// The same, and a wake-up of user space at once when a grace period, normal or
    /// expedited, passes `wake_after` (`stall`, whose watch then need not look often).
    WithWakeAfter(Duration),
    /// Every event but the holdout samples: the anatomy without stacks (`serve`).
    WithoutSamples,
}

/// The grace-period programs' load-time constants and map sizes: where RCU's state lies in
/// this kernel, and room for every possible CPU.
pub fn constants(layout: &RcuLayout, cpus: u32, events: GpEvents) -> Vec<Constant> {
    let (rcuname, msg) = layout.stall_warning.unwrap_or((0, 0));
    let sample_after_ns = match events {
        GpEvents::WithSamples | GpEvents::WithWakeAfter(_) => HOLDOUT_SAMPLE_AFTER_NS,
        // No grace period gets that old.
        GpEvents::WithoutSamples | GpEvents::None => u64::MAX,
    };
    let wake_after_ns = match events {
        GpEvents::WithWakeAfter(after) => u64::try_from(after.as_nanos()).unwrap_or(u64::MAX),
        _ => u64::MAX,
    };
    // Only `gp` takes the expedited grace periods apart, where the layout was read for it.
    let expedited = layout.expedited.filter(|_| events == GpEvents::WithSamples);
    let mut constants = vec![
        Constant::U32("GP_EVENTS", u32::from(events != GpEvents::None)),
        Constant::U64("RCU_STATE_ADDRESS", layout.rcu_state),
        Constant::U32("RCU_STATE_GP_SEQ", layout.gp_seq),
        Constant::U32("RCU_NODE_QSMASK", layout.node_qsmask),
        Constant::U32("RCU_NODE_GRPLO", layout.node_grplo),
        Constant::U32("RCU_NODE_LEVEL", layout.node_level),
        Constant::U32("RCU_LEAF_LEVEL", layout.tree.leaf_level()),
        Constant::U32("TASK_RCU_READ_LOCK_NESTING", layout.task_nesting),
        Constant::U32("STALL_WARNING_RCUNAME", rcuname),
        Constant::U32("STALL_WARNING_MSG", msg),
        Constant::U64("HOLDOUT_SAMPLE_AFTER_NS", sample_after_ns),
        Constant::U64("STALL_WAKE_AFTER_NS", wake_after_ns),
        Constant::MaxEntries("CPU_STATE", cpus),
        Constant::MaxEntries("BLOCKED", MAX_BLOCKED),
        Constant::MaxEntries("STACKS", MAX_STACKS),
        Constant::U32("EXPEDITED_EVENTS", u32::from(expedited.is_some())),
    ];
    // The expedited hooks of every run tell one expedited grace period's end from the next
    // one's by the sequence.
    if let Some(offset) = layout.expedited_sequence {
        constants.push(Constant::U32("RCU_STATE_EXPEDITED_SEQUENCE", offset));
    }
    if let Some(expedited) = expedited {
        constants.extend([
            Constant::U32("RCU_NODE_EXPMASK", expedited.node_expmask),
            Constant::U32("EXP_REPORT_MASK_ARG", expedited.report_mask_arg),
        ]);
    }
    constants
}

/// Room for the threads running SRCU's grace-period work at once (kworkers, one per domain
/// at most).
const MAX_SRCU_WORKERS: u32 = 1024;
/// Room for the CPUs whose counts of a domain's readers readers that moved CPU left
/// unbalanced (one ahead, another behind, per index): every domain's, together.
const MAX_SRCU_RESIDUES: u32 = 16384;

/// `gp --flavor srcu`'s load-time constants: where this kernel's SRCU domains keep their
/// grace-period number and work, and where their readers are counted on each of `cpus`
/// (the per-CPU areas' offsets at `per_cpu_offset`, the address of `__per_cpu_offset`).
pub fn srcu_constants(
    layout: &SrcuGpLayout,
    per_cpu_offset: Option<u64>,
    cpus: u32,
) -> Vec<Constant> {
    let mut constants = vec![
        Constant::U32("GP_EVENTS", 1),
        Constant::U32("GP_SRCU_VIA_USAGE", u32::from(layout.usage.is_some())),
        Constant::U32("GP_SRCU_SUP", layout.usage.unwrap_or(0)),
        Constant::U32("GP_SRCU_GP_SEQ", layout.gp_seq),
        Constant::U32("GP_SRCU_WORK", layout.work),
        Constant::U32("GP_SRCU_USAGE_SSP", layout.usage_ssp),
        Constant::U32("GP_SRCU_DATA_WORK", layout.callbacks_work),
        Constant::U32("GP_SRCU_DATA_SSP", layout.callbacks_domain),
        Constant::MaxEntries("SRCU_WORKING", MAX_SRCU_WORKERS),
        Constant::MaxEntries("SRCU_SCANNING", MAX_SRCU_WORKERS),
    ];
    if let (Some(readers), Some(per_cpu_offset)) = (layout.readers, per_cpu_offset) {
        constants.extend([
            Constant::U32("GP_SRCU_SDA", readers.sda),
            Constant::U32("GP_SRCU_LOCKS", readers.entered),
            Constant::U32("GP_SRCU_UNLOCKS", readers.left),
            Constant::U32("GP_SRCU_INDEX_STRIDE", readers.index_stride),
            Constant::U64("GP_PER_CPU_OFFSET", per_cpu_offset),
            Constant::U32("GP_SRCU_CPUS", cpus),
            Constant::MaxEntries("SRCU_RESIDUES", MAX_SRCU_RESIDUES),
        ]);
    }
    constants
}

/// Room for the tasks-RCU kthreads in a grace period at once (one per flavour).
const MAX_TASKS_KTHREADS: u32 = 64;

/// `gp --flavor tasks`' load-time constants, with where a holdout task's fields are where
/// known.
pub fn tasks_constants(holdouts: Option<&HoldoutLayout>) -> Vec<Constant> {
    let mut constants = vec![
        Constant::U32("GP_EVENTS", 1),
        Constant::MaxEntries("TASKS_WAITING", MAX_TASKS_KTHREADS),
    ];
    if let Some(layout) = holdouts {
        constants.extend([
            Constant::U32("GP_TASK_HOLDOUT_LIST", layout.holdout_list),
            Constant::U32("GP_TASK_PID", layout.pid),
            Constant::U32("GP_TASK_COMM", layout.comm),
            Constant::U32("GP_TASK_CPU", layout.cpu),
        ]);
        if let Some(list) = layout.trace_holdout_list {
            constants.push(Constant::U32("GP_TASK_TRACE_HOLDOUT_LIST", list));
        }
        if let Some(flag) = layout.holdout_flag {
            constants.extend([
                Constant::U32("GP_TASK_RCU_TASKS_HOLDOUT", flag),
                Constant::MaxEntries("TASKS_HOLDOUT_SAMPLED", MAX_TASKS_HOLDOUTS_SAMPLED),
            ]);
        }
    }
    constants
}

/// A ring record as the grace-period event it is, if it is long enough for one.
pub fn decode(record: &[u8]) -> Option<GpEvent> {
    rcutrace_common::latency::read_record(record)
}

/// Fails if `malformed` records could not be decoded: the eBPF object and this loader then
/// disagree, and nothing assembled from the rest can be trusted.
pub fn refuse_malformed(malformed: u64) -> Result<()> {
    if malformed > 0 {
        anyhow::bail!(
            "{malformed} records in the event buffer were not grace-period events \
             (rcutrace's eBPF object and loader disagree)"
        );
    }
    Ok(())
}

/// What the programs keep of the expedited grace periods.
pub fn expedited_state(tracer: &Tracer) -> Result<ExpeditedState> {
    let slots = tracer.array_entries::<u64>("EXPEDITED_STATE", EXPEDITED_SLOTS)?;
    let slot = |i: u32| slots.get(i as usize).copied().unwrap_or(0);
    Ok(ExpeditedState {
        since_ns: slot(EXPEDITED_SINCE),
        last_start_ns: slot(EXPEDITED_LAST_START),
        last_end_ns: slot(EXPEDITED_LAST_END),
    })
}

/// The grace period waiting for quiescent states now, as the programs keep it.
pub struct Waiting {
    pub gp_seq: u64,
    pub age: Duration,
    /// Online CPUs that have not reported a quiescent state for it.
    pub holdout_cpus: u64,
}

/// The grace period in progress, if one is waiting for quiescent states.
pub fn grace_period_now(tracer: &Tracer, online: &[u32]) -> Result<Option<Waiting>> {
    let Some(state) = tracer.array_entries::<GpState>("GP_STATE", 1)?.pop() else {
        return Ok(None);
    };
    if state.waiting_since_ns == 0 {
        return Ok(None);
    }
    let cpus: Vec<CpuState> =
        tracer.array_entries("CPU_STATE", online.iter().max().map_or(0, |m| m + 1))?;
    log::debug!("grace period in progress: {state:?}; per CPU: {cpus:?}");
    let holdout_cpus = online
        .iter()
        .filter(|&&cpu| {
            cpus.get(cpu as usize)
                .is_some_and(|c| c.reported_gp_seq != state.gp_seq)
        })
        .count() as u64;
    Ok(Some(Waiting {
        gp_seq: state.gp_seq,
        age: Duration::from_nanos(kernel::monotonic_ns().saturating_sub(state.waiting_since_ns)),
        holdout_cpus,
    }))
}
