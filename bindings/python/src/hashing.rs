//! The hashing contract: local hashes of token blocks, and the sequence-hash chain.

use pyo3::prelude::*;

use crate::errors::invalid;

/// Local hashes of every full block of `tokens` (a trailing partial block is left out);
/// with `lora_name`, the adapter's seed.
#[pyfunction]
#[pyo3(signature = (tokens, block_size, *, lora_name=None))]
pub fn hash_tokens(
    py: Python<'_>,
    tokens: Vec<u32>,
    block_size: usize,
    lora_name: Option<&str>,
) -> PyResult<Vec<u64>> {
    if block_size == 0 {
        return Err(invalid("block_size must be positive"));
    }
    let seed = lora_name.map_or(kvidx::hashing::HASH_SEED, kvidx::hashing::lora_seed);
    Ok(py.allow_threads(|| kvidx::hashing::hash_tokens_with_seed(&tokens, block_size, seed)))
}

/// The sequence hashes (the chain Dynamo-compatible publishers name blocks by) of a run of
/// local hashes starting at position 0.
#[pyfunction]
pub fn seq_hashes(py: Python<'_>, local_hashes: Vec<u64>) -> Vec<u64> {
    py.allow_threads(|| kvidx::hashing::seq_hashes(&local_hashes))
}

/// llm-d's request keys (docs/contract.md section 3.2) of every full block of `tokens`,
/// chained from the root key of `model` (or a LoRA adapter's name) under `seed` (llm-d's
/// `HashSeed`).
#[pyfunction]
pub fn llmd_request_keys(
    py: Python<'_>,
    tokens: Vec<u32>,
    block_size: usize,
    seed: &str,
    model: &str,
) -> PyResult<Vec<u64>> {
    if block_size == 0 {
        return Err(invalid("block_size must be positive"));
    }
    Ok(py.allow_threads(|| kvidx::llmd::request_keys(&tokens, block_size, seed, model)))
}
