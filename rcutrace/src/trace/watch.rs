//! A check made every so often while the window is open (`stall`'s watch, `run`'s look at
//! its command), and what it says about the next one.

use std::{cell::Cell, time::Duration};

use anyhow::Result;

use super::tracer::Tracer;

/// A check made while the window is open, at most `every` apart, with the tracer at hand (to
/// read its maps, e.g. kernel stacks); it says when it is next due, or that the window is
/// over. The check is also made at once when the consumer of the events sets `now` (an
/// event the kernel sent to wake user space).
pub struct Watch<'a> {
    pub every: Duration,
    pub check: Check<'a>,
    pub now: Option<&'a Cell<bool>>,
    /// The check consumes the events so far first, and the event buffer is then read only
    /// by it (and when the kernel says it is filling): every wake-up costs an always-on
    /// command. Otherwise the buffer is read on its own schedule.
    pub reads_events: bool,
}

/// A watch's check, with the tracer at hand.
pub type Check<'a> = Box<dyn FnMut(&mut Tracer) -> Result<WatchNext> + 'a>;

/// When the next check is due, or that the window is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchNext {
    /// After `every`.
    Continue,
    /// After this long.
    Within(Duration),
    EndWindow,
}
