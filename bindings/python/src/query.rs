//! The query argument of `find_matches`: local hashes read from a `list` or `tuple` by plain
//! iteration, from an `array.array('Q')` as its raw bytes, and from any
//! other sequence through the generic sequence protocol (with the same errors), into a buffer
//! each thread reuses from call to call.

use std::cell::Cell;

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyList, PyTuple, PyType};

/// Hashes a reused query buffer may keep allocated between calls (512 KiB); a longer query's
/// buffer is freed after its call.
const KEPT_CAPACITY: usize = 64 * 1024;

thread_local! {
    /// The calling thread's query buffer, taken out during a call (so a nested call made
    /// while reading the query, e.g. from an `__index__` method, gets a fresh one).
    static QUERY: Cell<Vec<u64>> = const { Cell::new(Vec::new()) };
}

/// `array.array`, imported once.
static ARRAY_TYPE: GILOnceCell<Py<PyType>> = GILOnceCell::new();

/// Runs `f` on the local hashes of `query` (a sequence of ints).
pub fn with_query<R>(
    query: &Bound<'_, PyAny>,
    f: impl FnOnce(&[u64]) -> PyResult<R>,
) -> PyResult<R> {
    let mut hashes = QUERY.take();
    hashes.clear();
    let result = read_into(query, &mut hashes).and_then(|()| f(&hashes));
    if hashes.capacity() <= KEPT_CAPACITY {
        QUERY.set(hashes);
    }
    result
}

/// Appends the hashes of `query` to `out`.
fn read_into(query: &Bound<'_, PyAny>, out: &mut Vec<u64>) -> PyResult<()> {
    let len = if let Ok(list) = query.downcast::<PyList>() {
        list.len()
    } else if let Ok(tuple) = query.downcast::<PyTuple>() {
        tuple.len()
    } else if let Some(bytes) = unsigned_array_bytes(query)? {
        let items = bytes.as_bytes().chunks_exact(8);
        out.extend(items.map(|item| u64::from_ne_bytes(item.try_into().expect("8 bytes"))));
        return Ok(());
    } else {
        out.extend(query.extract::<Vec<u64>>()?);
        return Ok(());
    };
    // A list or tuple: iterated directly (no sequence check, no intermediate vector).
    out.reserve(len);
    for item in query.try_iter()? {
        out.push(item?.extract()?);
    }
    Ok(())
}

/// The items of `query` as native-endian bytes when it is an `array.array` of unsigned
/// 8-byte items (typecode `"Q"`), else None.
fn unsigned_array_bytes<'py>(query: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let array_type = ARRAY_TYPE.import(query.py(), "array", "array")?;
    if !query.is_exact_instance(array_type) {
        return Ok(None);
    }
    let typecode: String = query.getattr("typecode")?.extract()?;
    if typecode != "Q" {
        return Ok(None);
    }
    Ok(Some(query.call_method0("tobytes")?.downcast_into()?))
}
