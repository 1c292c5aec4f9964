use super::*;
use rcutrace_common::{attribution::Attribution, gp};

const CALLER: u32 = 500;
const KTHREAD: u32 = 15;
const WORKER: u32 = 90;

fn event(at_ns: u64, kind: u32, pid: u32, value: u64, extra: u64) -> GpEvent {
    GpEvent {
        at_ns,
        kind,
        pid,
        tgid: pid,
        value,
        extra,
        ..Default::default()
    }
}

fn sample(timed: u32, start_ns: u64, end_ns: u64) -> Sample {
    Sample {
        start_ns,
        kind: RECORD_SAMPLE,
        tid: CALLER,
        nanos: end_ns - start_ns,
        key: Attribution {
            event: timed,
            ..Default::default()
        },
    }
}

fn bytes<T>(record: &T) -> Vec<u8> {
    unsafe { std::slice::from_raw_parts((record as *const T).cast::<u8>(), size_of::<T>()) }
        .to_vec()
}

/// A normal grace period numbered `gp_seq` (in progress), from `start` to `end`.
fn grace_period(joiner: &mut Joiner, gp_seq: u64, start: u64, end: u64) {
    for e in [
        event(start, gp::EVENT_INIT_START, KTHREAD, 0, 0),
        event(start + 10, gp::EVENT_INIT_END, KTHREAD, gp_seq, 1),
        event(end - 10, gp::EVENT_CLEANUP_START, KTHREAD, 0, 0),
        event(end, gp::EVENT_CLEANUP_END, KTHREAD, 0, 0),
    ] {
        joiner.add(&bytes(&e));
    }
}

fn joiner() -> Joiner {
    Joiner::new(
        vec![
            StagedFunction {
                timed: 0,
                staged: Staged::SynchronizeRcu,
                map_name: "@srlat".into(),
                unit: Unit::Ms,
            },
            StagedFunction {
                timed: 1,
                staged: Staged::SynchronizeRcuExpedited,
                map_name: "@srelat".into(),
                unit: Unit::Us,
            },
        ],
        Some(false),
    )
}

fn assert_adds_up(call: &StagedCall) {
    let sum: u64 = call.stages_ns.iter().flatten().sum();
    assert_eq!(sum, call.latency_ns, "{call:?}");
}

/// A summary with one call on each path, for the renderers' tests.
pub(crate) fn both_paths() -> StagesSummary {
    let mut j = joiner();
    j.add(&bytes(&event(1000, events::EVENT_SYNC, CALLER, 0x101, 0)));
    j.add(&bytes(&event(
        1010,
        events::EVENT_WAKEME_QUEUED,
        CALLER,
        0xbeef,
        0,
    )));
    grace_period(&mut j, 0x105, 2500, 6_000_000);
    j.add(&bytes(&event(
        6_100_000,
        events::EVENT_WAKEME_INVOKED,
        3,
        0xbeef,
        0,
    )));
    j.add(&bytes(&sample(0, 990, 6_400_000)));
    let sp = 0xffff_c900_0001_3f00;
    j.add(&bytes(&event(
        7_000_000,
        events::EVENT_SYNC,
        CALLER,
        0x105,
        0,
    )));
    j.add(&bytes(&event(
        7_000_005,
        events::EVENT_SYNC_EXPEDITED,
        CALLER,
        0x40,
        sp,
    )));
    for e in [
        event(7_000_200, events::EVENT_EXP_WORK, WORKER, sp + 0x10_0000, 0),
        event(7_000_300, events::EVENT_EXP_SELECT, WORKER, 0, 0),
        event(7_000_310, events::EVENT_EXP_IPI, 1, 0, 0),
        event(7_000_400, events::EVENT_EXP_SELECT_END, WORKER, 0, 0),
        event(7_000_410, events::EVENT_EXP_WAIT, WORKER, 0x44, 0),
        event(7_090_000, events::EVENT_EXP_WAIT_END, WORKER, 0, 0),
    ] {
        j.add(&bytes(&e));
    }
    j.add(&bytes(&sample(0, 7_000_000, 7_100_000)));
    j.take(0, true)
}

#[test]
fn a_normal_call_waits_for_the_first_grace_period_after_its_entry() {
    let mut j = joiner();
    // gp_seq 0x101 is under way when the call comes at 1000: it needs 0x105.
    j.add(&bytes(&event(1000, events::EVENT_SYNC, CALLER, 0x101, 0)));
    j.add(&bytes(&event(
        1010,
        events::EVENT_WAKEME_QUEUED,
        CALLER,
        0xbeef,
        0,
    )));
    grace_period(&mut j, 0x101, 500, 2000);
    grace_period(&mut j, 0x105, 2500, 6000);
    j.add(&bytes(&event(
        7000,
        events::EVENT_WAKEME_INVOKED,
        3,
        0xbeef,
        0,
    )));
    let s = j.add(&bytes(&sample(0, 990, 7400)));
    assert_eq!(s.map(|s| s.nanos), Some(6410));
    let summary = j.take(0, true);
    assert_eq!(summary.calls.len(), 1);
    let call = &summary.calls[0];
    assert_eq!(
        (call.path, call.gp_seq, call.adjusted),
        (Path::Normal, 0x105, false)
    );
    assert_eq!(
        call.stages_ns,
        vec![Some(2500 - 990), Some(3500), Some(1000), Some(400), None]
    );
    assert_adds_up(call);
    let path = &summary.paths[0];
    assert_eq!((path.calls, path.latency_sum_ns), (1, 6410));
    let sums: u128 = path.stages.iter().map(|s| s.sum_ns).sum();
    assert_eq!(sums, path.latency_sum_ns);
    assert_eq!(summary.not_taken_apart, NotTakenApart::default());
    assert_eq!(summary.wake_from_gp, Some(false));
}

#[test]
fn a_call_returned_before_its_grace_period_is_assembled_waits_for_it() {
    let mut j = joiner();
    j.add(&bytes(&event(1000, events::EVENT_SYNC, CALLER, 0x100, 0)));
    // Woken (no callback seen: the kthread woke it) before cleanup returned: the grace
    // period ends there for this call.
    j.add(&bytes(&event(1200, gp::EVENT_INIT_START, KTHREAD, 0, 0)));
    j.add(&bytes(&event(1210, gp::EVENT_INIT_END, KTHREAD, 0x101, 1)));
    j.add(&bytes(&event(3000, gp::EVENT_CLEANUP_START, KTHREAD, 0, 0)));
    j.add(&bytes(&sample(0, 1000, 3500)));
    assert!(j.copy(0).calls.is_empty());
    j.add(&bytes(&event(3600, gp::EVENT_CLEANUP_END, KTHREAD, 0, 0)));
    let summary = j.take(0, false);
    let call = &summary.calls[0];
    assert_eq!(
        call.stages_ns,
        vec![Some(200), Some(2300), None, None, Some(0)]
    );
    assert!(call.adjusted);
    assert_adds_up(call);
    assert_eq!(summary.adjusted, 1);
    // The thread's next call, whose entry was not seen, is not joined by the last one's.
    j.add(&bytes(&sample(0, 4000, 9000)));
    let summary = j.take(0, false);
    assert!(summary.calls.is_empty());
    assert_eq!(summary.not_taken_apart.entry_not_seen, 1);
}

/// A waker callback invoked before the grace period it waits for began (events no call
/// can have, but a ring's records can say: another grace period matched, clocks of two
/// CPUs apart) crossed the bounds of a clamp, which panics: the call is adjusted and
/// counted out of order, its stages still adding up.
#[test]
fn milestones_out_of_order_are_counted_not_a_panic() {
    let mut j = joiner();
    j.add(&bytes(&event(1000, events::EVENT_SYNC, CALLER, 0x101, 0)));
    j.add(&bytes(&event(
        1010,
        events::EVENT_WAKEME_QUEUED,
        CALLER,
        0xbeef,
        0,
    )));
    j.add(&bytes(&event(
        1500,
        events::EVENT_WAKEME_INVOKED,
        3,
        0xbeef,
        0,
    )));
    grace_period(&mut j, 0x105, 2500, 6000);
    j.add(&bytes(&sample(0, 990, 7400)));
    let summary = j.take(0, true);
    let call = &summary.calls[0];
    assert!(call.adjusted && call.out_of_order, "{call:?}");
    // The wake-up is moved up to the grace period's start, which ends there for it.
    assert_eq!(
        call.stages_ns,
        vec![Some(2500 - 990), Some(0), Some(0), Some(7400 - 2500), None]
    );
    assert_adds_up(call);
    assert_eq!((summary.adjusted, summary.out_of_order), (1, 1));
    // A call in order is not.
    assert_eq!(both_paths().out_of_order, 0);
}

#[test]
fn an_expedited_call_is_told_from_another_callers_grace_period() {
    let mut j = joiner();
    let sp = 0xffff_c900_0001_3f00;
    // synchronize_rcu() with rcu_expedited set: its expedited entry decides the path.
    j.add(&bytes(&event(100, events::EVENT_SYNC, CALLER, 0x101, 0)));
    j.add(&bytes(&event(
        105,
        events::EVENT_SYNC_EXPEDITED,
        CALLER,
        0x40,
        sp,
    )));
    // Its own request, just below its stack pointer, ends the sequence at 0x44.
    for e in [
        event(200, events::EVENT_EXP_WORK, WORKER, sp - 0x90, 0),
        event(300, events::EVENT_EXP_SELECT, WORKER, 0, 0),
        event(310, events::EVENT_EXP_IPI, 1, 0, 0),
        event(400, events::EVENT_EXP_SELECT_END, WORKER, 0, 0),
        event(410, events::EVENT_EXP_WAIT, WORKER, 0x44, 0),
        event(900, events::EVENT_EXP_WAIT_END, WORKER, 0, 0),
    ] {
        j.add(&bytes(&e));
    }
    j.add(&bytes(&sample(1, 104, 950)));
    j.add(&bytes(&sample(0, 100, 960)));
    for (timed, stages) in [(0, [200, 100, 500, 60]), (1, [196, 100, 500, 50])] {
        let summary = j.take(timed, true);
        let call = &summary.calls[0];
        assert_eq!(call.path, Path::Expedited);
        assert_eq!((call.piggy_backed, call.ipis), (Some(false), Some(1)));
        assert_eq!(call.gp_seq, 0x44);
        assert_adds_up(call);
        assert_eq!(call.stages_ns, stages.map(Some));
    }
    // Another thread's request: this caller rode on it.
    let mut j = joiner();
    j.add(&bytes(&event(
        105,
        events::EVENT_SYNC_EXPEDITED,
        CALLER,
        0x41,
        sp,
    )));
    for e in [
        event(200, events::EVENT_EXP_WORK, WORKER, sp + 0x10_0000, 0),
        event(300, events::EVENT_EXP_SELECT, WORKER, 0, 0),
        event(400, events::EVENT_EXP_SELECT_END, WORKER, 0, 0),
        event(410, events::EVENT_EXP_WAIT, WORKER, 0x48, 0),
        event(900, events::EVENT_EXP_WAIT_END, WORKER, 0, 0),
    ] {
        j.add(&bytes(&e));
    }
    j.add(&bytes(&sample(1, 104, 950)));
    let summary = j.take(1, true);
    assert_eq!(summary.calls[0].piggy_backed, Some(true));
    assert_eq!(summary.paths[0].piggy_backed, 1);
}

#[test]
fn calls_that_cannot_be_taken_apart_are_counted() {
    let mut j = joiner();
    // No entry event: lost, or this synchronize_rcu() took another way.
    j.add(&bytes(&sample(0, 100, 200)));
    // An entry event of an earlier call of this thread is not this call's.
    j.add(&bytes(&event(300, events::EVENT_SYNC, CALLER, 0x100, 0)));
    j.add(&bytes(&sample(0, 310, 900)));
    j.add(&bytes(&sample(0, 1000, 1100)));
    // The first call's grace period was lost, and a later one ended: it will not come.
    grace_period(&mut j, 0x105, 400, 800);
    // Records of no known kind.
    j.add(&[0u8; 12]);
    let summary = j.take(0, true);
    assert_eq!(
        summary.not_taken_apart,
        NotTakenApart {
            entry_not_seen: 2,
            grace_period_not_seen: 1
        }
    );
    assert!(summary.calls.is_empty());
    assert_eq!(j.malformed, 1);
    // Still pending when the window closes: its grace period's end was never seen.
    let mut j = joiner();
    j.add(&bytes(&event(300, events::EVENT_SYNC, CALLER, 0x100, 0)));
    j.add(&bytes(&sample(0, 310, 900)));
    assert_eq!(j.take(0, false).not_taken_apart.grace_period_not_seen, 0);
    assert_eq!(j.take(0, true).not_taken_apart.grace_period_not_seen, 1);
}

#[test]
fn grace_periods_stay_in_order_across_the_counters_wrap() {
    let mut j = joiner();
    let before_wrap = u64::MAX - 2; // 0x...fffd: under way, the next is 0x1
    j.add(&bytes(&event(
        100,
        events::EVENT_SYNC,
        CALLER,
        before_wrap,
        0,
    )));
    grace_period(&mut j, before_wrap, 50, 150);
    grace_period(&mut j, 1, 200, 400);
    j.add(&bytes(&sample(0, 90, 500)));
    let summary = j.take(0, true);
    assert_eq!(summary.calls[0].gp_seq, 1);
    assert_eq!(summary.not_taken_apart, NotTakenApart::default());
}
