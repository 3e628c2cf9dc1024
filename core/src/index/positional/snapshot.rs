//! Snapshots of the positional backend: a worker's identities as snapshot nodes, and back.
//!
//! Kept apart from the index itself so that a change of [`WorkerState`]'s layout only has to
//! port these two functions. A held identity's node continues its parent's node when the
//! worker holds the parent; a parent at position 0 it no longer holds but still knows the
//! block of becomes a nameless path node under the root; any other parent is known by
//! identity and position only and becomes an anchor (docs/snapshots.md).

use super::{Placed, PositionalIndex, WorkerState};
use crate::identity::{mix, IDENTITY_SEED};
use crate::index::records::{Record, Records, NONE};
use crate::model::{fastest, Tier, TIERS};
use crate::snapshot::{DecodedWorker, ExportParent, Exporter};
use crate::Error;

impl PositionalIndex {
    /// See [`crate::index::worker_blocks::WorkerBlocks::export_state`].
    pub(super) fn export_snapshot(&self, state: &WorkerState, exporter: &mut Exporter) {
        let records = &state.records;
        let mut paths: Vec<(u64, u64)> = Vec::new();
        for record in records.held() {
            let parent = match records.parent_of(record) {
                None => ExportParent::Root,
                Some(p) if p.name_count() > 0 => ExportParent::Node(p.identity),
                Some(p) if is_known_path(p) => {
                    paths.push((p.identity, p.local));
                    ExportParent::Node(p.identity)
                }
                Some(p) => ExportParent::Anchor {
                    identity: p.identity,
                    position: record.position - 1,
                },
            };
            exporter.node(record.identity, parent, record.local);
        }
        paths.sort_unstable();
        paths.dedup();
        for (identity, local) in paths {
            exporter.node(identity, ExportParent::Root, local);
        }
        for (name, identity) in records.all_names() {
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
        state
            .records
            .reserve(section.nodes.len(), section.names.len());
        let activity = &self.registry.tiers;
        for node in &section.nodes {
            let names = &section.names[node.names.start as usize..node.names.end as usize];
            if names.is_empty() {
                continue;
            }
            let records = &state.records;
            if position_of(records, node.identity).is_some_and(|p| p != node.position)
                || (node.position > 0
                    && position_of(records, node.parent_identity)
                        .is_some_and(|p| p + 1 != node.position))
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
                self.add_name(state, slot, name, placed, NONE, first, &mut touched);
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
            state
                .records
                .set_local_if_not_held(node.identity, node.local);
        }
        Ok(())
    }
}

/// The position of the worker's record of `identity`, held or not.
fn position_of(records: &Records, identity: u64) -> Option<u32> {
    records
        .find_identity(identity)
        .map(|at| records.get(at).position)
}

/// Whether a parent the worker does not hold can be written as a path node: it is at position
/// 0 and its recorded block really is that identity (a not-held record keeps no parent link, so
/// deeper ones are anchors).
fn is_known_path(parent: &Record) -> bool {
    parent.position == 0 && mix(IDENTITY_SEED, parent.local) == parent.identity
}
