//! The Python answer of `find_matches`: the core's matches written into a buffer each thread
//! reuses, then handed out as a new list of `Match` objects.
//!
//! The `Match` objects come from a per-thread pool: an object of the pool that no one else
//! references any more (its reference count is 1, the pool's own, read under the GIL) is
//! overwritten with the new match and handed out again; any other is left to its holders
//! and replaced in the pool by a new object. A caller that drops each answer before asking
//! the next question so gets its objects without allocating or freeing any; one that keeps
//! answers gets new objects, as without the pool. No object anyone can see ever changes:
//! nothing is reused while referenced, and every answer is written from the core's matches
//! of its own call.

use std::cell::Cell;

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::results::Match;

/// Matches an answer buffer may keep allocated between calls.
const KEPT_MATCHES: usize = 4096;

/// `Match` objects each thread's pool keeps between calls.
const POOLED_MATCHES: usize = 1024;

thread_local! {
    /// The calling thread's answer buffer, taken out during a call.
    static ANSWER: Cell<Vec<kvidx::Match>> = const { Cell::new(Vec::new()) };
    /// The calling thread's `Match` objects, taken out while an answer is built (so a call
    /// made meanwhile, e.g. from a finalizer, gets an empty pool of its own).
    static POOL: Cell<Vec<Py<Match>>> = const { Cell::new(Vec::new()) };
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

/// A new Python list of `Match` objects, one per match, in order.
pub fn matches_list<'py>(py: Python<'py>, found: &[kvidx::Match]) -> PyResult<Bound<'py, PyList>> {
    let mut pool = POOL.take();
    let filled = fill(py, &mut pool, found);
    let list =
        filled.and_then(|()| PyList::new(py, pool[..found.len()].iter().map(|m| m.bind(py))));
    pool.truncate(POOLED_MATCHES);
    POOL.set(pool);
    list
}

/// Makes `pool[i]` an object holding `found[i]` that no one else references, for every `i`.
fn fill(py: Python<'_>, pool: &mut Vec<Py<Match>>, found: &[kvidx::Match]) -> PyResult<()> {
    for (i, &m) in found.iter().enumerate() {
        match pool.get(i) {
            // Referenced by the pool alone: no one can see the change.
            Some(object) if object.get_refcnt(py) == 1 => object.get().overwrite(m),
            // Still part of an answer someone holds: theirs now.
            Some(_) => pool[i] = Py::new(py, Match::from(m))?,
            None => pool.push(Py::new(py, Match::from(m))?),
        }
    }
    Ok(())
}
