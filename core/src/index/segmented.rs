//! A growable array whose elements never move, readable without locks.
//!
//! An array may start with a *head* of `HEAD` elements (a type parameter, 0 unless given),
//! allocated with it and read by a plain index with no chunk to find or check: for arrays
//! whose first elements are read many times per operation. Past the head, element
//! `i` lives in chunk `k = log2(i / BASE + 1)` (counting from the head's end), which holds
//! `BASE << k` elements and is allocated the first time any of its elements is asked for.
//! Readers of an existing element take no lock; growing allocates one chunk, never moving
//! earlier ones.

use std::sync::OnceLock;

const BASE: usize = 64;
const CHUNKS: usize = 27; // BASE * (2^27 - 1) > u32::MAX elements

/// See the module docs.
pub(crate) struct Segmented<T, const HEAD: usize = 0> {
    /// The first `HEAD` elements, allocated with the array.
    head: Box<[T]>,
    chunks: [OnceLock<Box<[T]>>; CHUNKS],
}

impl<T: Default, const HEAD: usize> Segmented<T, HEAD> {
    /// An array with its head allocated (in one piece) and no chunk yet.
    pub(crate) fn new() -> Self {
        Self {
            head: (0..HEAD).map(|_| T::default()).collect(),
            chunks: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    #[inline]
    fn locate(index: usize) -> (usize, usize) {
        let bucket = index / BASE + 1;
        let chunk = (usize::BITS - 1 - bucket.leading_zeros()) as usize;
        let start = BASE * ((1usize << chunk) - 1);
        (chunk, index - start)
    }

    /// The element at `index`, if it is in the head or its chunk exists.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        // Decided when compiled for arrays without a head: their reads pay nothing for it.
        if HEAD > 0 && index < HEAD {
            return Some(&self.head[index]);
        }
        let (chunk, offset) = Self::locate(index - HEAD);
        self.chunks.get(chunk)?.get().map(|c| &c[offset])
    }

    /// The element at `index`, allocating its chunk if needed.
    ///
    /// # Panics
    /// If `index` is past the largest supported index (more than `u32::MAX` elements past
    /// the head).
    pub(crate) fn get_or_alloc(&self, index: usize) -> &T {
        if HEAD > 0 && index < HEAD {
            return &self.head[index];
        }
        let (chunk, offset) = Self::locate(index - HEAD);
        let chunk = self.chunks[chunk].get_or_init(|| {
            let len = BASE << chunk;
            (0..len).map(|_| T::default()).collect()
        });
        &chunk[offset]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_are_stable_and_lazily_allocated() {
        let s: Segmented<std::sync::atomic::AtomicU32> = Segmented::new();
        assert!(s.get(0).is_none());
        for i in [0usize, 1, 63, 64, 65, 191, 192, 10_000] {
            s.get_or_alloc(i)
                .store(i as u32, std::sync::atomic::Ordering::Relaxed);
        }
        for i in [0usize, 1, 63, 64, 65, 191, 192, 10_000] {
            assert_eq!(
                s.get(i).unwrap().load(std::sync::atomic::Ordering::Relaxed),
                i as u32
            );
        }
        assert!(s.get(1_000_000).is_none());
    }

    #[test]
    fn a_head_and_the_chunks_after_it_keep_their_elements() {
        let s: Segmented<std::sync::atomic::AtomicU32, 100> = Segmented::new();
        let at = [0usize, 1, 99, 100, 101, 163, 164, 70_000];
        // The head exists from the start; chunks only once asked for.
        assert!(s.get(99).is_some() && s.get(100).is_none());
        for i in at {
            s.get_or_alloc(i)
                .store(i as u32 + 1, std::sync::atomic::Ordering::Relaxed);
        }
        for i in at {
            assert_eq!(
                s.get(i).unwrap().load(std::sync::atomic::Ordering::Relaxed),
                i as u32 + 1,
                "index {i}"
            );
        }
        // Neighbours are other elements, untouched.
        for i in [2usize, 98, 102, 165] {
            assert_eq!(
                s.get(i).unwrap().load(std::sync::atomic::Ordering::Relaxed),
                0
            );
        }
    }

    #[test]
    fn chunks_tile_the_index_space() {
        let mut expected = (0usize, 0usize);
        for i in 0..100_000usize {
            let (chunk, offset) = Segmented::<u8>::locate(i);
            assert_eq!((chunk, offset), expected, "index {i}");
            expected = if offset + 1 == BASE << chunk {
                (chunk + 1, 0)
            } else {
                (chunk, offset + 1)
            };
        }
        assert_eq!(Segmented::<u8>::locate(u32::MAX as usize).0, CHUNKS - 1);
    }
}
