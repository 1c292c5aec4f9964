//! aya's probes of the kernel's BPF features, made without creating a device map.
//!
//! At the first load aya 0.14 asks, among a dozen other things, whether a CPU map and a
//! device map take a program id, by creating one of each and closing it. The kernel frees a
//! device map on a workqueue with a `synchronize_rcu()` and an `rcu_barrier()` (a callback
//! queued on every CPU, then a wait for all of them): RCU work of rcutrace's own in every run,
//! which whoever watches the system's counts (a second rcutrace does), for a feature of XDP
//! maps no rcutrace program uses.
//!
//! Creating a device map takes CAP_NET_ADMIN (newer kernels take CAP_SYS_ADMIN instead);
//! every other probe needs no more than CAP_BPF and CAP_PERFMON. So the probes run with
//! CAP_NET_ADMIN and CAP_SYS_ADMIN set aside from the calling thread's effective
//! capabilities, when CAP_BPF and CAP_PERFMON are in it, and they are raised again at once:
//! capabilities are a thread's own, no other thread of rcutrace loses them meanwhile. (A CPU
//! map takes CAP_BPF alone: its free's `synchronize_rcu()` remains.)

use std::sync::Once;

use caps::{CapSet, Capability, CapsHashSet};

/// What the probes of the features rcutrace's programs use need: kept.
const NEEDED: [Capability; 2] = [Capability::CAP_BPF, Capability::CAP_PERFMON];

/// What lets a probe create a device map: set aside while they run.
const SET_ASIDE: [Capability; 2] = [Capability::CAP_NET_ADMIN, Capability::CAP_SYS_ADMIN];

/// The kernel's features as aya probed them, probing them first (once per process) with
/// `SET_ASIDE` out of this thread's effective capabilities.
pub fn features() -> &'static aya_obj::Features {
    static PROBED: Once = Once::new();
    PROBED.call_once(|| {
        let aside = match caps::read(None, CapSet::Effective) {
            Ok(effective) => to_set_aside(&effective),
            Err(e) => {
                log::debug!("capabilities unreadable, aya's probes run with them all: {e}");
                Vec::new()
            }
        };
        let dropped: Vec<Capability> = aside
            .into_iter()
            .filter(|cap| caps::drop(None, CapSet::Effective, *cap).is_ok())
            .collect();
        aya::features();
        for cap in dropped {
            // From the permitted set it never left: only a kernel refusing it fails here.
            if let Err(e) = caps::raise(None, CapSet::Effective, cap) {
                log::warn!("{cap} could not be raised again after aya's feature probes: {e}");
            }
        }
    });
    aya::features()
}

/// The capabilities of `effective` to set aside: none unless the probes keep all they need
/// (a process given CAP_SYS_ADMIN without CAP_BPF keeps it, or its probes would fail).
fn to_set_aside(effective: &CapsHashSet) -> Vec<Capability> {
    if !NEEDED.iter().all(|cap| effective.contains(cap)) {
        return Vec::new();
    }
    SET_ASIDE
        .into_iter()
        .filter(|cap| effective.contains(cap))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(caps: &[Capability]) -> CapsHashSet {
        caps.iter().copied().collect()
    }

    #[test]
    fn root_sets_aside_the_network_and_admin_capabilities() {
        let all = caps::all();
        assert_eq!(
            to_set_aside(&all),
            vec![Capability::CAP_NET_ADMIN, Capability::CAP_SYS_ADMIN]
        );
        // Only what the thread has.
        let without_admin = set(&[
            Capability::CAP_BPF,
            Capability::CAP_PERFMON,
            Capability::CAP_NET_ADMIN,
        ]);
        assert_eq!(
            to_set_aside(&without_admin),
            vec![Capability::CAP_NET_ADMIN]
        );
    }

    #[test]
    fn nothing_is_set_aside_that_the_probes_would_need() {
        // CAP_SYS_ADMIN stands in for CAP_BPF and CAP_PERFMON where those are missing.
        for have in [
            set(&[Capability::CAP_SYS_ADMIN, Capability::CAP_NET_ADMIN]),
            set(&[
                Capability::CAP_SYS_ADMIN,
                Capability::CAP_BPF,
                Capability::CAP_NET_ADMIN,
            ]),
            set(&[Capability::CAP_PERFMON, Capability::CAP_SYS_ADMIN]),
        ] {
            assert_eq!(to_set_aside(&have), Vec::new(), "{have:?}");
        }
    }
}
