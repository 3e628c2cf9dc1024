//! The exception hierarchy: one Python class per kind of the core's errors, all under
//! `KvidxError`.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    kvidx,
    KvidxError,
    PyException,
    "Base class of every kvidx error."
);
create_exception!(
    kvidx,
    InvalidArgument,
    KvidxError,
    "A setting or an event was out of range; the message says which."
);
create_exception!(
    kvidx,
    ParentNotFound,
    KvidxError,
    "Synchronous mode: a Stored event's parent is not held by the worker; nothing applied."
);
create_exception!(
    kvidx,
    ShutDown,
    KvidxError,
    "The indexer is closed, or its event threads are gone."
);
create_exception!(
    kvidx,
    MalformedSnapshot,
    KvidxError,
    "A snapshot being restored is not a valid kvidx snapshot; nothing was restored."
);
create_exception!(
    kvidx,
    SnapshotIoError,
    KvidxError,
    "Reading or writing a snapshot failed in its reader or writer."
);
create_exception!(
    kvidx,
    MalformedPayload,
    KvidxError,
    "An engine payload is not a well-formed KVEventBatch; nothing of it was applied."
);
create_exception!(
    kvidx,
    MalformedFeedState,
    KvidxError,
    "Bytes given to EngineFeed.restore_state are not a state saved by a feed of its format."
);

/// The Python exception of a core error.
pub fn index_error(error: kvidx::Error) -> PyErr {
    let text = error.to_string();
    match error {
        kvidx::Error::InvalidArgument(_) => InvalidArgument::new_err(text),
        kvidx::Error::ParentNotFound => ParentNotFound::new_err(text),
        kvidx::Error::ShutDown => ShutDown::new_err(text),
        kvidx::Error::Malformed(_) => MalformedSnapshot::new_err(text),
        kvidx::Error::Io(_) => SnapshotIoError::new_err(text),
    }
}

/// An `InvalidArgument` with a message.
pub fn invalid(text: impl Into<String>) -> PyErr {
    InvalidArgument::new_err(text.into())
}

/// Adds every exception class to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("KvidxError", py.get_type::<KvidxError>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("ParentNotFound", py.get_type::<ParentNotFound>())?;
    m.add("ShutDown", py.get_type::<ShutDown>())?;
    m.add("MalformedSnapshot", py.get_type::<MalformedSnapshot>())?;
    m.add("SnapshotIoError", py.get_type::<SnapshotIoError>())?;
    m.add("MalformedPayload", py.get_type::<MalformedPayload>())?;
    m.add("MalformedFeedState", py.get_type::<MalformedFeedState>())?;
    Ok(())
}
