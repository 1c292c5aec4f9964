//! Saved runs: `saved` reads a `-f json` run (rcutrace's or bpftrace's) back into the model
//! (one file per kind of record: summaries, histograms, gp's grace periods, stages),
//! `figures` the units, percentiles and windows they all read back,
//! `compare` sets two of them side by side, `save` writes one (`--save`), `intervals` makes
//! one report of an `--interval` run's intervals, `gate` judges a comparison by `--fail-if`.

pub mod compare;
pub mod figures;
pub mod gate;
pub mod intervals;
pub mod save;
pub mod saved;
