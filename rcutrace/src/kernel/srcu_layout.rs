//! Where an SRCU domain keeps what `gp --flavor srcu` reads, from the kernel's BTF: its
//! grace-period number (`srcu_gp_seq`) and how its grace-period work leads back to it. 6.2
//! moved the update side out of `srcu_struct` into a `struct srcu_usage` of its own
//! (`srcu_struct.srcu_sup`), whose `srcu_ssp` points back.

use std::collections::HashMap;

use anyhow::{Context as _, Result, bail};

use super::btf::{self, Field};

const STRUCT_SUP: Field = ("srcu_struct", "srcu_sup");
const USAGE_GP_SEQ: Field = ("srcu_usage", "srcu_gp_seq");
const USAGE_WORK: Field = ("srcu_usage", "work");
const USAGE_SSP: Field = ("srcu_usage", "srcu_ssp");
const STRUCT_GP_SEQ: Field = ("srcu_struct", "srcu_gp_seq");
const STRUCT_WORK: Field = ("srcu_struct", "work");
/// The `work_struct` inside the domain's `delayed_work`.
const DELAYED_WORK: Field = ("delayed_work", "work");
/// One CPU's share of a domain: the work that runs its callbacks, and the domain.
const DATA_WORK: Field = ("srcu_data", "work");
const DATA_SSP: Field = ("srcu_data", "ssp");
/// The readers' counts, per CPU: arrays of one count per index up to 6.x, an array of
/// `struct srcu_ctr` (entered, left) per index on 7.x.
const STRUCT_SDA: Field = ("srcu_struct", "sda");
const DATA_LOCK_COUNT: Field = ("srcu_data", "srcu_lock_count");
const DATA_UNLOCK_COUNT: Field = ("srcu_data", "srcu_unlock_count");
const DATA_CTRS: Field = ("srcu_data", "srcu_ctrs");
const CTR_LOCKS: Field = ("srcu_ctr", "srcu_locks");
const CTR_UNLOCKS: Field = ("srcu_ctr", "srcu_unlocks");
/// Each count is a `long` (or an `atomic_long_t`).
const COUNT_SIZE: u32 = 8;

/// Every field read here, for a pass over the BTF that answers them all.
pub const FIELDS: [Field; 15] = [
    STRUCT_SUP,
    USAGE_GP_SEQ,
    USAGE_WORK,
    USAGE_SSP,
    STRUCT_GP_SEQ,
    STRUCT_WORK,
    DELAYED_WORK,
    DATA_WORK,
    DATA_SSP,
    STRUCT_SDA,
    DATA_LOCK_COUNT,
    DATA_UNLOCK_COUNT,
    DATA_CTRS,
    CTR_LOCKS,
    CTR_UNLOCKS,
];

/// Where a CPU's counts of a domain's readers lie in its `srcu_data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderCounts {
    /// `srcu_struct.sda`: the per-CPU `srcu_data`.
    pub sda: u32,
    /// The counts of readers that entered and left index 0.
    pub entered: u32,
    pub left: u32,
    /// From index 0's counts to index 1's.
    pub index_stride: u32,
}

/// Byte offsets, in the structure that holds each (see the module's comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrcuGpLayout {
    /// `srcu_struct.srcu_sup`, where the domain has a `srcu_usage`.
    pub usage: Option<u32>,
    /// `srcu_gp_seq` in `srcu_usage`, or in `srcu_struct`.
    pub gp_seq: u32,
    /// The `work_struct` that `process_srcu()` is given, in the same structure.
    pub work: u32,
    /// `srcu_usage.srcu_ssp` (0 without a `srcu_usage`).
    pub usage_ssp: u32,
    /// `srcu_data.work`, the `work_struct` `srcu_invoke_callbacks()` is given, and
    /// `srcu_data.ssp`, the domain.
    pub callbacks_work: u32,
    pub callbacks_domain: u32,
    /// `None` where the BTF has neither kind of count.
    pub readers: Option<ReaderCounts>,
}

pub fn layout() -> Result<SrcuGpLayout> {
    let offsets =
        btf::field_offsets(&FIELDS).context("reading SRCU's structures from the kernel BTF")?;
    let layout = of(&offsets)?;
    log::debug!("SRCU's layout: {layout:?}");
    Ok(layout)
}

/// The layout the offsets found describe; fails naming what is missing.
fn of(offsets: &HashMap<Field, u32>) -> Result<SrcuGpLayout> {
    let get = |field: Field| offsets.get(&field).copied();
    let delayed_work = get(DELAYED_WORK).unwrap_or(0);
    let (Some(callbacks_work), Some(callbacks_domain)) = (get(DATA_WORK), get(DATA_SSP)) else {
        bail!("this kernel's BTF has no srcu_data.work and ssp (is SRCU tree SRCU?)");
    };
    let readers = get(STRUCT_SDA).and_then(|sda| {
        let counts = match (get(DATA_LOCK_COUNT), get(DATA_UNLOCK_COUNT)) {
            (Some(entered), Some(left)) => (entered, left, COUNT_SIZE),
            _ => {
                let (ctrs, locks, unlocks) = (get(DATA_CTRS)?, get(CTR_LOCKS)?, get(CTR_UNLOCKS)?);
                // struct srcu_ctr is the two counts, the one that left last.
                (ctrs + locks, ctrs + unlocks, unlocks + COUNT_SIZE)
            }
        };
        Some(ReaderCounts {
            sda,
            entered: counts.0,
            left: counts.1,
            index_stride: counts.2,
        })
    });
    if let Some(usage) = get(STRUCT_SUP) {
        let (Some(gp_seq), Some(work), Some(ssp)) =
            (get(USAGE_GP_SEQ), get(USAGE_WORK), get(USAGE_SSP))
        else {
            bail!(
                "this kernel's BTF has srcu_struct.srcu_sup but not srcu_usage's srcu_gp_seq, work and srcu_ssp"
            );
        };
        return Ok(SrcuGpLayout {
            usage: Some(usage),
            gp_seq,
            work: work + delayed_work,
            usage_ssp: ssp,
            callbacks_work,
            callbacks_domain,
            readers,
        });
    }
    let (Some(gp_seq), Some(work)) = (get(STRUCT_GP_SEQ), get(STRUCT_WORK)) else {
        bail!(
            "this kernel's BTF has no srcu_struct.srcu_gp_seq and work, nor a srcu_usage (is SRCU tree SRCU?)"
        );
    };
    Ok(SrcuGpLayout {
        usage: None,
        gp_seq,
        work: work + delayed_work,
        usage_ssp: 0,
        callbacks_work,
        callbacks_domain,
        readers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_with_a_usage_is_read_through_it() {
        // Debian's 6.12: a count per index, in two arrays.
        let offsets = HashMap::from([
            (STRUCT_SUP, 16),
            (USAGE_GP_SEQ, 120),
            (USAGE_WORK, 288),
            (USAGE_SSP, 376),
            (DELAYED_WORK, 0),
            (STRUCT_SDA, 8),
            (DATA_LOCK_COUNT, 0),
            (DATA_UNLOCK_COUNT, 16),
            (DATA_WORK, 256),
            (DATA_SSP, 328),
        ]);
        assert_eq!(
            of(&offsets).unwrap(),
            SrcuGpLayout {
                usage: Some(16),
                gp_seq: 120,
                work: 288,
                usage_ssp: 376,
                callbacks_work: 256,
                callbacks_domain: 328,
                readers: Some(ReaderCounts {
                    sda: 8,
                    entered: 0,
                    left: 16,
                    index_stride: 8
                }),
            }
        );
        // Debian's 7.3: a struct srcu_ctr (entered, left) per index.
        let mut offsets = offsets;
        offsets.remove(&DATA_LOCK_COUNT);
        offsets.remove(&DATA_UNLOCK_COUNT);
        offsets.extend([(DATA_CTRS, 0), (CTR_LOCKS, 0), (CTR_UNLOCKS, 8)]);
        assert_eq!(
            of(&offsets).unwrap().readers,
            Some(ReaderCounts {
                sda: 8,
                entered: 0,
                left: 8,
                index_stride: 16
            })
        );
    }

    #[test]
    fn a_domain_without_one_is_read_in_place() {
        // Debian's 6.1: the work's own work_struct at the delayed_work's start.
        let offsets = HashMap::from([
            (STRUCT_GP_SEQ, 128),
            (STRUCT_WORK, 304),
            (DELAYED_WORK, 0),
            (DATA_WORK, 256),
            (DATA_SSP, 328),
        ]);
        assert_eq!(
            of(&offsets).unwrap(),
            SrcuGpLayout {
                usage: None,
                gp_seq: 128,
                work: 304,
                usage_ssp: 0,
                callbacks_work: 256,
                callbacks_domain: 328,
                readers: None,
            }
        );
    }

    #[test]
    fn a_usage_without_its_fields_is_an_error_that_names_them() {
        let callbacks = [(DATA_WORK, 256), (DATA_SSP, 328)];
        let offsets = HashMap::from([(STRUCT_SUP, 16), (USAGE_GP_SEQ, 120)]);
        let error = format!("{:#}", of(&offsets).unwrap_err());
        assert!(error.contains("srcu_data.work and ssp"), "{error}");
        let offsets = offsets.into_iter().chain(callbacks).collect();
        let error = format!("{:#}", of(&offsets).unwrap_err());
        assert!(error.contains("srcu_ssp"), "{error}");
        let error = format!("{:#}", of(&HashMap::from(callbacks)).unwrap_err());
        assert!(error.contains("srcu_gp_seq"), "{error}");
    }
}
