//! Namespaced request hashing (docs/contract.md section 3.1): the local hashes a router queries
//! with to reach the blocks engines stored for the same LoRA adapter, cache salt and
//! multimodal items.

use kvidx::namespace::{self, MultimodalSpan, Namespace};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

use crate::errors::invalid;

/// Opaque bytes given as `str` (its UTF-8 bytes), `bytes` or `bytearray`; `None` is empty.
pub fn opaque_bytes(value: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Vec<u8>> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    if let Ok(text) = value.downcast::<PyString>() {
        return Ok(text.to_cow()?.as_bytes().to_vec());
    }
    if let Ok(bytes) = value.downcast::<PyBytes>() {
        return Ok(bytes.as_bytes().to_vec());
    }
    if let Ok(bytes) = value.downcast::<PyByteArray>() {
        return Ok(bytes.to_vec());
    }
    Err(invalid(format!("{what} must be str, bytes or bytearray")))
}

/// One multimodal span as given: `(identifier, start, end)`.
struct OwnedSpan {
    identifier: Vec<u8>,
    start: u64,
    end: u64,
}

fn span_of(item: &Bound<'_, PyAny>) -> PyResult<OwnedSpan> {
    let (identifier, start, end): (Bound<'_, PyAny>, u64, u64) = item.extract().map_err(|_| {
        invalid("a multimodal span is (identifier, start, end) with non-negative ints")
    })?;
    Ok(OwnedSpan {
        identifier: opaque_bytes(Some(&identifier), "a span's identifier")?,
        start,
        end,
    })
}

/// Local hashes of every full block of `tokens` under a namespace (LoRA name, cache salt;
/// `str` or bytes each, `None` or empty meaning none) and multimodal spans (`(identifier,
/// start, end)`, the item's placeholder tokens `[start, end)`). With neither, the same as
/// `hash_tokens`.
#[pyfunction]
#[pyo3(signature = (tokens, block_size, *, lora_name=None, cache_salt=None, mm_spans=None))]
pub fn hash_request(
    py: Python<'_>,
    tokens: Vec<u32>,
    block_size: usize,
    lora_name: Option<&Bound<'_, PyAny>>,
    cache_salt: Option<&Bound<'_, PyAny>>,
    mm_spans: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<u64>> {
    if block_size == 0 {
        return Err(invalid("block_size must be positive"));
    }
    let lora_name = opaque_bytes(lora_name, "lora_name")?;
    let cache_salt = opaque_bytes(cache_salt, "cache_salt")?;
    let owned = match mm_spans {
        None => Vec::new(),
        Some(spans) => spans
            .try_iter()?
            .map(|item| span_of(&item?))
            .collect::<PyResult<Vec<_>>>()?,
    };
    Ok(py.allow_threads(|| {
        let spans: Vec<MultimodalSpan<'_>> = owned
            .iter()
            .map(|s| MultimodalSpan {
                identifier: &s.identifier,
                start: s.start,
                end: s.end,
            })
            .collect();
        let namespace = Namespace {
            lora_name: &lora_name,
            cache_salt: &cache_salt,
        };
        namespace::hash_request(&tokens, block_size, &namespace, &spans)
    }))
}
