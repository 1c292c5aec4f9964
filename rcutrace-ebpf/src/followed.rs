//! `rcutrace run`: the command's process tree (every thread forked from it, followed from the
//! scheduler's fork tracepoint), the work items its threads queue (and the work those queue
//! in turn) while a kworker runs them, and the time the command's threads spend off the CPU.
//! The timed waits (`latency`) ask `origin` whose doing a call is, from the maps kept here.
//!
//! Tracepoint fields are read at offsets user space took from each tracepoint's format file.

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::map,
    maps::{HashMap, PerCpuArray},
    programs::TracePointContext,
};
use rcutrace_common::followed::*;

use crate::{
    origin::{TREE, WORKING, command_thread, origin},
    window,
};

/// Offsets of the fields read, in each tracepoint's record.
#[unsafe(no_mangle)]
static FORK_PARENT_PID: u32 = 0;
#[unsafe(no_mangle)]
static FORK_CHILD_PID: u32 = 0;
#[unsafe(no_mangle)]
static FREE_PID: u32 = 0;
#[unsafe(no_mangle)]
static SWITCH_PREV_PID: u32 = 0;
#[unsafe(no_mangle)]
static SWITCH_PREV_STATE: u32 = 0;
#[unsafe(no_mangle)]
static SWITCH_NEXT_PID: u32 = 0;
#[unsafe(no_mangle)]
static QUEUE_WORK_WORK: u32 = 0;
#[unsafe(no_mangle)]
static EXECUTE_START_WORK: u32 = 0;
#[unsafe(no_mangle)]
static EXECUTE_END_WORK: u32 = 0;

// Declared with one entry: `run` sizes them at load time (`origin`'s maps too).
/// Work items queued by the tree or by caused work, not yet begun, by address.
#[map]
static CAUSED: HashMap<u64, u8> = HashMap::with_max_entries(1, 0);
/// The command's threads now switched out, by thread id.
#[map]
static OFF_CPU: HashMap<u32, SwitchedOut> = HashMap::with_max_entries(1, 0);
#[map]
static FOLLOW_COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(FOLLOW_SLOTS, 0);

#[inline(always)]
fn add(slot: u32, amount: u64) {
    if let Some(counter) = FOLLOW_COUNTS.get_ptr_mut(slot) {
        // Per CPU, but a tracepoint program can be preempted on a preemptible kernel.
        unsafe { crate::atomic::add(counter, amount) };
    }
}

#[inline(always)]
fn field<T>(ctx: &TracePointContext, offset: &u32) -> Option<T> {
    unsafe { ctx.read_at::<T>(window::constant(offset) as usize) }.ok()
}

program! {
    tracepoint fn followed_fork_tracepoint(ctx: TracePointContext) -> u32 {
        let (Some(parent), Some(child)) = (
            field::<u32>(&ctx, &FORK_PARENT_PID),
            field::<u32>(&ctx, &FORK_CHILD_PID),
        ) else {
            return 0;
        };
        if unsafe { TREE.get(&parent) }.is_none() {
            return 0;
        }
        if TREE.insert(&child, &TREE_COMMAND, 0).is_ok() {
            add(FOLLOW_THREADS, 1);
        } else {
            add(FOLLOW_LOST_THREADS, 1);
        }
        0
    }
}

// A thread leaves the tree when its task is freed, not when it exits: its exit still does
// the command's work (dropping the last reference to a network namespace queues its cleanup).
program! {
    tracepoint fn followed_free_tracepoint(ctx: TracePointContext) -> u32 {
        if let Some(pid) = field::<u32>(&ctx, &FREE_PID) {
            let _ = TREE.remove(&pid);
            let _ = OFF_CPU.remove(&pid);
        }
        0
    }
}

program! {
    tracepoint fn followed_switch_tracepoint(ctx: TracePointContext) -> u32 {
        // Every context switch of the machine comes here: anything beyond the two lookups is
        // done for the command's threads only.
        if let Some(prev) = field::<u32>(&ctx, &SWITCH_PREV_PID)
            && command_thread(prev)
            && let Some(state) = field::<u64>(&ctx, &SWITCH_PREV_STATE)
        {
            let out = SwitchedOut {
                since_ns: unsafe { bpf_ktime_get_ns() },
                runnable: runnable(state) as u32,
                in_wait: crate::latency::in_wait(prev) as u32,
            };
            // A full map leaves this stretch uncounted: its switch back in says so.
            let _ = OFF_CPU.insert(&prev, &out, 0);
        }
        let Some(next) = field::<u32>(&ctx, &SWITCH_NEXT_PID) else {
            return 0;
        };
        if !command_thread(next) {
            return 0;
        }
        match unsafe { OFF_CPU.get(&next) }.copied() {
            Some(out) => {
                let _ = OFF_CPU.remove(&next);
                let off = unsafe { bpf_ktime_get_ns() }.saturating_sub(out.since_ns);
                let (slot, in_wait_slot) = if out.runnable != 0 {
                    (FOLLOW_OFF_CPU_RUNNABLE_NS, FOLLOW_IN_WAITS_RUNNABLE_NS)
                } else {
                    (FOLLOW_OFF_CPU_ASLEEP_NS, FOLLOW_IN_WAITS_ASLEEP_NS)
                };
                add(slot, off);
                if out.in_wait != 0 {
                    add(in_wait_slot, off);
                }
            }
            // A new thread's first run has no switch out before it; user space counts forks
            // and takes those out of this figure.
            None => add(FOLLOW_LOST_SWITCHES, 1),
        }
        0
    }
}

// `current` here is the task that queues the work.
program! {
    tracepoint fn followed_queue_work_tracepoint(ctx: TracePointContext) -> u32 {
        let tid = window::current().1;
        if origin(tid) == ORIGIN_NONE {
            return 0;
        }
        let Some(work) = field::<u64>(&ctx, &QUEUE_WORK_WORK) else {
            return 0;
        };
        add(FOLLOW_WORK_QUEUED, 1);
        if CAUSED.insert(&work, &0, 0).is_err() {
            add(FOLLOW_LOST_WORK, 1);
        }
        0
    }
}

// Taken out of `CAUSED` as it begins, so that a work item that queues itself again is
// followed again.
program! {
    tracepoint fn followed_execute_start_tracepoint(ctx: TracePointContext) -> u32 {
        let Some(work) = field::<u64>(&ctx, &EXECUTE_START_WORK) else {
            return 0;
        };
        if CAUSED.remove(&work).is_ok() {
            let _ = WORKING.insert(&window::current().1, &0, 0);
        }
        0
    }
}

program! {
    tracepoint fn followed_execute_end_tracepoint(ctx: TracePointContext) -> u32 {
        if field::<u64>(&ctx, &EXECUTE_END_WORK).is_none() {
            return 0;
        }
        if WORKING.remove(&window::current().1).is_ok() {
            add(FOLLOW_WORK_DONE, 1);
        }
        0
    }
}
