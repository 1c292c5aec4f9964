//! `rcutrace count`: one tiny program per counter slot and attach method, each adding one to
//! its own slot of a per-CPU array. The slot is a constant in the program, so the hot path is a
//! single array lookup and an increment: no hash, no shared cache line. The probe table in
//! user space says which function each slot's programs are attached to.
//!
//! The per-CPU counts are read as a difference (when the window opens, and before the first
//! probe detaches), which costs the hot path nothing. With `--by`, counts go to a hash map
//! keyed by the attribution instead, and only while the window is open.

use aya_ebpf::{
    EbpfContext,
    helpers::generated::bpf_get_attach_cookie,
    macros::map,
    maps::{HashMap, PerCpuArray},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use rcutrace_common::{attribution::*, counters::*};

use crate::{attribution, own_work, window};

/// Bit `slot` set where the counted function queues the `rcu_head` given as its first
/// argument through normal RCU (`call_rcu()`, `kvfree_call_rcu()`, ...) and through tasks RCU
/// (`call_rcu_tasks()`, ...): a head of rcutrace's own callbacks' chains queued there is
/// rcutrace's doing.
#[unsafe(no_mangle)]
static NORMAL_HEAD_SLOTS: u64 = window::UNSET_U64 + 20;
#[unsafe(no_mangle)]
static TASKS_HEAD_SLOTS: u64 = window::UNSET_U64 + 21;

/// Non-zero: count in the plain per-CPU array even when the latency programs key their samples
/// (`top` keys its waiters by comm and samples the reader counter).
#[unsafe(no_mangle)]
static COUNTS_UNKEYED: u32 = 0;

/// Whether events are counted per `--by` key rather than in the plain array.
#[inline(always)]
fn keyed() -> bool {
    attribution::mode() != BY_NONE && window::constant(&COUNTS_UNKEYED) == 0
}

#[map]
static COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(COUNTER_SLOTS, 0);
// One entry: only a run with `--by` sizes it at load time (MAX_KEYED_COUNTS).
#[map]
static KEYED_COUNTS: HashMap<Attribution, u64> = HashMap::with_max_entries(1, 0);
#[map]
static COUNT_LOSSES: PerCpuArray<u64> = PerCpuArray::with_max_entries(COUNT_LOSS_SLOTS, 0);

/// kprobe handlers run with preemption off, so nothing else on this CPU can touch the slot
/// between the load and the store.
#[inline(always)]
fn bump_preempt_off(map: &PerCpuArray<u64>, slot: u32) {
    if let Some(count) = map.get_ptr_mut(slot) {
        unsafe { *count += 1 };
    }
}

/// fentry programs only disable migration: a preempting task on the same CPU could run the
/// same program, so the increment must be atomic.
#[inline(always)]
fn bump_preemptible(map: &PerCpuArray<u64>, slot: u32) {
    if let Some(count) = map.get_ptr_mut(slot) {
        unsafe { crate::atomic::add(count, 1) };
    }
}

/// Bit `slot` set where that function's first argument is its SRCU domain, with `--by srcu`.
#[unsafe(no_mangle)]
static DOMAIN_SLOTS: u64 = window::UNSET_U64 + 22;

#[inline(always)]
fn takes_domain(slot: u32) -> bool {
    window::constant(&DOMAIN_SLOTS) & (1 << slot) != 0
}

/// Whether `slot`'s function takes an `rcu_head` first (its programs then read it).
#[inline(always)]
fn takes_head(slot: u32) -> bool {
    (window::constant(&NORMAL_HEAD_SLOTS) | window::constant(&TASKS_HEAD_SLOTS)) & (1 << slot) != 0
}

/// One event of `slot`, counted by a program that runs with preemption off (`kprobe`) or not;
/// `head` is the `rcu_head` the call queues (0 where it queues none), `domain` its SRCU domain
/// with `--by srcu` (0 otherwise).
#[inline(always)]
fn count<C: EbpfContext>(ctx: &C, slot: u32, kprobe: bool, head: u64, domain: u64) {
    let (tgid, tid, is_self) = window::current();
    let normal = window::constant(&NORMAL_HEAD_SLOTS) & (1 << slot) != 0;
    if is_self
        || own_work::on_behalf(tid, ctx.as_ptr())
        || (head != 0 && own_work::own_head(head, normal))
    {
        return;
    }
    if window::switching_kthread(tgid) {
        bump_preemptible(&COUNT_LOSSES, LEFT_OUT_SWITCHING);
        return;
    }
    if !keyed() {
        if kprobe {
            bump_preempt_off(&COUNTS, slot);
        } else {
            bump_preemptible(&COUNTS, slot);
        }
        return;
    }
    count_keyed(ctx, slot, tgid, domain);
}

#[inline(always)]
fn count_keyed<C: EbpfContext>(ctx: &C, slot: u32, tgid: u32, domain: u64) {
    if !window::running() {
        return;
    }
    let (mut key, stack_kept) = attribution::attribute(ctx, slot, tgid);
    key.domain = domain;
    if !stack_kept {
        bump_preemptible(&COUNT_LOSSES, LOST_STACK);
    }
    match crate::hash::get_or_insert(&KEYED_COUNTS, &key, &0) {
        Some(value) => unsafe { crate::atomic::add(value, 1) },
        None => bump_preemptible(&COUNT_LOSSES, LOST_KEYED_MAP_FULL),
    }
}

// RCU readers: kprobe only, and no self check (the hot path; rcutrace's own few readers while
// it reads its maps are within the noise of "at least"). An fentry program on __rcu_read_lock
// recurses through the BPF trampoline's own rcu_read_lock() and hangs some kernels, so no
// such program exists at all.
program! {
    kprobe fn count_read_lock_kprobe(ctx: ProbeContext) -> u32 {
        if !keyed() {
            bump_preempt_off(&COUNTS, READ_LOCK);
        } else {
            let (tgid, _, _) = window::current();
            count_keyed(&ctx, READ_LOCK, tgid, 0);
        }
        0
    }
}

// rcu_gp_init() returning false found no grace period to start: counted in the plain array
// even under --by (a figure for count --all's check of inits against force-quiescent-state
// loops, never a key). It runs in the grace-period kthread: never rcutrace's doing.
program! {
    kretprobe fn count_37_kretprobe(ctx: RetProbeContext) -> u32 {
        if ctx.ret::<u64>() & 0xff == 0 {
            bump_preempt_off(&COUNTS, GP_INIT_FOUND_NOTHING);
        }
        0
    }
}

program! {
    fexit fn count_37_fexit(ctx: FExitContext) -> u32 {
        // rcu_gp_init() takes no argument: its return value comes first.
        if ctx.arg::<u64>(0) & 0xff == 0 {
            bump_preemptible(&COUNTS, GP_INIT_FOUND_NOTHING);
        }
        0
    }
}

// Every counted function but the reader, through one kprobe-multi link: the slot is the
// cookie user space attached the function with. One link patches all the functions in one
// ftrace update, where a kprobe or trampoline each costs an update of its own.
program! {
    kprobe fn count_multi_kprobe(ctx: ProbeContext) -> u32 {
        // SAFETY: the helper only reads the cookie of the link that ran this program.
        let slot = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) } as u32;
        if slot == READ_LOCK || slot >= COUNTER_SLOTS {
            return 0;
        }
        // The slot is known only here: the first argument is read once, for either use.
        let (head_first, domain_first) = (takes_head(slot), takes_domain(slot));
        let first = if head_first || domain_first { ctx.arg::<u64>(0).unwrap_or(0) } else { 0 };
        let head = if head_first { first } else { 0 };
        let domain = if domain_first { first } else { 0 };
        count(&ctx, slot, true, head, domain);
        0
    }
}

macro_rules! counter_programs {
    ($($slot:literal => $kprobe:ident, $fentry:ident;)*) => {$(
        program! {
            kprobe fn $kprobe(ctx: ProbeContext) -> u32 {
                let head = if takes_head($slot) { ctx.arg::<u64>(0).unwrap_or(0) } else { 0 };
                let domain = if takes_domain($slot) { ctx.arg::<u64>(0).unwrap_or(0) } else { 0 };
                count(&ctx, $slot, true, head, domain);
                0
            }
        }

        program! {
            fentry fn $fentry(ctx: FEntryContext) -> u32 {
                let head = if takes_head($slot) { ctx.arg::<u64>(0) } else { 0 };
                let domain = if takes_domain($slot) { crate::args::number(&ctx, 0) } else { 0 };
                count(&ctx, $slot, false, head, domain);
                0
            }
        }
    )*};
}

// Slot 0 is the reader's, above. The probe table checks that it names only these programs.
counter_programs! {
    1 => count_1_kprobe, count_1_fentry;
    2 => count_2_kprobe, count_2_fentry;
    3 => count_3_kprobe, count_3_fentry;
    4 => count_4_kprobe, count_4_fentry;
    5 => count_5_kprobe, count_5_fentry;
    6 => count_6_kprobe, count_6_fentry;
    7 => count_7_kprobe, count_7_fentry;
    8 => count_8_kprobe, count_8_fentry;
    9 => count_9_kprobe, count_9_fentry;
    10 => count_10_kprobe, count_10_fentry;
    11 => count_11_kprobe, count_11_fentry;
    12 => count_12_kprobe, count_12_fentry;
    13 => count_13_kprobe, count_13_fentry;
    14 => count_14_kprobe, count_14_fentry;
    15 => count_15_kprobe, count_15_fentry;
    16 => count_16_kprobe, count_16_fentry;
    17 => count_17_kprobe, count_17_fentry;
    18 => count_18_kprobe, count_18_fentry;
    19 => count_19_kprobe, count_19_fentry;
    20 => count_20_kprobe, count_20_fentry;
    21 => count_21_kprobe, count_21_fentry;
    22 => count_22_kprobe, count_22_fentry;
    23 => count_23_kprobe, count_23_fentry;
    24 => count_24_kprobe, count_24_fentry;
    25 => count_25_kprobe, count_25_fentry;
    26 => count_26_kprobe, count_26_fentry;
    27 => count_27_kprobe, count_27_fentry;
    28 => count_28_kprobe, count_28_fentry;
    29 => count_29_kprobe, count_29_fentry;
    30 => count_30_kprobe, count_30_fentry;
    31 => count_31_kprobe, count_31_fentry;
    32 => count_32_kprobe, count_32_fentry;
    33 => count_33_kprobe, count_33_fentry;
    34 => count_34_kprobe, count_34_fentry;
    35 => count_35_kprobe, count_35_fentry;
    36 => count_36_kprobe, count_36_fentry;
    37 => count_37_kprobe, count_37_fentry;
    38 => count_38_kprobe, count_38_fentry;
    39 => count_39_kprobe, count_39_fentry;
    40 => count_40_kprobe, count_40_fentry;
    41 => count_41_kprobe, count_41_fentry;
    42 => count_42_kprobe, count_42_fentry;
    43 => count_43_kprobe, count_43_fentry;
    44 => count_44_kprobe, count_44_fentry;
    45 => count_45_kprobe, count_45_fentry;
    46 => count_46_kprobe, count_46_fentry;
    47 => count_47_kprobe, count_47_fentry;
}
