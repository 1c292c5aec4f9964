//! Whose doing a call is in `rcutrace run`: the command's (a thread of its process tree) or
//! the work it caused (a kworker running a work item it queued). `followed` keeps the maps as
//! threads fork and exit and work items run; `latency` asks at each timed call.

use aya_ebpf::{macros::map, maps::HashMap};
use rcutrace_common::followed::*;

use crate::window;

/// 1 in `run`: timed calls count only where `origin` says they are the command's doing.
#[unsafe(no_mangle)]
static FOLLOWING: u32 = 0;

// Declared with one entry: `run` sizes them at load time.
/// The command's threads, by thread id (`TREE_COMMAND`), and while it starts the thread of
/// rcutrace that launches it (`TREE_LAUNCHER`).
#[map]
pub static TREE: HashMap<u32, u8> = HashMap::with_max_entries(1, 0);
/// Kworkers running a caused work item now, by thread id.
#[map]
pub static WORKING: HashMap<u32, u8> = HashMap::with_max_entries(1, 0);

/// Whether only followed calls count (`run`).
#[inline(always)]
pub fn following() -> bool {
    window::constant(&FOLLOWING) != 0
}

/// Whose doing a call made now by thread `tid` is (`ORIGIN_*`).
#[inline(always)]
pub fn origin(tid: u32) -> u32 {
    if command_thread(tid) {
        ORIGIN_COMMAND
    } else if unsafe { WORKING.get(&tid) }.is_some() {
        ORIGIN_CAUSED_WORK
    } else {
        ORIGIN_NONE
    }
}

/// Whether thread `tid` is one of the command's.
#[inline(always)]
pub fn command_thread(tid: u32) -> bool {
    unsafe { TREE.get(&tid) }.is_some_and(|&mark| mark == TREE_COMMAND)
}
