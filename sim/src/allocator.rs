//! The process's allocator: mimalloc, asked for plain `malloc` whenever plain
//! `malloc` is aligned enough.
//!
//! A seed run allocates and frees many small values (messages, trace events, disk
//! buffers); glibc's allocator spent about a quarter of a sweep's CPU time on them.
//! The `mimalloc` crate's allocator sends every request through mimalloc's aligned
//! entry point, whose alignment checks cost 3% of a seed's instructions on requests
//! that ordinary `malloc` already satisfies. Like std's `System` allocator, this one
//! takes the aligned path only when the layout needs more than `malloc` guarantees.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;
#[cfg(target_os = "linux")]
use std::ffi::{c_int, c_long};

use libmimalloc_sys as mi;

/// The alignment every mimalloc block of at least this many bytes has
/// (`MI_MAX_ALIGN_SIZE`, C's `alignof(max_align_t)` on 64-bit targets). A smaller
/// block is aligned to every power of two up to its size, which is all a layout of
/// that size can ask for when its alignment is at most its size.
const MALLOC_ALIGN_BYTES: usize = 16;

/// Whether `malloc(size_bytes)` returns memory aligned for `align_bytes`.
fn malloc_suffices(size_bytes: usize, align_bytes: usize) -> bool {
    align_bytes <= MALLOC_ALIGN_BYTES && align_bytes <= size_bytes
}

/// mimalloc's `mi_option_arena_eager_commit`: its position in the C enum
/// `mi_option_t` (`mimalloc.h`), which the bindings name only with their
/// `extended` feature.
#[cfg(target_os = "linux")]
const OPTION_ARENA_EAGER_COMMIT: c_int = 4;

/// That option's default: eager commit on systems that overcommit, as Linux does.
#[cfg(target_os = "linux")]
const ARENA_EAGER_COMMIT_DEFAULT: c_long = 2;

#[cfg(target_os = "linux")]
extern "C" {
    /// mimalloc's `long mi_option_get(mi_option_t)`: the option's value, read from
    /// the environment (`MIMALLOC_...`) the first time.
    fn mi_option_get(option: c_int) -> c_long;
    /// mimalloc's `void mi_option_set(mi_option_t, long)`.
    fn mi_option_set(option: c_int, value: c_long);
}

/// Turns off the eager commit of mimalloc's arenas, unless the environment
/// (`MIMALLOC_ARENA_EAGER_COMMIT`) chose another value than the default.
///
/// A run of a thousand workers of 500 turns (`scripts/bench-whale`) peaked at
/// 1,085 MiB with arenas committed whole and at 982 MiB with them committed as
/// they fill. The option is read when the first arena is reserved, at
/// the process's first allocation, which std makes before `main`; so it is set
/// from the process's initializers ([`CONFIGURE_BEFORE_MAIN`]), and allocates
/// nothing.
#[cfg(target_os = "linux")]
extern "C" fn configure() {
    // SAFETY: reads and sets an integer option; mimalloc's options need no
    // initialization of the allocator.
    unsafe {
        if mi_option_get(OPTION_ARENA_EAGER_COMMIT) == ARENA_EAGER_COMMIT_DEFAULT {
            mi_option_set(OPTION_ARENA_EAGER_COMMIT, 0);
        }
    }
}

/// Runs [`configure`] among the process's initializers, before std's runtime
/// allocates anything.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static CONFIGURE_BEFORE_MAIN: extern "C" fn() = configure;

/// mimalloc, through its unaligned entry points where they suffice.
pub struct Mimalloc;

// SAFETY: every path returns mimalloc memory aligned for the layout (the aligned
// entry points whenever `malloc_suffices` is false), or null on failure, and frees
// and reallocates only memory mimalloc gave out.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if malloc_suffices(layout.size(), layout.align()) {
            mi::mi_malloc(layout.size()).cast()
        } else {
            mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if malloc_suffices(layout.size(), layout.align()) {
            mi::mi_zalloc(layout.size()).cast()
        } else {
            mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi::mi_free(ptr.cast::<c_void>());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if malloc_suffices(new_size, layout.align()) {
            mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
        } else {
            mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that `ptr` is aligned for `layout` and starts with `kept_bytes` of the
    /// pattern `fill` writes.
    unsafe fn assert_holds(ptr: *mut u8, layout: Layout, kept_bytes: usize) {
        assert!(!ptr.is_null(), "{layout:?}");
        assert_eq!(ptr as usize % layout.align(), 0, "{layout:?}");
        assert!(
            (0..kept_bytes).all(|i| *ptr.add(i) == i as u8),
            "{layout:?}"
        );
    }

    unsafe fn fill(ptr: *mut u8, size_bytes: usize) {
        for i in 0..size_bytes {
            *ptr.add(i) = i as u8;
        }
    }

    /// Every size from 1 byte to 2 KiB, at every alignment from 1 to 64 bytes:
    /// allocated zeroed, allocated and filled, grown, then shrunk, each pointer
    /// aligned and each reallocation keeping the bytes that fit.
    #[test]
    fn every_layout_is_aligned_and_keeps_its_bytes() {
        let allocator = Mimalloc;
        for size in 1..=2048usize {
            for align in [1, 2, 4, 8, 16, 32, 64] {
                let layout = Layout::from_size_align(size, align).unwrap();
                let grown = Layout::from_size_align(size * 3 + 5, align).unwrap();
                let shrunk = Layout::from_size_align(size / 2 + 1, align).unwrap();
                // SAFETY: every layout has a non-zero size; each pointer is used within
                // the size it was last given and freed once, with that layout.
                unsafe {
                    let zeroed = allocator.alloc_zeroed(layout);
                    assert_holds(zeroed, layout, 0);
                    assert!((0..size).all(|i| *zeroed.add(i) == 0), "{layout:?}");
                    allocator.dealloc(zeroed, layout);

                    let ptr = allocator.alloc(layout);
                    assert_holds(ptr, layout, 0);
                    fill(ptr, size);
                    let ptr = allocator.realloc(ptr, layout, grown.size());
                    assert_holds(ptr, grown, size);
                    fill(ptr, grown.size());
                    let ptr = allocator.realloc(ptr, grown, shrunk.size());
                    assert_holds(ptr, shrunk, shrunk.size());
                    allocator.dealloc(ptr, shrunk);
                }
            }
        }
    }
}
