//! The event classes `Stored`, `Removed` and `Cleared`: immutable wrappers of a core event.

use kvidx::{Block, EventData, Tier, Worker};
use pyo3::prelude::*;
use pyo3::PyClass;

use crate::errors::invalid;

/// The tier named `name` (`"device"`, `"host"`, `"disk"`, `"external"`).
pub fn parse_tier(name: &str) -> PyResult<Tier> {
    Tier::from_name(name).ok_or_else(|| {
        invalid(format!(
            "unknown tier {name:?}: expected device, host, disk or external"
        ))
    })
}

/// An engine event for one worker: the base class of `Stored`, `Removed` and `Cleared`.
#[pyclass(frozen, subclass, module = "kvidx")]
pub struct Event(pub kvidx::Event);

#[pymethods]
impl Event {
    /// The worker's engine instance.
    #[getter]
    fn worker_id(&self) -> u64 {
        self.0.worker.worker_id
    }
    /// The worker's data-parallel rank.
    #[getter]
    fn dp_rank(&self) -> u32 {
        self.0.worker.dp_rank
    }
    /// Per-worker increasing id, recorded for diagnostics.
    #[getter]
    fn event_id(&self) -> u64 {
        self.0.event_id
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.downcast::<Self>().is_ok_and(|o| o.get().0 == self.0)
    }
    fn __repr__(&self) -> String {
        let worker = format!(
            "worker_id={}, event_id={}, dp_rank={}",
            self.0.worker.worker_id, self.0.event_id, self.0.worker.dp_rank
        );
        match &self.0.data {
            EventData::Stored {
                parent,
                blocks,
                tier,
            } => format!(
                "Stored({worker}, blocks=<{} blocks>, parent={parent:?}, tier='{}')",
                blocks.len(),
                tier.name()
            ),
            EventData::Removed { seq_hashes, tier } => format!(
                "Removed({worker}, seq_hashes=<{} hashes>, tier={})",
                seq_hashes.len(),
                tier.map_or("None".to_string(), |t| format!("'{}'", t.name()))
            ),
            EventData::Cleared => format!("Cleared({worker})"),
        }
    }
}

/// The base part of a new event object.
fn new_event(event: kvidx::Event) -> PyClassInitializer<Event> {
    PyClassInitializer::from(Event(event))
}

/// The data of an event object's core event.
fn data<'a, 'py, C: PyClass<BaseType = Event>>(slf: &'a Bound<'py, C>) -> &'a EventData {
    &slf.as_super().get().0.data
}

/// Blocks were cached on a worker: `blocks` are `(local_hash, seq_hash)` pairs in chain order,
/// continuing the block named `parent` (an engine sequence hash), or from position 0.
#[pyclass(frozen, extends = Event, module = "kvidx")]
pub struct Stored;

#[pymethods]
impl Stored {
    #[new]
    #[pyo3(signature = (worker_id, event_id, blocks, parent=None, *, dp_rank=0, tier="device"))]
    fn new(
        worker_id: u64,
        event_id: u64,
        blocks: Vec<(u64, u64)>,
        parent: Option<u64>,
        dp_rank: u32,
        tier: &str,
    ) -> PyResult<PyClassInitializer<Self>> {
        let blocks = blocks.into_iter().map(|(l, s)| Block::new(l, s)).collect();
        let worker = Worker::new(worker_id, dp_rank);
        let event = kvidx::Event::stored_on(worker, event_id, parent, blocks, parse_tier(tier)?);
        Ok(new_event(event).add_subclass(Self))
    }

    /// The engine sequence hash of the block these blocks continue, or None.
    #[getter]
    fn parent(slf: &Bound<'_, Self>) -> Option<u64> {
        match data(slf) {
            EventData::Stored { parent, .. } => *parent,
            _ => None,
        }
    }
    /// The new blocks as `(local_hash, seq_hash)` pairs, in chain order.
    #[getter]
    fn blocks(slf: &Bound<'_, Self>) -> Vec<(u64, u64)> {
        match data(slf) {
            EventData::Stored { blocks, .. } => {
                blocks.iter().map(|b| (b.local_hash, b.seq_hash)).collect()
            }
            _ => Vec::new(),
        }
    }
    /// The tier the blocks were stored on.
    #[getter]
    fn tier(slf: &Bound<'_, Self>) -> &'static str {
        match data(slf) {
            EventData::Stored { tier, .. } => tier.name(),
            _ => Tier::Device.name(),
        }
    }
}

/// Blocks were evicted from a worker, named by their engine sequence hashes; with `tier`,
/// they left that tier only (a block stays held while it is on another tier).
#[pyclass(frozen, extends = Event, module = "kvidx")]
pub struct Removed;

#[pymethods]
impl Removed {
    #[new]
    #[pyo3(signature = (worker_id, event_id, seq_hashes, *, dp_rank=0, tier=None))]
    fn new(
        worker_id: u64,
        event_id: u64,
        seq_hashes: Vec<u64>,
        dp_rank: u32,
        tier: Option<&str>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let worker = Worker::new(worker_id, dp_rank);
        let event = match tier {
            None => kvidx::Event::removed(worker, event_id, seq_hashes),
            Some(name) => {
                kvidx::Event::removed_from(worker, event_id, seq_hashes, parse_tier(name)?)
            }
        };
        Ok(new_event(event).add_subclass(Self))
    }

    /// The names (engine sequence hashes) of the removed blocks.
    #[getter]
    fn seq_hashes(slf: &Bound<'_, Self>) -> Vec<u64> {
        match data(slf) {
            EventData::Removed { seq_hashes, .. } => seq_hashes.clone(),
            _ => Vec::new(),
        }
    }
    /// The tier the blocks left, or None: every tier.
    #[getter]
    fn tier(slf: &Bound<'_, Self>) -> Option<&'static str> {
        match data(slf) {
            EventData::Removed { tier, .. } => tier.map(Tier::name),
            _ => None,
        }
    }
}

/// Every block of a worker was dropped.
#[pyclass(frozen, extends = Event, module = "kvidx")]
pub struct Cleared;

#[pymethods]
impl Cleared {
    #[new]
    #[pyo3(signature = (worker_id, event_id, *, dp_rank=0))]
    fn new(worker_id: u64, event_id: u64, dp_rank: u32) -> PyClassInitializer<Self> {
        new_event(kvidx::Event::cleared(
            Worker::new(worker_id, dp_rank),
            event_id,
        ))
        .add_subclass(Self)
    }
}

/// The core event of a `Stored`, `Removed` or `Cleared`; a `TypeError` for anything else.
pub fn event_of(obj: &Bound<'_, PyAny>) -> PyResult<kvidx::Event> {
    match obj.downcast::<Event>() {
        Ok(event) => Ok(event.get().0.clone()),
        Err(_) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "expected a kvidx Stored, Removed or Cleared event, got {}",
            obj.get_type().name()?
        ))),
    }
}

/// Every event of an iterable, in order.
pub fn events_of(events: &Bound<'_, PyAny>) -> PyResult<Vec<kvidx::Event>> {
    let mut out = Vec::new();
    for item in events.try_iter()? {
        out.push(event_of(&item?)?);
    }
    Ok(out)
}
