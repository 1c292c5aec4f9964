//! `rcutrace callbacks`: every RCU callback from its queueing to its invocation.
//!
//! `rcu_segcblist_enqueue(rsclp, rhp)` (and `rcu_segcblist_entrain()` for barriers) sees each
//! callback put on a CPU's list, its function already in `rhp->func`; on offloaded CPUs
//! (`rcu_nocbs=`) `rcu_cblist_enqueue(bypass, rhp)` and `rcu_cblist_flush_enqueue(list,
//! bypass, rhp)` see those that take the bypass list instead; `rcu_cblist_dequeue()`
//! returns each head just before the invocation loop calls it, the function still in place.
//! A hash map from head address to queueing time pairs the two. The API entry points
//! (`call_rcu()`, `call_rcu_hurry()`, ...) only leave a per-CPU note of which head they are
//! queueing, so that a row can say how its callbacks were queued. Everything is aggregated
//! here, per row (callback function and entry point); nothing is sent per event.

use aya_ebpf::{
    helpers::{
        bpf_get_smp_processor_id, bpf_ktime_get_ns, bpf_probe_read_kernel,
        generated::bpf_get_current_cgroup_id,
    },
    macros::map,
    maps::{Array, HashMap, PerCpuArray, PerCpuHashMap},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use rcutrace_common::{callbacks::*, hist};

use crate::{
    atomic,
    window::{constant, current, running},
};

/// Nanoseconds per display unit of the latency histograms.
#[unsafe(no_mangle)]
static CALLBACK_UNIT_NS: u32 = 1_000_000;
/// What each queueing is also counted by (`QUEUED_BY_*`): the queueing task's cgroup with
/// `--by cgroup`, a call_srcu()'s domain with `--by srcu`.
#[unsafe(no_mangle)]
static CALLBACKS_BY: u32 = QUEUED_BY_NONE;

/// BPF_NOEXIST: insert only if the key is new.
const NOEXIST: u64 = 1;

#[map]
static CALLER: PerCpuArray<Caller> = PerCpuArray::with_max_entries(1, 0);
// The hash maps are preallocated (no allocation, so no call_rcu(), inside the programs): they
// are declared with one entry, and `rcutrace callbacks` sizes them at load time (MAX_PENDING,
// MAX_ROWS) so that the other commands do not pay for their memory.
#[map]
static PENDING: HashMap<u64, Pending> = HashMap::with_max_entries(1, 0);
#[map]
static ROWS: HashMap<CallbackKey, CallbackStats> = HashMap::with_max_entries(1, 0);
#[map]
static EXTREMES: PerCpuHashMap<CallbackKey, Extremes> = PerCpuHashMap::with_max_entries(1, 0);
/// All zeros, never written: the initial value of a new row (too large for the BPF stack).
#[map]
static ZERO_ROW: Array<CallbackStats> = Array::with_max_entries(1, 0);
#[map]
static CALLBACK_TOTALS: PerCpuArray<u64> = PerCpuArray::with_max_entries(TOTAL_SLOTS, 0);
/// Calls of each entry point while tracing, by `Via`: what the queueings seen through it are
/// checked against.
#[map]
static ENTRY_CALLS: PerCpuArray<u64> = PerCpuArray::with_max_entries(VIA_COUNT, 0);
/// Notes of counted calls, by `Via`, replaced by another entry point's note on their CPU
/// before their queueing took them (an interrupt's or another task's call in between, a
/// caller moved to another CPU, or a queueing the kernel skipped): their callbacks count as
/// `other`.
#[map]
static NOTES_OVERWRITTEN: PerCpuArray<u64> = PerCpuArray::with_max_entries(VIA_COUNT, 0);
/// Queueings in the window, by `Via`, that took a note made before it opened (a call in
/// progress as the window opened, not counted in `ENTRY_CALLS`).
#[map]
static NOTES_FROM_BEFORE: PerCpuArray<u64> = PerCpuArray::with_max_entries(VIA_COUNT, 0);
/// Queueings by the queueing task's cgroup v2 id or their SRCU domain, and the callback
/// function (`--by cgroup|srcu` sizes it: MAX_QUEUED_BY_ROWS). The enqueue runs in the task
/// that called call_rcu() and friends.
#[map]
static QUEUED_BY: HashMap<QueuedBy, u64> = HashMap::with_max_entries(1, 0);

#[inline(always)]
fn total(slot: u32) {
    if let Some(count) = CALLBACK_TOTALS.get_ptr_mut(slot) {
        // fentry programs are preemptible: add atomically even on a per-CPU slot.
        unsafe { atomic::add(count, 1) };
    }
}

/// The row for `key`, created (zeroed) on first use; `None` when the row map is full.
#[inline(always)]
fn row(key: &CallbackKey) -> Option<*mut CallbackStats> {
    if let Some(stats) = ROWS.get_ptr_mut(key) {
        return Some(stats);
    }
    crate::hash::get_or_insert(&ROWS, key, ZERO_ROW.get(0)?)
}

/// The callback function in `head->func` (struct rcu_head is `{ next, func }`).
#[inline(always)]
fn callback_function(head: u64) -> u64 {
    unsafe { bpf_probe_read_kernel((head + 8) as *const u64) }.unwrap_or(0)
}

/// One more in `counts[via]` (a lookup only when the rare event happens).
#[inline(always)]
fn count_via(counts: &PerCpuArray<u64>, via: Via) {
    if let Some(count) = counts.get_ptr_mut(via) {
        unsafe { atomic::add(count, 1) };
    }
}

#[inline(always)]
fn note_caller(head: u64, via: Via, domain: u64) {
    let counted = running() && !current().2;
    if let Some(caller) = CALLER.get_ptr_mut(0) {
        let last = unsafe { *caller };
        if last.waiting() {
            count_via(&NOTES_OVERWRITTEN, last.via);
        }
        unsafe {
            *caller = Caller {
                head,
                via,
                counted: u32::from(counted),
                domain,
            }
        };
    }
    if counted && let Some(calls) = ENTRY_CALLS.get_ptr_mut(via) {
        unsafe { atomic::add(calls, 1) };
    }
}

/// The entry point whose note names `head`, and the domain it noted, the note taken so that
/// a later call's note does not count it as overwritten; `VIA_OTHER` when the note names
/// another head.
#[inline(always)]
fn take_note(head: u64) -> (Via, u64) {
    let Some(caller) = CALLER.get_ptr_mut(0) else {
        return (VIA_OTHER, 0);
    };
    let note = unsafe { *caller };
    if note.head != head {
        return (VIA_OTHER, 0);
    }
    unsafe { (*caller).head = 0 };
    if note.counted == 0 {
        count_via(&NOTES_FROM_BEFORE, note.via);
    }
    (note.via, note.domain)
}

#[inline(always)]
fn on_enqueue(head: u64, barrier: bool) {
    if head == 0 {
        return;
    }
    // rcutrace's own queueings are kept from before the window opens: attaching a
    // trampoline queues the freeing of the kernel's old table of direct calls, whose
    // invocation in the window must not count as queued before tracing.
    if current().2 {
        let own = Pending {
            func: 0,
            queued_ns: 0,
            via: VIA_OWN,
            cpu: 0,
        };
        let _ = PENDING.insert(head, own, 0);
        total(TOTAL_OWN_QUEUED);
        return;
    }
    if !running() {
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let (via, domain) = if barrier {
        (VIA_BARRIER, 0)
    } else {
        take_note(head)
    };
    let func = callback_function(head);
    let key = CallbackKey { func, via, _pad: 0 };
    let stats = row(&key);
    match stats {
        Some(stats) => {
            total(TOTAL_QUEUED);
            unsafe { atomic::add(&raw mut (*stats).queued, 1) };
            match constant(&CALLBACKS_BY) {
                QUEUED_BY_CGROUP => count_queued_by(unsafe { bpf_get_current_cgroup_id() }, func),
                QUEUED_BY_DOMAIN if via == VIA_CALL_SRCU => count_queued_by(domain, func),
                _ => {}
            }
        }
        None => total(TOTAL_LOST_ROWS_FULL_QUEUED),
    }
    let pending = Pending {
        func,
        queued_ns: now,
        via,
        cpu: unsafe { bpf_get_smp_processor_id() },
    };
    if PENDING.insert(head, pending, NOEXIST).is_ok() {
        return;
    }
    if let Some(stale) = PENDING.get_ptr_mut(head) {
        // The head is queued again before the earlier callback's invocation was seen (the
        // kernel skipped our program): that callback's row counts it as requeued, since its
        // invocation is what went unseen (the head may now carry another function). Or the
        // memory is reused after one of rcutrace's own callbacks ran before the window opened.
        let earlier = unsafe { *stale };
        unsafe { *stale = pending };
        if earlier.via != VIA_OWN {
            let key = CallbackKey {
                func: earlier.func,
                via: earlier.via,
                _pad: 0,
            };
            if let Some(stats) = row(&key) {
                unsafe { atomic::add(&raw mut (*stats).requeued, 1) };
            }
        }
        return;
    }
    total(TOTAL_LOST_PENDING_FULL);
    if let Some(stats) = stats {
        unsafe { atomic::add(&raw mut (*stats).queued_unrecorded, 1) };
    }
}

/// One more queueing of `func` under `by` (a cgroup id or a domain), as for its row.
#[inline(always)]
fn count_queued_by(by: u64, func: u64) {
    let key = QueuedBy { by, func };
    match crate::hash::get_or_insert(&QUEUED_BY, &key, &0) {
        Some(count) => unsafe { atomic::add(count, 1) },
        None => total(TOTAL_LOST_QUEUED_BY_FULL),
    }
}

#[inline(always)]
fn on_dequeue(head: u64) {
    // The invocation loops call the dequeue once more to find the list empty.
    if head == 0 || !running() {
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let Some(pending) = (unsafe { PENDING.get(head) }).copied() else {
        let key = CallbackKey {
            func: callback_function(head),
            via: VIA_NOT_SEEN,
            _pad: 0,
        };
        match row(&key) {
            Some(stats) => {
                total(TOTAL_INVOKED_BEFORE);
                unsafe { atomic::add(&raw mut (*stats).invoked_unpaired, 1) }
            }
            None => total(TOTAL_LOST_ROWS_FULL_INVOKED),
        }
        return;
    };
    let _ = PENDING.remove(head);
    if pending.via == VIA_OWN {
        return;
    }
    let key = CallbackKey {
        func: pending.func,
        via: pending.via,
        _pad: 0,
    };
    let Some(stats) = row(&key) else {
        total(TOTAL_LOST_ROWS_FULL_INVOKED);
        return;
    };
    total(TOTAL_INVOKED);
    let nanos = now.saturating_sub(pending.queued_ns);
    let value = hist::div(nanos, u64::from(constant(&CALLBACK_UNIT_NS)));
    let display = hist::log2_slot(value as i64) as usize;
    let fine = hist::fine_slot_bits(nanos, CALLBACK_FINE_BITS) as usize;
    unsafe {
        atomic::add(&raw mut (*stats).invoked, 1);
        atomic::add(&raw mut (*stats).sum_ns, nanos);
        if display < hist::LOG2_SLOTS as usize {
            atomic::add(&raw mut (*stats).display[display], 1);
        }
        if fine < CALLBACK_FINE_SLOTS as usize {
            atomic::add(&raw mut (*stats).fine[fine], 1);
        }
    }
    record_extremes(&key, nanos);
}

#[inline(always)]
fn record_extremes(key: &CallbackKey, nanos: u64) {
    let extremes = match EXTREMES.get_ptr_mut(key) {
        Some(e) => e,
        None => {
            let _ = EXTREMES.insert(key, Extremes::default(), NOEXIST);
            match EXTREMES.get_ptr_mut(key) {
                Some(e) => e,
                None => return,
            }
        }
    };
    unsafe {
        if nanos > (*extremes).max {
            (*extremes).max = nanos;
        }
        if !nanos > (*extremes).min_inverted {
            (*extremes).min_inverted = !nanos;
        }
    }
}

/// The entry points' programs: each notes the head it is given (argument `$head`: call_srcu
/// takes its srcu_struct first, which it notes with `--by srcu`) with its own `Via`.
macro_rules! caller_programs {
    ($($via:ident, $head:literal => $kprobe:ident, $fentry:ident;)*) => {$(
        program! {
            kprobe fn $kprobe(ctx: ProbeContext) -> u32 {
                let domain = if $head == 1 && by_domain() { ctx.arg::<u64>(0).unwrap_or(0) } else { 0 };
                note_caller(ctx.arg::<u64>($head).unwrap_or(0), $via, domain);
                0
            }
        }

        program! {
            fentry fn $fentry(ctx: FEntryContext) -> u32 {
                let domain = if $head == 1 && by_domain() { crate::args::number(&ctx, 0) } else { 0 };
                note_caller(ctx.arg::<u64>($head), $via, domain);
                0
            }
        }
    )*};
}

/// Whether queueings are counted by SRCU domain (`--by srcu`).
#[inline(always)]
fn by_domain() -> bool {
    constant(&CALLBACKS_BY) == QUEUED_BY_DOMAIN
}

caller_programs! {
    VIA_CALL_RCU, 0 => callbacks_call_rcu_kprobe, callbacks_call_rcu_fentry;
    VIA_CALL_RCU_HURRY, 0 => callbacks_call_rcu_hurry_kprobe, callbacks_call_rcu_hurry_fentry;
    VIA_CALL_SRCU, 1 => callbacks_call_srcu_kprobe, callbacks_call_srcu_fentry;
    VIA_CALL_RCU_TASKS, 0 => callbacks_call_rcu_tasks_kprobe, callbacks_call_rcu_tasks_fentry;
    VIA_CALL_RCU_TASKS_TRACE, 0 => callbacks_call_rcu_tasks_trace_kprobe, callbacks_call_rcu_tasks_trace_fentry;
    VIA_CALL_RCU_TASKS_RUDE, 0 => callbacks_call_rcu_tasks_rude_kprobe, callbacks_call_rcu_tasks_rude_fentry;
}

program! {
    kprobe fn callbacks_enqueue_kprobe(ctx: ProbeContext) -> u32 {
        on_enqueue(ctx.arg::<u64>(1).unwrap_or(0), false);
        0
    }
}

program! {
    fentry fn callbacks_enqueue_fentry(ctx: FEntryContext) -> u32 {
        on_enqueue(ctx.arg::<u64>(1), false);
        0
    }
}

// The offloaded CPUs' bypass list: the same queueing, by another way in.
program! {
    kprobe fn callbacks_bypass_kprobe(ctx: ProbeContext) -> u32 {
        on_enqueue(ctx.arg::<u64>(1).unwrap_or(0), false);
        0
    }
}

program! {
    fentry fn callbacks_bypass_fentry(ctx: FEntryContext) -> u32 {
        on_enqueue(ctx.arg::<u64>(1), false);
        0
    }
}

// A flush of the bypass list that takes one more callback (or, with a NULL head, none).
program! {
    kprobe fn callbacks_bypass_flush_kprobe(ctx: ProbeContext) -> u32 {
        on_enqueue(ctx.arg::<u64>(2).unwrap_or(0), false);
        0
    }
}

program! {
    fentry fn callbacks_bypass_flush_fentry(ctx: FEntryContext) -> u32 {
        on_enqueue(ctx.arg::<u64>(2), false);
        0
    }
}

program! {
    kprobe fn callbacks_entrain_kprobe(ctx: ProbeContext) -> u32 {
        on_enqueue(ctx.arg::<u64>(1).unwrap_or(0), true);
        0
    }
}

program! {
    fentry fn callbacks_entrain_fentry(ctx: FEntryContext) -> u32 {
        on_enqueue(ctx.arg::<u64>(1), true);
        0
    }
}

program! {
    kretprobe fn callbacks_dequeue_kretprobe(ctx: RetProbeContext) -> u32 {
        on_dequeue(ctx.ret::<u64>());
        0
    }
}

program! {
    fexit fn callbacks_dequeue_fexit(ctx: FExitContext) -> u32 {
        // An fexit program sees the return value after the arguments: rcu_cblist_dequeue has one.
        on_dequeue(ctx.arg::<u64>(1));
        0
    }
}

// `kvfree_call_rcu()`: objects freed in batches by the kernel, counted on queueing only.
program! {
    kprobe fn callbacks_kvfree_kprobe(_ctx: ProbeContext) -> u32 {
        if running() {
            total(TOTAL_KVFREE);
        }
        0
    }
}

program! {
    fentry fn callbacks_kvfree_fentry(_ctx: FEntryContext) -> u32 {
        if running() {
            total(TOTAL_KVFREE);
        }
        0
    }
}
