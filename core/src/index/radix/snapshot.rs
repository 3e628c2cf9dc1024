//! Snapshots of the radix backend: a worker's held nodes (and the nodes on the paths up to
//! them) as snapshot nodes, and back. Kept apart from the tree itself.

use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::{Node, NodeState, RadixIndex, WorkerState};
use crate::index::tiers::WorkerTiers;
use crate::snapshot::{DecodedWorker, ExportParent, Exporter};
use crate::Error;

impl RadixIndex {
    /// See [`crate::index::worker_blocks::WorkerBlocks::export_state`].
    pub(super) fn export_snapshot(&self, state: &WorkerState, exporter: &mut Exporter) {
        let mut seen: FxHashSet<usize> = FxHashSet::default();
        seen.reserve(state.names.len());
        for (&name, node) in &state.names {
            exporter.name(node.tier_key(), name, state.tiers.tiers_of(name));
            // The node, then every ancestor not written yet (held or not: the path).
            let mut node = Arc::clone(node);
            while seen.insert(node.key()) {
                let parent = node.parent.upgrade();
                let exported = match &parent {
                    Some(p) if !self.is_root(p) => ExportParent::Node(p.tier_key()),
                    _ => ExportParent::Root,
                };
                exporter.node(node.tier_key(), exported, node.local);
                match parent {
                    Some(p) if !self.is_root(&p) => node = p,
                    _ => break,
                }
            }
        }
    }

    /// See [`crate::index::worker_blocks::WorkerBlocks::restore_state`].
    pub(super) fn restore_snapshot(
        &self,
        state: &mut WorkerState,
        slot: u32,
        section: &DecodedWorker,
    ) -> Result<(), Error> {
        section.paths_only()?;
        state.names.reserve(section.names.len());
        let mut made: Vec<Arc<Node>> = Vec::with_capacity(section.nodes.len());
        for node in &section.nodes {
            let parent = match node.parent {
                Some(at) => Arc::clone(&made[at as usize]),
                None => Arc::clone(&self.root),
            };
            let names = &section.names[node.names.start as usize..node.names.end as usize];
            let (child, mut newly_held) = if names.is_empty() {
                (self.child_of(&parent, node.local), false)
            } else {
                // Every node records its own touch: readers overlapping a restore re-read.
                self.attach(&parent, node.local, slot, &mut false)
            };
            for &(name, tiers) in names {
                let first = WorkerTiers::restored_first(tiers);
                self.add_name(state, slot, name, Arc::clone(&child), newly_held, first);
                newly_held = false; // its other names are extra ones
                let activity = &self.registry.tiers;
                state
                    .tiers
                    .restored_rest(name, child.tier_key(), tiers, activity);
            }
            made.push(child);
        }
        Ok(())
    }

    /// The child of `parent` for `local`, created without holders if needed (a node on the
    /// path to a held one: it gets a child right after).
    fn child_of(&self, parent: &Arc<Node>, local: u64) -> Arc<Node> {
        let mut parent_state = parent.state.write();
        let position = if self.is_root(parent) {
            0
        } else {
            parent.position + 1
        };
        Arc::clone(parent_state.children.get_or_insert_with(local, || {
            Arc::new(Node {
                local,
                position,
                parent: Arc::downgrade(parent),
                state: parking_lot::RwLock::new(NodeState::default()),
            })
        }))
    }
}
