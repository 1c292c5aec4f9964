//! `rcutrace gplat` / `srlat`: time from a function's entry (or one function's entry) to a
//! return, per thread, aggregated in the kernel into a display histogram, a fine histogram
//! for percentiles, and exact statistics. Nothing is sent to user space per event.
//!
//! The parameters are constants set by the loader before the programs load, so the verifier
//! sees them as known values and no map lookup is needed to read them.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{fentry, fexit, kprobe, kretprobe, map},
    maps::{Array, HashMap, PerCpuArray},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use aya_log_ebpf::debug;
use rcutrace_common::{hist, latency::*};

#[unsafe(no_mangle)]
static HIST_MODE: u32 = MODE_LOG2;
/// Nanoseconds per display unit (1, 1000 or 1000000).
#[unsafe(no_mangle)]
static UNIT_NS: u64 = 1;
/// Linear histogram bounds (MODE_LINEAR) or bucket width (MODE_BUCKETS uses STEP only).
#[unsafe(no_mangle)]
static LINEAR_MIN: u64 = 0;
#[unsafe(no_mangle)]
static LINEAR_MAX: u64 = 1;
#[unsafe(no_mangle)]
static LINEAR_STEP: u64 = 1;
/// Non-zero when the entry and the return belong to the same function (srlat), so that a
/// second entry on a thread with a start recorded means its return was lost.
#[unsafe(no_mangle)]
static SAME_FUNCTION: u32 = 0;
/// Only calls made by this process (thread group id) count; 0 keeps all.
#[unsafe(no_mangle)]
static TARGET_TGID: u32 = 0;

/// Set by user space when the window ends, so that nothing changes while the maps are read
/// and the programs detach one after the other.
#[map]
static CONTROL: Array<u32> = Array::with_max_entries(CONTROL_SLOTS, 0);

#[inline(always)]
pub(crate) fn stopped() -> bool {
    CONTROL.get(CONTROL_STOPPED).is_some_and(|&flag| flag != 0)
}

/// Start time of each call in flight, by thread id.
#[map]
static IN_FLIGHT: HashMap<u32, u64> = HashMap::with_max_entries(MAX_IN_FLIGHT, 0);
#[map]
static DISPLAY: PerCpuArray<u64> = PerCpuArray::with_max_entries(DISPLAY_SLOTS, 0);
#[map]
static FINE: PerCpuArray<u64> = PerCpuArray::with_max_entries(FINE_SLOTS, 0);
#[map]
static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(STAT_SLOTS, 0);
/// Sparse buckets for MODE_BUCKETS: `value / LINEAR_STEP` to count.
#[map]
static BUCKETS: HashMap<u64, u64> = HashMap::with_max_entries(SPARSE_BUCKETS, 0);

#[inline(always)]
fn constant<T: Copy>(value: &T) -> T {
    // Read through a volatile pointer so the compiler keeps the load of the patched constant.
    unsafe { core::ptr::read_volatile(value) }
}

#[inline(always)]
fn add(map: &PerCpuArray<u64>, index: u32, amount: u64) {
    if let Some(slot) = map.get_ptr_mut(index) {
        // Entry/return programs can be preempted on a preemptible kernel: add atomically.
        unsafe { crate::atomic::add(slot, amount) };
    }
}

#[inline(always)]
fn raise_to(index: u32, value: u64) {
    if let Some(slot) = STATS.get_ptr_mut(index) {
        unsafe {
            if value > *slot {
                *slot = value;
            }
        }
    }
}

#[inline(always)]
fn on_entry() {
    if stopped() {
        return;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let target = constant(&TARGET_TGID);
    if target != 0 && (pid_tgid >> 32) as u32 != target {
        return;
    }
    let tid = pid_tgid as u32;
    if constant(&SAME_FUNCTION) != 0 && unsafe { IN_FLIGHT.get(tid) }.is_some() {
        add(&STATS, STAT_RETURNS_MISSED, 1);
    }
    let now = unsafe { bpf_ktime_get_ns() };
    if IN_FLIGHT.insert(tid, now, 0).is_err() {
        add(&STATS, STAT_LOST_START_MAP_FULL, 1);
    }
}

#[inline(always)]
fn on_return<C: aya_ebpf::EbpfContext>(ctx: &C) {
    if stopped() {
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(start) = (unsafe { IN_FLIGHT.get(tid) }).copied() else {
        // Began before tracing did (or was filtered out at entry): no honest latency exists.
        if constant(&TARGET_TGID) == 0 {
            add(&STATS, STAT_UNMATCHED_RETURNS, 1);
        }
        return;
    };
    let _ = IN_FLIGHT.remove(tid);
    record(ctx, now.saturating_sub(start));
}

#[inline(always)]
fn record<C: aya_ebpf::EbpfContext>(ctx: &C, nanos: u64) {
    let value = hist::div(nanos, constant(&UNIT_NS));
    let linear = hist::Linear {
        min: constant(&LINEAR_MIN),
        max: constant(&LINEAR_MAX),
        step: constant(&LINEAR_STEP),
    };
    match constant(&HIST_MODE) {
        MODE_LINEAR => add(&DISPLAY, linear.slot(value) as u32, 1),
        MODE_BUCKETS => bump_bucket(ctx, hist::div(value, linear.step)),
        _ => add(&DISPLAY, hist::log2_slot(value as i64), 1),
    }
    add(&FINE, hist::fine_slot(nanos), 1);
    add(&STATS, STAT_COUNT, 1);
    add(&STATS, STAT_SUM, value);
    add(&STATS, STAT_SUM_NS, nanos);
    raise_to(STAT_MAX, nanos);
    raise_to(STAT_MIN_INVERTED, !nanos);
}

#[inline(always)]
fn bump_bucket<C: aya_ebpf::EbpfContext>(ctx: &C, bucket: u64) {
    if let Some(count) = BUCKETS.get_ptr_mut(bucket) {
        unsafe { crate::atomic::add(count, 1) };
        return;
    }
    // BPF_NOEXIST: if another CPU created the bucket meanwhile, add to it instead.
    if BUCKETS.insert(bucket, 1, 1).is_ok() {
        return;
    }
    if let Some(count) = BUCKETS.get_ptr_mut(bucket) {
        unsafe { crate::atomic::add(count, 1) };
    } else {
        add(&STATS, STAT_LOST_BUCKET_MAP_FULL, 1);
        debug!(ctx, "bucket map full: lost a sample in bucket {}", bucket);
    }
}

#[kprobe]
pub fn latency_entry_kprobe(_ctx: ProbeContext) -> u32 {
    on_entry();
    0
}

#[fentry]
pub fn latency_entry_fentry(_ctx: FEntryContext) -> u32 {
    on_entry();
    0
}

#[kretprobe]
pub fn latency_return_kretprobe(ctx: RetProbeContext) -> u32 {
    on_return(&ctx);
    0
}

#[fexit]
pub fn latency_return_fexit(ctx: FExitContext) -> u32 {
    on_return(&ctx);
    0
}
