//! One mock worker's host-memory tier: an LRU set of block names the GPU pool offloaded.
//!
//! The host tier holds copies of blocks (named by sequence hash, like the GPU pool). It never
//! references blocks: a block is used from the GPU, and the host copy only saves recomputing
//! it. [`crate::block_pool::BlockPool`] decides what enters and leaves it and announces it.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

/// A host pool of `capacity` blocks, evicted least recently used first.
#[derive(Debug, Default)]
pub struct HostPool {
    capacity: usize,
    /// Each held name's recency tick (its key in `lru`).
    ticks: FxHashMap<u64, u64>,
    /// Held names by recency tick: the first entry is the next to evict.
    lru: BTreeMap<u64, u64>,
    tick: u64,
}

impl HostPool {
    /// An empty host pool of `capacity` blocks (0: no host tier).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            ..Self::default()
        }
    }

    /// Whether the worker has a host tier at all.
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Blocks held now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ticks.len()
    }

    /// Whether the block named `seq` is held.
    pub fn holds(&self, seq: u64) -> bool {
        self.ticks.contains_key(&seq)
    }

    /// Every held name, in no particular order.
    pub fn names(&self) -> impl Iterator<Item = u64> + '_ {
        self.ticks.keys().copied()
    }

    /// Makes a held block the most recently used.
    pub fn touch(&mut self, seq: u64) {
        let Some(tick) = self.ticks.get_mut(&seq) else {
            return;
        };
        self.lru.remove(tick);
        self.tick += 1;
        *tick = self.tick;
        self.lru.insert(self.tick, seq);
    }

    /// When the pool is full, evicts its least recently used block and returns its name.
    pub fn evict_if_full(&mut self) -> Option<u64> {
        if self.ticks.len() < self.capacity {
            return None;
        }
        let (_, victim) = self.lru.pop_first()?;
        self.ticks.remove(&victim);
        Some(victim)
    }

    /// Adds a block not held yet as the most recently used; the caller made room.
    ///
    /// # Panics
    ///
    /// If the block is held already or the pool is full.
    pub fn insert(&mut self, seq: u64) {
        assert!(self.ticks.len() < self.capacity, "host pool has room");
        self.tick += 1;
        let before = self.ticks.insert(seq, self.tick);
        assert!(before.is_none(), "block not yet in host memory");
        self.lru.insert(self.tick, seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_and_touch_refreshes() {
        let mut host = HostPool::new(2);
        assert!(host.enabled() && host.evict_if_full().is_none());
        host.insert(1);
        host.insert(2);
        assert_eq!(host.len(), 2);
        host.touch(1);
        assert_eq!(host.evict_if_full(), Some(2));
        assert!(host.evict_if_full().is_none(), "room for one now");
        host.insert(3);
        assert_eq!(host.evict_if_full(), Some(1));
        assert!(host.holds(3) && !host.holds(1) && !host.holds(2));
        host.touch(42); // not held: nothing happens
        assert_eq!(host.len(), 1);
        assert!(!HostPool::new(0).enabled());
    }
}
