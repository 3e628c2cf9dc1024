//! Which offsets of one run each worker holds: per holding worker, the length of the prefix
//! it holds from offset 0 and, only when it holds offsets past a gap, a bitset of those.
//!
//! A worker usually holds a prefix of a run (its tail evicted, or a divergence hung below),
//! so most holders are one word, slot and prefix packed, in an array sorted by slot that a
//! query reads in order; holes in the middle are kept in a bitset beside it (rare, off the
//! readers' path) and never split the run.

/// One holder as a query reads it: its slot in the high half, the prefix it holds from
/// offset 0 in the low half, so that the words sort by slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub(super) struct Held(u64);

impl Held {
    fn new(slot: u32, prefix: u32) -> Self {
        Self(u64::from(slot) << 32 | u64::from(prefix))
    }

    #[inline]
    pub(super) fn slot(self) -> u32 {
        (self.0 >> 32) as u32
    }

    #[inline]
    fn prefix(self) -> u32 {
        self.0 as u32
    }

    /// How many offsets from 0 on the worker holds without a gap, at most `limit`.
    #[inline]
    pub(super) fn held_prefix(self, limit: u32) -> u32 {
        self.prefix().min(limit)
    }

    /// Whether the worker holds offset 0 (a holder past a gap only holds no prefix).
    #[inline]
    pub(super) fn holds_first(self) -> bool {
        self.prefix() > 0
    }

    fn with_prefix(self, prefix: u32) -> Self {
        Self::new(self.slot(), prefix)
    }
}

/// One worker's offsets of a run: `0..prefix`, and the offsets set in `beyond` (all past
/// `prefix + 1`: offset `prefix` itself is never held, or it would extend the prefix).
#[derive(Debug, Clone, Copy)]
pub(super) struct Holder<'a> {
    prefix: u32,
    /// Bit `o % 64` of word `o / 64` is offset `o`; empty when no offset past the prefix is
    /// held, never zero-ended.
    beyond: &'a [u64],
}

impl Holder<'_> {
    /// Whether the worker holds `offset`.
    #[cfg(test)]
    pub(super) fn holds(&self, offset: u32) -> bool {
        offset < self.prefix || bit(self.beyond, offset)
    }

    /// How many offsets from 0 on the worker holds without a gap, at most `limit`.
    #[inline]
    pub(super) fn held_prefix(&self, limit: u32) -> u32 {
        self.prefix.min(limit)
    }

    /// One past the highest offset held (0 if none).
    fn end(&self) -> u32 {
        // Normalised: the last word is not zero.
        self.beyond.last().map_or(self.prefix, |&w| {
            (self.beyond.len() as u32 - 1) * 64 + (64 - w.leading_zeros())
        })
    }

    /// The held offsets, ascending.
    pub(super) fn offsets(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.prefix).chain(self.beyond.iter().enumerate().flat_map(|(at, &word)| {
            (0..64u32)
                .filter(move |b| word >> b & 1 == 1)
                .map(move |b| at as u32 * 64 + b)
        }))
    }
}

/// Whether `offset`'s bit is set.
#[cfg(test)]
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

/// Drops trailing zero words.
fn normalise(bits: &mut Vec<u64>) {
    while bits.last() == Some(&0) {
        bits.pop();
    }
}

/// The bitsets of the holders that hold offsets past a gap, by slot (ascending).
type Beyond = Vec<(u32, Vec<u64>)>;

/// The holders of one run, sorted by slot.
#[derive(Debug, Default)]
pub(super) struct Holders {
    held: Vec<Held>,
    /// Boxed: most runs have none, and a run pays one word for it, not a vector's three.
    #[allow(clippy::box_collection)]
    beyond: Option<Box<Beyond>>,
}

impl Holders {
    /// Every holder, by slot.
    #[inline]
    pub(super) fn as_slice(&self) -> &[Held] {
        &self.held
    }

    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Where `slot` is in [`Holders::as_slice`], or would be: the first index at or after
    /// `from` whose slot is not below `slot` (slots ascend). Gallops from `from`, so a query
    /// visiting slots in ascending order reads the array forward.
    #[inline]
    pub(super) fn seek(&self, from: usize, slot: u32) -> usize {
        let from = from.min(self.held.len());
        let rest = &self.held[from..];
        let mut step = 1;
        let mut below = 0; // rest[..below] is known to be under `slot`
        while step <= rest.len() && rest[step - 1].slot() < slot {
            below = step;
            step *= 2;
        }
        let upto = step.min(rest.len());
        from + below + rest[below..upto].partition_point(|h| h.slot() < slot)
    }

    /// [`Holders::seek`] one holder at a time: cheaper when `slot` is at most a few holders
    /// past `from`, as when a query's race is about as wide as the run. `from` is at most
    /// the number of holders (an index `seek` or `step` returned).
    #[inline]
    pub(super) fn step(&self, from: usize, slot: u32) -> usize {
        debug_assert!(from <= self.held.len());
        let mut at = from;
        while self.held.get(at).is_some_and(|h| h.slot() < slot) {
            at += 1;
        }
        at
    }

    fn index_of(&self, slot: u32) -> Result<usize, usize> {
        self.held.binary_search_by_key(&slot, |h| h.slot())
    }

    fn beyond_of(&self, slot: u32) -> &[u64] {
        self.beyond
            .as_deref()
            .and_then(|b| {
                b.binary_search_by_key(&slot, |&(s, _)| s)
                    .ok()
                    .map(|at| &b[at].1[..])
            })
            .unwrap_or(&[])
    }

    /// The offsets of `slot`, if it holds any offset of the run.
    #[inline]
    pub(super) fn of(&self, slot: u32) -> Option<Holder<'_>> {
        let at = self.index_of(slot).ok()?;
        Some(self.holder_at(at))
    }

    fn holder_at(&self, at: usize) -> Holder<'_> {
        let held = self.held[at];
        Holder {
            prefix: held.prefix(),
            beyond: self.beyond_of(held.slot()),
        }
    }

    /// Marks `offset` held by `slot`; false if it was already.
    pub(super) fn insert(&mut self, slot: u32, offset: u32) -> bool {
        self.insert_indexed(slot, offset).1
    }

    /// [`Holders::insert`], also returning where `slot`'s holder is: valid for
    /// [`Holders::insert_at`] until another slot is inserted or removed.
    pub(super) fn insert_indexed(&mut self, slot: u32, offset: u32) -> (usize, bool) {
        let at = match self.index_of(slot) {
            Ok(at) => at,
            Err(at) => {
                self.held.insert(at, Held::new(slot, 0));
                at
            }
        };
        (at, self.insert_at(at, offset))
    }

    /// Marks `offset` held by the holder at `index` (from [`Holders::insert_indexed`]);
    /// false if it was already.
    pub(super) fn insert_at(&mut self, index: usize, offset: u32) -> bool {
        let held = self.held[index];
        let prefix = held.prefix();
        if offset < prefix {
            return false;
        }
        if offset > prefix {
            let bits = self.beyond_mut(held.slot());
            let (word, b) = split(offset);
            if bits.len() <= word {
                bits.resize(word + 1, 0);
            }
            let was = bits[word] >> b & 1 == 1;
            bits[word] |= 1 << b;
            return !was;
        }
        let mut prefix = prefix + 1;
        // Offsets held past the gap just closed join the prefix.
        if self.beyond.is_some() {
            if let Some(bits) = self.beyond_existing(held.slot()) {
                while take_bit(bits, prefix) {
                    prefix += 1;
                }
                normalise(bits);
            }
            self.drop_empty_beyond(held.slot());
        }
        self.held[index] = held.with_prefix(prefix);
        true
    }

    /// Clears `offset` for `slot` (dropping the holder with its last offset); false if it
    /// was not held.
    pub(super) fn remove(&mut self, slot: u32, offset: u32) -> bool {
        let Ok(at) = self.index_of(slot) else {
            return false;
        };
        let held = self.held[at];
        let prefix = held.prefix();
        if offset + 1 == prefix {
            // The tail of the prefix, the common case: the holder goes with its last offset.
            if prefix == 1 && self.beyond_of(slot).is_empty() {
                self.held.remove(at);
            } else {
                self.held[at] = held.with_prefix(prefix - 1);
            }
            return true;
        }
        let was = if offset < prefix {
            // A hole inside the prefix: what follows it moves to the bitset.
            let bits = self.beyond_mut(slot);
            let (last_word, _) = split(prefix - 1);
            if bits.len() <= last_word {
                bits.resize(last_word + 1, 0);
            }
            for o in offset + 1..prefix {
                let (word, b) = split(o);
                bits[word] |= 1 << b;
            }
            self.held[at] = held.with_prefix(offset);
            true
        } else {
            let was = self.beyond_existing(slot).is_some_and(|bits| {
                let was = take_bit(bits, offset);
                normalise(bits);
                was
            });
            self.drop_empty_beyond(slot);
            was
        };
        if self.held[at].prefix() == 0 && self.beyond_of(slot).is_empty() {
            self.held.remove(at);
        }
        was
    }

    /// Drops every offset `slot` holds.
    pub(super) fn remove_slot(&mut self, slot: u32) {
        if let Ok(at) = self.index_of(slot) {
            self.held.remove(at);
            if let Some(bits) = self.beyond_existing(slot) {
                bits.clear();
                self.drop_empty_beyond(slot);
            }
        }
    }

    /// One past the highest offset any worker holds (0 if none).
    pub(super) fn end(&self) -> u32 {
        let prefixes = self.held.iter().map(|h| h.prefix()).max().unwrap_or(0);
        let beyond = self.beyond.as_deref().map_or(0, |b| {
            b.iter()
                .map(|(_, bits)| {
                    Holder {
                        prefix: 0,
                        beyond: bits,
                    }
                    .end()
                })
                .max()
                .unwrap_or(0)
        });
        prefixes.max(beyond)
    }

    /// `slot`'s bitset, made empty if it has none.
    fn beyond_mut(&mut self, slot: u32) -> &mut Vec<u64> {
        let all = self.beyond.get_or_insert_with(Box::default);
        let at = match all.binary_search_by_key(&slot, |&(s, _)| s) {
            Ok(at) => at,
            Err(at) => {
                all.insert(at, (slot, Vec::new()));
                at
            }
        };
        &mut all[at].1
    }

    /// `slot`'s bitset, if it has one.
    fn beyond_existing(&mut self, slot: u32) -> Option<&mut Vec<u64>> {
        let all = self.beyond.as_deref_mut()?;
        let at = all.binary_search_by_key(&slot, |&(s, _)| s).ok()?;
        Some(&mut all[at].1)
    }

    /// Drops `slot`'s bitset once it is empty, and the side table once no bitset is left.
    fn drop_empty_beyond(&mut self, slot: u32) {
        let Some(all) = self.beyond.as_deref_mut() else {
            return;
        };
        if let Ok(at) = all.binary_search_by_key(&slot, |&(s, _)| s) {
            if all[at].1.is_empty() {
                all.remove(at);
            }
        }
        if all.is_empty() {
            self.beyond = None;
        }
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
        h.remove_slot(7);
        assert!(h.of(7).is_none());
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

    #[test]
    fn several_holders_match_their_sets_and_seek_finds_each_slot() {
        let mut h = Holders::default();
        let mut model = std::collections::BTreeMap::<u32, std::collections::BTreeSet<u32>>::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for step in 0..30_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let slot = (x % 23) as u32 * 3;
            let offset = ((x >> 8) % 140) as u32;
            match (x >> 40) % 7 {
                0 => {
                    h.remove_slot(slot);
                    model.remove(&slot);
                }
                1 | 2 => {
                    let was = model.get_mut(&slot).is_some_and(|s| s.remove(&offset));
                    if model.get(&slot).is_some_and(|s| s.is_empty()) {
                        model.remove(&slot);
                    }
                    assert_eq!(h.remove(slot, offset), was, "step {step}");
                }
                _ => {
                    let newly = model.entry(slot).or_default().insert(offset);
                    assert_eq!(h.insert(slot, offset), newly, "step {step}");
                }
            }
            let slots: Vec<u32> = h.as_slice().iter().map(|x| x.slot()).collect();
            assert_eq!(
                slots,
                model.keys().copied().collect::<Vec<_>>(),
                "step {step}"
            );
            for (&slot, set) in &model {
                let held: Vec<u32> = h.of(slot).unwrap().offsets().collect();
                assert_eq!(held, set.iter().copied().collect::<Vec<_>>(), "step {step}");
                let at = h.index_of(slot).unwrap();
                assert_eq!(h.as_slice()[at].holds_first(), set.contains(&0));
            }
            let end = model
                .values()
                .filter_map(|s| s.last())
                .max()
                .map_or(0, |&o| o + 1);
            assert_eq!(h.end(), end, "step {step}");
            assert_eq!(
                h.beyond.as_ref().map_or(0, |b| b.len()) > 0,
                h.beyond.is_some()
            );
            for from in [0, 1, 5] {
                for probe in 0..72 {
                    let expect = from.min(slots.len())
                        + slots[from.min(slots.len())..].partition_point(|&s| s < probe);
                    assert_eq!(h.seek(from, probe), expect, "step {step}");
                    if from <= slots.len() {
                        assert_eq!(h.step(from, probe), expect, "step {step}");
                    }
                }
            }
        }
    }
}
