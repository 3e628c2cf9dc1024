//! Sorted sets of worker slots, and the merge operations queries use on them.

/// How many slots a [`WorkerSet`] keeps inline.
const INLINE: usize = 3;

/// A set of worker slots kept sorted. Up to three slots live inline (no allocation), which
/// covers most blocks: a block is usually cached by few workers. 16 bytes either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WorkerSet {
    /// `slots[..len]`.
    Inline { len: u8, slots: [u32; INLINE] },
    /// More than [`INLINE`] slots (boxed, so the set stays 16 bytes: a bare `Vec` would make
    /// every set, most of which never spill, 32 bytes).
    #[allow(clippy::box_collection)]
    Spilled(Box<Vec<u32>>),
}

impl Default for WorkerSet {
    fn default() -> Self {
        WorkerSet::Inline {
            len: 0,
            slots: [0; INLINE],
        }
    }
}

impl WorkerSet {
    /// Adds a slot; returns false if it was there already.
    pub(crate) fn insert(&mut self, slot: u32) -> bool {
        let at = match self.as_slice().binary_search(&slot) {
            Ok(_) => return false,
            Err(at) => at,
        };
        match self {
            WorkerSet::Inline { len, slots } => {
                let n = usize::from(*len);
                if n < INLINE {
                    slots.copy_within(at..n, at + 1);
                    slots[at] = slot;
                    *len += 1;
                } else {
                    let mut spilled = Vec::with_capacity(INLINE * 2 + 2);
                    spilled.extend_from_slice(&slots[..at]);
                    spilled.push(slot);
                    spilled.extend_from_slice(&slots[at..]);
                    *self = WorkerSet::Spilled(Box::new(spilled));
                }
            }
            WorkerSet::Spilled(list) => list.insert(at, slot),
        }
        true
    }

    /// Removes a slot; returns false if it was not there.
    pub(crate) fn remove(&mut self, slot: u32) -> bool {
        let Ok(at) = self.as_slice().binary_search(&slot) else {
            return false;
        };
        match self {
            WorkerSet::Inline { len, slots } => {
                slots.copy_within(at + 1..usize::from(*len), at);
                *len -= 1;
            }
            WorkerSet::Spilled(list) => {
                list.remove(at);
                if list.len() <= INLINE {
                    let mut slots = [0; INLINE];
                    slots[..list.len()].copy_from_slice(list);
                    *self = WorkerSet::Inline {
                        len: list.len() as u8,
                        slots,
                    };
                } else if list.len() * 4 < list.capacity() {
                    list.shrink_to_fit();
                }
            }
        }
        true
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[u32] {
        match self {
            WorkerSet::Inline { len, slots } => &slots[..usize::from(*len)],
            WorkerSet::Spilled(list) => list,
        }
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
    fn sets_spill_past_three_slots_and_come_back_inline() {
        assert_eq!(std::mem::size_of::<WorkerSet>(), 16);
        let mut s = WorkerSet::default();
        for slot in [9, 3, 7, 1, 5, 8] {
            assert!(s.insert(slot));
        }
        assert!(matches!(s, WorkerSet::Spilled(_)));
        assert_eq!(s.as_slice(), &[1, 3, 5, 7, 8, 9]);
        assert!(!s.insert(7));
        for slot in [8, 1, 9] {
            assert!(s.remove(slot));
        }
        assert!(matches!(s, WorkerSet::Inline { .. }));
        assert_eq!(s.as_slice(), &[3, 5, 7]);
        assert!(s.insert(4), "inline again, and full: spills again");
        assert_eq!(s.as_slice(), &[3, 4, 5, 7]);
        for slot in [3, 4, 5, 7] {
            assert!(s.remove(slot));
        }
        assert!(s.is_empty());
        assert!(!s.remove(3));
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
