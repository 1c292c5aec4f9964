//! Types, constants and slot arithmetic shared by rcutrace's eBPF programs and its loader.
//!
//! Everything here is `no_std` and allocation-free so that the very same functions decide
//! histogram slots in the kernel and label them in user space.
#![no_std]

pub mod callbacks;
pub mod counters;
pub mod hist;
pub mod latency;
