//! An fentry program's argument as a plain number. The verifier types a pointer argument
//! (`struct srcu_struct *`) as a pointer and refuses arithmetic on it, which the compiler may
//! emit for a select (`mask & arg`); a copy read through `bpf_probe_read_kernel` is a number.

use aya_ebpf::{EbpfContext, helpers::bpf_probe_read_kernel, programs::FEntryContext};

/// Argument `n` of the traced function, as a number (0 if it cannot be read).
#[inline(always)]
pub fn number(ctx: &FEntryContext, n: usize) -> u64 {
    let slot = (ctx.as_ptr() as *const u64).wrapping_add(n);
    unsafe { bpf_probe_read_kernel(slot) }.unwrap_or(0)
}
