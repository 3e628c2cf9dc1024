//! Snapshots of the runs backend: a worker's held blocks (and the blocks on the paths up to
//! them) as snapshot nodes, and back. Kept apart from the runs themselves.

use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::run::Spot;
use super::worker::WorkerState;
use super::RunsIndex;
use crate::index::tiers::WorkerTiers;
use crate::snapshot::{DecodedWorker, ExportParent, Exporter};
use crate::Error;

impl RunsIndex {
    /// See [`crate::index::worker_blocks::WorkerBlocks::export_state`].
    pub(super) fn export_snapshot(&self, state: &WorkerState, exporter: &mut Exporter) {
        let mut seen: FxHashSet<u64> = FxHashSet::default();
        seen.reserve(state.names.len());
        for (name, &key) in state.names.iter() {
            exporter.name(key, name, state.tiers.tiers_of(name));
            // The block, then every block above it not written yet (held or not: the path).
            let mut at = state.spot(key);
            while seen.insert(at.key()) {
                let local = at.run.state.read().locals[at.offset as usize];
                let parent = if at.offset > 0 {
                    Some(Spot {
                        run: Arc::clone(&at.run),
                        offset: at.offset - 1,
                    })
                } else {
                    // The worker's blocks keep their runs' parents linked.
                    at.run
                        .parent
                        .upgrade()
                        .filter(|p| !p.is_root())
                        .map(|p| Spot {
                            run: p,
                            offset: at.run.hang - 1,
                        })
                };
                let exported = match &parent {
                    Some(p) => ExportParent::Node(p.key()),
                    None => ExportParent::Root,
                };
                exporter.node(at.key(), exported, local);
                match parent {
                    Some(p) => at = p,
                    None => break,
                }
            }
        }
    }

    /// See [`crate::index::worker_blocks::WorkerBlocks::restore_state`]. Every block of the
    /// section is attached (the ones without names too, so the path stays linked while the
    /// rest is attached); the ones without names are let go at the end.
    pub(super) fn restore_snapshot(
        &self,
        state: &mut WorkerState,
        slot: u32,
        section: &DecodedWorker,
    ) -> Result<(), Error> {
        section.paths_only()?;
        state.names.reserve(section.names.len());
        let mut made: Vec<Spot> = Vec::with_capacity(section.nodes.len());
        let mut path_only: Vec<Spot> = Vec::new();
        for node in &section.nodes {
            let (run, hang) = match node.parent {
                Some(at) => {
                    let parent = &made[at as usize];
                    (Arc::clone(&parent.run), parent.offset + 1)
                }
                None => (Arc::clone(&self.root), 0),
            };
            // Every block records its own touch: readers overlapping a restore re-read.
            let (spot, mut newly) = self.attach_spot(&run, hang, node.local, slot, &mut false);
            let names = &section.names[node.names.start as usize..node.names.end as usize];
            if names.is_empty() && newly {
                path_only.push(spot.clone());
            }
            for &(name, tiers) in names {
                let first = WorkerTiers::restored_first(tiers);
                state.count_names(&spot.run, 1);
                let new_name = self.add_name(
                    state,
                    slot,
                    name,
                    &spot.run,
                    spot.offset,
                    newly,
                    first,
                    None,
                );
                self.registry.add_blocks(slot, i64::from(new_name));
                newly = false; // its other names are extra ones
                let activity = &self.registry.tiers;
                state.tiers.restored_rest(name, spot.key(), tiers, activity);
            }
            made.push(spot);
        }
        let named: FxHashSet<u64> = state.names.values().copied().collect();
        // Deepest first, so each run is reclaimed in one pass once nothing below needs it.
        path_only.reverse();
        for spot in path_only.iter().filter(|s| !named.contains(&s.key())) {
            self.detach(&spot.run, spot.offset, slot);
        }
        Ok(())
    }
}
