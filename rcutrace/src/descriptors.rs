//! The process's table of file descriptors, made large enough at the start for the whole run.
//!
//! A run holds a descriptor for each map, program, link and perf event: past 64, the kernel
//! grows the table, and once the process has a second thread (the BTF pass beside the start)
//! growing it waits for a grace period (`expand_fdtable()` calls `synchronize_rcu()` when the
//! table is shared): rcutrace's own RCU work inside the start-up it is timed on, counted by
//! whoever measures the system's. Grown while rcutrace has one thread, it waits for nothing.

/// Descriptors the table is made ready for (fewer if the soft limit is lower): 8 KiB of the
/// kernel's memory, and well above what the largest run holds.
const RESERVED: libc::rlim_t = 1024;

/// Grows the table to `RESERVED` entries by asking for a descriptor at its top, then giving
/// it back. Called first in `main`, while rcutrace has one thread; a failure only leaves the
/// kernel to grow the table later, as it would have.
pub fn reserve_table() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    let top = limit.rlim_cur.min(RESERVED).saturating_sub(1);
    let Ok(top) = libc::c_int::try_from(top) else {
        return;
    };
    // F_DUPFD takes the lowest free descriptor at or above `top` (never closing one in use);
    // the kernel grows the table to hold it.
    // SAFETY: duplicates stderr (or fails); the new descriptor is ours and closed at once.
    let fd = unsafe { libc::fcntl(libc::STDERR_FILENO, libc::F_DUPFD_CLOEXEC, top) };
    if fd >= 0 {
        // SAFETY: closes only the descriptor just made.
        unsafe { libc::close(fd) };
    } else {
        log::debug!(
            "descriptor table not grown ahead: {}",
            std::io::Error::last_os_error()
        );
    }
}
