//! A map from 64-bit keys (a worker's names, run ids) to small values with each key and its
//! value side by side in one slot, found by linear probing.
//!
//! A lookup of a key the map holds costs one memory access in the common case: the slot
//! the key hashes to holds the key to compare and the value to return, on one cache line,
//! and the probe goes on along that line. (A map that keeps a separate array of tag bytes
//! reads the tags first and then the entry: two dependent misses on a map too large for
//! the caches, the usual case for a worker's names.) A caller that knows the keys it will
//! look up next prefetches their slots ([`ProbeMap::prefetch`]), so their misses overlap.
//! Removal shifts the entries after the removed one back into place, so no tombstones pile
//! up under eviction churn.

/// The key that marks an empty slot; the entry of that key itself, if any, is kept aside.
const EMPTY: u64 = 0;

/// The map holds at most this fraction of its slots (then doubles): probes stay short.
const MAX_LOAD_NUM: usize = 3;
const MAX_LOAD_DEN: usize = 4;

/// The fewest slots of a map that holds anything.
const MIN_SLOTS: usize = 8;

/// See the module docs.
pub(super) struct ProbeMap<V> {
    /// `(key, value)`, or `(EMPTY, V::default())` for an empty slot; empty or a power of
    /// two long.
    slots: Vec<(u64, V)>,
    /// Entries in `slots`.
    len: usize,
    /// The value of the key `EMPTY`, which cannot be kept in a slot.
    empty_key: Option<V>,
}

/// A worker's names: name -> block key.
pub(super) type NameMap = ProbeMap<u64>;

impl<V> Default for ProbeMap<V> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            len: 0,
            empty_key: None,
        }
    }
}

impl<V: Default> ProbeMap<V> {
    /// Entries held.
    pub(super) fn len(&self) -> usize {
        self.len + usize::from(self.empty_key.is_some())
    }

    /// The slot `key` hashes to, with `mask` the slot count minus one.
    fn home(key: u64, mask: usize) -> usize {
        // Fibonacci hashing of the key folded on itself: sequential keys spread too.
        let mixed = (key ^ (key >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (mixed >> 32) as usize & mask
    }

    /// The probe from slot `at` on: where `key` is (`Ok`), or the first free slot (`Err`).
    /// The map has slots, and a free one (never called for `EMPTY`).
    fn probe_from(&self, key: u64, mut at: usize) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        loop {
            match self.slots[at].0 {
                k if k == key => return Ok(at),
                EMPTY => return Err(at),
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// Where `key` is, if held (never called for `EMPTY`).
    fn find(&self, key: u64) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        self.vacancy(key).ok()
    }

    /// Asks the processor to bring `key`'s home slot into the cache, without
    /// waiting: a later lookup or insert of it then finds them there, and several keys
    /// prefetched in a row are fetched from memory in parallel.
    #[inline]
    pub(super) fn prefetch(&self, key: u64) {
        if self.slots.is_empty() {
            return;
        }
        let at = Self::home(key, self.slots.len() - 1);
        prefetch_index::prefetch_index(&self.slots, at);
    }

    /// The value of `key`.
    pub(super) fn get(&self, key: u64) -> Option<&V> {
        if key == EMPTY {
            return self.empty_key.as_ref();
        }
        self.find(key).map(|at| &self.slots[at].1)
    }

    /// The value of `key`, to change.
    pub(super) fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        if key == EMPTY {
            return self.empty_key.as_mut();
        }
        self.find(key).map(|at| &mut self.slots[at].1)
    }

    /// Gives `key` the value `value`, returning the value it had.
    pub(super) fn insert(&mut self, key: u64, value: V) -> Option<V> {
        if key == EMPTY {
            return self.empty_key.replace(value);
        }
        if (self.len + 1) * MAX_LOAD_DEN > self.slots.len() * MAX_LOAD_NUM {
            // A new key would need more room: grow unless the key is there.
            if let Some(at) = self.find(key) {
                return Some(std::mem::replace(&mut self.slots[at].1, value));
            }
            self.reserve(1);
        }
        // One probe: the key's slot, or the first free one.
        match self.vacancy(key) {
            Ok(at) => Some(std::mem::replace(&mut self.slots[at].1, value)),
            Err(at) => {
                self.slots[at] = (key, value);
                self.len += 1;
                None
            }
        }
    }

    /// Where `key` is (`Ok`), or the free slot where it would be placed (`Err`), in a map
    /// with room for it ([`ProbeMap::reserve`]; never called for `EMPTY`).
    pub(super) fn vacancy(&self, key: u64) -> Result<usize, usize> {
        debug_assert!(key != EMPTY && self.len < self.slots.len());
        self.probe_from(key, Self::home(key, self.slots.len() - 1))
    }

    /// Inserts `key`, found absent by [`ProbeMap::vacancy`] at `at`, without probing from
    /// its home again, and returns true; returns false, changing nothing, if `key` was
    /// inserted since. Only insertions may have come between (no removal, no growth): they
    /// may have taken `at`, but the slots before it stayed taken, so the key's place (and
    /// the key itself, if inserted since) is at or after `at`, before the first free slot.
    pub(super) fn insert_vacant(&mut self, key: u64, value: V, at: usize) -> bool {
        debug_assert!(key != EMPTY);
        debug_assert!((self.len + 1) * MAX_LOAD_DEN <= self.slots.len() * MAX_LOAD_NUM);
        match self.probe_from(key, at) {
            Ok(_) => false,
            Err(at) => {
                self.slots[at] = (key, value);
                self.len += 1;
                true
            }
        }
    }

    /// Puts an entry known to be absent into its first free slot (room is there).
    fn place(&mut self, key: u64, value: V) {
        let mask = self.slots.len() - 1;
        let mut at = Self::home(key, mask);
        while self.slots[at].0 != EMPTY {
            at = (at + 1) & mask;
        }
        self.slots[at] = (key, value);
    }

    /// Removes `key`, returning its value.
    pub(super) fn remove(&mut self, key: u64) -> Option<V> {
        if key == EMPTY {
            return self.empty_key.take();
        }
        let mut hole = self.find(key)?;
        let value = std::mem::take(&mut self.slots[hole].1);
        self.len -= 1;
        // Shift back each later entry of the probe run that may sit in the hole: one whose
        // home is not cyclically within (hole, at].
        let mask = self.slots.len() - 1;
        let mut at = hole;
        loop {
            at = (at + 1) & mask;
            let next = self.slots[at].0;
            if next == EMPTY {
                break;
            }
            let home = Self::home(next, mask);
            let stays = if hole <= at {
                hole < home && home <= at
            } else {
                hole < home || home <= at
            };
            if !stays {
                self.slots.swap(hole, at);
                hole = at;
            }
        }
        self.slots[hole].0 = EMPTY;
        Some(value)
    }

    /// Makes room for `more` entries without growing again.
    pub(super) fn reserve(&mut self, more: usize) {
        let wanted = self.len + more;
        if wanted * MAX_LOAD_DEN <= self.slots.len() * MAX_LOAD_NUM {
            return;
        }
        let mut slots = MIN_SLOTS.max(self.slots.len());
        while wanted * MAX_LOAD_DEN > slots * MAX_LOAD_NUM {
            slots *= 2;
        }
        let fresh = (0..slots).map(|_| (EMPTY, V::default())).collect();
        let old = std::mem::replace(&mut self.slots, fresh);
        for (key, value) in old {
            if key != EMPTY {
                self.place(key, value);
            }
        }
    }

    /// Every `(key, value)`, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.empty_key
            .as_ref()
            .map(|value| (EMPTY, value))
            .into_iter()
            .chain(
                self.slots
                    .iter()
                    .filter(|(key, _)| *key != EMPTY)
                    .map(|(key, value)| (*key, value)),
            )
    }

    /// Every value, in no particular order.
    pub(super) fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.iter().map(|(_, value)| value)
    }

    /// Every value, taken out.
    pub(super) fn into_values(self) -> impl Iterator<Item = V> {
        self.empty_key.into_iter().chain(
            self.slots
                .into_iter()
                .filter(|(key, _)| *key != EMPTY)
                .map(|(_, value)| value),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The map against std's under random inserts, replacements and removals, with names
    /// drawn so that probe runs collide, wrap around the end and include `EMPTY`.
    #[test]
    fn agrees_with_a_hash_map_under_churn() {
        for (seed, names) in [(1u64, 6u64), (2, 40), (3, 700), (4, 1 << 40)] {
            let mut map = NameMap::default();
            let mut model: HashMap<u64, u64> = HashMap::new();
            let mut x = seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
            for step in 0..60_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Sequential names (0 among them) or spread ones, by the seed.
                let name = if names < 1_000 {
                    x % names
                } else {
                    (x % names) << 20
                };
                match x >> 60 {
                    0..=8 => assert_eq!(map.insert(name, step), model.insert(name, step)),
                    9..=14 => assert_eq!(map.remove(name), model.remove(&name)),
                    _ => assert_eq!(map.get(name), model.get(&name)),
                }
                assert_eq!(map.len(), model.len(), "seed {seed} step {step}");
                if step % 4_999 == 0 {
                    let mut got: Vec<(u64, u64)> = map.iter().map(|(n, &k)| (n, k)).collect();
                    let mut want: Vec<(u64, u64)> = model.iter().map(|(&n, &k)| (n, k)).collect();
                    got.sort_unstable();
                    want.sort_unstable();
                    assert_eq!(got, want, "seed {seed} step {step}");
                    assert!(model.keys().all(|&n| map.get(n).is_some()));
                }
            }
        }
    }

    /// Batches put in as a store puts new names: every free slot found first, then each name
    /// put at its own; a name twice in a batch is refused the second time, as it is by then
    /// held.
    #[test]
    fn names_put_at_the_slots_found_for_them_agree_with_a_hash_map() {
        for names in [12u64, 300, 1 << 40] {
            let mut map = NameMap::default();
            let mut model: HashMap<u64, u64> = HashMap::new();
            let mut x = names | 1;
            for step in 0..4_000u64 {
                let mut batch = Vec::new();
                for _ in 0..1 + step % 9 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    batch.push(1 + x % names);
                }
                map.reserve(batch.len());
                let found: Vec<Result<usize, usize>> =
                    batch.iter().map(|&n| map.vacancy(n)).collect();
                for (&name, found) in batch.iter().zip(found) {
                    match found {
                        Ok(at) => assert_eq!(map.slots[at].0, name),
                        Err(at) => {
                            let put = map.insert_vacant(name, step, at);
                            assert_eq!(put, model.insert(name, step).is_none());
                            if !put {
                                model.insert(name, *map.get(name).expect("held"));
                            }
                        }
                    }
                }
                // Removals between batches, as events between stores.
                let gone = 1 + x % names;
                assert_eq!(map.remove(gone), model.remove(&gone));
                assert_eq!(map.len(), model.len(), "names {names} step {step}");
            }
            assert!(model.iter().all(|(&n, v)| map.get(n) == Some(v)));
        }
    }

    #[test]
    fn names_that_share_a_home_slot_are_all_found_after_removals_between_them() {
        let mut map = NameMap::default();
        map.reserve(5);
        let mask = map.slots.len() - 1;
        // Names with one home, the last one's probe wrapping past the end of the slots.
        let home = mask; // the last slot
        let same: Vec<u64> = (1..u64::MAX)
            .filter(|&n| NameMap::home(n, mask) == home)
            .take(4)
            .collect();
        for (i, &n) in same.iter().enumerate() {
            map.insert(n, i as u64);
        }
        assert_eq!(map.remove(same[1]), Some(1));
        assert_eq!(map.get(same[0]), Some(&0));
        assert_eq!(map.get(same[2]), Some(&2));
        assert_eq!(map.get(same[3]), Some(&3));
        assert_eq!(map.get(same[1]), None);
        assert_eq!(map.len(), 3);
    }
}
