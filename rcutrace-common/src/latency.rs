//! Layout of the maps behind `rcutrace gplat` and `rcutrace srlat`.
//!
//! The eBPF side measures a latency in nanoseconds, converts it to the display unit with a
//! divisor fixed at load time, and adds it to three per-CPU arrays: the display histogram
//! (log2 or linear slots, exactly as bpftrace would fill them), a fine log-linear histogram of
//! the nanosecond value (for percentiles), and exact summary statistics.

use crate::hist;

/// How the display histogram is bucketed; written to the eBPF program's `HIST_MODE` constant.
pub const MODE_LOG2: u32 = 0;
pub const MODE_LINEAR: u32 = 1;
/// Sparse exact buckets of width `STEP`, kept in a hash map keyed by `value / STEP`.
pub const MODE_BUCKETS: u32 = 2;

/// Entries in the display histogram array: enough for bpftrace's largest linear histogram
/// (1000 buckets plus underflow and overflow) and for all 65 log2 slots.
pub const DISPLAY_SLOTS: u32 = 1002;

/// Entries in the fine histogram array.
pub const FINE_SLOTS: u32 = hist::FINE_SLOTS;

/// Most distinct buckets that `--buckets` can hold; more are counted as lost.
pub const SPARSE_BUCKETS: u32 = 16384;

/// Most calls that can be in flight at once (threads inside a traced function).
pub const MAX_IN_FLIGHT: u32 = 16384;

/// Entries of the `CONTROL` array, written by user space while the programs run.
pub const CONTROL_STOPPED: u32 = 0;
pub const CONTROL_SLOTS: u32 = 1;

/// Indices of the per-CPU `STATS` array.
pub const STAT_COUNT: u32 = 0;
/// Sum of the display-unit values (for the mean).
pub const STAT_SUM: u32 = 1;
/// Smallest and largest nanosecond value; min is stored inverted (`!v`) so that an untouched
/// slot (zero) never looks like a minimum of zero.
pub const STAT_MIN_INVERTED: u32 = 2;
pub const STAT_MAX: u32 = 3;
/// Sum of the nanosecond values.
pub const STAT_SUM_NS: u32 = 4;
/// A call started but its start could not be recorded: the in-flight map was full.
pub const STAT_LOST_START_MAP_FULL: u32 = 5;
/// A sample could not be kept in the sparse bucket map: it was full.
pub const STAT_LOST_BUCKET_MAP_FULL: u32 = 6;
/// A return without a recorded start: the call began before tracing did.
pub const STAT_UNMATCHED_RETURNS: u32 = 7;
/// A thread entered the traced function again while its previous call had no return: that
/// return was dropped by the kernel (kretprobe instances exhausted, or a skipped program).
/// Only counted when the entry and return are the same function.
pub const STAT_RETURNS_MISSED: u32 = 8;
pub const STAT_SLOTS: u32 = 9;
