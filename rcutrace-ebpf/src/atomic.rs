//! Atomic add for the BPF target, whose `core` has no atomic read-modify-write types
//! (the target spec declares no compare-and-swap). The intrinsic lowers to BPF's atomic add.

use core::intrinsics::{AtomicOrdering, atomic_xadd};

/// Adds `amount` to `*counter` atomically.
///
/// # Safety
/// `counter` must point to a live, aligned u64, such as a map value.
#[inline(always)]
pub unsafe fn add(counter: *mut u64, amount: u64) {
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(counter, amount) };
}
