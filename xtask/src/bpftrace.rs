//! bpftrace, which the benchmark measures rcutrace against and some VM tests and soak
//! scenarios run beside it: where Debian's package puts it on the host (the guests get the same
//! path), and the seed's scripts, run exactly as written.

/// Debian's bpftrace, which scripts/setup --bench installs.
pub const HOST_BPFTRACE: &str = "/usr/bin/bpftrace";

/// The seed's reader count, run by bpftrace exactly as written.
pub const BPFTRACE_COUNT: &str = "kprobe:__rcu_read_lock { @ = count(); }";
/// The seed's synchronize_rcu() latency script, run by bpftrace exactly as written.
pub const BPFTRACE_SRLAT: &str = "kprobe:synchronize_rcu { @start[tid] = nsecs; } \
kretprobe:synchronize_rcu /@start[tid]/ { @srlat = hist((nsecs - @start[tid]) / 1000000); \
delete(@start[tid]); }";
