//! Snapshots of the positional backend: a worker's identities as snapshot nodes, and back.
//!
//! Kept apart from the index itself so that a change of [`WorkerState`]'s layout only has to
//! port these two functions. A held identity's node continues its parent's node when the
//! worker holds the parent; a parent it no longer holds but still knows the block of (local
//! hash and grandparent, itself held or at the root) becomes a nameless path node; any other
//! parent is known by identity and position only and becomes an anchor (docs/snapshots.md).

use super::{IdentityInfo, Placed, PositionalIndex, WorkerState};
use crate::identity::{mix, IDENTITY_SEED};
use crate::model::{fastest, Tier, TIERS};
use crate::snapshot::{DecodedWorker, ExportParent, Exporter};
use crate::Error;

impl PositionalIndex {
    /// See [`crate::index::worker_blocks::WorkerBlocks::export_state`].
    pub(super) fn export_snapshot(&self, state: &WorkerState, exporter: &mut Exporter) {
        let held = |identity: &u64| state.identities.get(identity).is_some_and(|i| i.names > 0);
        let mut paths: Vec<u64> = Vec::new();
        for (&identity, info) in &state.identities {
            if info.names == 0 {
                continue;
            }
            let parent = if info.position == 0 {
                ExportParent::Root
            } else if held(&info.parent) {
                ExportParent::Node(info.parent)
            } else if state
                .identities
                .get(&info.parent)
                .is_some_and(|p| is_known_path(state, info.parent, p))
            {
                paths.push(info.parent);
                ExportParent::Node(info.parent)
            } else {
                ExportParent::Anchor {
                    identity: info.parent,
                    position: info.position - 1,
                }
            };
            exporter.node(identity, parent, info.local);
        }
        paths.sort_unstable();
        paths.dedup();
        for identity in paths {
            let p = &state.identities[&identity];
            let parent = if p.position == 0 {
                ExportParent::Root
            } else {
                ExportParent::Node(p.parent)
            };
            exporter.node(identity, parent, p.local);
        }
        for (&name, &identity) in &state.names {
            exporter.name(identity, name, state.tiers.tiers_of(name));
        }
    }

    /// See [`crate::index::worker_blocks::WorkerBlocks::restore_state`].
    pub(super) fn restore_snapshot(
        &self,
        state: &mut WorkerState,
        slot: u32,
        section: &DecodedWorker,
    ) -> Result<(), Error> {
        state.names.reserve(section.names.len());
        state.identities.reserve(section.nodes.len());
        let activity = &self.registry.tiers;
        for node in &section.nodes {
            let names = &section.names[node.names.start as usize..node.names.end as usize];
            if names.is_empty() {
                continue;
            }
            let at = |identity: u64| state.identities.get(&identity).map(|i| i.position);
            if at(node.identity).is_some_and(|p| p != node.position)
                || (node.position > 0
                    && at(node.parent_identity).is_some_and(|p| p + 1 != node.position))
            {
                return Err(Error::Malformed("one block identity at two positions"));
            }
            let placed = Placed {
                position: node.position,
                local: node.local,
                identity: node.identity,
                parent: node.parent_identity,
            };
            for &(name, tiers) in names {
                // Every node records its own touch: readers overlapping a restore re-read.
                let mut touched = false;
                let first = Tier::ALL[fastest(tiers)];
                self.add_name(state, slot, name, placed, first, &mut touched);
                for tier in Tier::ALL[..TIERS].iter().filter(|t| tiers & t.bit() != 0) {
                    if *tier != first {
                        state
                            .tiers
                            .stored(name, node.identity, *tier, true, activity);
                    }
                }
            }
        }
        // A nameless node is a parent the worker knew the block of: keep that knowledge.
        for node in section.nodes.iter().filter(|n| n.names.is_empty()) {
            if let Some(info) = state.identities.get_mut(&node.identity) {
                if info.names == 0 {
                    info.local = node.local;
                    info.parent = node.parent_identity;
                }
            }
        }
        Ok(())
    }
}

/// Whether a parent the worker does not hold can be written as a path node: its recorded
/// block really is that identity, and it continues a held block or the root.
fn is_known_path(state: &WorkerState, identity: u64, info: &IdentityInfo) -> bool {
    if info.names > 0 || mix(info.parent, info.local) != identity {
        return false;
    }
    if info.position == 0 {
        return info.parent == IDENTITY_SEED;
    }
    state
        .identities
        .get(&info.parent)
        .is_some_and(|p| p.names > 0 && p.position + 1 == info.position)
}
