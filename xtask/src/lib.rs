//! Developer tasks for rcutrace: building the workspace and running jobs in Debian kernels under QEMU.

pub mod bench;
pub mod build;
pub mod cpio;
pub mod dist;
pub mod guest;
pub mod setup;
pub mod testmod;
pub mod vm;
pub mod workspace;

pub use vm::{GuestJob, GuestOutput, Kernel, run};
