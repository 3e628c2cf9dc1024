//! `Indexer`: the core indexer behind a handle that can be closed, every call that can take
//! time run with the GIL released.

use std::sync::{Arc, Mutex};

use kvidx::{BackendKind, BatchOutcome, Config, Worker};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::answers::{matches_list, with_answer};
use crate::errors::{index_error, invalid, ShutDown};
use crate::events::{event_of, events_of};
use crate::predictions::{self, PredictedMatch};
use crate::query::with_query;
use crate::results::{PredictionStats, ReplicaStats, SnapshotInfo, Stats, TieredMatch};
use crate::snapshot_io;

/// The backend named `name`.
fn parse_backend(name: &str) -> PyResult<BackendKind> {
    match name {
        "positional" => Ok(BackendKind::Positional),
        "radix" => Ok(BackendKind::Radix),
        "runs" => Ok(BackendKind::Runs),
        "reference" => Ok(BackendKind::Reference),
        _ => Err(invalid(format!(
            "unknown backend {name:?}: expected positional, radix, runs or reference"
        ))),
    }
}

fn backend_name(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::Positional => "positional",
        BackendKind::Radix => "radix",
        BackendKind::Runs => "runs",
        BackendKind::Reference => "reference",
    }
}

/// A global index of cached KV blocks per worker. Every method may be called from any number
/// of Python threads at once; queries run while another thread applies events.
#[pyclass(frozen, module = "kvidx")]
pub struct Indexer {
    inner: Mutex<Option<Arc<kvidx::Indexer>>>,
    config: Config,
}

impl Indexer {
    /// The open indexer, or `ShutDown` once closed.
    pub fn open(&self) -> PyResult<Arc<kvidx::Indexer>> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| ShutDown::new_err("the indexer is closed"))
    }
}

#[pymethods]
impl Indexer {
    #[new]
    #[pyo3(signature = (backend="runs", *, event_threads=1, jump_size=0, queue_capacity=0, queue_bytes=0, prediction_bytes=0, prediction_worker_capacity=0, manual_clock=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        backend: &str,
        event_threads: usize,
        jump_size: usize,
        queue_capacity: usize,
        queue_bytes: usize,
        prediction_bytes: usize,
        prediction_worker_capacity: usize,
        manual_clock: bool,
    ) -> PyResult<Self> {
        let config = Config {
            backend: parse_backend(backend)?,
            event_threads,
            jump_size,
            queue_capacity,
            queue_bytes,
            predictions: predictions::config(
                prediction_bytes,
                prediction_worker_capacity,
                manual_clock,
            ),
        };
        let index = py
            .allow_threads(|| kvidx::Indexer::new(config))
            .map_err(index_error)?;
        Ok(Self {
            inner: Mutex::new(Some(Arc::new(index))),
            config,
        })
    }

    /// The backend's name.
    #[getter]
    fn backend(&self) -> &'static str {
        backend_name(self.config.backend)
    }
    /// Event threads (0: events apply on the caller's thread before the call returns).
    #[getter]
    fn event_threads(&self) -> usize {
        self.config.event_threads
    }
    /// Events each event thread may have queued before senders block (0: the default).
    #[getter]
    fn queue_capacity(&self) -> usize {
        self.config.queue_capacity
    }
    /// Bytes of queued work each event thread may hold before senders block (0: the default).
    #[getter]
    fn queue_bytes(&self) -> usize {
        self.config.queue_bytes
    }
    /// Bytes all predictions may take (the core's default when 0 was given).
    #[getter]
    fn prediction_bytes(&self) -> usize {
        match self.config.predictions.max_bytes {
            0 => kvidx::DEFAULT_PREDICTION_BYTES,
            bytes => bytes,
        }
    }
    /// Predicted blocks each worker may hold (0: no per-worker bound).
    #[getter]
    fn prediction_worker_capacity(&self) -> usize {
        self.config.predictions.worker_capacity
    }
    /// The clock predictions expire by: `"monotonic"` or `"manual"`.
    #[getter]
    fn clock(&self) -> &'static str {
        match self.config.predictions.clock {
            kvidx::Clock::Monotonic => "monotonic",
            kvidx::Clock::Manual => "manual",
        }
    }
    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// Applies every accepted event, stops the event threads and releases the index; later
    /// calls raise `ShutDown`. Calling it again does nothing.
    fn close(&self, py: Python<'_>) {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        py.allow_threads(move || drop(taken));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    /// Applies (synchronous mode) or queues one event.
    fn apply_event(&self, py: Python<'_>, event: &Bound<'_, PyAny>) -> PyResult<()> {
        let event = event_of(event)?;
        let index = self.open()?;
        py.allow_threads(|| index.apply_event(event))
            .map_err(index_error)
    }

    /// Applies or queues events in order; every event is tried, the first error is raised.
    fn apply_events(&self, py: Python<'_>, events: &Bound<'_, PyAny>) -> PyResult<()> {
        let events = events_of(events)?;
        let index = self.open()?;
        py.allow_threads(|| index.apply_events(events))
            .map_err(index_error)
    }

    /// Applies or queues `events`, all of one worker, as one batch at `offset` (>= 1), skipped
    /// whole when `offset` is at or below the worker's watermark. Returns `("queued", 0)`,
    /// `("skipped", 0)` or `("applied", rejected_stored_events)`.
    #[pyo3(signature = (worker_id, offset, events, *, dp_rank=0))]
    fn apply_batch_at(
        &self,
        py: Python<'_>,
        worker_id: u64,
        offset: u64,
        events: &Bound<'_, PyAny>,
        dp_rank: u32,
    ) -> PyResult<(&'static str, u64)> {
        let events = events_of(events)?;
        let index = self.open()?;
        let worker = Worker::new(worker_id, dp_rank);
        let outcome = py
            .allow_threads(|| index.apply_batch_at(worker, offset, events))
            .map_err(index_error)?;
        Ok(match outcome {
            BatchOutcome::Queued => ("queued", 0),
            BatchOutcome::Skipped => ("skipped", 0),
            BatchOutcome::Applied { rejected } => ("applied", rejected),
        })
    }

    /// Drops and forgets a worker: every dp rank, or only `dp_rank` when given.
    #[pyo3(signature = (worker_id, *, dp_rank=None))]
    fn remove_worker(&self, py: Python<'_>, worker_id: u64, dp_rank: Option<u32>) -> PyResult<()> {
        let index = self.open()?;
        py.allow_threads(|| match dp_rank {
            None => index.remove_worker(worker_id),
            Some(rank) => index.remove_worker_dp_rank(Worker::new(worker_id, rank)),
        })
        .map_err(index_error)
    }

    /// A barrier: returns once every event accepted before the call has been applied.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let index = self.open()?;
        py.allow_threads(|| index.flush()).map_err(index_error)
    }

    /// The workers holding a prefix of the query (local hashes): depth descending, then
    /// worker id, then dp rank.
    fn find_matches<'py>(
        &self,
        py: Python<'py>,
        local_hashes: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let index = self.open()?;
        with_query(local_hashes, |query| {
            with_answer(|found| {
                py.allow_threads(|| index.find_matches_into(query, found));
                matches_list(py, found)
            })
        })
    }

    /// Like `find_matches`, each worker with its cumulative depth per tier.
    fn find_matches_tiered(
        &self,
        py: Python<'_>,
        local_hashes: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<TieredMatch>> {
        let index = self.open()?;
        with_query(local_hashes, |query| {
            let found = py.allow_threads(|| index.find_matches_tiered(query));
            Ok(found.into_iter().map(TieredMatch::from).collect())
        })
    }

    /// Credits `(worker_id, dp_rank)` with the chain of `local_hashes` for `ttl_seconds` on
    /// the indexer's clock: until then, or until events settle it (a Stored confirms, a
    /// Removed, a Cleared or the worker's removal drops), `find_matches_predicted` counts
    /// these blocks for the worker. Takes effect before returning, even with event threads.
    /// `find_matches` never sees predictions.
    fn predict(
        &self,
        py: Python<'_>,
        worker_id: u64,
        dp_rank: u32,
        local_hashes: &Bound<'_, PyAny>,
        ttl_seconds: f64,
    ) -> PyResult<()> {
        let ttl = predictions::seconds(ttl_seconds, "ttl_seconds")?;
        let index = self.open()?;
        let worker = Worker::new(worker_id, dp_rank);
        with_query(local_hashes, |query| {
            py.allow_threads(|| index.predict(worker, query, ttl))
                .map_err(index_error)
        })
    }

    /// Every worker of `find_matches` (same confirmed `depth`) and every worker predicted to
    /// hold the query's first block, with its `predicted_depth`: predicted depth descending,
    /// then depth descending, then worker id, then dp rank.
    fn find_matches_predicted(
        &self,
        py: Python<'_>,
        local_hashes: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<PredictedMatch>> {
        let index = self.open()?;
        with_query(local_hashes, |query| {
            let found = py.allow_threads(|| index.find_matches_predicted(query));
            Ok(found.into_iter().map(PredictedMatch::from).collect())
        })
    }

    /// The state and counters of the indexer's predictions.
    fn prediction_stats(&self) -> PyResult<PredictionStats> {
        Ok(self.open()?.prediction_stats().into())
    }

    /// Seconds on the indexer's clock: since the indexer was built (monotonic), or as last
    /// set (manual).
    fn now(&self) -> PyResult<f64> {
        Ok(self.open()?.now().as_secs_f64())
    }

    /// Sets the manual clock to `seconds`; `InvalidArgument` with the monotonic clock or for
    /// a time before the clock's current one.
    fn set_time(&self, seconds: f64) -> PyResult<()> {
        let now = predictions::seconds(seconds, "seconds")?;
        self.open()?.set_time(now).map_err(index_error)
    }

    /// Moves the manual clock forward by `seconds`; `InvalidArgument` with the monotonic
    /// clock.
    fn advance_time(&self, seconds: f64) -> PyResult<()> {
        let by = predictions::seconds(seconds, "seconds")?;
        self.open()?.advance_time(by).map_err(index_error)
    }

    /// The indexer's counters (with event threads, `flush` first for exact figures).
    fn stats(&self) -> PyResult<Stats> {
        Ok(self.open()?.stats().into())
    }

    /// Counters of offset batches.
    fn replica_stats(&self) -> PyResult<ReplicaStats> {
        Ok(self.open()?.replica_stats().into())
    }

    /// The worker's watermark (offset of the last batch applied to it), or None.
    #[pyo3(signature = (worker_id, *, dp_rank=0))]
    fn watermark(&self, worker_id: u64, dp_rank: u32) -> PyResult<Option<u64>> {
        Ok(self.open()?.watermark(Worker::new(worker_id, dp_rank)))
    }

    /// The index's state as snapshot bytes.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let index = self.open()?;
        let bytes = py
            .allow_threads(|| {
                let mut out = Vec::new();
                index.write_snapshot(&mut out).map(|_| out)
            })
            .map_err(index_error)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Writes a snapshot to a path (`str` or `os.PathLike`) or a binary file object.
    fn write_snapshot(&self, py: Python<'_>, target: &Bound<'_, PyAny>) -> PyResult<SnapshotInfo> {
        let index = self.open()?;
        snapshot_io::write(py, &index, target)
    }

    /// Restores a snapshot (bytes, a path or a binary file object) into this indexer, which
    /// must be empty.
    fn restore_snapshot(
        &self,
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
    ) -> PyResult<SnapshotInfo> {
        let index = self.open()?;
        snapshot_io::restore(py, &index, source)
    }

    fn __repr__(&self) -> String {
        format!(
            "Indexer(backend={:?}, event_threads={}, closed={})",
            self.backend(),
            self.config.event_threads,
            if self.closed() { "True" } else { "False" }
        )
    }
}
