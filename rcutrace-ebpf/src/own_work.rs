//! rcutrace's own doing, done by other threads (see `rcutrace_common::own_work`): the
//! tasks-RCU and SRCU callbacks rcutrace queued, the grace periods that only they need, and
//! the kthreads' and kworkers' calls on their behalf. Every program here is a kprobe: a
//! trampoline on these functions would itself queue the tasks-RCU work it is there to follow.

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_loop, bpf_probe_read_kernel},
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

/// Byte offsets from the kernel's BTF for SRCU's grace periods: `task_struct.flags` and
/// `.worker_private` (a kthread's `struct kthread`), `kthread.data` (a kworker's `struct
/// worker`), `worker.current_work`, `srcu_usage.work` (its `work_struct`),
/// `.srcu_ssp`, `.srcu_gp_seq` and `.srcu_size_state`, `srcu_struct.srcu_sup`,
/// `srcu_data.srcu_cblist` and `.ssp`, `rcu_segcblist.gp_seq` and the size of its elements
/// (7.3 made them a `struct rcu_gp_seq`, normal number first); 1 once they are set.
#[unsafe(no_mangle)]
static TASK_FLAGS: u32 = 0;
#[unsafe(no_mangle)]
static TASK_WORKER_PRIVATE: u32 = 0;
#[unsafe(no_mangle)]
static KTHREAD_DATA: u32 = 0;
#[unsafe(no_mangle)]
static WORKER_CURRENT_WORK: u32 = 0;
#[unsafe(no_mangle)]
static SRCU_USAGE_WORK: u32 = 0;
#[unsafe(no_mangle)]
static SRCU_USAGE_SSP: u32 = 0;
#[unsafe(no_mangle)]
static SRCU_USAGE_GP_SEQ: u32 = 0;
#[unsafe(no_mangle)]
static SRCU_USAGE_SIZE_STATE: u32 = 0;
#[unsafe(no_mangle)]
static SRCU_STRUCT_SUP: u32 = 0;
#[unsafe(no_mangle)]
static SRCU_DATA_CBLIST: u32 = 0;
#[unsafe(no_mangle)]
static SRCU_DATA_SSP: u32 = 0;
#[unsafe(no_mangle)]
static SEGCBLIST_GP_SEQ: u32 = 0;
#[unsafe(no_mangle)]
static SEGCBLIST_GP_SEQ_SIZE: u32 = 0;
#[unsafe(no_mangle)]
static SRCU_LAYOUT: u32 = 0;

/// x86-64's kernel stack size (without KASAN): a deeper frame is taken for an interrupt's,
/// whose calls are then counted.
const THREAD_SIZE: u64 = 16384;

/// Heads rcutrace queued (directly or through its callbacks); the value is unused. Declared
/// with one entry: a run with the own-work hooks sizes it (`MAX_OWN_HEADS`), and creating it
/// full-size (preallocated) for the runs without them cost their start-up.
#[map]
static OWN_HEADS: LruHashMap<u64, u8> = LruHashMap::with_max_entries(1, 0);
#[map]
static KTHREADS: Array<Kthread> = Array::with_max_entries(TASKS_RCU_KTHREADS as u32, 0);
#[map]
static OWN_STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(OWN_STAT_SLOTS, 0);

/// Per SRCU domain (`struct srcu_struct *`): the callback list (`&srcu_data.srcu_cblist`)
/// rcutrace's last request on it went to.
#[map]
static SRCU_LISTS: LruHashMap<u64, u64> = LruHashMap::with_max_entries(MAX_SRCU_DOMAINS, 0);
/// Per SRCU domain: the number its grace period in progress ends at, when that grace period
/// was found to serve rcutrace's callbacks alone.
#[map]
static SRCU_OWN: LruHashMap<u64, u64> = LruHashMap::with_max_entries(MAX_SRCU_DOMAINS, 0);
/// Per SRCU domain: the grace period someone else last polled for (no callback to see).
#[map]
static SRCU_POLLED: LruHashMap<u64, u64> = LruHashMap::with_max_entries(MAX_SRCU_DOMAINS, 0);
/// Threads that asked for one of rcutrace's heads to be queued on an SRCU domain, until the
/// queueing shows which list it went to: thread → domain.
#[map]
static SRCU_PENDING: LruHashMap<u32, u64> = LruHashMap::with_max_entries(MAX_SRCU_PENDING, 0);

// The segments of a `struct rcu_segcblist`, as the kernel numbers its `tails`.
const RCU_DONE_TAIL: u64 = 0;
const RCU_WAIT_TAIL: u64 = 1;
const RCU_NEXT_READY_TAIL: u64 = 2;

/// `task_struct.flags` of a workqueue worker.
const PF_WQ_WORKER: u32 = 0x20;
/// `srcu_usage.srcu_size_state` while every callback goes to the boot CPU's list.
const SRCU_SIZE_SMALL: u32 = 0;
/// The state bits at the bottom of a grace-period sequence number.
const RCU_SEQ_STATE_MASK: u64 = 3;

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
fn read_u32(address: u64) -> u32 {
    unsafe { bpf_probe_read_kernel(address as *const u32) }.unwrap_or(0)
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
    let own = in_own_grace_period(tid, ctx) || in_own_srcu_grace_period(ctx);
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
/// rcutrace's grace period makes it (one of rcutrace's callbacks queueing more). Says whether
/// it is rcutrace's.
#[inline(always)]
fn request(head: u64, ctx: *mut core::ffi::c_void) -> bool {
    if head == 0 {
        return false;
    }
    let (_, tid, is_self) = window::current();
    let own = is_self || is_own_head(head) || in_own_grace_period(tid, ctx);
    if own {
        let _ = OWN_HEADS.insert(&head, &1, 0);
    }
    own
}

// call_rcu_tasks(head, func), call_rcu_tasks_trace(head, func).
program! {
    kprobe fn own_work_request_kprobe(ctx: ProbeContext) -> u32 {
        let _ = request(ctx.arg(0).unwrap_or(0), ctx.as_ptr());
        0
    }
}

// call_srcu(ssp, head, func): 7.3 made tasks-trace RCU an SRCU flavour, whose callbacks (a
// trampoline image's) queue the same head to tasks RCU from a kworker.
program! {
    kprobe fn own_work_srcu_request_kprobe(ctx: ProbeContext) -> u32 {
        let _ = request(ctx.arg(1).unwrap_or(0), ctx.as_ptr());
        0
    }
}

// rcu_segcblist_accelerate(rsclp, seq): a tasks-RCU kthread calls it on its callback list
// just before a grace period (deciding what that grace period serves) and after invoking a
// grace period's callbacks. Either way, any grace period it did for rcutrace is over. SRCU
// calls it on the list it has just queued a callback on.
program! {
    kprobe fn own_work_list_kprobe(ctx: ProbeContext) -> u32 {
        let (_, tid, _) = window::current();
        let list: u64 = ctx.arg(0).unwrap_or(0);
        note_srcu_list(tid, list);
        let Some(i) = kthread(tid) else {
            return 0;
        };
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
        match walk(read(tails + 8 * RCU_DONE_TAIL), read(tails + 8 * RCU_WAIT_TAIL)) {
            Walk::Own(n) if n > 0 => {
                k.own = 1;
                bump(STAT_OWN_GRACE_PERIODS);
            }
            Walk::TooLong => bump(STAT_UNKNOWN_GRACE_PERIODS),
            _ => {}
        }
        0
    }
}

/// What a walk over the callbacks of a list's segments found.
enum Walk {
    /// Only rcutrace's: this many.
    Own(u32),
    /// One that is not rcutrace's.
    Foreign,
    /// More than the walk's bound.
    TooLong,
}

/// A walk over a list's callbacks, as `walk_step` leaves it.
#[repr(C)]
struct WalkState {
    /// The `next` slot reached.
    cursor: u64,
    end: u64,
    /// rcutrace's callbacks passed.
    own: u32,
    /// `WALKING`, or how the walk ended.
    outcome: u32,
}

const WALKING: u32 = 0;
const REACHED_END: u32 = 1;
const FOREIGN: u32 = 2;

/// One step of `walk`, as `bpf_loop` calls it: 1 stops the loop.
#[inline(never)]
extern "C" fn walk_step(_index: u32, state: *mut core::ffi::c_void) -> i64 {
    let state = unsafe { &mut *state.cast::<WalkState>() };
    if state.cursor == state.end {
        state.outcome = REACHED_END;
        return 1;
    }
    let head = read(state.cursor);
    if !is_own_head(head) {
        state.outcome = FOREIGN;
        return 1;
    }
    state.own += 1;
    state.cursor = head;
    0
}

/// The callbacks after the `next` slot `cursor` up to the slot `end` (a segment's tail:
/// `rcu_head.next` is at offset 0, so a head's address is also that of its `next`), stopping
/// at the first callback that is not rcutrace's. Through `bpf_loop`, so that the verifier
/// checks one step rather than every one of the `MAX_BATCH` (a loop the verifier follows
/// step by step took it about 50 ms per program in the emulated guests, the largest part of
/// rcutrace's start-up).
#[inline(always)]
fn walk(cursor: u64, end: u64) -> Walk {
    let mut state = WalkState {
        cursor,
        end,
        own: 0,
        outcome: WALKING,
    };
    let state_ptr: *mut WalkState = &mut state;
    unsafe {
        bpf_loop(
            MAX_BATCH,
            walk_step as *mut core::ffi::c_void,
            state_ptr.cast(),
            0,
        )
    };
    match state.outcome {
        REACHED_END => Walk::Own(state.own),
        FOREIGN => Walk::Foreign,
        _ if state.cursor == state.end => Walk::Own(state.own),
        _ => Walk::TooLong,
    }
}

/// The number a grace period in progress at `gp_seq` ends at (`rcu_seq_endval()`); none
/// while idle.
#[inline(always)]
fn grace_period_end(gp_seq: u64) -> Option<u64> {
    (gp_seq & RCU_SEQ_STATE_MASK != 0).then_some((gp_seq | RCU_SEQ_STATE_MASK).wrapping_add(1))
}

#[inline(always)]
fn srcu_gp_seq(domain: u64) -> u64 {
    let usage = read(domain + u64::from(window::constant(&SRCU_STRUCT_SUP)));
    read(usage + u64::from(window::constant(&SRCU_USAGE_GP_SEQ)))
}

/// Whether someone else polled `domain` for the grace period ending at `end` or a later one
/// (so that the grace periods up to it run for them too). The poll's number was read before
/// the kernel read its own, which may be one grace period later.
#[inline(always)]
fn polled_for(domain: u64, end: u64) -> bool {
    unsafe { SRCU_POLLED.get(&domain) }
        .is_some_and(|&polled| polled.wrapping_add(4).wrapping_sub(end) as i64 >= 0)
}

/// The list that a request of rcutrace's on an SRCU domain went to, seen when the kernel
/// accelerates it (checked against the list's own `srcu_data.ssp`).
#[inline(always)]
fn note_srcu_list(tid: u32, list: u64) {
    if window::constant(&SRCU_LAYOUT) == 0 || list == 0 {
        return;
    }
    let Some(&domain) = (unsafe { SRCU_PENDING.get(&tid) }) else {
        return;
    };
    let _ = SRCU_PENDING.remove(&tid);
    let data = list - u64::from(window::constant(&SRCU_DATA_CBLIST));
    if read(data + u64::from(window::constant(&SRCU_DATA_SSP))) == domain {
        let _ = SRCU_LISTS.insert(&domain, &list, 0);
    }
}

/// The grace period in progress on `domain`, if it serves rcutrace's callbacks alone: those
/// of the list rcutrace queued on whose segments wait for its number. Only while every
/// callback goes to one list (a domain grown per-CPU lists is counted).
#[inline(always)]
fn own_srcu_grace_period(domain: u64) -> Option<u64> {
    let list = *unsafe { SRCU_LISTS.get(&domain) }?;
    let usage = read(domain + u64::from(window::constant(&SRCU_STRUCT_SUP)));
    let end = grace_period_end(read(
        usage + u64::from(window::constant(&SRCU_USAGE_GP_SEQ)),
    ))?;
    if read_u32(usage + u64::from(window::constant(&SRCU_USAGE_SIZE_STATE))) != SRCU_SIZE_SMALL {
        bump(STAT_UNKNOWN_GRACE_PERIODS);
        return None;
    }
    if polled_for(domain, end) {
        return None;
    }
    let tails = list + u64::from(window::constant(&SEGCBLIST_TAILS));
    let seqs = list + u64::from(window::constant(&SEGCBLIST_GP_SEQ));
    let size = u64::from(window::constant(&SEGCBLIST_GP_SEQ_SIZE));
    let waits = read(seqs + size * RCU_WAIT_TAIL) == end;
    let ready = read(seqs + size * RCU_NEXT_READY_TAIL) == end;
    let (from, to) = match (waits, ready) {
        (true, true) => (RCU_DONE_TAIL, RCU_NEXT_READY_TAIL),
        (true, false) => (RCU_DONE_TAIL, RCU_WAIT_TAIL),
        (false, true) => (RCU_WAIT_TAIL, RCU_NEXT_READY_TAIL),
        (false, false) => return None,
    };
    match walk(read(tails + 8 * from), read(tails + 8 * to)) {
        Walk::Own(n) if n > 0 => Some(end),
        Walk::TooLong => {
            bump(STAT_UNKNOWN_GRACE_PERIODS);
            None
        }
        _ => None,
    }
}

/// Whether the current task is a kworker running the grace-period work of an SRCU domain
/// whose grace period in progress was found to be rcutrace's alone.
#[inline(always)]
fn in_own_srcu_grace_period(ctx: *mut core::ffi::c_void) -> bool {
    if window::constant(&SRCU_LAYOUT) == 0 {
        return false;
    }
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() };
    if read_u32(task + u64::from(window::constant(&TASK_FLAGS))) & PF_WQ_WORKER == 0 {
        return false;
    }
    let kthread = read(task + u64::from(window::constant(&TASK_WORKER_PRIVATE)));
    let worker = read(kthread + u64::from(window::constant(&KTHREAD_DATA)));
    let work = read(worker + u64::from(window::constant(&WORKER_CURRENT_WORK)));
    if kthread == 0 || worker == 0 || work == 0 {
        return false;
    }
    // The work is a domain's grace-period work (`process_srcu()`) when the domain it names
    // names it back.
    let usage = work - u64::from(window::constant(&SRCU_USAGE_WORK));
    let domain = read(usage + u64::from(window::constant(&SRCU_USAGE_SSP)));
    let Some(&own) = (unsafe { SRCU_OWN.get(&domain) }) else {
        return false;
    };
    read(domain + u64::from(window::constant(&SRCU_STRUCT_SUP))) == usage
        && grace_period_end(read(
            usage + u64::from(window::constant(&SRCU_USAGE_GP_SEQ)),
        )) == Some(own)
        && !polled_for(domain, own)
        && on_task_stack(ctx)
}

// srcu_gp_start_if_needed(ssp, rhp, do_norm): every SRCU request, a callback (call_srcu(),
// synchronize_srcu()'s wake-up) or a poll (start_poll_synchronize_srcu(), no head).
program! {
    kprobe fn own_work_srcu_start_kprobe(ctx: ProbeContext) -> u32 {
        let domain: u64 = ctx.arg(0).unwrap_or(0);
        let head: u64 = ctx.arg(1).unwrap_or(0);
        if domain == 0 || window::constant(&SRCU_LAYOUT) == 0 {
            return 0;
        }
        let (_, tid, is_self) = window::current();
        if head != 0 {
            if request(head, ctx.as_ptr()) {
                let _ = SRCU_PENDING.insert(&tid, &domain, 0);
            }
        } else if !is_self {
            // rcu_seq_snap(): the end of the first grace period to begin after now.
            let wanted = srcu_gp_seq(domain).wrapping_add(2 * RCU_SEQ_STATE_MASK + 1)
                & !RCU_SEQ_STATE_MASK;
            let later = unsafe { SRCU_POLLED.get(&domain) }
                .is_none_or(|&polled| wanted.wrapping_sub(polled) as i64 > 0);
            if later {
                let _ = SRCU_POLLED.insert(&domain, &wanted, 0);
            }
        }
        0
    }
}

// try_check_zero(ssp, idx, trycount): an SRCU grace period checks its readers, calling
// synchronize_rcu() on SRCU-fast domains. Whose grace period it is is settled here, once
// for each check.
program! {
    kprobe fn own_work_srcu_grace_period_kprobe(ctx: ProbeContext) -> u32 {
        let domain: u64 = ctx.arg(0).unwrap_or(0);
        if domain == 0 || window::constant(&SRCU_LAYOUT) == 0 {
            return 0;
        }
        match own_srcu_grace_period(domain) {
            Some(end) => {
                if unsafe { SRCU_OWN.get(&domain) } != Some(&end) {
                    let _ = SRCU_OWN.insert(&domain, &end, 0);
                    bump(STAT_OWN_GRACE_PERIODS);
                }
            }
            None => {
                let _ = SRCU_OWN.remove(&domain);
            }
        }
        0
    }
}
