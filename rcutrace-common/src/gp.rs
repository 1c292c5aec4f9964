//! The grace-period event stream behind `rcutrace gp` (and the stall watch that shares it).
//!
//! The eBPF programs only report what happened where and when, one `GpEvent` per hook hit,
//! through the same ring buffer the latency samples use; user space assembles each grace
//! period's anatomy from the stream (`rcutrace::model::anatomy`). The kernel keeps just enough
//! state to decide cheaply what is worth reporting: the grace period in progress and which
//! CPUs have reported their quiescent state for it, so that the tick hook samples only CPUs
//! that hold a grace period up.

/// A grace period was wanted and the grace-period kthread had to be woken
/// (`rcu_start_this_gp()` returned true).
pub const EVENT_REQUEST: u32 = 1;
/// The kthread entered `rcu_gp_init()`.
pub const EVENT_INIT_START: u32 = 2;
/// `rcu_gp_init()` returned; `value` is the new `rcu_state.gp_seq`, `extra` 1 if a grace
/// period started, 0 if the kthread woke for nothing.
pub const EVENT_INIT_END: u32 = 3;
/// A force-quiescent-state pass over a node (`force_qs_rnp()`).
pub const EVENT_FQS: u32 = 4;
/// Quiescent states reported to a node for the grace period in progress
/// (`rcu_report_qs_rnp()`): `value` the node's bits that were still awaited, `extra` the
/// node's address. At a leaf the bits are CPUs; at an inner node they are children whose
/// last blocked reader just left (user space decodes them by the kernel's tree,
/// `rcutrace::model::tree`). `tgid`/`pid` are the reporter's.
pub const EVENT_REPORT: u32 = 5;
/// `rcu_gp_cleanup()` entered: every quiescent state was in.
pub const EVENT_CLEANUP_START: u32 = 6;
/// `rcu_gp_cleanup()` returned: the grace period is over.
pub const EVENT_CLEANUP_END: u32 = 7;
/// A task was switched out inside a read-side critical section (it is queued on its node
/// as a blocked reader): `value` its nesting, `extra` the `gp_seq` of the grace period in
/// progress if its CPU had not yet reported a quiescent state for it (so the task blocks that
/// one too), else 0. `at_ns` is taken before the programs' state is read: a grace period
/// whose initialisation ended after it may have begun before the kernel queued the task (and
/// then waits for it). `stack` is where it was switched out.
pub const EVENT_BLOCK: u32 = 8;
/// A blocked reader left its critical section (`rcu_read_unlock_special()`).
pub const EVENT_UNBLOCK: u32 = 9;
/// A tick on a CPU that still holds up a grace period older than the sampling threshold:
/// `value` what the tick interrupted (`MODE_*`), `extra` the grace period's `gp_seq`;
/// `tgid`/`pid`/`comm` the task running there, `stack` the kernel stack under the tick.
pub const EVENT_HOLDOUT_SAMPLE: u32 = 10;
/// The kernel's own stall warning (the `rcu:rcu_stall_warning` tracepoint): `comm` holds
/// the RCU flavour's name (`rcu_preempt`), `text` the message (`StallDetected`, ...).
pub const EVENT_KERNEL_STALL_WARNING: u32 = 11;
/// The grace period in progress (`value` 0) or the expedited one (`value` 1) just passed the
/// age `STALL_WAKE_AFTER_NS` (`stall`'s first threshold), seen by the tick or a
/// force-quiescent-state pass: the one event that wakes user space at once, so that the
/// watch need not look every second to warn on time.
pub const EVENT_STALL_WAKE: u32 = 12;
/// An expedited grace period began selecting its CPUs (`sync_rcu_exp_select_cpus()`):
/// `value` is `rcu_state.expedited_sequence` then (0 if it could not be read). Sent, like the
/// three below, only when user space asked for the expedited events (`gp`).
pub const EVENT_EXPEDITED_START: u32 = 13;
/// The expedited grace period ended and its waiters were woken (`rcu_exp_wait_wake()`
/// returned): `value` is `rcu_state.expedited_sequence` then.
pub const EVENT_EXPEDITED_END: u32 = 14;
/// CPUs reported their expedited quiescent state (`rcu_report_exp_cpu_mult()`): `value` the
/// leaf's bits still awaited, `extra` the leaf's address; `cpu` where it ran: a report of
/// just that CPU is the CPU's own (its IPI handler, or the reader that handler deferred to),
/// others were found idle or offline when the CPUs were selected.
pub const EVENT_EXPEDITED_REPORT: u32 = 15;
/// A leaf's last blocked reader that the expedited grace period waited for left
/// (`rcu_report_exp_rnp()`, seen at `__rcu_report_exp_rnp()`): `extra` the leaf's address;
/// `pid`/`comm` the reader.
pub const EVENT_EXPEDITED_READER_REPORT: u32 = 16;
/// An SRCU grace period begins (`srcu_gp_start()`): `value` the domain (`struct srcu_struct
/// *`), `extra` its `srcu_gp_seq` as it begins (its state bits still idle).
pub const EVENT_SRCU_START: u32 = 17;
/// A run of an SRCU domain's grace-period work (`process_srcu()`) returned: `value` the
/// domain, `extra` its `srcu_gp_seq` then. A grace period ended in it if that passed its end.
pub const EVENT_SRCU_WORK_DONE: u32 = 18;
/// An SRCU domain's callbacks are about to run (`srcu_invoke_callbacks()` entered for one
/// CPU's): `value` the domain, `extra` its `srcu_gp_seq` then. It comes before the waits those
/// callbacks wake return, where the work that ended their grace period may not have yet.
pub const EVENT_SRCU_CALLBACKS: u32 = 27;
/// A tasks-RCU flavour's kthread begins a grace period (its wait function, such as
/// `rcu_tasks_wait_gp()`, is entered): `value` the flavour's `struct rcu_tasks *`.
pub const EVENT_TASKS_START: u32 = 19;
/// That grace period ends (the wait function returns): `value` as at its start.
pub const EVENT_TASKS_END: u32 = 20;
/// A scan of an SRCU domain's readers (`try_check_zero()`) found some: one event per CPU
/// whose count of readers that entered exceeds those that left, for the index scanned.
/// `value` the domain, `extra` the CPU in the high 32 bits and that excess in the low ones.
pub const EVENT_SRCU_READERS: u32 = 21;
/// A task still on classic tasks RCU's holdout list as a pass over it begins
/// (`check_all_holdout_tasks()`): `value` the flavour (`struct rcu_tasks *`), `extra` the
/// task's pid in the high 32 bits and the CPU it last ran on in the low ones, `text` its comm.
/// `pid`/`comm` are the flavour's kthread. Sent before the pass's `EVENT_TASKS_PASS`.
pub const EVENT_TASKS_HOLDOUT: u32 = 22;
/// A pass over the holdout list begins, its tasks sent just before: `value` the flavour,
/// `extra` 1 if more tasks were listed than `MAX_TASKS_HOLDOUTS_NAMED` (those are unnamed).
pub const EVENT_TASKS_PASS: u32 = 23;
/// A tasks-RCU grace period passes from one of its kernel's phases to the next, in its
/// kthread: `value` the flavour, `extra` the phase now beginning (`TASKS_PHASE_*`). The
/// grace period's start begins `pre_gp` (the flavour's `pregp_func`: classic tasks RCU waits
/// there for normal RCU's readers), its end closes `post_gp`.
pub const EVENT_TASKS_PHASE: u32 = 24;
/// The pre-GP step returned: the kthread scans the task list for holdouts.
pub const TASKS_PHASE_SCAN_TASKLIST: u64 = 1;
/// The post-scan step entered (6.1: waits for exiting tasks' SRCU; 6.12+: lists them).
pub const TASKS_PHASE_POST_SCAN: u64 = 2;
/// The post-scan step returned: the passes over the holdouts begin.
pub const TASKS_PHASE_HOLDOUTS: u64 = 3;
/// No holdout is left: the post-GP step entered (classic: a normal RCU grace period).
pub const TASKS_PHASE_POST_GP: u64 = 4;
/// A scan of an SRCU domain's readers (`try_check_zero()`) found none left: `value` the
/// domain, `extra` which scan of the grace period it was, as the kernel numbers them (1: of
/// the index new readers no longer enter; 2, after the flip between them: of the one they
/// entered until then).
pub const EVENT_SRCU_SCAN_CLEAR: u32 = 25;
/// A tick interrupted, in the kernel, a task classic tasks RCU still waits for (its
/// `task_struct.rcu_tasks_holdout` set), at most once per `TASKS_HOLDOUT_SAMPLE_EVERY_NS` for
/// each task: `pid`/`comm` the task, `stack` the kernel stack under the tick.
pub const EVENT_TASKS_HOLDOUT_SAMPLE: u32 = 26;
/// A holdout task is sampled at most this often: the passes over the holdouts are 100 ms to
/// 1 s apart, so a faster sample says no more of which task held a grace period.
pub const TASKS_HOLDOUT_SAMPLE_EVERY_NS: u64 = 100_000_000;
/// Tasks whose last sample is remembered; the least recently sampled are forgotten first.
pub const MAX_TASKS_HOLDOUTS_SAMPLED: u32 = 4096;
/// At most this many holdout tasks are named per pass.
pub const MAX_TASKS_HOLDOUTS_NAMED: u32 = 16;
/// At most this many CPUs are named per scan; past it readers are spread too thin to say.
pub const MAX_SRCU_READER_CPUS: u32 = 16;
/// At most this many possible CPUs are scanned for an SRCU domain's readers.
pub const MAX_SRCU_SCANNED_CPUS: u32 = 1024;
pub const WAKE_NORMAL: u64 = 0;
pub const WAKE_EXPEDITED: u64 = 1;

/// What a CPU was doing when a tick sampled it.
pub const MODE_KERNEL: u64 = 0;
pub const MODE_USER: u64 = 1;
pub const MODE_IDLE: u64 = 2;
/// Or'ed into a sample's mode: the interrupted task was inside `rcu_read_lock()` (known on
/// kernels whose tasks count their readers' nesting, CONFIG_PREEMPT_RCU).
pub const SAMPLE_IN_READER: u64 = 1 << 8;

/// A holdout sample's `value`: the CPU's mode and whether the interrupted task was in a
/// reader, from the tick's `user` argument (below 2^32: an `int`), the task's pid (0: the
/// idle task) and its reader nesting. Computed without a branch: the verifier of older
/// kernels walks the rest of the tick's program once for each value a branch leaves here
/// (6.1 verified it 13,958 instructions deep, a tenth of a second of the start, against
/// 3,882 this way).
#[inline(always)]
pub fn holdout_sample_value(user: u64, pid: u32, nesting: i32) -> u64 {
    let user = is_nonzero(user & 0xffff_ffff);
    let idle = (is_nonzero(u64::from(pid)) | user) ^ 1;
    // 1 when the nesting is above 0 (an i32's negation cannot overflow an i64).
    let in_reader = (i64::from(nesting).wrapping_neg() as u64) >> 63;
    (user * MODE_USER) | (idle * MODE_IDLE) | (in_reader * SAMPLE_IN_READER)
}

// A kernel-mode sample is one with neither of the other modes' bits.
const _: () = assert!(MODE_KERNEL == 0);

/// 1 if `value` (below 2^32) is not 0, else 0.
#[inline(always)]
fn is_nonzero(value: u64) -> u64 {
    value.wrapping_add(0xffff_ffff) >> 32
}

/// Bits of `rcu_state.gp_seq` that hold the grace period's state (the kernel's
/// `RCU_SEQ_CTR_SHIFT`, a macro, so not in BTF); each grace period advances it by
/// `1 << GP_SEQ_STATE_BITS`.
pub const GP_SEQ_STATE_BITS: u32 = 2;

/// Blocked readers that can be followed at once; more are counted as lost.
pub const MAX_BLOCKED: u32 = 4096;

/// One hook hit. Fixed-size so that the ring buffer's records need no framing.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpEvent {
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC.
    pub at_ns: u64,
    pub kind: u32,
    /// The CPU the hook ran on.
    pub cpu: u32,
    pub tgid: u32,
    pub pid: u32,
    pub value: u64,
    pub extra: u64,
    /// A kernel stack kept in the stack map (`attribution::stack_hash`), or `NO_STACK`.
    pub stack: u64,
    pub comm: [u8; 16],
    /// A short string some events carry (see each kind), NUL-padded.
    pub text: [u8; 16],
}

/// The grace period in progress, as the kthread's programs leave it for the others.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpState {
    /// `rcu_state.gp_seq` of the grace period being initialised or waited for.
    pub gp_seq: u64,
    /// When the wait for quiescent states began (`rcu_gp_init()` returned); 0 while none.
    pub waiting_since_ns: u64,
    /// The `gp_seq` user space was last woken for (`EVENT_STALL_WAKE`).
    pub woken_gp_seq: u64,
}

/// Per CPU: the last grace period it reported a quiescent state for.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuState {
    pub reported_gp_seq: u64,
}

/// Slots of the per-CPU `GP_COUNTS` array, kept whether or not events are sent (`serve`).
/// The kernel's own stall warnings (`rcu:rcu_stall_warning` hits).
pub const GP_COUNT_KERNEL_STALL_WARNINGS: u32 = 0;
pub const GP_COUNT_SLOTS: u32 = 1;

/// Slots of the per-CPU `GP_LOSSES` array: what the programs could not report.
/// An event the ring buffer had no room for.
pub const GP_LOST_EVENTS: u32 = 0;
/// A stack that could not be kept (an event went without it).
pub const GP_LOST_STACKS: u32 = 1;
/// A blocked reader not followed: the map of blocked readers was full.
pub const GP_LOST_BLOCKED: u32 = 2;
/// A kernel structure that could not be read (its event was not sent).
pub const GP_LOST_READS: u32 = 3;
pub const GP_LOSS_SLOTS: u32 = 4;

/// `EXPEDITED_STATE` (CLOCK_MONOTONIC ns, written by the expedited grace-period worker's
/// programs, but for `EXPEDITED_WOKEN`): when the expedited grace period in progress began
/// selecting its CPUs (0 while none is), and the start and end of the last one that ended.
pub const EXPEDITED_SINCE: u32 = 0;
pub const EXPEDITED_LAST_START: u32 = 1;
pub const EXPEDITED_LAST_END: u32 = 2;
/// The start (`EXPEDITED_SINCE`) of the one user space was last woken for.
pub const EXPEDITED_WOKEN: u32 = 3;
/// `rcu_state.expedited_sequence` as the one in progress began (0 where it cannot be read):
/// what tells its end from that of the one before, whose `rcu_exp_wait_wake()` can return
/// after it began (6.1).
pub const EXPEDITED_SINCE_SEQUENCE: u32 = 4;
pub const EXPEDITED_SLOTS: u32 = 5;

#[cfg(feature = "user")]
mod pod {
    unsafe impl aya::Pod for super::GpEvent {}
    unsafe impl aya::Pod for super::GpState {}
    unsafe impl aya::Pod for super::CpuState {}
}

/// The cookies of the entry hooks that one kprobe-multi link serves (`gp_multi_kprobe`, 6.12
/// and 7.3): each tells the link's program which hook a hit is, and is that hook's slot in its
/// table of programs. The kthread's milestones and the reports are not among them (their
/// trampolines are skipped less often than any kprobe), nor the tick and the context switch
/// (each CPU's hottest hooks, whose programs ran longer through the link than on kprobes).
pub const HOOK_FQS: u64 = 1;
pub const HOOK_UNBLOCK: u64 = 2;
pub const HOOK_EXPEDITED_START: u64 = 3;
pub const HOOK_EXPEDITED_REPORT: u64 = 4;
pub const HOOK_EXPEDITED_WALK: u64 = 5;
/// Room for every hook's program in the link's table of them, by cookie.
pub const GP_MULTI_HOOK_SLOTS: u32 = 6;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holdout_sample_says_its_mode_and_whether_it_was_in_a_reader() {
        // (user, pid, nesting) as the tick finds them.
        for (user, pid, nesting, value) in [
            (0, 42, 0, MODE_KERNEL),
            (1, 42, 0, MODE_USER),
            (0, 0, 0, MODE_IDLE),
            // User mode comes first, as the tick's own argument says it.
            (1, 0, 0, MODE_USER),
            (0, 42, 1, MODE_KERNEL | SAMPLE_IN_READER),
            (0, 42, 3, MODE_KERNEL | SAMPLE_IN_READER),
            (0, 0, 1, MODE_IDLE | SAMPLE_IN_READER),
            // A nesting below 0 is no reader.
            (0, 42, -1, MODE_KERNEL),
            (0, 42, i32::MIN, MODE_KERNEL),
            (0, 42, i32::MAX, MODE_KERNEL | SAMPLE_IN_READER),
            // Only the argument's low 32 bits are the int.
            (0xffff_ffff_0000_0000, 42, 0, MODE_KERNEL),
            (0xffff_ffff, u32::MAX, 0, MODE_USER),
        ] {
            assert_eq!(
                holdout_sample_value(user, pid, nesting),
                value,
                "user {user:#x}, pid {pid}, nesting {nesting}"
            );
        }
    }
}
