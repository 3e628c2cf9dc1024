//! Sorted sets of worker slots, and the merge operations queries use on them.

use smallvec::SmallVec;

/// A set of worker slots kept sorted. Up to four slots live inline (no allocation), which
/// covers most blocks: a block is usually cached by few workers.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct WorkerSet(SmallVec<[u32; 4]>);

impl WorkerSet {
    /// Adds a slot; returns false if it was there already.
    pub(crate) fn insert(&mut self, slot: u32) -> bool {
        match self.0.binary_search(&slot) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, slot);
                true
            }
        }
    }

    /// Removes a slot; returns false if it was not there.
    pub(crate) fn remove(&mut self, slot: u32) -> bool {
        match self.0.binary_search(&slot) {
            Ok(at) => {
                self.0.remove(at);
                if self.0.spilled() && self.0.len() * 4 < self.0.capacity() {
                    self.0.shrink_to_fit();
                }
                true
            }
            Err(_) => false,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn as_slice(&self) -> &[u32] {
        &self.0
    }
}

/// Splits sorted `active` by sorted `holders`: slots in both go to `kept`, the others to
/// `dropped`, both in order (both cleared first).
pub(crate) fn split_by(
    active: &[u32],
    holders: &[u32],
    kept: &mut Vec<u32>,
    dropped: &mut Vec<u32>,
) {
    kept.clear();
    dropped.clear();
    if active.len() * 8 < holders.len() {
        // Few active workers among many holders: look each one up.
        for &slot in active {
            if holders.binary_search(&slot).is_ok() {
                kept.push(slot);
            } else {
                dropped.push(slot);
            }
        }
        return;
    }
    let mut h = 0;
    for &slot in active {
        while h < holders.len() && holders[h] < slot {
            h += 1;
        }
        if h < holders.len() && holders[h] == slot {
            kept.push(slot);
            h += 1;
        } else {
            dropped.push(slot);
        }
    }
}

/// Merges two sorted, disjoint slot lists into `out` (cleared first).
pub(crate) fn merge_into(a: &[u32], b: &[u32], out: &mut Vec<u32>) {
    out.clear();
    out.reserve(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] < b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_keep_order() {
        let mut s = WorkerSet::default();
        assert!(s.insert(5));
        assert!(s.insert(1));
        assert!(!s.insert(5));
        assert!(s.insert(3));
        assert_eq!(s.as_slice(), &[1, 3, 5]);
        assert!(s.remove(3));
        assert!(!s.remove(3));
        assert_eq!(s.as_slice(), &[1, 5]);
    }

    #[test]
    fn split_and_merge() {
        let (mut kept, mut dropped, mut merged) = (vec![], vec![], vec![]);
        split_by(&[1, 2, 4, 7, 9], &[0, 2, 3, 7, 10], &mut kept, &mut dropped);
        assert_eq!(kept, vec![2, 7]);
        assert_eq!(dropped, vec![1, 4, 9]);
        merge_into(&kept, &dropped, &mut merged);
        assert_eq!(merged, vec![1, 2, 4, 7, 9]);
        split_by(
            &[3],
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            &mut kept,
            &mut dropped,
        );
        assert_eq!((kept.as_slice(), dropped.as_slice()), (&[3][..], &[][..]));
        split_by(
            &[10],
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            &mut kept,
            &mut dropped,
        );
        assert_eq!((kept.as_slice(), dropped.as_slice()), (&[][..], &[10][..]));
        split_by(&[1, 2], &[], &mut kept, &mut dropped);
        assert!(kept.is_empty());
        assert_eq!(dropped, vec![1, 2]);
    }
}
