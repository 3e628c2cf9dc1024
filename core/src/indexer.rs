//! [`Indexer`]: the front door of the crate. Reads run inline, writes go through the pool.

use std::sync::Arc;
use std::time::Duration;

use crate::applier::Applier;
use crate::index::{Backend, BackendKind};
use crate::model::{
    BatchOutcome, Event, Match, PredictedMatch, ReplicaStats, Stats, TieredMatch, Worker, Write,
};
use crate::predictions::{PredictionConfig, PredictionStats, Predictions};
use crate::reference::ReferenceIndex;
use crate::scratch::with_scratch;
use crate::snapshot::{self, SnapshotInfo};
use crate::writer::Writer;
use crate::Error;

/// The jump size of the positional backend when the configuration leaves it at 0.
pub const DEFAULT_JUMP_SIZE: usize = 32;
/// Queue capacity per event thread when the configuration leaves it at 0.
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;
/// The largest number of event threads an indexer accepts.
pub const MAX_EVENT_THREADS: usize = 1024;
/// The largest queue capacity (events per event thread) an indexer accepts.
pub const MAX_QUEUE_CAPACITY: usize = 1 << 20;
/// Bytes of queued work each event thread may hold when the configuration leaves it at 0.
pub const DEFAULT_QUEUE_BYTES: usize = 32 << 20;
/// The largest jump the positional backend takes; larger settings act as this one (a jump
/// past the end of a query lands on its last block, so answers do not depend on it).
pub const MAX_JUMP_SIZE: usize = 1 << 16;

/// How to build an [`Indexer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The index structure.
    pub backend: BackendKind,
    /// Event threads; 0 applies events synchronously on the caller's thread.
    pub event_threads: usize,
    /// Jump size of the positional backend; 0 means [`DEFAULT_JUMP_SIZE`]; values above
    /// [`MAX_JUMP_SIZE`] act as it.
    pub jump_size: usize,
    /// Events each event thread may have queued before senders block; 0 means
    /// [`DEFAULT_QUEUE_CAPACITY`]; at most [`MAX_QUEUE_CAPACITY`].
    pub queue_capacity: usize,
    /// Bytes of queued work (events' blocks and hashes, counted by
    /// [`Event::queued_bytes`](crate::Event::queued_bytes)) each event thread may hold before
    /// senders block; 0 means [`DEFAULT_QUEUE_BYTES`]. An event larger than the budget is
    /// still accepted, alone in an otherwise empty queue.
    pub queue_bytes: usize,
    /// Predicted blocks ([`Indexer::predict`]): their byte bound, per-worker capacity and
    /// clock. The default: [`crate::DEFAULT_PREDICTION_BYTES`], no per-worker bound, the
    /// system's monotonic clock.
    pub predictions: PredictionConfig,
}

impl Config {
    /// Checks every setting against its documented range.
    pub fn validate(&self) -> Result<(), Error> {
        if self.event_threads > MAX_EVENT_THREADS {
            return Err(Error::InvalidArgument("event_threads is larger than 1024"));
        }
        if self.queue_capacity > MAX_QUEUE_CAPACITY {
            return Err(Error::InvalidArgument(
                "queue_capacity is larger than 1048576 events",
            ));
        }
        Ok(())
    }
}

impl Default for Config {
    /// The default backend ([`BackendKind::Runs`]), one event thread, default jump size and
    /// queue capacity.
    fn default() -> Self {
        Self {
            backend: BackendKind::default(),
            event_threads: 1,
            jump_size: 0,
            queue_capacity: 0,
            queue_bytes: 0,
            predictions: PredictionConfig::default(),
        }
    }
}

thread_local! {
    static CONFIRMED: std::cell::RefCell<Vec<Match>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Refuses offset 0: batch offsets start at 1 (a watermark of 0 means none).
pub(crate) fn check_offset(offset: u64) -> Result<(), Error> {
    if offset == 0 {
        return Err(Error::InvalidArgument("a batch offset is at least 1"));
    }
    Ok(())
}

/// A global index of cached KV blocks per worker.
///
/// Thread-safety: every method takes `&self` and may be called from any number of threads at
/// once. `find_matches` always runs on the caller's thread, never behind a queue. With
/// `event_threads > 0`, writes are queued (a worker's events stay in order) and their outcome
/// shows in [`Indexer::stats`] after [`Indexer::flush`]; with 0 they apply before returning.
/// Dropping the indexer applies every accepted event, then joins the event threads.
///
/// Reads during writes: each worker in an answer is reported with its exact depth at some
/// instant during the call, and a worker missing from an answer held no prefix of the query
/// at some instant during the call; no worker appears twice (see `docs/contract.md`).
pub struct Indexer {
    // Declared first so it drops (and drains) before the applier goes.
    writer: Writer,
    applier: Arc<Applier>,
    config: Config,
}

impl std::fmt::Debug for Indexer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Indexer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Indexer {
    /// Builds an indexer; fails with [`Error::InvalidArgument`] for an out-of-range setting.
    pub fn new(config: Config) -> Result<Self, Error> {
        config.validate()?;
        let jump_size = if config.jump_size == 0 {
            DEFAULT_JUMP_SIZE
        } else {
            config.jump_size
        };
        let backend: Box<dyn Backend> = match config.backend {
            BackendKind::Positional => {
                Box::new(crate::index::positional::PositionalIndex::new(jump_size))
            }
            BackendKind::Radix => Box::new(crate::index::radix::RadixIndex::new()),
            BackendKind::Runs => Box::new(crate::index::runs::RunsIndex::new()),
            BackendKind::Reference => Box::new(ReferenceIndex::new()),
        };
        Self::with_backend(backend, config)
    }

    /// Builds an indexer over any [`Backend`], with the write path, event threads and
    /// counters of every other indexer (`config.backend` and `config.jump_size` are not used).
    /// Benchmarks use it to run a baseline structure behind the real event threads.
    pub fn with_backend(backend: Box<dyn Backend>, config: Config) -> Result<Self, Error> {
        config.validate()?;
        let capacity = if config.queue_capacity == 0 {
            DEFAULT_QUEUE_CAPACITY
        } else {
            config.queue_capacity
        };
        let budget = if config.queue_bytes == 0 {
            DEFAULT_QUEUE_BYTES
        } else {
            config.queue_bytes
        };
        let predictions = Predictions::new(config.predictions);
        let applier = Arc::new(Applier::new(backend, predictions));
        let writer = Writer::start(&applier, config.event_threads, capacity, budget)?;
        Ok(Self {
            writer,
            applier,
            config,
        })
    }

    /// The configuration this indexer was built with (zeros as given, not resolved).
    pub fn config(&self) -> Config {
        self.config
    }

    /// Applies (synchronous mode) or queues (pooled mode) one write of any kind.
    ///
    /// Synchronous mode returns [`Error::ParentNotFound`] for a rejected Stored event.
    /// Pooled mode blocks while the worker's queue is full (in writes or bytes) and returns
    /// [`Error::ShutDown`] if the event threads are gone.
    #[inline]
    pub fn submit(&self, write: Write) -> Result<(), Error> {
        self.writer.submit(write)
    }

    /// Applies or queues one event (see [`Indexer::submit`]).
    #[inline]
    pub fn apply_event(&self, event: Event) -> Result<(), Error> {
        self.writer.submit_event(event)
    }

    /// Applies or queues events in order. Every event is tried (a rejected Stored does not
    /// stop the later ones); the first error is returned. Consecutive events of one worker
    /// are applied a few at a time as one change of that worker (a reader sees the worker's
    /// state before or after each such run, as for any change).
    pub fn apply_events(&self, events: impl IntoIterator<Item = Event>) -> Result<(), Error> {
        self.writer.submit_events(events).1
    }

    /// The write side, for the engine feed.
    pub(crate) fn writer(&self) -> &Writer {
        &self.writer
    }

    /// Drops and forgets every dp rank of a worker, after its events accepted before this call.
    pub fn remove_worker(&self, worker_id: u64) -> Result<(), Error> {
        self.submit(Write::RemoveWorker(worker_id))
    }

    /// Drops and forgets one `(worker_id, dp_rank)`, after its events accepted before this call.
    pub fn remove_worker_dp_rank(&self, worker: Worker) -> Result<(), Error> {
        self.submit(Write::RemoveWorkerDpRank(worker))
    }

    /// A barrier: returns once every event accepted before the call has been applied.
    pub fn flush(&self) -> Result<(), Error> {
        self.writer.flush()
    }

    /// The workers holding a prefix of the query (local hashes), deepest first.
    pub fn find_matches(&self, local_hashes: &[u64]) -> Vec<Match> {
        let mut out = Vec::new();
        self.find_matches_into(local_hashes, &mut out);
        out
    }

    /// Like [`Indexer::find_matches`], writing into `out` (cleared first) so that a caller
    /// reusing one vector allocates nothing on the hot path.
    pub fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>) {
        self.applier.backend().find_matches_into(local_hashes, out);
    }

    /// The workers holding a prefix of the query, deepest first, each with its cumulative
    /// depth per storage tier ([`TieredMatch`]): the same workers and depths as
    /// [`Indexer::find_matches`].
    ///
    /// When no worker has a block off the device, this costs what `find_matches` costs;
    /// otherwise each reported worker's tiers are read under its lock (a walk of its prefix).
    pub fn find_matches_tiered(&self, local_hashes: &[u64]) -> Vec<TieredMatch> {
        let mut out = Vec::new();
        self.find_matches_tiered_into(local_hashes, &mut out);
        out
    }

    /// Like [`Indexer::find_matches_tiered`], writing into `out` (cleared first).
    pub fn find_matches_tiered_into(&self, local_hashes: &[u64], out: &mut Vec<TieredMatch>) {
        self.applier
            .backend()
            .find_matches_tiered_into(local_hashes, out);
    }

    /// Credits `worker` with the chain of `local_hashes` (a request's blocks from its first)
    /// for `ttl` from now on the indexer's clock: until then, or until events settle it,
    /// [`Indexer::find_matches_predicted`] counts these blocks for the worker (contract,
    /// "Predicted depth"). [`Indexer::find_matches`] never sees predictions.
    ///
    /// Predicting blocks already predicted for the worker refreshes them (new expiry, most
    /// recently predicted). A Stored of the worker holding a predicted block confirms it (the
    /// prediction is dropped; the block is held); a Removed of it, a Cleared of the worker
    /// and the worker's removal drop it. Applied at once on the caller's thread, even with
    /// event threads (so an event accepted earlier but still queued settles it when
    /// applied). Bounded by [`PredictionConfig::max_bytes`] (least recently predicted
    /// blocks dropped first; a chain's deepest blocks before its first) and
    /// [`PredictionConfig::worker_capacity`]. An empty chain or a zero `ttl` credits
    /// nothing. Never fails today; the `Result` leaves room for refusals.
    pub fn predict(
        &self,
        worker: Worker,
        local_hashes: &[u64],
        ttl: Duration,
    ) -> Result<(), Error> {
        self.applier
            .predictions()
            .predict(worker, local_hashes, ttl);
        Ok(())
    }

    /// The workers holding or predicted to hold a prefix of the query, with both depths
    /// ([`PredictedMatch`]): every worker of [`Indexer::find_matches`] with the same
    /// (confirmed) depth, and every worker predicted to hold the query's first block;
    /// ordered by predicted depth, deepest first, then by confirmed depth, deepest first,
    /// then by worker id and dp rank.
    ///
    /// With no prediction held, this costs what `find_matches` costs.
    pub fn find_matches_predicted(&self, local_hashes: &[u64]) -> Vec<PredictedMatch> {
        let mut out = Vec::new();
        self.find_matches_predicted_into(local_hashes, &mut out);
        out
    }

    /// Like [`Indexer::find_matches_predicted`], writing into `out` (cleared first).
    pub fn find_matches_predicted_into(&self, local_hashes: &[u64], out: &mut Vec<PredictedMatch>) {
        with_scratch(&CONFIRMED, |confirmed: &mut Vec<Match>| {
            self.find_matches_into(local_hashes, confirmed);
            self.applier
                .predictions()
                .answer(local_hashes, confirmed, out);
        });
    }

    /// The state and counters of the indexer's predictions.
    pub fn prediction_stats(&self) -> PredictionStats {
        self.applier.predictions().stats()
    }

    /// The time on the indexer's clock ([`PredictionConfig::clock`]): since the indexer was
    /// built (monotonic), or as last set (manual).
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.applier.predictions().clock().now_nanos())
    }

    /// Sets a manual clock to `now`. [`Error::InvalidArgument`] with the monotonic clock or
    /// for a time before the clock's current one (a manual clock never goes back).
    pub fn set_time(&self, now: Duration) -> Result<(), Error> {
        self.applier.predictions().clock().set(now)
    }

    /// Moves a manual clock forward by `by` (saturating). [`Error::InvalidArgument`] with
    /// the monotonic clock.
    pub fn advance_time(&self, by: Duration) -> Result<(), Error> {
        self.applier.predictions().clock().advance(by)
    }

    /// The counters of the contract. In pooled mode, call [`Indexer::flush`] first for
    /// figures that include every accepted event.
    pub fn stats(&self) -> Stats {
        self.applier.stats()
    }

    /// Applies (synchronous mode) or queues (pooled mode) `events`, all of `worker`, as one
    /// batch at `offset` (>= 1): when it is applied (in the worker's order, after its earlier
    /// writes), it is skipped whole if `offset` is at or below the worker's watermark;
    /// otherwise its events are applied in order under one hold of the worker's lock (no
    /// reader or snapshot sees part of it) and the watermark becomes `offset`. Replaying an
    /// overlapping range of batches is therefore idempotent.
    ///
    /// A batch at an offset makes its worker known (its watermark is part of its state), even
    /// when it is empty or every event of it is rejected. Events count in [`Indexer::stats`]
    /// as usual; batches in [`Indexer::replica_stats`]. Returns [`BatchOutcome::Skipped`] or
    /// [`BatchOutcome::Applied`] (with the rejected Stored events) in synchronous mode,
    /// [`BatchOutcome::Queued`] with event threads. An offset of 0 or an event of another
    /// worker is [`Error::InvalidArgument`] (nothing applied).
    pub fn apply_batch_at(
        &self,
        worker: Worker,
        offset: u64,
        events: Vec<Event>,
    ) -> Result<BatchOutcome, Error> {
        check_offset(offset)?;
        if events.iter().any(|e| e.worker != worker) {
            return Err(Error::InvalidArgument(
                "every event of a batch is for the batch's worker",
            ));
        }
        let events = events.into_iter().map(|e| e.data).collect();
        self.writer.submit_batch(worker, Some(offset), events)
    }

    /// The worker's watermark: the offset of the last batch applied to it (restored from a
    /// snapshot, or by [`Indexer::apply_batch_at`]); `None` when the worker is unknown or has
    /// none. In pooled mode, [`Indexer::flush`] first for one that includes every batch
    /// accepted.
    pub fn watermark(&self, worker: Worker) -> Option<u64> {
        self.applier.backend().watermark(worker)
    }

    /// Counters of offset batches: applied, skipped, and the events of the skipped ones.
    pub fn replica_stats(&self) -> ReplicaStats {
        self.applier.replica_stats()
    }

    /// Writes the index's state to `w` as a snapshot (docs/snapshots.md) while events keep
    /// being applied: each worker's section is one state of that worker (taken under its
    /// lock, never part of a batch) with its watermark. Only one worker's section is held in
    /// memory at a time; wrap `w` in a `BufWriter` for small writes' sake if it is unbuffered.
    /// In pooled mode, [`Indexer::flush`] first to include every accepted event.
    ///
    /// Errors: [`Error::Io`] when `w` fails; [`Error::InvalidArgument`] for a backend without
    /// snapshots (the reference model).
    pub fn write_snapshot(&self, w: impl std::io::Write) -> Result<SnapshotInfo, Error> {
        let hooks = self.snapshot_hooks()?;
        snapshot::write(hooks.0, w)
    }

    /// Restores a snapshot into this indexer, which must be empty: it never knew a worker, or
    /// every worker was removed ([`Error::InvalidArgument`] otherwise). Afterwards it answers
    /// and behaves exactly as the indexer that wrote the snapshot did when each worker's
    /// section was taken, watermarks included (so batches at or below them are skipped).
    /// Event counters ([`Indexer::stats`]' `events_*`) are not restored.
    ///
    /// Any bad input (truncated, corrupted, foreign, a newer format version) is
    /// [`Error::Malformed`]; a failing reader is [`Error::Io`]; either way the indexer is left
    /// empty and usable. A positional snapshot with orphans known only by identity cannot be
    /// restored into the radix backend ([`Error::InvalidArgument`], nothing restored). Apply
    /// no event while a restore runs (queries are fine). Memory: the index it builds, one
    /// section's decoded records and a constant; the lengths and counts the input claims are
    /// never read ahead or allocated (docs/snapshots.md).
    pub fn restore_snapshot(&self, r: impl std::io::Read) -> Result<SnapshotInfo, Error> {
        let hooks = self.snapshot_hooks()?;
        self.flush()?;
        snapshot::restore(hooks.0, r)
    }

    fn snapshot_hooks(&self) -> Result<snapshot::SnapshotHooks<'_>, Error> {
        self.applier
            .backend()
            .snapshots()
            .ok_or(Error::InvalidArgument(
                "this backend does not support snapshots",
            ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(change: impl FnOnce(&mut Config)) -> Result<Indexer, Error> {
        let mut config = Config::default();
        change(&mut config);
        Indexer::new(config)
    }

    #[test]
    fn the_default_backend_is_runs() {
        assert_eq!(Config::default().backend, BackendKind::Runs);
        assert_eq!(BackendKind::default(), BackendKind::Runs);
    }

    #[test]
    fn every_setting_out_of_range_is_an_invalid_argument() {
        let invalid = |r: Result<Indexer, Error>| matches!(r, Err(Error::InvalidArgument(_)));
        assert!(invalid(with(|c| c.event_threads = MAX_EVENT_THREADS + 1)));
        assert!(invalid(with(|c| c.event_threads = usize::MAX)));
        assert!(invalid(with(|c| c.queue_capacity = MAX_QUEUE_CAPACITY + 1)));
        assert!(invalid(with(|c| c.queue_capacity = 1 << 31)));
        assert!(invalid(with(|c| c.queue_capacity = usize::MAX)));
        let backend = Box::new(ReferenceIndex::new());
        let config = Config {
            queue_capacity: usize::MAX,
            ..Config::default()
        };
        assert!(invalid(Indexer::with_backend(backend, config)));
    }

    #[test]
    fn every_setting_at_its_bound_builds() {
        with(|c| {
            c.queue_capacity = MAX_QUEUE_CAPACITY;
            c.queue_bytes = usize::MAX;
            c.jump_size = usize::MAX;
        })
        .expect("largest queue, budget and any jump");
        // The largest pool: queues preallocate nothing, so this is cheap.
        let many = with(|c| c.event_threads = MAX_EVENT_THREADS).expect("1024 event threads");
        many.remove_worker(7).unwrap();
        many.flush().unwrap();
        with(|c| {
            c.event_threads = 2;
            c.queue_capacity = 1;
            c.queue_bytes = 1;
        })
        .expect("the smallest bounds: one write at a time")
        .apply_events((0..10).map(|i| Event::cleared(Worker::new(i, 0), 0)))
        .unwrap();
    }
}
