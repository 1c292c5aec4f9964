//! rcutrace's own detaching, as it ends a run: how long each kind of hook took to come off
//! (the kernel waits for grace periods there: a kprobe is unregistered after a normal one, a
//! trampoline's old image freed after tasks-RCU ones), and the grace periods of each flavour
//! that ended meanwhile: those it waited for are among them.

use std::time::Duration;

/// A kind of hook, by how the kernel takes it off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookKind {
    Kprobe,
    Trampoline,
    Tracepoint,
}

impl HookKind {
    pub const ALL: [HookKind; 3] = [HookKind::Kprobe, HookKind::Trampoline, HookKind::Tracepoint];

    /// The name, for `n` of them.
    pub fn counted(self, n: usize) -> &'static str {
        match (self, n) {
            (HookKind::Kprobe, 1) => "kprobe",
            (HookKind::Kprobe, _) => "kprobes",
            (HookKind::Trampoline, 1) => "trampoline",
            (HookKind::Trampoline, _) => "trampolines",
            (HookKind::Tracepoint, 1) => "tracepoint",
            (HookKind::Tracepoint, _) => "tracepoints",
        }
    }
}

/// How long one kind of hook took to detach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DetachTime {
    pub kind: HookKind,
    pub hooks: usize,
    pub took: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnDetach {
    /// Each kind of hook the run had, in the order detached.
    pub times: Vec<DetachTime>,
    /// Grace periods that ended while detaching, by flavour name; or why they were not read.
    pub grace_periods: Result<Vec<(&'static str, u64)>, String>,
}

impl OwnDetach {
    pub fn took(&self) -> Duration {
        self.times.iter().map(|t| t.took).sum()
    }

    pub fn hooks(&self) -> usize {
        self.times.iter().map(|t| t.hooks).sum()
    }
}
