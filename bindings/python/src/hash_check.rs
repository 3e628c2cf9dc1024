//! The engine feed's optional checks and key schemes, as Python names: the hash check's
//! algorithms (docs/engine-events.md, "Hash check") and its per-publisher counts.

use kvidx::engine::{HashAlgorithm, HashCheckConfig, HashCheckCounts as CoreCounts};
use kvidx::Worker;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::invalid;
use crate::results::HashCheckCounts;

/// The algorithm named `name`.
fn parse_algorithm(name: &str) -> PyResult<HashAlgorithm> {
    match name {
        "vllm_sha256_cbor" => Ok(HashAlgorithm::VllmSha256Cbor),
        "vllm_xxhash_cbor" => Ok(HashAlgorithm::VllmXxhashCbor),
        "sglang_sha256" => Ok(HashAlgorithm::SglangSha256),
        _ => Err(invalid(format!(
            "unknown hash algorithm {name:?}: expected vllm_sha256_cbor, vllm_xxhash_cbor or \
             sglang_sha256"
        ))),
    }
}

fn algorithm_name(algorithm: HashAlgorithm) -> &'static str {
    match algorithm {
        HashAlgorithm::VllmSha256Cbor => "vllm_sha256_cbor",
        HashAlgorithm::VllmXxhashCbor => "vllm_xxhash_cbor",
        HashAlgorithm::SglangSha256 => "sglang_sha256",
    }
}

/// The check's configuration from Python's arguments (`block_size` None: each store's own).
pub fn config(algorithm: &str, seed: String, block_size: Option<u32>) -> PyResult<HashCheckConfig> {
    if block_size == Some(0) {
        return Err(invalid(
            "block_size must be positive (None: each store's own)",
        ));
    }
    Ok(HashCheckConfig {
        algorithm: parse_algorithm(algorithm)?,
        seed,
        block_size,
    })
}

/// A configuration as Python sees it: `(algorithm, seed, block_size)`.
pub fn described(config: &HashCheckConfig) -> (&'static str, String, Option<u32>) {
    (
        algorithm_name(config.algorithm),
        config.seed.clone(),
        config.block_size,
    )
}

/// Per-publisher counts as a dict `{(worker_id, dp_rank): HashCheckCounts}`, in order.
pub fn per_worker<'py>(
    py: Python<'py>,
    counts: Vec<(Worker, CoreCounts)>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (worker, c) in counts {
        dict.set_item((worker.worker_id, worker.dp_rank), HashCheckCounts::from(c))?;
    }
    Ok(dict)
}
