//! The events behind `rcutrace srlat --stages`: where a `synchronize_rcu()` or
//! `synchronize_rcu_expedited()` caller's time went. They travel as `GpEvent`s (kinds from
//! 0x40 on, clear of `gp::EVENT_*`) beside the grace-period events and the latency samples
//! in the sample ring; user space joins each timed call to the grace period it waited for
//! (`rcutrace::model::stages`).

/// A traced thread entered `synchronize_rcu()`: `value` is `rcu_state.gp_seq` then, from
/// which user space knows the first grace period that can end its wait (`rcu_seq_snap()`).
pub const EVENT_SYNC: u32 = 0x40;
/// A traced thread entered `synchronize_rcu_expedited()` (on its own, or inside
/// `synchronize_rcu()` with `rcu_expedited` set): `value` is `rcu_state.expedited_sequence`,
/// `extra` its stack pointer at the entry, below which its `rcu_exp_work` lies if it queues
/// the expedited grace period itself.
pub const EVENT_SYNC_EXPEDITED: u32 = 0x41;
/// A traced thread queued the callback that will wake it (`call_rcu()` or
/// `call_rcu_hurry()` of `wakeme_after_rcu`): `value` is the `rcu_head`.
pub const EVENT_WAKEME_QUEUED: u32 = 0x42;
/// `wakeme_after_rcu()` ran: `value` is the `rcu_head`.
pub const EVENT_WAKEME_INVOKED: u32 = 0x43;
/// The expedited grace-period worker took a request (`wait_rcu_exp_gp()`): `value` is the
/// address of the requester's `rcu_exp_work`, on the requester's stack.
pub const EVENT_EXP_WORK: u32 = 0x44;
/// `sync_rcu_exp_select_cpus()` entered: CPUs are selected and sent IPIs.
pub const EVENT_EXP_SELECT: u32 = 0x45;
/// `sync_rcu_exp_select_cpus()` returned.
pub const EVENT_EXP_SELECT_END: u32 = 0x46;
/// An expedited IPI's handler ran (`rcu_exp_handler()`).
pub const EVENT_EXP_IPI: u32 = 0x47;
/// `rcu_exp_wait_wake(s)` entered: waiting for the CPUs' reports, then waking the waiters of
/// the expedited grace period that ends the sequence at `value` (`s`).
pub const EVENT_EXP_WAIT: u32 = 0x48;
/// `rcu_exp_wait_wake()` returned: the expedited grace period is over and its waiters woken.
pub const EVENT_EXP_WAIT_END: u32 = 0x49;

/// What the kernel's `rcu_seq_snap()` returns for a sequence counter read as `seq`: the value
/// the counter will have when the first grace period that began after the read has ended.
/// The low `gp::GP_SEQ_STATE_BITS` bits of the counter are its state (non-zero while a grace
/// period is in progress).
pub fn seq_snap(seq: u64) -> u64 {
    let state_mask = (1u64 << crate::gp::GP_SEQ_STATE_BITS) - 1;
    seq.wrapping_add(2 * state_mask + 1) & !state_mask
}

/// The counter's value while the grace period that ends it at `snap` is in progress (what
/// `rcu_gp_init()` leaves in `rcu_state.gp_seq`).
pub fn in_progress_of(snap: u64) -> u64 {
    let state_mask = (1u64 << crate::gp::GP_SEQ_STATE_BITS) - 1;
    snap.wrapping_sub(state_mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_waits_for_the_next_grace_period_or_the_one_after_the_current() {
        // Idle at 0x100: the next one, 0x101, ends the wait at 0x104.
        assert_eq!(seq_snap(0x100), 0x104);
        assert_eq!(in_progress_of(seq_snap(0x100)), 0x101);
        // 0x101 under way: it may have begun before the call, so the one after it.
        assert_eq!(seq_snap(0x101), 0x108);
        assert_eq!(in_progress_of(seq_snap(0x101)), 0x105);
        // The counter starts below zero and wraps.
        assert_eq!(seq_snap(u64::MAX - 3), 0);
        assert_eq!(seq_snap(u64::MAX - 2), 4);
    }

    #[test]
    fn stage_events_are_apart_from_grace_period_events_and_samples() {
        for kind in [EVENT_SYNC, EVENT_EXP_WAIT_END] {
            assert!(kind > crate::gp::EVENT_HOLDOUT_SAMPLE);
            assert!(kind < crate::latency::RECORD_SAMPLE);
        }
    }
}
