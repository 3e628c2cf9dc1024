//! The snapshot stream: header, one checksummed section per worker, trailer (see
//! docs/snapshots.md for the bytes).

use std::io::{ErrorKind, Read, Write};

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use super::format::{decode_nodes, Exporter, RecordBytes, TRUNCATED};
use super::{SnapshotBackend, SnapshotInfo};
use crate::model::Worker;
use crate::Error;

/// The first 8 bytes of every snapshot.
pub(crate) const MAGIC: [u8; 8] = *b"KVIDXSNP";
/// The format version this library writes and reads.
pub(crate) const VERSION: u32 = 1;
/// The tag of a worker section.
const SECTION: u8 = b'W';
/// The tag of the trailer.
const TRAILER: u8 = b'E';
/// Bytes of a section's fixed fields after its tag.
const SECTION_FIELDS: usize = 8 + 4 + 8 + 8 + 8 + 8;
/// Bytes of the trailer's fields after its tag, checksum excluded.
const TRAILER_FIELDS: usize = 8 * 5;

/// A writer that counts and hashes what goes through it.
struct Tracked<W> {
    inner: W,
    bytes: u64,
    hash: Xxh3,
}

impl<W: Write> Tracked<W> {
    fn put(&mut self, data: &[u8]) -> Result<(), Error> {
        self.inner.write_all(data).map_err(io_error)?;
        self.hash.update(data);
        self.bytes += data.len() as u64;
        Ok(())
    }
}

fn io_error(e: std::io::Error) -> Error {
    Error::Io(e.kind())
}

/// Writes every worker of `backend` to `w` (see the module docs of `snapshot`).
pub(crate) fn write(backend: &dyn SnapshotBackend, w: impl Write) -> Result<SnapshotInfo, Error> {
    let mut out = Tracked {
        inner: w,
        bytes: 0,
        hash: Xxh3::new(),
    };
    let mut header = Vec::with_capacity(16);
    header.extend_from_slice(&MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    out.put(&header)?;
    let mut info = SnapshotInfo {
        min_watermark: u64::MAX,
        ..SnapshotInfo::default()
    };
    let mut exporter = Exporter::default();
    let mut payload = Vec::new();
    let mut section = Vec::new();
    for worker in backend.all_workers() {
        let Some(exported) = backend.export_worker(worker, &mut exporter) else {
            continue; // removed since the list was taken
        };
        payload.clear();
        let (records, names) = exporter.encode(&mut payload)?;
        section.clear();
        section.push(SECTION);
        section.extend_from_slice(&worker.worker_id.to_le_bytes());
        section.extend_from_slice(&worker.dp_rank.to_le_bytes());
        section.extend_from_slice(&exported.watermark.to_le_bytes());
        section.extend_from_slice(&records.to_le_bytes());
        section.extend_from_slice(&names.to_le_bytes());
        section.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        section.extend_from_slice(&payload);
        let checksum = xxh3_64(&section);
        section.extend_from_slice(&checksum.to_le_bytes());
        out.put(&section)?;
        info.workers += 1;
        info.blocks += names;
        info.min_watermark = info.min_watermark.min(exported.watermark);
        info.max_watermark = info.max_watermark.max(exported.watermark);
        // A very large worker's buffers are not kept for the next one.
        if payload.capacity() > 1 << 24 {
            payload = Vec::new();
            section = Vec::new();
        }
    }
    if info.workers == 0 {
        info.min_watermark = 0;
    }
    info.bytes = out.bytes + 1 + TRAILER_FIELDS as u64 + 8;
    let mut trailer = Vec::with_capacity(1 + TRAILER_FIELDS);
    trailer.push(TRAILER);
    for value in [
        info.workers,
        info.blocks,
        info.min_watermark,
        info.max_watermark,
        info.bytes,
    ] {
        trailer.extend_from_slice(&value.to_le_bytes());
    }
    out.put(&trailer)?;
    let checksum = out.hash.digest();
    out.put(&checksum.to_le_bytes())?;
    out.inner.flush().map_err(io_error)?;
    Ok(info)
}

/// A reader that counts and hashes what it reads; the end of input is malformed.
struct Source<R> {
    inner: R,
    bytes: u64,
    hash: Xxh3,
}

impl<R: Read> Source<R> {
    /// Reads exactly `buf.len()` bytes (hashed).
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => Error::Malformed("the snapshot ends early"),
            kind => Error::Io(kind),
        })?;
        self.hash.update(buf);
        self.bytes += buf.len() as u64;
        Ok(())
    }

    /// Whether the input has ended.
    fn at_end(&mut self) -> Result<bool, Error> {
        let mut byte = [0u8; 1];
        loop {
            match self.inner.read(&mut byte) {
                Ok(0) => return Ok(true),
                Ok(_) => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::Io(e.kind())),
            }
        }
    }
}

/// Bytes of a section's records read from the input at once, at most.
const CHUNK: usize = 64 << 10;

/// One section's records, read from the input a chunk at a time as the decoder asks for
/// them, each chunk added to the section's checksum: the memory they take is one chunk,
/// whatever length the section claims.
struct SectionRecords<'a, R> {
    src: &'a mut Source<R>,
    /// The section's checksum so far.
    hash: &'a mut Xxh3,
    /// Bytes of the records not read from the input yet.
    left: u64,
    chunk: &'a mut Vec<u8>,
    /// The next byte of `chunk` to hand out.
    at: usize,
}

impl<'a, R: Read> SectionRecords<'a, R> {
    /// The `len` bytes of records that come next in `src`, read through `chunk`.
    fn new(src: &'a mut Source<R>, hash: &'a mut Xxh3, len: u64, chunk: &'a mut Vec<u8>) -> Self {
        chunk.clear();
        Self {
            src,
            hash,
            left: len,
            chunk,
            at: 0,
        }
    }

    /// Reads the next chunk of the records.
    fn next_chunk(&mut self) -> Result<(), Error> {
        if self.left == 0 {
            return Err(TRUNCATED);
        }
        let n = self.left.min(CHUNK as u64) as usize;
        self.chunk.clear();
        self.chunk.resize(n, 0);
        self.src.fill(self.chunk)?;
        self.hash.update(self.chunk);
        self.left -= n as u64;
        self.at = 0;
        Ok(())
    }
}

impl<R: Read> RecordBytes for SectionRecords<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> Result<(), Error> {
        let mut done = 0;
        while done < out.len() {
            if self.at == self.chunk.len() {
                self.next_chunk()?;
            }
            let n = (out.len() - done).min(self.chunk.len() - self.at);
            out[done..done + n].copy_from_slice(&self.chunk[self.at..self.at + n]);
            self.at += n;
            done += n;
        }
        Ok(())
    }

    fn at_end(&self) -> bool {
        self.left == 0 && self.at == self.chunk.len()
    }
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

/// Restores a snapshot into `backend`, which must know no worker. On any error every worker
/// restored so far is dropped again.
pub(crate) fn restore(backend: &dyn SnapshotBackend, r: impl Read) -> Result<SnapshotInfo, Error> {
    if backend.known_workers() != 0 {
        return Err(Error::InvalidArgument(
            "a snapshot is restored into an empty indexer only",
        ));
    }
    let mut restored = Vec::new();
    let result = restore_into(backend, r, &mut restored);
    if result.is_err() {
        for worker in restored {
            backend.forget_worker(worker);
        }
    }
    result
}

fn restore_into(
    backend: &dyn SnapshotBackend,
    r: impl Read,
    restored: &mut Vec<Worker>,
) -> Result<SnapshotInfo, Error> {
    let mut src = Source {
        inner: r,
        bytes: 0,
        hash: Xxh3::new(),
    };
    let mut header = [0u8; 16];
    src.fill(&mut header[..8]).map_err(|e| match e {
        Error::Malformed(_) => Error::Malformed("not a kvidx snapshot"),
        e => e,
    })?;
    if header[..8] != MAGIC {
        return Err(Error::Malformed("not a kvidx snapshot"));
    }
    src.fill(&mut header[8..])?;
    let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(Error::Malformed(
            "a snapshot format version this library does not read",
        ));
    }
    if header[12..16] != [0; 4] {
        return Err(Error::Malformed("unknown snapshot header flags"));
    }
    let mut counted = SnapshotInfo {
        min_watermark: u64::MAX,
        ..SnapshotInfo::default()
    };
    let mut chunk = Vec::new();
    loop {
        let mut tag = [0u8; 1];
        src.fill(&mut tag)?;
        match tag[0] {
            SECTION => {
                let mut fields = [0u8; SECTION_FIELDS];
                src.fill(&mut fields)?;
                let mut hash = Xxh3::new();
                hash.update(&tag);
                hash.update(&fields);
                let worker = Worker::new(
                    u64_at(&fields, 0),
                    u32::from_le_bytes(fields[8..12].try_into().expect("4 bytes")),
                );
                let watermark = u64_at(&fields, 12);
                let records = u64_at(&fields, 20);
                let names = u64_at(&fields, 28);
                let len = u64_at(&fields, 36);
                // Decoded as it is read: broken records stop the restore at once, and a
                // section's claimed length never becomes memory.
                let mut body = SectionRecords::new(&mut src, &mut hash, len, &mut chunk);
                let decoded = decode_nodes(&mut body, len, records, names)?;
                let mut checksum = [0u8; 8];
                src.fill(&mut checksum)?;
                if u64::from_le_bytes(checksum) != hash.digest() {
                    return Err(Error::Malformed("a worker section fails its checksum"));
                }
                restored.push(worker);
                backend.restore_worker(worker, watermark, &decoded)?;
                counted.workers += 1;
                counted.blocks += names;
                counted.min_watermark = counted.min_watermark.min(watermark);
                counted.max_watermark = counted.max_watermark.max(watermark);
            }
            TRAILER => {
                let mut fields = [0u8; TRAILER_FIELDS];
                src.fill(&mut fields)?;
                let expected = src.hash.digest();
                let mut checksum = [0u8; 8];
                src.fill(&mut checksum)?;
                if u64::from_le_bytes(checksum) != expected {
                    return Err(Error::Malformed("the snapshot trailer fails its checksum"));
                }
                if counted.workers == 0 {
                    counted.min_watermark = 0;
                }
                counted.bytes = src.bytes;
                let told = SnapshotInfo {
                    workers: u64_at(&fields, 0),
                    blocks: u64_at(&fields, 8),
                    min_watermark: u64_at(&fields, 16),
                    max_watermark: u64_at(&fields, 24),
                    bytes: u64_at(&fields, 32),
                };
                if told != counted {
                    return Err(Error::Malformed("the snapshot trailer's totals differ"));
                }
                if !src.at_end()? {
                    return Err(Error::Malformed("bytes after the snapshot trailer"));
                }
                return Ok(counted);
            }
            _ => return Err(Error::Malformed("an unknown snapshot section")),
        }
    }
}
