//! `rcutrace gp`: each grace period's anatomy, as a stream of events (`GpEvent`) that user
//! space assembles. The programs keep only what decides cheaply whether an event is worth
//! sending: the grace period in progress (`GP_STATE`, written by the grace-period kthread's
//! programs, but for the mark of the one user space was woken for) and, per CPU, the last
//! grace period it reported for (`CPU_STATE`), so that the tick and context-switch hooks,
//! which run all the time, exit after a load or two unless a grace period is old or a reader
//! is blocked.
//!
//! Every program here but the kthread's milestones' and the report's is a kprobe or
//! kretprobe (the entries together on one kprobe-multi link where the kernel has them,
//! `gp_multi_kprobe`): these functions run in the
//! scheduler, the tick and RCU's own core with locks held, and a BPF trampoline takes
//! `rcu_read_lock()` itself (whose unlock, in `rcu_read_unlock_special()` or a context
//! switch, would recurse). Kernel structures are read at offsets user space took from the
//! kernel's BTF (aya builds no CO-RE relocations for Rust programs).

use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_current_comm, bpf_get_current_task, bpf_get_smp_processor_id, bpf_ktime_get_ns,
        bpf_probe_read_kernel, bpf_probe_read_kernel_str_bytes, generated::bpf_get_attach_cookie,
    },
    macros::map,
    maps::{Array, HashMap, PerCpuArray, ProgramArray},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext, TracePointContext},
};
use rcutrace_common::{attribution::NO_STACK, gp::*};

use crate::{attribution::keep_stack, latency, window};

mod srcu;
mod tasks;

/// Address of `rcu_state` (from /proc/kallsyms) and the byte offsets of the fields read.
#[unsafe(no_mangle)]
static RCU_STATE_ADDRESS: u64 = crate::window::UNSET_U64;
#[unsafe(no_mangle)]
static RCU_STATE_GP_SEQ: u32 = 0;
#[unsafe(no_mangle)]
static RCU_NODE_QSMASK: u32 = 0;
#[unsafe(no_mangle)]
static RCU_NODE_GRPLO: u32 = 0;
#[unsafe(no_mangle)]
static RCU_NODE_LEVEL: u32 = 0;
/// The level of the tree's leaves (`rcu_num_lvls - 1`): only a leaf's bits are CPUs.
#[unsafe(no_mangle)]
static RCU_LEAF_LEVEL: u32 = 0;
#[unsafe(no_mangle)]
static TASK_RCU_READ_LOCK_NESTING: u32 = 0;
/// Offsets of the `rcu:rcu_stall_warning` tracepoint's two string pointers in its record.
#[unsafe(no_mangle)]
static STALL_WARNING_RCUNAME: u32 = 0;
#[unsafe(no_mangle)]
static STALL_WARNING_MSG: u32 = 0;
/// 1: send events to user space (`gp`, `stall`, `serve`); 0: only keep the grace period's
/// state and counts for user space to read (`top`).
#[unsafe(no_mangle)]
static GP_EVENTS: u32 = 0;
/// A CPU still holding up a grace period this old is sampled at each of its ticks.
#[unsafe(no_mangle)]
static HOLDOUT_SAMPLE_AFTER_NS: u64 = crate::window::UNSET_U64 + 1;
/// A grace period (normal or expedited) this old wakes user space once (`EVENT_STALL_WAKE`);
/// `u64::MAX`: never (every command but `stall`).
#[unsafe(no_mangle)]
static STALL_WAKE_AFTER_NS: u64 = crate::window::UNSET_U64 + 2;
/// 1: send the expedited grace periods' events too (`gp`); 0: only keep `EXPEDITED_STATE`.
#[unsafe(no_mangle)]
static EXPEDITED_EVENTS: u32 = 0;
#[unsafe(no_mangle)]
static RCU_STATE_EXPEDITED_SEQUENCE: u32 = 0;
#[unsafe(no_mangle)]
static RCU_NODE_EXPMASK: u32 = 0;
/// Which argument of `rcu_report_exp_cpu_mult()` is the mask: 1 (`rnp, mask, wake`) on 6.1
/// and 6.12, 2 (`rnp, flags, mask_in, wake`) on 7.3; read from the kernel BTF.
#[unsafe(no_mangle)]
static EXP_REPORT_MASK_ARG: u32 = 1;

#[map]
static GP_STATE: Array<GpState> = Array::with_max_entries(1, 0);
/// Indexed by CPU; sized to the possible CPUs at load time.
#[map]
static CPU_STATE: Array<CpuState> = Array::with_max_entries(1, 0);
/// Readers switched out inside their critical section, by thread id; sized at load time.
#[map]
static BLOCKED: HashMap<u32, u64> = HashMap::with_max_entries(1, 0);
#[map]
static GP_LOSSES: PerCpuArray<u64> = PerCpuArray::with_max_entries(GP_LOSS_SLOTS, 0);
#[map]
static GP_COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(GP_COUNT_SLOTS, 0);
/// The expedited grace period in progress and the last one that ended (`EXPEDITED_*` slots).
#[map]
static EXPEDITED_STATE: Array<u64> = Array::with_max_entries(EXPEDITED_SLOTS, 0);
/// Per CPU, the leaf an expedited CPU report was just sent about and when
/// (`EXPEDITED_WALK_NODE`, `EXPEDITED_WALK_AT`): the walk up the tree that report makes
/// (`__rcu_report_exp_rnp()`, at once) is not a blocked reader's report.
#[map]
static EXPEDITED_WALK: PerCpuArray<u64> = PerCpuArray::with_max_entries(2, 0);
const EXPEDITED_WALK_NODE: u32 = 0;
const EXPEDITED_WALK_AT: u32 = 1;
/// A walk this long after the CPU report is not that report's: the kernel found the bits
/// already reported (another CPU cleared them after the program read them) and made none.
const EXPEDITED_WALK_WITHIN_NS: u64 = 10_000_000;

/// Counts one thing the programs could not report, in `GP_LOSSES` slot `slot` (`srlat
/// --stages`' programs count their lost events here too).
#[inline(always)]
pub fn lose(slot: u32) {
    if let Some(count) = GP_LOSSES.get_ptr_mut(slot) {
        unsafe { crate::atomic::add(count, 1) };
    }
}

/// Whether events go to user space at all (the verifier prunes what the constant decides).
#[inline(always)]
fn sending() -> bool {
    window::constant(&GP_EVENTS) != 0 && window::running()
}

#[inline(always)]
fn read<T>(address: u64) -> Option<T> {
    match unsafe { bpf_probe_read_kernel(address as *const T) } {
        Ok(value) => Some(value),
        Err(_) => {
            lose(GP_LOST_READS);
            None
        }
    }
}

#[inline(always)]
fn gp_seq_address() -> u64 {
    window::constant(&RCU_STATE_ADDRESS) + u64::from(window::constant(&RCU_STATE_GP_SEQ))
}

#[inline(always)]
fn state() -> Option<*mut GpState> {
    GP_STATE.get_ptr_mut(0)
}

/// Sends one event of `kind` about the current task and CPU, with a stack if asked.
#[inline(always)]
fn send<C: EbpfContext>(ctx: &C, kind: u32, value: u64, extra: u64, with_stack: bool) {
    let comm = bpf_get_current_comm().unwrap_or_default();
    let now = unsafe { bpf_ktime_get_ns() };
    send_with(ctx, now, kind, value, extra, with_stack, comm, [0; 16]);
}

/// Sends one event stamped `at_ns`, with `comm` and `text` as given.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn send_with<C: EbpfContext>(
    ctx: &C,
    at_ns: u64,
    kind: u32,
    value: u64,
    extra: u64,
    with_stack: bool,
    comm: [u8; 16],
    text: [u8; 16],
) {
    let (tgid, pid, _) = window::current();
    let stack = if with_stack {
        let stack = keep_stack(ctx);
        if stack == NO_STACK {
            lose(GP_LOST_STACKS);
        }
        stack
    } else {
        NO_STACK
    };
    let event = GpEvent {
        at_ns,
        kind,
        cpu: unsafe { bpf_get_smp_processor_id() },
        tgid,
        pid,
        value,
        extra,
        stack,
        comm,
        text,
    };
    if !latency::send(&event) {
        lose(GP_LOST_EVENTS);
    }
}

program! {
    kretprobe fn gp_request_kretprobe(ctx: RetProbeContext) -> u32 {
        // rcu_start_this_gp() returns a bool: true when the kthread must be woken.
        if sending() && ctx.ret::<u64>() & 0xff != 0 {
            send(&ctx, EVENT_REQUEST, 0, 0, false);
        }
        0
    }
}

/// `rcu_gp_init()`'s entry: the kthread begins a grace period.
#[inline(always)]
fn on_init_start<C: EbpfContext>(ctx: &C) {
    let Some(state) = state() else { return };
    // rcu_seq_start() will make the counter odd in its state bits: the new grace
    // period's number, which reports during the initialisation already carry.
    if let Some(current) = read::<u64>(gp_seq_address()) {
        unsafe {
            (*state).gp_seq = current.wrapping_add(1);
            (*state).waiting_since_ns = 0;
        }
    }
    if sending() {
        send(ctx, EVENT_INIT_START, 0, 0, false);
    }
}

/// `rcu_gp_init()`'s return, true when it started a grace period.
#[inline(always)]
fn on_init_end<C: EbpfContext>(ctx: &C, started: bool) {
    let Some(state) = state() else { return };
    let current = read::<u64>(gp_seq_address()).unwrap_or(0);
    unsafe {
        if started {
            (*state).gp_seq = current;
            (*state).waiting_since_ns = bpf_ktime_get_ns();
        } else {
            (*state).waiting_since_ns = 0;
        }
    }
    if sending() {
        send(ctx, EVENT_INIT_END, current, u64::from(started), false);
    }
}

program! {
    kprobe fn gp_init_kprobe(ctx: ProbeContext) -> u32 {
        on_init_start(&ctx);
        0
    }
}

program! {
    kretprobe fn gp_init_kretprobe(ctx: RetProbeContext) -> u32 {
        on_init_end(&ctx, ctx.ret::<u64>() & 0xff != 0);
        0
    }
}

// The grace period's milestones in the kthread have trampoline programs too, tried first: a
// kprobe is skipped while any other kprobe program, or a map operation from user space
// (rcutrace's own scrape among them), holds this CPU's BPF lock, as when the kthread
// preempts it; a grace period whose start and end were both skipped would go unseen. A
// trampoline is skipped only inside itself, which the kthread never is.
program! {
    fentry fn gp_init_fentry(ctx: FEntryContext) -> u32 {
        on_init_start(&ctx);
        0
    }
}

program! {
    fexit fn gp_init_fexit(ctx: FExitContext) -> u32 {
        // rcu_gp_init() takes no argument: its return value comes first.
        on_init_end(&ctx, ctx.arg::<u64>(0) & 0xff != 0);
        0
    }
}

/// Wakes user space once for each grace period, normal or expedited, that passes the age
/// `STALL_WAKE_AFTER_NS`. Called from the tick and from force-quiescent-state passes, which
/// keep coming while a grace period is held up: the tick on a CPU that holds it (or runs
/// what starves the kthread), the passes while a blocked reader holds it.
#[inline(always)]
fn wake_if_old() {
    let after = window::constant(&STALL_WAKE_AFTER_NS);
    if after == u64::MAX || !sending() {
        return;
    }
    let Some(state) = state() else { return };
    let (gp_seq, since, woken) = unsafe {
        (
            (*state).gp_seq,
            (*state).waiting_since_ns,
            (*state).woken_gp_seq,
        )
    };
    let normal = since != 0 && woken != gp_seq;
    let expedited_since = EXPEDITED_STATE.get(EXPEDITED_SINCE).copied().unwrap_or(0);
    let expedited_woken = EXPEDITED_STATE.get(EXPEDITED_WOKEN).copied().unwrap_or(0);
    let expedited = expedited_since != 0 && expedited_woken != expedited_since;
    if !normal && !expedited {
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    if normal && now.saturating_sub(since) >= after {
        unsafe { (*state).woken_gp_seq = gp_seq };
        wake(now, WAKE_NORMAL, gp_seq);
    }
    if expedited
        && now.saturating_sub(expedited_since) >= after
        && let Some(woken) = EXPEDITED_STATE.get_ptr_mut(EXPEDITED_WOKEN)
    {
        unsafe { *woken = expedited_since };
        wake(now, WAKE_EXPEDITED, expedited_since);
    }
}

/// `EVENT_STALL_WAKE` about `which` grace period (`extra`: its `gp_seq`, or the expedited
/// one's start), sent so that user space wakes now.
#[inline(always)]
fn wake(now: u64, which: u64, extra: u64) {
    let event = GpEvent {
        at_ns: now,
        kind: EVENT_STALL_WAKE,
        cpu: unsafe { bpf_get_smp_processor_id() },
        value: which,
        extra,
        stack: NO_STACK,
        ..GpEvent::default()
    };
    if !latency::send_waking(&event) {
        lose(GP_LOST_EVENTS);
    }
}

#[inline(always)]
fn on_fqs(ctx: &ProbeContext) -> u32 {
    wake_if_old();
    if sending() {
        send(ctx, EVENT_FQS, 0, 0, false);
    }
    0
}

program! {
    kprobe fn gp_fqs_kprobe(ctx: ProbeContext) -> u32 {
        on_fqs(&ctx)
    }
}

/// One quiescent-state report (`rcu_report_qs_rnp(mask, rnp, gps, flags)`, called with the
/// node's lock held): the bits of `mask` still awaited are sent with the node, for user space
/// to decode by the tree. At a leaf they are CPUs, marked here as reported; at an inner node
/// (a leaf whose last blocked reader left reports itself to its parent) they are children,
/// whose CPUs had all reported already.
#[inline(always)]
fn on_report<C: EbpfContext>(ctx: &C, mask: u64, node: u64, gps: u64) {
    let Some(state) = state() else { return };
    let gp_seq = unsafe { (*state).gp_seq };
    // The kernel ignores a report for another grace period, or for CPUs already in.
    if gps != gp_seq {
        return;
    }
    let Some(awaited) = read::<u64>(node + u64::from(window::constant(&RCU_NODE_QSMASK))) else {
        return;
    };
    let reported = mask & awaited;
    if reported == 0 {
        return;
    }
    // On a tree of one node (every machine of up to a leaf's CPUs) every report is a leaf's:
    // no level to read.
    let leaf_level = window::constant(&RCU_LEAF_LEVEL);
    let at_leaf = leaf_level == 0
        || match read::<u8>(node + u64::from(window::constant(&RCU_NODE_LEVEL))) {
            Some(level) => u32::from(level) == leaf_level,
            None => return,
        };
    if at_leaf {
        let Some(first_cpu) = read::<i32>(node + u64::from(window::constant(&RCU_NODE_GRPLO)))
        else {
            return;
        };
        let mut bits = reported;
        let mut bit = 0u32;
        while bit < 64 && bits != 0 {
            if bits & 1 != 0
                && let Some(cpu) = CPU_STATE.get_ptr_mut(first_cpu as u32 + bit)
            {
                unsafe { (*cpu).reported_gp_seq = gp_seq };
            }
            bits >>= 1;
            bit += 1;
        }
    }
    if sending() {
        send(ctx, EVENT_REPORT, reported, node, false);
    }
}

program! {
    kprobe fn gp_report_kprobe(ctx: ProbeContext) -> u32 {
        if let (Some(mask), Some(node), Some(gps)) =
            (ctx.arg::<u64>(0), ctx.arg::<u64>(1), ctx.arg::<u64>(2))
        {
            on_report(&ctx, mask, node, gps);
        }
        0
    }
}

// The report's one trampoline program, tried first: a kprobe is skipped whenever it fires
// inside another kprobe's handler on its CPU (a softirq's report on the way out of an
// interrupt that came in while one ran), and a report lost is a grace period whose last
// holdout is unknown. A trampoline is skipped only inside itself, and its `rcu_read_lock()`
// is harmless here: with the node's lock held and interrupts off, an unlock that finds
// work to do defers it.
program! {
    fentry fn gp_report_fentry(ctx: FEntryContext) -> u32 {
        on_report(&ctx, ctx.arg::<u64>(0), ctx.arg::<u64>(1), ctx.arg::<u64>(2));
        0
    }
}

/// `rcu_gp_cleanup()`'s entry: the wait for quiescent states is over.
#[inline(always)]
fn on_cleanup_start<C: EbpfContext>(ctx: &C) {
    if let Some(state) = state() {
        unsafe { (*state).waiting_since_ns = 0 };
    }
    if sending() {
        send(ctx, EVENT_CLEANUP_START, 0, 0, false);
    }
}

#[inline(always)]
fn on_cleanup_end<C: EbpfContext>(ctx: &C) {
    if sending() {
        send(ctx, EVENT_CLEANUP_END, 0, 0, false);
    }
}

program! {
    kprobe fn gp_cleanup_kprobe(ctx: ProbeContext) -> u32 {
        on_cleanup_start(&ctx);
        0
    }
}

program! {
    kretprobe fn gp_cleanup_kretprobe(ctx: RetProbeContext) -> u32 {
        on_cleanup_end(&ctx);
        0
    }
}

program! {
    fentry fn gp_cleanup_fentry(ctx: FEntryContext) -> u32 {
        on_cleanup_start(&ctx);
        0
    }
}

program! {
    fexit fn gp_cleanup_fexit(ctx: FExitContext) -> u32 {
        on_cleanup_end(&ctx);
        0
    }
}

/// Whether this CPU still owes the grace period in progress its quiescent state, and that
/// grace period's number.
#[inline(always)]
fn holding_out(cpu: u32) -> Option<(u64, u64)> {
    let state = state()?;
    let (gp_seq, since) = unsafe { ((*state).gp_seq, (*state).waiting_since_ns) };
    if since == 0 {
        return None;
    }
    let reported = CPU_STATE.get(cpu).map_or(0, |c| c.reported_gp_seq);
    (reported != gp_seq).then_some((gp_seq, since))
}

#[inline(always)]
fn on_context_switch(ctx: &ProbeContext) -> u32 {
    if !sending() {
        return 0;
    }
    let Some(nesting) = reader_nesting() else {
        return 0;
    };
    if nesting <= 0 {
        return 0;
    }
    let (_, pid, _) = window::current();
    if unsafe { BLOCKED.get(&pid) }.is_some() {
        return 0;
    }
    if BLOCKED.insert(&pid, &0, 0).is_err() {
        lose(GP_LOST_BLOCKED);
        return 0;
    }
    let cpu = unsafe { bpf_get_smp_processor_id() };
    // Stamped before the state is read, which may be a grace period behind by the time
    // the kernel queues the task (another CPU may end one and initialise the next in
    // between): user space then finds the next one's initialisation ended after this.
    // Only here: most switches leave above, and the clock costs on every one.
    let now = unsafe { bpf_ktime_get_ns() };
    let blocks = holding_out(cpu).map_or(0, |(gp_seq, _)| gp_seq);
    let comm = bpf_get_current_comm().unwrap_or_default();
    send_with(
        ctx,
        now,
        EVENT_BLOCK,
        nesting as u64,
        blocks,
        true,
        comm,
        [0; 16],
    );
    0
}

program! {
    kprobe fn gp_context_switch_kprobe(ctx: ProbeContext) -> u32 {
        on_context_switch(&ctx)
    }
}

#[inline(always)]
fn on_unblock(ctx: &ProbeContext) -> u32 {
    let (_, pid, _) = window::current();
    if unsafe { BLOCKED.get(&pid) }.is_none() {
        return 0;
    }
    let _ = BLOCKED.remove(&pid);
    if sending() {
        send(ctx, EVENT_UNBLOCK, 0, 0, false);
    }
    0
}

program! {
    kprobe fn gp_unblock_kprobe(ctx: ProbeContext) -> u32 {
        on_unblock(&ctx)
    }
}

#[inline(always)]
fn on_tick(ctx: &ProbeContext) -> u32 {
    wake_if_old();
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let Some((gp_seq, since)) = holding_out(cpu) else {
        return 0;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    if now.saturating_sub(since) < window::constant(&HOLDOUT_SAMPLE_AFTER_NS) || !sending() {
        return 0;
    }
    // rcu_sched_clock_irq(int user): whether the tick interrupted user mode.
    let user = ctx.arg::<u64>(0).unwrap_or(0);
    let (_, pid, _) = window::current();
    let value = holdout_sample_value(user, pid, reader_nesting().unwrap_or(0));
    send(ctx, EVENT_HOLDOUT_SAMPLE, value, gp_seq, true);
    0
}

program! {
    kprobe fn gp_tick_kprobe(ctx: ProbeContext) -> u32 {
        on_tick(&ctx)
    }
}

/// The current task's reader nesting, without the one the kernel holds around a kprobe's
/// program (it runs them under rcu_read_lock()).
#[inline(always)]
fn reader_nesting() -> Option<i32> {
    let offset = u64::from(window::constant(&TASK_RCU_READ_LOCK_NESTING));
    let task = unsafe { bpf_get_current_task() };
    read::<i32>(task + offset).map(|nesting| nesting - 1)
}

/// A NUL-terminated kernel string at `address`, cut to 15 bytes.
#[inline(always)]
fn kernel_string(address: u64) -> [u8; 16] {
    let mut text = [0u8; 16];
    if address != 0 {
        let _ = unsafe { bpf_probe_read_kernel_str_bytes(address as *const u8, &mut text) };
    }
    text
}

program! {
    tracepoint fn gp_stall_warning_tracepoint(ctx: TracePointContext) -> u32 {
        if !window::running() {
            return 0;
        }
        if let Some(count) = GP_COUNTS.get_ptr_mut(GP_COUNT_KERNEL_STALL_WARNINGS) {
            unsafe { crate::atomic::add(count, 1) };
        }
        if !sending() {
            return 0;
        }
        let field = |offset: &u32| unsafe { ctx.read_at::<u64>(window::constant(offset) as usize) };
        let (Ok(rcuname), Ok(msg)) = (field(&STALL_WARNING_RCUNAME), field(&STALL_WARNING_MSG)) else {
            lose(GP_LOST_READS);
            return 0;
        };
        send_with(
            &ctx,
            unsafe { bpf_ktime_get_ns() },
            EVENT_KERNEL_STALL_WARNING,
            0,
            0,
            false,
            kernel_string(rcuname),
            kernel_string(msg),
        );
        0
    }
}

/// Whether the expedited grace periods' events go to user space (`gp` only).
#[inline(always)]
fn sending_expedited() -> bool {
    window::constant(&EXPEDITED_EVENTS) != 0 && sending()
}

/// `rcu_state.expedited_sequence` now, or 0 where it cannot be read (counted) or where its
/// place is not known.
#[inline(always)]
fn expedited_sequence() -> u64 {
    let offset = window::constant(&RCU_STATE_EXPEDITED_SEQUENCE);
    if offset == 0 {
        return 0;
    }
    read::<u64>(window::constant(&RCU_STATE_ADDRESS) + u64::from(offset)).unwrap_or(0)
}

#[inline(always)]
fn on_expedited_start(ctx: &ProbeContext) -> u32 {
    // sync_rcu_exp_select_cpus(): an expedited grace period starts asking its CPUs.
    let sequence = expedited_sequence();
    if let (Some(since), Some(since_sequence), Some(last_start), Some(last_end)) = (
        EXPEDITED_STATE.get_ptr_mut(EXPEDITED_SINCE),
        EXPEDITED_STATE.get_ptr_mut(EXPEDITED_SINCE_SEQUENCE),
        EXPEDITED_STATE.get_ptr_mut(EXPEDITED_LAST_START),
        EXPEDITED_STATE.get_ptr_mut(EXPEDITED_LAST_END),
    ) {
        let now = unsafe { bpf_ktime_get_ns() };
        unsafe {
            // The one before is still waking its waiters (6.1), but it has ended: the
            // next can start only once its waiters were released.
            if *since != 0 {
                *last_start = *since;
                *last_end = now;
            }
            *since = now;
            *since_sequence = sequence;
        }
    }
    if sending_expedited() {
        send(ctx, EVENT_EXPEDITED_START, sequence, 0, false);
    }
    0
}

program! {
    kprobe fn gp_expedited_start_kprobe(ctx: ProbeContext) -> u32 {
        on_expedited_start(&ctx)
    }
}

program! {
    kretprobe fn gp_expedited_end_kretprobe(ctx: RetProbeContext) -> u32 {
        // rcu_exp_wait_wake() returns once every CPU reported and the waiters were woken.
        let sequence = expedited_sequence();
        if sending_expedited() {
            send(&ctx, EVENT_EXPEDITED_END, sequence, 0, false);
        }
        let (Some(since), Some(since_sequence), Some(last_start), Some(last_end)) = (
            EXPEDITED_STATE.get_ptr_mut(EXPEDITED_SINCE),
            EXPEDITED_STATE.get_ptr_mut(EXPEDITED_SINCE_SEQUENCE),
            EXPEDITED_STATE.get_ptr_mut(EXPEDITED_LAST_START),
            EXPEDITED_STATE.get_ptr_mut(EXPEDITED_LAST_END),
        ) else {
            return 0;
        };
        unsafe {
            // The next one began before this one's return, and is still in progress (the
            // sequence is where it was when it began): the start hook already recorded this
            // one's end.
            if *since_sequence != 0 && *since_sequence == sequence {
                return 0;
            }
            // One that began before the probes were attached has no start to pair with.
            if *since != 0 {
                *last_start = *since;
                *last_end = bpf_ktime_get_ns();
            }
            *since = 0;
        }
        0
    }
}

#[inline(always)]
fn on_expedited_report(ctx: &ProbeContext) -> u32 {
    // rcu_report_exp_cpu_mult(): CPUs of a leaf report (the IPI handler or the reader
    // it deferred to, on the CPU itself, or the selection for CPUs it found idle). The
    // bits still awaited are sent; the walk up the tree it then makes is its own.
    if !sending_expedited() {
        return 0;
    }
    // Both candidates are read at fixed offsets (the verifier refuses a context read at
    // a computed one), then the kernel's is chosen: x86-64 passes them in rsi and rdx.
    let Some(node) = ctx.arg::<u64>(0) else {
        return 0;
    };
    let (second, third) = unsafe {
        (
            core::ptr::read_volatile(&(*ctx.regs).rsi),
            core::ptr::read_volatile(&(*ctx.regs).rdx),
        )
    };
    let mask = if window::constant(&EXP_REPORT_MASK_ARG) == 2 {
        third
    } else {
        second
    };
    let Some(awaited) = read::<u64>(node + u64::from(window::constant(&RCU_NODE_EXPMASK))) else {
        return 0;
    };
    let reported = mask & awaited;
    // Bits already reported: the kernel returns at once, with no walk.
    if reported == 0 {
        return 0;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    if let (Some(walk), Some(at)) = (
        EXPEDITED_WALK.get_ptr_mut(EXPEDITED_WALK_NODE),
        EXPEDITED_WALK.get_ptr_mut(EXPEDITED_WALK_AT),
    ) {
        unsafe {
            *walk = node;
            *at = now;
        }
    }
    let comm = bpf_get_current_comm().unwrap_or_default();
    send_with(
        ctx,
        now,
        EVENT_EXPEDITED_REPORT,
        reported,
        node,
        false,
        comm,
        [0; 16],
    );
    0
}

program! {
    kprobe fn gp_expedited_report_kprobe(ctx: ProbeContext) -> u32 {
        on_expedited_report(&ctx)
    }
}

#[inline(always)]
fn on_expedited_walk(ctx: &ProbeContext) -> u32 {
    // __rcu_report_exp_rnp(rnp, wake, flags): a leaf's report walks up from here. After
    // a CPU report it is that report's; else a leaf's last blocked reader just left
    // (rcu_report_exp_rnp(), inlined into the reader's unlock on 6.1, 6.12 and 7.3).
    if !sending_expedited() {
        return 0;
    }
    let Some(node) = ctx.arg::<u64>(0) else {
        return 0;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    if let (Some(walk), Some(at)) = (
        EXPEDITED_WALK.get_ptr_mut(EXPEDITED_WALK_NODE),
        EXPEDITED_WALK.get_ptr_mut(EXPEDITED_WALK_AT),
    ) {
        let after_cpus =
            unsafe { *walk == node && now.saturating_sub(*at) < EXPEDITED_WALK_WITHIN_NS };
        unsafe { *walk = 0 };
        if after_cpus {
            return 0;
        }
    }
    let comm = bpf_get_current_comm().unwrap_or_default();
    send_with(
        ctx,
        now,
        EVENT_EXPEDITED_READER_REPORT,
        0,
        node,
        false,
        comm,
        [0; 16],
    );
    0
}

program! {
    kprobe fn gp_expedited_walk_kprobe(ctx: ProbeContext) -> u32 {
        on_expedited_walk(&ctx)
    }
}

// The rarer entry hooks above (`rcutrace_common::gp::HOOK_*`: not the tick or the context
// switch) through one kprobe-multi link where the kernel has them (6.12, 7.3): one ftrace
// update puts them all in and one unregistering takes them out, where a kprobe each costs
// one of each. The cookie user space attached each function with says which hook a hit is,
// and indexes the hook's own program in `GP_MULTI_HOOKS`, called by tail call: the verifier
// checks each alone, faster than all of them as one program.
#[map]
static GP_MULTI_HOOKS: ProgramArray = ProgramArray::with_max_entries(GP_MULTI_HOOK_SLOTS, 0);

program! {
    kprobe fn gp_multi_kprobe(ctx: ProbeContext) -> u32 {
        // SAFETY: the helper only reads the cookie of the link that ran this program.
        let hook = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) } as u32;
        // SAFETY: the hook's program takes the same context; on a slot left empty (a hook
        // whose program was not loaded) the call returns and the hit is passed over.
        unsafe { GP_MULTI_HOOKS.tail_call(&ctx, hook) };
        0
    }
}
