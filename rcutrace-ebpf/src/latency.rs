//! `rcutrace gplat` / `srlat`: time from a function's entry (or one function's entry) to a
//! return, per thread and per timed function, and send each completed call to user space as
//! one sample (latency and attribution). User space builds the histograms and statistics.
//!
//! Each timed function has its own programs, with its index `timed` compiled in, so that one
//! thread can be inside several timed functions at once (synchronize_rcu() calling
//! synchronize_rcu_expedited()) and each call still gets its own start time.

use aya_ebpf::{
    EbpfContext,
    helpers::bpf_ktime_get_ns,
    macros::map,
    maps::{HashMap, PerCpuArray, RingBuf},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use rcutrace_common::latency::*;

use crate::{attribution, origin, own_work, window};

/// Bit `timed` set where that function's entry and return are the same function (srlat),
/// so that a second entry on a thread with a start recorded means its return was lost.
#[unsafe(no_mangle)]
static SAME_FUNCTION_MASK: u32 = 0;
/// Bit `timed` set where that function's first argument is the domain it waits on (the
/// `srcu_struct` of synchronize_srcu()), kept with each call in `run`.
#[unsafe(no_mangle)]
static DOMAIN_ARG_MASK: u32 = 0;
/// Only calls made by this process (thread group id) count; 0 keeps all.
#[unsafe(no_mangle)]
static TARGET_TGID: u32 = 0;
/// Only calls on this SRCU domain count, of the functions that take one (`DOMAIN_ARG_MASK`);
/// 0 keeps all (`gp --flavor trace` where tasks-trace RCU is one domain).
#[unsafe(no_mangle)]
static ONLY_DOMAIN: u64 = 0;

// Declared as small as they can be: only a run that times calls sizes them at load time
// (MAX_IN_FLIGHT entries, SAMPLE_RING_BYTES), so that the other commands do not pay for them.
#[map]
static IN_FLIGHT: HashMap<InFlightKey, InFlight> = HashMap::with_max_entries(1, 0);
#[map]
static SAMPLES: RingBuf = RingBuf::with_byte_size(1, 0);
#[map]
static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(MAX_TIMED * STAT_SLOTS, 0);

#[inline(always)]
fn add_stat(timed: u32, stat: u32) {
    if let Some(slot) = STATS.get_ptr_mut(timed * STAT_SLOTS + stat) {
        // Entry/return programs can be preempted on a preemptible kernel: add atomically.
        unsafe { crate::atomic::add(slot, 1) };
    }
}

/// Whether calls of this thread are timed at all (and their stages followed): not
/// rcutrace's own, nor those the tasks-RCU kthreads make for its reader probe's switching;
/// in `run`, only the command's and those of the work it caused.
#[inline(always)]
pub fn wanted(tgid: u32, tid: u32, is_self: bool) -> bool {
    caller_origin(tgid, tid, is_self).is_some()
}

/// `wanted`, with whose doing the call is where it is wanted (`origin::origin` in `run`,
/// `ORIGIN_NONE` elsewhere): looked up once.
#[inline(always)]
fn caller_origin(tgid: u32, tid: u32, is_self: bool) -> Option<u32> {
    use rcutrace_common::followed::ORIGIN_NONE;
    if origin::following() {
        let origin = origin::origin(tid);
        return (origin != ORIGIN_NONE).then_some(origin);
    }
    let target = window::constant(&TARGET_TGID);
    (!is_self && (target == 0 || tgid == target) && !window::switching_kthread(tgid))
        .then_some(ORIGIN_NONE)
}

/// Whether thread `tid` is inside a timed call of its own (not rcutrace's doing).
#[inline(always)]
pub fn in_wait(tid: u32) -> bool {
    let mut timed = 0;
    while timed < MAX_TIMED {
        let key = InFlightKey { tid, timed };
        if unsafe { IN_FLIGHT.get(&key) }.is_some_and(|call| call.start_ns != OWN_CALL_START) {
            return true;
        }
        timed += 1;
    }
    false
}

/// Whether timed function `timed` takes the domain it waits on first (`DOMAIN_ARG_MASK`).
#[inline(always)]
fn takes_domain(timed: u32) -> bool {
    window::constant(&DOMAIN_ARG_MASK) & (1 << timed) != 0
}

#[inline(always)]
fn on_entry<C: EbpfContext>(ctx: &C, timed: u32, domain: u64) {
    if !window::running() {
        return;
    }
    let (tgid, tid, is_self) = window::current();
    let Some(origin) = caller_origin(tgid, tid, is_self) else {
        return;
    };
    let key = InFlightKey { tid, timed };
    // A call on another domain is no entry of this run's: kept in flight without a start, as
    // rcutrace's own are, so that its return is dropped, not taken for an unmatched one.
    let only = window::constant(&ONLY_DOMAIN);
    if only != 0 && takes_domain(timed) && domain != only {
        let other = InFlight {
            start_ns: OWN_CALL_START,
            key: Default::default(),
        };
        let _ = IN_FLIGHT.insert(&key, &other, 0);
        return;
    }
    add_stat(timed, STAT_ENTRIES);
    // A left-out call is accounted for already, returned or not.
    if window::constant(&SAME_FUNCTION_MASK) & (1 << timed) != 0
        && unsafe { IN_FLIGHT.get(&key) }.is_some_and(|call| call.start_ns != OWN_CALL_START)
    {
        add_stat(timed, STAT_RETURNS_MISSED);
    }
    // rcutrace's doing: kept in flight without a start, so that its return is dropped rather
    // than taken for one whose entry came before the window.
    if own_work::on_behalf(tid, ctx.as_ptr()) {
        add_stat(timed, STAT_OWN_CALLS);
        let own = InFlight {
            start_ns: OWN_CALL_START,
            key: Default::default(),
        };
        if IN_FLIGHT.insert(&key, &own, 0).is_err() {
            add_stat(timed, STAT_LOST_START_MAP_FULL);
        }
        return;
    }
    let (mut attribution, stack_kept) = attribution::attribute(ctx, timed, tgid);
    // Both 0 but in `run`.
    attribution.origin = origin;
    attribution.domain = domain;
    if !stack_kept {
        add_stat(timed, STAT_LOST_STACK);
    }
    let call = InFlight {
        start_ns: unsafe { bpf_ktime_get_ns() },
        key: attribution,
    };
    if IN_FLIGHT.insert(&key, &call, 0).is_err() {
        add_stat(timed, STAT_LOST_START_MAP_FULL);
    }
}

#[inline(always)]
fn on_return(timed: u32) {
    if !window::running() {
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let (tgid, tid, is_self) = window::current();
    if !wanted(tgid, tid, is_self) {
        return;
    }
    let key = InFlightKey { tid, timed };
    let Some(call) = (unsafe { IN_FLIGHT.get(&key) }).copied() else {
        // Began before the window opened: no honest latency exists.
        add_stat(timed, STAT_UNMATCHED_RETURNS);
        return;
    };
    let _ = IN_FLIGHT.remove(&key);
    if call.start_ns == OWN_CALL_START {
        return;
    }
    let sample = Sample {
        start_ns: call.start_ns,
        kind: RECORD_SAMPLE,
        tid,
        nanos: now.saturating_sub(call.start_ns),
        key: call.key,
    };
    if !send(&sample) {
        add_stat(timed, STAT_LOST_RING_FULL);
    }
}

/// The entry function of timed function `timed` returned false: the call ends here with no
/// sample (an `rcu_gp_init()` that found no grace period to start), counted where its entry
/// was seen, so that a later entry does not silently replace it.
#[inline(always)]
fn on_found_nothing(timed: u32) {
    if !window::running() {
        return;
    }
    let (tgid, tid, is_self) = window::current();
    if !wanted(tgid, tid, is_self) {
        return;
    }
    // Deleting fails where no entry was seen: only calls timed from their entry count.
    if IN_FLIGHT.remove(&InFlightKey { tid, timed }).is_ok() {
        add_stat(timed, STAT_FOUND_NOTHING);
    }
}

// gplat's rcu_gp_init() (timed function 0) returning false.
program! {
    kretprobe fn timed_0_found_nothing_kretprobe(ctx: RetProbeContext) -> u32 {
        if ctx.ret::<u64>() & 0xff == 0 {
            on_found_nothing(0);
        }
        0
    }
}

program! {
    fexit fn timed_0_found_nothing_fexit(ctx: FExitContext) -> u32 {
        // rcu_gp_init() takes no argument: its return value comes first.
        if ctx.arg::<u64>(0) & 0xff == 0 {
            on_found_nothing(0);
        }
        0
    }
}

/// Sends one record to user space through the sample ring (latency samples, or another
/// command's records); false if the ring had no room.
#[inline(always)]
pub fn send<T>(record: &T) -> bool {
    SAMPLES.output::<T>(record, wakeup()).is_ok()
}

/// Sends one record and wakes user space at once, whatever the buffer holds.
#[inline(always)]
pub fn send_waking<T>(record: &T) -> bool {
    const BPF_RB_FORCE_WAKEUP: u64 = 2;
    SAMPLES.output::<T>(record, BPF_RB_FORCE_WAKEUP).is_ok()
}

/// Wake user space only once the buffer is a quarter full: a wake-up is an interrupt, and
/// user space reads the buffer at least every second anyway.
#[inline(always)]
fn wakeup() -> u64 {
    const BPF_RB_AVAIL_DATA: u64 = 0;
    const BPF_RB_NO_WAKEUP: u64 = 1;
    const BPF_RB_FORCE_WAKEUP: u64 = 2;
    if SAMPLES.query(BPF_RB_AVAIL_DATA) >= u64::from(SAMPLE_RING_BYTES / 4) {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    }
}

macro_rules! timed_programs {
    ($($timed:literal => $kprobe:ident, $fentry:ident, $kretprobe:ident, $fexit:ident;)*) => {$(
        program! {
            kprobe fn $kprobe(ctx: ProbeContext) -> u32 {
                let domain = if takes_domain($timed) { ctx.arg::<u64>(0).unwrap_or(0) } else { 0 };
                on_entry(&ctx, $timed, domain);
                0
            }
        }

        program! {
            fentry fn $fentry(ctx: FEntryContext) -> u32 {
                // A function of no argument has none to read: the verifier refuses the load,
                // unless the constant's branch is pruned.
                let domain = if takes_domain($timed) { crate::args::number(&ctx, 0) } else { 0 };
                on_entry(&ctx, $timed, domain);
                0
            }
        }

        program! {
            kretprobe fn $kretprobe(_ctx: RetProbeContext) -> u32 {
                on_return($timed);
                0
            }
        }

        program! {
            fexit fn $fexit(_ctx: FExitContext) -> u32 {
                on_return($timed);
                0
            }
        }
    )*};
}

// One set per timed function (MAX_TIMED); the probe table names them by index.
timed_programs! {
    0 => timed_0_entry_kprobe, timed_0_entry_fentry, timed_0_return_kretprobe, timed_0_return_fexit;
    1 => timed_1_entry_kprobe, timed_1_entry_fentry, timed_1_return_kretprobe, timed_1_return_fexit;
    2 => timed_2_entry_kprobe, timed_2_entry_fentry, timed_2_return_kretprobe, timed_2_return_fexit;
    3 => timed_3_entry_kprobe, timed_3_entry_fentry, timed_3_return_kretprobe, timed_3_return_fexit;
    4 => timed_4_entry_kprobe, timed_4_entry_fentry, timed_4_return_kretprobe, timed_4_return_fexit;
    5 => timed_5_entry_kprobe, timed_5_entry_fentry, timed_5_return_kretprobe, timed_5_return_fexit;
    6 => timed_6_entry_kprobe, timed_6_entry_fentry, timed_6_return_kretprobe, timed_6_return_fexit;
    7 => timed_7_entry_kprobe, timed_7_entry_fentry, timed_7_return_kretprobe, timed_7_return_fexit;
}
