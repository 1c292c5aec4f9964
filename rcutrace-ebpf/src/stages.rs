//! `srlat --stages`: what a timed `synchronize_rcu()` / `synchronize_rcu_expedited()` call
//! waited for. The caller's side says which grace period it needs (the sequence counter at
//! its entry), which callback will wake it, and where its expedited request lies; the
//! expedited worker's side says when each expedited grace period selected CPUs, waited for
//! their reports and woke its waiters. The normal grace periods come from `gp`'s programs.
//! User space joins them (`rcutrace::model::stages`).
//!
//! All kprobes: these run in RCU's core, its workers and IPI handlers, and the entries need
//! the caller's registers (its stack pointer).

use aya_ebpf::{
    helpers::{
        bpf_get_current_comm, bpf_get_smp_processor_id, bpf_ktime_get_ns, bpf_probe_read_kernel,
    },
    programs::{ProbeContext, RetProbeContext},
};
use rcutrace_common::{
    attribution::NO_STACK,
    gp::{GP_LOST_EVENTS, GpEvent},
    stages::*,
};

use crate::{gp, latency, window};

/// Addresses of `rcu_state.gp_seq` and `rcu_state.expedited_sequence`, and of the function
/// `wakeme_after_rcu()` (kallsyms and BTF, in user space).
#[unsafe(no_mangle)]
static STAGES_GP_SEQ_ADDRESS: u64 = crate::window::UNSET_U64 + 10;
#[unsafe(no_mangle)]
static STAGES_EXP_SEQ_ADDRESS: u64 = crate::window::UNSET_U64 + 11;
#[unsafe(no_mangle)]
static WAKEME_AFTER_RCU: u64 = crate::window::UNSET_U64 + 12;

#[inline(always)]
fn read_seq(address: u64) -> u64 {
    // An unreadable counter reads 0: user space then finds no grace period to join and says
    // the call was not taken apart.
    unsafe { bpf_probe_read_kernel(address as *const u64) }.unwrap_or(0)
}

/// Sends one stage event about the current task.
#[inline(always)]
fn send(kind: u32, value: u64, extra: u64) {
    let (tgid, pid, _) = window::current();
    let event = GpEvent {
        at_ns: unsafe { bpf_ktime_get_ns() },
        kind,
        cpu: unsafe { bpf_get_smp_processor_id() },
        tgid,
        pid,
        value,
        extra,
        stack: NO_STACK,
        comm: bpf_get_current_comm().unwrap_or_default(),
        text: [0; 16],
    };
    // A lost event leaves its call without stages, which user space counts; the event itself
    // is counted where gp's programs count theirs, which user space reports with the stages.
    if !latency::send(&event) {
        gp::lose(GP_LOST_EVENTS);
    }
}

/// Whether the current thread's calls are the traced ones.
#[inline(always)]
fn traced_caller() -> bool {
    let (tgid, tid, is_self) = window::current();
    window::running() && latency::wanted(tgid, tid, is_self)
}

program! {
    kprobe fn stages_sync_kprobe(_ctx: ProbeContext) -> u32 {
        if traced_caller() {
            send(EVENT_SYNC, read_seq(window::constant(&STAGES_GP_SEQ_ADDRESS)), 0);
        }
        0
    }
}

program! {
    kprobe fn stages_sync_expedited_kprobe(ctx: ProbeContext) -> u32 {
        if traced_caller() {
            let sp = unsafe { (*ctx.regs).rsp };
            send(
                EVENT_SYNC_EXPEDITED,
                read_seq(window::constant(&STAGES_EXP_SEQ_ADDRESS)),
                sp,
            );
        }
        0
    }
}

/// `call_rcu(head, func)` / `call_rcu_hurry(head, func)`: only the waker callback of a
/// traced caller is of interest.
#[inline(always)]
fn on_queue(ctx: &ProbeContext) {
    let (Some(head), Some(func)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1)) else {
        return;
    };
    if func == window::constant(&WAKEME_AFTER_RCU) && traced_caller() {
        send(EVENT_WAKEME_QUEUED, head, 0);
    }
}

program! {
    kprobe fn stages_queue_call_rcu_kprobe(ctx: ProbeContext) -> u32 {
        on_queue(&ctx);
        0
    }
}

program! {
    kprobe fn stages_queue_call_rcu_hurry_kprobe(ctx: ProbeContext) -> u32 {
        on_queue(&ctx);
        0
    }
}

/// An event of RCU's own machinery (callback invocation, the expedited worker, IPI handlers),
/// in whatever context it runs and for whichever caller: user space matches it up.
#[inline(always)]
fn on_worker_event(kind: u32, value: u64) {
    if window::running() {
        send(kind, value, 0);
    }
}

program! {
    kprobe fn stages_wakeme_kprobe(ctx: ProbeContext) -> u32 {
        on_worker_event(EVENT_WAKEME_INVOKED, ctx.arg::<u64>(0).unwrap_or(0));
        0
    }
}

program! {
    kprobe fn stages_exp_work_kprobe(ctx: ProbeContext) -> u32 {
        on_worker_event(EVENT_EXP_WORK, ctx.arg::<u64>(0).unwrap_or(0));
        0
    }
}

program! {
    kprobe fn stages_exp_select_kprobe(_ctx: ProbeContext) -> u32 {
        on_worker_event(EVENT_EXP_SELECT, 0);
        0
    }
}

program! {
    kretprobe fn stages_exp_select_kretprobe(_ctx: RetProbeContext) -> u32 {
        on_worker_event(EVENT_EXP_SELECT_END, 0);
        0
    }
}

program! {
    kprobe fn stages_exp_ipi_kprobe(_ctx: ProbeContext) -> u32 {
        on_worker_event(EVENT_EXP_IPI, 0);
        0
    }
}

program! {
    kprobe fn stages_exp_wait_kprobe(ctx: ProbeContext) -> u32 {
        on_worker_event(EVENT_EXP_WAIT, ctx.arg::<u64>(0).unwrap_or(0));
        0
    }
}

program! {
    kretprobe fn stages_exp_wait_kretprobe(_ctx: RetProbeContext) -> u32 {
        on_worker_event(EVENT_EXP_WAIT_END, 0);
        0
    }
}
