//! What the positional and radix backends share: per-worker state kept in a [`Registry`], the
//! dispatch of every event onto three operations (store a chain, drop one name, clear), and
//! the read protocol that keeps answers exact while workers change.
//!
//! A type implementing [`WorkerBlocks`] is a [`Backend`]: the blanket implementation below
//! applies events, removes workers and answers queries the same way for every backend.
//!
//! # Reads during writes
//! A backend's search reads shared structures (levels, nodes) that writers change under
//! their own locks, while a worker's events may be half applied and slots are recycled. To
//! answer exactly anyway, a query runs in four steps:
//! 1. read the holders of the query's first block: the workers that may match at all;
//! 2. note each one's slot version ([`Registry::version`]);
//! 3. run the backend's search, which reads the first block's holders again and reports a
//!    depth per slot;
//! 4. keep a slot's depth if its version is even and unchanged since step 2: then the search
//!    saw one stable state of that one worker (see the registry's slot versions), and the
//!    depth is exact for it. Keep it too if the changes since step 2 (however many) have
//!    touched no block of the query at a position the search could read about that slot
//!    ([`WorkerBlocks::read_reach`], at most the query's last position): writers record each
//!    block they are about to touch (a store: its first new block, which covers the chain
//!    below it), so every read about that worker saw what it held throughout, and the depth
//!    is its depth in every state it passed through. This is the common case under ingest:
//!    other workers' and other chains' blocks change. Any other slot of step 2 is read again
//!    on its own ([`WorkerBlocks::depth_of_slot`], validated the same two ways, the first
//!    time without waiting for a change in progress, then each time the slot's version has
//!    moved on: [`Registry::version_after`], for which the writer ends a change of several
//!    events after the one in progress), a few times, and its current worker
//!    reported; if it keeps changing, that worker's depth is computed from its own state
//!    under its lock ([`WorkerBlocks::depth_now`]). A slot found free means its step-1
//!    worker was removed meanwhile (a removal counts as touching every block). Readers
//!    never block writers unless a worker changes under every one of those re-reads.
//!
//! Most reads skip those steps. The registry's change log counts changes as they begin and
//! end and keeps the slots of the latest ones. A read that starts while no change is in
//! progress, or while the log names each one that is, searches at once; if no change was in
//! progress and none began meanwhile, that search saw one stable state. Otherwise, if the
//! log names the slots of the changes in progress at the start and of those begun since (a
//! few, among its latest entries), what the search found for every other slot stands, since
//! a change moves only its own worker's blocks. The log names each of those changes with the
//! slot version it gives, so for a named slot the search found, the reader knows the first
//! change it met: if that change and the slot's later ones touched no block of the query
//! within the search's reach (as in step 4), what the search found stands too; otherwise the
//! slot is read again on its own as in step 4. A named slot the search did not find held no
//! prefix of the query when the search read it. When the log cannot name them, the read
//! takes the four steps.
//!
//! So each worker is reported with its exact depth at some instant during the call, a worker
//! left out held no prefix of the query at some instant during the call (at step 1, step 3,
//! or when it was removed), and no worker is reported twice.

use super::change_log::Named;
use super::registry::{Entry, Registry, SlotInfo};
use super::tiers::{TierDepths, TierRemoval, WorkerTiers};
use super::Backend;
use crate::model::{
    sort_matches, sort_tiered_matches, Block, EventData, Match, Outcome, RejectReason, Tier,
    TieredMatch, Worker, TIERS,
};
use crate::scratch::with_scratch;
use crate::snapshot::{DecodedWorker, Exported, Exporter, SnapshotBackend, SnapshotHooks};
use crate::Error;

/// How many events of a batch ahead of the one being applied [`WorkerBlocks::warm`] reads.
const WARM_AHEAD: usize = 6;

/// How many names of a removal ahead of the one being dropped [`WorkerBlocks::warm_name`]
/// warms.
const NAMES_AHEAD: usize = 8;

/// A slot and the depth a search found for it.
pub(crate) type SlotDepth = (u32, u32);

/// A backend whose writes are per-worker operations on its own structure.
pub(crate) trait WorkerBlocks: Send + Sync + 'static {
    /// One worker's record of its blocks.
    type State: Default + Send + 'static;

    /// The workers and their states.
    fn registry(&self) -> &Registry<Self::State>;

    /// Stores a chain of blocks on `tier` after `parent` (a name the worker holds) or at
    /// position 0, recording tiers in the state's [`WorkerTiers`] (a name that already held
    /// its block gains the tier; a new or renamed one is on `tier` alone).
    fn store(
        &self,
        state: &mut Self::State,
        slot: u32,
        parent: Option<u64>,
        blocks: &[Block],
        tier: Tier,
    ) -> Outcome;

    /// Drops one name (and its tier record); false if the worker did not hold it.
    fn remove_name(&self, state: &mut Self::State, slot: u32, name: u64) -> bool;

    /// Drops every block of the worker (and its tier records).
    fn clear(&self, state: &mut Self::State, slot: u32);

    /// The worker's tier records.
    fn worker_tiers(state: &Self::State) -> &WorkerTiers;

    /// The worker's tier records, to change.
    fn worker_tiers_mut(state: &mut Self::State) -> &mut WorkerTiers;

    /// The key (see [`super::tiers`]) of the block a held name names.
    fn key_of(&self, state: &Self::State, name: u64) -> Option<u64>;

    /// The prefix identity of the block a held name names (under the worker's lock).
    fn identity_of_name(&self, state: &Self::State, name: u64) -> Option<u64>;

    /// Walks the query's blocks in the worker's state (under its lock; `slot` is the
    /// worker's), calling `visit` with the key and the number of names of each held one, up
    /// to the first it does not hold; returns how many it holds.
    fn walk_held(
        &self,
        state: &Self::State,
        slot: u32,
        local_hashes: &[u64],
        visit: &mut dyn FnMut(u64, u32),
    ) -> usize;

    /// Writes into `out` (cleared first) the sorted slots holding the query's first block.
    fn first_holders(&self, first_local: u64, out: &mut Vec<u32>);

    /// Appends the depth of every slot holding the query's first block to `out` (unsorted),
    /// reading the shared structures without the workers' locks.
    fn search(&self, local_hashes: &[u64], out: &mut Vec<SlotDepth>);

    /// The highest position a search may have read about a slot it found at `depth` (so a
    /// change that touched only positions above it cannot have changed that answer).
    fn read_reach(&self, depth: u32) -> u32;

    /// The depth of the query for one slot, read from the shared structures without locks
    /// (validated by the caller against the slot's version).
    fn depth_of_slot(&self, slot: u32, local_hashes: &[u64]) -> usize;

    /// The depth of the query in one worker's state (its slot `slot`), read under that
    /// worker's lock.
    fn depth_now(&self, state: &Self::State, slot: u32, local_hashes: &[u64]) -> usize {
        self.walk_held(state, slot, local_hashes, &mut |_, _| {})
    }

    /// Prefetches (or reads, without changing anything) what applying `data` to the worker
    /// will read first, a few events ahead of applying it: the memory of several queued
    /// events is then fetched in parallel instead of one miss after another. By default
    /// nothing.
    fn warm(&self, _state: &Self::State, _data: &EventData) {}

    /// Like [`WorkerBlocks::warm`], for one name a removal [`NAMES_AHEAD`] names on will
    /// drop (the first of an event's are the event's to warm). By default nothing.
    fn warm_name(&self, _state: &Self::State, _name: u64) {}

    /// Runs after every change of a worker, still under its lock and inside its version
    /// change; by default nothing.
    fn after_change(&self, _state: &Self::State, _info: &SlotInfo) {}

    /// Snapshots: adds the worker's held blocks (and the blocks on the paths up to them that
    /// the backend knows) to `exporter` as nodes with their names and tiers. Runs under the
    /// worker's lock.
    fn export_state(&self, state: &Self::State, exporter: &mut Exporter);

    /// Snapshots: gives a new, empty worker the blocks of a decoded section, inside a change
    /// of its slot (so with the same effects on the shared structures as the events that
    /// built them). An error leaves a state that `clear` can still drop.
    fn restore_state(
        &self,
        state: &mut Self::State,
        slot: u32,
        section: &DecodedWorker,
    ) -> Result<(), Error>;
}

impl<B: WorkerBlocks> Backend for B {
    fn apply(&self, worker: Worker, data: &EventData) -> Outcome {
        let mut outcome = Outcome::Rejected(RejectReason::ParentNotFound);
        self.apply_batch(worker, None, std::slice::from_ref(data), &mut |o| {
            outcome = o;
        });
        outcome
    }

    fn apply_batch(
        &self,
        worker: Worker,
        offset: Option<u64>,
        events: &[EventData],
        outcome: &mut dyn FnMut(Outcome),
    ) -> bool {
        // Only a Stored with a parent (and blocks) needs the worker to exist already; a
        // batch at an offset makes it known (its watermark is part of its state).
        let create = offset.is_some() || events.iter().any(creates_worker);
        let registry = self.registry();
        let applied = registry.with_worker(worker, create, |entry: &mut Entry<B::State>| {
            if offset.is_some_and(|offset| offset <= entry.watermark) {
                return false;
            }
            // The first events' lines are asked for before the change opens, so that their
            // misses overlap the opening's own work.
            for data in events.iter().take(WARM_AHEAD) {
                self.warm(&entry.state, data);
            }
            // One event a step: a reader waiting for this worker waits for one event, except
            // in a batch at an offset, which readers see whole or not at all.
            registry.change_in_steps(
                entry,
                events.len(),
                offset.is_none(),
                |state, slot, at| {
                    if let Some(ahead) = events.get(at + WARM_AHEAD) {
                        self.warm(state, ahead);
                    }
                    outcome(self.apply_one(state, slot, &events[at]));
                },
                |state, info| self.after_change(state, info),
            );
            if let Some(offset) = offset {
                entry.watermark = offset;
            }
            true
        });
        match applied {
            Some(applied) => applied,
            None => {
                // An unknown worker holds no parent: every event here is such a Stored.
                for _ in events {
                    outcome(Outcome::Rejected(RejectReason::ParentNotFound));
                }
                true
            }
        }
    }

    fn watermark(&self, worker: Worker) -> Option<u64> {
        self.registry()
            .with_worker(worker, false, |entry| entry.watermark)
            .filter(|&w| w > 0)
    }

    fn snapshots(&self) -> Option<SnapshotHooks<'_>> {
        Some(SnapshotHooks(self))
    }

    fn identity_of(&self, worker: Worker, name: u64) -> Option<u64> {
        self.registry()
            .with_worker(worker, false, |entry| {
                self.identity_of_name(&entry.state, name)
            })
            .flatten()
    }

    fn remove_worker(&self, worker_id: u64) {
        for worker in self.registry().workers_with_id(worker_id) {
            self.remove_worker_dp_rank(worker);
        }
    }

    fn remove_worker_dp_rank(&self, worker: Worker) {
        self.registry().remove(worker, |entry| {
            let touches_records = !Self::worker_tiers(&entry.state).is_empty();
            self.registry()
                .tiers
                .announce(touches_records, || self.clear(&mut entry.state, entry.slot))
        });
    }

    fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>) {
        out.clear();
        let Some(&first_local) = local_hashes.first() else {
            return;
        };
        with_scratch(&READ_SCRATCH, |s: &mut ReadScratch| {
            let registry = self.registry();
            // No change in progress, or the log names those that are: search, and if no
            // change began meanwhile and none was in progress, that was one stable state;
            // otherwise, if the log names the changes' few slots, what was found for the
            // others stands, and only those are read again (the module docs' four steps are
            // for reads the log cannot help).
            s.changed.clear();
            registry.changes.prefetch_start(s.last_begun);
            let start = registry.changes.start(&mut s.changed);
            if let Some(start) = start {
                s.last_begun = start.begun;
                // The slots of the changes in progress are checked after the search if it
                // finds them: their lines arrive during it.
                for named in &s.changed {
                    registry.prefetch_changes(named.slot);
                }
            }
            #[cfg(test)]
            let start = start.filter(|_| tests::quiet_path_allowed());
            if let Some(start) = start {
                s.found.clear();
                #[cfg(test)]
                tests::at_step(tests::ReadStep::Quiet);
                self.search(local_hashes, &mut s.found);
                registry.changes.prefetch_check(start);
                // Whose each slot is, read before the check: read after it, a slot whose
                // worker was removed meanwhile and that went to another worker would credit
                // the newcomer with the old worker's depth.
                for &(slot, depth) in &s.found {
                    push_match(out, registry.worker_at(slot), depth as usize);
                }
                let now = registry.changes.begun_now();
                if now == start.begun && s.changed.is_empty() {
                    #[cfg(test)]
                    tests::at_step(tests::ReadStep::QuietChecked);
                    sort_matches(out);
                    return;
                }
                if registry.changes.changes_begun(start, now, &mut s.changed) {
                    // Each slot once, with the version of its first change met.
                    s.changed.sort_unstable();
                    s.changed.dedup_by_key(|named| named.slot);
                    if s.changed.len() <= READ_AGAIN_SLOTS && out.len() == s.found.len() {
                        #[cfg(test)]
                        tests::at_step(tests::ReadStep::ChangesNamed);
                        self.check_named(local_hashes, s, out);
                        sort_matches(out);
                        return;
                    }
                }
                out.clear();
            }
            // Steps 1 and 2 (see the module docs).
            self.first_holders(first_local, &mut s.slots);
            if s.slots.is_empty() {
                return;
            }
            s.begin_query();
            for at in 0..s.slots.len() {
                let slot = s.slots[at];
                if let Some(version) = registry.version(slot) {
                    s.note(slot, version);
                }
            }
            #[cfg(test)]
            tests::at_step(tests::ReadStep::Snapshotted);
            // Step 3.
            s.found.clear();
            self.search(local_hashes, &mut s.found);
            #[cfg(test)]
            tests::at_step(tests::ReadStep::Searched);
            // Step 4.
            s.retry.clear();
            for at in 0..s.found.len() {
                let (slot, depth) = s.found[at];
                let Some(version) = s.noted(slot) else {
                    continue; // not a holder of the first block at step 1
                };
                let reach = self.search_reach(local_hashes, depth);
                let owner = registry
                    .owner_if_unchanged(slot, version)
                    .or_else(|| registry.owner_if_untouched(slot, version, local_hashes, reach));
                match owner {
                    Some(worker) => push_match(out, worker, depth as usize),
                    None => s.retry.push(slot),
                }
            }
            if s.retry.is_empty() {
                sort_matches(out);
                return;
            }
            for &slot in &s.retry {
                self.read_again(slot, local_hashes, out);
            }
            sort_matches(out);
        });
    }

    /// The plain lookup, then each reported worker's tiers read under its lock (its depth
    /// and tier depths at one instant, during the call). When no block of any worker was off
    /// the device alone during the whole call, every tier depth is the depth and no lock is
    /// taken.
    fn find_matches_tiered_into(&self, local_hashes: &[u64], out: &mut Vec<TieredMatch>) {
        out.clear();
        with_scratch(&PLAIN_MATCHES, |plain: &mut Vec<Match>| {
            let registry = self.registry();
            let quiet = registry.tiers.quiet();
            self.find_matches_into(local_hashes, plain);
            if quiet.is_some_and(|quiet| registry.tiers.still_quiet(quiet)) {
                out.extend(plain.iter().map(|m| TieredMatch {
                    worker_id: m.worker_id,
                    dp_rank: m.dp_rank,
                    depth: m.depth,
                    tier_depths: [m.depth; TIERS],
                }));
                return;
            }
            for m in plain.iter() {
                let tier_depths = registry.with_worker(m.worker(), false, |entry| {
                    let tiers = Self::worker_tiers(&entry.state);
                    let mut depths = TierDepths::default();
                    self.walk_held(&entry.state, entry.slot, local_hashes, &mut |key, names| {
                        depths.push(tiers.key_tiers(key, names))
                    });
                    depths.get()
                });
                // A worker removed since the plain lookup had depth 0 at that instant.
                if let Some(tier_depths) = tier_depths.filter(|d| d[TIERS - 1] > 0) {
                    out.push(TieredMatch {
                        worker_id: m.worker_id,
                        dp_rank: m.dp_rank,
                        depth: tier_depths[TIERS - 1],
                        tier_depths,
                    });
                }
            }
            sort_tiered_matches(out);
        });
    }

    fn workers(&self) -> u64 {
        self.registry().len()
    }

    fn worker_blocks(&self) -> u64 {
        self.registry().worker_blocks()
    }
}

/// Whether an event makes an unknown worker known (all but a Stored with a parent and blocks).
fn creates_worker(data: &EventData) -> bool {
    !matches!(data, EventData::Stored { parent: Some(_), blocks, .. } if !blocks.is_empty())
}

/// One event on a worker's state, inside a change of its slot.
trait ApplyOne: WorkerBlocks + Sized {
    /// One event, announced to tiered lookups when it touches tier records (see
    /// [`super::tiers::TierActivity::announce`]).
    fn apply_one(&self, state: &mut Self::State, slot: u32, data: &EventData) -> Outcome {
        let touches_records = !Self::worker_tiers(state).is_empty()
            || matches!(data, EventData::Stored { tier, .. } if *tier != Tier::Device);
        self.registry()
            .tiers
            .announce(touches_records, || self.apply_untiered(state, slot, data))
    }

    /// One event, without the announcement.
    fn apply_untiered(&self, state: &mut Self::State, slot: u32, data: &EventData) -> Outcome {
        match data {
            // A Stored with no blocks is a no-op, whatever its parent.
            EventData::Stored { blocks, .. } if blocks.is_empty() => Outcome::Applied {
                unknown_removals: 0,
            },
            EventData::Stored {
                parent,
                blocks,
                tier,
            } => self.store(state, slot, *parent, blocks, *tier),
            EventData::Removed { seq_hashes, tier } => {
                let unknown = seq_hashes
                    .iter()
                    .enumerate()
                    .filter(|&(at, &name)| {
                        if let Some(&ahead) = seq_hashes.get(at + NAMES_AHEAD) {
                            self.warm_name(state, ahead);
                        }
                        !self.remove_one(state, slot, name, *tier)
                    })
                    .count();
                Outcome::Applied {
                    unknown_removals: unknown as u64,
                }
            }
            EventData::Cleared => {
                self.clear(state, slot);
                Outcome::Applied {
                    unknown_removals: 0,
                }
            }
        }
    }
}

impl<B: WorkerBlocks> ApplyOne for B {}

impl<B: WorkerBlocks> SnapshotBackend for B {
    fn known_workers(&self) -> u64 {
        self.registry().len()
    }

    fn all_workers(&self) -> Vec<Worker> {
        self.registry().all_workers()
    }

    fn export_worker(&self, worker: Worker, exporter: &mut Exporter) -> Option<Exported> {
        self.registry().with_worker(worker, false, |entry| {
            self.export_state(&entry.state, exporter);
            Exported {
                watermark: entry.watermark,
            }
        })
    }

    fn restore_worker(
        &self,
        worker: Worker,
        watermark: u64,
        section: &DecodedWorker,
    ) -> Result<(), Error> {
        let registry = self.registry();
        if registry.contains(worker) {
            return Err(Error::Malformed("a worker appears twice"));
        }
        let tiered = section
            .names
            .iter()
            .any(|&(_, tiers)| tiers != Tier::Device.bit());
        registry
            .with_worker(worker, true, |entry| {
                entry.watermark = watermark;
                registry.change(entry, |state, slot| {
                    let result = registry
                        .tiers
                        .announce(tiered, || self.restore_state(state, slot, section));
                    if let Some(info) = registry.slot_info(slot) {
                        self.after_change(state, info);
                    }
                    result
                })
            })
            .unwrap_or(Err(Error::Malformed("a worker removed while restored")))
    }

    fn forget_worker(&self, worker: Worker) {
        self.remove_worker_dp_rank(worker);
    }
}

/// Removals of one name, with or without a tier.
trait RemoveOne: WorkerBlocks {
    /// Drops `name`, or only its `tier` (the name stays held while it is on another tier);
    /// false if the worker does not hold it (on that tier).
    fn remove_one(
        &self,
        state: &mut Self::State,
        slot: u32,
        name: u64,
        tier: Option<Tier>,
    ) -> bool {
        let Some(tier) = tier else {
            return self.remove_name(state, slot, name);
        };
        let Some(key) = self.key_of(state, name) else {
            return false;
        };
        let activity = &self.registry().tiers;
        match Self::worker_tiers_mut(state).remove_tier(name, key, tier, activity) {
            TierRemoval::NotOnTier => false,
            TierRemoval::Kept => true,
            TierRemoval::Last => self.remove_name(state, slot, name),
        }
    }
}

impl<B: WorkerBlocks> RemoveOne for B {}

/// The slots that changed during a search: which of them keep what it found, and the depth
/// of the others at some instant now (step 4).
trait ReadAgain {
    fn read_again(&self, slot: u32, local_hashes: &[u64], out: &mut Vec<Match>);

    /// The highest position of the query (`local_hashes`, not empty) a search may have read
    /// about a slot it found at `depth`: [`WorkerBlocks::read_reach`], and no search reads
    /// past the query's last position.
    fn search_reach(&self, local_hashes: &[u64], depth: u32) -> u32;

    /// The named path's last step: of the slots whose changes a search met (`s.changed`,
    /// each with the version of its first such change), those the changes touched no block
    /// of the query within the search's reach keep what the search found; the others are
    /// read again. A named slot the search did not find needs nothing: the search read it
    /// holding no prefix of the query, at an instant during the call.
    fn check_named(&self, local_hashes: &[u64], s: &mut ReadScratch, out: &mut Vec<Match>);
}

/// The most slots the change log may name for a read to keep its search and read those
/// slots again one by one (more, and the read starts over with the versions of every holder
/// noted first).
const READ_AGAIN_SLOTS: usize = 8;

/// Lock-free reads of one slot before falling back to its worker's lock.
const REREADS: usize = 4;

impl<B: WorkerBlocks> ReadAgain for B {
    fn search_reach(&self, local_hashes: &[u64], depth: u32) -> u32 {
        let last_position = (local_hashes.len() - 1).min(u32::MAX as usize) as u32;
        self.read_reach(depth).min(last_position)
    }

    fn check_named(&self, local_hashes: &[u64], s: &mut ReadScratch, out: &mut Vec<Match>) {
        let registry = self.registry();
        for named in &s.changed {
            registry.prefetch_changes(named.slot);
        }
        s.retry.clear();
        // `found` and `out` are in step (every depth found is above 0). The named slots are a
        // few; each is looked for among those found, and the answer keeps every other one
        // as it is. What is read again leaves `out` (its order does not matter: it is sorted
        // afterwards), from the last index down so that the others stay where they are.
        s.spoiled.clear();
        for named in &s.changed {
            let Some(at) = s.found.iter().position(|&(slot, _)| slot == named.slot) else {
                continue; // not found: it held no prefix of the query when the search read it
            };
            let (slot, depth) = s.found[at];
            let reach = self.search_reach(local_hashes, depth);
            if registry
                .owner_if_untouched(slot, named.version, local_hashes, reach)
                .is_none()
            {
                s.retry.push(slot);
                s.spoiled.push(at);
            }
        }
        s.spoiled.sort_unstable();
        for &at in s.spoiled.iter().rev() {
            out.swap_remove(at);
        }
        for &slot in &s.retry {
            self.read_again(slot, local_hashes, out);
        }
    }

    /// Reports the slot's current worker with its exact depth now. If the slot is free, the
    /// worker that held it at step 1 has been removed since (depth 0 at that instant), and
    /// nothing is reported; if it went to another worker, the same holds for the old one and
    /// the new one is reported like any other. A worker already in `out` is not added again.
    fn read_again(&self, slot: u32, local_hashes: &[u64], out: &mut Vec<Match>) {
        #[cfg(test)]
        tests::at_step(tests::ReadStep::ReadAgain);
        let registry = self.registry();
        // First without waiting: a change in progress that has not touched the positions
        // this read reaches (up to the depth found, where it misses) leaves them as they were.
        // While changes keep spoiling the read, again each time the version moves on (the
        // writer ends its change after the event in progress for a reader that waits).
        let Some(mut version) = registry.version_unless_free(slot) else {
            return;
        };
        for _ in 0..REREADS {
            let depth = self.depth_of_slot(slot, local_hashes);
            let reach = depth.min(u32::MAX as usize) as u32;
            if let Some(worker) = registry
                .owner_if_unchanged(slot, version)
                .or_else(|| registry.owner_if_untouched(slot, version, local_hashes, reach))
            {
                push_unique(out, worker, depth);
                return;
            }
            let Some(next) = registry.version_after(slot, version) else {
                return;
            };
            version = next;
        }
        // The worker keeps changing: read its own state under its lock.
        let Some(owner) = registry.stable_owner(slot) else {
            return;
        };
        let depth = registry.with_worker(owner.worker, false, |entry| {
            self.depth_now(&entry.state, entry.slot, local_hashes)
        });
        push_unique(out, owner.worker, depth.unwrap_or(0));
    }
}

/// Appends a worker's match unless its depth is 0 or the worker is in `out` already.
fn push_unique(out: &mut Vec<Match>, worker: Worker, depth: usize) {
    if !out.iter().any(|m| m.worker() == worker) {
        push_match(out, worker, depth);
    }
}

/// Per-thread buffers of the read protocol.
#[derive(Default)]
struct ReadScratch {
    slots: Vec<u32>,
    /// The changes in progress when a search started or begun during it.
    changed: Vec<Named>,
    /// Indexed by slot: `(query stamp, version)` noted at step 2 of the query with that stamp.
    noted: Vec<(u32, u64)>,
    stamp: u32,
    found: Vec<SlotDepth>,
    retry: Vec<u32>,
    /// Indices into `found` (and the answer) of the slots read again.
    spoiled: Vec<usize>,
    /// The changes begun when this thread's latest read started (see
    /// [`super::change_log::ChangeLog::prefetch_start`]).
    last_begun: u64,
}

impl ReadScratch {
    /// Starts a query: versions noted by earlier queries stop counting.
    fn begin_query(&mut self) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.noted.iter_mut().for_each(|n| *n = (0, 0));
            self.stamp = 1;
        }
    }

    fn note(&mut self, slot: u32, version: u64) {
        let at = slot as usize;
        if at >= self.noted.len() {
            self.noted.resize(at + 1, (0, 0));
        }
        self.noted[at] = (self.stamp, version);
    }

    fn noted(&self, slot: u32) -> Option<u64> {
        match self.noted.get(slot as usize) {
            Some(&(stamp, version)) if stamp == self.stamp => Some(version),
            _ => None,
        }
    }
}

thread_local! {
    static READ_SCRATCH: std::cell::RefCell<ReadScratch> =
        std::cell::RefCell::new(ReadScratch::default());
    /// The plain answer a tiered lookup starts from.
    static PLAIN_MATCHES: std::cell::RefCell<Vec<Match>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Appends a worker's match unless its depth is 0.
fn push_match(out: &mut Vec<Match>, worker: Worker, depth: usize) {
    if depth > 0 {
        out.push(Match {
            worker_id: worker.worker_id,
            dp_rank: worker.dp_rank,
            depth: depth.min(u32::MAX as usize) as u32,
        });
    }
}

/// Appends a slot's depth unless it is 0.
#[inline]
pub(crate) fn push_depth(out: &mut Vec<SlotDepth>, slot: u32, depth: usize) {
    if depth > 0 {
        out.push((slot, depth.min(u32::MAX as usize) as u32));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! Deterministic interleavings: writes run on the reader's own thread between the steps
    //! of its read, at exactly the points where a concurrent writer could get in.

    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::Arc;

    use super::*;
    use crate::index::positional::PositionalIndex;
    use crate::index::radix::RadixIndex;
    use crate::index::runs::RunsIndex;
    use crate::model::Event;

    /// The points of a read where the hook runs.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum ReadStep {
        /// In the path for reads that start with no change in progress, or with the ones in
        /// progress named by the change log, before the search.
        Quiet,
        /// In that path, once the search is known to have met no change (before returning).
        QuietChecked,
        /// In that path, once the changes the search met (in progress at its start or begun
        /// since) are known by their slots, before those slots are read again.
        ChangesNamed,
        /// A slot about to be read again on its own (in either path).
        ReadAgain,
        Snapshotted,
        Searched,
    }

    type Hook = Box<dyn FnMut(ReadStep)>;

    thread_local! {
        static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
        /// The step the installed hook writes at.
        static HOOK_STEP: std::cell::Cell<Option<ReadStep>> = const { std::cell::Cell::new(None) };
    }

    /// Reads take the quiet path unless a test writes at a step of the other one.
    pub(crate) fn quiet_path_allowed() -> bool {
        matches!(
            HOOK_STEP.with(|s| s.get()),
            None | Some(
                ReadStep::Quiet
                    | ReadStep::QuietChecked
                    | ReadStep::ChangesNamed
                    | ReadStep::ReadAgain
            )
        )
    }

    pub(crate) fn at_step(step: ReadStep) {
        let hook = HOOK.with(|h| h.borrow_mut().take());
        if let Some(mut hook) = hook {
            hook(step);
            HOOK.with(|h| *h.borrow_mut() = Some(hook));
        }
    }

    /// Runs one query with `writes` applied at `step`, once.
    fn query_with(
        index: &Arc<dyn Backend>,
        q: &[u64],
        step: ReadStep,
        writes: impl FnOnce(&dyn Backend) + 'static,
    ) -> Vec<Match> {
        query_recording(index, q, step, writes).0
    }

    /// [`query_with`], also returning the steps the read went through.
    fn query_recording(
        index: &Arc<dyn Backend>,
        q: &[u64],
        step: ReadStep,
        writes: impl FnOnce(&dyn Backend) + 'static,
    ) -> (Vec<Match>, Vec<ReadStep>) {
        let steps = Rc::new(RefCell::new(Vec::new()));
        let seen = Rc::clone(&steps);
        let target = Arc::clone(index);
        let mut writes = Some(writes);
        HOOK_STEP.with(|s| s.set(Some(step)));
        HOOK.with(|h| {
            *h.borrow_mut() = Some(Box::new(move |at| {
                seen.borrow_mut().push(at);
                if at == step {
                    if let Some(writes) = writes.take() {
                        writes(&*target);
                    }
                }
            }))
        });
        let mut out = Vec::new();
        index.find_matches_into(q, &mut out);
        HOOK.with(|h| *h.borrow_mut() = None);
        HOOK_STEP.with(|s| s.set(None));
        let steps = steps.borrow().clone();
        (out, steps)
    }

    /// A match of `worker` at `depth`.
    fn at(worker: Worker, depth: u32) -> Match {
        Match {
            worker_id: worker.worker_id,
            dp_rank: worker.dp_rank,
            depth,
        }
    }

    const W1: Worker = Worker::new(1, 0);
    const W2: Worker = Worker::new(2, 0);

    /// A chain from position 0 with these locals, named `base`, `base + 1`, ...
    pub(crate) fn chain(worker: Worker, locals: &[u64], base: u64) -> Event {
        let blocks = locals
            .iter()
            .enumerate()
            .map(|(p, &l)| Block::new(l, base + p as u64))
            .collect();
        Event::stored(worker, 0, None, blocks)
    }

    fn apply(index: &dyn Backend, event: Event) {
        let outcome = index.apply(event.worker, &event.data);
        assert!(matches!(outcome, Outcome::Applied { .. }), "{outcome:?}");
    }

    fn backends() -> Vec<(&'static str, Arc<dyn Backend>)> {
        vec![
            ("positional(jump=4)", Arc::new(PositionalIndex::new(4))),
            ("positional(jump=32)", Arc::new(PositionalIndex::new(32))),
            ("radix", Arc::new(RadixIndex::new())),
            ("runs", Arc::new(RunsIndex::new())),
        ]
    }

    const X: [u64; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];

    #[test]
    fn a_recycled_slot_is_credited_only_with_what_its_new_worker_holds() {
        for step in [ReadStep::Quiet, ReadStep::Snapshotted, ReadStep::Searched] {
            for (name, index) in backends() {
                apply(&*index, chain(W1, &X, 100));
                // W1 goes and W2 takes its slot with the very chain the reader asks for: W1
                // is left out (removed during the call); W2, if named, holds all of X.
                let got = query_with(&index, &X, step, |ix| {
                    ix.remove_worker(1);
                    apply(ix, chain(W2, &X, 500));
                });
                let w2 = at(W2, 12);
                assert!(
                    got.is_empty() || got == vec![w2],
                    "{name} at {step:?}: {got:?}"
                );
                assert_eq!(index.find_matches_vec(&X), vec![w2], "{name}");
            }
        }
    }

    #[test]
    fn a_slot_recycled_after_a_quiet_search_names_the_worker_that_was_there() {
        // The search met no change; right after it, W1 goes and W2 takes its slot. The
        // answer is W1's (it held X throughout the search), never W2 with W1's depth: the
        // slots' workers are read before the search is confirmed quiet.
        let y: Vec<u64> = X.iter().map(|l| l + 1000).collect();
        for (name, index) in backends() {
            apply(&*index, chain(W1, &X, 100));
            let y = y.clone();
            let got = query_with(&index, &X, ReadStep::QuietChecked, move |ix| {
                ix.remove_worker(1);
                apply(ix, chain(W2, &y, 500));
            });
            let w1 = at(W1, 12);
            assert_eq!(got, vec![w1], "{name}");
            assert_eq!(index.find_matches_vec(&X), vec![], "{name}");
        }
    }

    #[test]
    fn changes_met_by_a_quiet_search_read_only_their_slots_again() {
        const W3: Worker = Worker::new(3, 0);
        let y: Vec<u64> = X.iter().map(|l| l + 1000).collect();
        for (name, index) in backends() {
            apply(&*index, chain(W1, &X, 100));
            apply(&*index, chain(W2, &X[..5], 200));
            apply(&*index, chain(W3, &y, 300));
            // During the search W2 gets the rest of X and W3 goes: W1 stands as found,
            // W2 is read again (all of X: its change touched X at position 5), W3 never held
            // a prefix of X and is not read again.
            let (got, steps) = query_recording(&index, &X, ReadStep::Quiet, |ix| {
                let rest = (5..12).map(|p| Block::new(X[p], 200 + p as u64)).collect();
                apply(ix, Event::stored(W2, 1, Some(204), rest));
                ix.remove_worker(3);
            });
            assert_eq!(got, vec![at(W1, 12), at(W2, 12)], "{name}");
            assert_eq!(
                steps,
                vec![ReadStep::Quiet, ReadStep::ChangesNamed, ReadStep::ReadAgain],
                "{name}: the changes were named, and the read did not start over"
            );
            // More changes than the log keeps: the read starts over, with the same answer.
            let y = y.clone();
            let (got, steps) = query_recording(&index, &X, ReadStep::Quiet, move |ix| {
                for round in 0..=crate::index::change_log::RECENT as u64 {
                    apply(ix, chain(W3, &y, 1000 + round));
                }
            });
            assert_eq!(got, vec![at(W1, 12), at(W2, 12)], "{name}");
            assert_eq!(
                steps,
                vec![ReadStep::Quiet, ReadStep::Snapshotted, ReadStep::Searched],
                "{name}"
            );
        }
    }

    /// Several named slots among many found: those whose changes touched the query are read
    /// again, and every other worker keeps what the search found, each reported once.
    #[test]
    fn of_many_slots_found_only_the_touched_named_ones_are_read_again() {
        let workers: Vec<Worker> = (1..=8).map(|id| Worker::new(id, 0)).collect();
        let y: Vec<u64> = X.iter().map(|l| l + 1000).collect();
        for (name, index) in backends() {
            for (at, &worker) in workers.iter().enumerate() {
                apply(&*index, chain(worker, &X[..4 + at], 100 * (at as u64 + 1)));
            }
            // During the search: workers 2, 5 and 7 get the rest of X (touched within reach);
            // worker 4 stores another chain (named, untouched); the others do nothing.
            let grown = [1usize, 4, 6];
            let y = y.clone();
            let (got, steps) = query_recording(&index, &X, ReadStep::Quiet, move |ix| {
                for at in grown {
                    let base = 100 * (at as u64 + 1);
                    let rest = (4 + at..12).map(|p| Block::new(X[p], base + p as u64));
                    let parent = base + 3 + at as u64;
                    apply(
                        ix,
                        Event::stored(
                            Worker::new(at as u64 + 1, 0),
                            1,
                            Some(parent),
                            rest.collect(),
                        ),
                    );
                }
                apply(ix, chain(Worker::new(4, 0), &y, 9_000));
            });
            let mut want: Vec<Match> = workers
                .iter()
                .enumerate()
                .map(|(k, &w)| at(w, if grown.contains(&k) { 12 } else { 4 + k as u32 }))
                .collect();
            crate::model::sort_matches(&mut want);
            assert_eq!(got, want, "{name}");
            assert_eq!(
                steps,
                vec![
                    ReadStep::Quiet,
                    ReadStep::ChangesNamed,
                    ReadStep::ReadAgain,
                    ReadStep::ReadAgain,
                    ReadStep::ReadAgain
                ],
                "{name}: three named slots read again, the fourth kept"
            );
        }
    }

    #[test]
    fn a_slot_whose_changes_met_touched_the_query_is_read_again_even_if_the_last_did_not() {
        let y: Vec<u64> = X.iter().map(|l| l + 1000).collect();
        for (name, index) in backends() {
            apply(&*index, chain(W1, &X, 100));
            apply(&*index, chain(W2, &X[..5], 200));
            // During the search W2 first gets the rest of X, then a chain off X: the first
            // change touched X, so W2 is read again.
            let y = y.clone();
            let (got, steps) = query_recording(&index, &X, ReadStep::Quiet, move |ix| {
                let rest = (5..12).map(|p| Block::new(X[p], 200 + p as u64)).collect();
                apply(ix, Event::stored(W2, 1, Some(204), rest));
                apply(ix, chain(W2, &y, 900));
            });
            assert_eq!(got, vec![at(W1, 12), at(W2, 12)], "{name}");
            assert_eq!(
                steps,
                vec![ReadStep::Quiet, ReadStep::ChangesNamed, ReadStep::ReadAgain],
                "{name}"
            );
            // Only changes off X: nobody is read again.
            let (got, steps) = query_recording(&index, &X, ReadStep::Quiet, move |ix| {
                let z: Vec<u64> = X.iter().map(|l| l + 5000).collect();
                apply(ix, chain(W2, &z, 1900));
                apply(ix, chain(W1, &z, 2900));
            });
            assert_eq!(got, vec![at(W1, 12), at(W2, 12)], "{name}");
            assert_eq!(
                steps,
                vec![ReadStep::Quiet, ReadStep::ChangesNamed],
                "{name}"
            );
        }
    }

    /// A query of X while W2 (holding X's first 5 blocks, W1 all of X) has a change in
    /// progress that records a touch at `touch` (position, local) and changes nothing else:
    /// the answer and the read's steps (the read takes the named path).
    fn read_during_open_change(touch: Option<(u32, u64)>) -> (Vec<Match>, Vec<ReadStep>) {
        use std::sync::Barrier;
        let index = Arc::new(RunsIndex::new());
        let as_backend: Arc<dyn Backend> = index.clone();
        apply(&*index, chain(W1, &X, 100));
        apply(&*index, chain(W2, &X[..5], 200));
        let opened = Arc::new(Barrier::new(2));
        let answered = Arc::new(Barrier::new(2));
        let writer = {
            let (index, opened, answered) = (index.clone(), opened.clone(), answered.clone());
            std::thread::spawn(move || {
                let registry = index.registry();
                registry.with_worker(W2, false, |entry| {
                    registry.change(entry, |_, slot| {
                        if let Some((position, local)) = touch {
                            registry.touch(slot, position, local);
                        }
                        opened.wait();
                        answered.wait(); // the read runs while this change is open
                    })
                });
            })
        };
        opened.wait();
        // A slot read again whose change touched what it reads waits for the change to
        // end: the change ends then, or once the read has returned.
        let release = {
            let answered = answered.clone();
            move |_: &dyn Backend| {
                answered.wait();
            }
        };
        let read = query_recording(&as_backend, &X, ReadStep::ReadAgain, release);
        if !read.1.contains(&ReadStep::ReadAgain) {
            answered.wait();
        }
        writer.join().unwrap();
        read
    }

    #[test]
    fn a_change_in_progress_when_a_read_starts_is_named_and_checked_alone() {
        let expected = vec![at(W1, 12), at(W2, 5)];
        // The change touched W2's blocks elsewhere (another block at position 3, a block
        // past where the search met W2's end): what the search found for W2 stands.
        for touch in [None, Some((3, 999)), Some((6, X[6]))] {
            let (got, steps) = read_during_open_change(touch);
            assert_eq!(got, expected, "{touch:?}");
            assert_eq!(
                steps,
                vec![ReadStep::Quiet, ReadStep::ChangesNamed],
                "{touch:?}: W2 is not read again"
            );
        }
        // A touch of a block of X the search read about W2 (up to position 5, where it
        // found W2's end): W2 alone is read again.
        for touch in [(0, X[0]), (5, X[5])] {
            let (got, steps) = read_during_open_change(Some(touch));
            assert_eq!(got, expected, "{touch:?}");
            assert_eq!(
                steps,
                vec![ReadStep::Quiet, ReadStep::ChangesNamed, ReadStep::ReadAgain],
                "{touch:?}"
            );
        }
    }

    #[test]
    fn a_slot_freed_during_the_read_names_nobody() {
        for step in [ReadStep::Quiet, ReadStep::Snapshotted, ReadStep::Searched] {
            for (name, index) in backends() {
                apply(&*index, chain(W1, &X, 100));
                let got = query_with(&index, &X, step, |ix| ix.remove_worker(1));
                assert_eq!(got, vec![], "{name} at {step:?}");
            }
        }
    }

    #[test]
    fn a_recycled_slot_with_another_chain_names_nobody() {
        // The audit's recipe: W1 holds X, W2 (on W1's old slot) holds Y; a reader of X must
        // never be told that W2 holds X.
        let y: Vec<u64> = X.iter().map(|l| l + 1000).collect();
        for step in [ReadStep::Quiet, ReadStep::Snapshotted, ReadStep::Searched] {
            for (name, index) in backends() {
                apply(&*index, chain(W1, &X, 100));
                let y = y.clone();
                let got = query_with(&index, &X, step, move |ix| {
                    ix.remove_worker(1);
                    apply(ix, chain(W2, &y, 500));
                });
                assert_eq!(got, vec![], "{name} at {step:?}");
            }
        }
    }

    #[test]
    fn a_worker_changed_during_the_read_is_reported_as_it_is_afterwards() {
        for (name, index) in backends() {
            apply(&*index, chain(W1, &X, 100));
            apply(&*index, chain(W2, &X, 200));
            // A hole at position 7 of W1 while the read runs: its depth is 12 before and 7
            // after, never anything else; W2 does not change and keeps 12.
            let got = query_with(&index, &X, ReadStep::Searched, |ix| {
                apply(ix, Event::removed(W1, 0, vec![107]));
            });
            assert_eq!(got, vec![at(W2, 12), at(W1, 7)], "{name}");
        }
    }

    #[test]
    fn a_worker_cut_short_during_the_read_is_reported_at_its_new_end() {
        for (name, index) in backends() {
            apply(&*index, chain(W1, &X, 100));
            apply(&*index, chain(W2, &X, 200));
            // W1 evicts its last five blocks, leaf first (still a prefix: jump-safe) while the
            // read runs: 12 before, 7 after.
            let got = query_with(&index, &X, ReadStep::Searched, |ix| {
                for name in (107..112).rev() {
                    apply(ix, Event::removed(W1, 0, vec![name]));
                }
            });
            assert_eq!(got, vec![at(W2, 12), at(W1, 7)], "{name}");
        }
    }

    #[test]
    fn a_worker_removed_and_recreated_during_the_read_appears_once() {
        for step in [ReadStep::Quiet, ReadStep::Snapshotted, ReadStep::Searched] {
            for (name, index) in backends() {
                apply(&*index, chain(W2, &X, 200)); // takes slot 0
                apply(&*index, chain(W1, &X, 100)); // slot 1
                let got = query_with(&index, &X, step, |ix| {
                    ix.remove_worker(1);
                    apply(ix, chain(W2, &X[..3], 300)); // W2 changes too
                    apply(ix, chain(W1, &X[..5], 400)); // W1 is back, on slot 1 again
                });
                let w1: Vec<_> = got.iter().filter(|m| m.worker_id == 1).collect();
                assert!(w1.len() <= 1, "{name} at {step:?}: {got:?}");
                assert!(
                    w1.iter().all(|m| m.depth == 12 || m.depth == 5),
                    "{name} at {step:?}: {got:?}"
                );
                let w2: Vec<_> = got.iter().filter(|m| m.worker_id == 2).collect();
                assert_eq!(w2.len(), 1, "{name} at {step:?}: {got:?}");
                assert_eq!(w2[0].depth, 12, "{name}: W2 still holds all of X");
            }
        }
    }

    #[test]
    fn a_worker_cleared_during_the_read_is_left_out_or_whole() {
        for step in [ReadStep::Quiet, ReadStep::Snapshotted, ReadStep::Searched] {
            for (name, index) in backends() {
                apply(&*index, chain(W1, &X, 100));
                apply(&*index, chain(W2, &X[..4], 200));
                // W1 is cleared and stores the start of X again: 12 before, 0 after the clear,
                // 3 after the store; it stays known (its slot is not recycled).
                let got = query_with(&index, &X, step, |ix| {
                    apply(ix, Event::cleared(W1, 0));
                    apply(ix, chain(W1, &X[..3], 300));
                });
                let w2 = at(W2, 4);
                let w1 = |depth| at(W1, depth);
                assert!(
                    got == vec![w1(12), w2] || got == vec![w2, w1(3)] || got == vec![w2],
                    "{name} at {step:?}: {got:?}"
                );
                assert_eq!(index.find_matches_vec(&X), vec![w2, w1(3)], "{name}");
            }
        }
    }

    #[test]
    fn a_dp_rank_removed_during_the_read_takes_only_that_rank() {
        let rank1 = Worker::new(1, 1);
        for step in [ReadStep::Quiet, ReadStep::Snapshotted, ReadStep::Searched] {
            for (name, index) in backends() {
                apply(&*index, chain(W1, &X, 100));
                apply(&*index, chain(rank1, &X[..6], 200));
                // Rank 1 goes and another worker takes its slot with a chain of its own: rank 0
                // keeps 12; rank 1 is left out or reported with what it held; the newcomer
                // never holds X.
                let y: Vec<u64> = X.iter().map(|l| l + 1000).collect();
                let got = query_with(&index, &X, step, move |ix| {
                    ix.remove_worker_dp_rank(rank1);
                    apply(ix, chain(W2, &y, 500));
                });
                let rank0 = at(W1, 12);
                let rank1_before = at(Worker::new(1, 1), 6);
                assert!(
                    got == vec![rank0] || got == vec![rank0, rank1_before],
                    "{name} at {step:?}: {got:?}"
                );
                assert_eq!(index.find_matches_vec(&X), vec![rank0], "{name}");
            }
        }
    }

    trait FindVec {
        fn find_matches_vec(&self, q: &[u64]) -> Vec<Match>;
    }

    impl FindVec for Arc<dyn Backend> {
        fn find_matches_vec(&self, q: &[u64]) -> Vec<Match> {
            let mut out = Vec::new();
            self.find_matches_into(q, &mut out);
            out
        }
    }
}
