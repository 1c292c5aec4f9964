//! Developer tasks for rcutrace: building the workspace and running jobs in Debian kernels under QEMU.

pub mod bpftrace;
pub mod build;
pub mod cpio;
pub mod dist;
pub mod guest;
pub mod guest_state;
pub mod hang;
pub mod monitor;
pub mod setup;
pub mod soak;
pub mod test_runner;
pub mod testmod;
pub mod vm;
pub mod vm_slots;
pub mod workspace;

pub use vm::{GuestJob, GuestOutput, GuestTimeout, Kernel, run};
