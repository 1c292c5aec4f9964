//! `rcutrace gp --flavor tasks`: each tasks-RCU grace period's bounds. A flavour's kthread
//! runs one grace period per call of its wait function (`rtp->gp_func`): `rcu_tasks_wait_gp()`
//! for classic tasks RCU (and tasks-trace RCU before 7.0), `rcu_tasks_rude_wait_gp()` for the
//! rude flavour. Kprobes only: a trampoline's attach and detach themselves wait for these
//! grace periods.

use aya_ebpf::{
    macros::map,
    maps::HashMap,
    programs::{ProbeContext, RetProbeContext},
};
use rcutrace_common::gp::{EVENT_TASKS_END, EVENT_TASKS_START, GP_LOST_EVENTS};

use super::{lose, send, sending};
use crate::window;

/// The flavour (`struct rcu_tasks *`) each kthread is running a grace period of, until its
/// wait function returns; sized at load time.
#[map]
static TASKS_WAITING: HashMap<u32, u64> = HashMap::with_max_entries(1, 0);

#[inline(always)]
fn on_start(ctx: &ProbeContext) {
    if sending()
        && let Some(flavour) = ctx.arg::<u64>(0)
    {
        let (_, tid, _) = window::current();
        // Without it the end would go unseen: counted as lost.
        if TASKS_WAITING.insert(&tid, &flavour, 0).is_err() {
            lose(GP_LOST_EVENTS);
            return;
        }
        send(ctx, EVENT_TASKS_START, flavour, 0, false);
    }
}

#[inline(always)]
fn on_end(ctx: &RetProbeContext) {
    let (_, tid, _) = window::current();
    let Some(&flavour) = (unsafe { TASKS_WAITING.get(&tid) }) else {
        return;
    };
    let _ = TASKS_WAITING.remove(&tid);
    if sending() {
        send(ctx, EVENT_TASKS_END, flavour, 0, false);
    }
}

program! {
    kprobe fn gp_tasks_kprobe(ctx: ProbeContext) -> u32 {
        on_start(&ctx);
        0
    }
}

program! {
    kretprobe fn gp_tasks_kretprobe(ctx: RetProbeContext) -> u32 {
        on_end(&ctx);
        0
    }
}

program! {
    kprobe fn gp_tasks_rude_kprobe(ctx: ProbeContext) -> u32 {
        on_start(&ctx);
        0
    }
}

program! {
    kretprobe fn gp_tasks_rude_kretprobe(ctx: RetProbeContext) -> u32 {
        on_end(&ctx);
        0
    }
}
