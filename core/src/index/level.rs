//! One position of the positional index: each prefix identity seen there and the sorted set
//! of worker slots holding it, in 16 bytes per identity.
//!
//! A holder set is 8 bytes in the map: up to two slots inline, or the number of a spilled set
//! kept in the level's own list (a block held by more than two workers). Spilled sets are
//! boxed `[len, slots.., spare..]` slices, reused through a free list.

use rustc_hash::FxHashMap;

/// An unused inline place (slots are numbered from 0 and stay far below).
const EMPTY: u32 = u32::MAX;

/// In the first place: the second is the number of a spilled set.
const SPILLED: u32 = u32::MAX - 1;

/// What a level holds (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Level {
    /// Identity -> two sorted slots (then [`EMPTY`]), or [`SPILLED`] and a number in `spilled`.
    holders: FxHashMap<u64, [u32; 2]>,
    /// Sets of more than two slots: `[len, slots[..len], spare]`.
    spilled: Vec<Box<[u32]>>,
    /// Numbers of `spilled` free for reuse.
    free: Vec<u32>,
}

impl Level {
    /// The sorted slots holding `identity` here (empty if none).
    #[inline]
    pub(crate) fn holders(&self, identity: u64) -> &[u32] {
        match self.holders.get(&identity) {
            None => &[],
            Some(inline) => self.slots(inline),
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
        let inline = self.holders.entry(identity).or_insert([EMPTY; 2]);
        match *inline {
            [SPILLED, at] => {
                let set = &mut self.spilled[at as usize];
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
            [EMPTY, _] => inline[0] = slot,
            [a, EMPTY] if a == slot => {}
            [a, EMPTY] => *inline = if a < slot { [a, slot] } else { [slot, a] },
            [a, b] if a == slot || b == slot => {}
            [a, b] => {
                let mut set = vec![EMPTY; 8].into_boxed_slice();
                set[0] = 3;
                let mut three = [a, b, slot];
                three.sort_unstable();
                set[1..4].copy_from_slice(&three);
                let at = match self.free.pop() {
                    Some(at) => {
                        self.spilled[at as usize] = set;
                        at
                    }
                    None => {
                        self.spilled.push(set);
                        (self.spilled.len() - 1) as u32
                    }
                };
                *inline = [SPILLED, at];
            }
        }
    }

    /// Removes `slot` from the holders of `identity`, and the identity when none is left.
    pub(crate) fn remove(&mut self, identity: u64, slot: u32) {
        let Some(inline) = self.holders.get_mut(&identity) else {
            return;
        };
        match *inline {
            [SPILLED, at] => {
                let set = &mut self.spilled[at as usize];
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
                    self.spilled[at as usize] = Box::default();
                    self.free.push(at);
                } else if 4 * len < set.len() {
                    *set = set[..=2 * len].into();
                }
            }
            [a, EMPTY] if a == slot => {
                self.holders.remove(&identity);
            }
            [a, b] if a == slot => *inline = [b, EMPTY],
            [a, b] if b == slot => *inline = [a, EMPTY],
            _ => {}
        }
    }

    /// Identities with holders.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.holders.len()
    }

    /// Every identity and its holders.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &[u32])> {
        self.holders
            .iter()
            .map(|(&id, inline)| (id, self.slots(inline)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holder_sets_match_a_model_through_spills_and_reuse() {
        assert_eq!(std::mem::size_of::<(u64, [u32; 2])>(), 16);
        let mut level = Level::default();
        let mut model: std::collections::BTreeMap<u64, Vec<u32>> = Default::default();
        let mut state = 7u64;
        for step in 0..20_000u32 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
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
}
