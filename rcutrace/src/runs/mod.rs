//! Saved runs: `saved` reads a `-f json` run (rcutrace's or bpftrace's) back into the model
//! (`grace_periods` the records only `gp` writes, `stages` those of `srlat --stages`), `compare` sets two of them side by side.

pub mod compare;
pub mod grace_periods;
pub mod saved;
pub mod stages;
