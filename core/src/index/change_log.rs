//! Changes of any slot, counted as they begin and as they end, with the slots of the latest
//! ones.
//!
//! A reader starts when no change is in progress, or when the log names the slots of the
//! few that are ([`ChangeLog::start`]); it reads, then asks which changes began meanwhile
//! ([`ChangeLog::begun_now`], [`ChangeLog::changes_begun`]). A change of one worker moves only
//! that worker's blocks, so what the reader found for every slot the log did not name holds,
//! and only the named slots need checking again: each is named with the slot version its
//! change has, from which the reader asks what that change and the slot's later ones
//! touched. When the log cannot name them all (more than [`RECENT`] changes, or an entry not
//! written yet), the reader is told so.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use prefetch_index::prefetch_index;

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

/// Entry `k % RECENT` describes change `k` (the `k`-th begun, from 0).
///
/// `tagged` holds its slot, whether it has ended, whether it is still being written, and
/// the low bits of `k` as a tag, so that a reader tells it from an older or a newer change
/// that uses the same entry. (Two changes share a tag only 2^30 changes apart: far more
/// than begin during one read, which checks at most [`RECENT`] entries.) `version` holds
/// the odd slot version of the change; it is written between two stores of `tagged`, the
/// first marked [`WRITING`], so a reader that finds the same finished `tagged` before and
/// after reading `version` read this change's version (a seqlock of one word).
#[derive(Default)]
struct Entry {
    tagged: AtomicU64,
    version: AtomicU64,
}

#[repr(align(64))]
struct Recent([Entry; RECENT]);

/// Entries on one cache line of [`Recent`].
const ENTRIES_PER_LINE: u64 = (64 / std::mem::size_of::<Entry>()) as u64;

/// Lines of entries [`ChangeLog::prefetch_check`] asks for: those of the next changes
/// after a reader's start (a few begin during a read under ingest).
const PREFETCH_LINES: u64 = 2;

const TAG_SHIFT: u32 = 34;
const WRITING: u64 = 1 << 33;
const DONE: u64 = 1 << 32;

fn tagged(change: u64, slot: u32, done: bool) -> u64 {
    change << TAG_SHIFT | if done { DONE } else { 0 } | u64::from(slot)
}

/// Whether `logged` is the finished entry of change `change`.
fn is_of(logged: u64, change: u64) -> bool {
    logged >> TAG_SHIFT == change & (u64::MAX >> TAG_SHIFT) && logged & WRITING == 0
}

impl Default for Recent {
    fn default() -> Self {
        // Every entry starts with a tag that is not its index's: no change is logged yet.
        Self(std::array::from_fn(|at| Entry {
            tagged: AtomicU64::new(tagged(at as u64 + 1, 0, true)),
            version: AtomicU64::new(0),
        }))
    }
}

/// A change named by the log: its slot and the odd version the change gives that slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Named {
    pub(crate) slot: u32,
    pub(crate) version: u64,
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
    fn entry_of(&self, change: u64) -> &Entry {
        &self.recent.0[change as usize % RECENT]
    }

    /// Counts a change of `slot` as begun, and logs its slot and the odd slot version
    /// `version` it is to have, before it changes anything readers see.
    pub(crate) fn begin(&self, slot: u32, version: u64) -> Begun {
        let change = self.counts.begun.fetch_add(1, Ordering::AcqRel);
        let entry = self.entry_of(change);
        let finished = tagged(change, slot, false);
        entry.tagged.store(finished | WRITING, Ordering::Relaxed);
        // A reader that reads the new version and then fences sees the entry marked.
        fence(Ordering::Release);
        entry.version.store(version, Ordering::Relaxed);
        entry.tagged.store(finished, Ordering::Release);
        // What the change writes next is ordered after the count and the entry for a reader
        // that reads it and then fences.
        fence(Ordering::Release);
        Begun { change, slot }
    }

    /// Change `change`'s entry, if it is the one logged there: its `tagged` word and the
    /// change as named.
    fn read(&self, change: u64) -> Option<(u64, Named)> {
        let entry = self.entry_of(change);
        let logged = entry.tagged.load(Ordering::Acquire);
        if !is_of(logged, change) {
            return None; // not written yet, or reused
        }
        let version = entry.version.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        // The same change still (ended meanwhile or not): the version is its own.
        let again = entry.tagged.load(Ordering::Relaxed);
        (again | DONE == logged | DONE).then_some((
            logged,
            Named {
                slot: logged as u32,
                version,
            },
        ))
    }

    /// Marks a change ended (in its entry, unless a later change uses it already), after
    /// everything it changed, then counts it.
    pub(crate) fn end(&self, begun: Begun) {
        let _ = self.entry_of(begun.change).tagged.compare_exchange(
            tagged(begun.change, begun.slot, false),
            tagged(begun.change, begun.slot, true),
            Ordering::Release,
            Ordering::Relaxed,
        );
        self.counts.ended.fetch_add(1, Ordering::Release);
    }

    /// Where a reader may start: `Some` when no change is in progress, or when the log
    /// names each one in progress (appended to `in_progress`, a slot possibly more than
    /// once); `None` otherwise.
    ///
    /// Ended is read first, then begun: every change counted as ended had begun by then, so
    /// of the changes begun, all but `begun - ended` are known to have ended (and what they
    /// wrote is seen from here on). Those others are found among the latest entries: an
    /// entry not marked ended is a change that had not ended when ended was read, and once
    /// that many are found, every other change had.
    pub(crate) fn start(&self, in_progress: &mut Vec<Named>) -> Option<Start> {
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
            // Not written yet, or reused: this change's slot is unknown.
            let (logged, named) = self.read(change)?;
            if logged & DONE == 0 {
                in_progress.push(named);
                found += 1;
                if found == open {
                    return Some(Start { begun });
                }
            }
        }
        None
    }

    /// Asks the processor, without waiting, for the lines [`ChangeLog::start`] reads: the
    /// counts, and the entries from the latest change a reader had met when it last started
    /// (`last_begun` changes had begun then) on: a change in progress now is that one or one
    /// of the few begun since. Without it, the counts' miss and then the entry's follow one
    /// another before every read that starts while a change is in progress; with it, they
    /// overlap. Only a hint.
    #[inline]
    pub(crate) fn prefetch_start(&self, last_begun: u64) {
        self.prefetch_check(Start {
            begun: last_begun.saturating_sub(1),
        });
    }

    /// Asks the processor, without waiting, for the lines a reader that started at `start`
    /// reads when it checks what began meanwhile: the counts, and the entries of the changes
    /// after `start`. The writers move them all the time, so each is a miss from the other
    /// core; asked for before the reader's last reads (which do not depend on them), those
    /// misses overlap that work instead of following it one after another. Only a hint:
    /// what the check reads is read afterwards, as it would be without it.
    #[inline]
    pub(crate) fn prefetch_check(&self, start: Start) {
        prefetch_index(std::slice::from_ref(&self.counts), 0);
        for line in 0..PREFETCH_LINES {
            let change = start.begun.wrapping_add(line * ENTRIES_PER_LINE);
            prefetch_index(&self.recent.0, change as usize % RECENT);
        }
    }

    /// The changes begun so far, read after the reads it is to validate: every change whose
    /// writes those reads may have seen is among them.
    #[inline]
    pub(crate) fn begun_now(&self) -> u64 {
        fence(Ordering::Acquire);
        self.counts.begun.load(Ordering::Relaxed)
    }

    /// Appends the changes begun from `start` on up to `now` (from
    /// [`ChangeLog::begun_now`]), in order; false if the log cannot name them all (more
    /// than [`RECENT`], or an entry not yet written or already reused), and then `out` is
    /// to be ignored.
    pub(crate) fn changes_begun(&self, start: Start, now: u64, out: &mut Vec<Named>) -> bool {
        if now - start.begun > RECENT as u64 {
            return false;
        }
        for change in start.begun..now {
            let Some((_, named)) = self.read(change) else {
                return false;
            };
            out.push(named);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change of `slot` that gives it version `version`, begun and ended.
    fn change(log: &ChangeLog, slot: u32, version: u64) {
        let begun = log.begin(slot, version);
        log.end(begun);
    }

    fn named(slot: u32, version: u64) -> Named {
        Named { slot, version }
    }

    /// The hints ask for lines only: whatever count a reader last met (none yet, an old one,
    /// one far ahead, the largest), the log names the same changes in progress after them.
    #[test]
    fn prefetching_a_start_changes_nothing_it_reads() {
        let log = ChangeLog::default();
        change(&log, 4, 1);
        let open = log.begin(9, 3);
        let mut plain = Vec::new();
        let begun = log
            .start(&mut plain)
            .expect("the change in progress is named")
            .begun;
        assert_eq!(plain, vec![named(9, 3)]);
        for last_begun in [0, 1, begun, begun + 1_000, u64::MAX] {
            log.prefetch_start(last_begun);
            let mut hinted = Vec::new();
            let start = log
                .start(&mut hinted)
                .expect("the change in progress is named");
            assert_eq!((start.begun, hinted), (begun, plain.clone()));
        }
        log.end(open);
    }

    #[test]
    fn names_the_changes_begun_since_a_start() {
        let log = ChangeLog::default();
        let mut out = Vec::new();
        let start = log.start(&mut out).expect("nothing in progress");
        assert!(out.is_empty());
        assert!(log.changes_begun(start, log.begun_now(), &mut out) && out.is_empty());
        for (slot, version) in [(7, 1), (3, 5), (7, 3)] {
            change(&log, slot, version);
        }
        assert!(log.changes_begun(start, log.begun_now(), &mut out));
        assert_eq!(out, vec![named(7, 1), named(3, 5), named(7, 3)]);
        // More changes than the log keeps: it cannot name them.
        let start = log.start(&mut out).unwrap();
        for slot in 0..=RECENT as u32 {
            change(&log, slot, 2 * u64::from(slot) + 1);
        }
        out.clear();
        assert!(!log.changes_begun(start, log.begun_now(), &mut out));
        // The latest RECENT still can be named.
        let latest = Start {
            begun: log.begun_now() - RECENT as u64,
        };
        out.clear();
        assert!(log.changes_begun(latest, log.begun_now(), &mut out));
        let expected: Vec<Named> = (1..=RECENT as u32)
            .map(|slot| named(slot, 2 * u64::from(slot) + 1))
            .collect();
        assert_eq!(out, expected);
        // An entry not written yet (its tag is an older change's): not named.
        let ahead = Start {
            begun: log.begun_now(),
        };
        out.clear();
        assert!(!log.changes_begun(ahead, log.begun_now() + 1, &mut out));
    }

    #[test]
    fn a_start_names_the_changes_in_progress_or_none() {
        let log = ChangeLog::default();
        let mut open = Vec::new();
        let five = log.begin(5, 11);
        change(&log, 6, 1);
        let eight = log.begin(8, 3);
        change(&log, 9, 1);
        // Two in progress, behind and between ended ones: both named, with their versions.
        let start = log.start(&mut open).expect("the log names both");
        assert_eq!(open, vec![named(8, 3), named(5, 11)]);
        assert_eq!(start.begun, 4);
        log.end(eight);
        open.clear();
        log.start(&mut open).unwrap();
        assert_eq!(open, vec![named(5, 11)]);
        // The one in progress falls out of the log's reach: no start.
        for slot in 0..RECENT as u32 {
            change(&log, slot, 1);
        }
        open.clear();
        assert!(log.start(&mut open).is_none());
        log.end(five);
        open.clear();
        assert!(log.start(&mut open).is_some() && open.is_empty());
    }

    #[test]
    fn an_entry_being_written_names_nothing() {
        let log = ChangeLog::default();
        let mut out = Vec::new();
        let start = log.start(&mut out).unwrap();
        change(&log, 4, 7);
        // As between a begin's two stores of the entry: marked, with a version not yet its own.
        let entry = log.entry_of(0);
        entry
            .tagged
            .store(tagged(0, 4, false) | WRITING, Ordering::Relaxed);
        assert!(!log.changes_begun(start, log.begun_now(), &mut out));
        entry.tagged.store(tagged(0, 4, true), Ordering::Relaxed);
        out.clear();
        assert!(log.changes_begun(start, log.begun_now(), &mut out));
        assert_eq!(out, vec![named(4, 7)]);
    }
}
