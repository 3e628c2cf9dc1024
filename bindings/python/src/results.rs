//! Answers and counters handed to Python: immutable value classes.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicU64};

use kvidx::{Tier, TIERS};
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::types::{PyBool, PyTuple};

use crate::events::parse_tier;

/// One worker's answer to a query: how many leading blocks of the query it holds.
/// Unpacks as `(worker_id, dp_rank, depth)`.
///
/// Immutable to Python. Its fields are atomics only so that `answers` can reuse an object no
/// one but its pool references (see `answers::matches_list`): a value that can be seen never
/// changes.
#[pyclass(frozen, module = "kvidx")]
pub struct Match {
    worker_id: AtomicU64,
    dp_rank: AtomicU32,
    depth: AtomicU32,
}

impl From<kvidx::Match> for Match {
    fn from(m: kvidx::Match) -> Self {
        Self {
            worker_id: AtomicU64::new(m.worker_id),
            dp_rank: AtomicU32::new(m.dp_rank),
            depth: AtomicU32::new(m.depth),
        }
    }
}

impl Match {
    /// The match held.
    pub fn value(&self) -> kvidx::Match {
        kvidx::Match {
            worker_id: self.worker_id.load(Relaxed),
            dp_rank: self.dp_rank.load(Relaxed),
            depth: self.depth.load(Relaxed),
        }
    }

    /// Makes this object hold `m`. Only for an object no one else can see (the caller holds
    /// the only reference, under the GIL).
    pub fn overwrite(&self, m: kvidx::Match) {
        self.worker_id.store(m.worker_id, Relaxed);
        self.dp_rank.store(m.dp_rank, Relaxed);
        self.depth.store(m.depth, Relaxed);
    }
}

#[pymethods]
impl Match {
    #[new]
    fn new(worker_id: u64, dp_rank: u32, depth: u32) -> Self {
        kvidx::Match {
            worker_id,
            dp_rank,
            depth,
        }
        .into()
    }
    /// The worker's engine instance.
    #[getter]
    fn worker_id(&self) -> u64 {
        self.worker_id.load(Relaxed)
    }
    /// The worker's data-parallel rank.
    #[getter]
    fn dp_rank(&self) -> u32 {
        self.dp_rank.load(Relaxed)
    }
    /// Leading blocks of the query the worker holds (at least 1).
    #[getter]
    fn depth(&self) -> u32 {
        self.depth.load(Relaxed)
    }
    fn __richcmp__(&self, other: &Bound<'_, Self>, op: CompareOp, py: Python<'_>) -> PyObject {
        let equal = self.value() == other.get().value();
        match op {
            CompareOp::Eq => PyBool::new(py, equal).to_owned().into_any().unbind(),
            CompareOp::Ne => PyBool::new(py, !equal).to_owned().into_any().unbind(),
            _ => py.NotImplemented(),
        }
    }
    fn __hash__(&self) -> u64 {
        let m = self.value();
        let mut hasher = DefaultHasher::new();
        (m.worker_id, m.dp_rank, m.depth).hash(&mut hasher);
        hasher.finish()
    }
    fn __repr__(&self) -> String {
        let m = self.value();
        format!(
            "Match(worker_id={}, dp_rank={}, depth={})",
            m.worker_id, m.dp_rank, m.depth
        )
    }
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let m = self.value();
        let fields = (m.worker_id, m.dp_rank, m.depth).into_pyobject(py)?;
        Ok(fields.into_any().try_iter()?.into_any())
    }
}

/// A match with its cumulative depth per storage tier (device, host, disk, external).
#[pyclass(frozen, eq, hash, module = "kvidx")]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TieredMatch {
    /// The worker's engine instance.
    #[pyo3(get)]
    pub worker_id: u64,
    /// The worker's data-parallel rank.
    #[pyo3(get)]
    pub dp_rank: u32,
    /// Leading blocks of the query the worker holds on any tier.
    #[pyo3(get)]
    pub depth: u32,
    tier_depths: [u32; TIERS],
}

impl From<kvidx::TieredMatch> for TieredMatch {
    fn from(m: kvidx::TieredMatch) -> Self {
        Self {
            worker_id: m.worker_id,
            dp_rank: m.dp_rank,
            depth: m.depth,
            tier_depths: m.tier_depths,
        }
    }
}

#[pymethods]
impl TieredMatch {
    /// Per tier (device, host, disk, external): leading blocks held on that tier or a
    /// faster one.
    #[getter]
    fn tier_depths<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tier_depths)
    }
    /// Blocks of the prefix whose fastest tier is `tier`.
    fn blocks_on(&self, tier: &str) -> PyResult<u32> {
        let tier: Tier = parse_tier(tier)?;
        Ok(self.core().blocks_on(tier))
    }
    /// The plain match (worker and depth).
    #[pyo3(name = "to_match")]
    fn plain(&self) -> Match {
        self.core().to_match().into()
    }
    fn __repr__(&self) -> String {
        format!(
            "TieredMatch(worker_id={}, dp_rank={}, depth={}, tier_depths={:?})",
            self.worker_id, self.dp_rank, self.depth, self.tier_depths
        )
    }
}

impl TieredMatch {
    fn core(&self) -> kvidx::TieredMatch {
        kvidx::TieredMatch {
            worker_id: self.worker_id,
            dp_rank: self.dp_rank,
            depth: self.depth,
            tier_depths: self.tier_depths,
        }
    }
}

/// Declares a frozen value class of `u64` counters copied from a core struct of the same
/// fields, with a `__repr__` and `__eq__`.
macro_rules! counters {
    ($(#[$doc:meta])* $name:ident from $core:ty { $($(#[$fdoc:meta])* $field:ident),+ $(,)? }) => {
        $(#[$doc])*
        #[pyclass(frozen, eq, module = "kvidx")]
        #[derive(Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fdoc])* #[pyo3(get)] pub $field: u64,)+
        }

        impl From<$core> for $name {
            fn from(c: $core) -> Self {
                Self { $($field: c.$field,)+ }
            }
        }

        #[pymethods]
        impl $name {
            fn __repr__(&self) -> String {
                let fields: Vec<String> =
                    vec![$(format!("{}={}", stringify!($field), self.$field)),+];
                format!("{}({})", stringify!($name), fields.join(", "))
            }
        }
    };
}

counters! {
    /// The indexer's counters.
    Stats from kvidx::Stats {
        /// Events fully applied.
        events_applied,
        /// Stored events rejected (missing parent or overflow).
        events_rejected,
        /// Names in Removed events the worker did not hold.
        unknown_removals,
        /// Known `(worker_id, dp_rank)` pairs.
        workers,
        /// Sum over workers of the blocks they hold.
        worker_blocks,
    }
}

counters! {
    /// Counters of offset batches.
    ReplicaStats from kvidx::ReplicaStats {
        /// Offset batches applied.
        batches_applied,
        /// Offset batches skipped whole (offset at or below the worker's watermark).
        batches_skipped,
        /// Events of the skipped batches.
        events_skipped,
    }
}

counters! {
    /// What a snapshot held.
    SnapshotInfo from kvidx::SnapshotInfo {
        /// Workers in the snapshot.
        workers,
        /// Held `(worker, name)` pairs.
        blocks,
        /// Bytes of the snapshot.
        bytes,
        /// The smallest watermark of any worker.
        min_watermark,
        /// The largest watermark of any worker.
        max_watermark,
    }
}

counters! {
    /// Counters of an engine feed (each saturates instead of wrapping).
    EngineStats from kvidx::engine::EngineStats {
        /// Batches decoded and applied.
        batches,
        /// Batches refused as malformed.
        batches_malformed,
        /// Engine events decoded.
        events_decoded,
        /// Index events submitted.
        events_submitted,
        /// Synchronous mode: submitted Stored events the index rejected.
        events_rejected,
        /// Engine events skipped (unknown tag, filtered, unhashable).
        events_skipped,
        /// Sequence gaps seen.
        gaps,
        /// Batches missed, summed over gaps.
        batches_missed,
        /// Publisher restarts seen.
        restarts,
        /// Workers cleared as a reaction to a gap or restart.
        workers_cleared,
        /// Publishers whose first batch tracked was above 0.
        late_starts,
        /// Batches those publishers sent before their first batch tracked.
        batches_missed_from_start,
    }
}

counters! {
    /// The state and counters of an indexer's predictions.
    PredictionStats from kvidx::PredictionStats {
        /// Predicted blocks held, one per (worker, block), expired ones not yet dropped
        /// included.
        blocks,
        /// Workers with at least one predicted block held.
        workers,
        /// Bytes the predictions take; at most the byte bound.
        bytes,
        /// Blocks dropped, least recently predicted first, to stay within the byte bound.
        dropped_for_bytes,
        /// Blocks dropped, a worker's least recently predicted first, for its capacity.
        dropped_for_capacity,
        /// Expired blocks dropped.
        expired,
        /// Blocks confirmed by a Stored of the same worker and block.
        confirmed,
        /// Blocks dropped by a Removed, a Cleared or a worker's removal.
        dropped_by_events,
    }
}

counters! {
    /// The hash check's counts (for one publisher, or summed).
    HashCheckCounts from kvidx::engine::HashCheckCounts {
        /// Blocks whose published name the check reproduced.
        matched,
        /// Blocks whose published name differs from the recomputed one.
        mismatched,
        /// Blocks the check could not recompute from the event.
        unverifiable,
    }
}
