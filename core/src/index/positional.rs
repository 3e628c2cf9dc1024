//! The positional index: one concurrent map per position, keyed by local hash,
//! searched with exact jumps.
//!
//! # Layout
//! `levels[p]` (one hash map per position behind its own reader-writer lock: writers of
//! different positions never meet, readers share) maps a local hash to the identities seen at
//! position `p` with that local hash
//! (usually one: `Candidates::Single`; several when different prefixes end in the same block
//! content: `Candidates::Multi`), each with the sorted set of worker slots holding it.
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
use std::collections::hash_map::Entry as MapEntry;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use super::registry::{Registry, SlotInfo};
use super::segmented::Segmented;
use super::tiers::WorkerTiers;
use super::worker_blocks::{push_depth, SlotDepth, WorkerBlocks};
use super::worker_set::{merge_into, split_by, WorkerSet};
use crate::identity::{mix, IDENTITY_SEED};
use crate::model::{chain_fits, Block, Outcome, RejectReason, Tier};
use crate::scratch::with_scratch;
use crate::snapshot::{DecodedWorker, Exporter};
use crate::Error;

mod snapshot;

/// Identities at one (position, local hash), with their holders.
#[derive(Debug)]
enum Candidates {
    Single { identity: u64, holders: WorkerSet },
    Multi(Vec<(u64, WorkerSet)>),
}

impl Candidates {
    fn holders(&self, identity: u64) -> Option<&WorkerSet> {
        match self {
            Candidates::Single {
                identity: id,
                holders,
            } => (*id == identity).then_some(holders),
            Candidates::Multi(list) => list.iter().find(|(id, _)| *id == identity).map(|(_, h)| h),
        }
    }

    fn holders_mut(&mut self, identity: u64) -> &mut WorkerSet {
        if let Candidates::Single { identity: id, .. } = self {
            if *id != identity {
                let Candidates::Single {
                    identity: first,
                    holders,
                } = std::mem::replace(self, Candidates::Multi(Vec::with_capacity(2)))
                else {
                    unreachable!("matched above")
                };
                if let Candidates::Multi(list) = self {
                    list.push((first, holders));
                }
            }
        }
        match self {
            Candidates::Single { holders, .. } => holders,
            Candidates::Multi(list) => {
                let at = match list.iter().position(|(id, _)| *id == identity) {
                    Some(at) => at,
                    None => {
                        list.push((identity, WorkerSet::default()));
                        list.len() - 1
                    }
                };
                &mut list[at].1
            }
        }
    }

    /// Removes a slot from an identity's holders; returns true when nothing is left at all.
    fn remove(&mut self, identity: u64, slot: u32) -> bool {
        match self {
            Candidates::Single {
                identity: id,
                holders,
            } => {
                if *id == identity {
                    holders.remove(slot);
                }
                holders.is_empty()
            }
            Candidates::Multi(list) => {
                if let Some(at) = list.iter().position(|(id, _)| *id == identity) {
                    list[at].1.remove(slot);
                    if list[at].1.is_empty() {
                        list.swap_remove(at);
                    }
                }
                if list.len() == 1 {
                    let (identity, holders) = list.pop().expect("one element");
                    *self = Candidates::Single { identity, holders };
                }
                list_is_empty(self)
            }
        }
    }
}

fn list_is_empty(c: &Candidates) -> bool {
    matches!(c, Candidates::Multi(list) if list.is_empty())
}

type Level = parking_lot::RwLock<FxHashMap<u64, Candidates>>;

/// What a worker knows of one identity it holds (or of a parent some held block points to).
#[derive(Debug, Clone, Copy)]
struct IdentityInfo {
    position: u32,
    local: u64,
    parent: u64,
    /// Names the worker holds for this identity; 0 marks a not-held parent kept for `children`.
    names: u32,
    /// Held identities whose parent is this one.
    children: u32,
}

/// One worker's blocks.
#[derive(Debug, Default)]
pub(crate) struct WorkerState {
    /// Engine name -> identity.
    names: FxHashMap<u64, u64>,
    /// Identity -> what is known of it.
    identities: FxHashMap<u64, IdentityInfo>,
    /// Held identities at position > 0 whose parent is not held.
    orphans: u32,
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

/// A block about to be held: where it is and what it continues.
#[derive(Clone, Copy)]
struct Placed {
    position: u32,
    local: u64,
    identity: u64,
    parent: u64,
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
            .get_or_init(|| parking_lot::RwLock::new(FxHashMap::default()))
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
            .entry(block.local)
            .or_insert_with(|| Candidates::Single {
                identity: block.identity,
                holders: WorkerSet::default(),
            })
            .holders_mut(block.identity)
            .insert(slot);
    }

    fn detach(&self, position: u32, local: u64, identity: u64, slot: u32) {
        self.registry.touch(slot, position, local);
        let Some(level) = self.level(position) else {
            return;
        };
        if let MapEntry::Occupied(mut entry) = level.write().entry(local) {
            if entry.get_mut().remove(identity, slot) {
                entry.remove();
            }
        }
    }

    /// Gives `name` to the block on `tier`; replaces what the name meant before, if
    /// different. `store_touched` is [`Self::attach`]'s.
    fn add_name(
        &self,
        blocks: &mut WorkerState,
        slot: u32,
        name: u64,
        block: Placed,
        tier: Tier,
        store_touched: &mut bool,
    ) {
        let activity = &self.registry.tiers;
        match blocks.names.get(&name) {
            Some(&held) if held == block.identity => {
                blocks.tiers.stored(name, held, tier, true, activity);
                return;
            }
            Some(_) => {
                self.remove_name(blocks, slot, name);
            }
            None => {}
        }
        blocks
            .tiers
            .stored(name, block.identity, tier, false, activity);
        blocks.names.insert(name, block.identity);
        self.registry.add_blocks(1);
        let info = blocks
            .identities
            .entry(block.identity)
            .or_insert(IdentityInfo {
                position: block.position,
                local: block.local,
                parent: block.parent,
                names: 0,
                children: 0,
            });
        info.names += 1;
        if info.names > 1 {
            return; // a second name for an identity already held
        }
        // The identity becomes held (it may have been a not-held parent until now).
        info.position = block.position;
        info.local = block.local;
        info.parent = block.parent;
        blocks.orphans -= info.children;
        if block.position > 0 {
            let parent = blocks
                .identities
                .entry(block.parent)
                .or_insert(IdentityInfo {
                    position: block.position - 1,
                    local: 0,
                    parent: 0,
                    names: 0,
                    children: 0,
                });
            parent.children += 1;
            if parent.names == 0 {
                blocks.orphans += 1;
            }
        }
        self.attach(&block, slot, store_touched);
    }

    #[inline]
    fn jump_safe(&self, slot: u32) -> bool {
        self.registry
            .slot_info(slot)
            .is_some_and(|info| !info.jumps_unsafe.load(Ordering::Acquire))
    }

    /// Calls `f` with the holders of `identity` at `position` under local hash `local`.
    #[inline]
    fn with_holders<R>(
        &self,
        position: usize,
        local: u64,
        identity: u64,
        f: impl FnOnce(&[u32]) -> R,
    ) -> R {
        let Some(level) = self.levels.get(position).and_then(OnceLock::get) else {
            return f(&[]);
        };
        let level = level.read();
        match level.get(&local).and_then(|c| c.holders(identity)) {
            Some(set) => f(set.as_slice()),
            None => f(&[]),
        }
    }

    /// Finds the depth of every worker in `s.bisect`: each is jump-safe, holds the query's
    /// identities before `first` and misses the one at `last`, so its depth is in
    /// `first..=last`. The group is split at the middle position by who holds it, and each half
    /// searched on: one lookup per distinct drop point and halving, not per position.
    fn bisect(
        &self,
        local_hashes: &[u64],
        first: usize,
        last: usize,
        s: &mut Scratch,
        out: &mut Vec<SlotDepth>,
    ) {
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
            self.with_holders(mid, local_hashes[mid], s.query[mid], |h| {
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
        self.with_holders(0, local_hashes[0], s.query[0], |h| {
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
            self.with_holders(target, local_hashes[target], s.query[target], |h| {
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
            self.bisect(local_hashes, matched, target, s, out);
            if !s.unsure.is_empty() {
                s.unsure.sort_unstable();
                let skipped = local_hashes[..=target].iter().zip(&s.query).enumerate();
                for (position, (&local, &identity)) in skipped.skip(matched) {
                    if s.unsure.is_empty() {
                        break;
                    }
                    self.with_holders(position, local, identity, |h| {
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
        let (mut position, mut prefix) = match parent {
            None => (0u64, IDENTITY_SEED),
            Some(name) => {
                let Some(identity) = blocks.names.get(&name) else {
                    return Outcome::Rejected(RejectReason::ParentNotFound);
                };
                let info = &blocks.identities[identity];
                (u64::from(info.position) + 1, *identity)
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
            self.add_name(
                blocks,
                slot,
                block.seq_hash,
                placed,
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
        let Some(identity) = blocks.names.remove(&name) else {
            return false;
        };
        blocks.tiers.forget(name, &self.registry.tiers);
        self.registry.add_blocks(-1);
        let MapEntry::Occupied(mut entry) = blocks.identities.entry(identity) else {
            unreachable!("every name's identity is recorded");
        };
        entry.get_mut().names -= 1;
        let info = *entry.get();
        if info.names > 0 {
            return true;
        }
        if info.children == 0 {
            entry.remove();
        }
        self.detach(info.position, info.local, identity, slot);
        blocks.orphans += info.children;
        if info.position > 0 {
            if let MapEntry::Occupied(mut parent) = blocks.identities.entry(info.parent) {
                let parent_info = parent.get_mut();
                parent_info.children -= 1;
                if parent_info.names == 0 {
                    blocks.orphans -= 1;
                    if parent_info.children == 0 {
                        parent.remove();
                    }
                }
            }
        }
        true
    }

    fn clear(&self, blocks: &mut WorkerState, slot: u32) {
        for (&identity, info) in &blocks.identities {
            if info.names > 0 {
                self.detach(info.position, info.local, identity, slot);
            }
        }
        self.registry.add_blocks(-(blocks.names.len() as i64));
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
        state.names.get(&name).copied()
    }

    fn first_holders(&self, first_local: u64, out: &mut Vec<u32>) {
        let identity = mix(IDENTITY_SEED, first_local);
        self.with_holders(0, first_local, identity, |h| {
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
            if !self.with_holders(position, local, identity, |h| {
                h.binary_search(&slot).is_ok()
            }) {
                return position;
            }
        }
        local_hashes.len()
    }

    fn walk_held(
        &self,
        state: &WorkerState,
        local_hashes: &[u64],
        visit: &mut dyn FnMut(u64, u32),
    ) -> usize {
        let mut identity = IDENTITY_SEED;
        for (depth, &local) in local_hashes.iter().enumerate() {
            identity = mix(identity, local);
            match state.identities.get(&identity) {
                Some(info) if info.names > 0 => visit(identity, info.names),
                _ => return depth,
            }
        }
        local_hashes.len()
    }

    /// Jumps over a worker with orphans cannot be trusted: tell readers.
    fn after_change(&self, state: &WorkerState, info: &SlotInfo) {
        info.jumps_unsafe
            .store(state.orphans > 0, Ordering::Release);
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
    use crate::index::Backend;
    use crate::model::{Event, Worker};

    impl PositionalIndex {
        /// (local-hash entries, identities with holders) over every level.
        fn entry_count(&self) -> (usize, usize) {
            let mut entries = 0;
            let mut identities = 0;
            for position in 0..1024u32 {
                if let Some(level) = self.level(position) {
                    for (_, value) in level.read().iter() {
                        entries += 1;
                        identities += match value {
                            Candidates::Single { .. } => 1,
                            Candidates::Multi(list) => list.len(),
                        };
                    }
                }
            }
            (entries, identities)
        }

        fn orphans(&self, worker: Worker) -> u32 {
            self.registry
                .with_worker(worker, false, |entry| entry.state.orphans)
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
}
