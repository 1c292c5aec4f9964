//! Host-wide limits on guests running at once. Each guest is one QEMU thread (single-threaded
//! TCG), so the host runs as many at full speed as it has cores: more, and every guest slows,
//! which the timing-bound scenarios feel. A guest holds a slot, a lock file under
//! `target/vm/slots/`, from before its image is built until QEMU exits; processes that boot
//! guests (test binaries run side by side, a benchmark, `cargo xtask vm`) share the slots
//! through the file locks, which the kernel releases if a holder dies.

use std::{
    fs::{self, File, TryLockError},
    path::{Path, PathBuf},
    thread,
    time::Duration,
};

use anyhow::{Context, Result};

use crate::workspace;

/// Overrides the number of slots (default: the host's available cores).
pub const SLOTS_ENV: &str = "XTASK_VM_SLOTS";

/// How long a waiting guest sleeps between looks at the slots.
const WAIT: Duration = Duration::from_millis(200);

/// A slot held until dropped.
#[derive(Debug)]
pub struct Slot {
    _lock: File,
}

/// The number of guests that may run at once.
pub fn slots() -> usize {
    std::env::var(SLOTS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Waits for a free slot and takes it.
pub fn acquire() -> Result<Slot> {
    acquire_in(&workspace::vm_dir().join("slots"), slots())
}

/// Waits for one of `count` slots in `dir` and takes it.
fn acquire_in(dir: &Path, count: usize) -> Result<Slot> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let paths: Vec<PathBuf> = (0..count)
        .map(|i| dir.join(format!("slot-{i}.lock")))
        .collect();
    loop {
        for path in &paths {
            let file = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            match file.try_lock() {
                Ok(()) => return Ok(Slot { _lock: file }),
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("locking {}", path.display()));
                }
            }
        }
        thread::sleep(WAIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two holders never share a slot: with every slot taken, a taker waits until one is
    /// dropped.
    #[test]
    fn a_slot_is_held_until_dropped() {
        let dir = workspace::target_dir().join(format!("tmp/slots-test-{}", std::process::id()));
        let held: Vec<Slot> = (0..2).map(|_| acquire_in(&dir, 2).unwrap()).collect();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiting_in = dir.clone();
        let waiter = thread::spawn(move || {
            let slot = acquire_in(&waiting_in, 2).unwrap();
            tx.send(()).unwrap();
            slot
        });
        assert!(rx.recv_timeout(3 * WAIT).is_err(), "a slot was shared");
        drop(held);
        rx.recv_timeout(Duration::from_secs(10))
            .expect("a dropped slot was not taken");
        drop(waiter.join().unwrap());
        let _ = fs::remove_dir_all(&dir);
    }
}
