//! One worker's blocks for the positional index, packed: a slab of fixed-size records and two
//! open-addressing indexes over it that store only `u32` slab positions.
//!
//! A record is one prefix identity the worker knows: held (it has names), or a not-held
//! parent kept because held children point to it. Its parent is a slab position, not a key,
//! so following it costs no hash probe; the indexes (by engine name, by identity) read their
//! keys from the slab. Freed records go on a free list and are reused, so a worker's blocks
//! cost no heap allocation each once its slab and tables have grown. Freeing a record does not
//! probe the identity index: its entry goes stale (a lookup checks that the record it leads to
//! is live and still has that identity), and the index is rebuilt in place when stale entries
//! would make it grow.
//!
//! A record keeps one of its names inline (nearly every block has exactly one); further names
//! of the same identity (the same prefix announced under other names) live in a side map.
//!
//! Orphans are counted exactly: held records at a position > 0 whose parent is not held
//! (see the positional module docs: jumps over a worker are trusted only when it has none).

use hashbrown::HashTable;
use rustc_hash::FxHashMap;

/// A slab position meaning "none".
pub(crate) const NONE: u32 = u32::MAX;

/// The bit of [`Record::names`] telling that the record's inline `name` is one of its names.
const INLINE_NAME: u32 = 1 << 31;

/// One identity a worker knows (40 bytes, no pointer).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    /// The prefix identity.
    pub(crate) identity: u64,
    /// The local hash of its last block (what readers' touch records compare).
    pub(crate) local: u64,
    /// One of its names, if `names` has [`INLINE_NAME`].
    name: u64,
    /// Its position (0-based) in the chain.
    pub(crate) position: u32,
    /// Held at a position > 0: the slab position of its parent's record. Free: the next free
    /// record. Not held (kept for its held children): where its parent's record was while it
    /// was held, a hint only (that record may have been freed and reused since; see
    /// [`Records::known_parent`]). Otherwise [`NONE`].
    parent: u32,
    /// How many names the worker holds for it (0: a not-held parent), plus [`INLINE_NAME`].
    names: u32,
    /// Held records whose parent is this one.
    children: u32,
}

impl Record {
    /// How many names the worker holds for this identity.
    pub(crate) fn name_count(&self) -> u32 {
        self.names & !INLINE_NAME
    }

    fn has_inline_name(&self) -> bool {
        self.names & INLINE_NAME != 0
    }

    fn is_free(&self) -> bool {
        self.names == 0 && self.children == 0
    }
}

/// A block about to get a name: where it is and what it continues.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placed {
    pub(crate) position: u32,
    pub(crate) local: u64,
    pub(crate) identity: u64,
    /// The parent's identity (meaningless at position 0).
    pub(crate) parent: u64,
}

/// A name dropped by [`Records::remove_name`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dropped {
    /// The record the name named (its fields as they were).
    pub(crate) record: Record,
    /// True if that was the identity's last name: it is no longer held.
    pub(crate) last: bool,
}

/// A 64-bit key spread over all bits (the table uses the high bits as tags, the low ones as
/// bucket numbers; engine names in tests are often small integers).
#[inline]
fn spread(key: u64) -> u64 {
    let product = u128::from(key).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (product as u64) ^ ((product >> 64) as u64)
}

/// One worker's records (see the module docs).
pub(crate) struct Records {
    slab: Vec<Record>,
    /// Head of the free list ([`NONE`] if empty); free records chain through `parent`.
    free: u32,
    /// Records by identity: every record that is not free, and stale entries of records freed
    /// since the last [`Records::reindex`] (a lookup skips them: their record is free or now
    /// has another identity), so that freeing a record costs no probe here.
    by_identity: HashTable<u32>,
    /// Records freed since the last reindex: at least as many as the stale entries.
    released: u32,
    /// Records by their inline name.
    by_name: HashTable<u32>,
    /// Names beyond each record's inline one -> record.
    extra_names: FxHashMap<u64, u32>,
    /// Held records at position > 0 whose parent is not held.
    orphans: u32,
}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Records")
            .field("slab", &self.slab.len())
            .field("names", &self.names())
            .field("orphans", &self.orphans)
            .finish_non_exhaustive()
    }
}

impl Records {
    /// The record at a slab position.
    pub(crate) fn get(&self, at: u32) -> &Record {
        &self.slab[at as usize]
    }

    /// Held records at position > 0 whose parent is not held.
    pub(crate) fn orphans(&self) -> u32 {
        self.orphans
    }

    /// Names held in all.
    pub(crate) fn names(&self) -> usize {
        self.by_name.len() + self.extra_names.len()
    }

    /// The record `name` names.
    #[inline]
    pub(crate) fn find_name(&self, name: u64) -> Option<u32> {
        let slab = &self.slab;
        if let Some(&at) = self
            .by_name
            .find(spread(name), |&at| slab[at as usize].name == name)
        {
            return Some(at);
        }
        if self.extra_names.is_empty() {
            return None;
        }
        self.extra_names.get(&name).copied()
    }

    /// The record of `identity`, held or not.
    #[inline]
    pub(crate) fn find_identity(&self, identity: u64) -> Option<u32> {
        let slab = &self.slab;
        self.by_identity
            .find(spread(identity), |&at| {
                let record = &slab[at as usize];
                record.identity == identity && !record.is_free()
            })
            .copied()
    }

    /// Every held record, in no order.
    pub(crate) fn held(&self) -> impl Iterator<Item = &Record> {
        self.slab.iter().filter(|r| r.name_count() > 0)
    }

    /// The record a held record continues (its parent's, held or not); `None` at position 0.
    pub(crate) fn parent_of(&self, record: &Record) -> Option<&Record> {
        (record.name_count() > 0 && record.parent != NONE).then(|| self.get(record.parent))
    }

    /// The parent of a record the worker does not hold, if it can still be told for sure: the
    /// record it continued while held is live and, with this record's local hash, gives this
    /// record's identity (a reused record gives another one but with probability 2^-64).
    pub(crate) fn known_parent(&self, record: &Record) -> Option<&Record> {
        if record.name_count() > 0 || record.position == 0 || record.parent == NONE {
            return None;
        }
        let parent = self.slab.get(record.parent as usize)?;
        let continues = !parent.is_free()
            && parent.position.checked_add(1) == Some(record.position)
            && crate::identity::mix(parent.identity, record.local) == record.identity;
        continues.then_some(parent)
    }

    /// Every name held, with the identity it names, in no order.
    pub(crate) fn all_names(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let inline = self
            .slab
            .iter()
            .filter(|r| r.has_inline_name())
            .map(|r| (r.name, r.identity));
        let extra = self
            .extra_names
            .iter()
            .map(|(&name, &at)| (name, self.get(at).identity));
        inline.chain(extra)
    }

    /// Records what a restored snapshot says of a block the worker knows of but does not hold
    /// (a path node): its local hash and the identity of its parent (`None` at position 0);
    /// nothing if the worker holds it or knows nothing of it.
    pub(crate) fn restore_path(&mut self, identity: u64, local: u64, parent: Option<u64>) {
        let Some(at) = self.find_identity(identity) else {
            return;
        };
        let parent_at = parent.and_then(|p| self.find_identity(p)).unwrap_or(NONE);
        let record = &mut self.slab[at as usize];
        if record.name_count() == 0 {
            record.local = local;
            record.parent = parent_at;
        }
    }

    /// Reserves room for `records` more records and `names` more names.
    pub(crate) fn reserve(&mut self, records: usize, names: usize) {
        self.slab.reserve(records);
        let slab = &self.slab;
        self.by_identity
            .reserve(records, |&i| spread(slab[i as usize].identity));
        self.by_name
            .reserve(names, |&i| spread(slab[i as usize].name));
    }

    /// A new record for `identity` (not held, no children: the caller makes it live at once).
    fn allocate(&mut self, identity: u64, local: u64, position: u32) -> u32 {
        let record = Record {
            identity,
            local,
            name: 0,
            position,
            parent: NONE,
            names: 0,
            children: 0,
        };
        let at = if self.free == NONE {
            let at = u32::try_from(self.slab.len()).expect("fewer than 2^32 records");
            assert!(at != NONE, "fewer than 2^32 - 1 records");
            self.slab.push(record);
            at
        } else {
            let at = self.free;
            self.free = self.slab[at as usize].parent;
            self.slab[at as usize] = record;
            at
        };
        if self.by_identity.len() == self.by_identity.capacity()
            && 4 * self.released as usize >= self.by_identity.len()
        {
            self.reindex(); // drop the stale entries rather than grow for them
        }
        let slab = &self.slab;
        self.by_identity
            .insert_unique(spread(identity), at, |&i| spread(slab[i as usize].identity));
        at
    }

    /// Rebuilds the index by identity from the records that are not free, in place.
    fn reindex(&mut self) {
        self.by_identity.clear();
        let slab = &self.slab;
        for (at, record) in slab.iter().enumerate() {
            if !record.is_free() {
                self.by_identity
                    .insert_unique(spread(record.identity), at as u32, |&i| {
                        spread(slab[i as usize].identity)
                    });
            }
        }
        self.released = 0;
    }

    /// Returns a record that has become free to the free list (its index entry goes stale).
    fn release(&mut self, at: u32) {
        self.released = self.released.saturating_add(1);
        let record = &mut self.slab[at as usize];
        debug_assert!(record.is_free());
        record.parent = self.free;
        self.free = at;
    }

    /// The record of `identity` at `position`, `hint` if it still is that record, else
    /// found or created (not held).
    fn record_for(&mut self, hint: u32, identity: u64, position: u32) -> u32 {
        if hint != NONE {
            let record = &self.slab[hint as usize];
            if !record.is_free() && record.identity == identity {
                return hint;
            }
        }
        match self.find_identity(identity) {
            Some(at) => at,
            None => self.allocate(identity, 0, position),
        }
    }

    /// Gives `name` (held by no record now) to `block`, whose parent's record is likely
    /// `parent_hint`. Returns the block's record and whether it just became held.
    pub(crate) fn add_name(&mut self, name: u64, block: &Placed, parent_hint: u32) -> (u32, bool) {
        debug_assert!(self.find_name(name).is_none());
        let at = match self.find_identity(block.identity) {
            Some(at) => at,
            None => self.allocate(block.identity, block.local, block.position),
        };
        let record = &mut self.slab[at as usize];
        if record.has_inline_name() {
            self.extra_names.insert(name, at);
        } else {
            record.name = name;
            record.names |= INLINE_NAME;
            let slab = &self.slab;
            self.by_name
                .insert_unique(spread(name), at, |&i| spread(slab[i as usize].name));
        }
        let record = &mut self.slab[at as usize];
        record.names += 1;
        if record.name_count() > 1 {
            return (at, false); // another name of an identity already held
        }
        // The identity becomes held (it may have been a not-held parent until now).
        record.position = block.position;
        record.local = block.local;
        self.orphans -= record.children;
        if block.position > 0 {
            let parent = self.record_for(parent_hint, block.parent, block.position - 1);
            let parent_record = &mut self.slab[parent as usize];
            parent_record.children += 1;
            if parent_record.name_count() == 0 {
                self.orphans += 1;
            }
            self.slab[at as usize].parent = parent;
        } else {
            self.slab[at as usize].parent = NONE;
        }
        (at, true)
    }

    /// Drops `name`; `None` if the worker does not hold it.
    pub(crate) fn remove_name(&mut self, name: u64) -> Option<Dropped> {
        let slab = &self.slab;
        let at = match self
            .by_name
            .find_entry(spread(name), |&at| slab[at as usize].name == name)
        {
            Ok(entry) => {
                let (at, _) = entry.remove();
                self.slab[at as usize].names &= !INLINE_NAME;
                at
            }
            Err(_) => self.extra_names.remove(&name)?,
        };
        let record = &mut self.slab[at as usize];
        record.names -= 1;
        let dropped = *record;
        if record.name_count() > 0 {
            return Some(Dropped {
                record: dropped,
                last: false,
            });
        }
        // No longer held: its children become orphans, it stops being its parent's child
        // (`parent` stays as a hint for snapshots, see `known_parent`).
        let children = record.children;
        self.orphans += children;
        if dropped.position > 0 {
            let parent = dropped.parent;
            let parent_record = &mut self.slab[parent as usize];
            parent_record.children -= 1;
            if parent_record.name_count() == 0 {
                self.orphans -= 1;
                if parent_record.children == 0 {
                    self.release(parent);
                }
            }
        }
        if children == 0 {
            self.release(at);
        }
        Some(Dropped {
            record: dropped,
            last: true,
        })
    }
}

impl Default for Records {
    fn default() -> Self {
        Records {
            slab: Vec::new(),
            free: NONE,
            by_identity: HashTable::new(),
            released: 0,
            by_name: HashTable::new(),
            extra_names: FxHashMap::default(),
            orphans: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Records {
        /// Records that are not free.
        fn live(&self) -> usize {
            self.slab.iter().filter(|r| !r.is_free()).count()
        }
    }

    /// A chain of identities `base + p` at positions `0..len` (locals `p`).
    fn chain(len: u32, base: u64) -> Vec<Placed> {
        (0..len)
            .map(|p| Placed {
                position: p,
                local: u64::from(p),
                identity: base + u64::from(p),
                parent: if p == 0 { 0 } else { base + u64::from(p) - 1 },
            })
            .collect()
    }

    /// Names `names[i]` for block `i` of `blocks`, each after the previous one.
    fn add_chain(records: &mut Records, blocks: &[Placed], names: &[u64]) {
        let mut parent = NONE;
        for (block, &name) in blocks.iter().zip(names) {
            parent = records.add_name(name, block, parent).0;
        }
    }

    #[test]
    fn freed_records_are_reused() {
        let mut records = Records::default();
        add_chain(&mut records, &chain(4, 100), &[1, 2, 3, 4]);
        assert_eq!(records.slab.len(), 4);
        for name in [4, 3, 2, 1] {
            assert!(records.remove_name(name).expect("held").last);
        }
        assert_eq!((records.names(), records.live()), (0, 0));
        add_chain(&mut records, &chain(3, 500), &[11, 12, 13]);
        assert_eq!(
            records.slab.len(),
            4,
            "three of the four freed records reused"
        );
        assert_eq!(records.names(), 3);
        assert_eq!(records.find_name(4), None);
        let at = records.find_name(13).expect("held");
        assert_eq!(records.get(at).identity, 502);
        assert_eq!(records.find_identity(103), None);
        assert_eq!(
            records.find_identity(501),
            records.find_name(12),
            "both indexes lead to the same reused record"
        );
        assert_eq!(records.orphans(), 0);
    }

    #[test]
    fn an_identity_keeps_many_names_until_the_last_goes() {
        let mut records = Records::default();
        let block = chain(1, 7)[0];
        for name in 10..20 {
            let (_, became_held) = records.add_name(name, &block, NONE);
            assert_eq!(became_held, name == 10);
        }
        assert_eq!(records.names(), 10);
        assert_eq!(records.slab.len(), 1);
        // The inline name goes first: the others still lead to the record.
        assert!(!records.remove_name(10).expect("held").last);
        assert_eq!(records.find_name(10), None);
        for name in 11..20 {
            assert_eq!(records.find_name(name), Some(0));
        }
        // A new name takes the free inline place.
        assert!(!records.add_name(30, &block, NONE).1);
        assert_eq!(records.get(0).name, 30);
        for name in (11..20).chain([30]) {
            let dropped = records.remove_name(name).expect("held");
            assert_eq!(dropped.last, name == 30);
            assert_eq!(dropped.record.identity, 7);
        }
        assert!(records.remove_name(30).is_none());
        assert_eq!((records.names(), records.live()), (0, 0));
    }

    #[test]
    fn orphans_are_counted_and_repaired_exactly() {
        let mut records = Records::default();
        let blocks = chain(5, 100);
        add_chain(&mut records, &blocks, &[1, 2, 3, 4, 5]);
        assert!(records.remove_name(2).expect("held").last);
        assert_eq!(records.orphans(), 1, "position 2 lost its parent");
        assert_eq!(records.live(), 5, "the removed parent stays, not held");
        assert!(records.remove_name(4).expect("held").last);
        assert_eq!(records.orphans(), 2, "and position 4 too");
        // Position 2 goes: its parent's record is freed, and the orphan with it.
        assert!(records.remove_name(3).expect("held").last);
        assert_eq!(records.orphans(), 1);
        assert_eq!(records.find_identity(101), None);
        assert_eq!(records.find_identity(102), None);
        // The hole at position 3 is filled again, under a new name.
        let (_, became_held) = records.add_name(40, &blocks[3], NONE);
        assert!(became_held);
        assert_eq!(
            records.orphans(),
            1,
            "position 3 is an orphan now, position 4 no longer"
        );
        // Refilling positions 1 and 2 repairs everything.
        let at = records.find_name(1).expect("held");
        let (at, _) = records.add_name(20, &blocks[1], at);
        records.add_name(30, &blocks[2], at);
        assert_eq!(records.orphans(), 0);
        for name in [1, 20, 30, 40, 5] {
            assert!(records.remove_name(name).expect("held").last);
        }
        assert_eq!(records.orphans(), 0);
        assert_eq!(records.live(), 0);
    }

    #[test]
    fn a_stale_parent_hint_is_not_trusted() {
        let mut records = Records::default();
        let blocks = chain(2, 100);
        let (parent, _) = records.add_name(1, &blocks[0], NONE);
        assert!(records.remove_name(1).expect("held").last);
        // The freed record is reused by an unrelated identity before the child arrives.
        let other = chain(1, 900)[0];
        assert_eq!(records.add_name(9, &other, NONE).0, parent);
        let (child, _) = records.add_name(2, &blocks[1], parent);
        let link = records.get(child).parent;
        assert_ne!(link, parent);
        assert_eq!(records.get(link).identity, 100, "a not-held parent record");
        assert_eq!(records.orphans(), 1);
    }

    #[test]
    fn stale_identity_entries_are_skipped_and_dropped_instead_of_growing_the_index() {
        let mut records = Records::default();
        // 64 held blocks, then many rounds of one removal and one new identity: every round
        // frees a record (its index entry goes stale) and reuses it for another identity.
        let blocks = chain(64, 1_000);
        let names: Vec<u64> = (0..64).collect();
        add_chain(&mut records, &blocks, &names);
        let capacity = records.by_identity.capacity();
        let mut tail = 63u64;
        for round in 0..10_000u64 {
            assert!(records.remove_name(tail).expect("held").last);
            let identity = 1_000_000 + round;
            let block = Placed {
                position: 63,
                local: round,
                identity,
                parent: 1_062,
            };
            let parent = records.find_name(62).expect("held");
            let (at, became_held) = records.add_name(100 + round, &block, parent);
            assert!(became_held);
            assert_eq!(records.find_identity(identity), Some(at));
            if round > 0 {
                assert_eq!(
                    records.find_identity(identity - 1),
                    None,
                    "freed, not found"
                );
            }
            tail = 100 + round;
        }
        assert_eq!(records.slab.len(), 64, "one record reused all along");
        assert_eq!(
            records.by_identity.capacity(),
            capacity,
            "the index never grew"
        );
        assert!(records.by_identity.len() <= capacity);
        for (p, block) in blocks.iter().enumerate().take(63) {
            assert_eq!(
                records.find_identity(block.identity),
                records.find_name(p as u64)
            );
        }
        // The same identity back into the same record, with a stale entry for it still there.
        assert!(records.remove_name(tail).expect("held").last);
        let again = Placed {
            position: 63,
            local: 7,
            identity: 1_000_000 + 9_999,
            parent: 1_062,
        };
        let (at, _) = records.add_name(5_000, &again, NONE);
        assert_eq!(records.find_identity(again.identity), Some(at));
        assert_eq!(records.orphans(), 0);
        assert_eq!(records.live(), 64);
    }
}
