//! rcutrace's eBPF programs.
//!
//! One module per family: `counters` (one program per counted function, for `rcutrace count`),
//! `latency` (entry/return pairs per timed function, for `rcutrace gplat` and `srlat`) and
//! `callbacks` (every RCU callback from queueing to invocation, for `rcutrace callbacks`) and
//! `gp` (each grace period's events, for `rcutrace gp`) and `stages` (what a timed
//! `synchronize_rcu()` waited for, for `srlat --stages`) and `followed` (a command's threads,
//! the work they queue and their time off the CPU, for `rcutrace run`), with `origin` saying
//! whose doing a timed call is there.
//! `window` (is tracing on, is this rcutrace itself) serves all; `attribution` (the `--by`
//! key) the first two.
#![no_std]
#![no_main]
#![feature(core_intrinsics)]
#![allow(internal_features)]

/// Declares an eBPF program (`kprobe`, `kretprobe`, `fentry` or `fexit`) in an ELF section of
/// its own, `KIND/NAME`, as aya's attribute macros would with `function = NAME`.
///
/// aya 0.14 gives every program a copy of the line information of its whole section when it
/// parses the object: ~150 programs sharing four sections cost user space ~24 MiB and most of
/// the parse's time. With a section each, a program carries only its own lines and function
/// records (rcutrace's build.rs also drops the line information, so this keeps the object
/// cheap to parse should that ever be skipped). aya ignores what follows the slash: user space
/// names the function to attach to.
macro_rules! program {
    ($kind:ident fn $name:ident($ctx:ident: $context:ty) -> u32 $body:block) => {
        #[unsafe(no_mangle)]
        #[unsafe(link_section = concat!(stringify!($kind), "/", stringify!($name)))]
        pub fn $name(raw: *mut ::core::ffi::c_void) -> u32 {
            let $ctx = <$context>::new(raw);
            $body
        }
    };
}

mod args;
mod atomic;
mod attribution;
mod callbacks;
mod counters;
mod followed;
mod gp;
mod hash;
mod latency;
mod origin;
mod own_work;
mod stages;
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
