//! `EngineFeed`: engines' msgpack `KVEventBatch` payloads decoded and applied to an
//! `Indexer`, with per-publisher sequence tracking.

use std::sync::Mutex;

use kvidx::engine::{
    self, ApplyOptions, ExtrasPolicy, FeedConfig, FeedError, Format, LlmdKeysConfig, MediaFilter,
    SeqStatus,
};
use kvidx::Worker;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{index_error, invalid, MalformedFeedState, MalformedPayload};
use crate::hash_check;
use crate::indexer::Indexer;
use crate::results::{EngineStats, HashCheckCounts};

fn parse_format(name: &str) -> PyResult<Format> {
    match name {
        "vllm" => Ok(Format::Vllm),
        "sglang" => Ok(Format::Sglang),
        "trtllm" => Ok(Format::TrtLlm),
        _ => Err(invalid(format!(
            "unknown format {name:?}: expected vllm, sglang or trtllm"
        ))),
    }
}

/// The sequence of a batch: an int, or the publisher's 8-byte big-endian sequence frame.
fn parse_seq(seq: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(seq) = seq else { return Ok(None) };
    if let Ok(frame) = seq.downcast::<PyBytes>() {
        return engine::parse_seq_frame(frame.as_bytes())
            .map(Some)
            .ok_or_else(|| invalid("a sequence frame is exactly 8 bytes"));
    }
    Ok(Some(seq.extract()?))
}

/// Stores with extra keys (cache salt, multimodal items): indexed under their namespace by
/// default, skipped with `skip_extras`, hashed by their tokens alone with `hash_extras`.
fn extras_policy(skip_extras: bool, hash_extras: bool) -> PyResult<ExtrasPolicy> {
    match (skip_extras, hash_extras) {
        (false, false) => Ok(ExtrasPolicy::Namespaced),
        (true, false) => Ok(ExtrasPolicy::Skip),
        (false, true) => Ok(ExtrasPolicy::HashTokensOnly),
        (true, true) => Err(invalid("skip_extras and hash_extras exclude each other")),
    }
}

fn feed_error(error: FeedError) -> PyErr {
    match error {
        FeedError::Decode(e) => MalformedPayload::new_err(e.to_string()),
        FeedError::Index(e) => index_error(e),
    }
}

/// What applying one batch did.
#[pyclass(frozen, module = "kvidx")]
pub struct BatchReport {
    /// The dp rank the events were applied to.
    #[pyo3(get)]
    dp_rank: u32,
    /// Engine events in the batch.
    #[pyo3(get)]
    events_decoded: u64,
    /// Index events submitted (applied, or queued with event threads).
    #[pyo3(get)]
    events_submitted: u64,
    /// Synchronous mode: submitted Stored events rejected.
    #[pyo3(get)]
    events_rejected: u64,
    /// Engine events that did not become index events.
    #[pyo3(get)]
    events_skipped: u64,
    /// `None` (no sequence given), `"first"`, `"in_order"`, `"gap"` or `"restart"`.
    #[pyo3(get)]
    seq_status: Option<&'static str>,
    /// Batches missed before this one (a gap's size; 0 otherwise).
    #[pyo3(get)]
    missed: u64,
    /// Whether the worker was cleared before the batch (gap or restart reaction).
    #[pyo3(get)]
    cleared_worker: bool,
    /// Offset batches, synchronous mode: skipped whole (offset at or below the watermark).
    #[pyo3(get)]
    batch_skipped: bool,
    /// The publisher's first batch tracked was above 0: the batches it sent before.
    #[pyo3(get)]
    missed_from_start: u64,
}

impl From<engine::BatchReport> for BatchReport {
    fn from(r: engine::BatchReport) -> Self {
        Self {
            dp_rank: r.dp_rank,
            events_decoded: r.events_decoded,
            events_submitted: r.events_submitted,
            events_rejected: r.events_rejected,
            events_skipped: r.skipped.total(),
            seq_status: r.seq.map(|s| match s {
                SeqStatus::First => "first",
                SeqStatus::InOrder => "in_order",
                SeqStatus::Gap { .. } => "gap",
                SeqStatus::Restart { .. } => "restart",
            }),
            missed: r.seq.map_or(0, |s| s.missed()),
            cleared_worker: r.cleared_worker,
            batch_skipped: r.batch_skipped,
            missed_from_start: r.missed_from_start,
        }
    }
}

#[pymethods]
impl BatchReport {
    fn __repr__(&self) -> String {
        format!(
            "BatchReport(dp_rank={}, events_decoded={}, events_submitted={}, events_rejected={}, \
             events_skipped={}, seq_status={:?}, missed={}, cleared_worker={}, batch_skipped={}, \
             missed_from_start={})",
            self.dp_rank,
            self.events_decoded,
            self.events_submitted,
            self.events_rejected,
            self.events_skipped,
            self.seq_status,
            self.missed,
            self.cleared_worker,
            self.batch_skipped,
            self.missed_from_start
        )
    }
}

/// Decodes engines' KV-event payloads and applies them to an indexer, tracking each
/// publisher's batch sequence (a gap or a restart clears the worker, as configured).
#[pyclass(frozen, module = "kvidx")]
pub struct EngineFeed {
    feed: Mutex<engine::EngineFeed>,
}

impl EngineFeed {
    fn with<T>(&self, f: impl FnOnce(&mut engine::EngineFeed) -> T) -> T {
        f(&mut self.feed.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[pymethods]
impl EngineFeed {
    #[new]
    #[pyo3(signature = (format="vllm", *, clear_on_gap=true, clear_on_restart=true, all_media=false, group=Some(0), skip_extras=false, hash_extras=false, unknown_medium="external"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        format: &str,
        clear_on_gap: bool,
        clear_on_restart: bool,
        all_media: bool,
        group: Option<u32>,
        skip_extras: bool,
        hash_extras: bool,
        unknown_medium: &str,
    ) -> PyResult<Self> {
        let options = ApplyOptions {
            media: if all_media {
                MediaFilter::All
            } else {
                MediaFilter::GpuOnly
            },
            group,
            extras: extras_policy(skip_extras, hash_extras)?,
            unknown_medium: crate::events::parse_tier(unknown_medium)?,
        };
        let config = FeedConfig {
            format: parse_format(format)?,
            options,
            clear_on_gap,
            clear_on_restart,
        };
        Ok(Self {
            feed: Mutex::new(engine::EngineFeed::new(config)),
        })
    }

    /// Decodes `payload` (one msgpack `KVEventBatch`) and applies it to `worker_id` (dp rank:
    /// `dp_rank`, else the envelope's, else 0). `seq` (an int or the 8-byte sequence frame)
    /// is tracked first; with `offset` (>= 1) the batch is applied as one offset batch. A
    /// malformed payload raises `MalformedPayload` and changes nothing.
    #[pyo3(signature = (indexer, worker_id, payload, *, dp_rank=None, seq=None, offset=None))]
    #[allow(clippy::too_many_arguments)]
    fn apply_message(
        &self,
        py: Python<'_>,
        indexer: &Indexer,
        worker_id: u64,
        payload: &[u8],
        dp_rank: Option<u32>,
        seq: Option<&Bound<'_, PyAny>>,
        offset: Option<u64>,
    ) -> PyResult<BatchReport> {
        let seq = parse_seq(seq)?;
        let index = indexer.open()?;
        let index = &*index;
        let report = py.allow_threads(|| {
            self.with(|feed| match offset {
                None => feed.apply_message(index, worker_id, dp_rank, seq, payload),
                Some(offset) => {
                    feed.apply_message_at(index, worker_id, dp_rank, seq, payload, offset)
                }
            })
        });
        report.map(Into::into).map_err(feed_error)
    }

    /// The next sequence expected from a publisher (0 when none was tracked).
    #[pyo3(signature = (worker_id, *, dp_rank=0))]
    fn next_expected(&self, worker_id: u64, dp_rank: u32) -> u64 {
        self.with(|feed| feed.next_expected(Worker::new(worker_id, dp_rank)))
    }

    /// Publishers the feed holds state for.
    fn publishers(&self) -> usize {
        self.with(|feed| feed.publishers())
    }

    /// Forgets a publisher (every dp rank, or only `dp_rank`); returns how many were known.
    #[pyo3(signature = (worker_id, *, dp_rank=None))]
    fn forget(&self, worker_id: u64, dp_rank: Option<u32>) -> usize {
        self.with(|feed| match dp_rank {
            None => feed.forget_worker(worker_id),
            Some(rank) => usize::from(feed.forget(Worker::new(worker_id, rank))),
        })
    }

    /// Removes a worker (every dp rank, or only `dp_rank`) from the indexer and forgets it here.
    #[pyo3(signature = (indexer, worker_id, *, dp_rank=None))]
    fn remove_worker(
        &self,
        py: Python<'_>,
        indexer: &Indexer,
        worker_id: u64,
        dp_rank: Option<u32>,
    ) -> PyResult<()> {
        let index = indexer.open()?;
        let index = &*index;
        py.allow_threads(|| {
            self.with(|feed| match dp_rank {
                None => feed.remove_worker(index, worker_id),
                Some(rank) => feed.remove_worker_dp_rank(index, Worker::new(worker_id, rank)),
            })
        })
        .map_err(index_error)
    }

    /// The feed's counters.
    fn stats(&self) -> EngineStats {
        self.with(|feed| feed.stats()).into()
    }

    /// Turns the hash check on (replacing any earlier one): each store's published block
    /// hashes are recomputed with `algorithm` (`"vllm_sha256_cbor"`, `"vllm_xxhash_cbor"` or
    /// `"sglang_sha256"`), vLLM's `seed` (the engine's `PYTHONHASHSEED`) and `block_size`
    /// (None: each store's own), and counted per publisher. Changes nothing indexed.
    #[pyo3(signature = (algorithm, seed=kvidx::engine::hash_check::VLLM_DEFAULT_SEED.to_owned(), block_size=None))]
    fn set_hash_check(
        &self,
        algorithm: &str,
        seed: String,
        block_size: Option<u32>,
    ) -> PyResult<()> {
        let config = hash_check::config(algorithm, seed, block_size)?;
        self.with(|feed| feed.set_hash_check(Some(config)));
        Ok(())
    }

    /// Turns the hash check off (its counts are forgotten).
    fn clear_hash_check(&self) {
        self.with(|feed| feed.set_hash_check(None));
    }

    /// The hash check's `(algorithm, seed, block_size)`, or None when it is off.
    #[getter]
    fn hash_check(&self) -> Option<(&'static str, String, Option<u32>)> {
        self.with(|feed| feed.hash_check().map(hash_check::described))
    }

    /// The hash check's counts for one publisher (zeros before its first store), or None
    /// when the check is off.
    #[pyo3(signature = (worker_id, *, dp_rank=0))]
    fn hash_check_counts(&self, worker_id: u64, dp_rank: u32) -> Option<HashCheckCounts> {
        self.with(|feed| feed.hash_check_counts(Worker::new(worker_id, dp_rank)))
            .map(Into::into)
    }

    /// The hash check's counts summed over every publisher, forgotten ones included, or None
    /// when the check is off.
    fn hash_check_totals(&self) -> Option<HashCheckCounts> {
        self.with(|feed| feed.hash_check_totals()).map(Into::into)
    }

    /// `{(worker_id, dp_rank): HashCheckCounts}` of every publisher the check holds counts
    /// for, ordered by worker id and dp rank (empty when the check is off).
    fn hash_check_workers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        hash_check::per_worker(py, self.with(|feed| feed.hash_check_workers()))
    }

    /// Indexes stores under llm-d's request keys (docs/contract.md section 3.2) of `seed`
    /// and `model` (a LoRA store: its adapter's name) instead of local hashes; query with
    /// `llmd_request_keys`. Switch before the first batch: the keys of blocks seen so far
    /// are forgotten.
    fn set_llmd_keys(&self, seed: String, model: String) {
        let config = LlmdKeysConfig { seed, model };
        self.with(|feed| feed.set_llmd_keys(Some(config)));
    }

    /// Indexes stores under local hashes again (the default).
    fn clear_llmd_keys(&self) {
        self.with(|feed| feed.set_llmd_keys(None));
    }

    /// llm-d's `(seed, model)` when stores are indexed under its keys, else None.
    #[getter]
    fn llmd_keys(&self) -> Option<(String, String)> {
        self.with(|feed| feed.llmd_keys().map(|c| (c.seed.clone(), c.model.clone())))
    }

    /// Every publisher's tracking state as bytes, for `restore_state`.
    fn save_state<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.with(|feed| feed.save_state()))
    }

    /// Replaces every publisher's tracking state with bytes from `save_state`.
    fn restore_state(&self, state: &[u8]) -> PyResult<()> {
        self.with(|feed| feed.restore_state(state))
            .map_err(|e| MalformedFeedState::new_err(e.to_string()))
    }
}
