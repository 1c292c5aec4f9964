//! Who caused an event: the key `--by comm|pid|cpu|stack` groups counts and latencies by.
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

/// Entries in the kernel stack map.
pub const MAX_STACKS: u32 = 8192;
/// Deepest kernel stack kept, in frames (the kernel's own limit is 127).
pub const STACK_DEPTH: usize = 127;
/// `stack_id` of a stack that could not be kept.
pub const NO_STACK: i32 = -1;

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
    /// Id in the stack map, for BY_STACK; NO_STACK when it could not be kept.
    pub stack_id: i32,
    /// Command name, NUL-padded, for BY_COMM and BY_PID.
    pub comm: [u8; 16],
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for Attribution {}
