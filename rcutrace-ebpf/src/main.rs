//! rcutrace's eBPF programs.
//!
//! One module per family: `counters` (one program per counted function, for `rcutrace count`),
//! `latency` (entry/return pairs per timed function, for `rcutrace gplat` and `srlat`) and
//! `callbacks` (every RCU callback from queueing to invocation, for `rcutrace callbacks`).
//! `window` (is tracing on, is this rcutrace itself) serves all; `attribution` (the `--by`
//! key) the first two.
#![no_std]
#![no_main]
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod atomic;
mod attribution;
mod callbacks;
mod counters;
mod hash;
mod latency;
mod window;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects any program that could reach this.
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
