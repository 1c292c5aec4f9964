//! The tracing window and rcutrace's own process, as every program family sees them.

use aya_ebpf::{helpers::bpf_get_current_pid_tgid, macros::map, maps::Array};
use rcutrace_common::latency::{CONTROL_RUNNING, CONTROL_SLOTS, TASKS_RCU_KTHREADS};

/// rcutrace's own process: its attaching, reading and detaching call RCU updaters too, and
/// those are not the system's doing.
#[unsafe(no_mangle)]
static SELF_TGID: u32 = 0;

/// The tasks-RCU kthreads' pids, set only when rcutrace switches its sampled reader probe on
/// and off (0: none). Detaching a kprobe at a function's entry unregisters an ftrace hook and
/// a perf trace event, which wait for tasks-RCU grace periods, and these threads call
/// synchronize_rcu() to make them, some after the detach has returned: their updater calls
/// are then rcutrace's doing.
#[unsafe(no_mangle)]
static TASKS_RCU_PIDS: [u32; TASKS_RCU_KTHREADS] = [0; TASKS_RCU_KTHREADS];

/// Written by user space: `CONTROL_RUNNING` is set once every probe is attached and cleared
/// before the first is detached.
#[map]
static CONTROL: Array<u32> = Array::with_max_entries(CONTROL_SLOTS, 0);

/// The default of every u64 load-time constant (plus a small index, one per constant): never
/// a value the code also takes a reference to. The compiler merges an identical constant, such
/// as the `&0` a map insertion starts from, into a zero-valued `static`, and user space's
/// patching of that static at load time then changed the other (seen: serve's keyed counts
/// began at 10,000,000, the value given to HOLDOUT_SAMPLE_AFTER_NS). Programs run only with
/// their constants set, so the default is never used.
pub const UNSET_U64: u64 = 0x5243_5554_5241_0000;

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

/// Whether `tgid` is a tasks-RCU kthread doing rcutrace's probe switching.
#[inline(always)]
pub fn switching_kthread(tgid: u32) -> bool {
    let pids = constant(&TASKS_RCU_PIDS);
    // Without sampling every pid is 0: the verifier knows the constant and drops the rest.
    pids[0] != 0 && tgid != 0 && (pids[0] == tgid || pids[1] == tgid || pids[2] == tgid)
}

/// `(tgid, tid)` of the current task, and whether it is rcutrace itself.
#[inline(always)]
pub fn current() -> (u32, u32, bool) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    (tgid, pid_tgid as u32, tgid == constant(&SELF_TGID))
}
