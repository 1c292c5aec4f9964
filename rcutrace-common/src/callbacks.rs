//! Layout of the maps behind `rcutrace callbacks`.
//!
//! Every RCU callback is seen twice: when it is put on a CPU's segmented callback list
//! (`rcu_segcblist_enqueue()`, or `rcu_segcblist_entrain()` for barriers; on offloaded CPUs
//! often the bypass list, `rcu_cblist_enqueue()` or `rcu_cblist_flush_enqueue()`) with its
//! `rcu_head` and function, and when the invocation loop takes it off just before calling it
//! (`rcu_cblist_dequeue()` returns the head). The head's address pairs the two. The API entry
//! points (`call_rcu()`, `call_rcu_hurry()`, `call_srcu()`, ...) only note, per CPU, which one
//! is queueing which head, so that the enqueue can say how the callback was queued.

use crate::hist;

/// How a callback was queued: which entry point queued its head on this CPU just before.
pub type Via = u32;

/// Queued by none of the traced entry points (e.g. `synchronize_srcu()`'s internal queueing,
/// or a caller preempted and moved to another CPU between the entry and the enqueue).
pub const VIA_OTHER: Via = 0;
pub const VIA_CALL_RCU: Via = 1;
pub const VIA_CALL_RCU_HURRY: Via = 2;
pub const VIA_CALL_SRCU: Via = 3;
pub const VIA_CALL_RCU_TASKS: Via = 4;
pub const VIA_CALL_RCU_TASKS_TRACE: Via = 5;
pub const VIA_CALL_RCU_TASKS_RUDE: Via = 6;
/// Entrained behind the other callbacks by `rcu_barrier()` and its SRCU and tasks cousins.
pub const VIA_BARRIER: Via = 7;
/// Invoked, but its queueing was not seen: it was queued before tracing began, or its head
/// could not be recorded (pending map full; counted separately at queueing).
pub const VIA_NOT_SEEN: Via = 8;
pub const VIA_COUNT: u32 = 9;
/// Queued by rcutrace itself (the files and memory it frees while the window is open): kept
/// in the pending map only, so that its invocation is not taken for a callback queued before
/// tracing; never in a row, never counted.
pub const VIA_OWN: Via = VIA_COUNT;

/// The entry point's name for each `Via`, as printed.
pub const VIA_NAMES: [&str; VIA_COUNT as usize] = [
    "other",
    "call_rcu",
    "call_rcu_hurry",
    "call_srcu",
    "call_rcu_tasks",
    "call_rcu_tasks_trace",
    "call_rcu_tasks_rude",
    "barrier",
    "before tracing",
];

/// Which entry point is queueing which head on this CPU (one per-CPU slot): the note an
/// entry point leaves for the queueing hook, which takes it (zeroes `head`) when the head
/// matches. A note of a counted call replaced before it was taken is counted per `Via`
/// (`NOTES_OVERWRITTEN`): that call's callback counts as `other`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    /// 0: no note waiting (taken, or none made).
    pub head: u64,
    pub via: Via,
    /// Non-zero when the call was counted (`ENTRY_CALLS`: in the window, not rcutrace's own).
    pub counted: u32,
    /// The SRCU domain of a call_srcu(), with `--by srcu`; 0 otherwise.
    pub domain: u64,
}

impl Caller {
    /// A counted call's note that no queueing has taken yet.
    pub fn waiting(&self) -> bool {
        self.head != 0 && self.counted != 0
    }
}

/// A callback queued while tracing and not yet invoked, keyed by its `rcu_head` address.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    pub func: u64,
    pub queued_ns: u64,
    pub via: Via,
    /// The CPU whose list it was queued on.
    pub cpu: u32,
}

/// One row of the report: a callback function and how it was queued.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallbackKey {
    pub func: u64,
    pub via: Via,
    pub _pad: u32,
}

/// Sub-bucket bits of the per-function fine histogram (percentiles within 1/2^(BITS+1)):
/// coarser than the latency commands' so that a row stays small enough for many functions.
pub const CALLBACK_FINE_BITS: u32 = 4;
pub const CALLBACK_FINE_SLOTS: u32 = hist::fine_slots(CALLBACK_FINE_BITS);

/// Per-row counts and latency aggregates (shared by all CPUs; updated atomically).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallbackStats {
    /// Queueings seen while tracing.
    pub queued: u64,
    /// Queueings whose head could not be recorded (pending map full): invoked untimed.
    pub queued_unrecorded: u64,
    /// Invocations paired with their queueing: latency samples.
    pub invoked: u64,
    /// Invocations whose queueing was not seen (row `VIA_NOT_SEEN` only).
    pub invoked_unpaired: u64,
    /// Callbacks of this row whose head was queued again (maybe with another function) while
    /// still recorded as pending: their invocation went unseen.
    pub requeued: u64,
    pub sum_ns: u64,
    /// Display histogram: bpftrace log2 slots of the latency in the display unit.
    pub display: [u64; hist::LOG2_SLOTS as usize],
    pub fine: [u64; CALLBACK_FINE_SLOTS as usize],
}

/// Exact extremes per row, kept per CPU (min inverted so that zero means "none").
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extremes {
    pub min_inverted: u64,
    pub max: u64,
}

/// Most callbacks that can be pending (queued while tracing, not yet invoked) at once: about
/// 20 MiB of kernel memory, preallocated.
pub const MAX_PENDING: u32 = 262_144;
/// Most rows (callback function and entry point pairs): about 8 MiB, preallocated.
pub const MAX_ROWS: u32 = 1024;

/// Slots of the per-CPU `CALLBACK_TOTALS` array: totals per CPU, and what the maps lost.
/// Queued and invoked count what the rows' QUEUED and INVOKED count (so that each CPU's
/// figures add up to the columns); invocations of callbacks queued before tracing, the rows'
/// BEFORE, have a slot of their own.
pub const TOTAL_QUEUED: u32 = 0;
pub const TOTAL_INVOKED: u32 = 1;
/// Objects passed to `kvfree_call_rcu()` (kfree_rcu() and friends): freed in batches by the
/// kernel, never through a per-object callback.
pub const TOTAL_KVFREE: u32 = 2;
/// Queueings not recorded because the pending map was full.
pub const TOTAL_LOST_PENDING_FULL: u32 = 3;
/// Queueings and invocations missing from the rows because the row map was full.
pub const TOTAL_LOST_ROWS_FULL_QUEUED: u32 = 4;
pub const TOTAL_LOST_ROWS_FULL_INVOKED: u32 = 5;
pub const TOTAL_INVOKED_BEFORE: u32 = 6;
/// With `--by cgroup` or `--by srcu`: queueings counted in their row but in no cgroup or
/// domain, the map of those being full.
pub const TOTAL_LOST_QUEUED_BY_FULL: u32 = 7;
/// Callbacks rcutrace's own process queued (its attaching, reading and detaching), from its
/// first probe on: in no row, and their invocations not counted as queued before tracing.
pub const TOTAL_OWN_QUEUED: u32 = 8;
pub const TOTAL_SLOTS: u32 = 9;

/// Most (cgroup or domain, callback function) pairs `callbacks --by cgroup|srcu` tells apart:
/// more are counted as lost.
pub const MAX_QUEUED_BY_ROWS: u32 = 4096;

/// `CALLBACKS_BY` values: what the queueings are also counted by, besides their row.
pub const QUEUED_BY_NONE: u32 = 0;
/// The queueing task's cgroup (v2 id).
pub const QUEUED_BY_CGROUP: u32 = 1;
/// The SRCU domain a call_srcu() queued on (its `srcu_struct`); other queueings not.
pub const QUEUED_BY_DOMAIN: u32 = 2;

/// With `--by cgroup` or `--by srcu`: who queued a callback (the queueing task's cgroup v2 id,
/// or the SRCU domain it went to) and its function.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueuedBy {
    pub by: u64,
    pub func: u64,
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `repr(C)` integers, every bit pattern valid, no padding left implicit.
    unsafe impl aya::Pod for super::Caller {}
    unsafe impl aya::Pod for super::Pending {}
    unsafe impl aya::Pod for super::CallbackKey {}
    unsafe impl aya::Pod for super::CallbackStats {}
    unsafe impl aya::Pod for super::Extremes {}
    unsafe impl aya::Pod for super::QueuedBy {}
}
