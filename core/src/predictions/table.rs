//! An open-addressing table of entry indexes, found by a 64-bit hash and a predicate on the
//! entry (the store keeps two: identity -> first holder, (worker, identity) -> entry): 4 bytes
//! a bucket, at most half full, grown only when the caller says so (so the store decides,
//! within its byte bound, when to grow it). Linear probing with backward-shift deletion: no
//! tombstones, so a table never needs rebuilding in place.

/// "No entry".
pub(super) const NONE: u32 = u32::MAX;

/// Buckets of entry indexes (`NONE` for empty); a bucket's hash is that of the entry it points
/// to, computed by the caller's `hash_of` function.
#[derive(Debug, Default)]
pub(super) struct Table {
    buckets: Vec<u32>,
    len: usize,
}

impl Table {
    /// Bytes the table holds.
    pub(super) fn bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<u32>()
    }

    /// The extra bytes one more key needs (0 while the table stays at most half full).
    pub(super) fn growth_bytes(&self) -> usize {
        if (self.len + 1) * 2 <= self.buckets.len() {
            0
        } else {
            self.buckets.len().max(8) * std::mem::size_of::<u32>()
        }
    }

    /// Doubles the table (16 buckets at first), re-placing every entry.
    pub(super) fn grow(&mut self, hash_of: impl Fn(u32) -> u64) {
        let size = (self.buckets.len() * 2).max(16);
        let old = std::mem::replace(&mut self.buckets, vec![NONE; size]);
        for entry in old.into_iter().filter(|&e| e != NONE) {
            let mut at = self.home(hash_of(entry));
            while self.buckets[at] != NONE {
                at = self.next(at);
            }
            self.buckets[at] = entry;
        }
    }

    /// The bucket of the entry with hash `hash` that `is` accepts, if any.
    pub(super) fn find(&self, hash: u64, is: impl Fn(u32) -> bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mut at = self.home(hash);
        loop {
            match self.buckets[at] {
                NONE => return None,
                e if is(e) => return Some(at),
                _ => at = self.next(at),
            }
        }
    }

    /// The entry at a bucket [`Table::find`] returned.
    pub(super) fn get(&self, bucket: usize) -> u32 {
        self.buckets[bucket]
    }

    /// Points a bucket at another entry of the same hash and key.
    pub(super) fn set(&mut self, bucket: usize, entry: u32) {
        self.buckets[bucket] = entry;
    }

    /// Adds `entry` (whose key is absent) under its hash; the caller grew the table if
    /// [`Table::growth_bytes`] asked for it.
    pub(super) fn insert(&mut self, hash: u64, entry: u32) {
        debug_assert!((self.len + 1) * 2 <= self.buckets.len());
        let mut at = self.home(hash);
        while self.buckets[at] != NONE {
            at = self.next(at);
        }
        self.buckets[at] = entry;
        self.len += 1;
    }

    /// Empties a bucket, shifting back the entries after it that probed past it.
    pub(super) fn remove_at(&mut self, bucket: usize, hash_of: impl Fn(u32) -> u64) {
        let mut hole = bucket;
        let mut at = bucket;
        loop {
            at = self.next(at);
            let entry = self.buckets[at];
            if entry == NONE {
                break;
            }
            let home = self.home(hash_of(entry));
            // The entry may fill the hole unless its home lies cyclically in (hole, at].
            let stays = if hole <= at {
                hole < home && home <= at
            } else {
                hole < home || home <= at
            };
            if !stays {
                self.buckets[hole] = entry;
                hole = at;
            }
        }
        self.buckets[hole] = NONE;
        self.len -= 1;
    }

    fn home(&self, hash: u64) -> usize {
        let bits = self.buckets.len().trailing_zeros();
        (hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
    }

    fn next(&self, at: usize) -> usize {
        (at + 1) & (self.buckets.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Lcg;
    use std::collections::HashMap;

    #[test]
    fn agrees_with_a_hash_map_through_inserts_and_removals() {
        let keys: Vec<u64> = (0..64u64)
            .map(|i| i.wrapping_mul(0x1000_0000_0000_0001) % 97)
            .collect();
        let identity = |e: u32| keys[e as usize];
        let keys = &keys;
        let is = |key: u64| move |e: u32| keys[e as usize] == key;
        let mut table = Table::default();
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut rng = Lcg(7);
        for _ in 0..5000 {
            let e = (rng.next() % keys.len() as u64) as u32;
            let key = keys[e as usize];
            match table.find(key, is(key)) {
                Some(bucket) => {
                    assert_eq!(model.get(&key), Some(&table.get(bucket)));
                    table.remove_at(bucket, identity);
                    model.remove(&key);
                }
                None => {
                    assert!(!model.contains_key(&key));
                    if table.growth_bytes() > 0 {
                        table.grow(identity);
                    }
                    table.insert(key, e);
                    model.insert(key, e);
                }
            }
            for (&k, &v) in &model {
                let bucket = table.find(k, is(k)).expect("present");
                assert_eq!(table.get(bucket), v);
            }
        }
    }
}
