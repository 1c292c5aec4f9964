//! rcutrace's eBPF programs.
//!
//! Two families, one module each: `counters` (one program per counted function, for
//! `rcutrace count`) and `latency` (entry/return pairs per timed function, for `rcutrace gplat`
//! and `srlat`). `window` (is tracing on, is this rcutrace itself) and `attribution` (the
//! `--by` key) serve both.
#![no_std]
#![no_main]
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod atomic;
mod attribution;
mod counters;
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
