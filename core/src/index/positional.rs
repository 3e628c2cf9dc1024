//! The positional index: one concurrent map per position, keyed by prefix identity,
//! searched with exact jumps.
//!
//! # Layout
//! `levels[p]` (one hash map per position behind its own reader-writer lock: writers of
//! different positions never meet, readers share) maps each prefix identity seen at position
//! `p` to the sorted set of worker slots holding it (16 bytes per identity, two slots inline;
//! see `index/level.rs`).
//! Each worker's own blocks are packed records in a slab with two `u32` indexes (by engine
//! name, by identity; see `index/records.rs`): a single-block removal probes the worker's
//! name index, follows its record to its parent's by slab position, and changes one level (the
//! freed record's identity-index entry goes stale instead of being probed for).
//!
//! # Exact jumps
//! A query jumps from a matched position `i` straight to `j = i + jump`. A worker that holds
//! the query's identity at `j` holds every identity before it *if* its blocks are closed under
//! "parent": every block it holds at a position > 0 has its parent held too. Each worker keeps
//! a count of blocks that break this (orphans: left by mid-chain removals, front evictions,
//! removal in any order) and readers trust a jump only for workers whose count is 0 (and that
//! are not being changed at that moment). Every other worker is checked position by position.
//! So holes never make a jump over- or under-count, which a check of worker counts alone at
//! jump points cannot promise.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use super::level::Level as Holders;
use super::records::{Placed, Records, NONE};
use super::registry::{Registry, SlotInfo};
use super::segmented::Segmented;
use super::tiers::WorkerTiers;
use super::worker_blocks::{push_depth, SlotDepth, WorkerBlocks};
use super::worker_set::{merge_into, split_by};
use crate::identity::{mix, IDENTITY_SEED};
use crate::model::{chain_fits, Block, Outcome, RejectReason, Tier};
use crate::scratch::with_scratch;
use crate::snapshot::{DecodedWorker, Exporter};
use crate::Error;

mod snapshot;

/// One position's identities and their holders.
type Level = parking_lot::RwLock<Holders>;

/// One worker's blocks.
#[derive(Debug, Default)]
pub(crate) struct WorkerState {
    /// Its records (names, identities, parents, orphans).
    records: Records,
    /// Which names are off the device alone (keys: identities).
    tiers: WorkerTiers,
}

/// See the module docs.
pub struct PositionalIndex {
    levels: Segmented<OnceLock<Level>>,
    registry: Registry<WorkerState>,
    jump_size: usize,
}

impl std::fmt::Debug for PositionalIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PositionalIndex")
            .field("jump_size", &self.jump_size)
            .finish_non_exhaustive()
    }
}

impl PositionalIndex {
    /// An empty index that jumps `jump_size` positions at a time (values below 1 act as 1,
    /// above [`crate::MAX_JUMP_SIZE`] as it).
    pub fn new(jump_size: usize) -> Self {
        Self {
            levels: Segmented::new(),
            registry: Registry::new(),
            jump_size: jump_size.clamp(1, crate::MAX_JUMP_SIZE),
        }
    }

    fn level(&self, position: u32) -> Option<&Level> {
        self.levels.get(position as usize)?.get()
    }

    fn level_or_create(&self, position: u32) -> &Level {
        self.levels
            .get_or_alloc(position as usize)
            .get_or_init(|| parking_lot::RwLock::new(Holders::default()))
    }

    /// Adds `slot` to the holders of `block`. The first block a store attaches is recorded
    /// as touched for readers (`store_touched` false until then); the blocks it attaches
    /// after that lie below it on its chain, so that one record covers them.
    fn attach(&self, block: &Placed, slot: u32, store_touched: &mut bool) {
        if !*store_touched {
            self.registry.touch(slot, block.position, block.local);
            *store_touched = true;
        }
        self.level_or_create(block.position)
            .write()
            .insert(block.identity, slot);
    }

    fn detach(&self, position: u32, local: u64, identity: u64, slot: u32) {
        self.registry.touch(slot, position, local);
        let Some(level) = self.level(position) else {
            return;
        };
        level.write().remove(identity, slot);
    }

    /// Gives `name` to the block on `tier` (its parent's record likely at `parent_hint`);
    /// replaces what the name meant before, if different. Returns the block's record.
    /// `store_touched` is [`Self::attach`]'s.
    #[allow(clippy::too_many_arguments)]
    fn add_name(
        &self,
        blocks: &mut WorkerState,
        slot: u32,
        name: u64,
        block: Placed,
        parent_hint: u32,
        tier: Tier,
        store_touched: &mut bool,
    ) -> u32 {
        let activity = &self.registry.tiers;
        if let Some(held) = blocks.records.find_name(name) {
            if blocks.records.get(held).identity == block.identity {
                blocks
                    .tiers
                    .stored(name, block.identity, tier, true, activity);
                return held;
            }
            self.remove_name(blocks, slot, name);
        }
        blocks
            .tiers
            .stored(name, block.identity, tier, false, activity);
        self.registry.add_blocks(slot, 1);
        let (at, became_held) = blocks.records.add_name(name, &block, parent_hint);
        if became_held {
            self.attach(&block, slot, store_touched);
        }
        at
    }

    #[inline]
    fn jump_safe(&self, slot: u32) -> bool {
        self.registry
            .slot_info(slot)
            .is_some_and(|info| !info.jumps_unsafe.load(Ordering::Acquire))
    }

    /// Calls `f` with the holders of `identity` at `position`.
    #[inline]
    fn with_holders<R>(&self, position: usize, identity: u64, f: impl FnOnce(&[u32]) -> R) -> R {
        let Some(level) = self.levels.get(position).and_then(OnceLock::get) else {
            return f(&[]);
        };
        f(level.read().holders(identity))
    }

    /// Finds the depth of every worker in `s.bisect`: each is jump-safe, holds the query's
    /// identities before `first` and misses the one at `last`, so its depth is in
    /// `first..=last`. The group is split at the middle position by who holds it, and each half
    /// searched on: one lookup per distinct drop point and halving, not per position.
    fn bisect(&self, first: usize, last: usize, s: &mut Scratch, out: &mut Vec<SlotDepth>) {
        s.stack.clear();
        s.stack.push((first, last, 0, s.bisect.len()));
        while let Some((lo, hi, start, end)) = s.stack.pop() {
            if start == end {
                continue;
            }
            if lo == hi {
                for &slot in &s.bisect[start..end] {
                    push_depth(out, slot, lo);
                }
                continue;
            }
            let mid = lo + (hi - lo) / 2;
            self.with_holders(mid, s.query[mid], |h| {
                split_by(&s.bisect[start..end], h, &mut s.kept, &mut s.dropped);
            });
            let split = start + s.kept.len();
            s.bisect[start..split].copy_from_slice(&s.kept);
            s.bisect[split..end].copy_from_slice(&s.dropped);
            s.stack.push((mid + 1, hi, start, split));
            s.stack.push((lo, mid, split, end));
        }
    }

    fn search_with(&self, local_hashes: &[u64], s: &mut Scratch, out: &mut Vec<SlotDepth>) {
        // Depths are u32: a query longer than the deepest possible chain cannot match further.
        let n = local_hashes.len().min(u32::MAX as usize);
        if n == 0 {
            return;
        }
        s.query.clear();
        s.query.push(mix(IDENTITY_SEED, local_hashes[0]));
        self.with_holders(0, s.query[0], |h| {
            s.active.clear();
            s.active.extend_from_slice(h);
        });
        let mut matched = 1usize; // every active worker holds query positions 0..matched
        while !s.active.is_empty() && matched < n {
            let target = (matched - 1 + self.jump_size).min(n - 1);
            while s.query.len() <= target {
                let prev = *s.query.last().expect("non-empty");
                s.query.push(mix(prev, local_hashes[s.query.len()]));
            }
            // Sort the active workers by what the target tells about them. A jump-safe worker
            // holds a downward-closed set of the query's identities: holding the target means
            // holding everything before it, and missing it means its depth lies in
            // matched..=target, found by bisection. Any other worker is walked position by
            // position.
            self.with_holders(target, s.query[target], |h| {
                split_by(&s.active, h, &mut s.kept, &mut s.dropped);
            });
            s.confirmed.clear();
            s.unsure.clear();
            s.bisect.clear();
            for &slot in &s.kept {
                if self.jump_safe(slot) {
                    s.confirmed.push(slot);
                } else {
                    s.unsure.push(slot);
                }
            }
            for &slot in &s.dropped {
                if self.jump_safe(slot) {
                    s.bisect.push(slot);
                } else {
                    s.unsure.push(slot);
                }
            }
            self.bisect(matched, target, s, out);
            if !s.unsure.is_empty() {
                s.unsure.sort_unstable();
                for position in matched..=target {
                    if s.unsure.is_empty() {
                        break;
                    }
                    self.with_holders(position, s.query[position], |h| {
                        split_by(&s.unsure, h, &mut s.kept, &mut s.dropped);
                    });
                    for &slot in &s.dropped {
                        push_depth(out, slot, position);
                    }
                    std::mem::swap(&mut s.unsure, &mut s.kept);
                }
            }
            merge_into(&s.confirmed, &s.unsure, &mut s.active);
            matched = target + 1;
        }
        for &slot in &s.active {
            push_depth(out, slot, matched);
        }
    }
}

/// Per-thread buffers of a query, reused so that queries allocate nothing once warm.
#[derive(Default)]
struct Scratch {
    query: Vec<u64>,
    active: Vec<u32>,
    kept: Vec<u32>,
    unsure: Vec<u32>,
    confirmed: Vec<u32>,
    dropped: Vec<u32>,
    bisect: Vec<u32>,
    /// Pending bisection ranges: (first position, last position, start, end in `bisect`).
    stack: Vec<(usize, usize, usize, usize)>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl WorkerBlocks for PositionalIndex {
    type State = WorkerState;

    fn registry(&self) -> &Registry<WorkerState> {
        &self.registry
    }

    fn store(
        &self,
        blocks: &mut WorkerState,
        slot: u32,
        parent: Option<u64>,
        new_blocks: &[Block],
        tier: Tier,
    ) -> Outcome {
        let (mut position, mut prefix, mut parent_at) = match parent {
            None => (0u64, IDENTITY_SEED, NONE),
            Some(name) => {
                let Some(at) = blocks.records.find_name(name) else {
                    return Outcome::Rejected(RejectReason::ParentNotFound);
                };
                let record = blocks.records.get(at);
                (u64::from(record.position) + 1, record.identity, at)
            }
        };
        if !chain_fits(position, new_blocks.len()) {
            return Outcome::Rejected(RejectReason::PositionOverflow);
        }
        let mut store_touched = false;
        for block in new_blocks {
            let identity = mix(prefix, block.local_hash);
            let placed = Placed {
                position: position as u32,
                local: block.local_hash,
                identity,
                parent: prefix,
            };
            parent_at = self.add_name(
                blocks,
                slot,
                block.seq_hash,
                placed,
                parent_at,
                tier,
                &mut store_touched,
            );
            prefix = identity;
            position += 1;
        }
        Outcome::Applied {
            unknown_removals: 0,
        }
    }

    fn remove_name(&self, blocks: &mut WorkerState, slot: u32, name: u64) -> bool {
        let Some(dropped) = blocks.records.remove_name(name) else {
            return false;
        };
        blocks.tiers.forget(name, &self.registry.tiers);
        self.registry.add_blocks(slot, -1);
        if dropped.last {
            let record = dropped.record;
            self.detach(record.position, record.local, record.identity, slot);
        }
        true
    }

    fn clear(&self, blocks: &mut WorkerState, slot: u32) {
        for record in blocks.records.held() {
            self.detach(record.position, record.local, record.identity, slot);
        }
        self.registry
            .add_blocks(slot, -(blocks.records.names() as i64));
        blocks.tiers.clear(&self.registry.tiers);
        *blocks = WorkerState::default();
    }

    fn worker_tiers(state: &WorkerState) -> &WorkerTiers {
        &state.tiers
    }

    fn worker_tiers_mut(state: &mut WorkerState) -> &mut WorkerTiers {
        &mut state.tiers
    }

    fn key_of(&self, state: &WorkerState, name: u64) -> Option<u64> {
        let at = state.records.find_name(name)?;
        Some(state.records.get(at).identity)
    }

    fn identity_of_name(&self, state: &WorkerState, name: u64) -> Option<u64> {
        self.key_of(state, name)
    }

    fn first_holders(&self, first_local: u64, out: &mut Vec<u32>) {
        let identity = mix(IDENTITY_SEED, first_local);
        self.with_holders(0, identity, |h| {
            out.clear();
            out.extend_from_slice(h);
        });
    }

    fn search(&self, local_hashes: &[u64], out: &mut Vec<SlotDepth>) {
        with_scratch(&SCRATCH, |scratch| {
            self.search_with(local_hashes, scratch, out)
        });
    }

    /// Jumps read up to `jump_size - 1` positions past a slot's depth (the target it missed).
    fn read_reach(&self, depth: u32) -> u32 {
        depth.saturating_add(self.jump_size.min(u32::MAX as usize) as u32)
    }

    fn depth_of_slot(&self, slot: u32, local_hashes: &[u64]) -> usize {
        let mut identity = IDENTITY_SEED;
        for (position, &local) in local_hashes.iter().enumerate() {
            identity = mix(identity, local);
            if !self.with_holders(position, identity, |h| h.binary_search(&slot).is_ok()) {
                return position;
            }
        }
        local_hashes.len()
    }

    fn walk_held(
        &self,
        state: &WorkerState,
        _slot: u32,
        local_hashes: &[u64],
        visit: &mut dyn FnMut(u64, u32),
    ) -> usize {
        let mut identity = IDENTITY_SEED;
        for (depth, &local) in local_hashes.iter().enumerate() {
            identity = mix(identity, local);
            match state.records.find_identity(identity) {
                Some(at) if state.records.get(at).name_count() > 0 => {
                    visit(identity, state.records.get(at).name_count())
                }
                _ => return depth,
            }
        }
        local_hashes.len()
    }

    /// Jumps over a worker with orphans cannot be trusted: tell readers.
    /// Stored only when it changes (the change holder is its only writer), so that a change
    /// leaves the line readers poll alone.
    fn after_change(&self, state: &WorkerState, info: &SlotInfo) {
        let unsafe_now = state.records.orphans() > 0;
        if info.jumps_unsafe.load(Ordering::Relaxed) != unsafe_now {
            info.jumps_unsafe.store(unsafe_now, Ordering::Release);
        }
    }

    fn export_state(&self, state: &WorkerState, exporter: &mut Exporter) {
        self.export_snapshot(state, exporter);
    }

    fn restore_state(
        &self,
        state: &mut WorkerState,
        slot: u32,
        section: &DecodedWorker,
    ) -> Result<(), Error> {
        self.restore_snapshot(state, slot, section)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::reference::ReferenceIndex;
    use crate::index::Backend;
    use crate::model::Match;
    use crate::model::{Event, Worker};

    impl PositionalIndex {
        /// (identities with holders, (slot, identity) pairs) over every level.
        fn entry_count(&self) -> (usize, usize) {
            let mut entries = 0;
            let mut pairs = 0;
            for position in 0..1024u32 {
                if let Some(level) = self.level(position) {
                    for (_, holders) in level.read().iter() {
                        entries += 1;
                        pairs += holders.len();
                    }
                }
            }
            (entries, pairs)
        }

        fn orphans(&self, worker: Worker) -> u32 {
            self.registry
                .with_worker(worker, false, |entry| entry.state.records.orphans())
                .unwrap_or(0)
        }
    }

    fn apply(index: &PositionalIndex, event: Event) -> Outcome {
        index.apply(event.worker, &event.data)
    }

    fn chain(worker: Worker, len: u64, base: u64, salt: u64) -> Event {
        let blocks = (0..len)
            .map(|p| Block::new((p + salt) % 3, base + p))
            .collect();
        Event::stored(worker, 0, None, blocks)
    }

    #[test]
    fn orphans_track_holes_and_their_repair() {
        let index = PositionalIndex::new(4);
        let w = Worker::new(0, 0);
        apply(&index, chain(w, 8, 100, 0));
        assert_eq!(index.orphans(w), 0);
        apply(&index, Event::removed(w, 0, vec![103]));
        assert_eq!(index.orphans(w), 1, "position 4 lost its parent");
        apply(&index, Event::removed(w, 0, vec![100]));
        assert_eq!(index.orphans(w), 2, "position 1 lost its parent too");
        apply(&index, Event::removed(w, 0, vec![104, 105, 106, 107]));
        assert_eq!(
            index.orphans(w),
            1,
            "only position 1 is left without a parent"
        );
        apply(&index, Event::stored(w, 0, None, vec![Block::new(0, 100)]));
        assert_eq!(index.orphans(w), 0);
    }

    #[test]
    fn removing_everything_leaves_no_entries() {
        let index = PositionalIndex::new(3);
        let (w0, w1) = (Worker::new(0, 0), Worker::new(1, 0));
        apply(&index, chain(w0, 12, 100, 0));
        apply(&index, chain(w1, 12, 200, 1)); // other locals: Multi entries appear
        apply(&index, chain(w1, 5, 300, 0)); // same blocks as w0 under other names
        assert!(index.entry_count().0 > 0);
        apply(&index, Event::removed(w0, 0, (100..112).rev().collect()));
        index.remove_worker(1);
        assert_eq!(index.entry_count(), (0, 0));
        assert_eq!(index.worker_blocks(), 0);
        assert_eq!(index.workers(), 1);
    }

    fn find(index: &dyn Backend, query: &[u64]) -> Vec<Match> {
        let mut out = Vec::new();
        index.find_matches_into(query, &mut out);
        out
    }

    /// Both backends' answers to every prefix of `query`, sorted.
    fn answers(index: &PositionalIndex, reference: &ReferenceIndex, query: &[u64]) {
        for len in 1..=query.len() {
            assert_eq!(
                find(index, &query[..len]),
                find(reference, &query[..len]),
                "query of {len} blocks"
            );
        }
    }

    #[test]
    fn a_name_given_twice_in_one_chain_matches_the_reference() {
        let index = PositionalIndex::new(2);
        let reference = ReferenceIndex::new();
        let w = Worker::new(0, 0);
        let events = [
            // Name 50 first names position 0, then position 1: position 0 is left unheld.
            Event::stored(w, 0, None, vec![Block::new(1, 50), Block::new(2, 50)]),
            Event::stored(w, 1, Some(50), vec![Block::new(3, 51), Block::new(4, 52)]),
            Event::removed(w, 2, vec![51]),
            Event::stored(w, 3, None, vec![Block::new(1, 60), Block::new(2, 61)]),
        ];
        for event in events {
            assert_eq!(
                apply(&index, event.clone()),
                reference.apply(w, &event.data)
            );
            answers(&index, &reference, &[1, 2, 3, 4]);
        }
        assert_eq!(index.orphans(w), 1, "position 3 misses position 2");
        assert_eq!(index.worker_blocks(), reference.worker_blocks());
    }

    #[test]
    fn cleared_workers_start_over() {
        let index = PositionalIndex::new(4);
        let w = Worker::new(3, 1);
        apply(&index, chain(w, 10, 100, 0));
        apply(&index, Event::removed(w, 0, vec![102]));
        assert_eq!(index.orphans(w), 1);
        apply(&index, Event::cleared(w, 1));
        assert_eq!(index.orphans(w), 0);
        assert_eq!(index.entry_count(), (0, 0));
        assert_eq!(index.worker_blocks(), 0);
        apply(&index, chain(w, 6, 100, 0));
        assert_eq!(index.entry_count(), (6, 6));
        assert_eq!(index.worker_blocks(), 6);
        let query: Vec<u64> = (0..8).map(|p| p % 3).collect();
        let found = find(&index, &query);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].depth, 6);
    }
}
