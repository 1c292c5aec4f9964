//! Slots of the per-CPU counter array used by `rcutrace count`.

/// Index of one counted function in the `COUNTS` per-CPU array.
pub type CounterSlot = u32;

pub const READ_LOCK: CounterSlot = 0;
pub const CALL_RCU: CounterSlot = 1;
pub const CALL_RCU_HURRY: CounterSlot = 2;
pub const KVFREE_CALL_RCU: CounterSlot = 3;
pub const SYNCHRONIZE_RCU: CounterSlot = 4;
pub const SYNCHRONIZE_RCU_EXPEDITED: CounterSlot = 5;
pub const GP_FQS_LOOP: CounterSlot = 6;

/// Number of entries in the `COUNTS` array.
pub const COUNTER_SLOTS: u32 = 7;
