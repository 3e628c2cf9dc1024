//! Writers' changes to the shared runs: a worker starts or stops holding a block.
//!
//! Lock order: a run before the runs hung below it, as in the radix tree; a writer holds at
//! most a run and one child. A run's unheld tail is trimmed as soon as nothing hangs after
//! it, and a run nobody holds with nothing hung below is unlinked at once (then its parent
//! is checked the same way), so no run outlives the last worker using it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::run::{Run, RunState, Spot};
use super::RunsIndex;

impl RunsIndex {
    /// Marks the block after `hang` blocks of `run` with local `local` held by `slot`,
    /// appending it to `run` or hanging a new run if it does not exist; returns the run it
    /// is in (`None`: `run` itself), its offset there, and whether `slot` did not hold it
    /// before. `run` must be the root or hold a block of `slot` before `hang` (so it stays
    /// linked). Records the first touch of a change for readers (`touched` false until
    /// then); the blocks a store attaches after that lie below it, so that one record covers
    /// them.
    pub(super) fn attach(
        &self,
        run: &Arc<Run>,
        hang: u32,
        local: u64,
        slot: u32,
        touched: &mut bool,
    ) -> (Option<Arc<Run>>, u32, bool) {
        let mut state = run.state.write();
        debug_assert!(!state.unlinked, "attach to an unlinked run");
        if !*touched {
            self.registry.touch(slot, run.start + hang, local);
            *touched = true;
        }
        match state.lies_here(run, hang, local) {
            Some(false) => {
                let newly = state.holders.insert(slot, hang);
                return (None, hang, newly);
            }
            Some(true) => {
                state.locals.push(local);
                state.holders.insert(slot, hang);
                return (None, hang, true);
            }
            None => {}
        }
        if let Some(child) = state.children.get(&(hang, local)) {
            let newly = child.state.write().holders.insert(slot, 0);
            return (Some(Arc::clone(child)), 0, newly);
        }
        let id = self.next_run_id.fetch_add(1, Ordering::Relaxed);
        let child = Run::child(id, run, hang, local);
        child.state.write().holders.insert(slot, 0);
        let child = Arc::new(child);
        state.hang_child(hang, local, Arc::clone(&child));
        (Some(child), 0, true)
    }

    /// [`RunsIndex::attach`], returning the block as a [`Spot`].
    pub(super) fn attach_spot(
        &self,
        run: &Arc<Run>,
        hang: u32,
        local: u64,
        slot: u32,
        touched: &mut bool,
    ) -> (Spot, bool) {
        let (moved, offset, newly) = self.attach(run, hang, local, slot, touched);
        let run = moved.unwrap_or_else(|| Arc::clone(run));
        (Spot { run, offset }, newly)
    }

    /// Stops `slot` holding block `offset` of `run` and reclaims what that leaves unused.
    pub(super) fn detach(&self, run: &Arc<Run>, offset: u32, slot: u32) {
        let unused = {
            let mut state = run.state.write();
            let local = state.locals[offset as usize];
            self.registry.touch(slot, run.start + offset, local);
            state.holders.remove(slot, offset);
            // The run ends where its last holder or child needs it (see `trim`): only
            // dropping its last block can move that end.
            if offset as usize + 1 == state.locals.len() {
                state.trim(run);
            }
            state.is_unused()
        };
        if unused {
            unlink_unused(Arc::clone(run));
        }
    }

    /// Stops `slot` holding any block of `run` and reclaims what that leaves unused.
    pub(super) fn detach_run(&self, run: &Arc<Run>, slot: u32) {
        {
            let mut state = run.state.write();
            let RunState {
                locals, holders, ..
            } = &mut *state;
            if let Some(holder) = holders.of(slot) {
                for offset in holder.offsets() {
                    self.registry
                        .touch(slot, run.start + offset, locals[offset as usize]);
                }
            }
            holders.remove_slot(slot);
            state.trim(run);
            if !state.is_unused() {
                return;
            }
        }
        unlink_unused(Arc::clone(run));
    }
}

/// Unlinks `run` if nobody holds it and nothing hangs below it, then its parent the same way.
///
/// A writer that leaves a run used skips this: whoever later leaves it unused (under the
/// run's lock, so after every other change of it) comes here.
fn unlink_unused(mut run: Arc<Run>) {
    while let Some(parent) = run.parent.upgrade() {
        let mut parent_state = parent.state.write();
        let mut state = run.state.write();
        if state.unlinked || !state.is_unused() {
            return;
        }
        parent_state.unhang_child((run.hang, run.first), &run);
        state.unlinked = true;
        drop(state);
        parent_state.trim(&parent);
        drop(parent_state);
        run = parent;
    }
}
