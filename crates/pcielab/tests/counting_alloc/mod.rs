//! A global allocator for memory-bound tests: the system allocator, counting the bytes it holds
//! and the most it has held, so a test can assert a peak as a ratio of its input's size
//! (deterministic, unlike the process's resident size).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the layout is the caller's, passed on unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = HELD.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this same layout.
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::SeqCst);
    }
}

/// The bytes held now.
pub fn held() -> usize {
    HELD.load(Ordering::SeqCst)
}

/// Runs `work` and returns its result with the most bytes held at once during it beyond what
/// was held before it started.
pub fn peak_during<T>(work: impl FnOnce() -> T) -> (T, usize) {
    let before = held();
    PEAK.store(before, Ordering::SeqCst);
    let result = work();
    (result, PEAK.load(Ordering::SeqCst) - before)
}
