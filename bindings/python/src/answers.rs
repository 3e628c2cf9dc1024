//! The Python answer of `find_matches`: the core's matches written into a buffer each thread
//! reuses, then handed out as new `Match` objects.

use std::cell::Cell;

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::results::Match;

/// Matches an answer buffer may keep allocated between calls.
const KEPT_MATCHES: usize = 4096;

thread_local! {
    /// The calling thread's answer buffer, taken out during a call.
    static ANSWER: Cell<Vec<kvidx::Match>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with the calling thread's answer buffer (its capacity kept from call to call).
pub fn with_answer<R>(f: impl FnOnce(&mut Vec<kvidx::Match>) -> R) -> R {
    let mut found = ANSWER.take();
    let result = f(&mut found);
    if found.capacity() <= KEPT_MATCHES {
        ANSWER.set(found);
    }
    result
}

/// A Python list of `Match` objects, one per match, in order.
pub fn matches_list<'py>(py: Python<'py>, found: &[kvidx::Match]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, found.iter().map(|&m| Match::from(m)))
}
