//! The flavours other than normal RCU's that a long-running command follows beside it (`stall
//! --flavor`, `serve --flavor`): each flavour's `gp --flavor` plan attached, its events
//! routed to its assembler, and the grace periods it finishes handed on with their flavour.

use std::collections::HashMap;

use anyhow::Result;
use rcutrace_common::gp::GpEvent;

use crate::{
    cli::Flavor,
    commands::gp::flavours,
    kernel,
    model::{
        flavour_grace_periods::{Assemble, FlavourGracePeriod, is_flavour_event},
        flavour_stall::InProgress,
    },
    trace::{probes::Probe, tracer::Constant},
};

/// One flavour followed: its grace periods assembled, of one tasks-RCU flavour or SRCU
/// domain where only one is kept.
struct Followed {
    flavor: &'static str,
    assembler: Box<dyn Assemble>,
    only: Option<u64>,
}

/// The flavours followed.
pub struct FollowedFlavours {
    followed: Vec<Followed>,
}

/// What following the flavours attaches: the probes (the ones it cannot do without among
/// them), and their load-time constants.
pub struct Attaching {
    pub probes: Vec<Probe>,
    pub needed: Vec<Probe>,
    pub constants: Vec<Constant>,
}

impl FollowedFlavours {
    /// `flavors` as given (`--flavor`, repeated): each followed once, with the hooks that
    /// take their grace periods apart into phases where `phases` (those this kernel has).
    pub fn plan(
        flavors: impl IntoIterator<Item = Flavor>,
        phases: bool,
    ) -> Result<(Self, Attaching)> {
        let mut distinct = Vec::new();
        for flavor in flavors {
            if !distinct.contains(&flavor) {
                distinct.push(flavor);
            }
        }
        let mut followed = Vec::new();
        let mut attaching = Attaching {
            probes: Vec::new(),
            needed: Vec::new(),
            constants: Vec::new(),
        };
        for flavor in distinct {
            let plan = flavours::plan(flavor)?;
            attaching.probes.extend(plan.probes);
            if phases && !plan.phase_steps.is_empty() {
                let functions: Vec<&str> = plan.phase_steps.iter().map(|p| p.function).collect();
                let present = kernel::functions_present(&functions)?;
                (attaching.probes).extend(
                    plan.phase_steps
                        .iter()
                        .filter(|p| present.contains(p.function)),
                );
            }
            attaching.needed.extend(plan.needed);
            attaching.constants.extend(plan.constants);
            followed.push(Followed {
                flavor: flavours::flavor_of(plan.map_name),
                assembler: plan.assembler,
                only: plan.only,
            });
        }
        Ok((FollowedFlavours { followed }, attaching))
    }

    /// Takes `event` if it is one of these flavours': the grace periods it finished, each
    /// with its flavour (`srcu`, `tasks`); `None` if it is not theirs.
    pub fn add(&mut self, event: &GpEvent) -> Option<Vec<(&'static str, FlavourGracePeriod)>> {
        if !is_flavour_event(event.kind) {
            return None;
        }
        let mut done = Vec::new();
        for followed in &mut self.followed {
            if followed.only.is_some_and(|only| event.value != only) {
                continue;
            }
            followed.assembler.add(event);
            done.extend(
                followed
                    .assembler
                    .take_done()
                    .into_iter()
                    .map(|gp| (followed.flavor, gp)),
            );
            // What began before tracing is no concern of a follower.
            followed.assembler.take_began_before_tracing();
        }
        Some(done)
    }

    /// Every flavour's grace periods in progress, and the flavour of each key.
    pub fn in_progress(&self) -> (Vec<InProgress>, HashMap<u64, &'static str>) {
        let mut in_progress = Vec::new();
        let mut flavors = HashMap::new();
        for followed in &self.followed {
            for gp in followed.assembler.in_progress_now() {
                flavors.insert(gp.key, followed.flavor);
                in_progress.push(gp);
            }
        }
        (in_progress, flavors)
    }
}
