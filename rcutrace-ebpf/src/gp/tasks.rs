//! `rcutrace gp --flavor tasks`: each tasks-RCU grace period's bounds. A flavour's kthread
//! runs one grace period per call of its wait function (`rtp->gp_func`): `rcu_tasks_wait_gp()`
//! for classic tasks RCU (and tasks-trace RCU before 7.0), `rcu_tasks_rude_wait_gp()` for the
//! rude flavour. Kprobes only: a trampoline's attach and detach themselves wait for these
//! grace periods.
//!
//! Classic tasks RCU lists the tasks it waits for (each on `task_struct.rcu_tasks_holdout_list`)
//! and passes over that list until it is empty, 100 ms to 1 s apart: at each pass's start the
//! tasks still listed are sent, so the last pass of a grace period names its last holdouts.
//! Tasks-trace RCU before 7.0 does the same over `task_struct.trc_holdout_list`, with the tasks
//! whose read-side critical sections it waits for.
//!
//! The wait function calls its flavour's phase steps through pointers, in a fixed order
//! (`pregp_func`, the task-list scan, `postscan_func`, the passes, `postgp_func`), so each
//! step has an out-of-line copy whose entry or return marks where one phase ends and the
//! next begins; the rude flavour has none.
//!
//! A holdout's kernel stack is sampled at the tick that interrupts it while classic tasks RCU
//! waits for it (`task_struct.rcu_tasks_holdout`), at most every 100 ms a task: a busy
//! holdout is seen where it is busy. One that is preempted or asleep is not sampled.

use aya_ebpf::helpers::{bpf_get_current_comm, bpf_get_current_task, bpf_ktime_get_ns};
use aya_ebpf::{
    EbpfContext,
    macros::map,
    maps::{HashMap, LruHashMap},
    programs::{ProbeContext, RetProbeContext},
};
use rcutrace_common::gp::{
    EVENT_TASKS_END, EVENT_TASKS_HOLDOUT, EVENT_TASKS_HOLDOUT_SAMPLE, EVENT_TASKS_PASS,
    EVENT_TASKS_PHASE, EVENT_TASKS_START, GP_LOST_EVENTS, MAX_TASKS_HOLDOUTS_NAMED,
    TASKS_HOLDOUT_SAMPLE_EVERY_NS, TASKS_PHASE_HOLDOUTS, TASKS_PHASE_POST_GP,
    TASKS_PHASE_POST_SCAN, TASKS_PHASE_SCAN_TASKLIST,
};

use super::{lose, read, send, send_with, sending};
use crate::window;

/// Byte offsets in `task_struct` of the holdout list's node, the pid, the comm and the CPU
/// the task last ran on, from the kernel BTF.
#[unsafe(no_mangle)]
static GP_TASK_HOLDOUT_LIST: u32 = 0;
/// The same of tasks-trace RCU's holdout list (`task_struct.trc_holdout_list`, before 7.0).
#[unsafe(no_mangle)]
static GP_TASK_TRACE_HOLDOUT_LIST: u32 = 0;
#[unsafe(no_mangle)]
static GP_TASK_PID: u32 = 0;
#[unsafe(no_mangle)]
static GP_TASK_COMM: u32 = 0;
#[unsafe(no_mangle)]
static GP_TASK_CPU: u32 = 0;
/// `task_struct.rcu_tasks_holdout` (a byte): set while classic tasks RCU waits for the task.
#[unsafe(no_mangle)]
static GP_TASK_RCU_TASKS_HOLDOUT: u32 = 0;

/// When each holdout task was last sampled, by thread id; sized at load time.
#[map]
static TASKS_HOLDOUT_SAMPLED: LruHashMap<u32, u64> = LruHashMap::with_max_entries(1, 0);

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

/// Sends the tasks on the holdout list `holdouts` (a `struct list_head *`, the first argument)
/// of the grace period the current kthread runs, each on that list by its node at
/// `list_offset` in the task, then the pass.
#[inline(always)]
fn on_holdout_pass(ctx: &ProbeContext, list_offset: u64) {
    let (_, tid, _) = window::current();
    // A grace period begun before tracing has no flavour here: its passes go unsent.
    let (true, Some(&flavour), Some(head)) = (
        sending(),
        unsafe { TASKS_WAITING.get(&tid) },
        ctx.arg::<u64>(0),
    ) else {
        return;
    };
    let kthread = bpf_get_current_comm().unwrap_or_default();
    let Some(mut node) = read::<u64>(head) else {
        return;
    };
    for _ in 0..MAX_TASKS_HOLDOUTS_NAMED {
        if node == head || node == 0 {
            break;
        }
        let task = node - list_offset;
        let (Some(pid), Some(comm), Some(cpu), Some(next)) = (
            read::<u32>(task + u64::from(window::constant(&GP_TASK_PID))),
            read::<[u8; 16]>(task + u64::from(window::constant(&GP_TASK_COMM))),
            read::<u32>(task + u64::from(window::constant(&GP_TASK_CPU))),
            read::<u64>(node),
        ) else {
            return;
        };
        let now = unsafe { bpf_ktime_get_ns() };
        let extra = u64::from(pid) << 32 | u64::from(cpu);
        send_with(
            ctx,
            now,
            EVENT_TASKS_HOLDOUT,
            flavour,
            extra,
            false,
            kthread,
            comm,
        );
        node = next;
    }
    let more = u64::from(node != head && node != 0);
    send(ctx, EVENT_TASKS_PASS, flavour, more, false);
}

program! {
    kprobe fn gp_tasks_holdouts_kprobe(ctx: ProbeContext) -> u32 {
        // check_all_holdout_tasks(hop, needreport, firstreport): a pass begins.
        on_holdout_pass(&ctx, u64::from(window::constant(&GP_TASK_HOLDOUT_LIST)));
        0
    }
}

program! {
    kprobe fn gp_tasks_trace_holdouts_kprobe(ctx: ProbeContext) -> u32 {
        // check_all_holdout_tasks_trace(hop, needreport, firstreport): a pass of tasks-trace
        // RCU before 7.0, over the tasks whose readers it waits for.
        on_holdout_pass(&ctx, u64::from(window::constant(&GP_TASK_TRACE_HOLDOUT_LIST)));
        0
    }
}

/// Sends that the grace period the current kthread runs passes to `phase`.
#[inline(always)]
fn on_phase<C: EbpfContext>(ctx: &C, phase: u64) {
    let (_, tid, _) = window::current();
    if sending()
        && let Some(&flavour) = unsafe { TASKS_WAITING.get(&tid) }
    {
        send(ctx, EVENT_TASKS_PHASE, flavour, phase, false);
    }
}

program! {
    kretprobe fn gp_tasks_pregp_kretprobe(ctx: RetProbeContext) -> u32 {
        on_phase(&ctx, TASKS_PHASE_SCAN_TASKLIST);
        0
    }
}

program! {
    kprobe fn gp_tasks_postscan_kprobe(ctx: ProbeContext) -> u32 {
        on_phase(&ctx, TASKS_PHASE_POST_SCAN);
        0
    }
}

program! {
    kretprobe fn gp_tasks_postscan_kretprobe(ctx: RetProbeContext) -> u32 {
        on_phase(&ctx, TASKS_PHASE_HOLDOUTS);
        0
    }
}

program! {
    kprobe fn gp_tasks_postgp_kprobe(ctx: ProbeContext) -> u32 {
        on_phase(&ctx, TASKS_PHASE_POST_GP);
        0
    }
}

program! {
    kprobe fn gp_tasks_tick_kprobe(ctx: ProbeContext) -> u32 {
        // rcu_sched_clock_irq(int user): a tick. Most find no holdout: one read, then out. A
        // tick in user mode is itself a tasks-RCU quiescent state: nothing there to see.
        if !sending() || ctx.arg::<u64>(0).unwrap_or(0) & 0xffff_ffff != 0 {
            return 0;
        }
        let task = unsafe { bpf_get_current_task() };
        let offset = u64::from(window::constant(&GP_TASK_RCU_TASKS_HOLDOUT));
        if read::<u8>(task + offset).is_none_or(|holdout| holdout == 0) {
            return 0;
        }
        let (_, tid, _) = window::current();
        let now = unsafe { bpf_ktime_get_ns() };
        if let Some(&last) = unsafe { TASKS_HOLDOUT_SAMPLED.get(&tid) }
            && now.wrapping_sub(last) < TASKS_HOLDOUT_SAMPLE_EVERY_NS
        {
            return 0;
        }
        let _ = TASKS_HOLDOUT_SAMPLED.insert(&tid, &now, 0);
        send(&ctx, EVENT_TASKS_HOLDOUT_SAMPLE, 0, 0, true);
        0
    }
}
