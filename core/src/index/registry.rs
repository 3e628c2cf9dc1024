//! The worker registry: per-worker state behind a mutex, and slot numbers for readers.
//!
//! Each known worker owns a small integer *slot*. Index structures store slots, not workers;
//! readers turn a slot back into a worker without taking a lock ([`Registry::worker_at`],
//! checked against the slot's version with [`Registry::owner_if_unchanged`]).
//! A worker's state is changed only under its mutex, so events of one worker applied from
//! several threads at once are serialised, and a removal never races an event of the same
//! worker into a half-purged state. Entries live by slot; an event finds its worker's entry
//! through a lock-free guess of the slot, checked under the entry's own lock, so applying an
//! event takes one lock (the worker's) and no lock of the map of workers.
//!
//! # Slot versions
//! Slots are recycled, so a reader that saw slot `s` among a block's holders cannot tell from
//! the slot alone whose it was. Each slot carries a version that only grows: odd while its
//! worker is being changed (or while the slot is free), even while stable. Every change of a
//! worker's blocks, its removal and the slot's reallocation move the version, so a reader that
//! reads an even version before its reads of a slot and the same version after them has seen
//! one stable state of one worker (a seqlock read; see `worker_blocks` for the whole protocol).

use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

use dashmap::DashMap;
use parking_lot::{Mutex, MutexGuard};
use prefetch_index::prefetch_index;
use rustc_hash::FxBuildHasher;

use super::change_log::{Begun, ChangeLog};
use super::segmented::Segmented;
use super::tiers::TierActivity;
use crate::model::Worker;

/// Whose a slot is, apart from the rest of its [`SlotInfo`]: sixteen bytes a slot, so that
/// the many slots of an answer are turned into workers from a few cache lines. Written only
/// when the slot is given to a worker (see [`Registry::worker_at`] for how readers trust it).
#[derive(Default)]
struct Owner {
    worker_id: AtomicU64,
    dp_rank: AtomicU32,
}

impl Owner {
    #[inline]
    fn worker(&self) -> Worker {
        Worker::new(
            self.worker_id.load(Ordering::Relaxed),
            self.dp_rank.load(Ordering::Relaxed),
        )
    }
}

/// Owners kept in the head of the owner table (see [`Segmented`]; 16 KiB): every slot
/// of most indexes, each turned into its worker by a plain index.
const OWNERS_HEAD: usize = 1024;

/// What readers may know of a slot without locking (besides its [`Owner`]).
///
/// The fields writers seldom change (freedom, jump safety) come first, on a cache line of
/// their own; those every change writes (version, touch records) follow on the next ones, so
/// that a change does not take the first line away from a reading core.
#[derive(Default)]
#[repr(C, align(64))]
pub(crate) struct SlotInfo {
    /// Set once the slot's worker is removed and purged, cleared when the slot is reused.
    free: AtomicBool,
    /// Set by the positional index when a jump over this worker's blocks cannot be trusted
    /// (it holds a block whose parent it does not hold). Written with `Release` inside a
    /// change, and only when it changes, so a reader that sees a new value also sees the
    /// version move.
    pub(crate) jumps_unsafe: AtomicBool,
    /// Readers waiting for the slot's version to move on ([`Registry::version_after`]): its
    /// writer then ends its change after the step in progress
    /// ([`Registry::change_in_steps`]).
    readers_waiting: AtomicU32,
    /// What changes write, from the next cache line on.
    hot: ChangedFields,
}

/// The fields of a [`SlotInfo`] that every change writes.
#[derive(Default)]
#[repr(C, align(64))]
struct ChangedFields {
    /// See the module docs: odd while changing or free, even while stable.
    version: AtomicU64,
    /// What the latest change has touched so far (see [`Touches`]).
    touches: Touches,
    /// Names the slot's worker holds, moved by its changes ([`Registry::add_blocks`]).
    blocks: AtomicU64,
}

/// Touch records a slot keeps: its latest touches, over however many changes they span.
/// Twice as many as the most events applied as one change (`applier::MAX_RUN`): a reader
/// knows it has seen all of a window's records only once it meets a record older than the
/// window, so a change of single-block events (a group of one-name removals, the common
/// kind) fills the ring's newer half and still leaves the records before it in view. With
/// only as many records as such a change, every reader that met a full group had to read
/// its worker again: nine in ten of the workers read again on workload C.
const TOUCH_RECORDS: usize = 2 * crate::applier::MAX_RUN;

/// Eight-byte words on one cache line.
const WORDS_PER_LINE: usize = 64 / std::mem::size_of::<u64>();

/// The position a record gives a removal: it touches every block.
const EVERYTHING: u32 = u32::MAX;

/// The latest blocks a slot's changes have touched, for readers that overlapped them.
///
/// A record `(change, position, local)` stands for the block at `position` with local hash
/// `local` and, when the change is a store, every block the store attaches after it (all on
/// one chain below that block). A query reads about such blocks only if its own local hash at
/// `position` is `local`, so a reader whose query differs there, or that read nothing at
/// `position`, saw none of what the record stands for. Only the slot's change holder writes:
/// a record is published before the block it names is changed, so a reader that saw a
/// changed block also sees its record (or sees that the ring has moved past it).
#[derive(Default)]
struct Touches {
    /// Records started: moved before a record is overwritten.
    started: AtomicU64,
    /// Records completed: moved after a record is written.
    published: AtomicU64,
    /// Per record: the change's number (its odd version / 2, low 32 bits) in the high half,
    /// the position in the low half.
    metas: [AtomicU64; TOUCH_RECORDS],
    locals: [AtomicU64; TOUCH_RECORDS],
}

/// A change's number in a touch record.
fn change_number(odd_version: u64) -> u32 {
    (odd_version >> 1) as u32
}

impl Touches {
    /// Records that the change with odd version `change` touches the block at `position`
    /// with local hash `local` (`EVERYTHING`: every block).
    fn record(&self, change: u64, position: u32, local: u64) {
        let at = self.published.load(Ordering::Relaxed);
        self.started.store(at + 1, Ordering::Relaxed);
        // A reader that reads the overwritten record and then fences sees `started` moved.
        fence(Ordering::Release);
        let i = (at % TOUCH_RECORDS as u64) as usize;
        let meta = (u64::from(change_number(change)) << 32) | u64::from(position);
        self.metas[i].store(meta, Ordering::Relaxed);
        self.locals[i].store(local, Ordering::Relaxed);
        self.published.store(at + 1, Ordering::Release);
    }

    /// Whether a change numbered `first` or later (up to `changes` changes in all) may have
    /// touched a block the query reads at a position up to `reach`: true if any record of
    /// theirs says so, or if their records are not all still here.
    fn may_have_touched(&self, first: u32, changes: u32, query: &[u64], reach: u32) -> bool {
        let published = self.published.load(Ordering::Acquire);
        let mut complete = false;
        let mut oldest_read = published;
        for at in (published.saturating_sub(TOUCH_RECORDS as u64)..published).rev() {
            let i = (at % TOUCH_RECORDS as u64) as usize;
            let meta = self.metas[i].load(Ordering::Relaxed);
            let local = self.locals[i].load(Ordering::Relaxed);
            oldest_read = at;
            if ((meta >> 32) as u32).wrapping_sub(first) >= changes {
                complete = true; // older than the window: so is everything before it
                break;
            }
            let position = meta as u32;
            if position == EVERYTHING
                || (position <= reach && query.get(position as usize) == Some(&local))
            {
                return true;
            }
        }
        // Fewer records than the ring holds: none was ever dropped.
        complete |= published <= TOUCH_RECORDS as u64;
        fence(Ordering::Acquire);
        let started = self.started.load(Ordering::Relaxed);
        // A record read may have been overwritten meanwhile.
        let overwritten = oldest_read + (TOUCH_RECORDS as u64) < started;
        !complete || overwritten
    }
}

impl SlotInfo {
    /// The odd version the slot's next change gives it (read by the slot's one writer).
    fn next_change(&self) -> u64 {
        self.hot.version.load(Ordering::Relaxed) + 1
    }

    /// Marks the start of a change: the version becomes odd (a removal touches everything).
    ///
    /// Only the slot's one writer moves its version (the worker's lock holder, or whoever
    /// allocates or frees the slot), so a plain store does: no locked instruction.
    fn begin_change(&self, touches_everything: bool) {
        let before = self.hot.version.load(Ordering::Relaxed);
        debug_assert!(before % 2 == 0, "changes of one slot do not overlap");
        self.hot.version.store(before + 1, Ordering::Relaxed);
        // Whatever this change writes next is ordered after the version move for a reader
        // that reads it and then fences (a seqlock writer).
        fence(Ordering::Release);
        if touches_everything {
            self.hot.touches.record(before + 1, EVERYTHING, 0);
        }
    }

    /// Marks the end of a change: the version becomes even again.
    fn end_change(&self) {
        let during = self.hot.version.load(Ordering::Relaxed);
        self.hot.version.store(during + 1, Ordering::Release);
    }
}

/// A reader's record of a slot taken before reading the index: whose it was, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotSnapshot {
    pub(crate) slot: u32,
    pub(crate) version: u64,
    pub(crate) worker: Worker,
}

impl SlotSnapshot {
    /// Whether the slot was stable (even version) when the snapshot was taken.
    pub(crate) fn was_stable(&self) -> bool {
        self.version % 2 == 0
    }
}

/// A worker's state and its slot.
pub(crate) struct Entry<S> {
    /// Whose entry this is: a lookup that reached the slot by a [`Hint`] checks it.
    worker: Worker,
    pub(crate) slot: u32,
    pub(crate) state: S,
    /// The offset of the last batch applied to the worker (0: none); changed and read only
    /// under the worker's lock, together with its state.
    pub(crate) watermark: u64,
}

/// How many [`Hint`]s a registry keeps (a power of two).
const HINTS: usize = 1024;

/// A guess of a worker's slot, read and written without locks: one cell of a small table
/// indexed by a hash of the worker. Nothing is trusted from it: a lookup takes the slot it
/// names to the slot's entry, locks that, and keeps it only if the entry is the worker's
/// (a cell written by two threads at once, or naming a slot given to another worker since,
/// fails that check and the lookup asks the map). So a known worker's events reach its
/// state with one lock taken, the worker's own, and no lock of the map.
#[derive(Default)]
struct Hint {
    worker_id: AtomicU64,
    /// `dp_rank << 32 | (slot + 1)`; 0 for an empty cell.
    rank_slot: AtomicU64,
}

impl Hint {
    fn cell(hints: &[Hint], worker: Worker) -> &Hint {
        let mixed = (worker.worker_id ^ u64::from(worker.dp_rank).rotate_left(32))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &hints[(mixed >> 32) as usize & (HINTS - 1)]
    }

    /// The slot the cell names for `worker`, if it names one.
    fn slot_of(&self, worker: Worker) -> Option<u32> {
        let rank_slot = self.rank_slot.load(Ordering::Relaxed);
        let named = self.worker_id.load(Ordering::Relaxed) == worker.worker_id
            && (rank_slot >> 32) as u32 == worker.dp_rank
            && rank_slot as u32 != 0;
        named.then(|| rank_slot as u32 - 1)
    }

    fn set(&self, worker: Worker, slot: u32) {
        self.worker_id.store(worker.worker_id, Ordering::Relaxed);
        self.rank_slot.store(
            u64::from(worker.dp_rank) << 32 | u64::from(slot.wrapping_add(1)),
            Ordering::Relaxed,
        );
    }
}

/// See the module docs.
pub(crate) struct Registry<S> {
    /// Changes of any slot, for readers' quiet checks.
    pub(crate) changes: ChangeLog,
    /// Each known worker's slot.
    workers: DashMap<Worker, u32, FxBuildHasher>,
    /// Each slot's entry, while a worker has the slot.
    entries: Segmented<Mutex<Option<Entry<S>>>>,
    /// Guesses of workers' slots, for lookups that skip `workers`.
    hints: Box<[Hint]>,
    slots: Segmented<SlotInfo>,
    owners: Segmented<Owner, OWNERS_HEAD>,
    free_slots: Mutex<Vec<u32>>,
    next_slot: AtomicU32,
    /// Whether any block of any worker is off the device alone (for tiered lookups).
    pub(crate) tiers: TierActivity,
}

impl<S: Default> Registry<S> {
    pub(crate) fn new() -> Self {
        Self {
            changes: ChangeLog::default(),
            workers: DashMap::with_hasher(FxBuildHasher),
            entries: Segmented::new(),
            hints: (0..HINTS).map(|_| Hint::default()).collect(),
            slots: Segmented::new(),
            owners: Segmented::new(),
            free_slots: Mutex::new(Vec::new()),
            next_slot: AtomicU32::new(0),
            tiers: TierActivity::default(),
        }
    }

    fn allocate_slot(&self, worker: Worker) -> u32 {
        // Slots are recycled, so there are never more than the workers known at once.
        let slot = self
            .free_slots
            .lock()
            .pop()
            .unwrap_or_else(|| self.next_slot.fetch_add(1, Ordering::Relaxed));
        let info = self.slots.get_or_alloc(slot as usize);
        if info.hot.version.load(Ordering::Relaxed) == 0 {
            info.hot.version.store(1, Ordering::Relaxed); // a new slot starts as a free one
        }
        // A reader that reads the new owner (and then fences) also sees everything before
        // this point, the removal that freed the slot among it: its quiet check then fails.
        fence(Ordering::Release);
        let owner = self.owners.get_or_alloc(slot as usize);
        owner.worker_id.store(worker.worker_id, Ordering::Relaxed);
        owner.dp_rank.store(worker.dp_rank, Ordering::Relaxed);
        info.jumps_unsafe.store(false, Ordering::Relaxed);
        info.free.store(false, Ordering::Relaxed);
        info.end_change(); // odd (free) -> even (stable, this worker's)
        slot
    }

    /// Runs `f` on the worker's locked entry. With `create`, an unknown worker is created
    /// first; without, `None` is returned for an unknown worker.
    pub(crate) fn with_worker<R>(
        &self,
        worker: Worker,
        create: bool,
        f: impl FnOnce(&mut Entry<S>) -> R,
    ) -> Option<R> {
        let hint = Hint::cell(&self.hints, worker);
        // Fast path: the slot the hint names, if its entry is the worker's.
        if let Some(mut guard) = hint
            .slot_of(worker)
            .and_then(|slot| self.locked(slot, worker))
        {
            return guard.as_mut().map(f);
        }
        loop {
            if let Some(slot) = self.workers.get(&worker).map(|slot| *slot) {
                if let Some(mut guard) = self.locked(slot, worker) {
                    hint.set(worker, slot);
                    return guard.as_mut().map(f);
                }
                continue; // removed between lookup and lock: look again
            }
            if !create {
                return None;
            }
            self.workers.entry(worker).or_insert_with(|| {
                let slot = self.allocate_slot(worker);
                *self.entries.get_or_alloc(slot as usize).lock() = Some(Entry {
                    worker,
                    slot,
                    state: S::default(),
                    watermark: 0,
                });
                slot
            });
        }
    }

    /// The locked entry of `slot` if it is `worker`'s (always `Some` inside).
    fn locked(&self, slot: u32, worker: Worker) -> Option<MutexGuard<'_, Option<Entry<S>>>> {
        let guard = self.entries.get(slot as usize)?.lock();
        guard
            .as_ref()
            .is_some_and(|entry| entry.worker == worker)
            .then_some(guard)
    }

    /// Removes a worker: `purge` drops its blocks from the index structures while its entry is
    /// locked, then the slot is recycled.
    pub(crate) fn remove(&self, worker: Worker, purge: impl FnOnce(&mut Entry<S>)) {
        let Some((_, slot)) = self.workers.remove(&worker) else {
            return;
        };
        let removed = {
            let mut guard = self
                .locked(slot, worker)
                .expect("a worker in the map has its slot's entry");
            // The version stays odd until the slot is given to another worker.
            let info = self.info(slot);
            let begun = self.changes.begin(slot, info.next_change());
            info.begin_change(true);
            let mut entry = guard.take().expect("a locked entry is there");
            purge(&mut entry);
            info.free.store(true, Ordering::Release);
            self.changes.end(begun);
            entry
        };
        drop(removed); // its state, after the slot's lock
        self.free_slots.lock().push(slot);
    }

    /// Runs `change` on the worker's blocks as one change of its slot's version (see the
    /// module docs): readers that overlap it do not trust what they read of this worker.
    pub(crate) fn change<R>(
        &self,
        entry: &mut Entry<S>,
        change: impl FnOnce(&mut S, u32) -> R,
    ) -> R {
        let info = self.info(entry.slot);
        let begun = self.open_change(entry.slot, info);
        let result = change(&mut entry.state, entry.slot);
        self.close_change(info, begun);
        result
    }

    /// Begins a change of `slot` (whose info is `info`): logged first, then its version made
    /// odd, before anything readers see is changed.
    fn open_change(&self, slot: u32, info: &SlotInfo) -> Begun {
        let begun = self.changes.begin(slot, info.next_change());
        info.begin_change(false);
        begun
    }

    /// Ends a change begun with [`Registry::open_change`]: its version made even, then the
    /// log told, after everything it changed.
    fn close_change(&self, info: &SlotInfo, begun: Begun) {
        info.end_change();
        self.changes.end(begun);
    }

    /// [`Registry::change`] for work done in `steps` steps (`step(state, slot, i)` for each
    /// `i` in order, such as the events of a batch). With `may_split`, between two steps,
    /// while a reader waits for the slot's version to move on ([`Registry::version_after`]),
    /// the change ends and another begins, so that the reader waits for one step rather than
    /// for all of them; without, the steps are one change whatever happens. `settle` runs
    /// before every end of a change, as the last thing that change writes.
    pub(crate) fn change_in_steps(
        &self,
        entry: &mut Entry<S>,
        steps: usize,
        may_split: bool,
        mut step: impl FnMut(&mut S, u32, usize),
        mut settle: impl FnMut(&S, &SlotInfo),
    ) {
        let slot = entry.slot;
        let info = self.info(slot);
        let mut begun = self.open_change(slot, info);
        for at in 0..steps {
            // A plain load of a line the writer shares with readers: no locked instruction
            // unless a reader waits.
            if may_split && at > 0 && info.readers_waiting.load(Ordering::Relaxed) > 0 {
                settle(&entry.state, info);
                self.close_change(info, begun);
                begun = self.open_change(slot, info);
            }
            step(&mut entry.state, slot, at);
        }
        settle(&entry.state, info);
        self.close_change(info, begun);
    }

    fn info(&self, slot: u32) -> &SlotInfo {
        self.slots
            .get(slot as usize)
            .expect("a known worker's slot is allocated")
    }

    /// Records that the change in progress on `slot` is about to touch the block at
    /// `position` with local hash `local` (in a store: that block and every block the store
    /// attaches after it). Call it before changing what readers see there; only the worker's
    /// lock holder calls it.
    #[inline]
    pub(crate) fn touch(&self, slot: u32, position: u32, local: u64) {
        if let Some(info) = self.slots.get(slot as usize) {
            let change = info.hot.version.load(Ordering::Relaxed);
            debug_assert!(change % 2 == 1, "touches happen inside a change");
            info.hot
                .touches
                .record(change, position.min(EVERYTHING - 1), local);
        }
    }

    /// The slot's worker if the changes that overlapped the reads this validates (the one in
    /// progress at `version`, read before them, and any since) have touched no block of
    /// `query` up to position `reach`, as far as they have got. The worker's blocks those
    /// reads reached were then the same at every instant of the reads, and its depth is the
    /// same in every state it passed through meanwhile.
    #[inline]
    pub(crate) fn owner_if_untouched(
        &self,
        slot: u32,
        version: u64,
        query: &[u64],
        reach: u32,
    ) -> Option<Worker> {
        let info = self.slots.get(slot as usize)?;
        let now = info.hot.version.load(Ordering::Acquire);
        let first = version | 1; // the first change that may overlap
        if now < first {
            return None; // unchanged: `owner_if_unchanged`'s case, or not a version noted
        }
        // The changes `first..=now` (odd versions), counted.
        let changes = ((now - first) / 2 + 1).min(u64::from(u32::MAX)) as u32;
        // A removal touches everything, so a slot reused by another worker never passes.
        if info
            .hot
            .touches
            .may_have_touched(change_number(first), changes, query, reach)
        {
            return None;
        }
        let worker = self.worker_at(slot);
        fence(Ordering::Acquire);
        (info.hot.version.load(Ordering::Relaxed) == now).then_some(worker)
    }

    /// Asks the processor, without waiting, for the lines of the slot that
    /// [`Registry::owner_if_untouched`] reads (its version and touch records): a reader
    /// about to check several slots a writer is changing then waits for their misses at
    /// once rather than one after another. Only a hint.
    #[inline]
    pub(crate) fn prefetch_changes(&self, slot: u32) {
        let Some(info) = self.slots.get(slot as usize) else {
            return;
        };
        prefetch_index(std::slice::from_ref(&info.hot), 0);
        // One word a line, and the last: every line each array spans, however aligned.
        for records in [&info.hot.touches.metas, &info.hot.touches.locals] {
            for at in (0..TOUCH_RECORDS)
                .step_by(WORDS_PER_LINE)
                .chain([TOUCH_RECORDS - 1])
            {
                prefetch_index(records, at);
            }
        }
    }

    /// A slot's version, read before a reader reads the index about it.
    #[inline]
    pub(crate) fn version(&self, slot: u32) -> Option<u64> {
        Some(
            self.slots
                .get(slot as usize)?
                .hot
                .version
                .load(Ordering::Acquire),
        )
    }

    /// A slot's version, read before a reader reads the index about it; `None` once the slot
    /// is free (its worker was removed).
    #[inline]
    pub(crate) fn version_unless_free(&self, slot: u32) -> Option<u64> {
        let info = self.slots.get(slot as usize)?;
        let version = info.hot.version.load(Ordering::Acquire);
        (version % 2 == 0 || !info.free.load(Ordering::Acquire)).then_some(version)
    }

    /// The slot's worker if its version is still `version` and even (read before the reads
    /// this validates): then those reads saw one stable state of that worker.
    #[inline]
    pub(crate) fn owner_if_unchanged(&self, slot: u32, version: u64) -> Option<Worker> {
        let info = self.slots.get(slot as usize)?;
        let worker = self.worker_at(slot);
        fence(Ordering::Acquire);
        (version % 2 == 0 && info.hot.version.load(Ordering::Relaxed) == version).then_some(worker)
    }

    /// Waits until the slot's version is no longer `version` (read before reads about the
    /// slot that changes since then have spoiled), telling the slot's writer meanwhile that
    /// a reader waits, so that it ends its change after the step in progress
    /// ([`Registry::change_in_steps`]). Returns the new version, to read the slot again
    /// against; `None` once the slot is free (its worker was removed).
    pub(crate) fn version_after(&self, slot: u32, version: u64) -> Option<u64> {
        let info = self.slots.get(slot as usize)?;
        let free_now = |now: u64| now % 2 == 1 && info.free.load(Ordering::Acquire);
        let mut now = info.hot.version.load(Ordering::Acquire);
        if now == version && !free_now(now) {
            info.readers_waiting.fetch_add(1, Ordering::Relaxed);
            let mut waits = 0u32;
            while now == version && !free_now(now) {
                back_off(&mut waits);
                now = info.hot.version.load(Ordering::Acquire);
            }
            info.readers_waiting.fetch_sub(1, Ordering::Relaxed);
        }
        (!free_now(now)).then_some(now)
    }

    /// Whose a slot is (valid only if its version, read before, is unchanged after).
    #[inline]
    pub(crate) fn worker_at(&self, slot: u32) -> Worker {
        self.owners
            .get(slot as usize)
            .map_or(Worker::default(), Owner::worker)
    }

    /// The slot's current worker and version, read while the slot is stable (waiting out a
    /// change in progress); `None` once the slot is free (its worker was removed).
    pub(crate) fn stable_owner(&self, slot: u32) -> Option<SlotSnapshot> {
        let info = self.slots.get(slot as usize)?;
        let mut waits = 0u32;
        loop {
            let version = info.hot.version.load(Ordering::Acquire);
            if version % 2 == 1 {
                if info.free.load(Ordering::Acquire) {
                    return None;
                }
                // A change of this worker is being applied: usually a few hundred ns.
                back_off(&mut waits);
                continue;
            }
            let snapshot = SlotSnapshot {
                slot,
                version,
                worker: self.worker_at(slot),
            };
            if self.unchanged_since(&snapshot) {
                return Some(snapshot);
            }
        }
    }

    /// Whether nothing about the snapshot's slot changed since it was taken: then every read
    /// made in between saw one stable state of the snapshot's worker.
    #[inline]
    pub(crate) fn unchanged_since(&self, snapshot: &SlotSnapshot) -> bool {
        // The reads being validated (and the worker's id) happen before the version is read
        // again.
        fence(Ordering::Acquire);
        snapshot.was_stable()
            && self
                .slots
                .get(snapshot.slot as usize)
                .is_some_and(|info| info.hot.version.load(Ordering::Relaxed) == snapshot.version)
    }

    /// Whether the worker is known now.
    pub(crate) fn contains(&self, worker: Worker) -> bool {
        self.workers.contains_key(&worker)
    }

    /// Every known worker, sorted.
    pub(crate) fn all_workers(&self) -> Vec<Worker> {
        let mut all: Vec<Worker> = self.workers.iter().map(|e| *e.key()).collect();
        all.sort_unstable();
        all
    }

    /// Every known worker with the given id.
    pub(crate) fn workers_with_id(&self, worker_id: u64) -> Vec<Worker> {
        self.workers
            .iter()
            .map(|e| *e.key())
            .filter(|w| w.worker_id == worker_id)
            .collect()
    }

    /// Reader-visible facts of a slot.
    #[inline]
    pub(crate) fn slot_info(&self, slot: u32) -> Option<&SlotInfo> {
        self.slots.get(slot as usize)
    }

    /// Known workers.
    pub(crate) fn len(&self) -> u64 {
        self.workers.len() as u64
    }

    /// Adjusts the count of held (worker, name) pairs.
    pub(crate) fn add_blocks(&self, slot: u32, delta: i64) {
        // Only the worker's lock holder changes its count: a plain store, no locked
        // instruction per name.
        let blocks = &self.info(slot).hot.blocks;
        let now = blocks.load(Ordering::Relaxed).wrapping_add_signed(delta);
        blocks.store(now, Ordering::Relaxed);
    }

    /// Sum over workers of the names they hold (one read per slot ever allocated).
    pub(crate) fn worker_blocks(&self) -> u64 {
        let slots = self.next_slot.load(Ordering::Acquire) as usize;
        (0..slots)
            .filter_map(|slot| self.slots.get(slot))
            .fold(0u64, |sum, info| {
                sum.wrapping_add(info.hot.blocks.load(Ordering::Relaxed))
            })
    }
}

/// One round of a reader's wait for a slot's version to move: spins for the first rounds
/// (most changes end within them), then yields the core; `waits` counts the rounds.
fn back_off(waits: &mut u32) {
    *waits += 1;
    if *waits < 1 << 6 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::sync::Arc;
    use std::sync::Barrier;
    use std::time::Duration;

    /// A registry with one worker; its slot.
    fn one_worker(worker: Worker) -> (Arc<Registry<()>>, u32) {
        let registry = Arc::new(Registry::<()>::new());
        let slot = registry
            .with_worker(worker, true, |entry| entry.slot)
            .expect("created");
        (registry, slot)
    }

    /// Registry<u64>: each worker's state is a number the test sets, to tell entries apart.
    fn mark(registry: &Registry<u64>, worker: Worker, create: bool, value: u64) -> Option<u64> {
        registry.with_worker(worker, create, |entry| {
            let before = entry.state;
            entry.state = value;
            before
        })
    }

    #[test]
    fn a_hint_naming_a_recycled_slot_reaches_nobody_elses_state() {
        let registry = Registry::<u64>::new();
        let (old, new) = (Worker::new(7, 0), Worker::new(8, 0));
        assert_eq!(mark(&registry, old, true, 1), Some(0));
        registry.remove(old, |_| {});
        // `new` gets the freed slot, which `old`'s hint still names.
        assert_eq!(mark(&registry, new, true, 2), Some(0));
        assert_eq!(
            Hint::cell(&registry.hints, old).slot_of(old),
            registry.with_worker(new, false, |entry| entry.slot)
        );
        assert_eq!(mark(&registry, old, false, 3), None, "old is unknown");
        assert_eq!(mark(&registry, old, true, 4), Some(0), "old anew, empty");
        assert_eq!(mark(&registry, new, false, 5), Some(2), "new kept its own");
        assert_eq!(mark(&registry, old, false, 6), Some(4));
    }

    #[test]
    fn workers_sharing_a_hint_cell_and_a_torn_cell_each_reach_their_own_state() {
        let registry = Registry::<u64>::new();
        let first = Worker::new(1, 0);
        let cell = Hint::cell(&registry.hints, first) as *const Hint;
        let same_cell: Vec<Worker> = (2..)
            .flat_map(|id| [Worker::new(id, 0), Worker::new(id, 3)])
            .filter(|&w| std::ptr::eq(Hint::cell(&registry.hints, w), cell))
            .take(3)
            .collect();
        let workers: Vec<Worker> = std::iter::once(first).chain(same_cell).collect();
        for (at, &worker) in workers.iter().enumerate() {
            mark(&registry, worker, true, at as u64 + 10);
        }
        for round in 0..3u64 {
            for (at, &worker) in workers.iter().enumerate() {
                let value = round * 100 + at as u64;
                let before = if round == 0 {
                    at as u64 + 10
                } else {
                    value - 100
                };
                assert_eq!(mark(&registry, worker, false, value), Some(before));
            }
        }
        // A cell naming another worker's slot for `first` (as one whose two words come from
        // two writes can).
        let slot_of_second = registry.with_worker(workers[1], false, |e| e.slot).unwrap();
        let hint = Hint::cell(&registry.hints, first);
        hint.set(first, slot_of_second);
        assert_eq!(hint.slot_of(first), Some(slot_of_second));
        assert_eq!(mark(&registry, first, false, 1_000), Some(200));
        assert_eq!(mark(&registry, workers[1], false, 1_001), Some(201));
    }

    /// Threads apply to workers while another removes them (their slots recycled to
    /// others), with more workers than hint cells: every lookup reaches its own worker's
    /// state, never another's.
    #[test]
    fn lookups_racing_removals_reach_only_their_own_workers_state() {
        const WORKERS: u64 = 3 * HINTS as u64;
        let registry = Arc::new(Registry::<(u64, u64)>::new());
        let appliers: Vec<_> = (0..2u64)
            .map(|seed| {
                let registry = Arc::clone(&registry);
                std::thread::spawn(move || {
                    let mut x = seed + 1;
                    for _ in 0..200_000 {
                        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        let worker = Worker::new((x >> 33) % WORKERS, (x >> 20) as u32 % 2);
                        let own = worker.worker_id << 1 | u64::from(worker.dp_rank);
                        registry.with_worker(worker, true, |entry| {
                            if entry.state.1 == 0 {
                                entry.state.0 = own;
                            }
                            assert_eq!(entry.state.0, own, "another worker's state");
                            entry.state.1 += 1;
                        });
                    }
                })
            })
            .collect();
        let remover = {
            let registry = Arc::clone(&registry);
            std::thread::spawn(move || {
                for round in 0..100_000u64 {
                    let worker = Worker::new(round * 7 % WORKERS, (round % 2) as u32);
                    registry.remove(worker, |_| {});
                }
            })
        };
        for thread in appliers {
            thread
                .join()
                .expect("no lookup reached another worker's state");
        }
        remover.join().unwrap();
    }

    #[test]
    fn a_change_in_steps_with_no_reader_waiting_is_one_change() {
        let worker = Worker::new(1, 0);
        let (registry, slot) = one_worker(worker);
        let before = registry.version(slot).unwrap();
        let (mut steps, mut settled) = (Vec::new(), 0);
        registry.with_worker(worker, false, |entry| {
            registry.change_in_steps(
                entry,
                3,
                true,
                |_, _, at| steps.push(at),
                |_, _| settled += 1,
            )
        });
        assert_eq!(steps, [0, 1, 2]);
        assert_eq!(settled, 1);
        assert_eq!(registry.version(slot), Some(before + 2));
    }

    #[test]
    fn a_waiting_reader_ends_a_change_in_steps_after_the_step_in_progress() {
        let worker = Worker::new(1, 0);
        let (registry, slot) = one_worker(worker);
        let in_first_step = Arc::new(Barrier::new(2));
        let (read, reader_read) = mpsc::channel::<()>();
        let second_step_done = Arc::new(AtomicBool::new(false));
        let settled = Arc::new(AtomicUsize::new(0));
        let writer = {
            let (registry, in_first_step) = (registry.clone(), in_first_step.clone());
            let (second_step_done, settled) = (second_step_done.clone(), settled.clone());
            std::thread::spawn(move || {
                let info = registry.info(slot);
                registry.with_worker(worker, false, |entry| {
                    registry.change_in_steps(
                        entry,
                        2,
                        true,
                        |_, _, at| {
                            if at == 0 {
                                in_first_step.wait();
                                while info.readers_waiting.load(Ordering::Relaxed) == 0 {
                                    std::hint::spin_loop();
                                }
                            } else {
                                // Left as soon as the reader has read; a change that did not
                                // end early keeps the reader waiting until this gives up.
                                let _ = reader_read.recv_timeout(Duration::from_secs(30));
                                second_step_done.store(true, Ordering::SeqCst);
                            }
                        },
                        |_, _| {
                            settled.fetch_add(1, Ordering::SeqCst);
                        },
                    )
                });
            })
        };
        in_first_step.wait();
        let during_first = registry.version(slot).unwrap();
        assert_eq!(during_first % 2, 1, "a change is in progress");
        let next = registry
            .version_after(slot, during_first)
            .expect("the slot is not free");
        assert!(
            !second_step_done.load(Ordering::SeqCst),
            "the wait ended before the second step did"
        );
        assert!(next > during_first);
        read.send(()).unwrap();
        writer.join().unwrap();
        // Two changes, each settled before it ended.
        assert_eq!(registry.version(slot), Some(during_first + 3));
        assert_eq!(settled.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn no_version_comes_after_a_removal() {
        let worker = Worker::new(1, 0);
        let (registry, slot) = one_worker(worker);
        registry.remove(worker, |_| {});
        let version = registry.version(slot).unwrap();
        assert_eq!(version % 2, 1, "a free slot's version stays odd");
        assert_eq!(registry.version_after(slot, version), None);
        assert_eq!(registry.version_after(slot, version - 2), None);
    }

    /// Odd versions of consecutive changes.
    const C1: u64 = 11;
    const C2: u64 = 13;

    fn touched(t: &Touches, first: u64, changes: u32, query: &[u64], reach: u32) -> bool {
        t.may_have_touched(change_number(first), changes, query, reach)
    }

    #[test]
    fn a_touch_counts_only_where_the_query_has_that_block_within_reach() {
        let t = Touches::default();
        t.record(C1, 2, 30);
        let query = [10, 20, 30, 40];
        assert!(touched(&t, C1, 1, &query, 2));
        assert!(touched(&t, C1, 1, &query, 3));
        assert!(
            !touched(&t, C1, 1, &query, 1),
            "beyond what the read reached"
        );
        assert!(
            !touched(&t, C1, 1, &[10, 20, 31, 40], 3),
            "another block there"
        );
        assert!(!touched(&t, C1, 1, &[10, 20], 3), "past the query's end");
    }

    #[test]
    fn touches_of_changes_before_the_window_do_not_count() {
        let t = Touches::default();
        t.record(C1, 0, 10);
        t.record(C2, 3, 99);
        let query = [10, 20, 30, 40];
        assert!(touched(&t, C1, 2, &query, 3));
        assert!(!touched(&t, C2, 1, &query, 3));
    }

    #[test]
    fn a_removal_touches_everything() {
        let t = Touches::default();
        t.record(C1, EVERYTHING, 0);
        assert!(touched(&t, C1, 1, &[1], 0));
    }

    /// A full change of single-block events, none near the query, after an older change:
    /// the reader sees the older record, knows it has all of the window's, and finds the
    /// query untouched (without the room, it could not tell and would read again).
    #[test]
    fn a_full_change_of_single_block_events_is_checked_without_reading_again() {
        let t = Touches::default();
        t.record(C1, 0, 1);
        for i in 0..crate::applier::MAX_RUN as u32 {
            t.record(C2, 100 + i, 7);
        }
        assert!(!touched(&t, C2, 1, &[1, 2, 3], 2));
        // One of them on the query's path within reach still counts.
        t.record(C2, 1, 2);
        assert!(touched(&t, C2, 1, &[1, 2, 3], 2));
    }

    #[test]
    fn a_window_with_more_touches_than_records_counts_as_touched() {
        let t = Touches::default();
        // Touches far from the query, but more than the ring keeps: the oldest are lost.
        for i in 0..=TOUCH_RECORDS as u32 {
            t.record(C2, 100 + i, 7);
        }
        assert!(touched(&t, C2, 1, &[1, 2, 3], 2));
        // Had they all belonged to the window's predecessor, nothing would count.
        let t = Touches::default();
        for i in 0..=TOUCH_RECORDS as u32 {
            t.record(C1, 100 + i, 7);
        }
        assert!(!touched(&t, C2, 1, &[1, 2, 3], 2));
    }
}
