//! Changes of any slot, counted as they begin and as they end, with the slots of the latest
//! ones.
//!
//! A reader starts when no change is in progress, or when the log names the slots of the
//! few that are ([`ChangeLog::start`]); it reads, then asks which changes began meanwhile
//! ([`ChangeLog::begun_now`], [`ChangeLog::slots_begun`]). A change of one worker moves only
//! that worker's blocks, so what the reader found for every slot the log did not name holds,
//! and only the named slots need reading again. When the log cannot name them all (more
//! than [`RECENT`] changes, or an entry not written yet), the reader is told so.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Changes whose slots the log keeps: the latest this many.
pub(crate) const RECENT: usize = 64;

/// Changes begun and ended, equal while no change is in progress; on one cache line of their
/// own, so that a reader's check fetches one line the writers move, not two.
#[derive(Default)]
#[repr(align(64))]
struct Counts {
    begun: AtomicU64,
    ended: AtomicU64,
}

/// Entry `k % RECENT` describes change `k` (the `k`-th begun, from 0): its slot, whether it
/// has ended, and the low bits of `k` as a tag, so that a reader tells it from an older or
/// a newer change that uses the same entry. (Two changes share a tag only 2^31 changes
/// apart: far more than begin during one read, which checks at most [`RECENT`] entries.)
#[repr(align(64))]
struct Recent([AtomicU64; RECENT]);

const TAG_SHIFT: u32 = 33;
const DONE: u64 = 1 << 32;

fn entry(change: u64, slot: u32, done: bool) -> u64 {
    change << TAG_SHIFT | if done { DONE } else { 0 } | u64::from(slot)
}

/// Whether `logged` is the entry of change `change`.
fn is_of(logged: u64, change: u64) -> bool {
    logged >> TAG_SHIFT == change & (u64::MAX >> TAG_SHIFT)
}

impl Default for Recent {
    fn default() -> Self {
        // Every entry starts with a tag that is not its index's: no change is logged yet.
        Self(std::array::from_fn(|at| {
            AtomicU64::new(entry(at as u64 + 1, 0, true))
        }))
    }
}

/// See the module docs.
#[derive(Default)]
pub(crate) struct ChangeLog {
    counts: Counts,
    recent: Recent,
}

/// Where a reader started: the changes begun by then (those in progress then, if any, are
/// the ones [`ChangeLog::start`] named).
#[derive(Clone, Copy)]
pub(crate) struct Start {
    pub(crate) begun: u64,
}

/// A change begun with [`ChangeLog::begin`], to be given to [`ChangeLog::end`].
pub(crate) struct Begun {
    change: u64,
    slot: u32,
}

impl ChangeLog {
    /// The entry change `change` uses.
    fn entry_of(&self, change: u64) -> &AtomicU64 {
        &self.recent.0[change as usize % RECENT]
    }

    /// Counts a change of `slot` as begun, and logs its slot, before it changes anything
    /// readers see.
    pub(crate) fn begin(&self, slot: u32) -> Begun {
        let change = self.counts.begun.fetch_add(1, Ordering::AcqRel);
        self.entry_of(change)
            .store(entry(change, slot, false), Ordering::Relaxed);
        // What the change writes next is ordered after the count and the entry for a reader
        // that reads it and then fences.
        fence(Ordering::Release);
        Begun { change, slot }
    }

    /// Marks a change ended (in its entry, unless a later change uses it already), after
    /// everything it changed, then counts it.
    pub(crate) fn end(&self, begun: Begun) {
        let _ = self.entry_of(begun.change).compare_exchange(
            entry(begun.change, begun.slot, false),
            entry(begun.change, begun.slot, true),
            Ordering::Release,
            Ordering::Relaxed,
        );
        self.counts.ended.fetch_add(1, Ordering::Release);
    }

    /// Where a reader may start: `Some` when no change is in progress, or when the log
    /// names each one in progress (their slots are appended to `in_progress`, with repeats);
    /// `None` otherwise.
    ///
    /// Ended is read first, then begun: every change counted as ended had begun by then, so
    /// of the changes begun, all but `begun - ended` are known to have ended (and what they
    /// wrote is seen from here on). Those others are found among the latest entries: an
    /// entry not marked ended is a change that had not ended when ended was read, and once
    /// that many are found, every other change had.
    pub(crate) fn start(&self, in_progress: &mut Vec<u32>) -> Option<Start> {
        let ended = self.counts.ended.load(Ordering::Acquire);
        let begun = self.counts.begun.load(Ordering::Acquire);
        let open = begun - ended;
        if open == 0 {
            return Some(Start { begun });
        }
        if open > RECENT as u64 {
            return None;
        }
        let mut found = 0;
        for change in (begun.saturating_sub(RECENT as u64)..begun).rev() {
            let logged = self.entry_of(change).load(Ordering::Acquire);
            if !is_of(logged, change) {
                return None; // not written yet, or reused: this change's slot is unknown
            }
            if logged & DONE == 0 {
                in_progress.push(logged as u32);
                found += 1;
                if found == open {
                    return Some(Start { begun });
                }
            }
        }
        None
    }

    /// The changes begun so far, read after the reads it is to validate: every change whose
    /// writes those reads may have seen is among them.
    #[inline]
    pub(crate) fn begun_now(&self) -> u64 {
        fence(Ordering::Acquire);
        self.counts.begun.load(Ordering::Relaxed)
    }

    /// Appends the slots of the changes begun from `start` on up to `now` (from
    /// [`ChangeLog::begun_now`]), in order, with repeats; false if the log cannot name them
    /// all (more than [`RECENT`], or an entry not yet written or already reused), and then
    /// `out` is to be ignored.
    pub(crate) fn slots_begun(&self, start: Start, now: u64, out: &mut Vec<u32>) -> bool {
        if now - start.begun > RECENT as u64 {
            return false;
        }
        for change in start.begun..now {
            let logged = self.entry_of(change).load(Ordering::Relaxed);
            if !is_of(logged, change) {
                return false;
            }
            out.push(logged as u32);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(log: &ChangeLog, slot: u32) {
        let begun = log.begin(slot);
        log.end(begun);
    }

    #[test]
    fn names_the_slots_of_the_changes_begun_since_a_start() {
        let log = ChangeLog::default();
        let mut out = Vec::new();
        let start = log.start(&mut out).expect("nothing in progress");
        assert!(out.is_empty());
        assert!(log.slots_begun(start, log.begun_now(), &mut out) && out.is_empty());
        for slot in [7, 3, 7] {
            change(&log, slot);
        }
        assert!(log.slots_begun(start, log.begun_now(), &mut out));
        assert_eq!(out, vec![7, 3, 7]);
        // More changes than the log keeps: it cannot name them.
        let start = log.start(&mut out).unwrap();
        for slot in 0..=RECENT as u32 {
            change(&log, slot);
        }
        out.clear();
        assert!(!log.slots_begun(start, log.begun_now(), &mut out));
        // The latest RECENT still can be named.
        let latest = Start {
            begun: log.begun_now() - RECENT as u64,
        };
        out.clear();
        assert!(log.slots_begun(latest, log.begun_now(), &mut out));
        assert_eq!(out, (1..=RECENT as u32).collect::<Vec<_>>());
        // An entry not written yet (its tag is an older change's): not named.
        let ahead = Start {
            begun: log.begun_now(),
        };
        out.clear();
        assert!(!log.slots_begun(ahead, log.begun_now() + 1, &mut out));
    }

    #[test]
    fn a_start_names_the_changes_in_progress_or_none() {
        let log = ChangeLog::default();
        let mut open = Vec::new();
        let five = log.begin(5);
        change(&log, 6);
        let eight = log.begin(8);
        change(&log, 9);
        // Two in progress, behind and between ended ones: both named.
        let start = log.start(&mut open).expect("the log names both");
        assert_eq!(open, vec![8, 5]);
        assert_eq!(start.begun, 4);
        log.end(eight);
        open.clear();
        log.start(&mut open).unwrap();
        assert_eq!(open, vec![5]);
        // The one in progress falls out of the log's reach: no start.
        for slot in 0..RECENT as u32 {
            change(&log, slot);
        }
        open.clear();
        assert!(log.start(&mut open).is_none());
        log.end(five);
        open.clear();
        assert!(log.start(&mut open).is_some() && open.is_empty());
    }
}
