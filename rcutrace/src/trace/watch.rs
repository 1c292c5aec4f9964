//! A check made every so often while the window is open (`stall`'s watch, `run`'s look at
//! its command), and what it says about the next one.

use std::{cell::Cell, time::Duration};

use anyhow::Result;

use super::tracer::Tracer;

/// A check made while the window is open, at most `every` apart, with the tracer at hand (to
/// read its maps, e.g. kernel stacks), after the events so far are consumed; it says when it
/// is next due, or that the window is over. The event buffer is then read only by the check
/// (and when the kernel says it is filling): every wake-up costs an always-on command. The
/// check is also made at once when the consumer of the events sets `now` (an event the
/// kernel sent to wake user space).
pub struct Watch<'a> {
    pub every: Duration,
    pub check: &'a mut dyn FnMut(&mut Tracer) -> Result<WatchNext>,
    pub now: Option<&'a Cell<bool>>,
}

/// When the next check is due, or that the window is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchNext {
    /// After `every`.
    Continue,
    /// After this long.
    Within(Duration),
    EndWindow,
}
