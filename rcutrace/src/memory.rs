//! The process's memory allocator: dlmalloc over memory mapped in large regions that are kept
//! until the process exits, and a mapping of its own for each of the few very large blocks.
//!
//! Every change to a process's mappings makes RCU work in the kernel it runs on: unmapping frees
//! VMAs and maple-tree nodes through `call_rcu()`, and mapping next to a mapping merges them
//! (which frees nodes too). musl's allocator maps and unmaps as it goes (every allocation above
//! 128 KiB, and its groups of small ones), which came to about a thousand `call_rcu()` per
//! `rcutrace count` on 6.12: rcutrace's own RCU work, counted by whoever measures the
//! system's, rcutrace included. Here small blocks come from regions that are never given back
//! (untouched pages cost no memory). Blocks of `LARGE` and more, musl's own threshold, get a
//! mapping each, grown by mremap() in place of a copy, as musl does: there are a handful per
//! run (the eBPF object's copies among them).
//! The price: about 2 MiB more peak memory than musl's allocator (in Debian's 6.12 and on a
//! host alike; on the host, dlmalloc left to give memory back cost as much, so it is dlmalloc's
//! own and not the keeping).

use std::alloc::{GlobalAlloc, Layout};
use std::ptr;
use std::sync::{Mutex, PoisonError};

use dlmalloc::{Allocator, Dlmalloc};

/// The least the heap maps at once: more than a run needs, so that one region serves it.
const REGION: usize = 16 << 20;
/// Blocks this large or larger get a mapping of their own.
const LARGE: usize = 128 << 10;
const PAGE: usize = 4096;

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

/// Whether a block of `layout` gets a mapping of its own.
fn is_large(layout: Layout) -> bool {
    layout.size() >= LARGE && layout.align() <= PAGE
}

// SAFETY: dlmalloc keeps GlobalAlloc's contracts, and the lock makes it one heap for all
// threads; a large block is a whole mapping, page-aligned, which `is_large` tells from its
// layout alone (the same at allocation, reallocation and release).
unsafe impl GlobalAlloc for RetainingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout) {
            return map(layout.size());
        }
        unsafe { heap().malloc(layout.size(), layout.align()) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(layout) {
            // A fresh anonymous mapping reads as zeroes.
            return map(layout.size());
        }
        unsafe { heap().calloc(layout.size(), layout.align()) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_large(layout) {
            // SAFETY: `ptr` is the whole mapping `map` made for this layout.
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
            return;
        }
        unsafe { heap().free(ptr, layout.size(), layout.align()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: GlobalAlloc's caller gives a valid size for the same alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (is_large(layout), is_large(new_layout)) {
            (false, false) => unsafe {
                heap().realloc(ptr, layout.size(), layout.align(), new_size)
            },
            (true, true) => {
                // SAFETY: `ptr` is a whole mapping of `layout.size()` bytes.
                let moved = unsafe {
                    libc::mremap(ptr.cast(), layout.size(), new_size, libc::MREMAP_MAYMOVE)
                };
                if moved == libc::MAP_FAILED {
                    ptr::null_mut()
                } else {
                    moved.cast()
                }
            }
            // From the heap to a mapping of its own or back: a copy, as any allocator's.
            _ => unsafe {
                let new = self.alloc(new_layout);
                if !new.is_null() {
                    ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new
            },
        }
    }
}

/// A fresh anonymous mapping of `size` bytes, or null.
fn map(size: usize) -> *mut u8 {
    // No transparent huge pages for this process: where the kernel gives them to every mapping
    // (Debian's do), the first touch of a region would fault in 2 MiB at once, some MiB more of
    // peak memory. Set for the process, not by madvise() on the mapping, which changes (and
    // may split) the kernel's record of it.
    // SAFETY: a process setting; a kernel without it refuses, which costs only memory.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
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
        ptr::null_mut()
    } else {
        addr.cast()
    }
}

/// Anonymous private mappings, each at least `REGION`, never unmapped, moved or shrunk.
struct Regions;

// SAFETY: `alloc` returns a fresh mapping of the size it reports, or null; nothing is ever
// released, which the trait allows (every release may fail).
unsafe impl Allocator for Regions {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        let size = size.max(REGION);
        let addr = map(size);
        if addr.is_null() {
            (ptr::null_mut(), 0, 0)
        } else {
            (addr, size, 0)
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
        PAGE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Large and small blocks come back usable, keep their contents as they grow and shrink
    /// across the size that gives a block its own mapping, and are zeroed where asked.
    #[test]
    fn allocates_reuses_and_grows() {
        let allocator = RetainingAllocator;
        unsafe {
            let middling = Layout::from_size_align(LARGE / 2, 16).unwrap();
            let m = allocator.alloc(middling);
            m.write_bytes(0x3c, middling.size());
            let m = allocator.realloc(m, middling, 2 * LARGE);
            assert_eq!(*m.add(LARGE / 2 - 1), 0x3c);
            let large = Layout::from_size_align(2 * LARGE, 16).unwrap();
            let m = allocator.realloc(m, large, 100);
            assert_eq!(*m.add(99), 0x3c);
            allocator.dealloc(m, Layout::from_size_align(100, 16).unwrap());
            let zeroed = allocator.alloc_zeroed(large);
            assert!(
                std::slice::from_raw_parts(zeroed, large.size())
                    .iter()
                    .all(|b| *b == 0)
            );
            allocator.dealloc(zeroed, large);
            // More than a page of alignment stays in the heap.
            let aligned = Layout::from_size_align(LARGE, 2 * PAGE).unwrap();
            let a = allocator.alloc(aligned);
            assert!((a as usize).is_multiple_of(2 * PAGE));
            allocator.dealloc(a, aligned);

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
