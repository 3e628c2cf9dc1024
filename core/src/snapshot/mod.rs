//! Snapshots: an index's state written as a stream and restored into an empty indexer.
//!
//! [`Indexer::write_snapshot`](crate::Indexer::write_snapshot) writes one section per worker,
//! each taken under that worker's lock (so it is one state the worker passed through, never
//! half a batch) and carrying the worker's watermark, while events keep being applied; it
//! holds one worker's section in memory at a time. [`Indexer::restore_snapshot`](
//! crate::Indexer::restore_snapshot) reads it back into an empty indexer: afterwards the
//! indexer answers and behaves exactly as the written one did (names, several names of one
//! block, orphans, tiers, watermarks). Any bad input is [`Error::Malformed`] and leaves the
//! indexer empty. The byte format is in docs/snapshots.md.
//!
//! The format describes each worker's blocks as trees of local hashes, so a snapshot of
//! either backend restores into either, with one exception: the positional backend does not
//! know the path of an orphan whose parent the worker no longer holds, and writes such a
//! block below an *anchor* (the parent's identity and position). The radix backend needs
//! paths and refuses such a snapshot with [`Error::InvalidArgument`] (nothing restored).

mod format;
mod stream;

pub(crate) use format::{DecodedWorker, ExportParent, Exporter};
pub(crate) use stream::{restore, write};

use crate::model::Worker;
use crate::Error;

/// What a snapshot holds, as written or as restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct SnapshotInfo {
    /// Workers `(worker_id, dp_rank)` in the snapshot (empty ones included).
    pub workers: u64,
    /// Held `(worker, name)` pairs: the sum over workers of the names they hold.
    pub blocks: u64,
    /// Bytes of the snapshot.
    pub bytes: u64,
    /// The smallest watermark of any worker (0 when a worker has none, or no worker).
    pub min_watermark: u64,
    /// The largest watermark of any worker (0 when none has one).
    pub max_watermark: u64,
}

/// A backend's snapshot support, as [`crate::Backend::snapshots`] hands it out. Opaque: only
/// the backends of this crate provide it.
#[derive(Clone, Copy)]
pub struct SnapshotHooks<'a>(pub(crate) &'a dyn SnapshotBackend);

impl std::fmt::Debug for SnapshotHooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotHooks").finish_non_exhaustive()
    }
}

/// One worker's section as exported: its watermark and record counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Exported {
    pub(crate) watermark: u64,
}

/// What a backend does for snapshots; the blanket implementation for the positional and
/// radix backends is in `index/worker_blocks.rs`, their own parts in `export_state` and
/// `restore_state` of each.
pub(crate) trait SnapshotBackend: Send + Sync {
    /// Known workers now.
    fn known_workers(&self) -> u64;

    /// Every known worker, sorted.
    fn all_workers(&self) -> Vec<Worker>;

    /// Under the worker's lock: its watermark, and its nodes and names into `exporter`.
    /// `None` when the worker is not known (any more).
    fn export_worker(&self, worker: Worker, exporter: &mut Exporter) -> Option<Exported>;

    /// Creates the worker (unknown until now, else malformed) with its blocks and watermark.
    fn restore_worker(
        &self,
        worker: Worker,
        watermark: u64,
        section: &DecodedWorker,
    ) -> Result<(), Error>;

    /// Drops and forgets a worker (to undo a failed restore).
    fn forget_worker(&self, worker: Worker);
}
