//! Who caused an event: the key `--by comm|pid|cpu|stack|cgroup` groups counts and latencies
//! by.
//!
//! The eBPF programs fill only the fields the chosen mode needs (the rest stay zero), so one
//! key type serves every mode and user space decides how to print it.

/// `BY_MODE` values, fixed at load time.
pub const BY_NONE: u32 = 0;
pub const BY_COMM: u32 = 1;
/// Process id, with the command name beside it (bpftrace's `@[pid, comm]`).
pub const BY_PID: u32 = 2;
pub const BY_CPU: u32 = 3;
pub const BY_STACK: u32 = 4;
/// The caller's cgroup (v2 id), alone or with the command name, or the process id and name.
pub const BY_CGROUP: u32 = 5;
pub const BY_CGROUP_COMM: u32 = 6;
pub const BY_CGROUP_PID: u32 = 7;
/// The SRCU domain the call is on: its `srcu_struct`, the first argument of the SRCU functions.
pub const BY_SRCU: u32 = 8;

/// SRCU domains initialised in the window whose initialiser is kept (`--by srcu`): a
/// dynamic `srcu_struct` (a KVM guest's) has no symbol, and is named by its address and the
/// code that initialised it. The oldest are dropped past this many.
pub const MAX_DOMAIN_INITS: u32 = 1024;
/// Frames kept of the stack that initialised a domain: `init_srcu_struct_fields()`, the
/// exported initialiser (when not a tail call), its caller and one more.
pub const DOMAIN_INIT_FRAMES: usize = 4;
/// The stack that initialised a domain, deepest first, zero after the last.
pub type DomainInit = [u64; DOMAIN_INIT_FRAMES];

/// Distinct kernel stacks that can be kept; more are counted as lost.
pub const MAX_STACKS: u32 = 8192;
/// Deepest kernel stack kept, in frames (return addresses); deeper frames are cut off.
pub const STACK_DEPTH: usize = 48;
/// A kernel stack: return addresses, deepest first, zero after the last.
pub type StackFrames = [u64; STACK_DEPTH];
/// `stack` of an event whose stack could not be kept.
pub const NO_STACK: u64 = 0;

/// Identifies a stack by its content (FNV-1a over the frames). Two stacks can still hash
/// alike: whoever keeps a stack under its hash checks with `same_stack` that the one already
/// there is the same, so that distinct stacks never share an id (the kernel's stack-trace
/// map lets them, when its buckets collide). Never `NO_STACK`.
#[inline(always)]
pub fn stack_hash(frames: &StackFrames) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < STACK_DEPTH {
        hash ^= frames[i];
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    if hash == NO_STACK { 1 } else { hash }
}

/// Whether two stacks are the same, frame by frame up to the first zero after the last.
#[inline(always)]
pub fn same_stack(a: &StackFrames, b: &StackFrames) -> bool {
    let mut i = 0;
    while i < STACK_DEPTH {
        if a[i] != b[i] {
            return false;
        }
        if a[i] == 0 {
            // Both end here: the kernel zero-fills what a stack does not use.
            return true;
        }
        i += 1;
    }
    true
}

/// One attribution key. `event` is the counter slot (count) or the timed function's index
/// (latency), so that one map holds every function.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Attribution {
    pub event: u32,
    /// Thread group id (the process), for BY_PID.
    pub tgid: u32,
    /// CPU the event happened on, for BY_CPU.
    pub cpu: u32,
    /// Whose doing the event was, in `run` (`followed::ORIGIN_*`); 0 in the other commands.
    pub origin: u32,
    /// Key of the caller's stack in the stack map (`stack_hash`), for BY_STACK; NO_STACK when
    /// it could not be kept.
    pub stack: u64,
    /// The caller's cgroup v2 id (its directory's inode number in the cgroup2 mount), for
    /// the BY_CGROUP modes.
    pub cgroup: u64,
    /// The SRCU domain (`srcu_struct` address) of a call on one, for BY_SRCU and in `run`;
    /// 0 elsewhere.
    pub domain: u64,
    /// Command name, NUL-padded, for BY_COMM and BY_PID.
    pub comm: [u8; 16],
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for Attribution {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_hashes_tell_stacks_apart_and_never_say_lost() {
        let mut a = [0u64; STACK_DEPTH];
        a[0] = 0xffff_ffff_8110_0005;
        a[1] = 0xffff_ffff_8120_0040;
        let mut b = a;
        b[1] += 1;
        assert_ne!(stack_hash(&a), stack_hash(&b));
        assert_eq!(stack_hash(&a), stack_hash(&a.clone()));
        assert_ne!(stack_hash(&[0; STACK_DEPTH]), NO_STACK);
    }

    #[test]
    fn stacks_are_compared_frame_by_frame() {
        let mut a = [0u64; STACK_DEPTH];
        a[0] = 0xffff_ffff_8110_0005;
        a[1] = 0xffff_ffff_8120_0040;
        assert!(same_stack(&a, &a.clone()));
        let mut deeper = a;
        deeper[2] = 0xffff_ffff_8130_0000;
        assert!(!same_stack(&a, &deeper));
        assert!(!same_stack(&deeper, &a));
        let mut other = a;
        other[0] += 1;
        assert!(!same_stack(&a, &other));
        let full = [0xffff_ffff_8110_0005u64; STACK_DEPTH];
        assert!(same_stack(&full, &full.clone()));
        let mut full_but_last = full;
        full_but_last[STACK_DEPTH - 1] += 1;
        assert!(!same_stack(&full, &full_but_last));
    }
}
