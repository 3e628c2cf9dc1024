//! Whose each slot is: the table readers turn a search's slots into workers with.
//!
//! An answer names a few dozen slots, each turned into its worker by one read of this
//! table. The first [`HEAD`] slots (every slot, for most indexes) sit in one array allocated
//! with the table, so that read is an index into it and no check of a lazily allocated
//! chunk; slots past them grow in a [`Segmented`] array. Elements never move, so readers
//! take no lock.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::segmented::Segmented;
use crate::model::Worker;

/// Slots kept in the array allocated with the table: sixteen bytes each, 16 KiB in all.
const HEAD: usize = 1024;

/// One slot's owner: sixteen bytes, so that the many slots of an answer are turned into
/// workers from a few cache lines. Written only when the slot is given to a worker (see
/// `Registry::worker_at` for how readers trust it).
#[derive(Default)]
struct Owner {
    worker_id: AtomicU64,
    dp_rank: AtomicU32,
}

/// See the module docs.
pub(crate) struct Owners {
    head: Box<[Owner]>,
    rest: Segmented<Owner>,
}

impl Owners {
    pub(crate) fn new() -> Self {
        Self {
            head: (0..HEAD).map(|_| Owner::default()).collect(),
            rest: Segmented::new(),
        }
    }

    /// The worker last given `slot` (the default worker if no worker ever had it).
    #[inline]
    pub(crate) fn get(&self, slot: u32) -> Worker {
        let slot = slot as usize;
        let owner = match self.head.get(slot) {
            Some(owner) => Some(owner),
            None => self.rest.get(slot - HEAD),
        };
        owner.map_or(Worker::default(), |owner| {
            Worker::new(
                owner.worker_id.load(Ordering::Relaxed),
                owner.dp_rank.load(Ordering::Relaxed),
            )
        })
    }

    /// Records that `slot` is now `worker`'s (readers order this against the slot's version
    /// themselves).
    pub(crate) fn set(&self, slot: u32, worker: Worker) {
        let slot = slot as usize;
        let owner = match self.head.get(slot) {
            Some(owner) => owner,
            None => self.rest.get_or_alloc(slot - HEAD),
        };
        owner.worker_id.store(worker.worker_id, Ordering::Relaxed);
        owner.dp_rank.store(worker.dp_rank, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_in_the_head_and_past_it_keep_their_owners() {
        let owners = Owners::new();
        let slots = [
            0u32,
            1,
            HEAD as u32 - 1,
            HEAD as u32,
            HEAD as u32 + 1,
            70_000,
        ];
        for &slot in &slots {
            assert_eq!(owners.get(slot), Worker::default());
        }
        for &slot in &slots {
            owners.set(slot, Worker::new(u64::from(slot) + 7, slot ^ 3));
        }
        for &slot in &slots {
            assert_eq!(owners.get(slot), Worker::new(u64::from(slot) + 7, slot ^ 3));
        }
        assert_eq!(owners.get(2), Worker::default());
        assert_eq!(owners.get(HEAD as u32 + 2), Worker::default());
    }
}
