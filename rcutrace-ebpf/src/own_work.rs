//! rcutrace's own doing, done by other threads (see `rcutrace_common::own_work`): the
//! tasks-RCU callbacks rcutrace queued, the grace periods that only they need, and the
//! kthreads' calls on their behalf. Every program here is a kprobe: a trampoline on these
//! functions would itself queue the tasks-RCU work it is there to follow.

use aya_ebpf::{
    EbpfContext,
    helpers::bpf_probe_read_kernel,
    macros::map,
    maps::{Array, LruHashMap, PerCpuArray},
    programs::ProbeContext,
};
use rcutrace_common::{latency::TASKS_RCU_KTHREADS, own_work::*};

use crate::window;

/// The tasks-RCU kthreads' pids (tasks, rude, trace; 0 where the kernel has fewer).
#[unsafe(no_mangle)]
static TASKS_KTHREAD_PIDS: [u32; TASKS_RCU_KTHREADS] = [0; TASKS_RCU_KTHREADS];
/// Byte offsets from the kernel's BTF: `rcu_segcblist.tails`, `rcu_tasks_percpu.cblist` and
/// `.rtpp`, `rcu_tasks.kthread_ptr`, `task_struct.stack`; 1 once they are set.
#[unsafe(no_mangle)]
static SEGCBLIST_TAILS: u32 = 0;
#[unsafe(no_mangle)]
static PERCPU_CBLIST: u32 = 0;
#[unsafe(no_mangle)]
static PERCPU_RTPP: u32 = 0;
#[unsafe(no_mangle)]
static TASKS_KTHREAD_PTR: u32 = 0;
#[unsafe(no_mangle)]
static TASK_STACK: u32 = 0;
#[unsafe(no_mangle)]
static OWN_WORK_LAYOUT: u32 = 0;

/// x86-64's kernel stack size (without KASAN): a deeper frame is taken for an interrupt's,
/// whose calls are then counted.
const THREAD_SIZE: u64 = 16384;

/// Heads rcutrace queued (directly or through its callbacks); the value is unused.
#[map]
static OWN_HEADS: LruHashMap<u64, u8> = LruHashMap::with_max_entries(MAX_OWN_HEADS, 0);
#[map]
static KTHREADS: Array<Kthread> = Array::with_max_entries(TASKS_RCU_KTHREADS as u32, 0);
#[map]
static OWN_STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(OWN_STAT_SLOTS, 0);

// The segments of a `struct rcu_segcblist`, as the kernel numbers its `tails`.
const RCU_DONE_TAIL: u64 = 0;
const RCU_WAIT_TAIL: u64 = 1;

#[inline(always)]
fn bump(slot: u32) {
    if let Some(count) = OWN_STATS.get_ptr_mut(slot) {
        unsafe { crate::atomic::add(count, 1) };
    }
}

/// Which tasks-RCU kthread `tid` is, if any.
#[inline(always)]
fn kthread(tid: u32) -> Option<u32> {
    let pids = window::constant(&TASKS_KTHREAD_PIDS);
    if tid == 0 {
        return None;
    }
    (0..TASKS_RCU_KTHREADS as u32).find(|&i| pids[i as usize] == tid)
}

#[inline(always)]
fn read(address: u64) -> u64 {
    unsafe { bpf_probe_read_kernel(address as *const u64) }.unwrap_or(0)
}

#[inline(always)]
fn is_own_head(head: u64) -> bool {
    head != 0 && unsafe { OWN_HEADS.get(&head) }.is_some()
}

/// Whether thread `tid`, calling a counted or timed function now, does it for rcutrace: a
/// tasks-RCU kthread working on a grace period only rcutrace's callbacks need. Counted as
/// left out when it does.
#[inline(always)]
pub fn on_behalf(tid: u32, ctx: *mut core::ffi::c_void) -> bool {
    let own = in_own_grace_period(tid, ctx);
    if own {
        bump(STAT_CALLS_LEFT_OUT);
    }
    own
}

#[inline(always)]
fn in_own_grace_period(tid: u32, ctx: *mut core::ffi::c_void) -> bool {
    kthread(tid)
        .and_then(|i| KTHREADS.get(i))
        .is_some_and(|k| k.own != 0)
        && on_task_stack(ctx)
}

/// Whether the probed call runs on the current task's own stack, not on an interrupt's (an
/// interrupt or softirq that lands on a kthread doing rcutrace's grace period does the
/// system's work, on the CPU's interrupt stack). The program's context (the registers a
/// kprobe saved, a trampoline's frame) lies on the probed call's stack; the program's own
/// frame may not (6.13+ give tracing programs stacks of their own).
#[inline(always)]
fn on_task_stack(ctx: *mut core::ffi::c_void) -> bool {
    let here = core::hint::black_box(ctx) as u64;
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() };
    let stack = read(task + u64::from(window::constant(&TASK_STACK)));
    stack != 0 && here >= stack && here < stack + THREAD_SIZE
}

/// Whether `list` is the callback list of the current task's tasks-RCU flavour (its
/// `rcu_tasks_percpu` names a flavour whose kthread is the current task), not one of the
/// normal RCU lists that a softirq advances on a tasks-RCU kthread's time.
#[inline(always)]
fn tasks_list_of_current(list: u64) -> bool {
    if window::constant(&OWN_WORK_LAYOUT) == 0 || list == 0 {
        return false;
    }
    let percpu = list - u64::from(window::constant(&PERCPU_CBLIST));
    let flavour = read(percpu + u64::from(window::constant(&PERCPU_RTPP)));
    if flavour == 0 {
        return false;
    }
    let kthread = read(flavour + u64::from(window::constant(&TASKS_KTHREAD_PTR)));
    kthread != 0 && kthread == unsafe { aya_ebpf::helpers::bpf_get_current_task() }
}

/// Whether a counted call that queues `head` is rcutrace's doing (one of its callbacks' chains
/// going on, e.g. `kfree_rcu()` of a trampoline image in a kworker). Queued through normal
/// RCU (`normal`), the chain ends there: the head is forgotten, since after that grace
/// period its object is freed and the address may come back for someone else.
#[inline(always)]
pub fn own_head(head: u64, normal: bool) -> bool {
    if !is_own_head(head) {
        return false;
    }
    if normal {
        let _ = OWN_HEADS.remove(&head);
    }
    bump(STAT_CALLS_LEFT_OUT);
    true
}

/// A tasks-RCU (or SRCU) request of `head`: rcutrace's if its own process makes it, if the head
/// is already rcutrace's (a callback re-queueing the head it was given), or if a kthread doing
/// rcutrace's grace period makes it (one of rcutrace's callbacks queueing more).
#[inline(always)]
fn request(head: u64, ctx: *mut core::ffi::c_void) {
    if head == 0 {
        return;
    }
    let (_, tid, is_self) = window::current();
    if is_self || is_own_head(head) || in_own_grace_period(tid, ctx) {
        let _ = OWN_HEADS.insert(&head, &1, 0);
    }
}

// call_rcu_tasks(head, func), call_rcu_tasks_trace(head, func).
program! {
    kprobe fn own_work_request_kprobe(ctx: ProbeContext) -> u32 {
        request(ctx.arg(0).unwrap_or(0), ctx.as_ptr());
        0
    }
}

// call_srcu(ssp, head, func): 7.3 made tasks-trace RCU an SRCU flavour, whose callbacks (a
// trampoline image's) queue the same head to tasks RCU from a kworker.
program! {
    kprobe fn own_work_srcu_request_kprobe(ctx: ProbeContext) -> u32 {
        request(ctx.arg(1).unwrap_or(0), ctx.as_ptr());
        0
    }
}

// rcu_segcblist_accelerate(rsclp, seq): a tasks-RCU kthread calls it on its callback list
// just before a grace period (deciding what that grace period serves) and after invoking a
// grace period's callbacks. Either way, any grace period it did for rcutrace is over.
program! {
    kprobe fn own_work_list_kprobe(ctx: ProbeContext) -> u32 {
        let (_, tid, _) = window::current();
        let Some(i) = kthread(tid) else {
            return 0;
        };
        let list: u64 = ctx.arg(0).unwrap_or(0);
        if !tasks_list_of_current(list) {
            return 0;
        }
        if let Some(k) = KTHREADS.get_ptr_mut(i) {
            let k = unsafe { &mut *k };
            if k.cblist != 0 && k.cblist != list {
                k.several_lists = 1;
            }
            k.cblist = list;
            k.own = 0;
        }
        0
    }
}

// rcu_tasks_wait_gp(rtp), rcu_tasks_rude_wait_gp(rtp): a grace period begins; the callbacks
// it serves are the list's wait segment, fixed by now (new ones go behind it).
program! {
    kprobe fn own_work_grace_period_kprobe(_ctx: ProbeContext) -> u32 {
        let (_, tid, _) = window::current();
        let Some(i) = kthread(tid) else {
            return 0;
        };
        let Some(k) = KTHREADS.get_ptr_mut(i) else {
            return 0;
        };
        let k = unsafe { &mut *k };
        k.own = 0;
        if k.cblist == 0 || k.several_lists != 0 {
            bump(STAT_UNKNOWN_GRACE_PERIODS);
            return 0;
        }
        let tails = k.cblist + u64::from(window::constant(&SEGCBLIST_TAILS));
        let end = read(tails + 8 * RCU_WAIT_TAIL);
        // The `next` slot before the first waiting callback (`rcu_head.next` is at offset 0,
        // so a head's address is also that of its `next`).
        let mut cursor = read(tails + 8 * RCU_DONE_TAIL);
        // Stops at the first callback that is not rcutrace's: one path per length, which the
        // verifier can follow (counting both kinds would fork it at every step).
        let mut own = 0u32;
        let mut foreign = false;
        for _ in 0..MAX_BATCH {
            if cursor == end {
                break;
            }
            let head = read(cursor);
            if !is_own_head(head) {
                foreign = true;
                break;
            }
            own += 1;
            cursor = head;
        }
        if foreign {
            return 0;
        }
        if cursor != end {
            bump(STAT_UNKNOWN_GRACE_PERIODS);
        } else if own > 0 {
            k.own = 1;
            bump(STAT_OWN_GRACE_PERIODS);
        }
        0
    }
}
