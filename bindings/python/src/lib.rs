//! The Python module `kvidx`: the Rust core's indexer, events, engine feed and hashing, with
//! the core's errors as an exception hierarchy and the GIL released in every call that can
//! take time.

#![forbid(unsafe_code)]

mod answers;
mod bench;
mod errors;
mod events;
mod feed;
mod hash_check;
mod hashing;
mod indexer;
mod namespace;
mod predictions;
mod query;
mod results;
mod snapshot_io;

use pyo3::prelude::*;

#[pymodule]
#[pyo3(name = "kvidx")]
fn kvidx_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<indexer::Indexer>()?;
    m.add_class::<events::Event>()?;
    m.add_class::<events::Stored>()?;
    m.add_class::<events::Removed>()?;
    m.add_class::<events::Cleared>()?;
    m.add_class::<results::Match>()?;
    m.add_class::<results::TieredMatch>()?;
    m.add_class::<results::Stats>()?;
    m.add_class::<results::ReplicaStats>()?;
    m.add_class::<results::SnapshotInfo>()?;
    m.add_class::<results::EngineStats>()?;
    m.add_class::<results::PredictionStats>()?;
    m.add_class::<results::HashCheckCounts>()?;
    m.add_class::<predictions::PredictedMatch>()?;
    m.add_class::<feed::EngineFeed>()?;
    m.add_class::<feed::BatchReport>()?;
    m.add_function(wrap_pyfunction!(hashing::hash_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(hashing::seq_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(namespace::hash_request, m)?)?;
    m.add_function(wrap_pyfunction!(hashing::llmd_request_keys, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_time_find_matches, m)?)?;
    m.add("TIERS", ("device", "host", "disk", "external"))?;
    m.add("REPLAY_END_SEQ", kvidx::engine::REPLAY_END_SEQ)?;
    m.add("MAX_PAYLOAD_BYTES", kvidx::engine::MAX_PAYLOAD_BYTES)?;
    m.add(
        "VLLM_DEFAULT_SEED",
        kvidx::engine::hash_check::VLLM_DEFAULT_SEED,
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
