//! Snapshots to and from paths and Python file objects. A path is streamed with the GIL
//! released; a file object is read or written whole through its `read`/`write`.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::index_error;
use crate::results::SnapshotInfo;

/// Writes `index`'s snapshot to a path or a file object with a `write` method.
pub fn write(
    py: Python<'_>,
    index: &kvidx::Indexer,
    target: &Bound<'_, PyAny>,
) -> PyResult<SnapshotInfo> {
    if target.hasattr("write")? {
        let (bytes, info) = py
            .allow_threads(|| {
                let mut out = Vec::new();
                index.write_snapshot(&mut out).map(|info| (out, info))
            })
            .map_err(index_error)?;
        target.call_method1("write", (PyBytes::new(py, &bytes),))?;
        return Ok(info.into());
    }
    let path: PathBuf = target.extract()?;
    let info = py.allow_threads(|| -> PyResult<kvidx::SnapshotInfo> {
        let mut file = BufWriter::new(File::create(&path)?);
        let info = index.write_snapshot(&mut file).map_err(index_error)?;
        file.flush()?;
        Ok(info)
    })?;
    Ok(info.into())
}

/// Restores into `index` from bytes, a path or a file object with a `read` method.
pub fn restore(
    py: Python<'_>,
    index: &kvidx::Indexer,
    source: &Bound<'_, PyAny>,
) -> PyResult<SnapshotInfo> {
    if let Ok(bytes) = source.downcast::<PyBytes>() {
        let data = bytes.as_bytes();
        let info = py.allow_threads(|| index.restore_snapshot(data));
        return info.map(Into::into).map_err(index_error);
    }
    if source.hasattr("read")? {
        let read = source.call_method0("read")?;
        let bytes = read.downcast::<PyBytes>()?;
        let data = bytes.as_bytes();
        let info = py.allow_threads(|| index.restore_snapshot(data));
        return info.map(Into::into).map_err(index_error);
    }
    let path: PathBuf = source.extract()?;
    let info = py.allow_threads(|| -> PyResult<kvidx::SnapshotInfo> {
        let file = BufReader::new(File::open(&path)?);
        index.restore_snapshot(file).map_err(index_error)
    })?;
    Ok(info.into())
}
