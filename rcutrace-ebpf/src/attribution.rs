//! Fills the `--by` key of an event: only the fields the chosen mode needs.

use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_current_comm, bpf_get_smp_processor_id,
        generated::{bpf_get_current_cgroup_id, bpf_get_stack},
    },
    macros::map,
    maps::{HashMap, LruHashMap, PerCpuArray},
    programs::ProbeContext,
};
use rcutrace_common::attribution::*;

use crate::window::constant;

/// How events are keyed (`BY_*`); BY_NONE leaves the key empty and keyed maps unused.
#[unsafe(no_mangle)]
static BY_MODE: u32 = BY_NONE;

/// Kernel stacks of the callers, for BY_STACK, by content hash.
// One entry: only `--by stack` sizes it at load time (MAX_STACKS).
#[map]
static STACKS: HashMap<u64, StackFrames> = HashMap::with_max_entries(1, 0);
/// Room to read a stack into (too large for the BPF stack).
#[map]
static STACK_SCRATCH: PerCpuArray<StackFrames> = PerCpuArray::with_max_entries(1, 0);

/// The stack that initialised each SRCU domain in the window, by its `srcu_struct`'s address.
// One entry: only runs that name domains size it at load time (MAX_DOMAIN_INITS).
#[map]
static DOMAIN_INITS: LruHashMap<u64, DomainInit> = LruHashMap::with_max_entries(1, 0);

// init_srcu_struct_fields(ssp, is_static): every dynamic srcu_struct's initialisation passes
// here on 6.1, 6.12 and 7.3 (the exported initialisers call it, often as a tail call); a
// static one is initialised here on first use, and has its symbol to be named by.
program! {
    kprobe fn domain_init_kprobe(ctx: ProbeContext) -> u32 {
        let ssp: u64 = ctx.arg(0).unwrap_or(0);
        let is_static: u64 = ctx.arg(1).unwrap_or(1);
        if ssp == 0 || is_static & 0xff != 0 {
            return 0;
        }
        let mut frames: DomainInit = [0; DOMAIN_INIT_FRAMES];
        let size = core::mem::size_of::<DomainInit>() as u32;
        let read = unsafe { bpf_get_stack(ctx.as_ptr(), frames.as_mut_ptr().cast(), size, 0) };
        if read > 0 {
            let _ = DOMAIN_INITS.insert(&ssp, &frames, 0);
        }
        0
    }
}

#[inline(always)]
pub fn mode() -> u32 {
    constant(&BY_MODE)
}

/// The key of the current event, and whether its stack (if wanted) could be kept.
#[inline(always)]
pub fn attribute<C: EbpfContext>(ctx: &C, event: u32, tgid: u32) -> (Attribution, bool) {
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
        BY_STACK => {
            key.stack = keep_stack(ctx);
            stack_kept = key.stack != NO_STACK;
        }
        BY_CGROUP => key.cgroup = unsafe { bpf_get_current_cgroup_id() },
        BY_CGROUP_COMM => {
            key.cgroup = unsafe { bpf_get_current_cgroup_id() };
            key.comm = bpf_get_current_comm().unwrap_or_default();
        }
        BY_CGROUP_PID => {
            key.cgroup = unsafe { bpf_get_current_cgroup_id() };
            key.tgid = tgid;
            key.comm = bpf_get_current_comm().unwrap_or_default();
        }
        _ => {}
    }
    (key, stack_kept)
}

/// Reads the kernel stack, stores it under its hash, and returns the hash (`NO_STACK` if it
/// could not be read or stored).
#[inline(always)]
pub fn keep_stack<C: EbpfContext>(ctx: &C) -> u64 {
    let Some(frames) = STACK_SCRATCH.get_ptr_mut(0) else {
        return NO_STACK;
    };
    // The kernel zero-fills what the stack does not use, so equal stacks hash equally.
    let size = core::mem::size_of::<StackFrames>() as u32;
    let read = unsafe { bpf_get_stack(ctx.as_ptr(), frames.cast(), size, 0) };
    if read <= 0 {
        return NO_STACK;
    }
    let frames = unsafe { &*frames };
    let hash = stack_hash(frames);
    // BPF_NOEXIST: a hash already kept is this stack's only if its frames are the same; a
    // different stack under the same hash is counted as lost, never merged with it.
    match STACKS.insert(&hash, frames, 1) {
        Ok(()) => hash,
        Err(_) => match unsafe { STACKS.get(&hash) } {
            Some(kept) if same_stack(kept, frames) => hash,
            _ => NO_STACK,
        },
    }
}
