//! Fills the `--by` key of an event: only the fields the chosen mode needs.

use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_smp_processor_id},
    macros::map,
    maps::StackTrace,
    programs::tracing::StackIdContext,
};
use rcutrace_common::attribution::*;

use crate::window::constant;

/// How events are keyed (`BY_*`); BY_NONE leaves the key empty and keyed maps unused.
#[unsafe(no_mangle)]
static BY_MODE: u32 = BY_NONE;

/// Kernel stacks of the callers, for BY_STACK.
#[map]
static STACKS: StackTrace = StackTrace::with_max_entries(MAX_STACKS, 0);

#[inline(always)]
pub fn mode() -> u32 {
    constant(&BY_MODE)
}

/// The key of the current event; `None` for the stack when it could not be kept.
#[inline(always)]
pub fn attribute<C: StackIdContext>(ctx: &C, event: u32, tgid: u32) -> (Attribution, bool) {
    let mut key = Attribution {
        event,
        ..Default::default()
    };
    let mut stack_kept = true;
    match mode() {
        BY_COMM => key.comm = bpf_get_current_comm().unwrap_or_default(),
        BY_PID => {
            key.tgid = tgid;
            key.comm = bpf_get_current_comm().unwrap_or_default();
        }
        BY_CPU => key.cpu = unsafe { bpf_get_smp_processor_id() },
        BY_STACK => match ctx.get_stackid(&STACKS, 0) {
            Ok(id) => key.stack_id = id as i32,
            Err(_) => {
                key.stack_id = NO_STACK;
                stack_kept = false;
            }
        },
        _ => {}
    }
    (key, stack_kept)
}
