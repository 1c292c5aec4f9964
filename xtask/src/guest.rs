//! What the guest-side programs (rcu-workload, rcu-bench) share: the system calls that drive
//! a known amount of RCU work.

use std::io;

/// From include/uapi/linux/membarrier.h.
pub const MEMBARRIER_CMD_GLOBAL: libc::c_int = 1;

/// One getppid() system call: one `rcu_read_lock()` in the kernel (two `__rcu_read_lock()`
/// calls on Debian's 6.1 and 6.12).
pub fn sys_getppid() {
    // The raw syscall: a libc wrapper could cache the result and skip the kernel.
    // SAFETY: getppid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_getppid) };
}

/// One membarrier(MEMBARRIER_CMD_GLOBAL) system call: one `synchronize_rcu()` when more than
/// one CPU is online.
pub fn sys_membarrier_global() -> io::Result<()> {
    // SAFETY: membarrier takes integers only.
    let ret = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// CPUs online now.
pub fn online_cpus() -> i64 {
    // SAFETY: sysconf reads a system value.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }
}
