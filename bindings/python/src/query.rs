//! The query argument of `find_matches`: local hashes read into a buffer each thread reuses
//! from call to call.
//!
//! - A `list` or `tuple` (exactly those types) is converted by CPython's `array` module in
//!   one call, as `array.array("L", query)` (native unsigned long, when that is 8 bytes, as on
//!   64-bit Linux and macOS), whose bytes are copied out. Its C loop converts each int with
//!   `PyLong_AsUnsignedLong`, several times cheaper than the `PyLong_AsUnsignedLongLong` a
//!   per-item extraction uses for ints of 2^30 and above, and the errors are the same kinds
//!   (`TypeError` for an item that is not an integer, `OverflowError` for a negative one or
//!   one above 2^64 - 1; items with `__index__` are accepted).
//! - An `array.array` of unsigned 8-byte items (`"Q"`, or `"L"` where that is 8 bytes) is read
//!   whole from its bytes.
//! - Any other sequence (and every sequence where unsigned long is not 8 bytes) goes item by
//!   item: lists and tuples by plain iteration, others through the generic sequence protocol.

use std::cell::Cell;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};

/// Hashes a reused query buffer may keep allocated between calls (512 KiB); a longer query's
/// buffer is freed after its call.
const KEPT_CAPACITY: usize = 64 * 1024;

thread_local! {
    /// The calling thread's query buffer, taken out during a call (so a nested call made
    /// while reading the query, e.g. from an `__index__` method, gets a fresh one).
    static QUERY: Cell<Vec<u64>> = const { Cell::new(Vec::new()) };
}

/// `array.array`, and whether its typecode `"L"` holds 8-byte items, found once.
struct ArrayModule {
    array_type: Py<PyType>,
    long_is_8_bytes: bool,
}

static ARRAY: GILOnceCell<ArrayModule> = GILOnceCell::new();

fn array_module(py: Python<'_>) -> PyResult<&ArrayModule> {
    ARRAY.get_or_try_init(py, || {
        let array_type = py
            .import("array")?
            .getattr("array")?
            .downcast_into::<PyType>()?;
        let itemsize: usize = array_type.call1(("L",))?.getattr("itemsize")?.extract()?;
        Ok(ArrayModule {
            array_type: array_type.unbind(),
            long_is_8_bytes: itemsize == 8,
        })
    })
}

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
    let py = query.py();
    let array = array_module(py)?;
    let array_type = array.array_type.bind(py);
    let exact_list_or_tuple =
        query.is_exact_instance_of::<PyList>() || query.is_exact_instance_of::<PyTuple>();
    if exact_list_or_tuple && array.long_is_8_bytes {
        // CPython's array module converts every item in one call (see the module docs).
        let converted = array_type.call1((intern!(py, "L"), query))?;
        extend_from_bytes(&converted.call_method0(intern!(py, "tobytes"))?, out)?;
        return Ok(());
    }
    if query.is_exact_instance(array_type) && holds_u64(query, array.long_is_8_bytes)? {
        extend_from_bytes(&query.call_method0(intern!(py, "tobytes"))?, out)?;
        return Ok(());
    }
    let len = if let Ok(list) = query.downcast::<PyList>() {
        list.len()
    } else if let Ok(tuple) = query.downcast::<PyTuple>() {
        tuple.len()
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

/// Whether `array` (an `array.array`) holds unsigned 8-byte items: typecode `"Q"`, or `"L"`
/// when that is 8 bytes.
fn holds_u64(array: &Bound<'_, PyAny>, long_is_8_bytes: bool) -> PyResult<bool> {
    let py = array.py();
    let typecode = array.getattr(intern!(py, "typecode"))?;
    let is = |code: &Bound<'_, PyString>| PyAnyMethods::eq(&typecode, code);
    Ok(is(intern!(py, "Q"))? || (long_is_8_bytes && is(intern!(py, "L"))?))
}

/// Appends the native-endian 8-byte items of `bytes` (a `bytes` object) to `out`.
fn extend_from_bytes(bytes: &Bound<'_, PyAny>, out: &mut Vec<u64>) -> PyResult<()> {
    let items = bytes.downcast::<PyBytes>()?.as_bytes().chunks_exact(8);
    out.extend(items.map(|item| u64::from_ne_bytes(item.try_into().expect("8 bytes"))));
    Ok(())
}
