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

/// Every record in the sample ring begins with a time (u64) and a kind (u32) at byte 8, so
/// that a command running several program families at once tells their records apart by what
/// each says it is, not by its size: grace-period events (`GpEvent`, kinds
/// `gp::EVENT_*` and `stages::EVENT_*`, all below `RECORD_SAMPLE`) and latency samples.
pub const RECORD_KIND_OFFSET: usize = 8;
/// The kind of a `Sample`.
pub const RECORD_SAMPLE: u32 = 0x100;

/// One completed call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    /// When the call began (`bpf_ktime_get_ns()`: CLOCK_MONOTONIC).
    pub start_ns: u64,
    /// `RECORD_SAMPLE`.
    pub kind: u32,
    /// The thread that made the call.
    pub tid: u32,
    pub nanos: u64,
    pub key: Attribution,
}

/// The start an in-flight call has when it is rcutrace's own doing (no clock reads 0): its
/// return is dropped, and it is not counted as in flight.
pub const OWN_CALL_START: u64 = 0;

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
/// Entries of the calls to time: what the samples and losses are checked against.
pub const STAT_ENTRIES: u32 = 5;
/// Entries left out as rcutrace's own doing (`rcutrace_common::own_work`): not timed.
pub const STAT_OWN_CALLS: u32 = 6;
/// Calls whose entry function returned false, ending them with no sample: an
/// `rcu_gp_init()` that found no grace period to start (`gplat`).
pub const STAT_FOUND_NOTHING: u32 = 7;
pub const STAT_SLOTS: u32 = 8;

#[cfg(feature = "user")]
mod pod {
    unsafe impl aya::Pod for super::InFlightKey {}
    unsafe impl aya::Pod for super::InFlight {}
    unsafe impl aya::Pod for super::Sample {}
}

/// The kind of a ring record (`RECORD_KIND_OFFSET`), if it is long enough to have one.
pub fn record_kind(record: &[u8]) -> Option<u32> {
    let bytes = record.get(RECORD_KIND_OFFSET..RECORD_KIND_OFFSET + 4)?;
    Some(u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// A ring record as the `T` the programs wrote, if it is long enough to hold one. The one
/// place user space reads a record's bytes as a structure.
#[cfg(feature = "user")]
pub fn read_record<T: aya::Pod>(record: &[u8]) -> Option<T> {
    if record.len() < core::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: T is plain old data (aya::Pod: any bytes are a valid value) and the record
    // holds at least one; ring-buffer records are only 8-byte aligned by convention, so the
    // read is unaligned.
    Some(unsafe { core::ptr::read_unaligned(record.as_ptr().cast::<T>()) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gp::GpEvent;

    #[test]
    fn every_ring_record_says_its_kind_at_the_same_place() {
        assert_eq!(core::mem::offset_of!(Sample, kind), RECORD_KIND_OFFSET);
        assert_eq!(core::mem::offset_of!(GpEvent, kind), RECORD_KIND_OFFSET);
        let sample = Sample {
            kind: RECORD_SAMPLE,
            ..Default::default()
        };
        let bytes = unsafe {
            core::slice::from_raw_parts((&raw const sample).cast::<u8>(), size_of::<Sample>())
        };
        assert_eq!(record_kind(bytes), Some(RECORD_SAMPLE));
        assert_eq!(record_kind(&bytes[..10]), None);
    }
}
