//! Slots of the per-CPU counter array used by `rcutrace count`.
//!
//! Every counted function has its own slot, and every slot its own pair of tiny programs
//! (kprobe, fentry) with the slot compiled in. The table in rcutrace's `probes.rs` says which
//! function each slot counts; the named slots below are the ones its summary reads.

/// Index of one counted function in the `COUNTS` per-CPU array.
pub type CounterSlot = u32;

pub const READ_LOCK: CounterSlot = 0;
pub const CALL_RCU: CounterSlot = 1;
pub const CALL_RCU_HURRY: CounterSlot = 2;
pub const KVFREE_CALL_RCU: CounterSlot = 3;
pub const SYNCHRONIZE_RCU: CounterSlot = 4;
pub const SYNCHRONIZE_RCU_EXPEDITED: CounterSlot = 5;
pub const GP_FQS_LOOP: CounterSlot = 6;
/// `rcu_gp_init()` returns that found no grace period to start (it returned false), counted
/// at its return for `count --all`'s check; never printed as a count of its own.
pub const GP_INIT_FOUND_NOTHING: CounterSlot = 37;

/// Number of entries in the `COUNTS` array, and of counter program pairs.
pub const COUNTER_SLOTS: u32 = 48;

/// Most distinct keys `--by` can count (function and attribution together); more are lost,
/// and counted as lost.
pub const MAX_KEYED_COUNTS: u32 = 16384;

/// Indices of the per-CPU `COUNT_LOSSES` array.
pub const LOST_KEYED_MAP_FULL: u32 = 0;
/// The stack map had no room for a new stack (or the stack could not be read).
pub const LOST_STACK: u32 = 1;
/// Updater calls the tasks-RCU kthreads made while rcutrace switched its sampled reader probe
/// on and off: its doing, so left out of the counts (and counted here).
pub const LEFT_OUT_SWITCHING: u32 = 2;
pub const COUNT_LOSS_SLOTS: u32 = 3;
