//! The Rust side of the overhead benchmark (`bindings/python/bench.py`): the same query timed
//! inside Rust, in the same process, so the two figures are comparable.

use std::time::Instant;

use pyo3::prelude::*;

use crate::indexer::Indexer;

/// Seconds per `find_matches(local_hashes)` called `calls` times from Rust on `indexer`
/// (the answer vector reused, as a Rust caller would), with the GIL released.
#[pyfunction]
pub fn _time_find_matches(
    py: Python<'_>,
    indexer: &Indexer,
    local_hashes: Vec<u64>,
    calls: u32,
) -> PyResult<f64> {
    let index = indexer.open()?;
    Ok(py.allow_threads(|| {
        let mut out = Vec::new();
        let start = Instant::now();
        for _ in 0..calls {
            index.find_matches_into(std::hint::black_box(&local_hashes), &mut out);
            std::hint::black_box(&out);
        }
        start.elapsed().as_secs_f64() / f64::from(calls.max(1))
    }))
}
