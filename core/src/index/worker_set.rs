//! Sorted sets of worker slots, and the merge operations queries use on them.

/// How many slots a [`WorkerSet`] keeps inline.
const INLINE: usize = 2;

/// An unused inline place (never a slot: slots are numbered from 0 and stay far below).
const EMPTY: u32 = u32::MAX;

/// A set of worker slots kept sorted, in 16 bytes. Up to two slots live inline (no
/// allocation), which covers most blocks: a block is usually cached by few workers. More live
/// in one boxed slice, `[len, slots.., spare..]`, read with a single pointer hop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WorkerSet {
    /// Sorted slots, then [`EMPTY`] places.
    Inline([u32; INLINE]),
    /// More than [`INLINE`] slots: `[len, slots[..len], spare]`.
    Spilled(Box<[u32]>),
}

impl Default for WorkerSet {
    fn default() -> Self {
        WorkerSet::Inline([EMPTY; INLINE])
    }
}

impl WorkerSet {
    /// Adds a slot; returns false if it was there already.
    pub(crate) fn insert(&mut self, slot: u32) -> bool {
        debug_assert!(slot != EMPTY);
        let (at, len) = {
            let slots = self.as_slice();
            match slots.binary_search(&slot) {
                Ok(_) => return false,
                Err(at) => (at, slots.len()),
            }
        };
        match self {
            WorkerSet::Inline(slots) if len < INLINE => {
                slots.copy_within(at..len, at + 1);
                slots[at] = slot;
            }
            WorkerSet::Inline(slots) => {
                let mut spilled = vec![EMPTY; 1 + 2 * INLINE + 2].into_boxed_slice();
                spilled[0] = (len + 1) as u32;
                spilled[1..=at].copy_from_slice(&slots[..at]);
                spilled[1 + at] = slot;
                spilled[2 + at..2 + len].copy_from_slice(&slots[at..]);
                *self = WorkerSet::Spilled(spilled);
            }
            WorkerSet::Spilled(spilled) => {
                if 1 + len == spilled.len() {
                    let mut grown = vec![EMPTY; 1 + 2 * len].into_boxed_slice();
                    grown[..=len].copy_from_slice(spilled);
                    *spilled = grown;
                }
                spilled.copy_within(1 + at..1 + len, 2 + at);
                spilled[1 + at] = slot;
                spilled[0] += 1;
            }
        }
        true
    }

    /// Removes a slot; returns false if it was not there.
    pub(crate) fn remove(&mut self, slot: u32) -> bool {
        let (at, len) = {
            let slots = self.as_slice();
            match slots.binary_search(&slot) {
                Ok(at) => (at, slots.len()),
                Err(_) => return false,
            }
        };
        match self {
            WorkerSet::Inline(slots) => {
                slots.copy_within(at + 1..len, at);
                slots[len - 1] = EMPTY;
            }
            WorkerSet::Spilled(spilled) => {
                spilled.copy_within(2 + at..1 + len, 1 + at);
                spilled[len] = EMPTY;
                spilled[0] -= 1;
                let len = len - 1;
                if len <= INLINE {
                    let mut slots = [EMPTY; INLINE];
                    slots[..len].copy_from_slice(&spilled[1..=len]);
                    *self = WorkerSet::Inline(slots);
                } else if 4 * len < spilled.len() {
                    *spilled = spilled[..=2 * len].into();
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
            WorkerSet::Inline(slots) => {
                let len = usize::from(slots[0] != EMPTY) + usize::from(slots[1] != EMPTY);
                &slots[..len]
            }
            WorkerSet::Spilled(spilled) => &spilled[1..=spilled[0] as usize],
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
    fn sets_spill_past_two_slots_grow_shrink_and_come_back_inline() {
        assert_eq!(std::mem::size_of::<WorkerSet>(), 16);
        let mut s = WorkerSet::default();
        assert!(s.is_empty());
        assert!(s.insert(9));
        assert!(s.insert(3));
        assert!(matches!(s, WorkerSet::Inline(_)));
        assert!(s.insert(7), "a third slot spills");
        assert!(matches!(s, WorkerSet::Spilled(_)));
        assert_eq!(s.as_slice(), &[3, 7, 9]);
        let mut model: Vec<u32> = vec![3, 7, 9];
        for slot in (0..200).map(|i| (i * 37) % 211) {
            assert_eq!(s.insert(slot), !model.contains(&slot));
            if let Err(at) = model.binary_search(&slot) {
                model.insert(at, slot);
            }
            assert_eq!(s.as_slice(), model.as_slice());
        }
        assert!(!s.insert(7));
        for slot in (0..211).rev() {
            assert_eq!(s.remove(slot), model.contains(&slot));
            model.retain(|&m| m != slot);
            assert_eq!(s.as_slice(), model.as_slice());
            if model.len() <= INLINE {
                assert!(matches!(s, WorkerSet::Inline(_)), "{} slots", model.len());
            } else if let WorkerSet::Spilled(spilled) = &s {
                assert!(
                    spilled.len() <= 8 * model.len() + 1,
                    "shrinks as it empties"
                );
            }
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

    #[test]
    fn split_matches_a_model_on_random_sorted_lists() {
        let mut rng = crate::test_rng::Lcg(0x5EED);
        let mut next = |n: u64| (rng.next() >> 33) % n;
        let (mut kept, mut dropped) = (vec![], vec![]);
        for _ in 0..2_000 {
            // Both sizes from 0 to 80 over slots 0..100, so either list may be the longer.
            let (la, lh) = (next(81), next(81));
            let mut draw = |len: u64| {
                let mut v: Vec<u32> = (0..len).map(|_| next(100) as u32).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let active = draw(la);
            let holders = draw(lh);
            split_by(&active, &holders, &mut kept, &mut dropped);
            let (want_kept, want_dropped): (Vec<u32>, Vec<u32>) =
                active.iter().partition(|s| holders.contains(s));
            assert_eq!(
                (&kept, &dropped),
                (&want_kept, &want_dropped),
                "{active:?} by {holders:?}"
            );
        }
    }
}
