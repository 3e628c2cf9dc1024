//! The Python answer of `find_matches`: the core's matches written into a buffer each thread
//! reuses, then handed out as `Match` objects that repeated answers share (a `Match` is
//! immutable, so an answer naming the same worker at the same depth as an earlier one can
//! hand out the same object instead of allocating a new one).

use std::cell::Cell;

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::results::Match;

/// Matches an answer buffer may keep allocated between calls.
const KEPT_MATCHES: usize = 4096;

/// `Match` objects each thread keeps for later answers: a direct-mapped table of this many
/// slots (a power of two), indexed by a hash of the match.
const SHARED_SLOTS: usize = 1024;

thread_local! {
    /// The calling thread's answer buffer, taken out during a call.
    static ANSWER: Cell<Vec<kvidx::Match>> = const { Cell::new(Vec::new()) };
    /// The calling thread's shared `Match` objects, taken out while an answer is built (a
    /// nested call, e.g. from a finalizer run by an allocation, starts its own table).
    static SHARED: Cell<Vec<Option<Py<Match>>>> = const { Cell::new(Vec::new()) };
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
    let mut shared = SHARED.take();
    shared.resize_with(SHARED_SLOTS, || None);
    let objects: PyResult<Vec<Py<Match>>> = found
        .iter()
        .map(|&m| shared_match(py, &mut shared, m.into()))
        .collect();
    SHARED.set(shared);
    PyList::new(py, objects?)
}

/// The object for `m`: the one in its slot if equal, else a new one that takes the slot.
fn shared_match(py: Python<'_>, shared: &mut [Option<Py<Match>>], m: Match) -> PyResult<Py<Match>> {
    let slot = &mut shared[slot_of(&m)];
    if let Some(object) = slot {
        if *object.get() == m {
            return Ok(object.clone_ref(py));
        }
    }
    let object = Py::new(py, m)?;
    *slot = Some(object.clone_ref(py));
    Ok(object)
}

/// The slot of `m` in a table of `SHARED_SLOTS` slots.
fn slot_of(m: &Match) -> usize {
    const MIX: u64 = 0x9E37_79B9_7F4A_7C15;
    let key = m.worker_id.wrapping_mul(MIX) ^ (u64::from(m.dp_rank) << 32) ^ u64::from(m.depth);
    (key.wrapping_mul(MIX) >> (64 - SHARED_SLOTS.trailing_zeros())) as usize
}
