//! The tracing machinery every command shares: `engine` runs a command's window from start to
//! end (load, attach, open, trace, close) on the rest; `probes` says what to hook and how (a
//! constant table and a pure planner), `tracer` does it through aya (with
//! `object` narrowing the eBPF object to the run's programs, and `own_links` loading and
//! linking what aya cannot, or only at a cost: kprobe-multi links and trampolines, and
//! `feature_probes` keeping aya's probes of the kernel from making RCU work), `session`
//! runs the window (with `alarm` waking it on its own schedule, `countdown` on a terminal and
//! `server` answering `serve`'s scrapes), `readings` reads the
//! programs' counters while it runs, and `sampling` switches the reader probe on and off;
//! `grace_periods` is what the grace-period programs take and give (their constants, events
//! and state), `stages` what `srlat --stages` adds to a run; `launch` runs a command inside
//! the window (`run`, `-c`), which `watch` looks at while it is open.

pub mod alarm;
pub mod countdown;
pub mod engine;
pub mod feature_probes;
pub mod grace_periods;
pub mod launch;
pub mod object;
pub mod own_links;
pub mod probes;
pub mod readings;
pub mod sampling;
pub mod server;
pub mod session;
pub mod stages;
pub mod tracer;
pub mod watch;
