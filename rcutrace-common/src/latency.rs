//! Layout of the maps behind `rcutrace gplat` and `rcutrace srlat`.
//!
//! Up to `MAX_TIMED` functions are timed at once, each by its own set of programs (the index
//! is compiled in), so that nested calls on one thread (synchronize_rcu() calling
//! synchronize_rcu_expedited()) each keep their own start time. Every completed call becomes
//! one `Sample` in a ring buffer; user space builds the histograms and statistics from them
//! with the same slot arithmetic (`hist`), so nothing is approximated in the kernel.

use crate::attribution::Attribution;

/// Functions that can be timed in one run.
pub const MAX_TIMED: u32 = 8;

/// Most calls that can be in flight at once (threads inside a timed function).
pub const MAX_IN_FLIGHT: u32 = 16384;

/// Ring buffer for samples, in bytes (a power of two, a multiple of the page size).
pub const SAMPLE_RING_BYTES: u32 = 1 << 20;

/// Entries of the `CONTROL` array, written by user space while the programs run.
/// Non-zero while the tracing window is open: programs record nothing before or after.
pub const CONTROL_RUNNING: u32 = 0;
pub const CONTROL_SLOTS: u32 = 1;

/// How many tasks-RCU kthreads the programs can recognise (tasks, rude and trace).
pub const TASKS_RCU_KTHREADS: usize = 3;

/// Key of a call in flight.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InFlightKey {
    pub tid: u32,
    pub timed: u32,
}

/// A call in flight: when it began, and who made it (taken at entry, where the stack is the
/// caller's).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct InFlight {
    pub start_ns: u64,
    pub key: Attribution,
}

/// One completed call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub nanos: u64,
    pub key: Attribution,
}

/// Per timed function, `STAT_SLOTS` entries of the per-CPU `STATS` array, at
/// `timed * STAT_SLOTS + stat`.
/// A return without a recorded start: the call began before the window opened.
pub const STAT_UNMATCHED_RETURNS: u32 = 0;
/// A thread entered the timed function again while its previous call had no return: that
/// return was dropped by the kernel. Only counted where entry and return are one function.
pub const STAT_RETURNS_MISSED: u32 = 1;
/// A call started but its start could not be recorded: the in-flight map was full.
pub const STAT_LOST_START_MAP_FULL: u32 = 2;
/// A completed call could not be sent: the ring buffer was full.
pub const STAT_LOST_RING_FULL: u32 = 3;
/// The caller's stack could not be kept (stack map full, or unreadable).
pub const STAT_LOST_STACK: u32 = 4;
pub const STAT_SLOTS: u32 = 5;

#[cfg(feature = "user")]
mod pod {
    unsafe impl aya::Pod for super::InFlightKey {}
    unsafe impl aya::Pod for super::InFlight {}
    unsafe impl aya::Pod for super::Sample {}
}
