//! rcutrace's eBPF programs.
//!
//! One module per family: `counters` (one program per counted function, for
//! `rcutrace count`), `latency` (an entry/return pair, for `rcutrace gplat` and `srlat`) and
//! `callbacks` (queueing to invocation of every RCU callback, for `rcutrace callbacks`).
//! All aggregate in the kernel; user space reads the maps when tracing ends.
#![no_std]
#![no_main]
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod atomic;
mod callbacks;
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
