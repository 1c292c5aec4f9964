//! `srlat --stages`: the hooks and load-time constants that take the timed calls apart, beside
//! the timed ones in the same window, and the joiner their records feed (`model::stages`).

use anyhow::Result;
use rcutrace_common::attribution::NO_STACK;

use crate::{
    kernel::rcu_state,
    model::stages::{Joiner, Staged, StagedFunction},
    trace::{
        probes::{GRACE_PERIOD_BOUNDS, Probe, STAGES},
        tracer::Constant,
    },
};

/// Where the kernel says whether it wakes `synchronize_rcu()` callers from the grace-period
/// kthread (Rezki's path) instead of by a `wakeme_after_rcu()` callback.
const WAKE_FROM_GP: &str = "/sys/module/rcutree/parameters/rcu_normal_wake_from_gp";

/// What taking calls apart adds to a run.
pub struct Plan {
    /// To attach before the timed probes, so that every call timed has its entry seen.
    pub probes: Vec<Probe>,
    /// Of those, the ones without which no call could be taken apart.
    pub needed: Vec<Probe>,
    pub constants: Vec<Constant>,
    pub joiner: Joiner,
}

/// The plan for `functions`, each `synchronize_rcu` or `synchronize_rcu_expedited`.
pub fn plan(functions: Vec<StagedFunction>) -> Result<Plan> {
    let layout = rcu_state::stages_layout()?;
    let normal = functions.iter().any(|f| f.staged == Staged::SynchronizeRcu);
    let mut needed = Vec::new();
    if normal {
        needed.extend(GRACE_PERIOD_BOUNDS);
    }
    // synchronize_rcu() goes the expedited way with rcu_expedited set, so both need these.
    needed.extend(STAGES.expedited_needed());
    if normal {
        needed.push(STAGES.sync);
    }
    let mut optional = vec![STAGES.exp_work, STAGES.exp_ipi];
    if normal && layout.wakeme_after_rcu.is_some() {
        optional.push(STAGES.wakeme);
        for queue in [STAGES.queue_call_rcu, STAGES.queue_call_rcu_hurry] {
            if layout.queueing_functions.contains(&queue.function) {
                optional.push(queue);
            }
        }
    }
    let mut probes = optional;
    probes.extend(needed.iter().copied());
    let state = layout.rcu_state;
    let constants = vec![
        // gp's programs at the grace periods' bounds read the counter there, and send their
        // events.
        Constant::U32("GP_EVENTS", 1),
        Constant::U64("RCU_STATE_ADDRESS", state),
        Constant::U32("RCU_STATE_GP_SEQ", layout.gp_seq),
        Constant::U64("STAGES_GP_SEQ_ADDRESS", state + u64::from(layout.gp_seq)),
        Constant::U64(
            "STAGES_EXP_SEQ_ADDRESS",
            state + u64::from(layout.expedited_sequence),
        ),
        // No function lives at NO_STACK's address (0): nothing matches without the symbol.
        Constant::U64(
            "WAKEME_AFTER_RCU",
            layout.wakeme_after_rcu.unwrap_or(NO_STACK),
        ),
    ];
    Ok(Plan {
        probes,
        needed,
        constants,
        joiner: Joiner::new(functions, wake_from_gp()),
    })
}

/// The kernel's `rcu_normal_wake_from_gp`; `None` where it has no such parameter.
fn wake_from_gp() -> Option<bool> {
    let text = std::fs::read_to_string(WAKE_FROM_GP).ok()?;
    Some(matches!(text.trim(), "1" | "Y" | "y"))
}
