//! One run: consecutive blocks of one prefix path, stored once for every worker holding
//! them, with its holders and the runs hung below it.

use std::sync::{Arc, Weak};

use parking_lot::RwLock;

use super::children::Children;
use super::holders::Holders;

/// The longest a run grows; a chain goes on in a child run. Offsets fit in [`OFFSET_BITS`].
pub(super) const MAX_RUN: u32 = 1 << OFFSET_BITS;
const OFFSET_BITS: u32 = 12;

/// A run of blocks. Its blocks' positions and prefixes are implicit: `start` and the path
/// from the root.
pub(super) struct Run {
    /// Unique within the index (0 for the root); with an offset, names a block ([`Spot::key`]).
    pub(super) id: u64,
    /// Position of the run's first block (the root: 0, with no blocks).
    pub(super) start: u32,
    /// How many blocks of the parent run come before this one (the root's children: 0).
    pub(super) hang: u32,
    /// The local hash of the first block, kept for unlinking after the run is trimmed.
    pub(super) first: u64,
    pub(super) parent: Weak<Run>,
    pub(super) state: RwLock<RunState>,
}

/// What writers change, under the run's lock.
#[derive(Default)]
pub(super) struct RunState {
    /// Local hashes of the run's blocks (never empty for a run other than the root).
    pub(super) locals: Vec<u64>,
    pub(super) holders: Holders,
    /// `(hang, first local)` -> the run continuing after `hang` blocks of this one with that
    /// block. For `hang < locals.len()`, the first local differs from `locals[hang]`.
    pub(super) children: Children,
    /// The largest `hang` among `children` (0 with none): where the run must keep reaching
    /// for its children, known without walking them ([`RunState::hang_child`],
    /// [`RunState::unhang_child`]).
    hung_end: u32,
    /// How many children hang at `hung_end`: the children are walked again only when the
    /// last of those goes.
    hung_at_end: u32,
    /// Unlinked from its parent; kept alive only by stale references.
    pub(super) unlinked: bool,
}

impl Run {
    /// Asks the processor, without waiting, for the run's own lines (its fields, its lock
    /// and the heads of its state) before a reader locks it. Only a hint.
    #[inline]
    pub(super) fn prefetch(&self) {
        prefetch_index::prefetch_index(std::slice::from_ref(self), 0);
        prefetch_index::prefetch_index(std::slice::from_ref(&self.state), 0);
    }

    /// The root: no blocks, children hung at 0.
    pub(super) fn root() -> Self {
        Self {
            id: 0,
            start: 0,
            hang: 0,
            first: 0,
            parent: Weak::new(),
            state: RwLock::new(RunState::default()),
        }
    }

    /// A new run of one block, hung after `hang` blocks of `parent`.
    pub(super) fn child(id: u64, parent: &Arc<Run>, hang: u32, local: u64) -> Self {
        Self {
            id,
            start: parent.start + hang,
            hang,
            first: local,
            parent: Arc::downgrade(parent),
            state: RwLock::new(RunState {
                locals: vec![local],
                ..RunState::default()
            }),
        }
    }

    pub(super) fn is_root(&self) -> bool {
        self.id == 0
    }
}

impl RunState {
    /// Whether nobody holds a block of the run and nothing hangs below it.
    pub(super) fn is_unused(&self) -> bool {
        self.holders.is_empty() && self.children.is_empty()
    }

    /// Whether the block after `hang` blocks of this run with local `local` lies in this run
    /// itself: `Some(false)` if the run has it at `hang` already, `Some(true)` if it is to be
    /// appended at the run's end (the root holds no blocks, a run grows to [`MAX_RUN`] at
    /// most, and a child already hung at the end with that block takes it); `None` if it is
    /// in a child run, or would be.
    pub(super) fn lies_here(&self, run: &Run, hang: u32, local: u64) -> Option<bool> {
        match self.locals.get(hang as usize) {
            Some(&here) => (here == local).then_some(false),
            None => (!run.is_root()
                && hang as usize == self.locals.len()
                && hang < MAX_RUN
                && !self.child_at_end(hang, local))
            .then_some(true),
        }
    }

    /// Whether a child with first local `local` hangs at `hang`, the run's end (no child
    /// hangs past the largest hang, [`RunState::hung_end`]: most appends look no further).
    fn child_at_end(&self, hang: u32, local: u64) -> bool {
        hang == self.hung_end && self.children.contains_key(&(hang, local))
    }

    /// The key ([`key`]) of the block after `hang` blocks of this run with local `local`, if
    /// it exists.
    pub(super) fn next_key(&self, run: &Run, hang: u32, local: u64) -> Option<u64> {
        if self.locals.get(hang as usize) == Some(&local) {
            return Some(key(run.id, hang));
        }
        self.children
            .get(&(hang, local))
            .map(|child| key(child.id, 0))
    }

    /// Hangs `child` after `hang` blocks with first local `local`.
    pub(super) fn hang_child(&mut self, hang: u32, local: u64, child: Arc<Run>) {
        if self.children.insert((hang, local), child).is_some() {
            return; // replaced a child at the same place: the counts stand
        }
        if self.children.len() == 1 || hang > self.hung_end {
            self.hung_end = hang;
            self.hung_at_end = 1;
        } else if hang == self.hung_end {
            self.hung_at_end += 1;
        }
    }

    /// Unhangs the child at `key` if it is `child`; the largest hang left is found again
    /// only when the child was at it.
    pub(super) fn unhang_child(&mut self, key: (u32, u64), child: &Arc<Run>) {
        if !self
            .children
            .get(&key)
            .is_some_and(|hung| Arc::ptr_eq(hung, child))
        {
            return;
        }
        self.children.remove(&key);
        if key.0 != self.hung_end {
            return;
        }
        self.hung_at_end -= 1;
        if self.hung_at_end == 0 {
            self.hung_end = self
                .children
                .keys()
                .map(|(hang, _)| hang)
                .max()
                .unwrap_or(0);
            self.hung_at_end = self
                .children
                .keys()
                .filter(|&(hang, _)| hang == self.hung_end)
                .count() as u32;
        }
    }

    /// Drops the blocks at the end that nobody holds and nothing hangs after (a run other
    /// than the root keeps its first block until it is unlinked).
    pub(super) fn trim(&mut self, run: &Run) {
        if run.is_root() {
            return;
        }
        debug_assert_eq!((self.hung_end, self.hung_at_end), {
            let end = self
                .children
                .keys()
                .map(|(hang, _)| hang)
                .max()
                .unwrap_or(0);
            let at_end = self
                .children
                .keys()
                .filter(|&(hang, _)| hang == end)
                .count();
            (end, at_end as u32)
        });
        let keep = self.holders.end().max(self.hung_end).max(1) as usize;
        if keep < self.locals.len() {
            self.locals.truncate(keep);
            // Given back once half is unused, not at every cut: tails are evicted a block
            // at a time.
            if self.locals.capacity() >= 2 * keep.max(4) {
                self.locals.shrink_to_fit();
            }
        }
    }
}

/// One block: a run and an offset in it.
#[derive(Clone)]
pub(super) struct Spot {
    pub(super) run: Arc<Run>,
    pub(super) offset: u32,
}

impl Spot {
    /// Unique among the blocks alive in the index (a worker's blocks stay alive while held).
    pub(super) fn key(&self) -> u64 {
        key(self.run.id, self.offset)
    }
}

/// The key of block `offset` of run `id`.
pub(super) fn key(id: u64, offset: u32) -> u64 {
    id << OFFSET_BITS | u64::from(offset)
}

/// The run id and offset a key stands for.
pub(super) fn place(key: u64) -> (u64, u32) {
    (key >> OFFSET_BITS, (key & (u64::from(MAX_RUN) - 1)) as u32)
}
