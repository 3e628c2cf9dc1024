//! Per-publisher maps from an engine's block name to a value derived along its chain (the
//! block's full engine digest for the hash check, its llm-d key for that scheme), changed
//! batch by batch: a batch's changes are staged in a [`BatchNames`] and committed only once
//! the whole payload has decoded, so a malformed batch changes nothing here either.

use std::collections::{HashMap, HashSet};

use crate::model::Worker;

/// The committed names of every publisher.
#[derive(Debug, Clone)]
pub(crate) struct ChainNames<V> {
    workers: HashMap<Worker, HashMap<u64, V>>,
}

impl<V> Default for ChainNames<V> {
    fn default() -> Self {
        Self {
            workers: HashMap::new(),
        }
    }
}

impl<V: Copy> ChainNames<V> {
    /// The committed value of `name` for `worker`, seen through a batch's staged changes.
    pub(crate) fn get(&self, worker: Worker, staged: &BatchNames<V>, name: u64) -> Option<V> {
        if let Some(&value) = staged.inserted.get(&name) {
            return Some(value);
        }
        if staged.cleared || staged.removed.contains(&name) {
            return None;
        }
        self.workers.get(&worker)?.get(&name).copied()
    }

    /// Applies a batch's staged changes to `worker`, after clearing it when `clear_first`
    /// (the feed cleared the worker before the batch).
    pub(crate) fn commit(&mut self, worker: Worker, staged: BatchNames<V>, clear_first: bool) {
        if clear_first || staged.cleared {
            self.workers.remove(&worker);
        }
        if staged.inserted.is_empty() && staged.removed.is_empty() {
            return;
        }
        let names = self.workers.entry(worker).or_default();
        for name in &staged.removed {
            names.remove(name);
        }
        names.extend(staged.inserted);
        if names.is_empty() {
            self.workers.remove(&worker);
        }
    }

    /// Drops one publisher's names.
    pub(crate) fn forget(&mut self, worker: Worker) {
        self.workers.remove(&worker);
    }

    /// Drops the names of every dp rank of a worker.
    pub(crate) fn forget_worker(&mut self, worker_id: u64) {
        self.workers.retain(|w, _| w.worker_id != worker_id);
    }

    /// Drops every publisher's names.
    pub(crate) fn clear(&mut self) {
        self.workers.clear();
    }

    /// Names held, over every publisher.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.workers.values().map(HashMap::len).sum()
    }
}

/// One batch's staged changes to one publisher's names, in event order.
#[derive(Debug, Clone)]
pub(crate) struct BatchNames<V> {
    cleared: bool,
    inserted: HashMap<u64, V>,
    removed: HashSet<u64>,
}

impl<V> Default for BatchNames<V> {
    fn default() -> Self {
        Self {
            cleared: false,
            inserted: HashMap::new(),
            removed: HashSet::new(),
        }
    }
}

impl<V> BatchNames<V> {
    /// `name` now holds `value`.
    pub(crate) fn insert(&mut self, name: u64, value: V) {
        self.removed.remove(&name);
        self.inserted.insert(name, value);
    }

    /// `name` is gone.
    pub(crate) fn remove(&mut self, name: u64) {
        self.inserted.remove(&name);
        self.removed.insert(name);
    }

    /// Every name of the publisher is gone.
    pub(crate) fn clear(&mut self) {
        self.inserted.clear();
        self.removed.clear();
        self.cleared = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_changes_show_through_and_apply_on_commit_only() {
        let w = Worker::new(1, 0);
        let mut names = ChainNames::<u64>::default();
        let mut staged = BatchNames::default();
        staged.insert(10, 100);
        staged.insert(11, 110);
        assert_eq!(names.get(w, &staged, 10), Some(100));
        assert_eq!(names.get(w, &BatchNames::default(), 10), None);
        names.commit(w, staged, false);
        let mut staged = BatchNames::default();
        staged.remove(10);
        assert_eq!(names.get(w, &staged, 10), None);
        assert_eq!(names.get(w, &staged, 11), Some(110));
        staged.clear();
        assert_eq!(names.get(w, &staged, 11), None);
        staged.insert(12, 120);
        names.commit(w, staged, false);
        assert_eq!(names.len(), 1);
        names.commit(w, BatchNames::default(), true);
        assert_eq!(names.len(), 0);
    }
}
