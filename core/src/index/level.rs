//! One position of the positional index: each prefix identity seen there and the sorted set
//! of worker slots holding it, in 16 bytes per identity.
//!
//! The identities live in one flat open-addressing table of 16-byte entries (the identity and
//! two inline slots side by side, linear probing, removals shift later entries back instead of
//! leaving tombstones), so that a lookup usually reads one cache line: a general-purpose map
//! keeps its control bytes apart from its entries and costs two. The table grows at 3/4 full
//! and shrinks when it falls below 1/8, so its size follows what it holds.
//!
//! An entry's holder set is up to two slots inline, or the number of a spilled set kept in the
//! level's own list (a block held by more than two workers). Spilled sets are boxed
//! `[len, slots.., spare..]` slices, reused through a free list.

/// An unused inline place (slots are numbered from 0 and stay far below). An entry whose
/// first place is this one is vacant.
const EMPTY: u32 = u32::MAX;

/// In the first place: the second is the number of a spilled set.
const SPILLED: u32 = u32::MAX - 1;

/// The smallest table allocated.
const MIN_CAPACITY: usize = 16;

/// One identity and its holders (vacant when `slots[0]` is [`EMPTY`]).
#[derive(Debug, Clone, Copy)]
struct Entry {
    identity: u64,
    /// Two sorted slots (then [`EMPTY`]), or [`SPILLED`] and a number in `Level::spilled`.
    slots: [u32; 2],
}

const VACANT: Entry = Entry {
    identity: 0,
    slots: [EMPTY; 2],
};

impl Entry {
    #[inline]
    fn is_vacant(&self) -> bool {
        self.slots[0] == EMPTY
    }
}

/// What a level holds (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Level {
    /// The table: empty, or a power of two entries.
    entries: Box<[Entry]>,
    /// Entries in use.
    len: usize,
    /// Sets of more than two slots: `[len, slots[..len], spare]`.
    spilled: Vec<Box<[u32]>>,
    /// Numbers of `spilled` free for reuse.
    free: Vec<u32>,
}

/// Where an identity's probe starts in a table of `mask + 1` entries (identities are hashes,
/// but tests use small integers: a multiply spreads them over the high bits, which are kept).
#[inline]
fn home(identity: u64, mask: usize) -> usize {
    let spread = identity.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (spread >> 32) as usize & mask
}

impl Level {
    /// Where `identity`'s probe ends in the (non-empty) table: `Ok` at its entry, `Err` at
    /// the vacant entry that ends the probe.
    #[inline]
    fn probe(&self, identity: u64) -> Result<usize, usize> {
        let mask = self.entries.len() - 1;
        let mut at = home(identity, mask);
        loop {
            let entry = &self.entries[at];
            if entry.is_vacant() {
                return Err(at);
            }
            if entry.identity == identity {
                return Ok(at);
            }
            at = (at + 1) & mask;
        }
    }

    /// The index of `identity`'s entry, if it has one.
    #[inline]
    fn find(&self, identity: u64) -> Option<usize> {
        if self.entries.is_empty() {
            return None;
        }
        self.probe(identity).ok()
    }

    /// Moves every entry into a table of `capacity` entries (a power of two, above `len`).
    fn resize(&mut self, capacity: usize) {
        debug_assert!(capacity.is_power_of_two() && capacity > self.len);
        let old = std::mem::replace(&mut self.entries, vec![VACANT; capacity].into_boxed_slice());
        for entry in old.iter().filter(|e| !e.is_vacant()) {
            // Identities are unique: the probe ends at a vacant entry.
            let (Ok(at) | Err(at)) = self.probe(entry.identity);
            self.entries[at] = *entry;
        }
    }

    /// Empties the entry at `at`, shifting back the entries after it that probed past it,
    /// and shrinks the table when it has become mostly empty.
    fn vacate(&mut self, at: usize) {
        let mask = self.entries.len() - 1;
        let mut hole = at;
        let mut next = (at + 1) & mask;
        loop {
            let entry = self.entries[next];
            if entry.is_vacant() {
                break;
            }
            // The entry may fill the hole if the hole lies on its probe path: between its
            // home and where it is now (cyclically).
            let from_home = next.wrapping_sub(home(entry.identity, mask)) & mask;
            if from_home >= next.wrapping_sub(hole) & mask {
                self.entries[hole] = entry;
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.entries[hole] = VACANT;
        self.len -= 1;
        if self.len == 0 {
            self.entries = Box::default();
        } else if self.len * 8 < self.entries.len() && self.entries.len() > MIN_CAPACITY {
            self.resize((self.len * 2).next_power_of_two().max(MIN_CAPACITY));
        }
    }

    /// The sorted slots holding `identity` here (empty if none).
    #[inline]
    pub(crate) fn holders(&self, identity: u64) -> &[u32] {
        match self.find(identity) {
            None => &[],
            Some(at) => self.slots(&self.entries[at].slots),
        }
    }

    #[inline]
    fn slots<'a>(&'a self, inline: &'a [u32; 2]) -> &'a [u32] {
        match inline[0] {
            SPILLED => {
                let set = &self.spilled[inline[1] as usize];
                &set[1..=set[0] as usize]
            }
            EMPTY => &[],
            _ => &inline[..1 + usize::from(inline[1] != EMPTY)],
        }
    }

    /// Adds `slot` to the holders of `identity`.
    pub(crate) fn insert(&mut self, identity: u64, slot: u32) {
        debug_assert!(slot < SPILLED);
        if (self.len + 1) * 4 > self.entries.len() * 3 {
            self.resize((self.entries.len() * 2).max(MIN_CAPACITY));
        }
        let at = match self.probe(identity) {
            Ok(at) => at,
            Err(vacant) => {
                self.entries[vacant] = Entry {
                    identity,
                    slots: [slot, EMPTY],
                };
                self.len += 1;
                return;
            }
        };
        let inline = &mut self.entries[at].slots;
        match *inline {
            [SPILLED, set] => {
                let set = &mut self.spilled[set as usize];
                let len = set[0] as usize;
                let Err(place) = set[1..=len].binary_search(&slot) else {
                    return;
                };
                if len + 1 == set.len() {
                    let mut grown = vec![EMPTY; 1 + 2 * len].into_boxed_slice();
                    grown[..=len].copy_from_slice(set);
                    *set = grown;
                }
                set.copy_within(1 + place..1 + len, 2 + place);
                set[1 + place] = slot;
                set[0] += 1;
            }
            [a, EMPTY] if a == slot => {}
            [a, EMPTY] => *inline = if a < slot { [a, slot] } else { [slot, a] },
            [a, b] if a == slot || b == slot => {}
            [a, b] => {
                let mut set = vec![EMPTY; 8].into_boxed_slice();
                set[0] = 3;
                let mut three = [a, b, slot];
                three.sort_unstable();
                set[1..4].copy_from_slice(&three);
                let number = match self.free.pop() {
                    Some(number) => {
                        self.spilled[number as usize] = set;
                        number
                    }
                    None => {
                        self.spilled.push(set);
                        (self.spilled.len() - 1) as u32
                    }
                };
                self.entries[at].slots = [SPILLED, number];
            }
        }
    }

    /// Removes `slot` from the holders of `identity`, and the identity when none is left.
    pub(crate) fn remove(&mut self, identity: u64, slot: u32) {
        let Some(at) = self.find(identity) else {
            return;
        };
        let inline = &mut self.entries[at].slots;
        match *inline {
            [SPILLED, number] => {
                let set = &mut self.spilled[number as usize];
                let len = set[0] as usize;
                let Ok(place) = set[1..=len].binary_search(&slot) else {
                    return;
                };
                set.copy_within(2 + place..1 + len, 1 + place);
                set[len] = EMPTY;
                set[0] -= 1;
                let len = len - 1;
                if len == 2 {
                    *inline = [set[1], set[2]];
                    self.spilled[number as usize] = Box::default();
                    self.free.push(number);
                } else if 4 * len < set.len() {
                    *set = set[..=2 * len].into();
                }
            }
            [a, EMPTY] if a == slot => self.vacate(at),
            [a, b] if a == slot => *inline = [b, EMPTY],
            [a, b] if b == slot => *inline = [a, EMPTY],
            _ => {}
        }
    }

    /// Identities with holders.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every identity and its holders.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &[u32])> {
        self.entries
            .iter()
            .filter(|e| !e.is_vacant())
            .map(|e| (e.identity, self.slots(&e.slots)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holder_sets_match_a_model_through_spills_and_reuse() {
        assert_eq!(std::mem::size_of::<Entry>(), 16);
        let mut level = Level::default();
        let mut model: std::collections::BTreeMap<u64, Vec<u32>> = Default::default();
        let mut rng = crate::test_rng::Lcg(7);
        for step in 0..20_000u32 {
            let state = rng.next();
            let identity = (state >> 60) % 6; // few identities, many holders each
            let slot = ((state >> 33) % 40) as u32;
            let set = model.entry(identity).or_default();
            // Inserts dominate at first, removals later: sets grow past and fall back to two.
            if (state >> 20) % 100 < if step < 10_000 { 70 } else { 30 } {
                level.insert(identity, slot);
                if let Err(at) = set.binary_search(&slot) {
                    set.insert(at, slot);
                }
            } else {
                level.remove(identity, slot);
                set.retain(|&s| s != slot);
            }
            if set.is_empty() {
                model.remove(&identity);
            }
            for id in 0..6 {
                let expected = model.get(&id).map_or(&[][..], |s| s.as_slice());
                assert_eq!(level.holders(id), expected, "step {step}, identity {id}");
            }
            assert_eq!(level.len(), model.len());
        }
        let live = level.spilled.len() - level.free.len();
        assert_eq!(live, model.values().filter(|s| s.len() > 2).count());
    }

    #[test]
    fn the_table_matches_a_model_while_it_grows_shifts_and_shrinks() {
        let mut level = Level::default();
        let mut model: std::collections::BTreeMap<u64, Vec<u32>> = Default::default();
        let mut rng = crate::test_rng::Lcg(11);
        let mut next = || rng.next() >> 16;
        let mut largest = 0;
        // Three phases: fill to thousands of identities, churn, drain to nothing.
        for (steps, insert_percent) in [(30_000, 80), (30_000, 50), (60_000, 5)] {
            for step in 0..steps {
                let r = next();
                // Identities from a wide range (hashes) and a narrow one (clustered homes).
                let identity = if r % 2 == 0 { r >> 8 } else { (r >> 8) % 4_096 };
                let slot = ((r >> 40) % 3) as u32;
                if r % 100 < insert_percent {
                    level.insert(identity, slot);
                    let set = model.entry(identity).or_default();
                    if let Err(at) = set.binary_search(&slot) {
                        set.insert(at, slot);
                    }
                } else {
                    // Mostly remove something held, so removals keep up with insertions.
                    let identity = match model.range(identity..).next() {
                        Some((&held, _)) if r % 8 != 0 => held,
                        _ => identity,
                    };
                    level.remove(identity, slot);
                    if let Some(set) = model.get_mut(&identity) {
                        set.retain(|&s| s != slot);
                        if set.is_empty() {
                            model.remove(&identity);
                        }
                    }
                }
                largest = largest.max(level.entries.len());
                if step % 997 == 0 {
                    assert_eq!(level.len(), model.len());
                    for (&identity, set) in &model {
                        assert_eq!(level.holders(identity), set.as_slice(), "step {step}");
                    }
                    let mut seen: Vec<_> = level.iter().map(|(id, s)| (id, s.to_vec())).collect();
                    seen.sort();
                    let expected: Vec<_> = model.iter().map(|(&id, s)| (id, s.clone())).collect();
                    assert_eq!(seen, expected);
                    assert!(level.len() * 4 <= level.entries.len() * 3);
                }
            }
        }
        assert!(largest >= 4_096, "the table grew to {largest} entries only");
        // Nothing held: the table gives its memory back.
        for (&identity, set) in model.clone().iter() {
            for &slot in set {
                level.remove(identity, slot);
            }
        }
        assert_eq!(level.len(), 0);
        assert_eq!(level.entries.len(), 0);
        assert_eq!(level.holders(1), &[] as &[u32]);
    }
}
