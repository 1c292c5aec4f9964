// SPDX-License-Identifier: GPL-2.0
/*
 * rcutrace_test: exact ground truth for rcutrace's tests. It calls RCU update-side functions
 * on command, a known number of times, from the commanding process, and counts what it did.
 *
 * Interface: /proc/rcutrace_test (root only).
 *
 * Write one line "OP N" or "OP N ARG". The write performs OP N times, synchronously, in the
 * writing process (except `flood`, see below), and returns when all N are done. Errors:
 * EINVAL for a malformed line, an unknown OP or a bad N/ARG; EOPNOTSUPP for an OP whose kernel
 * function this kernel lacks or does not export to modules; EINTR when the writer is killed
 * part-way (the units done so far stay done); ENOMEM.
 *
 * Each unit of N makes exactly one call of the kernel function the op is named after, and
 * no other RCU update-side call, except where noted:
 *   call_rcu, call_rcu_hurry     one call with callback rcutrace_test_cb / rcutrace_test_hurry_cb
 *   kfree_rcu                    kfree_rcu() on a kmalloc'd object: one kvfree_call_rcu()
 *   call_srcu                    on the module's own srcu_struct, callback rcutrace_test_srcu_cb
 *   call_rcu_tasks, call_rcu_tasks_trace, call_rcu_tasks_rude
 *                                callbacks rcutrace_test_tasks_cb, _tasks_trace_cb, _tasks_rude_cb
 *   synchronize_rcu, synchronize_rcu_expedited, rcu_barrier, synchronize_rcu_tasks,
 *   rcu_barrier_tasks, synchronize_rcu_tasks_trace, rcu_barrier_tasks_trace,
 *   synchronize_rcu_tasks_rude, rcu_barrier_tasks_rude
 *                                one plain call
 *   synchronize_srcu, synchronize_srcu_expedited, srcu_barrier, get_state_synchronize_srcu,
 *   start_poll_synchronize_srcu  one call on the module's own srcu_struct
 *   get_state_synchronize_rcu, start_poll_synchronize_rcu, start_poll_synchronize_rcu_expedited,
 *   and their _full forms         one call (the _full ones into an on-stack rcu_gp_oldstate)
 *   poll_state_synchronize_rcu, cond_synchronize_rcu, cond_synchronize_rcu_expedited and their
 *   _full forms, poll_state_synchronize_srcu
 *                                one call on an already-completed cookie (returns at once, never
 *                                waits). The cookie comes once per write from
 *                                get_completed_synchronize_rcu(_full)(), which no RCU updater
 *                                count includes; for SRCU it is SRCU_GET_STATE_COMPLETED where
 *                                the kernel defines it, else 0 (which an SRCU sequence number
 *                                has always passed). With ARG 1 the cond_* ops instead take a
 *                                fresh cookie per unit from get_state_synchronize_rcu(_full)()
 *                                and so really wait for a grace period: one extra call per unit.
 *   dynamic_srcu N               an srcu_struct of its own, kmalloc'd and initialised by
 *                                rcutrace_test_init_dynamic_srcu(), then N synchronize_srcu()
 *                                on it: an SRCU domain no symbol names
 *   call_rcu_delayed N MS        inside one rcu_read_lock() section: N call_rcu() with callback
 *                                rcutrace_test_delayed_cb, then a busy-wait of MS ms (MS <= 100)
 *                                on ktime_get_ns(), then rcu_read_unlock(): every one of those
 *                                callbacks waits >= MS ms.
 *   call_rcu_in_kprobe N         N call_rcu() with callback rcutrace_test_in_kprobe_cb, each made
 *                                by the handler of a kprobe the op registers on a function of
 *                                its own: the kernel skips every other kprobe hit on that CPU
 *                                meanwhile (counted in that kprobe's nmissed), so a kprobe on the
 *                                queueing path misses each of these exactly.
 *   flood N                      N call_rcu() with callback rcutrace_test_flood_cb, split evenly
 *                                across the online CPUs and queued by a work item bound to each
 *                                (so from kworkers, not the writer); returns when all are queued.
 *   hold_cpu C MS                on CPU C (the writer moves there, and back after): inside
 *                                rcu_read_lock() with preemption off, one
 *                                start_poll_synchronize_rcu() (so a grace period is wanted),
 *                                then a busy-wait of MS ms (MS <= 30000) in
 *                                rcutrace_test_hold_spin(): CPU C holds that grace period up;
 *                                then, the reader left, a 50 ms sleep on CPU C (its quiescent
 *                                state) before the writer moves back.
 *   block_reader N MS            N times: inside rcu_read_lock(), one
 *                                start_poll_synchronize_rcu(), then sleeps MS ms (by ktime) in
 *                                rcutrace_test_block_in_reader() (MS <= 30000): the writer is a
 *                                blocked reader that holds the grace period up. The kernel warns
 *                                once about the voluntary switch inside a reader.
 *   spin_preempt_off N           holds the CPU N ms with preemption off (the stuck-guest op)
 *   hold_srcu C MS               on CPU C (as hold_cpu moves): srcu_read_lock() on the module's
 *                                srcu_struct, one start_poll_synchronize_srcu() (so an SRCU grace
 *                                period is wanted), then asleep MS ms (by ktime; MS <= 30000) in
 *                                rcutrace_test_hold_srcu_reader(), then srcu_read_unlock(): CPU
 *                                C's count holds every SRCU grace period of that domain up.
 *   migrate_srcu A B             srcu_read_lock() on the module's srcu_struct on CPU A, then
 *                                srcu_read_unlock() on CPU B: A's count of readers stays one
 *                                ahead and B's one behind (as a reader preempted and moved)
 *   hold_task C MS               on CPU C: busy MS ms (MS <= 5000) in rcutrace_test_hold_task(),
 *                                preemptible (letting others run) but never switching out of
 *                                its own accord nor returning to user mode: the writer is a
 *                                tasks-RCU holdout.
 *   hold_trace C MS              on CPU C: rcu_read_lock_trace(), asleep MS ms (by ktime;
 *                                MS <= 30000) in rcutrace_test_hold_trace_reader(), then
 *                                rcu_read_unlock_trace(): the writer holds every tasks-trace
 *                                grace period up (since 7.0 an SRCU reader on CPU C).
 *   reset N                      zeroes every counter below (N is ignored).
 * The `uses OP:` lines of the read-out list the kernel functions each op calls.
 *
 * Read: one "name: value" line per item, in this order:
 *   ops: OP OP ...                 the ops this kernel supports
 *   uses OP: FUNC ...              the kernel functions one write of OP calls
 *   calls FUNC: N                  calls the module made of kernel function FUNC (since load or reset)
 *   called_ns FUNC: N              when the module last called FUNC (ktime_get_ns() just before)
 *   queued CALLBACK: N             callbacks of that function queued
 *   invoked CALLBACK: N            callbacks of that function invoked
 *   wait_min_ns CALLBACK: N        shortest queue-to-invocation time seen by the callback (0: none)
 *   wait_max_ns CALLBACK: N        longest one
 *   reader_held_ns call_rcu_delayed: N  how long the last call_rcu_delayed held its reader
 *                                  after its last call_rcu() (a lower bound of every wait)
 *   flood_queued cpuC: N           flood callbacks queued on online CPU C
 *   hold_start_ns: N               when the last hold_cpu or block_reader began holding
 *                                  (ktime_get_ns(), CLOCK_MONOTONIC), just before its request
 *   hold_end_ns: N                 when it stopped holding (before rcu_read_unlock())
 *   hold_cpu: C                    the CPU the last hold ran on
 *   srcu_hold_start_ns, srcu_hold_end_ns, srcu_hold_cpu: C
 *                                  the same of the last hold_srcu (start: just before its request)
 *   task_hold_start_ns, task_hold_end_ns, task_hold_pid: P
 *                                  the same of the last hold_task, and the writer's pid
 *   trace_hold_start_ns, trace_hold_end_ns, trace_hold_pid: P, trace_hold_cpu: C
 *                                  the same of the last hold_trace
 * FUNC and CALLBACK lines appear for what this kernel supports. Callbacks are static functions
 * of the module, listed in /proc/kallsyms as "t rcutrace_test_cb [rcutrace_test]" and so on.
 *
 * Which functions exist is decided at build time: the Kbuild file defines RCUTRACE_TEST_HAVE_f
 * as 1 for each function f of KERNEL_FUNCS that the kernel's Module.symvers exports, else 0;
 * since 7.0 the tasks-trace calls are inline wrappers over SRCU's, present where the kernel
 * exports rcu_tasks_trace_srcu_struct.
 */

#include <linux/atomic.h>
#include <linux/cpu.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/kernel.h>
#include <linux/kprobes.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/proc_fs.h>
#include <linux/rcupdate.h>
#include <linux/rcupdate_trace.h>
#include <linux/sched/signal.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/srcu.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>

/* Normal RCU's grace-period sequence (rcu_state.gp_seq), exported for rcutorture on every
 * kernel the suite boots and declared only in kernel/rcu/rcu.h, which headers packages
 * leave out. Two read-outs tell exactly how many grace periods started and ended between. */
extern unsigned long rcu_get_gp_seq(void);

#define HAVE(f) RCUTRACE_TEST_HAVE_##f

/* Largest N one write accepts: enough for floods, small enough to bound memory (32 B each). */
#define MAX_UNITS 10000000UL
#define MAX_DELAY_MS 100UL
/* call_rcu_delayed holds a reader for its whole queueing loop: keep that loop short. */
#define MAX_DELAYED_UNITS 100000UL

/* ---- Counters of the module's own calls ---------------------------------------------- */

#define KERNEL_FUNCS(X)                                                                    \
	X(call_rcu) X(call_rcu_hurry) X(kvfree_call_rcu) X(synchronize_rcu)                 \
	X(synchronize_rcu_expedited) X(rcu_barrier) X(synchronize_srcu)                    \
	X(synchronize_srcu_expedited) X(call_srcu) X(srcu_barrier)                         \
	X(get_state_synchronize_srcu) X(start_poll_synchronize_srcu)                       \
	X(poll_state_synchronize_srcu) X(synchronize_rcu_tasks) X(call_rcu_tasks)          \
	X(rcu_barrier_tasks) X(synchronize_rcu_tasks_trace) X(call_rcu_tasks_trace)        \
	X(rcu_barrier_tasks_trace) X(synchronize_rcu_tasks_rude) X(call_rcu_tasks_rude)    \
	X(rcu_barrier_tasks_rude) X(get_state_synchronize_rcu) X(start_poll_synchronize_rcu) \
	X(start_poll_synchronize_rcu_expedited) X(poll_state_synchronize_rcu)               \
	X(cond_synchronize_rcu) X(cond_synchronize_rcu_expedited)                          \
	X(get_state_synchronize_rcu_full) X(start_poll_synchronize_rcu_full)               \
	X(start_poll_synchronize_rcu_expedited_full) X(poll_state_synchronize_rcu_full)    \
	X(cond_synchronize_rcu_full) X(cond_synchronize_rcu_expedited_full)                \
	X(get_completed_synchronize_rcu) X(get_completed_synchronize_rcu_full)

#define AS_ENUM(f) FN_##f,
#define AS_NAME(f) #f,
#define AS_PRESENT(f) HAVE(f) + 0,
enum kernel_func { KERNEL_FUNCS(AS_ENUM) NR_KERNEL_FUNCS };
static const char *const kernel_func_names[] = { KERNEL_FUNCS(AS_NAME) };
static const bool kernel_func_present[] = { KERNEL_FUNCS(AS_PRESENT) };
static atomic_long_t kernel_func_calls[NR_KERNEL_FUNCS];
static atomic64_t kernel_func_called_ns[NR_KERNEL_FUNCS];

/* Calls kernel function f, counting the call (the value is f's). */
/* Counts the call, and notes when it was made: a waiter began waiting just after. */
#define CALL(f, ...)                                                                       \
	(atomic_long_inc(&kernel_func_calls[FN_##f]),                                       \
	 atomic64_set(&kernel_func_called_ns[FN_##f], ktime_get_ns()), f(__VA_ARGS__))

/* ---- Callbacks: one function per kind, so each is its own symbol ---------------------- */

/* A callback's queueing function: the callback exists where that function does. */
#define CALLBACKS(X)                                                                       \
	X(cb, call_rcu) X(hurry_cb, call_rcu_hurry) X(delayed_cb, call_rcu)                  \
	X(flood_cb, call_rcu) X(srcu_cb, call_srcu) X(tasks_cb, call_rcu_tasks)              \
	X(tasks_trace_cb, call_rcu_tasks_trace) X(tasks_rude_cb, call_rcu_tasks_rude)        \
	X(in_kprobe_cb, call_rcu)

#define CB_ENUM(cb, f) CB_##cb,
#define CB_NAME(cb, f) "rcutrace_test_" #cb,
#define CB_PRESENT(cb, f) HAVE(f) + 0,
enum callback_kind { CALLBACKS(CB_ENUM) NR_CALLBACKS };
static const char *const callback_names[] = { CALLBACKS(CB_NAME) };
static const bool callback_present[] = { CALLBACKS(CB_PRESENT) };

struct callback_stats {
	atomic_long_t queued;
	atomic_long_t invoked;
	atomic64_t wait_min_ns; /* U64_MAX: none yet */
	atomic64_t wait_max_ns;
};
static struct callback_stats callback_stats[NR_CALLBACKS];

/* What every callback frees: the head and when it was queued. */
struct test_callback {
	struct rcu_head head;
	u64 queued_ns;
};

static void reset_counters(void)
{
	int i;

	for (i = 0; i < NR_KERNEL_FUNCS; i++)
		atomic_long_set(&kernel_func_calls[i], 0);
	for (i = 0; i < NR_CALLBACKS; i++) {
		atomic_long_set(&callback_stats[i].queued, 0);
		atomic_long_set(&callback_stats[i].invoked, 0);
		atomic64_set(&callback_stats[i].wait_min_ns, U64_MAX);
		atomic64_set(&callback_stats[i].wait_max_ns, 0);
	}
}

static void record_min(atomic64_t *slot, u64 value)
{
	u64 old = atomic64_read(slot);

	while (value < old) {
		u64 seen = atomic64_cmpxchg(slot, old, value);

		if (seen == old)
			break;
		old = seen;
	}
}

static void record_max(atomic64_t *slot, u64 value)
{
	u64 old = atomic64_read(slot);

	while (value > old) {
		u64 seen = atomic64_cmpxchg(slot, old, value);

		if (seen == old)
			break;
		old = seen;
	}
}

static void record_invocation(struct rcu_head *head, enum callback_kind kind)
{
	struct test_callback *cb = container_of(head, struct test_callback, head);
	u64 waited = ktime_get_ns() - cb->queued_ns;

	record_min(&callback_stats[kind].wait_min_ns, waited);
	record_max(&callback_stats[kind].wait_max_ns, waited);
	atomic_long_inc(&callback_stats[kind].invoked);
	kfree(cb);
}

#define DEFINE_CALLBACK(cb, f)                                                              \
	static noinline void __maybe_unused rcutrace_test_##cb(struct rcu_head *head)      \
	{                                                                                  \
		record_invocation(head, CB_##cb);                                          \
	}
CALLBACKS(DEFINE_CALLBACK)

static struct test_callback *new_callback(gfp_t gfp)
{
	return kmalloc(sizeof(struct test_callback), gfp);
}

/* Stamps cb as queued now; the caller queues it right after. */
static struct rcu_head *stamp(struct test_callback *cb, enum callback_kind kind)
{
	atomic_long_inc(&callback_stats[kind].queued);
	cb->queued_ns = ktime_get_ns();
	return &cb->head;
}

DEFINE_STATIC_SRCU(rcutrace_test_srcu);

/* ---- Ops -------------------------------------------------------------------------------- */

/* Between units: a killed writer stops, and other tasks get the CPU. */
static int between_units(void)
{
	cond_resched();
	return fatal_signal_pending(current) ? -EINTR : 0;
}

/*
 * op_NAME(n, arg) runs UNIT n times, each after a cancellation point. UNIT may use `arg` and
 * variables that PREPARE (run once, before the first unit) declares.
 */
#define DEFINE_OP(name, PREPARE, UNIT)                                                   \
	static int op_##name(unsigned long n, unsigned long arg)                         \
	{                                                                                \
		unsigned long i;                                                         \
		PREPARE;                                                                 \
		for (i = 0; i < n; i++) {                                                \
			int err = between_units();                                       \
			if (err)                                                         \
				return err;                                              \
			UNIT;                                                            \
		}                                                                        \
		return 0;                                                                \
	}

/* A unit that queues one callback of kind cb through f. */
#define QUEUE_UNIT(f, cb)                                                                \
	do {                                                                             \
		struct test_callback *obj = new_callback(GFP_KERNEL);                    \
		if (!obj)                                                                \
			return -ENOMEM;                                                  \
		CALL(f, stamp(obj, CB_##cb), rcutrace_test_##cb);                        \
	} while (0)

#define NOTHING do { } while (0)

#if HAVE(call_rcu)
DEFINE_OP(call_rcu, NOTHING, QUEUE_UNIT(call_rcu, cb))
#else
#define op_call_rcu NULL
#endif

#if HAVE(call_rcu_hurry)
DEFINE_OP(call_rcu_hurry, NOTHING, QUEUE_UNIT(call_rcu_hurry, hurry_cb))
#else
#define op_call_rcu_hurry NULL
#endif

struct kfree_rcu_object {
	struct rcu_head rh;
	unsigned long payload;
};

#if HAVE(kvfree_call_rcu)
/* kfree_rcu() is a macro around kvfree_call_rcu(): count that. */
DEFINE_OP(kfree_rcu, NOTHING, {
	struct kfree_rcu_object *obj = kmalloc(sizeof(*obj), GFP_KERNEL);
	if (!obj)
		return -ENOMEM;
	atomic_long_inc(&kernel_func_calls[FN_kvfree_call_rcu]);
	kfree_rcu(obj, rh);
})
#else
#define op_kfree_rcu NULL
#endif

#define PLAIN_OP(f) DEFINE_OP(f, NOTHING, CALL(f))

#if HAVE(synchronize_rcu)
PLAIN_OP(synchronize_rcu)
#else
#define op_synchronize_rcu NULL
#endif

#if HAVE(synchronize_rcu_expedited)
PLAIN_OP(synchronize_rcu_expedited)
#else
#define op_synchronize_rcu_expedited NULL
#endif

#if HAVE(rcu_barrier)
PLAIN_OP(rcu_barrier)
#else
#define op_rcu_barrier NULL
#endif

#if HAVE(synchronize_rcu_tasks)
PLAIN_OP(synchronize_rcu_tasks)
#else
#define op_synchronize_rcu_tasks NULL
#endif

#if HAVE(rcu_barrier_tasks)
PLAIN_OP(rcu_barrier_tasks)
#else
#define op_rcu_barrier_tasks NULL
#endif

#if HAVE(call_rcu_tasks)
DEFINE_OP(call_rcu_tasks, NOTHING, QUEUE_UNIT(call_rcu_tasks, tasks_cb))
#else
#define op_call_rcu_tasks NULL
#endif

#if HAVE(synchronize_rcu_tasks_trace)
PLAIN_OP(synchronize_rcu_tasks_trace)
#else
#define op_synchronize_rcu_tasks_trace NULL
#endif

#if HAVE(rcu_barrier_tasks_trace)
PLAIN_OP(rcu_barrier_tasks_trace)
#else
#define op_rcu_barrier_tasks_trace NULL
#endif

#if HAVE(call_rcu_tasks_trace)
DEFINE_OP(call_rcu_tasks_trace, NOTHING, QUEUE_UNIT(call_rcu_tasks_trace, tasks_trace_cb))
#else
#define op_call_rcu_tasks_trace NULL
#endif

#if HAVE(synchronize_rcu_tasks_rude)
PLAIN_OP(synchronize_rcu_tasks_rude)
#else
#define op_synchronize_rcu_tasks_rude NULL
#endif

#if HAVE(rcu_barrier_tasks_rude)
PLAIN_OP(rcu_barrier_tasks_rude)
#else
#define op_rcu_barrier_tasks_rude NULL
#endif

#if HAVE(call_rcu_tasks_rude)
DEFINE_OP(call_rcu_tasks_rude, NOTHING, QUEUE_UNIT(call_rcu_tasks_rude, tasks_rude_cb))
#else
#define op_call_rcu_tasks_rude NULL
#endif

/* SRCU, on the module's own srcu_struct. */

#define SRCU_OP(f) DEFINE_OP(f, NOTHING, CALL(f, &rcutrace_test_srcu))

#if HAVE(synchronize_srcu)
SRCU_OP(synchronize_srcu)
#else
#define op_synchronize_srcu NULL
#endif

#if HAVE(synchronize_srcu_expedited)
SRCU_OP(synchronize_srcu_expedited)
#else
#define op_synchronize_srcu_expedited NULL
#endif

#if HAVE(srcu_barrier)
SRCU_OP(srcu_barrier)
#else
#define op_srcu_barrier NULL
#endif

#if HAVE(get_state_synchronize_srcu)
SRCU_OP(get_state_synchronize_srcu)
#else
#define op_get_state_synchronize_srcu NULL
#endif

#if HAVE(start_poll_synchronize_srcu)
SRCU_OP(start_poll_synchronize_srcu)
#else
#define op_start_poll_synchronize_srcu NULL
#endif

#ifdef SRCU_GET_STATE_COMPLETED
#define SRCU_COMPLETED_COOKIE SRCU_GET_STATE_COMPLETED
#else
#define SRCU_COMPLETED_COOKIE 0UL
#endif

#if HAVE(poll_state_synchronize_srcu)
DEFINE_OP(poll_state_synchronize_srcu, NOTHING,
	  CALL(poll_state_synchronize_srcu, &rcutrace_test_srcu, SRCU_COMPLETED_COOKIE))
#else
#define op_poll_state_synchronize_srcu NULL
#endif

#if HAVE(synchronize_srcu)
/*
 * dynamic_srcu N: an srcu_struct of the op's own, kmalloc'd and initialised by
 * rcutrace_test_init_dynamic_srcu(), N synchronize_srcu() on it, then cleaned up and freed:
 * an SRCU domain that no symbol names.
 */
static noinline int rcutrace_test_init_dynamic_srcu(struct srcu_struct *ssp)
{
	int err = init_srcu_struct(ssp);

	/* Returns here, never as a tail call: this function is on the initialising stack. */
	asm volatile("" : "+r"(err));
	return err;
}

static int op_dynamic_srcu(unsigned long n, unsigned long arg)
{
	struct srcu_struct *ssp = kzalloc(sizeof(*ssp), GFP_KERNEL);
	unsigned long i;
	int err;

	if (!ssp)
		return -ENOMEM;
	err = rcutrace_test_init_dynamic_srcu(ssp);
	if (err)
		goto out;
	for (i = 0; i < n; i++) {
		err = between_units();
		if (err)
			break;
		CALL(synchronize_srcu, ssp);
	}
	cleanup_srcu_struct(ssp);
out:
	kfree(ssp);
	return err;
}
#else
#define op_dynamic_srcu NULL
#endif

#if HAVE(call_srcu)
DEFINE_OP(call_srcu, NOTHING, {
	struct test_callback *obj = new_callback(GFP_KERNEL);
	if (!obj)
		return -ENOMEM;
	CALL(call_srcu, &rcutrace_test_srcu, stamp(obj, CB_srcu_cb), rcutrace_test_srcu_cb);
})
#else
#define op_call_srcu NULL
#endif

/* Polled grace periods. */

#if HAVE(get_state_synchronize_rcu)
PLAIN_OP(get_state_synchronize_rcu)
#else
#define op_get_state_synchronize_rcu NULL
#endif

#if HAVE(start_poll_synchronize_rcu)
PLAIN_OP(start_poll_synchronize_rcu)
#else
#define op_start_poll_synchronize_rcu NULL
#endif

#if HAVE(start_poll_synchronize_rcu_expedited)
PLAIN_OP(start_poll_synchronize_rcu_expedited)
#else
#define op_start_poll_synchronize_rcu_expedited NULL
#endif

#if HAVE(poll_state_synchronize_rcu) && HAVE(get_completed_synchronize_rcu)
DEFINE_OP(poll_state_synchronize_rcu,
	  unsigned long cookie = CALL(get_completed_synchronize_rcu),
	  CALL(poll_state_synchronize_rcu, cookie))
#else
#define op_poll_state_synchronize_rcu NULL
#endif

/* ARG 0: a completed cookie (no wait); ARG 1: a fresh cookie per unit (waits a grace period). */
#define COND_OP(f)                                                                       \
	DEFINE_OP(f, unsigned long completed = CALL(get_completed_synchronize_rcu), {    \
		unsigned long cookie = arg ? CALL(get_state_synchronize_rcu) : completed; \
		CALL(f, cookie);                                                         \
	})

#if HAVE(cond_synchronize_rcu) && HAVE(get_completed_synchronize_rcu) && HAVE(get_state_synchronize_rcu)
COND_OP(cond_synchronize_rcu)
#else
#define op_cond_synchronize_rcu NULL
#endif

#if HAVE(cond_synchronize_rcu_expedited) && HAVE(get_completed_synchronize_rcu) && HAVE(get_state_synchronize_rcu)
COND_OP(cond_synchronize_rcu_expedited)
#else
#define op_cond_synchronize_rcu_expedited NULL
#endif

/* The _full forms take a struct rcu_gp_oldstate (struct rcu_gp_seq since 7.x: see Kbuild). */

#define FULL_OP(f)                                                                       \
	DEFINE_OP(f, struct RCUTRACE_TEST_GP_STATE state, CALL(f, &state))

#if HAVE(get_state_synchronize_rcu_full)
FULL_OP(get_state_synchronize_rcu_full)
#else
#define op_get_state_synchronize_rcu_full NULL
#endif

#if HAVE(start_poll_synchronize_rcu_full)
FULL_OP(start_poll_synchronize_rcu_full)
#else
#define op_start_poll_synchronize_rcu_full NULL
#endif

#if HAVE(start_poll_synchronize_rcu_expedited_full)
FULL_OP(start_poll_synchronize_rcu_expedited_full)
#else
#define op_start_poll_synchronize_rcu_expedited_full NULL
#endif

#if HAVE(poll_state_synchronize_rcu_full) && HAVE(get_completed_synchronize_rcu_full)
DEFINE_OP(poll_state_synchronize_rcu_full,
	  struct RCUTRACE_TEST_GP_STATE completed; CALL(get_completed_synchronize_rcu_full, &completed),
	  CALL(poll_state_synchronize_rcu_full, &completed))
#else
#define op_poll_state_synchronize_rcu_full NULL
#endif

#define COND_FULL_OP(f)                                                                  \
	DEFINE_OP(f,                                                                     \
		  struct RCUTRACE_TEST_GP_STATE completed;                               \
		  CALL(get_completed_synchronize_rcu_full, &completed), {                \
			  struct RCUTRACE_TEST_GP_STATE fresh;                           \
			  if (arg)                                                       \
				  CALL(get_state_synchronize_rcu_full, &fresh);          \
			  CALL(f, arg ? &fresh : &completed);                            \
		  })

#if HAVE(cond_synchronize_rcu_full) && HAVE(get_completed_synchronize_rcu_full) && HAVE(get_state_synchronize_rcu_full)
COND_FULL_OP(cond_synchronize_rcu_full)
#else
#define op_cond_synchronize_rcu_full NULL
#endif

#if HAVE(cond_synchronize_rcu_expedited_full) && HAVE(get_completed_synchronize_rcu_full) && HAVE(get_state_synchronize_rcu_full)
COND_FULL_OP(cond_synchronize_rcu_expedited_full)
#else
#define op_cond_synchronize_rcu_expedited_full NULL
#endif

/* call_rcu_delayed N MS: a reader that outlives its own N callbacks' queueing by MS ms. */
#if HAVE(call_rcu)
/* How long the last such reader was held after its last call_rcu(), as ktime measured it. */
static atomic64_t delayed_reader_held_ns;

static int op_call_rcu_delayed(unsigned long n, unsigned long ms)
{
	struct test_callback **objs;
	unsigned long i;
	int err = 0;

	if (n > MAX_DELAYED_UNITS)
		return -EINVAL;
	/* Allocate first: nothing may sleep inside the read-side section. */
	objs = kvmalloc_array(n ?: 1, sizeof(*objs), GFP_KERNEL);
	if (!objs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		objs[i] = new_callback(GFP_KERNEL);
		if (!objs[i]) {
			err = -ENOMEM;
			break;
		}
	}
	if (!err) {
		rcu_read_lock();
		u64 held_from;

		for (i = 0; i < n; i++)
			CALL(call_rcu, stamp(objs[i], CB_delayed_cb), rcutrace_test_delayed_cb);
		/*
		 * Busy-wait on the clock the callbacks measure with, not mdelay(): under emulation
		 * the TSC loops behind mdelay(20) have returned after 0.1 ms.
		 */
		held_from = ktime_get_ns();
		while (ktime_get_ns() - held_from < ms * NSEC_PER_MSEC)
			cpu_relax();
		atomic64_set(&delayed_reader_held_ns, ktime_get_ns() - held_from);
		rcu_read_unlock();
	} else {
		while (i--)
			kfree(objs[i]);
	}
	kvfree(objs);
	return err;
}
#else
#define op_call_rcu_delayed NULL
#endif

/* flood N: each online CPU's share queued by a work item bound to that CPU. */
#if HAVE(call_rcu)
struct flood_share {
	struct work_struct work;
	unsigned long count;
	int err;
	/* Callbacks queued on this CPU by floods since load or reset. */
	atomic_long_t queued;
};
static DEFINE_PER_CPU(struct flood_share, flood_shares);
/* One flood at a time: the per-CPU work items are shared. */
static DEFINE_MUTEX(flood_lock);

static void queue_flood_share(struct work_struct *work)
{
	struct flood_share *share = container_of(work, struct flood_share, work);
	unsigned long i;

	for (i = 0; i < share->count; i++) {
		struct test_callback *obj = new_callback(GFP_KERNEL);

		if (!obj) {
			share->err = -ENOMEM;
			return;
		}
		CALL(call_rcu, stamp(obj, CB_flood_cb), rcutrace_test_flood_cb);
		atomic_long_inc(&share->queued);
		if (i % 1024 == 1023)
			cond_resched();
	}
}

static int op_flood(unsigned long n, unsigned long arg)
{
	unsigned int cpus, index = 0;
	int cpu, err = 0;

	mutex_lock(&flood_lock);
	cpus_read_lock();
	cpus = num_online_cpus();
	for_each_online_cpu(cpu) {
		struct flood_share *share = per_cpu_ptr(&flood_shares, cpu);

		INIT_WORK(&share->work, queue_flood_share);
		share->count = n / cpus + (index++ < n % cpus ? 1 : 0);
		share->err = 0;
		queue_work_on(cpu, system_highpri_wq, &share->work);
	}
	for_each_online_cpu(cpu) {
		struct flood_share *share = per_cpu_ptr(&flood_shares, cpu);

		flush_work(&share->work);
		if (share->err)
			err = share->err;
	}
	cpus_read_unlock();
	mutex_unlock(&flood_lock);
	return err;
}
#else
#define op_flood NULL
#endif

/* ---- Stuck-guest op (for the VM runner's hang diagnosis) ----------------------------
 *
 * spin_preempt_off N   busy-waits N ms on ktime_get_ns() with preemption disabled, in the
 *                      writing process (interrupts stay enabled, so NMI backtraces, SysRq and
 *                      the soft-lockup watchdog still see it); no RCU call. A quiescent-state-free
 *                      CPU for that long: soft lockup and RCU stall reports name
 *                      rcutrace_test_spin_preempt_off. noinline so every stack shows it.
 */
static noinline int rcutrace_test_spin_preempt_off(unsigned long ms)
{
	u64 from = ktime_get_ns();

	preempt_disable();
	while (ktime_get_ns() - from < (u64)ms * NSEC_PER_MSEC)
		cpu_relax();
	preempt_enable();
	return 0;
}

static int op_spin_preempt_off(unsigned long n, unsigned long arg)
{
	return rcutrace_test_spin_preempt_off(n);
}
/* ---- End of the stuck-guest op -------------------------------------------------------- */

#if HAVE(call_rcu)
/*
 * call_rcu_in_kprobe N: N call_rcu() made from a kprobe's handler. While a kprobe's handler
 * runs on a CPU, the kernel skips every other kprobe hit there and counts it in that kprobe's
 * nmissed: each of these queueings is a known skip of any kprobe on the queueing path.
 */
static noinline void rcutrace_test_kprobed(struct test_callback *obj)
{
	/* Kept a real call with its argument, for the kprobe at its entry. */
	asm volatile("" : : "r"(obj) : "memory");
}

static int rcutrace_test_queue_in_kprobe(struct kprobe *p, struct pt_regs *regs)
{
	struct test_callback *obj = (void *)regs_get_kernel_argument(regs, 0);

	CALL(call_rcu, stamp(obj, CB_in_kprobe_cb), rcutrace_test_in_kprobe_cb);
	return 0;
}

static int op_call_rcu_in_kprobe(unsigned long n, unsigned long arg)
{
	struct kprobe probe = {
		.symbol_name = "rcutrace_test_kprobed",
		.pre_handler = rcutrace_test_queue_in_kprobe,
	};
	unsigned long i;
	int err = register_kprobe(&probe);

	if (err)
		return err;
	for (i = 0; i < n; i++) {
		struct test_callback *obj;

		err = between_units();
		if (err)
			break;
		obj = new_callback(GFP_KERNEL);
		if (!obj) {
			err = -ENOMEM;
			break;
		}
		rcutrace_test_kprobed(obj);
	}
	unregister_kprobe(&probe);
	return err;
}
#else
#define op_call_rcu_in_kprobe NULL
#endif

static int op_reset(unsigned long n, unsigned long arg)
{
#if HAVE(call_rcu)
	int cpu;

	for_each_possible_cpu(cpu)
		atomic_long_set(&per_cpu_ptr(&flood_shares, cpu)->queued, 0);
#endif
	reset_counters();
	return 0;
}

/* ---- Holdouts: a CPU, or a blocked reader, that holds a grace period up ---------------- */
#define MAX_HOLD_MS 30000UL
/* A busy task starves its CPU's kernel threads: well short of the soft-lockup watchdog's 20 s. */
#define MAX_TASK_HOLD_MS 5000UL

/* Runs hold(ms) with the writer moved to CPU cpu, then moves it back. */
static int __maybe_unused on_cpu(unsigned long cpu, void (*hold)(unsigned long ms), unsigned long ms)
{
	cpumask_var_t old;
	int err;

	if (cpu >= nr_cpu_ids || !cpu_online(cpu) || !ms)
		return -EINVAL;
	if (!alloc_cpumask_var(&old, GFP_KERNEL))
		return -ENOMEM;
	cpumask_copy(old, current->cpus_ptr);
	err = set_cpus_allowed_ptr(current, cpumask_of(cpu));
	if (!err) {
		hold(ms);
		set_cpus_allowed_ptr(current, old);
	}
	free_cpumask_var(old);
	return err;
}

/* Asleep, uninterruptibly, until the clock the holds are measured by says MS have passed. */
static void __maybe_unused sleep_by_clock(unsigned long ms)
{
	ktime_t until = ktime_add_ms(ktime_get(), ms);

	do {
		set_current_state(TASK_UNINTERRUPTIBLE);
	} while (schedule_hrtimeout(&until, HRTIMER_MODE_ABS));
}
/* Ticks and force-quiescent-state passes enough for a quiescent state to be reported. */
#define HOLD_QS_MS 50
#if HAVE(start_poll_synchronize_rcu)
static atomic64_t hold_start_ns, hold_end_ns;
static atomic_t hold_cpu_used;

/* A function of its own, so that a stack sampled during the hold names it. */
static noinline void rcutrace_test_hold_spin(unsigned long ms)
{
	u64 from = ktime_get_ns();

	/* The clock, not mdelay(): under emulation mdelay()'s TSC loops return early. */
	while (ktime_get_ns() - from < ms * NSEC_PER_MSEC)
		cpu_relax();
}

static void hold_cpu_in_reader(unsigned long ms)
{
	rcu_read_lock();
	preempt_disable();
	atomic_set(&hold_cpu_used, smp_processor_id());
	atomic64_set(&hold_start_ns, ktime_get_ns());
	CALL(start_poll_synchronize_rcu);
	rcutrace_test_hold_spin(ms);
	atomic64_set(&hold_end_ns, ktime_get_ns());
	/* Unlock first: a preemption inside the reader would make it a blocked one. */
	rcu_read_unlock();
	preempt_enable();
	/*
	 * A sleep on CPU C outside any reader: C's quiescent state, reported before the writer
	 * goes on. Without it the writer's next reader could end the held grace period instead
	 * (on 7.3's lazy preemption an exiting writer was preempted inside one, in exit_mmap(),
	 * and became the last holdout, 1 ms after 400 ms of C's hold).
	 */
	msleep(HOLD_QS_MS);
}

static int op_hold_cpu(unsigned long cpu, unsigned long ms)
{
	return on_cpu(cpu, hold_cpu_in_reader, ms);
}

static noinline void rcutrace_test_block_in_reader(unsigned long ms)
{
	rcu_read_lock();
	atomic_set(&hold_cpu_used, raw_smp_processor_id());
	atomic64_set(&hold_start_ns, ktime_get_ns());
	CALL(start_poll_synchronize_rcu);
	/*
	 * Asleep once, until the clock the hold is measured by says MS have passed: msleep()
	 * counts jiffies, which under emulation can run ahead of that clock (a 400 ms msleep()
	 * came back after 396.5 ms of it in a 64-CPU guest). The reader is blocked from its
	 * switch, which a busy host can delay by milliseconds after the clock is read here.
	 */
	sleep_by_clock(ms);
	atomic64_set(&hold_end_ns, ktime_get_ns());
	rcu_read_unlock();
}

DEFINE_OP(block_reader, NOTHING, rcutrace_test_block_in_reader(arg))
#else
#define op_hold_cpu NULL
#define op_block_reader NULL
#endif

#if HAVE(start_poll_synchronize_srcu)
static atomic64_t srcu_hold_start_ns, srcu_hold_end_ns;
static atomic_t srcu_hold_cpu_used = ATOMIC_INIT(-1);

/*
 * An SRCU reader of the module's domain, asleep: its lock is counted on the CPU it took it
 * on, and unbalances that CPU's count until it leaves. A function of its own, so that the
 * stack it sleeps on names it.
 */
static noinline void rcutrace_test_hold_srcu_reader(unsigned long ms)
{
	int idx = srcu_read_lock(&rcutrace_test_srcu);

	atomic_set(&srcu_hold_cpu_used, raw_smp_processor_id());
	atomic64_set(&srcu_hold_start_ns, ktime_get_ns());
	CALL(start_poll_synchronize_srcu, &rcutrace_test_srcu);
	sleep_by_clock(ms);
	atomic64_set(&srcu_hold_end_ns, ktime_get_ns());
	srcu_read_unlock(&rcutrace_test_srcu, idx);
}

static int op_hold_srcu(unsigned long cpu, unsigned long ms)
{
	return on_cpu(cpu, rcutrace_test_hold_srcu_reader, ms);
}

/*
 * An SRCU reader of the module's domain that moves CPU inside its critical section: it enters
 * on CPU FROM and leaves on CPU TO, leaving FROM's count of readers one ahead and TO's one
 * behind for good (SRCU minds only their sum), as any preempted reader may.
 */
static int op_migrate_srcu(unsigned long from, unsigned long to)
{
	cpumask_var_t old;
	int idx, err;

	if (from >= nr_cpu_ids || to >= nr_cpu_ids || !cpu_online(from) || !cpu_online(to))
		return -EINVAL;
	if (!alloc_cpumask_var(&old, GFP_KERNEL))
		return -ENOMEM;
	cpumask_copy(old, current->cpus_ptr);
	err = set_cpus_allowed_ptr(current, cpumask_of(from));
	if (!err) {
		idx = srcu_read_lock(&rcutrace_test_srcu);
		err = set_cpus_allowed_ptr(current, cpumask_of(to));
		srcu_read_unlock(&rcutrace_test_srcu, idx);
		set_cpus_allowed_ptr(current, old);
	}
	free_cpumask_var(old);
	return err;
}
#else
#define op_hold_srcu NULL
#define op_migrate_srcu NULL
#endif

#if HAVE(synchronize_rcu_tasks)
static atomic64_t task_hold_start_ns, task_hold_end_ns;
static atomic_t task_hold_pid;

/*
 * A tasks-RCU holdout: busy in the kernel, preemptible but never switching out of its own
 * accord nor returning to user mode, the only quiescent states tasks RCU knows. It lets
 * other tasks have the CPU (cond_resched(): a preemption, no quiescent state): without it,
 * under voluntary preemption, a tasks-RCU kthread woken onto this CPU would starve behind it
 * and the grace period would be held by that, not by a holdout.
 */
static noinline void rcutrace_test_hold_task(unsigned long ms)
{
	u64 from = ktime_get_ns();

	atomic_set(&task_hold_pid, current->pid);
	atomic64_set(&task_hold_start_ns, from);
	while (ktime_get_ns() - from < ms * NSEC_PER_MSEC) {
		cpu_relax();
		cond_resched();
	}
	atomic64_set(&task_hold_end_ns, ktime_get_ns());
}

static int op_hold_task(unsigned long cpu, unsigned long ms)
{
	return on_cpu(cpu, rcutrace_test_hold_task, ms);
}
#else
#define op_hold_task NULL
#endif

#if HAVE(synchronize_rcu_tasks_trace)
static atomic64_t trace_hold_start_ns, trace_hold_end_ns;
static atomic_t trace_hold_pid;
static atomic_t trace_hold_cpu_used = ATOMIC_INIT(-1);

/*
 * A tasks-trace RCU reader, asleep: before 7.0 the grace period lists the task as a holdout
 * until it leaves; since 7.0 tasks-trace RCU is SRCU, and the reader unbalances its CPU's
 * counts of rcu_tasks_trace_srcu_struct's readers instead.
 */
static noinline void rcutrace_test_hold_trace_reader(unsigned long ms)
{
	rcu_read_lock_trace();
	atomic_set(&trace_hold_pid, current->pid);
	atomic_set(&trace_hold_cpu_used, raw_smp_processor_id());
	atomic64_set(&trace_hold_start_ns, ktime_get_ns());
	sleep_by_clock(ms);
	atomic64_set(&trace_hold_end_ns, ktime_get_ns());
	rcu_read_unlock_trace();
}

static int op_hold_trace(unsigned long cpu, unsigned long ms)
{
	return on_cpu(cpu, rcutrace_test_hold_trace_reader, ms);
}
#else
#define op_hold_trace NULL
#endif

struct test_op {
	const char *name;
	/* NULL: this kernel lacks the function. */
	int (*run)(unsigned long n, unsigned long arg);
	/* Largest ARG accepted; 0 for ops that take none. */
	unsigned long max_arg;
	/* The kernel functions one write calls, for the read-out. */
	const char *uses;
};

#define OP(name, uses) { #name, op_##name, 0, uses }
#define OP_WITH_ARG(name, max_arg, uses) { #name, op_##name, max_arg, uses }

static const struct test_op test_ops[] = {
	OP(call_rcu, "call_rcu"),
	OP(call_rcu_hurry, "call_rcu_hurry"),
	OP(kfree_rcu, "kvfree_call_rcu"),
	OP(synchronize_rcu, "synchronize_rcu"),
	OP(synchronize_rcu_expedited, "synchronize_rcu_expedited"),
	OP(rcu_barrier, "rcu_barrier"),
	OP(synchronize_srcu, "synchronize_srcu"),
	OP(synchronize_srcu_expedited, "synchronize_srcu_expedited"),
	OP(call_srcu, "call_srcu"),
	OP(srcu_barrier, "srcu_barrier"),
	OP(get_state_synchronize_srcu, "get_state_synchronize_srcu"),
	OP(start_poll_synchronize_srcu, "start_poll_synchronize_srcu"),
	OP(poll_state_synchronize_srcu, "poll_state_synchronize_srcu"),
	OP(dynamic_srcu, "synchronize_srcu (on an srcu_struct of its own, kmalloc'd)"),
	OP(synchronize_rcu_tasks, "synchronize_rcu_tasks"),
	OP(call_rcu_tasks, "call_rcu_tasks"),
	OP(rcu_barrier_tasks, "rcu_barrier_tasks"),
	OP(synchronize_rcu_tasks_trace, "synchronize_rcu_tasks_trace"),
	OP(call_rcu_tasks_trace, "call_rcu_tasks_trace"),
	OP(rcu_barrier_tasks_trace, "rcu_barrier_tasks_trace"),
	OP(synchronize_rcu_tasks_rude, "synchronize_rcu_tasks_rude"),
	OP(call_rcu_tasks_rude, "call_rcu_tasks_rude"),
	OP(rcu_barrier_tasks_rude, "rcu_barrier_tasks_rude"),
	OP(get_state_synchronize_rcu, "get_state_synchronize_rcu"),
	OP(start_poll_synchronize_rcu, "start_poll_synchronize_rcu"),
	OP(start_poll_synchronize_rcu_expedited, "start_poll_synchronize_rcu_expedited"),
	OP(poll_state_synchronize_rcu,
	   "get_completed_synchronize_rcu (once) poll_state_synchronize_rcu"),
	OP_WITH_ARG(cond_synchronize_rcu, 1, "get_completed_synchronize_rcu (once) cond_synchronize_rcu"
				 " (ARG 1: get_state_synchronize_rcu per unit)"),
	OP_WITH_ARG(cond_synchronize_rcu_expedited, 1,
	   "get_completed_synchronize_rcu (once) cond_synchronize_rcu_expedited"
	   " (ARG 1: get_state_synchronize_rcu per unit)"),
	OP(get_state_synchronize_rcu_full, "get_state_synchronize_rcu_full"),
	OP(start_poll_synchronize_rcu_full, "start_poll_synchronize_rcu_full"),
	OP(start_poll_synchronize_rcu_expedited_full, "start_poll_synchronize_rcu_expedited_full"),
	OP(poll_state_synchronize_rcu_full,
	   "get_completed_synchronize_rcu_full (once) poll_state_synchronize_rcu_full"),
	OP_WITH_ARG(cond_synchronize_rcu_full, 1,
	   "get_completed_synchronize_rcu_full (once) cond_synchronize_rcu_full"
	   " (ARG 1: get_state_synchronize_rcu_full per unit)"),
	OP_WITH_ARG(cond_synchronize_rcu_expedited_full, 1,
	   "get_completed_synchronize_rcu_full (once) cond_synchronize_rcu_expedited_full"
	   " (ARG 1: get_state_synchronize_rcu_full per unit)"),
	OP_WITH_ARG(call_rcu_delayed, MAX_DELAY_MS, "call_rcu (inside rcu_read_lock)"),
	OP(flood, "call_rcu (from a kworker per CPU)"),
	OP(call_rcu_in_kprobe, "call_rcu (from a kprobe's handler)"),
	OP_WITH_ARG(hold_cpu, MAX_HOLD_MS, "start_poll_synchronize_rcu (inside the held reader)"),
	OP_WITH_ARG(block_reader, MAX_HOLD_MS, "start_poll_synchronize_rcu (inside the blocked reader)"),
	OP(spin_preempt_off, "nothing (N ms busy with preemption off; see the stuck-guest op)"),
	OP_WITH_ARG(hold_srcu, MAX_HOLD_MS, "start_poll_synchronize_srcu (inside the held reader)"),
	OP_WITH_ARG(migrate_srcu, NR_CPUS, "nothing (N is the CPU entered on, ARG the CPU left on)"),
	OP_WITH_ARG(hold_task, MAX_TASK_HOLD_MS, "nothing (N is the CPU; busy without switching)"),
	OP_WITH_ARG(hold_trace, MAX_HOLD_MS, "nothing (N is the CPU; a tasks-trace reader asleep)"),
	OP(reset, "nothing"),
};

/* ---- /proc/rcutrace_test ----------------------------------------------------------------- */

/* "OP N" or "OP N ARG", decimal, separated by blanks: 0 or -EINVAL. */
static int parse_request(char *line, char **name, unsigned long *n, unsigned long *arg)
{
	char *words[3], *word;
	int count = 0;

	while ((word = strsep(&line, " \t\n")) != NULL) {
		if (!*word)
			continue;
		if (count == ARRAY_SIZE(words))
			return -EINVAL;
		words[count++] = word;
	}
	if (count < 2)
		return -EINVAL;
	*name = words[0];
	*arg = 0;
	if (kstrtoul(words[1], 10, n) || (count == 3 && kstrtoul(words[2], 10, arg)))
		return -EINVAL;
	return 0;
}

static ssize_t rcutrace_test_write(struct file *file, const char __user *ubuf, size_t len,
				   loff_t *ppos)
{
	char line[128], *name;
	unsigned long n, arg;
	const struct test_op *op = NULL;
	int i, err;

	if (len >= sizeof(line))
		return -EINVAL;
	if (copy_from_user(line, ubuf, len))
		return -EFAULT;
	line[len] = '\0';
	if (parse_request(line, &name, &n, &arg) || n > MAX_UNITS)
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(test_ops); i++)
		if (!strcmp(test_ops[i].name, name))
			op = &test_ops[i];
	if (!op || arg > op->max_arg)
		return -EINVAL;
	if (!op->run)
		return -EOPNOTSUPP;
	err = op->run(n, arg);
	return err ? err : len;
}

static int rcutrace_test_show(struct seq_file *m, void *v)
{
	int i;

	seq_puts(m, "ops:");
	for (i = 0; i < ARRAY_SIZE(test_ops); i++)
		if (test_ops[i].run)
			seq_printf(m, " %s", test_ops[i].name);
	seq_putc(m, '\n');
	for (i = 0; i < ARRAY_SIZE(test_ops); i++)
		if (test_ops[i].run)
			seq_printf(m, "uses %s: %s\n", test_ops[i].name, test_ops[i].uses);
	for (i = 0; i < NR_KERNEL_FUNCS; i++)
		if (kernel_func_present[i])
			seq_printf(m, "calls %s: %ld\n", kernel_func_names[i],
				   atomic_long_read(&kernel_func_calls[i]));
	for (i = 0; i < NR_KERNEL_FUNCS; i++)
		if (kernel_func_present[i])
			seq_printf(m, "called_ns %s: %llu\n", kernel_func_names[i],
				   (u64)atomic64_read(&kernel_func_called_ns[i]));
	for (i = 0; i < NR_CALLBACKS; i++) {
		struct callback_stats *s = &callback_stats[i];
		u64 min = atomic64_read(&s->wait_min_ns);

		if (!callback_present[i])
			continue;
		seq_printf(m, "queued %s: %ld\n", callback_names[i], atomic_long_read(&s->queued));
		seq_printf(m, "invoked %s: %ld\n", callback_names[i],
			   atomic_long_read(&s->invoked));
		seq_printf(m, "wait_min_ns %s: %llu\n", callback_names[i], min == U64_MAX ? 0 : min);
		seq_printf(m, "wait_max_ns %s: %llu\n", callback_names[i],
			   (u64)atomic64_read(&s->wait_max_ns));
	}
#if HAVE(call_rcu)
	seq_printf(m, "reader_held_ns call_rcu_delayed: %llu\n",
		   (u64)atomic64_read(&delayed_reader_held_ns));
	for_each_online_cpu(i)
		seq_printf(m, "flood_queued cpu%d: %ld\n", i,
			   atomic_long_read(&per_cpu_ptr(&flood_shares, i)->queued));
#endif
#if HAVE(start_poll_synchronize_rcu)
	seq_printf(m, "hold_start_ns: %llu\n", (u64)atomic64_read(&hold_start_ns));
	seq_printf(m, "hold_end_ns: %llu\n", (u64)atomic64_read(&hold_end_ns));
	seq_printf(m, "hold_cpu: %d\n", atomic_read(&hold_cpu_used));
#endif
#if HAVE(start_poll_synchronize_srcu)
	seq_printf(m, "srcu_hold_start_ns: %llu\n", (u64)atomic64_read(&srcu_hold_start_ns));
	seq_printf(m, "srcu_hold_end_ns: %llu\n", (u64)atomic64_read(&srcu_hold_end_ns));
	seq_printf(m, "srcu_hold_cpu: %d\n", atomic_read(&srcu_hold_cpu_used));
#endif
#if HAVE(synchronize_rcu_tasks)
	seq_printf(m, "task_hold_start_ns: %llu\n", (u64)atomic64_read(&task_hold_start_ns));
	seq_printf(m, "task_hold_end_ns: %llu\n", (u64)atomic64_read(&task_hold_end_ns));
	seq_printf(m, "task_hold_pid: %d\n", atomic_read(&task_hold_pid));
#endif
#if HAVE(synchronize_rcu_tasks_trace)
	seq_printf(m, "trace_hold_start_ns: %llu\n", (u64)atomic64_read(&trace_hold_start_ns));
	seq_printf(m, "trace_hold_end_ns: %llu\n", (u64)atomic64_read(&trace_hold_end_ns));
	seq_printf(m, "trace_hold_pid: %d\n", atomic_read(&trace_hold_pid));
	seq_printf(m, "trace_hold_cpu: %d\n", atomic_read(&trace_hold_cpu_used));
#endif
	seq_printf(m, "gp_seq: %lu\n", rcu_get_gp_seq());
	return 0;
}

static int rcutrace_test_open(struct inode *inode, struct file *file)
{
	return single_open(file, rcutrace_test_show, NULL);
}

static const struct proc_ops rcutrace_test_proc_ops = {
	.proc_open = rcutrace_test_open,
	.proc_read = seq_read,
	.proc_lseek = seq_lseek,
	.proc_release = single_release,
	.proc_write = rcutrace_test_write,
};

static struct proc_dir_entry *proc_entry;

static int __init rcutrace_test_init(void)
{
	reset_counters();
	proc_entry = proc_create("rcutrace_test", 0600, NULL, &rcutrace_test_proc_ops);
	return proc_entry ? 0 : -ENOMEM;
}

static void __exit rcutrace_test_exit(void)
{
	proc_remove(proc_entry);
	/* Every queued callback is module code: wait for all of them before the text goes. */
	rcu_barrier();
	srcu_barrier(&rcutrace_test_srcu);
#if HAVE(rcu_barrier_tasks)
	rcu_barrier_tasks();
#endif
#if HAVE(rcu_barrier_tasks_trace)
	rcu_barrier_tasks_trace();
#endif
#if HAVE(rcu_barrier_tasks_rude)
	rcu_barrier_tasks_rude();
#endif
}

module_init(rcutrace_test_init);
module_exit(rcutrace_test_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Calls RCU update-side functions on command: ground truth for rcutrace's tests");
