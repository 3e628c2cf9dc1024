//! One mock worker's prefix-caching block pool, as vLLM keeps it.
//!
//! - Blocks are named by their sequence hash, so a hit on block `i` means the whole prefix up
//!   to `i` matches.
//! - A block is *referenced* while a running request uses it and cannot be evicted then.
//! - Unreferenced blocks stay cached and are evicted least-recently-used first. When a request
//!   releases its blocks, the tail is released first, so a chain is evicted from its end and its
//!   shared prefix lives longest (vLLM's free-queue order).
//! - Every newly cached chain is announced as one `Stored` event (with the parent it continues)
//!   and every eviction as a single-block `Removed` event, in the order they happen.

use std::collections::BTreeMap;

use kvidx::{Block, Event, Worker};
use rustc_hash::FxHashMap;

/// One cached block.
#[derive(Debug, Clone, Copy)]
struct Slot {
    refs: u32,
    /// Key in the free list while `refs == 0`.
    tick: u64,
}

/// A worker's pool of `capacity` KV blocks.
#[derive(Debug)]
pub struct BlockPool {
    worker: Worker,
    capacity: usize,
    blocks: FxHashMap<u64, Slot>,
    /// Unreferenced blocks by release tick: the first entry is the next to evict.
    free: BTreeMap<u64, u64>,
    tick: u64,
    next_event_id: u64,
}

impl BlockPool {
    /// An empty pool of `capacity` blocks for `worker`.
    pub fn new(worker: Worker, capacity: usize) -> Self {
        Self {
            worker,
            capacity,
            blocks: FxHashMap::default(),
            free: BTreeMap::new(),
            tick: 0,
            next_event_id: 0,
        }
    }

    /// Blocks cached now (referenced or not).
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether the block named `seq` is cached.
    pub fn holds(&self, seq: u64) -> bool {
        self.blocks.contains_key(&seq)
    }

    /// How many leading blocks of `chain` (sequence hashes) are cached: the prefix-cache hit.
    pub fn prefix_hits(&self, chain: &[Block]) -> usize {
        chain
            .iter()
            .take_while(|b| self.blocks.contains_key(&b.seq_hash))
            .count()
    }

    fn next_id(&mut self) -> u64 {
        let id = self.next_event_id;
        self.next_event_id += 1;
        id
    }

    fn reference(&mut self, seq: u64) {
        let slot = self
            .blocks
            .get_mut(&seq)
            .expect("referenced block is cached");
        if slot.refs == 0 {
            self.free.remove(&slot.tick);
        }
        slot.refs += 1;
    }

    /// Makes room for one block: evicts the least recently released unreferenced block and
    /// announces it. Returns false when every cached block is referenced.
    fn make_room(&mut self, events: &mut Vec<Event>) -> bool {
        if self.blocks.len() < self.capacity {
            return true;
        }
        let Some((_, victim)) = self.free.pop_first() else {
            return false;
        };
        self.blocks.remove(&victim);
        let id = self.next_id();
        events.push(Event::removed(self.worker, id, vec![victim]));
        true
    }

    /// Caches `chain` (which continues the cached block `parent`, or starts a sequence) and
    /// references every block of it that ends up cached. Blocks already cached are only
    /// referenced; missing ones are allocated, evicting as needed. Allocation stops at the
    /// first block that finds no room (every block referenced).
    ///
    /// Pushes the evictions, then one `Stored` event for the chain from its first missing
    /// block on, into `events`. Returns how many leading blocks of `chain` are now referenced
    /// (the caller releases exactly those).
    pub fn acquire(
        &mut self,
        parent: Option<u64>,
        chain: &[Block],
        events: &mut Vec<Event>,
    ) -> usize {
        if let Some(p) = parent {
            assert!(
                self.holds(p),
                "parent must be cached (the caller references it)"
            );
        }
        let hits = self.prefix_hits(chain);
        for block in &chain[..hits] {
            self.reference(block.seq_hash);
        }
        let mut referenced = hits;
        for block in &chain[hits..] {
            if self.blocks.contains_key(&block.seq_hash) {
                // A block whose prefix was evicted before it: cached again as it is.
                self.reference(block.seq_hash);
            } else {
                if !self.make_room(events) {
                    break;
                }
                self.blocks
                    .insert(block.seq_hash, Slot { refs: 1, tick: 0 });
            }
            referenced += 1;
        }
        if referenced > hits {
            let parent = if hits > 0 {
                Some(chain[hits - 1].seq_hash)
            } else {
                parent
            };
            let id = self.next_id();
            events.push(Event::stored(
                self.worker,
                id,
                parent,
                chain[hits..referenced].to_vec(),
            ));
        }
        referenced
    }

    /// Drops one reference from each block of `chain` (sequence hashes, in chain order).
    /// Blocks left unreferenced join the free list tail first, so the tail is evicted first.
    pub fn release(&mut self, chain: &[u64]) {
        for seq in chain.iter().rev() {
            let slot = self.blocks.get_mut(seq).expect("released block is cached");
            assert!(slot.refs > 0, "released block is referenced");
            slot.refs -= 1;
            if slot.refs == 0 {
                self.tick += 1;
                slot.tick = self.tick;
                self.free.insert(self.tick, *seq);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvidx::EventData;
    use kvidx::Tier;

    fn chain(tag: u64, n: u64) -> Vec<Block> {
        (0..n)
            .map(|i| Block::new(tag * 100 + i, tag * 1000 + i))
            .collect()
    }

    fn removed_names(events: &[Event]) -> Vec<u64> {
        events
            .iter()
            .filter_map(|e| match &e.data {
                EventData::Removed { seq_hashes, .. } => {
                    assert_eq!(seq_hashes.len(), 1, "evictions are single-block");
                    Some(seq_hashes[0])
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn stores_misses_with_parent_and_counts_hits() {
        let mut pool = BlockPool::new(Worker::new(1, 0), 8);
        let mut ev = Vec::new();
        let a = chain(1, 3);
        assert_eq!(pool.acquire(None, &a, &mut ev), 3);
        assert_eq!(
            ev,
            vec![Event::stored(Worker::new(1, 0), 0, None, a.clone())]
        );
        pool.release(&a.iter().map(|b| b.seq_hash).collect::<Vec<_>>());

        // Same first two blocks, then a different third and a fourth.
        let mut b = a[..2].to_vec();
        b.extend([Block::new(7, 7007), Block::new(8, 7008)]);
        ev.clear();
        assert_eq!(pool.prefix_hits(&b), 2);
        assert_eq!(pool.acquire(None, &b, &mut ev), 4);
        assert_eq!(
            ev,
            vec![Event::stored(
                Worker::new(1, 0),
                1,
                Some(a[1].seq_hash),
                b[2..].to_vec()
            )]
        );
        assert_eq!(pool.len(), 5);
    }

    #[test]
    fn evicts_least_recently_released_tail_first() {
        let mut pool = BlockPool::new(Worker::new(0, 0), 4);
        let mut ev = Vec::new();
        let a = chain(1, 3);
        pool.acquire(None, &a, &mut ev);
        pool.release(&a.iter().map(|b| b.seq_hash).collect::<Vec<_>>());
        let b = chain(2, 1);
        pool.acquire(None, &b, &mut ev);
        pool.release(&[b[0].seq_hash]);
        ev.clear();
        // Room for 4: c needs 3 blocks, 4 are cached, all free. Eviction order: a's tail
        // (a2, a1, a0, released in that order), then b0 which was released last.
        let c = chain(3, 3);
        assert_eq!(pool.acquire(None, &c, &mut ev), 3);
        assert_eq!(
            removed_names(&ev),
            vec![a[2].seq_hash, a[1].seq_hash, a[0].seq_hash]
        );
        assert!(pool.holds(b[0].seq_hash));
        assert_eq!(pool.len(), 4);
    }

    #[test]
    fn hits_refresh_recency_and_referenced_blocks_are_never_evicted() {
        let mut pool = BlockPool::new(Worker::new(0, 0), 3);
        let mut ev = Vec::new();
        let a = chain(1, 1);
        let b = chain(2, 1);
        pool.acquire(None, &a, &mut ev);
        pool.release(&[a[0].seq_hash]);
        pool.acquire(None, &b, &mut ev);
        pool.release(&[b[0].seq_hash]);
        // Touch a again: now b is the least recently used.
        pool.acquire(None, &a, &mut ev);
        ev.clear();
        let c = chain(3, 2);
        assert_eq!(pool.acquire(None, &c, &mut ev), 2);
        assert_eq!(removed_names(&ev), vec![b[0].seq_hash]);
        // Everything is referenced now: a longer chain gets only what fits (nothing).
        ev.clear();
        let d = chain(4, 2);
        assert_eq!(pool.acquire(None, &d, &mut ev), 0);
        assert!(ev.is_empty());
        assert!(pool.holds(a[0].seq_hash) && pool.holds(c[1].seq_hash));
    }

    #[test]
    fn partial_fit_stores_only_the_cached_prefix() {
        let mut pool = BlockPool::new(Worker::new(0, 0), 2);
        let mut ev = Vec::new();
        let a = chain(1, 3);
        assert_eq!(pool.acquire(None, &a, &mut ev), 2);
        assert_eq!(
            ev,
            vec![Event::stored(Worker::new(0, 0), 0, None, a[..2].to_vec())]
        );
    }

    #[test]
    fn orphaned_blocks_are_re_announced_in_the_chain() {
        let mut pool = BlockPool::new(Worker::new(0, 0), 4);
        let mut ev = Vec::new();
        let a = chain(1, 2);
        pool.acquire(None, &a, &mut ev);
        // The head is released before the tail (as when the tail is still in use elsewhere).
        pool.release(&[a[0].seq_hash]);
        let b = chain(2, 3);
        ev.clear();
        pool.acquire(None, &b, &mut ev);
        assert_eq!(removed_names(&ev), vec![a[0].seq_hash]);
        pool.release(&b.iter().map(|x| x.seq_hash).collect::<Vec<_>>());
        pool.release(&[a[1].seq_hash]);
        ev.clear();
        // a0 is missing, a1 is still cached: the new Stored names both, from position 0.
        assert_eq!(pool.prefix_hits(&a), 0);
        assert_eq!(pool.acquire(None, &a, &mut ev), 2);
        assert_eq!(removed_names(&ev), vec![b[2].seq_hash]);
        let stored: Vec<_> = ev
            .iter()
            .filter(|e| matches!(e.data, EventData::Stored { .. }))
            .collect();
        assert_eq!(stored.len(), 1);
        assert_eq!(
            stored[0].data,
            EventData::Stored {
                parent: None,
                blocks: a.clone(),
                tier: Tier::Device,
            }
        );
    }
}
