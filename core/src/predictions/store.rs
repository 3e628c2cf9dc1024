//! The predicted blocks of one indexer: one entry per (worker, identity), in three linked
//! lists at once (all entries from least to most recently predicted, each worker's entries
//! in the same order, and the holders of each identity), within a byte bound.
//!
//! Every structure grows only through [`Store::reserve`], which first drops the least
//! recently predicted entries when the growth would take [`Store::bytes`] above the bound,
//! so `bytes() <= max_bytes` at all times (capacities are counted, not lengths).

use rustc_hash::FxHashMap;

use super::table::{Table, NONE};
use crate::model::Worker;

/// One predicted block of one worker.
#[derive(Debug, Clone, Copy)]
struct Entry {
    identity: u64,
    /// Clock nanoseconds at which it stops counting.
    expires: u64,
    /// Index of the worker's list; `NONE` while the entry is free.
    list: u32,
    /// All entries, from least to most recently predicted (`newer` links free entries too).
    older: u32,
    newer: u32,
    /// The worker's entries, in the same order.
    w_older: u32,
    w_newer: u32,
    /// The other holders of the identity (`h_prev` is `NONE` at the table's head).
    h_prev: u32,
    h_next: u32,
}

/// One worker's entries.
#[derive(Debug, Clone, Copy)]
struct WorkerList {
    worker: Worker,
    oldest: u32,
    newest: u32,
    len: u32,
}

/// Why entries left the store, counted since the indexer was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Drops {
    pub(crate) for_bytes: u64,
    pub(crate) for_capacity: u64,
    pub(crate) expired: u64,
    pub(crate) confirmed: u64,
    pub(crate) by_events: u64,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Store {
    entries: Vec<Entry>,
    free: u32,
    /// Identity -> the first of its holders.
    table: Table,
    /// (worker's list, identity) -> the entry.
    pairs: Table,
    oldest: u32,
    newest: u32,
    lists: Vec<WorkerList>,
    free_lists: Vec<u32>,
    by_worker: FxHashMap<Worker, u32>,
    live: usize,
    max_bytes: usize,
    worker_capacity: u32,
    pub(crate) drops: Drops,
}

/// What one more entry may need.
#[derive(Clone, Copy)]
struct Need {
    entry: bool,
    identity: Option<u64>,
    list: bool,
}

impl Store {
    /// An empty store within `max_bytes`, each worker holding at most `worker_capacity`
    /// entries (0: no per-worker bound).
    pub(crate) fn new(max_bytes: usize, worker_capacity: usize) -> Self {
        Self {
            entries: Vec::new(),
            free: NONE,
            table: Table::default(),
            pairs: Table::default(),
            oldest: NONE,
            newest: NONE,
            lists: Vec::new(),
            free_lists: Vec::new(),
            by_worker: FxHashMap::default(),
            live: 0,
            max_bytes,
            worker_capacity: u32::try_from(worker_capacity).unwrap_or(u32::MAX),
            drops: Drops::default(),
        }
    }

    /// Entries held (expired ones not yet dropped included).
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Whether the worker has at least one entry.
    pub(crate) fn has_worker(&self, worker: Worker) -> bool {
        self.by_worker.contains_key(&worker)
    }

    /// Workers with at least one entry.
    pub(crate) fn workers(&self) -> usize {
        self.by_worker.len()
    }

    /// Bytes the store holds: the capacities of its structures.
    pub(crate) fn bytes(&self) -> usize {
        use std::mem::size_of;
        self.entries.capacity() * size_of::<Entry>()
            + self.table.bytes()
            + self.pairs.bytes()
            + self.lists.capacity() * size_of::<WorkerList>()
            + self.free_lists.capacity() * size_of::<u32>()
            + map_bytes(self.by_worker.capacity(), size_of::<(Worker, u32)>())
    }

    /// Credits `worker` with the chain `identities` until `expires`: each block already
    /// predicted for it is refreshed, the others added, and all become the most recently
    /// predicted, the first block most recent of all (so a bound drops a chain's deepest
    /// blocks first). Expired entries at the old end are dropped first (at most a few per
    /// block). A block that cannot fit even in an emptied store is not added.
    pub(crate) fn predict(&mut self, worker: Worker, identities: &[u64], expires: u64, now: u64) {
        self.reap(now, identities.len() + 8);
        let Some(list) = self.list_for(worker) else {
            return;
        };
        for &identity in identities.iter().rev() {
            if let Some(e) = self.find(list, identity) {
                self.entries[e as usize].expires = expires;
                self.unlink_orders(e);
                self.link_newest(e);
                continue;
            }
            if self.worker_capacity > 0 && self.lists[list as usize].len >= self.worker_capacity {
                let oldest = self.lists[list as usize].oldest;
                self.remove(oldest, Some(list));
                self.drops.for_capacity += 1;
            }
            let need = Need {
                entry: true,
                identity: Some(identity),
                list: false,
            };
            if !self.reserve(need, Some(list)) {
                break;
            }
            self.add(list, identity, expires);
        }
        self.release_if_empty(list);
    }

    /// Drops the worker's entries for these identities; counts them as `confirmed` (a Stored
    /// of them) or as dropped by events (a Removed).
    pub(crate) fn drop_identities(&mut self, worker: Worker, identities: &[u64], confirmed: bool) {
        let Some(&list) = self.by_worker.get(&worker) else {
            return;
        };
        for &identity in identities {
            if let Some(e) = self.find(list, identity) {
                self.remove(e, Some(list));
                if confirmed {
                    self.drops.confirmed += 1;
                } else {
                    self.drops.by_events += 1;
                }
            }
        }
        self.release_if_empty(list);
    }

    /// Drops every entry of one worker.
    pub(crate) fn drop_worker(&mut self, worker: Worker) {
        let Some(&list) = self.by_worker.get(&worker) else {
            return;
        };
        while self.lists[list as usize].len > 0 {
            let oldest = self.lists[list as usize].oldest;
            self.remove(oldest, Some(list));
            self.drops.by_events += 1;
        }
        self.release_if_empty(list);
    }

    /// Drops every entry of every dp rank of `worker_id`.
    pub(crate) fn drop_worker_id(&mut self, worker_id: u64) {
        let ranks: Vec<Worker> = self
            .by_worker
            .keys()
            .filter(|w| w.worker_id == worker_id)
            .copied()
            .collect();
        for worker in ranks {
            self.drop_worker(worker);
        }
    }

    /// Drops up to `at_most` expired entries from the old end.
    pub(crate) fn reap(&mut self, now: u64, at_most: usize) {
        for _ in 0..at_most {
            let e = self.oldest;
            if e == NONE || self.entries[e as usize].expires > now {
                return;
            }
            self.remove(e, None);
            self.drops.expired += 1;
        }
    }

    /// How far the worker's live predictions carry a query past `from`: the first position
    /// at or after `from` whose identity is not predicted (unexpired at `now`) for it.
    pub(crate) fn extend(
        &self,
        worker: Worker,
        identities: &[u64],
        from: usize,
        now: u64,
    ) -> usize {
        let Some(&list) = self.by_worker.get(&worker) else {
            return from;
        };
        let mut at = from;
        while at < identities.len() {
            match self.find(list, identities[at]) {
                Some(e) if self.entries[e as usize].expires > now => at += 1,
                _ => break,
            }
        }
        at
    }

    /// Calls `f` with each worker holding an unexpired prediction of `identity`.
    pub(crate) fn holders(&self, identity: u64, now: u64, mut f: impl FnMut(Worker)) {
        let mut e = self.head(identity);
        while e != NONE {
            let entry = &self.entries[e as usize];
            if entry.expires > now {
                f(self.lists[entry.list as usize].worker);
            }
            e = entry.h_next;
        }
    }

    // ---- internals ----

    fn head(&self, identity: u64) -> u32 {
        let entries = &self.entries;
        self.table
            .find(identity, |e| entries[e as usize].identity == identity)
            .map_or(NONE, |bucket| self.table.get(bucket))
    }

    /// The worker's entry for `identity`: one probe of the pairs table, however many other
    /// workers hold the identity.
    fn find(&self, list: u32, identity: u64) -> Option<u32> {
        let entries = &self.entries;
        self.pairs
            .find(pair_hash(list, identity), |e| {
                let entry = &entries[e as usize];
                entry.identity == identity && entry.list == list
            })
            .map(|bucket| self.pairs.get(bucket))
    }

    /// The worker's list, created if needed (None when the bound leaves no room for it).
    fn list_for(&mut self, worker: Worker) -> Option<u32> {
        if let Some(&list) = self.by_worker.get(&worker) {
            return Some(list);
        }
        let need = Need {
            entry: false,
            identity: None,
            list: true,
        };
        if !self.reserve(need, None) {
            return None;
        }
        let fresh = WorkerList {
            worker,
            oldest: NONE,
            newest: NONE,
            len: 0,
        };
        let list = match self.free_lists.pop() {
            Some(list) => {
                self.lists[list as usize] = fresh;
                list
            }
            None => {
                self.lists.push(fresh);
                (self.lists.len() - 1) as u32
            }
        };
        self.by_worker.insert(worker, list);
        Some(list)
    }

    /// Frees a worker's list once it holds nothing.
    fn release_if_empty(&mut self, list: u32) {
        let l = self.lists[list as usize];
        if l.len == 0 && self.by_worker.get(&l.worker) == Some(&list) {
            self.by_worker.remove(&l.worker);
            self.free_lists.push(list);
        }
    }

    /// Makes room for what one more entry (or list) needs, dropping the least recently
    /// predicted entries while the growth would pass the bound; false when even an empty
    /// store has no room. `keep` is a list not to free meanwhile.
    fn reserve(&mut self, need: Need, keep: Option<u32>) -> bool {
        use std::mem::size_of;
        loop {
            let entries_full =
                need.entry && self.free == NONE && self.entries.len() == self.entries.capacity();
            let new_identity = need.identity.is_some_and(|i| self.head(i) == NONE);
            let table_growth = if new_identity {
                self.table.growth_bytes()
            } else {
                0
            } + if need.entry {
                self.pairs.growth_bytes()
            } else {
                0
            };
            let lists_full = need.list
                && self.free_lists.is_empty()
                && self.lists.len() == self.lists.capacity();
            let list_growth = if lists_full {
                self.lists.capacity().max(4) * (size_of::<WorkerList>() + size_of::<u32>())
            } else {
                0
            };
            let map_growth = if need.list && self.by_worker.len() >= self.by_worker.capacity() {
                let item = size_of::<(Worker, u32)>();
                map_bytes(self.by_worker.capacity() * 2 + 1, item)
                    - map_bytes(self.by_worker.capacity(), item)
            } else {
                0
            };
            let room = self.max_bytes.saturating_sub(self.bytes());
            let fixed = table_growth + list_growth + map_growth;
            // Entries grow by as much as fits, up to double (at least 8).
            let entries_added = if entries_full {
                let wanted = self.entries.capacity().max(8);
                wanted.min(room.saturating_sub(fixed) / size_of::<Entry>())
            } else {
                1
            };
            if fixed <= room && entries_added > 0 {
                if entries_full {
                    self.entries.reserve_exact(entries_added);
                }
                let entries = &self.entries;
                if new_identity && self.table.growth_bytes() > 0 {
                    self.table.grow(|e| entries[e as usize].identity);
                }
                if need.entry && self.pairs.growth_bytes() > 0 {
                    self.pairs.grow(|e| entry_pair_hash(&entries[e as usize]));
                }
                if list_growth > 0 {
                    self.lists.reserve_exact(self.lists.capacity().max(4));
                    let spare = self.lists.capacity() - self.free_lists.len();
                    self.free_lists.reserve_exact(spare);
                }
                if map_growth > 0 {
                    self.by_worker.reserve(1);
                }
                return true;
            }
            if self.live == 0 {
                return false;
            }
            let oldest = self.oldest;
            self.remove(oldest, keep);
            self.drops.for_bytes += 1;
        }
    }

    /// Adds a new entry (room reserved) as the most recently predicted.
    fn add(&mut self, list: u32, identity: u64, expires: u64) {
        let entry = Entry {
            identity,
            expires,
            list,
            older: NONE,
            newer: NONE,
            w_older: NONE,
            w_newer: NONE,
            h_prev: NONE,
            h_next: NONE,
        };
        let e = if self.free != NONE {
            let e = self.free;
            self.free = self.entries[e as usize].newer;
            self.entries[e as usize] = entry;
            e
        } else {
            self.entries.push(entry);
            (self.entries.len() - 1) as u32
        };
        self.pairs.insert(pair_hash(list, identity), e);
        // Holders: the new entry becomes the head.
        let entries = &self.entries;
        match self
            .table
            .find(identity, |x| entries[x as usize].identity == identity)
        {
            Some(bucket) => {
                let head = self.table.get(bucket);
                self.entries[e as usize].h_next = head;
                self.entries[head as usize].h_prev = e;
                self.table.set(bucket, e);
            }
            None => self.table.insert(identity, e),
        }
        self.lists[list as usize].len += 1;
        self.live += 1;
        self.link_newest(e);
    }

    /// Removes an entry from every list and frees it; frees its worker's list if left empty,
    /// unless it is `keep`.
    fn remove(&mut self, e: u32, keep: Option<u32>) {
        self.unlink_orders(e);
        let Entry {
            identity,
            list,
            h_prev,
            h_next,
            ..
        } = self.entries[e as usize];
        let entries = &self.entries;
        let pair = self
            .pairs
            .find(pair_hash(list, identity), |x| x == e)
            .expect("every entry is in the pairs table");
        self.pairs
            .remove_at(pair, |x| entry_pair_hash(&entries[x as usize]));
        if h_next != NONE {
            self.entries[h_next as usize].h_prev = h_prev;
        }
        if h_prev != NONE {
            self.entries[h_prev as usize].h_next = h_next;
        } else {
            let bucket = self
                .table
                .find(identity, |x| x == e)
                .expect("a head entry is in the table");
            if h_next != NONE {
                self.table.set(bucket, h_next);
            } else {
                let entries = &self.entries;
                self.table
                    .remove_at(bucket, |x| entries[x as usize].identity);
            }
        }
        self.lists[list as usize].len -= 1;
        self.live -= 1;
        let entry = &mut self.entries[e as usize];
        entry.list = NONE;
        entry.newer = self.free;
        self.free = e;
        if keep != Some(list) {
            self.release_if_empty(list);
        }
    }

    /// Unlinks an entry from the global and its worker's order.
    fn unlink_orders(&mut self, e: u32) {
        let Entry {
            older,
            newer,
            w_older,
            w_newer,
            list,
            ..
        } = self.entries[e as usize];
        match older {
            NONE => self.oldest = newer,
            o => self.entries[o as usize].newer = newer,
        }
        match newer {
            NONE => self.newest = older,
            n => self.entries[n as usize].older = older,
        }
        let l = &mut self.lists[list as usize];
        match w_older {
            NONE => l.oldest = w_newer,
            o => self.entries[o as usize].w_newer = w_newer,
        }
        let l = &mut self.lists[list as usize];
        match w_newer {
            NONE => l.newest = w_older,
            n => self.entries[n as usize].w_older = w_older,
        }
    }

    /// Links an entry as the most recent, globally and in its worker's order.
    fn link_newest(&mut self, e: u32) {
        let list = self.entries[e as usize].list;
        let newest = self.newest;
        let w_newest = self.lists[list as usize].newest;
        let entry = &mut self.entries[e as usize];
        entry.older = newest;
        entry.newer = NONE;
        entry.w_older = w_newest;
        entry.w_newer = NONE;
        match newest {
            NONE => self.oldest = e,
            n => self.entries[n as usize].newer = e,
        }
        self.newest = e;
        match w_newest {
            NONE => self.lists[list as usize].oldest = e,
            n => self.entries[n as usize].w_newer = e,
        }
        self.lists[list as usize].newest = e;
    }
}

/// The hash of a (worker's list, identity) pair in the pairs table.
fn pair_hash(list: u32, identity: u64) -> u64 {
    identity
        ^ u64::from(list)
            .wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            .rotate_left(29)
}

/// The pairs-table hash of an entry.
fn entry_pair_hash(entry: &Entry) -> u64 {
    pair_hash(entry.list, entry.identity)
}

/// Bytes of a hash map able to hold `capacity` items of `item` bytes: its buckets (7/8
/// full at most, a power of two) with one control byte each.
fn map_bytes(capacity: usize, item: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = (capacity * 8 / 7 + 1).next_power_of_two();
    buckets * (item + 1)
}
