//! rcutrace's eBPF programs.
//!
//! Two families, one module each: `counters` (one program per counted function, for
//! `rcutrace count`) and `latency` (an entry/return pair, for `rcutrace gplat` and `srlat`).
//! Both aggregate in per-CPU arrays; user space sums the CPUs when tracing ends.
#![no_std]
#![no_main]
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod atomic;
mod counters;
mod latency;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects any program that could reach this.
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
