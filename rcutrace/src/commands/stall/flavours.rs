//! `rcutrace stall --flavor tasks|srcu`: the grace periods of tasks RCU and SRCU watched
//! beside normal RCU's, with thresholds of their own. `gp --flavor`'s programs and assemblers
//! follow them; `model::flavour_stall` says when one in progress has grown old enough to warn
//! about, naming what holds it, and each warning names the tasks blocked behind it, read from
//! their kernel stacks as it is due (`kernel::blocked_tasks`).

use std::{collections::HashMap, time::Duration};

use anyhow::Result;
use rcutrace_common::gp::GpEvent;

use crate::{
    cli::Flavor,
    commands::{
        followed_flavours::{Attaching, FollowedFlavours},
        gp::flavours,
        naming,
    },
    kernel::{self, blocked_tasks, symbols::keeper::SymbolKeeper},
    model::{StallEvent, flavour_stall::FlavourStallWatch},
    trace::tracer::Tracer,
};

/// The flavours `stall` watches beside normal RCU.
pub struct FlavourWatches {
    flavours: FollowedFlavours,
    watch: FlavourStallWatch,
    /// The names given to the keys warned about, for their ends (said where no tracer is at
    /// hand to name them).
    names: HashMap<u64, String>,
    /// Whether reading the blocked tasks' stacks failed, and was said.
    blocked_failure_said: bool,
}

impl FlavourWatches {
    /// `flavors` as given (each watched once); `thresholds` ascending, without repeats.
    pub fn plan(flavors: &[Flavor], thresholds: Vec<Duration>) -> Result<(Self, Attaching)> {
        let (flavours, attaching) = FollowedFlavours::plan(flavors.iter().copied(), false)?;
        let watches = FlavourWatches {
            flavours,
            watch: FlavourStallWatch::new(thresholds),
            names: HashMap::new(),
            blocked_failure_said: false,
        };
        Ok((watches, attaching))
    }

    pub fn thresholds(&self) -> &[Duration] {
        self.watch.thresholds()
    }

    /// Takes `event` if it is one of these flavours', with the ends of grace periods warned
    /// about that it brought; `None` if it is not theirs.
    pub fn add(&mut self, event: &GpEvent) -> Option<Vec<StallEvent>> {
        let done = self.flavours.add(event)?;
        let mut ends = Vec::new();
        for (flavor, gp) in done {
            if let Some(ended) = self.watch.ended(&gp) {
                let key = self
                    .names
                    .get(&gp.key)
                    .cloned()
                    .unwrap_or_else(|| format!("{:#x}", gp.key));
                ends.push(StallEvent::FlavorEnded {
                    time: kernel::local_time(),
                    flavor,
                    key,
                    ended,
                });
            }
        }
        Some(ends)
    }

    /// The warnings due at `now_ns`, each with its key named.
    pub fn check(
        &mut self,
        now_ns: u64,
        tracer: &Tracer,
        symbols: &SymbolKeeper,
    ) -> Vec<StallEvent> {
        let (in_progress, flavors) = self.flavours.in_progress();
        let warnings = self.watch.check(&in_progress, now_ns);
        if warnings.is_empty() {
            return Vec::new();
        }
        // One namer, taken only when there is something to name.
        let mut name = naming::domain_names(tracer, symbols);
        let named: Vec<(&'static str, String, Vec<&'static str>)> = warnings
            .iter()
            .map(|warning| {
                let key = warning.grace_period.key;
                let flavor = flavors[&key];
                let key = self.names.entry(key).or_insert_with(|| name(key)).clone();
                let frames = flavours::wait_frames(flavor, &key);
                (flavor, key, frames)
            })
            .collect();
        // One look over every thread for all of them: it reads each blocked one's stack.
        let every_wait: Vec<&str> = named.iter().flat_map(|(_, _, f)| f.clone()).collect();
        let blocked = match blocked_tasks::blocked_in(&every_wait, std::process::id()) {
            Ok(blocked) => blocked,
            Err(e) => {
                if !self.blocked_failure_said {
                    self.blocked_failure_said = true;
                    eprintln!(
                        "rcutrace: warning: {e:#}: the tasks blocked behind the grace periods \
                         warned about are not named"
                    );
                }
                Vec::new()
            }
        };
        (warnings.into_iter().zip(named))
            .map(|(mut warning, (flavor, key, frames))| {
                warning.blocked = (blocked.iter())
                    .filter(|task| blocked_tasks::in_any(&task.stack, &frames))
                    .cloned()
                    .collect();
                StallEvent::FlavorWarning {
                    time: kernel::local_time(),
                    flavor,
                    key,
                    warning,
                }
            })
            .collect()
    }

    /// How long until a grace period in progress passes its next threshold, if one will.
    pub fn next_due(&self, now_ns: u64) -> Option<Duration> {
        self.watch.next_due(&self.flavours.in_progress().0, now_ns)
    }
}
