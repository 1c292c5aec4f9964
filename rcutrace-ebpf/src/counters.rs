//! `rcutrace count`: one tiny program per counted function and attach method, each adding
//! one to its own slot of a per-CPU array. The slot is a constant in the program, so the hot
//! path is a single array lookup and an increment: no hash, no shared cache line.

use aya_ebpf::{
    macros::{fentry, kprobe, map},
    maps::PerCpuArray,
    programs::{FEntryContext, ProbeContext},
};
use rcutrace_common::counters::*;

#[map]
static COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(COUNTER_SLOTS, 0);

/// kprobe handlers run with preemption off, so nothing else on this CPU can touch the slot
/// between the load and the store.
#[inline(always)]
fn bump_preempt_off(slot: CounterSlot) {
    if let Some(count) = COUNTS.get_ptr_mut(slot) {
        unsafe { *count += 1 };
    }
}

/// fentry programs only disable migration: a preempting task on the same CPU could run the
/// same program, so the increment must be atomic.
#[inline(always)]
fn bump_preemptible(slot: CounterSlot) {
    if let Some(count) = COUNTS.get_ptr_mut(slot) {
        unsafe { crate::atomic::add(count, 1) };
    }
}

// RCU readers: kprobe only. An fentry program on __rcu_read_lock recurses through the BPF
// trampoline's own rcu_read_lock() and hangs some kernels, so no such program exists at all.
#[kprobe]
pub fn count_read_lock_kprobe(_ctx: ProbeContext) -> u32 {
    bump_preempt_off(READ_LOCK);
    0
}

macro_rules! counter_programs {
    ($($slot:ident => $kprobe:ident, $fentry:ident;)*) => {$(
        #[kprobe]
        pub fn $kprobe(_ctx: ProbeContext) -> u32 {
            bump_preempt_off($slot);
            0
        }

        #[fentry]
        pub fn $fentry(_ctx: FEntryContext) -> u32 {
            bump_preemptible($slot);
            0
        }
    )*};
}

counter_programs! {
    CALL_RCU => count_call_rcu_kprobe, count_call_rcu_fentry;
    CALL_RCU_HURRY => count_call_rcu_hurry_kprobe, count_call_rcu_hurry_fentry;
    KVFREE_CALL_RCU => count_kvfree_call_rcu_kprobe, count_kvfree_call_rcu_fentry;
    SYNCHRONIZE_RCU => count_synchronize_rcu_kprobe, count_synchronize_rcu_fentry;
    SYNCHRONIZE_RCU_EXPEDITED => count_synchronize_rcu_expedited_kprobe, count_synchronize_rcu_expedited_fentry;
    GP_FQS_LOOP => count_gp_fqs_loop_kprobe, count_gp_fqs_loop_fentry;
}
