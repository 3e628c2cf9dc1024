//! Snapshots through callbacks and files (docs/snapshots.md).

use std::ffi::{c_char, c_void, CStr};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;

use super::args;
use super::boundary::export;
use super::c_convert;
use super::c_types::{
    kvidx_indexer, kvidx_snapshot_info, kvidx_snapshot_sink, kvidx_snapshot_source, kvidx_status,
};
use kvidx_core::{Indexer, SnapshotInfo};

/// Bytes handed to a sink per call at least (except at the end), and asked of a source.
const CHUNK: usize = 64 << 10;

/// A C sink as a writer: a nonzero return is an I/O error.
struct Sink {
    sink: unsafe extern "C" fn(*mut c_void, *const u8, usize) -> i32,
    user: *mut c_void,
}

impl Write for Sink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        // SAFETY: the caller of `kvidx_snapshot_write` guarantees the sink may be called with
        // `user` and any readable buffer; `data` is readable for its length during the call.
        let status = unsafe { (self.sink)(self.user, data.as_ptr(), data.len()) };
        if status == 0 {
            Ok(data.len())
        } else {
            Err(std::io::Error::other("the snapshot sink failed"))
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A C source as a reader: a nonzero return, or a count above what was asked, is an I/O
/// error.
struct Source {
    source: unsafe extern "C" fn(*mut c_void, *mut u8, usize, *mut usize) -> i32,
    user: *mut c_void,
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut got = 0usize;
        // SAFETY: the caller of `kvidx_snapshot_restore` guarantees the source may be called
        // with `user`, a writable buffer of `cap` bytes and a writable count.
        let status = unsafe { (self.source)(self.user, buf.as_mut_ptr(), buf.len(), &mut got) };
        if status != 0 {
            return Err(std::io::Error::other("the snapshot source failed"));
        }
        if got > buf.len() {
            return Err(std::io::Error::other(
                "the snapshot source overran its buffer",
            ));
        }
        Ok(got)
    }
}

/// Writes `info` to `out` when `out` is not NULL.
///
/// # Safety
/// `out` is NULL or writable (checked aligned).
unsafe fn put_info(out: *mut kvidx_snapshot_info, info: SnapshotInfo) -> Result<(), kvidx_status> {
    if !out.is_null() {
        args::required(out)?;
        // SAFETY: non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(c_convert::snapshot_info(info)) };
    }
    Ok(())
}

/// The body of the snapshot writers: writes `ix` as a snapshot through a `CHUNK` buffer into
/// `w`, hands `w` back (flushed) to `finish`, then stores the totals in `*out`.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn write_into<W: Write>(
    ix: &Indexer,
    w: W,
    finish: impl FnOnce(W) -> Result<(), kvidx_status>,
    out: *mut kvidx_snapshot_info,
) -> Result<(), kvidx_status> {
    let mut writer = BufWriter::with_capacity(CHUNK, w);
    let info = ix
        .write_snapshot(&mut writer)
        .map_err(c_convert::status_of)?;
    let w = writer
        .into_inner()
        .map_err(|_| kvidx_status::KVIDX_ERR_IO)?;
    finish(w)?;
    // SAFETY: the caller guarantees `out` is NULL or writable.
    unsafe { put_info(out, info) }
}

/// The body of the snapshot restores: restores a snapshot read through a `CHUNK` buffer from
/// `r` into `ix`, then stores the totals in `*out`.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn restore_from(
    ix: &Indexer,
    r: impl Read,
    out: *mut kvidx_snapshot_info,
) -> Result<(), kvidx_status> {
    let info = ix
        .restore_snapshot(BufReader::with_capacity(CHUNK, r))
        .map_err(c_convert::status_of)?;
    // SAFETY: the caller guarantees `out` is NULL or writable.
    unsafe { put_info(out, info) }
}

/// The path a C string names.
///
/// # Safety
/// `path` is non-NULL and points to a NUL-terminated string.
unsafe fn path_of(path: *const c_char) -> Result<PathBuf, kvidx_status> {
    // SAFETY: the caller guarantees a NUL-terminated string.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
    }
    #[cfg(not(unix))]
    {
        std::str::from_utf8(bytes)
            .map(PathBuf::from)
            .map_err(|_| kvidx_status::KVIDX_ERR_INVALID_ARGUMENT)
    }
}

/// Writes the indexer's state as a snapshot to `sink` (called with `user` and consecutive
/// chunks of the stream, in order) while events keep being applied: each worker's section is
/// taken under that worker's lock, so it is one state of the worker (never part of a batch),
/// with its watermark. Memory: one worker's section at a time. With event threads,
/// `kvidx_flush` first to include every event accepted. `*out` (if `out` is not NULL) gets
/// the snapshot's totals.
///
/// Returns `KVIDX_ERR_IO` when the sink returns nonzero (the stream is then incomplete),
/// `KVIDX_ERR_NULL_POINTER` for a NULL handle or sink.
///
/// # Safety
/// `indexer` is NULL or a live handle; `sink` may be called with `user` from the calling
/// thread and must return normally; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_snapshot_write(
    indexer: *const kvidx_indexer,
    sink: kvidx_snapshot_sink,
    user: *mut c_void,
    out: *mut kvidx_snapshot_info,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        let sink = sink.ok_or(kvidx_status::KVIDX_ERR_NULL_POINTER)?;
        // SAFETY: the caller guarantees `out` is NULL or writable.
        unsafe { write_into(ix, Sink { sink, user }, |_| Ok(()), out) }
    })
}

/// Restores a snapshot read from `source` into the indexer, which must be empty (it never
/// knew a worker, or every worker was removed; else `KVIDX_ERR_INVALID_ARGUMENT`). Afterwards
/// it answers and behaves exactly as the indexer that wrote the snapshot, watermarks
/// included. Apply no event while it runs (lookups are fine). `*out` (if not NULL) gets the
/// snapshot's totals.
///
/// Returns `KVIDX_ERR_MALFORMED` for input that is not a valid snapshot (truncated, corrupted,
/// foreign, a newer format version, a section claiming more than it holds) and `KVIDX_ERR_IO`
/// only when the source returns nonzero: either way the indexer is left empty and usable.
/// Memory: the index it builds plus a constant; what the input claims is never read ahead or
/// allocated. `KVIDX_ERR_INVALID_ARGUMENT` also when a
/// positional snapshot with orphans known only by identity is restored into the radix backend
/// (docs/snapshots.md).
///
/// # Safety
/// `indexer` is NULL or a live handle; `source` may be called with `user` from the calling
/// thread and must return normally; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_snapshot_restore(
    indexer: *const kvidx_indexer,
    source: kvidx_snapshot_source,
    user: *mut c_void,
    out: *mut kvidx_snapshot_info,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        let source = source.ok_or(kvidx_status::KVIDX_ERR_NULL_POINTER)?;
        // SAFETY: the caller guarantees `out` is NULL or writable.
        unsafe { restore_from(ix, Source { source, user }, out) }
    })
}

/// `kvidx_snapshot_write` to a file created (or truncated) at `path`. `KVIDX_ERR_IO` when it
/// cannot be created or written (a partial file may be left behind).
///
/// # Safety
/// `indexer` is NULL or a live handle; `path` is NULL or a NUL-terminated string; `out` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_snapshot_write_file(
    indexer: *const kvidx_indexer,
    path: *const c_char,
    out: *mut kvidx_snapshot_info,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(path)?;
        // SAFETY: non-NULL (checked); the caller guarantees a NUL-terminated string.
        let path = unsafe { path_of(path) }?;
        let file = File::create(path).map_err(|_| kvidx_status::KVIDX_ERR_IO)?;
        let sync = |file: File| file.sync_all().map_err(|_| kvidx_status::KVIDX_ERR_IO);
        // SAFETY: the caller guarantees `out` is NULL or writable.
        unsafe { write_into(ix, file, sync, out) }
    })
}

/// `kvidx_snapshot_restore` from the file at `path`. `KVIDX_ERR_IO` when it cannot be opened
/// or read.
///
/// # Safety
/// `indexer` is NULL or a live handle; `path` is NULL or a NUL-terminated string; `out` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_snapshot_restore_file(
    indexer: *const kvidx_indexer,
    path: *const c_char,
    out: *mut kvidx_snapshot_info,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(path)?;
        // SAFETY: non-NULL (checked); the caller guarantees a NUL-terminated string.
        let path = unsafe { path_of(path) }?;
        let file = File::open(path).map_err(|_| kvidx_status::KVIDX_ERR_IO)?;
        // SAFETY: the caller guarantees `out` is NULL or writable.
        unsafe { restore_from(ix, file, out) }
    })
}
