//! The worker registry: per-worker state behind a mutex, and slot numbers for readers.
//!
//! Each known worker owns a small integer *slot*. Index structures store slots, not workers;
//! readers turn a slot back into a worker with [`Registry::worker_of`] without taking a lock.
//! A worker's state is changed only under its mutex, so events of one worker applied from
//! several threads at once are serialised, and a removal never races an event of the same
//! worker into a half-purged state.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
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
    /// Backend-defined: for the positional index, non-zero when a jump over this worker's
    /// blocks cannot be trusted (it holds a block whose parent it does not hold, or an event
    /// is being applied to it right now).
    pub(crate) unsafe_jumps: AtomicU32,
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
        info.worker_id.store(worker.worker_id, Ordering::Relaxed);
        info.dp_rank.store(worker.dp_rank, Ordering::Relaxed);
        info.unsafe_jumps.store(0, Ordering::Release);
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
        purge(&mut guard);
        guard.removed = true;
        self.free_slots.lock().push(guard.slot);
    }

    /// Every known worker with the given id.
    pub(crate) fn workers_with_id(&self, worker_id: u64) -> Vec<Worker> {
        self.workers
            .iter()
            .map(|e| *e.key())
            .filter(|w| w.worker_id == worker_id)
            .collect()
    }

    /// The worker a slot belongs to (lock-free; may be stale while that worker is removed).
    #[inline]
    pub(crate) fn worker_of(&self, slot: u32) -> Worker {
        match self.slots.get(slot as usize) {
            Some(info) => Worker::new(
                info.worker_id.load(Ordering::Relaxed),
                info.dp_rank.load(Ordering::Relaxed),
            ),
            None => Worker::default(),
        }
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
