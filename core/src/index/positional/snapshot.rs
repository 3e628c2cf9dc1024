//! Snapshots of the positional backend: a worker's identities as snapshot nodes, and back.
//!
//! Kept apart from the index itself so that a change of [`WorkerState`]'s layout only has to
//! port these two functions. A held identity's node continues its parent's node when the
//! worker holds the parent; a parent it no longer holds but still knows the block of becomes
//! a nameless path node (under the root, or under its own parent when the worker holds that:
//! a single hole); any other parent is known by identity and position only and becomes an
//! anchor (docs/snapshots.md).

use super::{Placed, PositionalIndex, WorkerState};
use crate::identity::{mix, IDENTITY_SEED};
use crate::index::records::{Record, Records, NONE};
use crate::index::tiers::WorkerTiers;
use crate::snapshot::{DecodedWorker, ExportParent, Exporter};
use crate::Error;

impl PositionalIndex {
    /// See [`crate::index::worker_blocks::WorkerBlocks::export_state`].
    pub(super) fn export_snapshot(&self, state: &WorkerState, exporter: &mut Exporter) {
        let records = &state.records;
        let mut paths: Vec<(u64, ExportParent, u64)> = Vec::new();
        for record in records.held() {
            let parent = match records.parent_of(record) {
                None => ExportParent::Root,
                Some(p) if p.name_count() > 0 => ExportParent::Node(p.identity),
                Some(p) => match path_parent(records, p) {
                    Some(above) => {
                        paths.push((p.identity, above, p.local));
                        ExportParent::Node(p.identity)
                    }
                    None => ExportParent::Anchor {
                        identity: p.identity,
                        position: record.position - 1,
                    },
                },
            };
            exporter.node(record.identity, parent, record.local);
        }
        paths.sort_unstable_by_key(|&(identity, _, _)| identity);
        paths.dedup_by_key(|&mut (identity, _, _)| identity);
        for (identity, above, local) in paths {
            exporter.node(identity, above, local);
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
                let first = WorkerTiers::restored_first(tiers);
                self.add_name(state, slot, name, placed, NONE, first, &mut touched);
                state
                    .tiers
                    .restored_rest(name, node.identity, tiers, activity);
            }
        }
        // A nameless node is a parent the worker knew the block of: keep that knowledge.
        for node in section.nodes.iter().filter(|n| n.names.is_empty()) {
            let parent = (node.position > 0).then_some(node.parent_identity);
            state
                .records
                .restore_path(node.identity, node.local, parent);
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

/// Where a parent the worker does not hold can be written as a nameless path node: under the
/// root (at position 0, its recorded block really being that identity) or under its own
/// parent when the worker holds that one (a single hole). `None`: it becomes an anchor.
fn path_parent(records: &Records, parent: &Record) -> Option<ExportParent> {
    if parent.position == 0 {
        return (mix(IDENTITY_SEED, parent.local) == parent.identity).then_some(ExportParent::Root);
    }
    records
        .known_parent(parent)
        .filter(|above| above.name_count() > 0)
        .map(|above| ExportParent::Node(above.identity))
}
