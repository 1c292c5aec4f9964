//! Keeps the kernel's symbols while a run traces, so that a stack is named as it was when
//! captured: one snapshot of /proc/kallsyms as the window opens (on a thread of its own, off
//! the start-up path), then a cheap look every second (or as often as the command asks, or
//! whenever its owner wakes anyway) at which modules and BPF programs are loaded, and a new
//! snapshot only when one appeared.
//! What goes away stays named by the snapshot that had it. A module loaded and unloaded between two looks is not known: its
//! addresses print as unknown, never as a neighbour's. A run that starts a command in its
//! window (`run`, `-c`) reads the first snapshot before the command starts.
//!
//! Runs that never name an address never read kallsyms: the keeper starts only for runs that
//! keep stacks or function pointers, and a report asks it for names once for all its stacks.

use std::{
    sync::{
        Arc, Condvar, Mutex, MutexGuard,
        atomic::{AtomicUsize, Ordering},
    },
    thread,
    time::Duration,
};

use super::{Symbolizer, unknown};

/// How often the keeper looks for new modules and BPF programs, unless the command says.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Shared by the window's thread, the keeper's and (for `stall`) the printer's; the keeper's
/// thread stops when the last handle goes.
pub struct SymbolKeeper {
    shared: Arc<Shared>,
}

struct Shared {
    /// `None`: the owner looks (`look`), at wake-ups of its own.
    look_every: Option<Duration>,
    handles: AtomicUsize,
    state: Mutex<State>,
    stop: Mutex<bool>,
    stopped: Condvar,
}

#[derive(Default)]
enum State {
    #[default]
    NotRead,
    Read(Box<Symbolizer>),
    /// Reading failed (said once); addresses print as hex.
    Failed,
}

impl State {
    /// Brings the symbols up to date: the first snapshot, or a new one if something
    /// appeared. A failed refresh keeps the last snapshot.
    fn update(&mut self) {
        match self {
            State::NotRead => {
                *self = match Symbolizer::new() {
                    Ok(symbolizer) => State::Read(Box::new(symbolizer)),
                    Err(e) => {
                        log::warn!("kernel addresses are shown as hex: {e:#}");
                        State::Failed
                    }
                }
            }
            State::Read(symbolizer) => {
                if let Err(e) = symbolizer.refresh() {
                    log::debug!("kernel symbols not refreshed: {e:#}");
                }
            }
            State::Failed => {}
        }
    }
}

/// The symbols as of now, for naming a batch of addresses.
pub struct Names<'a>(MutexGuard<'a, State>);

impl Names<'_> {
    /// See `Symbolizer::frame`.
    pub fn frame(&self, addr: u64) -> String {
        match &*self.0 {
            State::Read(symbolizer) => symbolizer.frame(addr),
            _ => unknown(addr),
        }
    }

    /// See `Symbolizer::function_name`.
    pub fn function_name(&self, addr: u64) -> String {
        match &*self.0 {
            State::Read(symbolizer) => symbolizer.function_name(addr),
            _ => unknown(addr),
        }
    }
}

impl SymbolKeeper {
    pub fn new() -> Self {
        Self::looking_every(LOOK_EVERY)
    }

    /// A keeper that looks for newcomers every `look_every`: each look wakes a thread.
    pub fn looking_every(look_every: Duration) -> Self {
        Self::with_looks(Some(look_every))
    }

    /// A keeper whose owner looks for newcomers (`look`) when it wakes for its own reasons:
    /// for an always-on command, which pays for every wake-up.
    pub fn looked_after_by_owner() -> Self {
        Self::with_looks(None)
    }

    fn with_looks(look_every: Option<Duration>) -> Self {
        SymbolKeeper {
            shared: Arc::new(Shared {
                look_every,
                handles: AtomicUsize::new(1),
                state: Mutex::default(),
                stop: Mutex::default(),
                stopped: Condvar::new(),
            }),
        }
    }

    /// Takes the first snapshot now, on the calling thread: for a run that starts a command
    /// in its window, which may unload at once what it used (a module).
    pub fn read_now(&self) {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .update();
    }

    /// Takes the first snapshot (unless `read_now` did) on a thread of its own, which then
    /// looks for newcomers until the keeper is dropped (unless its owner looks).
    pub fn keep_while_tracing(&self) {
        let shared = Arc::clone(&self.shared);
        thread::spawn(move || {
            loop {
                shared
                    .state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .update();
                let Some(look_every) = shared.look_every else {
                    return;
                };
                let stop = shared.stop.lock().unwrap_or_else(|e| e.into_inner());
                let (stop, _) = shared
                    .stopped
                    .wait_timeout_while(stop, look_every, |stop| !*stop)
                    .unwrap_or_else(|e| e.into_inner());
                if *stop {
                    return;
                }
            }
        });
    }

    /// Looks for newcomers now, once the first snapshot is taken; passes if another thread
    /// is reading or naming meanwhile (that brings them up to date, or will).
    pub fn look(&self) {
        if let Ok(mut state) = self.shared.state.try_lock()
            && !matches!(*state, State::NotRead)
        {
            state.update();
        }
    }

    /// The symbols, brought up to date now (read the first time if the keeper has not).
    pub fn names(&self) -> Names<'_> {
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.update();
        Names(state)
    }
}

impl Default for SymbolKeeper {
    fn default() -> Self {
        Self::new()
    }
}

impl Clone for SymbolKeeper {
    fn clone(&self) -> Self {
        self.shared.handles.fetch_add(1, Ordering::Relaxed);
        SymbolKeeper {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for SymbolKeeper {
    fn drop(&mut self) {
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.shared.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
            self.shared.stopped.notify_all();
        }
    }
}
