//! Telling rcutrace's own doing apart when other threads do it.
//!
//! rcutrace's attaching and detaching queue tasks-RCU callbacks (freeing a replaced BPF
//! trampoline image, an ftrace hash, a program array), and the tasks-RCU kthreads then run a
//! grace period for them, calling `synchronize_rcu()` on their way, and invoke the callbacks,
//! which queue more (`call_rcu_tasks()` again, `kfree_rcu()` in a kworker), up to seconds
//! after the attach returned. The programs follow that work by what it is, not by when:
//!
//! - every `rcu_head` that rcutrace's own process hands to a tasks-RCU queueing function is
//!   rcutrace's (`OWN_HEADS`), and so is the same head queued again later by anyone (the
//!   callbacks re-queue the head they were given); queued through normal RCU it is counted
//!   by no one and forgotten (the object is freed after that grace period);
//! - a tasks-RCU grace period is rcutrace's when every callback it waits for (the kthread's
//!   segmented list between its done and its wait tails, walked when the grace period
//!   begins) is rcutrace's; its kthread's calls from then until it has invoked those
//!   callbacks are rcutrace's doing. A grace period that also serves anyone else would have
//!   run anyway: its calls are counted.
//! - SRCU grace periods run in kworkers (SRCU-fast domains, such as 7.3's tasks-trace RCU,
//!   call `synchronize_rcu()` in each of them): the same rule, applied to the grace period of
//!   the domain whose work the kworker runs. The callbacks it serves are those of the list
//!   rcutrace queued on whose segment waits for that grace period's number; a domain polled
//!   by anyone else (`start_poll_synchronize_srcu()`, no callback to see) has its grace
//!   periods up to the one polled for counted.

/// Per-CPU `OWN_STATS` slots: what the attribution decided, for the run's notes.
/// Tasks-RCU grace periods that only rcutrace's callbacks needed.
pub const STAT_OWN_GRACE_PERIODS: u32 = 0;
/// Grace periods whose list was longer than the walk's bound, or which a kthread ran over
/// more than one callback list: counted as the system's, since they cannot be told apart.
pub const STAT_UNKNOWN_GRACE_PERIODS: u32 = 1;
/// Calls of counted or timed functions left out as rcutrace's doing.
pub const STAT_CALLS_LEFT_OUT: u32 = 2;
pub const OWN_STAT_SLOTS: u32 = 3;

/// Most callbacks a grace period's list is walked for.
pub const MAX_BATCH: u32 = 128;

/// Most heads remembered (least recently queued forgotten first).
pub const MAX_OWN_HEADS: u32 = 4096;

/// Most SRCU domains followed at once (rcutrace queues on a few: tasks-trace, tracepoints').
pub const MAX_SRCU_DOMAINS: u32 = 64;

/// Most threads between an SRCU request and its queueing at once.
pub const MAX_SRCU_PENDING: u32 = 256;

/// What the programs know about one tasks-RCU kthread, indexed like `TASKS_RCU_PIDS`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Kthread {
    /// The callback list (`struct rcu_segcblist *`) the kthread last advanced; 0: none yet.
    pub cblist: u64,
    /// Non-zero while the kthread does a grace period (and its callbacks) for rcutrace alone.
    pub own: u32,
    /// Non-zero once the kthread was seen with a second list (per-CPU callback queues): its
    /// grace periods are then never rcutrace's alone.
    pub several_lists: u32,
}
