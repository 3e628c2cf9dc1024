//! A concurrent radix tree over local hashes.
//!
//! Each node is one block content under one prefix; the path from the root spells the
//! prefix, so identities are exact by construction. A node's lock guards its holders and
//! children together. Locks are taken parent before child, by writers only; readers take one
//! read lock at a time. A node is unlinked as soon as nobody holds it and it has no children,
//! and its parent is then checked the same way, so no node outlives the last worker using it.
//!
//! A node is never unlinked while a writer attaches under it: writers attach only under the
//! root, a node their worker holds, or a node they have just attached to.
//!
//! # Memory
//! A node's children are inline while it has at most one (`children.rs`), and a worker keeps
//! one map entry per name; whether it holds a node is read from the node's holders (its own
//! slot), so only nodes with several names of one worker need a count of their own.

use std::collections::hash_map::Entry as MapEntry;
use std::sync::{Arc, Weak};

use parking_lot::RwLock;
use rustc_hash::FxHashMap;

use super::children::Children;
use super::registry::Registry;
use super::tiers::WorkerTiers;
use super::worker_blocks::{push_depth, SlotDepth, WorkerBlocks};
use super::worker_set::{split_by, WorkerSet};
use crate::identity::{mix, IDENTITY_SEED};
use crate::model::{chain_fits, Block, Outcome, RejectReason, Tier};
use crate::scratch::with_scratch;
use crate::snapshot::{DecodedWorker, Exporter};
use crate::Error;

mod snapshot;

#[derive(Default)]
struct NodeState {
    holders: WorkerSet,
    children: Children<Arc<Node>>,
    /// Unlinked from its parent; kept alive only by stale references.
    unlinked: bool,
}

struct Node {
    local: u64,
    /// Position of the block (the root is at -1, stored as `u32::MAX` never used for blocks).
    position: u32,
    parent: Weak<Node>,
    state: RwLock<NodeState>,
}

impl Node {
    fn key(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }

    /// The node's key for tier records (a worker's held nodes stay allocated while held).
    fn tier_key(self: &Arc<Self>) -> u64 {
        self.key() as u64
    }
}

impl Drop for Node {
    /// Drops the nodes below this one from a list on the heap: the derived drop would recurse
    /// once per level and overflow the stack on a long chain.
    fn drop(&mut self) {
        let mut below = Vec::new();
        self.state.get_mut().children.take_all(&mut below);
        while let Some(child) = below.pop() {
            // A node still referenced elsewhere is dropped, the same way, by its last owner.
            if let Some(mut child) = Arc::into_inner(child) {
                child.state.get_mut().children.take_all(&mut below);
            }
        }
    }
}

/// One worker's blocks: its names, and the held nodes that have more than one name.
///
/// A node is held by the worker exactly when its slot is among the node's holders; most held
/// nodes have one name, so only the others are counted here.
#[derive(Default)]
pub(crate) struct WorkerState {
    names: FxHashMap<u64, Arc<Node>>,
    /// Held nodes with two or more names -> their number of names minus one.
    extra_names: FxHashMap<usize, u32>,
    /// Which names are off the device alone (keys: [`Node::tier_key`]).
    tiers: WorkerTiers,
}

/// See the module docs.
pub struct RadixIndex {
    root: Arc<Node>,
    registry: Registry<WorkerState>,
}

impl std::fmt::Debug for RadixIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RadixIndex").finish_non_exhaustive()
    }
}

impl Default for RadixIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl RadixIndex {
    /// An empty tree.
    pub fn new() -> Self {
        Self {
            root: Arc::new(Node {
                local: 0,
                position: u32::MAX,
                parent: Weak::new(),
                state: RwLock::new(NodeState::default()),
            }),
            registry: Registry::new(),
        }
    }

    fn is_root(&self, node: &Arc<Node>) -> bool {
        Arc::ptr_eq(node, &self.root)
    }

    /// The child of `parent` for `local`, created if needed, with `slot` among its holders,
    /// and whether `slot` was not among them before. The first node a store attaches is
    /// recorded as touched for readers (`store_touched` false until then); the nodes it
    /// attaches after that lie below it, so that one record covers them.
    fn attach(
        &self,
        parent: &Arc<Node>,
        local: u64,
        slot: u32,
        store_touched: &mut bool,
    ) -> (Arc<Node>, bool) {
        let mut parent_state = parent.state.write();
        debug_assert!(!parent_state.unlinked, "attach under an unlinked node");
        let position = if self.is_root(parent) {
            0
        } else {
            parent.position + 1
        };
        if !*store_touched {
            self.registry.touch(slot, position, local);
            *store_touched = true;
        }
        let child = Arc::clone(parent_state.children.get_or_insert_with(local, || {
            Arc::new(Node {
                local,
                position,
                parent: Arc::downgrade(parent),
                state: RwLock::new(NodeState::default()),
            })
        }));
        let newly_held = child.state.write().holders.insert(slot);
        (child, newly_held)
    }

    /// Drops `slot` from `node`'s holders and unlinks whatever that leaves unused.
    fn detach(&self, node: &Arc<Node>, slot: u32) {
        self.registry.touch(slot, node.position, node.local);
        node.state.write().holders.remove(slot);
        let mut node = Arc::clone(node);
        while let Some(parent) = node.parent.upgrade() {
            let mut parent_state = parent.state.write();
            let mut state = node.state.write();
            if state.unlinked || !state.holders.is_empty() || !state.children.is_empty() {
                return;
            }
            parent_state
                .children
                .remove_if(node.local, |child| Arc::ptr_eq(child, &node));
            state.unlinked = true;
            drop(state);
            drop(parent_state);
            node = parent;
        }
    }

    /// Gives `name` to `node` on `tier` (a new name, or one that named another node);
    /// `newly_held` says whether the worker held `node` under no other name before.
    fn add_name(
        &self,
        blocks: &mut WorkerState,
        slot: u32,
        name: u64,
        node: Arc<Node>,
        newly_held: bool,
        tier: Tier,
    ) {
        let activity = &self.registry.tiers;
        if !newly_held {
            *blocks.extra_names.entry(node.key()).or_insert(0) += 1;
        }
        let key = node.tier_key();
        match blocks.names.insert(name, node) {
            Some(old) => {
                blocks.tiers.forget(name, activity);
                self.release(blocks, slot, &old);
            }
            None => self.registry.add_blocks(slot, 1),
        }
        blocks.tiers.stored(name, key, tier, false, activity);
    }

    /// Drops one name's hold on `node`.
    fn release(&self, blocks: &mut WorkerState, slot: u32, node: &Arc<Node>) {
        if let MapEntry::Occupied(mut extra) = blocks.extra_names.entry(node.key()) {
            *extra.get_mut() -= 1;
            if *extra.get() == 0 {
                extra.remove();
            }
            return; // another name still holds it
        }
        self.detach(node, slot);
    }

    /// Whether the worker at `slot` holds `node` (its slot is among the holders).
    fn holds(node: &Node, slot: u32) -> bool {
        node.state
            .read()
            .holders
            .as_slice()
            .binary_search(&slot)
            .is_ok()
    }

    fn search_with(&self, local_hashes: &[u64], s: &mut Scratch, out: &mut Vec<SlotDepth>) {
        let n = local_hashes.len().min(u32::MAX as usize);
        let mut node = Arc::clone(&self.root);
        let mut matched = 0usize;
        s.active.clear();
        while matched < n {
            let Some(child) = node
                .state
                .read()
                .children
                .get(local_hashes[matched])
                .cloned()
            else {
                break;
            };
            {
                let state = child.state.read();
                if matched == 0 {
                    s.active.extend_from_slice(state.holders.as_slice());
                } else {
                    split_by(
                        &s.active,
                        state.holders.as_slice(),
                        &mut s.kept,
                        &mut s.dropped,
                    );
                    for &slot in &s.dropped {
                        push_depth(out, slot, matched);
                    }
                    std::mem::swap(&mut s.active, &mut s.kept);
                }
            }
            if s.active.is_empty() {
                return;
            }
            matched += 1;
            node = child;
        }
        for &slot in &s.active {
            push_depth(out, slot, matched);
        }
    }
}

#[derive(Default)]
struct Scratch {
    active: Vec<u32>,
    kept: Vec<u32>,
    dropped: Vec<u32>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

impl WorkerBlocks for RadixIndex {
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
        let mut current = match parent {
            None => Arc::clone(&self.root),
            Some(name) => match blocks.names.get(&name) {
                Some(node) => Arc::clone(node),
                None => return Outcome::Rejected(RejectReason::ParentNotFound),
            },
        };
        let first = if self.is_root(&current) {
            0
        } else {
            u64::from(current.position) + 1
        };
        if !chain_fits(first, new_blocks.len()) {
            return Outcome::Rejected(RejectReason::PositionOverflow);
        }
        let mut store_touched = false;
        for block in new_blocks {
            let existing = current.state.read().children.get(block.local_hash).cloned();
            if let (Some(child), Some(named)) = (&existing, blocks.names.get(&block.seq_hash)) {
                if Arc::ptr_eq(child, named) {
                    // Same name, same block: it only gains the tier.
                    let key = child.tier_key();
                    blocks
                        .tiers
                        .stored(block.seq_hash, key, tier, true, &self.registry.tiers);
                    current = Arc::clone(child);
                    continue;
                }
            }
            // Attach before dropping what the name meant: this keeps `current` pinned.
            let (child, newly_held) =
                self.attach(&current, block.local_hash, slot, &mut store_touched);
            self.add_name(
                blocks,
                slot,
                block.seq_hash,
                Arc::clone(&child),
                newly_held,
                tier,
            );
            current = child;
        }
        Outcome::Applied {
            unknown_removals: 0,
        }
    }

    fn remove_name(&self, blocks: &mut WorkerState, slot: u32, name: u64) -> bool {
        match blocks.names.remove(&name) {
            Some(node) => {
                blocks.tiers.forget(name, &self.registry.tiers);
                self.registry.add_blocks(slot, -1);
                self.release(blocks, slot, &node);
                true
            }
            None => false,
        }
    }

    fn clear(&self, blocks: &mut WorkerState, slot: u32) {
        self.registry.add_blocks(slot, -(blocks.names.len() as i64));
        let mut nodes: Vec<Arc<Node>> = Vec::with_capacity(blocks.names.len());
        let mut seen = FxHashMap::default();
        for node in blocks.names.values() {
            if blocks.extra_names.is_empty() || seen.insert(node.key(), ()).is_none() {
                nodes.push(Arc::clone(node));
            }
        }
        blocks.tiers.clear(&self.registry.tiers);
        *blocks = WorkerState::default();
        // Deepest first, so that parents are unlinked right after their last child.
        nodes.sort_unstable_by_key(|n| std::cmp::Reverse(n.position));
        for node in &nodes {
            self.detach(node, slot);
        }
    }

    fn first_holders(&self, first_local: u64, out: &mut Vec<u32>) {
        out.clear();
        let child = self.root.state.read().children.get(first_local).cloned();
        if let Some(child) = child {
            out.extend_from_slice(child.state.read().holders.as_slice());
        }
    }

    fn search(&self, local_hashes: &[u64], out: &mut Vec<SlotDepth>) {
        with_scratch(&SCRATCH, |scratch| {
            self.search_with(local_hashes, scratch, out)
        });
    }

    /// The walk reads a slot's holders at positions up to its depth (the one it misses).
    fn read_reach(&self, depth: u32) -> u32 {
        depth
    }

    fn depth_of_slot(&self, slot: u32, local_hashes: &[u64]) -> usize {
        let mut node = Arc::clone(&self.root);
        for (depth, local) in local_hashes.iter().enumerate() {
            let Some(child) = node.state.read().children.get(*local).cloned() else {
                return depth;
            };
            if !Self::holds(&child, slot) {
                return depth;
            }
            node = child;
        }
        local_hashes.len()
    }

    fn worker_tiers(state: &WorkerState) -> &WorkerTiers {
        &state.tiers
    }

    fn worker_tiers_mut(state: &mut WorkerState) -> &mut WorkerTiers {
        &mut state.tiers
    }

    fn key_of(&self, state: &WorkerState, name: u64) -> Option<u64> {
        state.names.get(&name).map(Node::tier_key)
    }

    fn identity_of_name(&self, state: &WorkerState, name: u64) -> Option<u64> {
        // The path up to the root stays linked while the worker holds the node.
        let mut locals = Vec::new();
        let mut node = Arc::clone(state.names.get(&name)?);
        while node.position != u32::MAX {
            locals.push(node.local);
            node = node.parent.upgrade()?;
        }
        Some(
            locals
                .iter()
                .rev()
                .fold(IDENTITY_SEED, |prefix, &local| mix(prefix, local)),
        )
    }

    fn walk_held(
        &self,
        state: &WorkerState,
        slot: u32,
        local_hashes: &[u64],
        visit: &mut dyn FnMut(u64, u32),
    ) -> usize {
        // The worker's own nodes stay linked while it holds them (its lock is held here).
        let mut node = Arc::clone(&self.root);
        for (depth, local) in local_hashes.iter().enumerate() {
            let Some(child) = node.state.read().children.get(*local).cloned() else {
                return depth;
            };
            if !Self::holds(&child, slot) {
                return depth;
            }
            let extra = state.extra_names.get(&child.key()).copied().unwrap_or(0);
            visit(child.tier_key(), 1 + extra);
            node = child;
        }
        local_hashes.len()
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
impl RadixIndex {
    /// Nodes reachable from the root, the root excluded (for reclamation tests).
    pub(crate) fn node_count(&self) -> usize {
        let mut stack = vec![Arc::clone(&self.root)];
        let mut count = 0;
        while let Some(node) = stack.pop() {
            for child in node.state.read().children.values() {
                count += 1;
                stack.push(Arc::clone(child));
            }
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Backend;
    use crate::model::{Event, Worker};

    fn apply(index: &RadixIndex, event: Event) -> Outcome {
        index.apply(event.worker, &event.data)
    }

    fn chain(worker: Worker, len: u64, base: u64) -> Event {
        let blocks = (0..len).map(|p| Block::new(p % 3, base + p)).collect();
        Event::stored(worker, 0, None, blocks)
    }

    #[test]
    fn removing_everything_reclaims_every_node() {
        let index = RadixIndex::new();
        let (w0, w1) = (Worker::new(0, 0), Worker::new(1, 0));
        apply(&index, chain(w0, 10, 100));
        apply(&index, chain(w1, 6, 200));
        assert_eq!(index.node_count(), 10);
        // A hole keeps the nodes below it, but not the removed node's holder.
        apply(&index, Event::removed(w0, 0, vec![105]));
        assert_eq!(index.node_count(), 10);
        // Remove w0's blocks in a scrambled order: only w1's 6 nodes stay.
        let order = [109u64, 100, 107, 101, 108, 102, 106, 103, 104];
        apply(&index, Event::removed(w0, 0, order.to_vec()));
        assert_eq!(index.node_count(), 6);
        index.remove_worker(1);
        assert_eq!(index.node_count(), 0);
        assert_eq!(index.worker_blocks(), 0);
    }

    #[test]
    fn clear_and_replacement_reclaim_nodes() {
        let index = RadixIndex::new();
        let w = Worker::new(3, 1);
        apply(&index, chain(w, 5, 0));
        // Name 4 moves to a block under another prefix: the old leaf goes away.
        apply(
            &index,
            Event::stored(w, 0, None, vec![Block::new(9, 50), Block::new(1, 4)]),
        );
        assert_eq!(index.node_count(), 4 + 2);
        apply(&index, Event::cleared(w, 0));
        assert_eq!(index.node_count(), 0);
        assert_eq!(index.workers(), 1);
    }
}
