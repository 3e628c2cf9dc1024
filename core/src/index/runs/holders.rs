//! Which offsets of one run each worker holds: one bitset per holding worker.
//!
//! A worker usually holds a prefix of a run (its tail evicted, or a divergence hung below),
//! so its bits are a run of ones from offset 0; holes in the middle are just cleared bits,
//! and never split the run.

/// One worker's bits over a run's offsets (bit `o % 64` of word `o / 64` is offset `o`).
#[derive(Debug)]
pub(super) struct Holder {
    pub(super) slot: u32,
    bits: Vec<u64>,
}

impl Holder {
    /// Whether the worker holds `offset`.
    pub(super) fn holds(&self, offset: u32) -> bool {
        let (word, bit) = split(offset);
        self.bits.get(word).is_some_and(|w| w >> bit & 1 == 1)
    }

    /// How many offsets from 0 on the worker holds without a gap, at most `limit`.
    pub(super) fn held_prefix(&self, limit: u32) -> u32 {
        let mut held = 0u32;
        for &word in &self.bits {
            let ones = word.trailing_ones();
            held += ones;
            if ones < 64 || held >= limit {
                break;
            }
        }
        held.min(limit)
    }

    /// One past the highest offset held (0 if none).
    fn end(&self) -> u32 {
        self.bits.iter().rposition(|&w| w != 0).map_or(0, |at| {
            at as u32 * 64 + (64 - self.bits[at].leading_zeros())
        })
    }

    /// The held offsets, ascending.
    pub(super) fn offsets(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().enumerate().flat_map(|(at, &word)| {
            (0..64u32)
                .filter(move |b| word >> b & 1 == 1)
                .map(move |b| at as u32 * 64 + b)
        })
    }
}

/// The holders of one run, sorted by slot.
#[derive(Debug, Default)]
pub(super) struct Holders(Vec<Holder>);

impl Holders {
    /// Every holder, by slot.
    pub(super) fn as_slice(&self) -> &[Holder] {
        &self.0
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The bits of `slot`, if it holds any offset of the run.
    pub(super) fn of(&self, slot: u32) -> Option<&Holder> {
        self.0
            .binary_search_by_key(&slot, |h| h.slot)
            .ok()
            .map(|at| &self.0[at])
    }

    /// Marks `offset` held by `slot`; false if it was already.
    pub(super) fn insert(&mut self, slot: u32, offset: u32) -> bool {
        let at = match self.0.binary_search_by_key(&slot, |h| h.slot) {
            Ok(at) => at,
            Err(at) => {
                self.0.insert(
                    at,
                    Holder {
                        slot,
                        bits: Vec::new(),
                    },
                );
                at
            }
        };
        let bits = &mut self.0[at].bits;
        let (word, bit) = split(offset);
        if bits.len() <= word {
            bits.resize(word + 1, 0);
        }
        let was = bits[word] >> bit & 1 == 1;
        bits[word] |= 1 << bit;
        !was
    }

    /// Clears `offset` for `slot` (dropping the holder with its last offset); false if it
    /// was not held.
    pub(super) fn remove(&mut self, slot: u32, offset: u32) -> bool {
        let Ok(at) = self.0.binary_search_by_key(&slot, |h| h.slot) else {
            return false;
        };
        let holder = &mut self.0[at];
        let (word, bit) = split(offset);
        let Some(w) = holder.bits.get_mut(word) else {
            return false;
        };
        let was = *w >> bit & 1 == 1;
        *w &= !(1 << bit);
        let end = holder.end();
        if end == 0 {
            self.0.remove(at);
        } else {
            holder.bits.truncate((end as usize).div_ceil(64));
        }
        was
    }

    /// Drops every offset `slot` holds, returning its holder.
    pub(super) fn remove_slot(&mut self, slot: u32) -> Option<Holder> {
        let at = self.0.binary_search_by_key(&slot, |h| h.slot).ok()?;
        Some(self.0.remove(at))
    }

    /// One past the highest offset any worker holds (0 if none).
    pub(super) fn end(&self) -> u32 {
        self.0.iter().map(Holder::end).max().unwrap_or(0)
    }
}

fn split(offset: u32) -> (usize, u32) {
    ((offset / 64) as usize, offset % 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_holes_and_ends() {
        let mut h = Holders::default();
        for o in [0, 1, 2, 3, 70, 71] {
            assert!(h.insert(5, o));
        }
        assert!(!h.insert(5, 2));
        assert!(h.insert(2, 0));
        let five = h.of(5).unwrap();
        assert_eq!(five.held_prefix(100), 4);
        assert_eq!(five.held_prefix(3), 3);
        assert!(five.holds(70) && !five.holds(69) && !five.holds(500));
        assert_eq!(five.offsets().collect::<Vec<_>>(), vec![0, 1, 2, 3, 70, 71]);
        assert_eq!(h.end(), 72);
        assert!(h.remove(5, 71) && h.remove(5, 70));
        assert!(!h.remove(5, 70));
        assert_eq!(h.end(), 4);
        for o in 0..64 {
            h.insert(7, o);
        }
        h.insert(7, 64);
        assert_eq!(h.of(7).unwrap().held_prefix(1000), 65);
        assert!(h.remove(2, 0));
        assert!(h.of(2).is_none());
        assert!(h.remove_slot(7).is_some());
        assert_eq!(h.as_slice().len(), 1);
    }
}
