//! The tracing window and rcutrace's own process, as every program family sees them.

use aya_ebpf::{helpers::bpf_get_current_pid_tgid, macros::map, maps::Array};
use rcutrace_common::latency::{CONTROL_RUNNING, CONTROL_SLOTS};

/// rcutrace's own process: its attaching, reading and detaching call RCU updaters too, and
/// those are not the system's doing.
#[unsafe(no_mangle)]
static SELF_TGID: u32 = 0;

/// Written by user space: `CONTROL_RUNNING` is set once every probe is attached and cleared
/// before the first is detached.
#[map]
static CONTROL: Array<u32> = Array::with_max_entries(CONTROL_SLOTS, 0);

/// Reads a load-time constant through a volatile pointer so the compiler keeps the load of
/// the patched value (the verifier then knows it and prunes the branches it decides).
#[inline(always)]
pub fn constant<T: Copy>(value: &T) -> T {
    unsafe { core::ptr::read_volatile(value) }
}

#[inline(always)]
pub fn running() -> bool {
    CONTROL.get(CONTROL_RUNNING).is_some_and(|&flag| flag != 0)
}

/// `(tgid, tid)` of the current task, and whether it is rcutrace itself.
#[inline(always)]
pub fn current() -> (u32, u32, bool) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    (tgid, pid_tgid as u32, tgid == constant(&SELF_TGID))
}
