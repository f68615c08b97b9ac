//! A growable array of `Copy` values for the index's partition arrays.
//!
//! A partition array grows by an eighth at a time to about 100 KiB at 10 million rows. On the
//! malloc heap, each growth leaves the old allocation free, and glibc keeps those free pages:
//! measured at 10 million entries (`examples/index_ram.rs`), the process grew by 65.9 bytes per
//! 48-byte entry, of which `malloc_trim` could return 16. So an array past [`HEAP_MAX_BYTES`]
//! (one page) lives in its own anonymous mapping instead, grown with `mremap`, which moves page
//! tables rather than bytes and leaves nothing behind: the same measurement gives 52.0 bytes per
//! entry. Arrays under a page stay on the heap, so that a table of a few rows is not charged a
//! page per partition.

use std::alloc::{handle_alloc_error, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

const PAGE_BYTES: usize = 4096;
/// Arrays up to this size live on the heap.
const HEAP_MAX_BYTES: usize = PAGE_BYTES;

enum Storage<T> {
    Heap(Vec<T>),
    Pages {
        ptr: NonNull<T>,
        len: usize,
        mapped_bytes: usize,
    },
}

pub struct PageVec<T: Copy> {
    storage: Storage<T>,
}

// SAFETY: PageVec owns its mapping exclusively, like a Vec.
unsafe impl<T: Copy + Send> Send for PageVec<T> {}
// SAFETY: shared access only hands out &[T].
unsafe impl<T: Copy + Sync> Sync for PageVec<T> {}

fn pages_for<T>(len: usize) -> usize {
    (len * std::mem::size_of::<T>()).div_ceil(PAGE_BYTES) * PAGE_BYTES
}

fn map_failed(bytes: usize) -> ! {
    handle_alloc_error(Layout::from_size_align(bytes, PAGE_BYTES).expect("page layout"))
}

impl<T: Copy> Default for PageVec<T> {
    fn default() -> Self {
        PageVec {
            storage: Storage::Heap(Vec::new()),
        }
    }
}

impl<T: Copy> PageVec<T> {
    /// Bytes of memory held, for the index's size figure.
    pub fn held_bytes(&self) -> usize {
        match &self.storage {
            Storage::Heap(v) => v.capacity() * std::mem::size_of::<T>(),
            Storage::Pages { mapped_bytes, .. } => *mapped_bytes,
        }
    }

    /// Sets the length to `new_len`, filling new slots with `fill`; memory is held to fit.
    pub fn resize(&mut self, new_len: usize, fill: T) {
        let bytes = new_len * std::mem::size_of::<T>();
        match &mut self.storage {
            Storage::Heap(v) if bytes <= HEAP_MAX_BYTES => {
                v.reserve_exact(new_len.saturating_sub(v.len()));
                v.resize(new_len, fill);
            }
            Storage::Heap(v) => {
                let (ptr, mapped_bytes) = Self::map(pages_for::<T>(new_len));
                let old = v.len().min(new_len);
                // SAFETY: the mapping holds at least new_len >= old values.
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), ptr.as_ptr(), old) };
                self.storage = Storage::Pages {
                    ptr,
                    len: old,
                    mapped_bytes,
                };
                self.fill_to(new_len, fill);
            }
            Storage::Pages { len, .. } if new_len <= *len => {
                *len = new_len;
                self.shrink();
            }
            Storage::Pages {
                ptr, mapped_bytes, ..
            } => {
                let want = pages_for::<T>(new_len);
                if want > *mapped_bytes {
                    // SAFETY: ptr/mapped_bytes describe a live mapping of ours.
                    let p = unsafe {
                        libc::mremap(ptr.as_ptr().cast(), *mapped_bytes, want, libc::MREMAP_MAYMOVE)
                    };
                    if p == libc::MAP_FAILED {
                        map_failed(want);
                    }
                    *ptr = NonNull::new(p.cast()).unwrap_or_else(|| map_failed(want));
                    *mapped_bytes = want;
                }
                self.fill_to(new_len, fill);
            }
        }
    }

    /// Keeps only the values `keep` accepts, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let slice: &mut [T] = self;
        let mut kept = 0;
        for i in 0..slice.len() {
            if keep(&slice[i]) {
                slice[kept] = slice[i];
                kept += 1;
            }
        }
        match &mut self.storage {
            Storage::Heap(v) => v.truncate(kept),
            Storage::Pages { len, .. } => *len = kept,
        }
        self.shrink();
    }

    fn fill_to(&mut self, new_len: usize, fill: T) {
        if let Storage::Pages {
            ptr,
            len,
            mapped_bytes,
        } = &mut self.storage
        {
            assert!(new_len * std::mem::size_of::<T>() <= *mapped_bytes);
            for i in *len..new_len {
                // SAFETY: i is within the mapping, as asserted.
                unsafe { ptr.as_ptr().add(i).write(fill) };
            }
            *len = new_len;
        }
    }

    /// Returns pages no longer needed, and moves a small array back to the heap.
    fn shrink(&mut self) {
        let Storage::Pages {
            ptr,
            len,
            mapped_bytes,
        } = &mut self.storage
        else {
            if let Storage::Heap(v) = &mut self.storage {
                if v.capacity() > v.len() + v.len() / 4 + 16 {
                    v.shrink_to_fit();
                }
            }
            return;
        };
        if *len * std::mem::size_of::<T>() <= HEAP_MAX_BYTES / 2 {
            // SAFETY: the mapping holds len initialised values.
            let v = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *len) }.to_vec();
            Self::unmap(*ptr, *mapped_bytes);
            self.storage = Storage::Heap(v);
            return;
        }
        let want = pages_for::<T>(*len);
        if want + want / 4 < *mapped_bytes {
            // SAFETY: shrinking a live mapping of ours in place.
            let p = unsafe { libc::mremap(ptr.as_ptr().cast(), *mapped_bytes, want, 0) };
            if p != libc::MAP_FAILED {
                *mapped_bytes = want;
            }
        }
    }

    fn map(bytes: usize) -> (NonNull<T>, usize) {
        // SAFETY: an anonymous private mapping; no file, no fixed address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            map_failed(bytes);
        }
        (NonNull::new(p.cast()).unwrap_or_else(|| map_failed(bytes)), bytes)
    }

    fn unmap(ptr: NonNull<T>, bytes: usize) {
        // SAFETY: ptr/bytes describe a live mapping of ours that nothing refers to any more.
        unsafe { libc::munmap(ptr.as_ptr().cast(), bytes) };
    }
}

impl<T: Copy> Deref for PageVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.storage {
            Storage::Heap(v) => v,
            // SAFETY: the mapping holds len initialised values for as long as self lives.
            Storage::Pages { ptr, len, .. } => unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *len) },
        }
    }
}

impl<T: Copy> DerefMut for PageVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.storage {
            Storage::Heap(v) => v,
            // SAFETY: as above, and &mut self gives exclusive access.
            Storage::Pages { ptr, len, .. } => unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), *len) },
        }
    }
}

impl<T: Copy> Drop for PageVec<T> {
    fn drop(&mut self) {
        if let Storage::Pages {
            ptr, mapped_bytes, ..
        } = self.storage
        {
            Self::unmap(ptr, mapped_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Grows past the heap limit into pages, shrinks back, and keeps every value throughout.
    #[test]
    fn values_survive_moves_between_heap_and_pages() {
        let mut v: PageVec<u64> = PageVec::default();
        let mut model: Vec<u64> = Vec::new();
        for round in 0..40u64 {
            let n = v.len() + 1000;
            v.resize(n, round);
            model.resize(n, round);
            assert_eq!(&v[..], &model[..]);
            v[n / 2] = round * 7;
            model[n / 2] = round * 7;
        }
        assert!(matches!(v.storage, Storage::Pages { .. }));
        v.retain(|x| x % 3 == 0);
        model.retain(|x| x % 3 == 0);
        assert_eq!(&v[..], &model[..]);
        v.resize(10, 0);
        model.resize(10, 0);
        assert_eq!(&v[..], &model[..]);
        assert!(
            matches!(v.storage, Storage::Heap(_)),
            "a small array goes back to the heap"
        );
    }
}
