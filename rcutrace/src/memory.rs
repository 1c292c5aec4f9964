//! The process's memory allocator: dlmalloc over memory mapped in large regions that are kept
//! until the process exits.
//!
//! Every change to a process's mappings makes RCU work in the kernel it runs on: unmapping frees
//! VMAs and maple-tree nodes through `call_rcu()`, and mapping next to a mapping merges them
//! (which frees nodes too). musl's allocator maps and unmaps as it goes (every allocation above
//! 128 KiB, and its groups of small ones), which came to about a thousand `call_rcu()` per
//! `rcutrace count` on 6.12: rcutrace's own RCU work, counted by whoever measures the
//! system's, rcutrace included. Here memory is asked for a region at a time and never given
//! back: a region's untouched pages cost no memory, and the peak is what it was.

use std::alloc::{GlobalAlloc, Layout};
use std::ptr;
use std::sync::{Mutex, PoisonError};

use dlmalloc::{Allocator, Dlmalloc};

/// The least the allocator maps at once. A run's peak is a few MiB: a few regions in all.
const REGION: usize = 4 << 20;

/// The global allocator.
pub struct RetainingAllocator;

static HEAP: Mutex<Dlmalloc<Regions>> = Mutex::new(
    const {
        let mut heap = Dlmalloc::new_with_allocator(Regions);
        assert!(heap.set_granularity(REGION));
        // No pass that looks for empty regions to give back.
        heap.set_max_release_check_rate(0);
        heap
    },
);

fn heap() -> std::sync::MutexGuard<'static, Dlmalloc<Regions>> {
    // The allocator never panics while holding the lock; a poisoned lock guards a sound heap.
    HEAP.lock().unwrap_or_else(PoisonError::into_inner)
}

// SAFETY: dlmalloc keeps GlobalAlloc's contracts; the lock makes it one heap for all threads.
unsafe impl GlobalAlloc for RetainingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { heap().malloc(layout.size(), layout.align()) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe { heap().calloc(layout.size(), layout.align()) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { heap().free(ptr, layout.size(), layout.align()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { heap().realloc(ptr, layout.size(), layout.align(), new_size) }
    }
}

/// Anonymous private mappings, each at least `REGION`, never unmapped, moved or shrunk.
struct Regions;

// SAFETY: `alloc` returns a fresh mapping of the size it reports, or null; nothing is ever
// released, which the trait allows (every release may fail).
unsafe impl Allocator for Regions {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        let size = size.max(REGION);
        // SAFETY: a new anonymous mapping; no existing memory is touched.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            (ptr::null_mut(), 0, 0)
        } else {
            (addr.cast(), size, 0)
        }
    }

    fn remap(&self, _ptr: *mut u8, _old: usize, _new: usize, _can_move: bool) -> *mut u8 {
        ptr::null_mut()
    }

    fn free_part(&self, _ptr: *mut u8, _old: usize, _new: usize) -> bool {
        false
    }

    fn free(&self, _ptr: *mut u8, _size: usize) -> bool {
        false
    }

    fn can_release_part(&self, _flags: u32) -> bool {
        false
    }

    fn allocates_zeros(&self) -> bool {
        true
    }

    fn page_size(&self) -> usize {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Large and small blocks come back usable and are reused once freed.
    #[test]
    fn allocates_reuses_and_grows() {
        let allocator = RetainingAllocator;
        unsafe {
            let big = Layout::from_size_align(3 << 20, 64).unwrap();
            let a = allocator.alloc(big);
            assert!(!a.is_null() && (a as usize).is_multiple_of(64));
            a.write_bytes(0xa5, big.size());
            let a = allocator.realloc(a, big, 9 << 20);
            assert!(!a.is_null());
            assert_eq!(*a.add((3 << 20) - 1), 0xa5);
            allocator.dealloc(a, Layout::from_size_align(9 << 20, 64).unwrap());
            let small = Layout::from_size_align(24, 8).unwrap();
            let zeroed = allocator.alloc_zeroed(small);
            assert!(
                std::slice::from_raw_parts(zeroed, 24)
                    .iter()
                    .all(|b| *b == 0)
            );
            allocator.dealloc(zeroed, small);
        }
    }
}
