//! Types, constants and slot arithmetic shared by rcutrace's eBPF programs and its loader.
//!
//! Everything here is `no_std` and allocation-free so that the very same functions decide
//! histogram slots in the kernel and label them in user space. The `json` feature adds the
//! typed records of rcutrace's JSON output (user space only; they allocate).
#![no_std]

pub mod attribution;
pub mod callbacks;
pub mod counters;
pub mod followed;
pub mod gp;
pub mod hist;
pub mod latency;
pub mod own_work;
#[cfg(feature = "json")]
pub mod records;
pub mod stages;
