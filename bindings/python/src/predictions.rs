//! Predicted depth (docs/contract.md section 6) for Python: the indexer's prediction settings,
//! times in seconds, and the answers of a predicted lookup.

use std::time::Duration;

use kvidx::{Clock, PredictionConfig};
use pyo3::prelude::*;

use crate::errors::invalid;

/// The prediction settings of `Indexer(...)`: the byte bound (0: the core's default), the
/// per-worker capacity (0: none) and a manual clock (else monotonic).
pub fn config(max_bytes: usize, worker_capacity: usize, manual_clock: bool) -> PredictionConfig {
    PredictionConfig {
        max_bytes,
        worker_capacity,
        clock: if manual_clock {
            Clock::Manual
        } else {
            Clock::Monotonic
        },
    }
}

/// A span of time given in seconds (a non-negative, finite float or int).
pub fn seconds(value: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        invalid(format!(
            "{what} must be a finite, non-negative number of seconds"
        ))
    })
}

/// One worker's answer to a predicted lookup: its confirmed depth (exactly as `find_matches`
/// reports it, 0 when it holds no prefix) and its predicted depth (at least `depth`, extended
/// by its unexpired predicted blocks). Unpacks as `(worker_id, dp_rank, depth,
/// predicted_depth)`.
#[pyclass(frozen, eq, hash, module = "kvidx")]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PredictedMatch {
    /// The worker's engine instance.
    #[pyo3(get)]
    worker_id: u64,
    /// The worker's data-parallel rank.
    #[pyo3(get)]
    dp_rank: u32,
    /// Leading blocks of the query the worker holds, by events.
    #[pyo3(get)]
    depth: u32,
    /// Leading blocks of the query the worker holds or is predicted to hold.
    #[pyo3(get)]
    predicted_depth: u32,
}

impl From<kvidx::PredictedMatch> for PredictedMatch {
    fn from(m: kvidx::PredictedMatch) -> Self {
        Self {
            worker_id: m.worker_id,
            dp_rank: m.dp_rank,
            depth: m.depth,
            predicted_depth: m.predicted_depth,
        }
    }
}

#[pymethods]
impl PredictedMatch {
    #[new]
    fn new(worker_id: u64, dp_rank: u32, depth: u32, predicted_depth: u32) -> Self {
        Self {
            worker_id,
            dp_rank,
            depth,
            predicted_depth,
        }
    }
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let fields = (
            self.worker_id,
            self.dp_rank,
            self.depth,
            self.predicted_depth,
        )
            .into_pyobject(py)?;
        Ok(fields.into_any().try_iter()?.into_any())
    }
    fn __repr__(&self) -> String {
        format!(
            "PredictedMatch(worker_id={}, dp_rank={}, depth={}, predicted_depth={})",
            self.worker_id, self.dp_rank, self.depth, self.predicted_depth
        )
    }
}
