//! Storage tiers of held blocks, for the backends built on [`super::worker_blocks`].
//!
//! A worker's blocks are indexed by the backend whatever tier they are on (a block is held
//! while it is on at least one tier), so plain lookups never look at tiers. What tiers each
//! block is on is kept here, per worker and under that worker's lock, and only where it is not
//! "the device alone": a fleet that never offloads keeps nothing here and pays nothing.
//!
//! Within a worker, a backend names each held prefix by a *key* (the positional index: the
//! prefix identity; the radix tree: the node), and several engine names may share a key. The
//! tiers of a key are the union of its names' tiers.
//!
//! [`TierActivity`] lets a tiered lookup skip all of this when no block of any worker is off
//! the device (see [`TierActivity::quiet`]).

use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashMap;

use crate::model::{fastest, Tier, TierMask, TIERS};

/// The set "device only": what a block is on unless recorded otherwise.
const DEVICE: TierMask = Tier::Device.bit();

/// The names of one key that are not on the device alone.
#[derive(Debug, Default, Clone, Copy)]
struct KeyTiers {
    /// How many of the key's names are recorded (not on the device alone).
    names: u32,
    /// Of those, how many are on each tier.
    on: [u32; TIERS],
}

/// One worker's tiers (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct WorkerTiers {
    /// Name -> (key, tiers), for names not on the device alone.
    names: FxHashMap<u64, (u64, TierMask)>,
    /// Key -> its recorded names, for keys with any.
    keys: FxHashMap<u64, KeyTiers>,
}

/// What removing one tier of a held name did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TierRemoval {
    /// The name was not on that tier: nothing changed.
    NotOnTier,
    /// The name is still on another tier.
    Kept,
    /// That was the name's last tier: the caller drops the name.
    Last,
}

impl WorkerTiers {
    /// True when every block of the worker is on the device alone.
    pub(crate) fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The tiers `name` is on (it must be held).
    pub(crate) fn tiers_of(&self, name: u64) -> TierMask {
        self.names.get(&name).map_or(DEVICE, |&(_, tiers)| tiers)
    }

    /// Records that held `name` (of `key`) is now on `tiers` (never empty). The index-wide
    /// count moves by the net change only, so it never dips to 0 while a name stays recorded.
    fn set(&mut self, name: u64, key: u64, tiers: TierMask, activity: &TierActivity) {
        let was_recorded = self.unrecord(name);
        if tiers == DEVICE {
            if was_recorded {
                activity.recorded.fetch_sub(1, Ordering::SeqCst);
            }
            return;
        }
        if !was_recorded {
            activity.recorded.fetch_add(1, Ordering::SeqCst);
        }
        self.names.insert(name, (key, tiers));
        let entry = self.keys.entry(key).or_default();
        entry.names += 1;
        for (t, on) in entry.on.iter_mut().enumerate() {
            *on += u32::from(tiers >> t & 1);
        }
    }

    /// Drops `name`'s record, if any, leaving the index-wide count to the caller.
    fn unrecord(&mut self, name: u64) -> bool {
        let Some((key, tiers)) = self.names.remove(&name) else {
            return false;
        };
        let std::collections::hash_map::Entry::Occupied(mut entry) = self.keys.entry(key) else {
            unreachable!("every recorded name's key is recorded");
        };
        let counts = entry.get_mut();
        counts.names -= 1;
        for (t, on) in counts.on.iter_mut().enumerate() {
            *on -= u32::from(tiers >> t & 1);
        }
        if counts.names == 0 {
            entry.remove();
        }
        true
    }

    /// Called by the backend when `name` (of `key`) is stored on `tier`: `same` if the name
    /// already held this very block (it gains the tier), else it is new or renamed (it is on
    /// `tier` alone).
    pub(crate) fn stored(
        &mut self,
        name: u64,
        key: u64,
        tier: Tier,
        same: bool,
        activity: &TierActivity,
    ) {
        if tier == Tier::Device && self.names.is_empty() {
            return; // the single-tier path: nothing recorded, nothing to record
        }
        let tiers = if same {
            self.tiers_of(name) | tier.bit()
        } else {
            tier.bit()
        };
        if tiers != DEVICE || self.names.contains_key(&name) {
            self.set(name, key, tiers, activity);
        }
    }

    /// For a name restored from a snapshot on `tiers`: the tier to store it on first (its
    /// fastest); [`WorkerTiers::restored_rest`] adds the others once it is stored.
    pub(crate) fn restored_first(tiers: TierMask) -> Tier {
        Tier::ALL[fastest(tiers)]
    }

    /// Adds the tiers of a restored name (of `key`, stored on
    /// [`WorkerTiers::restored_first`]) other than that first one.
    pub(crate) fn restored_rest(
        &mut self,
        name: u64,
        key: u64,
        tiers: TierMask,
        activity: &TierActivity,
    ) {
        let first = Self::restored_first(tiers);
        for tier in Tier::ALL
            .iter()
            .filter(|t| tiers & t.bit() != 0 && **t != first)
        {
            self.stored(name, key, *tier, true, activity);
        }
    }

    /// Takes `tier` off held `name`.
    pub(crate) fn remove_tier(
        &mut self,
        name: u64,
        key: u64,
        tier: Tier,
        activity: &TierActivity,
    ) -> TierRemoval {
        let tiers = self.tiers_of(name);
        if tiers & tier.bit() == 0 {
            return TierRemoval::NotOnTier;
        }
        let left = tiers & !tier.bit();
        if left == 0 {
            return TierRemoval::Last;
        }
        self.set(name, key, left, activity);
        TierRemoval::Kept
    }

    /// Called by the backend when it drops `name` (removed or renamed).
    pub(crate) fn forget(&mut self, name: u64, activity: &TierActivity) {
        if !self.names.is_empty() && self.unrecord(name) {
            activity.recorded.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Called by the backend when it drops every block of the worker.
    pub(crate) fn clear(&mut self, activity: &TierActivity) {
        if self.names.is_empty() {
            return;
        }
        activity
            .recorded
            .fetch_sub(self.names.len() as u64, Ordering::SeqCst);
        self.names.clear();
        self.keys.clear();
    }

    /// The tiers of a held key that has `names` names in all.
    pub(crate) fn key_tiers(&self, key: u64, names: u32) -> TierMask {
        match self.keys.get(&key) {
            None => DEVICE,
            Some(recorded) => {
                let mut tiers = 0;
                for (t, &on) in recorded.on.iter().enumerate() {
                    if on > 0 {
                        tiers |= 1 << t;
                    }
                }
                // Names not recorded are on the device alone.
                if names > recorded.names {
                    tiers |= DEVICE;
                }
                tiers
            }
        }
    }
}

/// Cumulative tier depths of a prefix, from the tiers of its blocks in order.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TierDepths {
    depths: [u32; TIERS],
    /// Tiers from this index on still extend (their prefix has not been broken).
    from: usize,
    len: u32,
}

impl TierDepths {
    /// Extends the prefix by one block on `tiers`.
    pub(crate) fn push(&mut self, tiers: TierMask) {
        self.len += 1;
        self.from = self.from.max(fastest(tiers));
        for depth in &mut self.depths[self.from..] {
            *depth = self.len;
        }
    }

    /// The depths: `[t]` = the prefix held on tier `t` or a faster one.
    pub(crate) fn get(&self) -> [u32; TIERS] {
        self.depths
    }
}

/// Index-wide counters that let a tiered lookup know no block was off the device during it.
#[derive(Debug, Default)]
pub(crate) struct TierActivity {
    /// Names recorded in any worker's [`WorkerTiers`] (not on the device alone).
    recorded: AtomicU64,
    /// Changes that may move names on or off the records (stores on another tier, and any
    /// change of a worker with records), begun and ended.
    begun: AtomicU64,
    ended: AtomicU64,
}

/// What [`TierActivity::quiet`] saw, to check with [`TierActivity::still_quiet`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct TiersQuiet(u64);

impl TierActivity {
    /// Runs a change, announced when `touches_records` so that lookups overlapping it do not
    /// take the quiet path. A change touches the records when it may put a block off the
    /// device alone (a store on another tier) or may drop records while the blocks they
    /// describe are still visible to lookups (any change of a worker with records: its
    /// removals drop a name's record before the index lets go of the block).
    pub(crate) fn announce<R>(&self, touches_records: bool, change: impl FnOnce() -> R) -> R {
        if !touches_records {
            return change();
        }
        self.begun.fetch_add(1, Ordering::SeqCst);
        let result = change();
        self.ended.fetch_add(1, Ordering::SeqCst);
        result
    }

    /// `Some` if no block of any worker is off the device alone now and no change that could
    /// put one there is in progress.
    pub(crate) fn quiet(&self) -> Option<TiersQuiet> {
        let begun = self.begun.load(Ordering::SeqCst);
        let ended = self.ended.load(Ordering::SeqCst);
        (begun == ended && self.recorded.load(Ordering::SeqCst) == 0).then_some(TiersQuiet(begun))
    }

    /// True if no such change began since `quiet`: then every block was on the device alone
    /// throughout, and every tier depth of every worker equals its depth.
    pub(crate) fn still_quiet(&self, quiet: TiersQuiet) -> bool {
        self.begun.load(Ordering::SeqCst) == quiet.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_are_cumulative_from_the_fastest_tier_of_each_block() {
        let mut depths = TierDepths::default();
        let d = Tier::Device.bit();
        let h = Tier::Host.bit();
        let x = Tier::External.bit();
        for tiers in [d, d | h, h, d, x, d | x] {
            depths.push(tiers);
        }
        // Device: 2 blocks, then a host-only block; host: 4, then an external-only block.
        assert_eq!(depths.get(), [2, 4, 4, 6]);
    }

    #[test]
    fn a_key_is_on_the_union_of_its_names_tiers() {
        let activity = TierActivity::default();
        let mut tiers = WorkerTiers::default();
        // Key 7 has three names: 1 on device (not recorded), 2 on host, 3 on disk and host.
        tiers.stored(1, 7, Tier::Device, false, &activity);
        tiers.stored(2, 7, Tier::Host, false, &activity);
        tiers.stored(3, 7, Tier::Disk, false, &activity);
        tiers.stored(3, 7, Tier::Host, true, &activity);
        let (d, h, k) = (Tier::Device.bit(), Tier::Host.bit(), Tier::Disk.bit());
        assert_eq!(tiers.key_tiers(7, 3), d | h | k);
        assert_eq!(tiers.key_tiers(7, 2), h | k, "name 1 gone: no device");
        assert_eq!(activity.recorded.load(Ordering::SeqCst), 2);
        assert_eq!(
            tiers.remove_tier(3, 7, Tier::Device, &activity),
            TierRemoval::NotOnTier
        );
        assert_eq!(
            tiers.remove_tier(3, 7, Tier::Disk, &activity),
            TierRemoval::Kept
        );
        assert_eq!(tiers.key_tiers(7, 3), d | h);
        assert_eq!(
            tiers.remove_tier(2, 7, Tier::Host, &activity),
            TierRemoval::Last
        );
        tiers.forget(2, &activity);
        tiers.forget(3, &activity);
        assert!(tiers.is_empty());
        assert_eq!(tiers.key_tiers(7, 1), d);
        assert_eq!(activity.recorded.load(Ordering::SeqCst), 0);
        // A renamed name starts over on the new tier alone.
        tiers.stored(5, 8, Tier::Host, false, &activity);
        tiers.stored(5, 9, Tier::Device, false, &activity);
        assert!(tiers.is_empty(), "back on the device alone");
        assert_eq!(activity.recorded.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn lookups_are_quiet_only_while_no_block_is_off_the_device() {
        let activity = TierActivity::default();
        let mut tiers = WorkerTiers::default();
        let quiet = activity.quiet().expect("nothing recorded");
        activity.announce(false, || ());
        assert!(
            activity.still_quiet(quiet),
            "changes that touch no record are not announced"
        );
        activity.announce(true, || tiers.stored(1, 1, Tier::Host, false, &activity));
        assert!(!activity.still_quiet(quiet));
        assert!(activity.quiet().is_none(), "a block is on the host");
        tiers.clear(&activity);
        assert!(activity.quiet().is_some());
    }
}
