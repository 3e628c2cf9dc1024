//! The worker registry: per-worker state behind a mutex, and slot numbers for readers.
//!
//! Each known worker owns a small integer *slot*. Index structures store slots, not workers;
//! readers turn a slot back into a worker with [`Registry::snapshot`] without taking a lock.
//! A worker's state is changed only under its mutex, so events of one worker applied from
//! several threads at once are serialised, and a removal never races an event of the same
//! worker into a half-purged state.
//!
//! # Slot versions
//! Slots are recycled, so a reader that saw slot `s` among a block's holders cannot tell from
//! the slot alone whose it was. Each slot carries a version that only grows: odd while its
//! worker is being changed (or while the slot is free), even while stable. Every change of a
//! worker's blocks, its removal and the slot's reallocation move the version, so a reader that
//! reads an even version before its reads of a slot and the same version after them has seen
//! one stable state of one worker (a seqlock read; see `worker_blocks` for the whole protocol).

use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::{Mutex, MutexGuard};
use rustc_hash::FxBuildHasher;

use super::segmented::Segmented;
use crate::model::Worker;

/// What readers may know of a slot without locking.
#[derive(Default)]
pub(crate) struct SlotInfo {
    worker_id: AtomicU64,
    dp_rank: AtomicU32,
    /// See the module docs: odd while changing or free, even while stable.
    version: AtomicU64,
    /// Set once the slot's worker is removed and purged, cleared when the slot is reused.
    free: AtomicBool,
    /// The lowest position the latest change has touched so far: the change's odd version
    /// (low 32 bits) in the high half, the position in the low half. Published before each
    /// touch, so a reader that saw a touch also sees it here.
    lowest_touch: AtomicU64,
    /// Set by the positional index when a jump over this worker's blocks cannot be trusted
    /// (it holds a block whose parent it does not hold). Written with `Release` inside a
    /// change, so a reader that sees a new value also sees the version move.
    pub(crate) jumps_unsafe: AtomicBool,
}

/// Packs a change's odd version and a position for [`SlotInfo::lowest_touch`].
fn touch_word(change: u64, position: u32) -> u64 {
    (change << 32) | u64::from(position)
}

impl SlotInfo {
    /// Marks the start of a change: the version becomes odd. `lowest` is the lowest position
    /// known to be touched already (`u32::MAX`: none yet; 0 for a removal).
    fn begin_change(&self, lowest: u32) {
        let before = self.version.fetch_add(1, Ordering::AcqRel);
        debug_assert!(before % 2 == 0, "changes of one slot do not overlap");
        self.lowest_touch
            .store(touch_word(before + 1, lowest), Ordering::Release);
    }

    /// Marks the end of a change: the version becomes even again.
    fn end_change(&self) {
        self.version.fetch_add(1, Ordering::Release);
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

/// A worker's state, its slot, and whether it has been removed.
pub(crate) struct Entry<S> {
    pub(crate) slot: u32,
    pub(crate) state: S,
    removed: bool,
}

/// See the module docs.
pub(crate) struct Registry<S> {
    workers: DashMap<Worker, Arc<Mutex<Entry<S>>>, FxBuildHasher>,
    slots: Segmented<SlotInfo>,
    free_slots: Mutex<Vec<u32>>,
    next_slot: AtomicU32,
    worker_blocks: AtomicU64,
}

impl<S: Default> Registry<S> {
    pub(crate) fn new() -> Self {
        Self {
            workers: DashMap::with_hasher(FxBuildHasher),
            slots: Segmented::new(),
            free_slots: Mutex::new(Vec::new()),
            next_slot: AtomicU32::new(0),
            worker_blocks: AtomicU64::new(0),
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
        if info.version.load(Ordering::Relaxed) == 0 {
            info.version.store(1, Ordering::Relaxed); // a new slot starts as a free one
        }
        info.worker_id.store(worker.worker_id, Ordering::Relaxed);
        info.dp_rank.store(worker.dp_rank, Ordering::Relaxed);
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
        let mut f = Some(f);
        loop {
            // Fast path: a known worker is found under a shard read lock, no Arc clone.
            // Holding that read lock while `f` runs only delays creating or removing other
            // workers of the same shard; `f` never touches this map.
            if let Some(shared) = self.workers.get(&worker) {
                let mut guard = shared.lock();
                if !guard.removed {
                    let f = f.take().expect("f runs once");
                    return Some(f(&mut guard));
                }
                continue; // removed between lookup and lock: look again
            }
            if !create {
                return None;
            }
            self.workers.entry(worker).or_insert_with(|| {
                Arc::new(Mutex::new(Entry {
                    slot: self.allocate_slot(worker),
                    state: S::default(),
                    removed: false,
                }))
            });
        }
    }

    /// Removes a worker: `purge` drops its blocks from the index structures while its entry is
    /// locked, then the slot is recycled.
    pub(crate) fn remove(&self, worker: Worker, purge: impl FnOnce(&mut Entry<S>)) {
        let Some((_, entry)) = self.workers.remove(&worker) else {
            return;
        };
        let mut guard: MutexGuard<'_, Entry<S>> = entry.lock();
        // The version stays odd until the slot is given to another worker; a removal touches
        // everything (position 0).
        self.info(guard.slot).begin_change(0);
        purge(&mut guard);
        guard.removed = true;
        self.info(guard.slot).free.store(true, Ordering::Release);
        self.free_slots.lock().push(guard.slot);
    }

    /// Runs `change` on the worker's blocks as one change of its slot's version (see the
    /// module docs): readers that overlap it do not trust what they read of this worker.
    pub(crate) fn change<R>(
        &self,
        entry: &mut Entry<S>,
        change: impl FnOnce(&mut S, u32) -> R,
    ) -> R {
        let info = self.info(entry.slot);
        info.begin_change(u32::MAX);
        let result = change(&mut entry.state, entry.slot);
        info.end_change();
        result
    }

    fn info(&self, slot: u32) -> &SlotInfo {
        self.slots
            .get(slot as usize)
            .expect("a known worker's slot is allocated")
    }

    /// Records that the change in progress on `slot` is about to touch `position` (call it
    /// before changing what readers see there). Only the worker's lock holder calls it.
    #[inline]
    pub(crate) fn touch(&self, slot: u32, position: u32) {
        if let Some(info) = self.slots.get(slot as usize) {
            let word = info.lowest_touch.load(Ordering::Relaxed);
            if (word as u32) > position {
                info.lowest_touch
                    .store(touch_word(word >> 32, position), Ordering::Release);
            }
        }
    }

    /// The slot's worker if at most one change overlapped the reads this validates (the one
    /// in progress at `version`, read before them, or else the next one) and it has touched
    /// no position up to `reach` (so far, if it is still in progress). The worker's blocks at
    /// positions up to `reach` were then the same at every instant of those reads.
    #[inline]
    pub(crate) fn owner_if_untouched(&self, slot: u32, version: u64, reach: u32) -> Option<Worker> {
        let info = self.slots.get(slot as usize)?;
        let now = info.version.load(Ordering::Acquire);
        let change = version | 1; // the odd version of the one change allowed
        if now != change && now != change + 1 {
            return None;
        }
        let word = info.lowest_touch.load(Ordering::Acquire);
        // A removal publishes position 0, so a slot reused by another worker never passes.
        if word >> 32 != change & u64::from(u32::MAX) || (word as u32) <= reach {
            return None;
        }
        let worker = Worker::new(
            info.worker_id.load(Ordering::Relaxed),
            info.dp_rank.load(Ordering::Relaxed),
        );
        fence(Ordering::Acquire);
        (info.version.load(Ordering::Relaxed) == now).then_some(worker)
    }

    /// A slot's version, read before a reader reads the index about it.
    #[inline]
    pub(crate) fn version(&self, slot: u32) -> Option<u64> {
        Some(
            self.slots
                .get(slot as usize)?
                .version
                .load(Ordering::Acquire),
        )
    }

    /// The slot's worker if its version is still `version` and even (read before the reads
    /// this validates): then those reads saw one stable state of that worker.
    #[inline]
    pub(crate) fn owner_if_unchanged(&self, slot: u32, version: u64) -> Option<Worker> {
        let info = self.slots.get(slot as usize)?;
        let worker = Worker::new(
            info.worker_id.load(Ordering::Relaxed),
            info.dp_rank.load(Ordering::Relaxed),
        );
        fence(Ordering::Acquire);
        (version % 2 == 0 && info.version.load(Ordering::Relaxed) == version).then_some(worker)
    }

    /// Whose a slot is (valid only if its version, read before, is unchanged after).
    #[inline]
    pub(crate) fn worker_at(&self, slot: u32) -> Worker {
        match self.slots.get(slot as usize) {
            Some(info) => Worker::new(
                info.worker_id.load(Ordering::Relaxed),
                info.dp_rank.load(Ordering::Relaxed),
            ),
            None => Worker::default(),
        }
    }

    /// The slot's current worker and version, read while the slot is stable (waiting out a
    /// change in progress); `None` once the slot is free (its worker was removed).
    pub(crate) fn stable_owner(&self, slot: u32) -> Option<SlotSnapshot> {
        let info = self.slots.get(slot as usize)?;
        let mut waits = 0u32;
        loop {
            let version = info.version.load(Ordering::Acquire);
            if version % 2 == 1 {
                if info.free.load(Ordering::Acquire) {
                    return None;
                }
                // A change of this worker is being applied: usually a few hundred ns.
                waits += 1;
                if waits < 1 << 6 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
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
                .is_some_and(|info| info.version.load(Ordering::Relaxed) == snapshot.version)
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
    pub(crate) fn add_blocks(&self, delta: i64) {
        if delta >= 0 {
            self.worker_blocks
                .fetch_add(delta as u64, Ordering::Relaxed);
        } else {
            self.worker_blocks
                .fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
        }
    }

    /// Sum over workers of the names they hold.
    pub(crate) fn worker_blocks(&self) -> u64 {
        self.worker_blocks.load(Ordering::Relaxed)
    }
}
