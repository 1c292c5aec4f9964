//! Layout of the maps behind `rcutrace run`: the command's threads (its process tree), the
//! work items they queued and the kworkers running them, and their time off the CPU.

/// The updaters `run` times in the command and in the work it causes, where the kernel has
/// them (at most `latency::MAX_TIMED` with `--func`'s): every way a caller waits for a grace
/// period or for callbacks. Nested waits (synchronize_net() calling synchronize_rcu()) are
/// each timed; the command's total counts the time once.
pub const RUN_WAITS: [&str; 7] = [
    "synchronize_rcu",
    "synchronize_rcu_expedited",
    "rcu_barrier",
    "synchronize_srcu",
    "synchronize_rcu_tasks",
    "synchronize_rcu_tasks_trace",
    "synchronize_net",
];

/// Threads of the command's tree followed at once; a fork past this is counted as lost.
pub const MAX_FOLLOWED_THREADS: u32 = 32768;
/// Work items queued by the command (or by work it caused) not yet run.
pub const MAX_CAUSED_WORK: u32 = 4096;

/// The value of a `TREE` entry: one of the command's threads, or the thread of rcutrace that
/// launches it (whose forks are followed, and nothing else).
pub const TREE_COMMAND: u8 = 0;
pub const TREE_LAUNCHER: u8 = 1;

/// `Attribution::origin` of an event: not from a followed thread (every command but `run`).
pub const ORIGIN_NONE: u32 = 0;
/// From one of the command's own threads.
pub const ORIGIN_COMMAND: u32 = 1;
/// From a kworker running a work item the command's threads (or work they caused) queued.
pub const ORIGIN_CAUSED_WORK: u32 = 2;

/// Slots of the per-CPU `FOLLOW_COUNTS` array.
/// Nanoseconds the command's threads spent switched out asleep (or blocked).
pub const FOLLOW_OFF_CPU_ASLEEP_NS: u32 = 0;
/// Nanoseconds they spent switched out while runnable (preempted: waiting for a CPU).
pub const FOLLOW_OFF_CPU_RUNNABLE_NS: u32 = 1;
/// Threads that joined the tree (the command's first included).
pub const FOLLOW_THREADS: u32 = 2;
/// Forks into the tree that could not be followed: the thread map was full.
pub const FOLLOW_LOST_THREADS: u32 = 3;
/// Work items queued by the tree (or by work it caused).
pub const FOLLOW_WORK_QUEUED: u32 = 4;
/// Of those, ones that could not be followed: the work map was full.
pub const FOLLOW_LOST_WORK: u32 = 5;
/// Work items run to their end.
pub const FOLLOW_WORK_DONE: u32 = 6;
/// Switches back in whose switch out was not recorded (the off-CPU map was full, or the
/// thread was switched out before it joined): that stretch is not counted.
pub const FOLLOW_LOST_SWITCHES: u32 = 7;
/// Of the off-CPU time, the part spent inside a timed wait (asleep, and runnable).
pub const FOLLOW_IN_WAITS_ASLEEP_NS: u32 = 8;
pub const FOLLOW_IN_WAITS_RUNNABLE_NS: u32 = 9;
pub const FOLLOW_SLOTS: u32 = 10;

/// `prev_state` in `sched:sched_switch` at or above this is the kernel's mark of a preempted
/// task (`TASK_REPORT_MAX`); 0 is a task that gave the CPU up while runnable.
pub const PREEMPTED_STATE: u64 = 0x100;

/// Whether a task switched out with `prev_state` still wants the CPU.
#[inline(always)]
pub fn runnable(prev_state: u64) -> bool {
    prev_state == 0 || prev_state >= PREEMPTED_STATE
}

/// A followed thread's switch out: when, and whether it was still runnable.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SwitchedOut {
    pub since_ns: u64,
    pub runnable: u32,
    /// Switched out inside a timed wait (a thread leaves a wait only on the CPU).
    pub in_wait: u32,
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for SwitchedOut {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeping_states_are_not_runnable_and_preemption_is() {
        assert!(runnable(0));
        assert!(runnable(PREEMPTED_STATE));
        assert!(!runnable(1)); // S
        assert!(!runnable(2)); // D
        assert!(!runnable(0x80)); // I
    }
}
