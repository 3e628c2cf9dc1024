//! Reads: a query walks down the runs its blocks spell, one run at a time under that run's
//! read lock (the first while the root's is still held). In each run it compares the query's
//! local hashes with the run's in one loop, then finds how far each worker still in the race
//! holds the run from its start; a worker that stops short there is done, the others go on to
//! the run hung where the query leaves this one. The walk is a loop: its stack does not grow
//! with the chain.

use std::sync::Arc;

use super::run::{Run, RunState};
use super::RunsIndex;
use crate::index::worker_blocks::{push_depth, SlotDepth};

/// Per-thread buffers of a search.
#[derive(Default)]
pub(super) struct Scratch {
    /// The slots still in the race, ascending (as every run's holders are).
    active: Vec<u32>,
    kept: Vec<u32>,
}

thread_local! {
    pub(super) static SCRATCH: std::cell::RefCell<Scratch> =
        std::cell::RefCell::new(Scratch::default());
}

/// How many of the run's blocks, from its start, equal the query's (`query` starts at the
/// run's first position).
fn matched(state: &RunState, query: &[u64]) -> u32 {
    let n = state.locals.len().min(query.len());
    let (ours, theirs) = (&state.locals[..n], &query[..n]);
    // One at a time over the first chunk: most queries leave a run within a few blocks
    // (for another run hung there), and stop here. Past it, a chunk at a time while the
    // whole chunk agrees, its differences ORed together with no branch per hash (the
    // compiler makes it a few wide instructions); then one at a time within the first
    // chunk that does not.
    let first = count_equal(&ours[..n.min(COMPARE_CHUNK)], theirs);
    if first < COMPARE_CHUNK {
        return first as u32;
    }
    let mut equal = COMPARE_CHUNK;
    for (a, b) in ours[equal..]
        .chunks_exact(COMPARE_CHUNK)
        .zip(theirs[equal..].chunks_exact(COMPARE_CHUNK))
    {
        let differ = a.iter().zip(b).fold(0, |differ, (x, y)| differ | (x ^ y));
        if differ != 0 {
            break;
        }
        equal += COMPARE_CHUNK;
    }
    (equal + count_equal(&ours[equal..], &theirs[equal..])) as u32
}

/// How many hashes from the start `a` and `b` share.
fn count_equal(a: &[u64], b: &[u64]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A run with at most this many holders per slot still in the race is merged with the race
/// one holder at a time (the holders a query passes over are few); past it, each slot
/// gallops to its holder, so that a run held by many more workers than are still in the
/// race is not read whole.
const LINEAR_MERGE: usize = 4;

/// How many local hashes [`matched`] compares one at a time before it compares them a chunk
/// at a time, and how many a chunk holds.
const COMPARE_CHUNK: usize = 8;

/// One run of a search: the query's blocks from `pos` compared with the run's, then each
/// slot still in the race (`first`: every holder of the run) kept or given its depth. Moves
/// `pos` past the blocks matched; returns the run the query goes on to, if any slot is still
/// in the race and the query has blocks left.
fn visit(
    state: &RunState,
    query: &[u64],
    pos: &mut usize,
    first: bool,
    s: &mut Scratch,
    out: &mut Vec<SlotDepth>,
) -> Option<Arc<Run>> {
    let m = matched(state, &query[*pos..]);
    // The run the query goes on to, if any, asked for before this run's holders are read:
    // its lines (often just changed by a writer) arrive meanwhile.
    let child = query
        .get(*pos + m as usize)
        .and_then(|&local| state.children.get(&(m, local)));
    if let Some(child) = child {
        child.prefetch();
    }
    s.kept.clear();
    if first {
        for &holder in state.holders.as_slice() {
            let held = holder.held_prefix(m);
            if held < m {
                push_depth(out, holder.slot(), *pos + held as usize);
            } else {
                s.kept.push(holder.slot());
            }
        }
    } else {
        // The slots still in the race ascend, as the holders do: one pass forward.
        let held_all = state.holders.as_slice();
        let mut at = 0;
        let linear = held_all.len() <= LINEAR_MERGE * s.active.len();
        for &slot in &s.active {
            at = if linear {
                state.holders.step(at, slot)
            } else {
                state.holders.seek(at, slot)
            };
            let held = match held_all.get(at) {
                Some(h) if h.slot() == slot => h.held_prefix(m),
                _ => 0,
            };
            if held < m {
                push_depth(out, slot, *pos + held as usize);
            } else {
                s.kept.push(slot);
            }
        }
    }
    std::mem::swap(&mut s.active, &mut s.kept);
    *pos += m as usize;
    if s.active.is_empty() || *pos == query.len() {
        return None;
    }
    child.cloned()
}

impl RunsIndex {
    /// The run starting at position 0 with `first_local`, if any.
    fn first_run(&self, first_local: u64) -> Option<Arc<Run>> {
        self.root
            .state
            .read()
            .children
            .get(&(0, first_local))
            .cloned()
    }

    /// See [`crate::index::worker_blocks::WorkerBlocks::first_holders`].
    pub(super) fn first_holders_into(&self, first_local: u64, out: &mut Vec<u32>) {
        out.clear();
        if let Some(run) = self.first_run(first_local) {
            let state = run.state.read();
            out.extend(
                state
                    .holders
                    .as_slice()
                    .iter()
                    .filter(|h| h.holds_first())
                    .map(|h| h.slot()),
            );
        }
    }

    /// See [`crate::index::worker_blocks::WorkerBlocks::search`].
    ///
    /// The first run is read while the root's read lock is still held: no writer can unhang
    /// it meanwhile (that takes the root's write lock), so no reference to it is taken (two
    /// locked instructions fewer, on a line every lookup passing there shares). The runs
    /// after it are reached through a reference to each, taken under its parent's lock, so
    /// that a lookup holds at most two locks at once, taken parent first as writers take
    /// them. (Reading the second run under the first's lock as well saved as much again
    /// without ingest, and made lookups slower on D under ingest, where writers wait for the
    /// first run's lock.)
    pub(super) fn search_with(&self, query: &[u64], s: &mut Scratch, out: &mut Vec<SlotDepth>) {
        let n = query.len().min(u32::MAX as usize);
        let query = &query[..n];
        s.active.clear();
        let Some(&first) = query.first() else {
            return;
        };
        let mut pos = 0usize;
        let mut next = {
            let root = self.root.state.read();
            let Some(run) = root.children.get(&(0, first)) else {
                return;
            };
            let state = run.state.read();
            visit(&state, query, &mut pos, true, s, out)
        };
        while let Some(run) = next.take() {
            let state = run.state.read();
            next = visit(&state, query, &mut pos, false, s, out);
        }
        for &slot in &s.active {
            push_depth(out, slot, pos);
        }
    }

    /// Walks the query for one slot, calling `visit` with each block it holds (its run and
    /// offset) up to the first it does not; returns how many it holds.
    pub(super) fn walk_slot(
        &self,
        slot: u32,
        query: &[u64],
        visit: &mut dyn FnMut(&Run, u32),
    ) -> usize {
        let Some(&first) = query.first() else {
            return 0;
        };
        let mut next = self.first_run(first);
        let mut pos = 0usize;
        while let Some(run) = next.take() {
            let state = run.state.read();
            let m = matched(&state, &query[pos..]);
            let held = state.holders.of(slot).map_or(0, |h| h.held_prefix(m));
            for offset in 0..held {
                visit(&run, offset);
            }
            pos += held as usize;
            if held < m || pos == query.len() {
                return pos;
            }
            next = state.children.get(&(m, query[pos])).cloned();
        }
        pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length of run and query around the compare's chunks, each with its first
    /// difference at every place (or none): the count is the hashes before it.
    #[test]
    fn matched_counts_the_hashes_before_the_first_difference() {
        let most = 3 * COMPARE_CHUNK + 2;
        for run_len in 1..=most {
            let mut state = RunState::default();
            state.locals = (0..run_len as u64).map(|i| i * 7 + 1).collect();
            for query_len in 1..=most {
                let same: Vec<u64> = (0..query_len as u64).map(|i| i * 7 + 1).collect();
                let common = run_len.min(query_len);
                assert_eq!(matched(&state, &same) as usize, common);
                for differ in 0..query_len {
                    let mut query = same.clone();
                    query[differ] ^= 1 << 40;
                    let expected = common.min(differ);
                    assert_eq!(
                        matched(&state, &query) as usize,
                        expected,
                        "run {run_len}, query {query_len}, differing at {differ}"
                    );
                }
            }
        }
    }
}
