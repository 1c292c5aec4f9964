//! Saved runs: `saved` reads a `-f json` run (rcutrace's or bpftrace's) back into the model,
//! `compare` sets two of them side by side.

pub mod compare;
pub mod saved;
