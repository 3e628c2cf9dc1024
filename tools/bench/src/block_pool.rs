//! One mock worker's prefix-caching block pool, as vLLM keeps it, with an optional host tier.
//!
//! - Blocks are named by their sequence hash, so a hit on block `i` means the whole prefix up
//!   to `i` matches.
//! - A block is *referenced* while a running request uses it and cannot be evicted then.
//! - Unreferenced blocks stay cached and are evicted least-recently-used first. When a request
//!   releases its blocks, the tail is released first, so a chain is evicted from its end and its
//!   shared prefix lives longest (vLLM's free-queue order).
//! - Every newly cached chain is announced as one `Stored` event (with the parent it continues)
//!   and every eviction as a single-block `Removed` event, in the order they happen.
//!
//! **Host tier** (`--host-blocks-per-worker`, off when 0). The worker also keeps an LRU pool
//! of host memory ([`HostPool`]). A block the GPU evicts is offloaded there instead of being
//! dropped, and announced in this order, each a single-block event:
//!
//! 1. when the host pool is full, its least recently used block is dropped from it:
//!    `Removed` on [`Tier::Host`];
//! 2. `Stored` on [`Tier::Host`] of the block, naming its parent, while the block is still
//!    on the device (so the index never misses it in between; the same name for the same
//!    prefix only gains the host tier);
//! 3. `Removed` on [`Tier::Device`]: the block stays held, on the host.
//!
//! Step 2 needs the parent to be held (on any tier), or the index rejects the store. It is
//! checked after step 1 (which may have dropped the parent): a block whose parent is held
//! nowhere (its prefix was evicted from both tiers before it) is not offloaded, since no
//! prefix hit can reach it, and step 3 then drops it from the index. A block already in host
//! memory (reloaded earlier, see below) is not stored again: its copy there is refreshed
//! (most recently used) and only step 3 is published.
//!
//! A request's prefix may continue in host memory past its GPU prefix: those blocks are
//! *host hits*, reloaded to the GPU (they get room there like missing blocks, evicting as
//! needed) and announced on the device in the request's `Stored` event. The host copy is
//! kept (a host cache keeps what it serves, as vLLM's CPU offloading and LMCache do), and
//! made the most recently used there; the block is then on both tiers until either evicts
//! it. [`Acquired`] counts GPU hits and host hits separately.

use std::collections::BTreeMap;

use kvidx::{Block, Event, Tier, Worker};
use rustc_hash::FxHashMap;

use crate::host_pool::HostPool;

/// One block cached on the GPU.
#[derive(Debug, Clone, Copy)]
struct Slot {
    refs: u32,
    /// Key in the free list while `refs == 0`.
    tick: u64,
    /// The block (local and sequence hash): what its host store names when it is offloaded.
    block: Block,
    /// The block its chain continues (`None` at position 0).
    parent: Option<u64>,
    /// Whether a device `Stored` announced it: false from its allocation in
    /// [`BlockPool::acquire`] to the `Stored` event at the end of that call.
    announced: bool,
}

/// What [`BlockPool::acquire`] did with a chain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Acquired {
    /// Leading blocks of the chain now referenced (the caller releases exactly those).
    pub referenced: usize,
    /// Blocks of the chain's cached prefix that were on the GPU.
    pub device_hits: usize,
    /// Blocks of the chain's cached prefix reloaded from host memory.
    pub host_hits: usize,
}

impl Acquired {
    /// The cached prefix: GPU hits plus host hits.
    pub fn hits(&self) -> usize {
        self.device_hits + self.host_hits
    }
}

/// A worker's pool of `capacity` KV blocks on the GPU, and its host tier.
#[derive(Debug)]
pub struct BlockPool {
    worker: Worker,
    capacity: usize,
    blocks: FxHashMap<u64, Slot>,
    /// Unreferenced blocks by release tick: the first entry is the next to evict.
    free: BTreeMap<u64, u64>,
    tick: u64,
    next_event_id: u64,
    host: HostPool,
}

impl BlockPool {
    /// An empty pool of `capacity` blocks for `worker`, with no host tier.
    #[cfg(test)]
    pub fn new(worker: Worker, capacity: usize) -> Self {
        Self::with_host(worker, capacity, 0)
    }

    /// An empty pool of `capacity` GPU blocks and `host_capacity` host blocks (0: no host
    /// tier) for `worker`.
    pub fn with_host(worker: Worker, capacity: usize, host_capacity: usize) -> Self {
        Self {
            worker,
            capacity,
            blocks: FxHashMap::default(),
            free: BTreeMap::new(),
            tick: 0,
            next_event_id: 0,
            host: HostPool::new(host_capacity),
        }
    }

    /// Blocks cached on the GPU now (referenced or not).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Blocks held in host memory now.
    #[cfg(test)]
    pub fn host_len(&self) -> usize {
        self.host.len()
    }

    /// Distinct blocks held on either tier (what an exact index holds for this worker once
    /// every event is applied).
    pub fn held(&self) -> usize {
        let host_only = self
            .host
            .names()
            .filter(|s| !self.blocks.contains_key(s))
            .count();
        self.blocks.len() + host_only
    }

    /// Whether the block named `seq` is cached on the GPU.
    pub fn holds(&self, seq: u64) -> bool {
        self.blocks.contains_key(&seq)
    }

    /// Whether the block named `seq` is held in host memory.
    #[cfg(test)]
    pub fn holds_on_host(&self, seq: u64) -> bool {
        self.host.holds(seq)
    }

    /// How many leading blocks of `chain` (sequence hashes) are cached on the GPU: the
    /// prefix-cache hit without a host tier.
    pub fn prefix_hits(&self, chain: &[Block]) -> usize {
        chain
            .iter()
            .take_while(|b| self.blocks.contains_key(&b.seq_hash))
            .count()
    }

    /// `(on the GPU, on the GPU or in host memory)`: how many leading blocks of `chain` are
    /// held on the device, and on the device or the host (each block on either), as an exact
    /// index's tier depths count them.
    pub fn tier_depths(&self, chain: &[Block]) -> (usize, usize) {
        let device = self.prefix_hits(chain);
        let any = device
            + chain[device..]
                .iter()
                .take_while(|b| {
                    self.blocks.contains_key(&b.seq_hash) || self.host.holds(b.seq_hash)
                })
                .count();
        (device, any)
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
    /// announces it (offloading it to host memory when there is a host tier). Returns false
    /// when every cached block is referenced.
    fn make_room(&mut self, events: &mut Vec<Event>) -> bool {
        if self.blocks.len() < self.capacity {
            return true;
        }
        let Some((_, victim)) = self.free.pop_first() else {
            return false;
        };
        let slot = self.blocks.remove(&victim).expect("free blocks are cached");
        if self.host.enabled() {
            self.offload(slot, events);
        } else {
            let id = self.next_id();
            events.push(Event::removed(self.worker, id, vec![victim]));
        }
        true
    }

    /// Whether the index holds `parent` now (on any tier): announced on the GPU, or in host
    /// memory. `None` (position 0) needs no parent.
    fn parent_held(&self, parent: Option<u64>) -> bool {
        parent.map_or(true, |p| {
            self.blocks.get(&p).is_some_and(|s| s.announced) || self.host.holds(p)
        })
    }

    /// Moves a block the GPU just evicted to host memory and announces it, in the order of
    /// the module docs: host eviction, host store, device removal.
    fn offload(&mut self, slot: Slot, events: &mut Vec<Event>) {
        let seq = slot.block.seq_hash;
        if self.host.holds(seq) {
            self.host.touch(seq);
        } else {
            if let Some(dropped) = self.host.evict_if_full() {
                let id = self.next_id();
                events.push(Event::removed_from(
                    self.worker,
                    id,
                    vec![dropped],
                    Tier::Host,
                ));
            }
            if self.parent_held(slot.parent) {
                self.host.insert(seq);
                let id = self.next_id();
                events.push(Event::stored_on(
                    self.worker,
                    id,
                    slot.parent,
                    vec![slot.block],
                    Tier::Host,
                ));
            }
        }
        let id = self.next_id();
        events.push(Event::removed_from(
            self.worker,
            id,
            vec![seq],
            Tier::Device,
        ));
    }

    /// Puts the missing block `chain[i]` on the GPU (evicting as needed), referenced and not
    /// yet announced. Returns false when there is no room (every cached block referenced).
    fn allocate(
        &mut self,
        parent: Option<u64>,
        chain: &[Block],
        i: usize,
        events: &mut Vec<Event>,
    ) -> bool {
        if !self.make_room(events) {
            return false;
        }
        let parent = if i > 0 {
            Some(chain[i - 1].seq_hash)
        } else {
            parent
        };
        let slot = Slot {
            refs: 1,
            tick: 0,
            block: chain[i],
            parent,
            announced: false,
        };
        self.blocks.insert(chain[i].seq_hash, slot);
        true
    }

    /// Caches `chain` (which continues the cached block `parent`, or starts a sequence) and
    /// references every block of it that ends up cached. Blocks already cached are only
    /// referenced; missing ones are allocated (reloaded from host memory when held there),
    /// evicting as needed. Allocation stops at the first block that finds no room (every
    /// block referenced).
    ///
    /// Pushes the evictions, then one `Stored` event for the chain from its first block
    /// missing on the GPU on, into `events`. Returns how many leading blocks of `chain` are
    /// now referenced (the caller releases exactly those) and the hits.
    pub fn acquire(
        &mut self,
        parent: Option<u64>,
        chain: &[Block],
        events: &mut Vec<Event>,
    ) -> Acquired {
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
        let mut got = Acquired {
            referenced: hits,
            device_hits: hits,
            host_hits: 0,
        };
        // Whether every block so far was a hit (on the GPU or reloaded from host memory).
        let mut in_prefix = true;
        for (i, block) in chain.iter().enumerate().skip(hits) {
            if self.blocks.contains_key(&block.seq_hash) {
                // On the GPU: past a host hit, a GPU hit; after a miss, a block whose prefix
                // was evicted before it, cached again as it is.
                self.reference(block.seq_hash);
                got.device_hits += usize::from(in_prefix);
            } else {
                if !self.allocate(parent, chain, i, events) {
                    break;
                }
                let reloaded = self.host.holds(block.seq_hash);
                if reloaded {
                    self.host.touch(block.seq_hash);
                }
                in_prefix &= reloaded;
                got.host_hits += usize::from(in_prefix);
            }
            got.referenced += 1;
        }
        if got.referenced > hits {
            self.announce(parent, chain, hits, got.referenced, events);
        }
        got
    }

    /// Publishes `chain[from..to]` on the device (one `Stored`, continuing `chain[from - 1]`
    /// or `parent`) and marks its blocks announced.
    fn announce(
        &mut self,
        parent: Option<u64>,
        chain: &[Block],
        from: usize,
        to: usize,
        events: &mut Vec<Event>,
    ) {
        let parent = if from > 0 {
            Some(chain[from - 1].seq_hash)
        } else {
            parent
        };
        let id = self.next_id();
        events.push(Event::stored(
            self.worker,
            id,
            parent,
            chain[from..to].to_vec(),
        ));
        for block in &chain[from..to] {
            if let Some(slot) = self.blocks.get_mut(&block.seq_hash) {
                slot.announced = true;
            }
        }
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
        assert_eq!(pool.acquire(None, &a, &mut ev).referenced, 3);
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
        assert_eq!(pool.acquire(None, &b, &mut ev).referenced, 4);
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
        assert_eq!(pool.acquire(None, &c, &mut ev).referenced, 3);
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
        assert_eq!(pool.acquire(None, &c, &mut ev).referenced, 2);
        assert_eq!(removed_names(&ev), vec![b[0].seq_hash]);
        // Everything is referenced now: a longer chain gets only what fits (nothing).
        ev.clear();
        let d = chain(4, 2);
        assert_eq!(pool.acquire(None, &d, &mut ev).referenced, 0);
        assert!(ev.is_empty());
        assert!(pool.holds(a[0].seq_hash) && pool.holds(c[1].seq_hash));
    }

    #[test]
    fn partial_fit_stores_only_the_cached_prefix() {
        let mut pool = BlockPool::new(Worker::new(0, 0), 2);
        let mut ev = Vec::new();
        let a = chain(1, 3);
        assert_eq!(pool.acquire(None, &a, &mut ev).referenced, 2);
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
        assert_eq!(pool.acquire(None, &a, &mut ev).referenced, 2);
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

    fn names(chain: &[Block]) -> Vec<u64> {
        chain.iter().map(|b| b.seq_hash).collect()
    }

    /// Applies `events` to a synchronous reference index; checks it rejected nothing and
    /// saw no unknown removal, and returns it.
    fn reference(events: &[Event]) -> kvidx::Indexer {
        let index = kvidx::Indexer::new(kvidx::Config {
            backend: kvidx::BackendKind::Reference,
            event_threads: 0,
            ..kvidx::Config::default()
        })
        .unwrap();
        for e in events {
            index.apply_event(e.clone()).unwrap();
        }
        let stats = index.stats();
        assert_eq!((stats.events_rejected, stats.unknown_removals), (0, 0));
        index
    }

    #[test]
    fn gpu_evictions_move_blocks_to_host_memory_in_a_valid_order() {
        let w = Worker::new(0, 0);
        let mut pool = BlockPool::with_host(w, 3, 2);
        let mut ev = Vec::new();
        let a = chain(1, 3);
        pool.acquire(None, &a, &mut ev);
        pool.release(&names(&a));
        let b = chain(2, 2);
        assert_eq!(pool.acquire(None, &b, &mut ev).referenced, 2);
        // Tail first: a2 then a1 go to host memory, each stored there (naming its parent,
        // still held) before it leaves the device.
        assert_eq!(
            ev[1..],
            [
                Event::stored_on(w, 1, Some(a[1].seq_hash), vec![a[2]], Tier::Host),
                Event::removed_from(w, 2, vec![a[2].seq_hash], Tier::Device),
                Event::stored_on(w, 3, Some(a[0].seq_hash), vec![a[1]], Tier::Host),
                Event::removed_from(w, 4, vec![a[1].seq_hash], Tier::Device),
                Event::stored(w, 5, None, b.clone()),
            ]
        );
        let index = reference(&ev);
        let locals: Vec<u64> = a.iter().map(|x| x.local_hash).collect();
        let m = index.find_matches_tiered(&locals);
        assert_eq!((m[0].depth, m[0].tier_depths), (3, [1, 3, 3, 3]));
        // The host pool is full: the next offload first drops its least recently used
        // block (a2), then stores a0 (position 0: no parent).
        pool.release(&names(&b));
        ev.clear();
        let c = chain(3, 1);
        pool.acquire(None, &c, &mut ev);
        assert_eq!(
            ev,
            [
                Event::removed_from(w, 6, vec![a[2].seq_hash], Tier::Host),
                Event::stored_on(w, 7, None, vec![a[0]], Tier::Host),
                Event::removed_from(w, 8, vec![a[0].seq_hash], Tier::Device),
                Event::stored(w, 9, None, c.clone()),
            ]
        );
        assert_eq!((pool.len(), pool.host_len(), pool.held()), (3, 2, 5));
    }

    #[test]
    fn host_hits_reload_to_the_gpu_and_keep_the_host_copy() {
        let w = Worker::new(0, 0);
        let mut pool = BlockPool::with_host(w, 2, 4);
        let mut ev = Vec::new();
        let (a, b) = (chain(1, 2), chain(2, 2));
        pool.acquire(None, &a, &mut ev);
        pool.release(&names(&a));
        pool.acquire(None, &b, &mut ev);
        pool.release(&names(&b));
        assert_eq!(pool.tier_depths(&a), (0, 2));
        // a's prefix is in host memory: both blocks are reloaded (b goes to host memory to
        // make room) and announced on the device; their host copies stay.
        let got = pool.acquire(None, &a, &mut ev);
        assert_eq!(
            got,
            Acquired {
                referenced: 2,
                device_hits: 0,
                host_hits: 2
            }
        );
        assert_eq!(got.hits(), 2);
        assert_eq!(ev.last(), Some(&Event::stored(w, 10, None, a.clone())));
        assert!(a
            .iter()
            .all(|x| pool.holds(x.seq_hash) && pool.holds_on_host(x.seq_hash)));
        assert_eq!(pool.tier_depths(&a), (2, 2));
        // Evicted from the GPU again, a block already in host memory is only removed from
        // the device.
        pool.release(&names(&a));
        let before = ev.len();
        let got = pool.acquire(None, &b, &mut ev);
        assert_eq!((got.device_hits, got.host_hits), (0, 2));
        assert_eq!(
            ev[before..before + 2],
            [
                Event::removed_from(w, 11, vec![a[1].seq_hash], Tier::Device),
                Event::removed_from(w, 12, vec![a[0].seq_hash], Tier::Device),
            ]
        );
        let index = reference(&ev);
        assert_eq!(index.stats().worker_blocks, pool.held() as u64);
        assert_eq!(pool.held(), 4);
    }

    #[test]
    fn a_block_whose_prefix_is_held_nowhere_is_not_offloaded() {
        let w = Worker::new(0, 0);
        let mut pool = BlockPool::with_host(w, 2, 1);
        let mut ev = Vec::new();
        let a = chain(1, 2);
        pool.acquire(None, &a, &mut ev);
        // a0 is released while a1 is still in use (as when the tail is shared elsewhere).
        pool.release(&[a[0].seq_hash]);
        let b = chain(2, 1);
        pool.acquire(None, &b, &mut ev); // a0 to host memory
        pool.release(&names(&b));
        let c = chain(3, 1);
        pool.acquire(None, &c, &mut ev); // b0 to host memory, pushing a0 out of it
        assert!(!pool.holds(a[0].seq_hash) && !pool.holds_on_host(a[0].seq_hash));
        pool.release(&[a[1].seq_hash]);
        pool.release(&names(&c));
        let before = ev.len();
        let d = chain(4, 1);
        pool.acquire(None, &d, &mut ev);
        // a1's parent a0 is held nowhere: a1 is dropped, not stored on the host (the host
        // eviction made room for nothing).
        assert_eq!(
            ev[before..],
            [
                Event::removed_from(w, 8, vec![b[0].seq_hash], Tier::Host),
                Event::removed_from(w, 9, vec![a[1].seq_hash], Tier::Device),
                Event::stored(w, 10, None, d.clone()),
            ]
        );
        assert!(!pool.holds_on_host(a[1].seq_hash));
        assert_eq!(reference(&ev).stats().worker_blocks, 2);
    }
}
