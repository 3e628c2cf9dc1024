//! Which offsets of one run each worker holds: per holding worker, the length of the prefix
//! it holds from offset 0 and, only when it holds offsets past a gap, a bitset of those.
//!
//! A worker usually holds a prefix of a run (its tail evicted, or a divergence hung below),
//! so most holders are two integers with nothing on the heap; holes in the middle are kept
//! in the bitset and never split the run.

/// One worker's offsets of a run: `0..prefix`, and the offsets set in `beyond` (all past
/// `prefix + 1`: offset `prefix` itself is never held, or it would extend the prefix).
#[derive(Debug)]
pub(super) struct Holder {
    pub(super) slot: u32,
    prefix: u32,
    /// Bit `o % 64` of word `o / 64` is offset `o`; `None` when no offset past the prefix
    /// is held, never an all-zero or zero-ended set. Boxed so that a holder is 16 bytes:
    /// one word for the rare bitset, not a vector's three.
    #[allow(clippy::box_collection)]
    beyond: Option<Box<Vec<u64>>>,
}

impl Holder {
    fn new(slot: u32) -> Self {
        Self {
            slot,
            prefix: 0,
            beyond: None,
        }
    }

    /// Whether the worker holds `offset`.
    pub(super) fn holds(&self, offset: u32) -> bool {
        offset < self.prefix || self.beyond.as_deref().is_some_and(|b| bit(b, offset))
    }

    /// How many offsets from 0 on the worker holds without a gap, at most `limit`.
    #[inline]
    pub(super) fn held_prefix(&self, limit: u32) -> u32 {
        self.prefix.min(limit)
    }

    /// One past the highest offset held (0 if none).
    fn end(&self) -> u32 {
        match self.beyond.as_deref() {
            // Normalised: the last word is not zero.
            Some(bits) => bits.last().map_or(self.prefix, |&w| {
                (bits.len() as u32 - 1) * 64 + (64 - w.leading_zeros())
            }),
            None => self.prefix,
        }
    }

    /// The held offsets, ascending.
    pub(super) fn offsets(&self) -> impl Iterator<Item = u32> + '_ {
        let beyond = self.beyond.as_deref().map_or(&[][..], |b| &b[..]);
        (0..self.prefix).chain(beyond.iter().enumerate().flat_map(|(at, &word)| {
            (0..64u32)
                .filter(move |b| word >> b & 1 == 1)
                .map(move |b| at as u32 * 64 + b)
        }))
    }

    fn is_empty(&self) -> bool {
        self.prefix == 0 && self.beyond.is_none()
    }

    /// Marks `offset` held; false if it was already.
    fn insert(&mut self, offset: u32) -> bool {
        if offset < self.prefix {
            return false;
        }
        if offset > self.prefix {
            let bits = self.beyond.get_or_insert_with(Box::default);
            let (word, b) = split(offset);
            if bits.len() <= word {
                bits.resize(word + 1, 0);
            }
            let was = bits[word] >> b & 1 == 1;
            bits[word] |= 1 << b;
            return !was;
        }
        self.prefix += 1;
        // Offsets held past the gap just closed join the prefix.
        if let Some(bits) = self.beyond.as_deref_mut() {
            while take_bit(bits, self.prefix) {
                self.prefix += 1;
            }
        }
        self.normalise();
        true
    }

    /// Clears `offset`; false if it was not held.
    fn remove(&mut self, offset: u32) -> bool {
        if offset + 1 == self.prefix {
            self.prefix -= 1; // the tail of the prefix: the common case
            return true;
        }
        if offset < self.prefix {
            // A hole inside the prefix: what follows it moves to the bitset.
            let bits = self.beyond.get_or_insert_with(Box::default);
            let (last_word, _) = split(self.prefix - 1);
            if bits.len() <= last_word {
                bits.resize(last_word + 1, 0);
            }
            for o in offset + 1..self.prefix {
                let (word, b) = split(o);
                bits[word] |= 1 << b;
            }
            self.prefix = offset;
            return true;
        }
        let was = self
            .beyond
            .as_deref_mut()
            .is_some_and(|b| take_bit(b, offset));
        self.normalise();
        was
    }

    /// Drops trailing zero words of the bitset, and the bitset once it is empty.
    fn normalise(&mut self) {
        if let Some(bits) = self.beyond.as_deref_mut() {
            while bits.last() == Some(&0) {
                bits.pop();
            }
            if bits.is_empty() {
                self.beyond = None;
            }
        }
    }
}

/// Whether `offset`'s bit is set.
fn bit(bits: &[u64], offset: u32) -> bool {
    let (word, b) = split(offset);
    bits.get(word).is_some_and(|w| w >> b & 1 == 1)
}

/// Clears `offset`'s bit, returning whether it was set.
fn take_bit(bits: &mut [u64], offset: u32) -> bool {
    let (word, b) = split(offset);
    match bits.get_mut(word) {
        Some(w) if *w >> b & 1 == 1 => {
            *w &= !(1 << b);
            true
        }
        _ => false,
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

    /// The offsets of `slot`, if it holds any offset of the run.
    #[inline]
    pub(super) fn of(&self, slot: u32) -> Option<&Holder> {
        self.0
            .binary_search_by_key(&slot, |h| h.slot)
            .ok()
            .map(|at| &self.0[at])
    }

    /// Marks `offset` held by `slot`; false if it was already.
    pub(super) fn insert(&mut self, slot: u32, offset: u32) -> bool {
        self.insert_indexed(slot, offset).1
    }

    /// [`Holders::insert`], also returning where `slot`'s holder is: valid for
    /// [`Holders::insert_at`] until another slot is inserted or removed.
    pub(super) fn insert_indexed(&mut self, slot: u32, offset: u32) -> (usize, bool) {
        let at = match self.0.binary_search_by_key(&slot, |h| h.slot) {
            Ok(at) => at,
            Err(at) => {
                self.0.insert(at, Holder::new(slot));
                at
            }
        };
        (at, self.0[at].insert(offset))
    }

    /// Marks `offset` held by the holder at `index` (from [`Holders::insert_indexed`]);
    /// false if it was already.
    pub(super) fn insert_at(&mut self, index: usize, offset: u32) -> bool {
        self.0[index].insert(offset)
    }

    /// Clears `offset` for `slot` (dropping the holder with its last offset); false if it
    /// was not held.
    pub(super) fn remove(&mut self, slot: u32, offset: u32) -> bool {
        let Ok(at) = self.0.binary_search_by_key(&slot, |h| h.slot) else {
            return false;
        };
        let was = self.0[at].remove(offset);
        if self.0[at].is_empty() {
            self.0.remove(at);
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

    #[test]
    fn holders_match_a_set_through_holes_refills_and_tail_cuts() {
        let mut h = Holders::default();
        let mut model = std::collections::BTreeSet::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let offset = (x % 150) as u32;
            if (x >> 40) % 3 != 0 {
                // Two inserts per removal: long prefixes with holes punched and refilled.
                assert_eq!(h.insert(3, offset), model.insert(offset), "step {step}");
            } else {
                assert_eq!(h.remove(3, offset), model.remove(&offset), "step {step}");
            }
            let held: Vec<u32> = h.of(3).map_or(Vec::new(), |x| x.offsets().collect());
            assert_eq!(
                held,
                model.iter().copied().collect::<Vec<_>>(),
                "step {step}"
            );
            let prefix = (0..).take_while(|o| model.contains(o)).count() as u32;
            assert_eq!(h.of(3).map_or(0, |x| x.held_prefix(u32::MAX)), prefix);
            assert_eq!(h.end(), model.last().map_or(0, |&o| o + 1), "step {step}");
            assert!((0..160).all(|o| h.of(3).is_some_and(|x| x.holds(o)) == model.contains(&o)));
        }
    }
}
