//! Snapshot memory, measured: a counting global allocator records the peak of live heap
//! bytes while an index is written as a snapshot into a writer that keeps nothing. The write
//! holds one worker's section at a time, so the peak does not grow with the number of
//! workers: twice the workers, the same peak (and far below the snapshot's size).
//!
//! A restore reads a section's records as it decodes them: a hostile header (a section
//! claiming a terabyte, followed by zeros or garbage) is malformed after one chunk of input,
//! with memory to match, never read or allocated to the length it claims.
//!
//! `SNAPSHOT_MEMORY_REPORT=1` prints the figures.

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{peak_during, SERIAL};

use kvidx::{BackendKind, Block, Config, Error, Event, Indexer, Worker};

/// Counts the bytes written and keeps none.
#[derive(Default)]
struct Counter(u64);

impl std::io::Write for Counter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0 += data.len() as u64;
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An index of `workers` workers of `blocks` blocks each (chains sharing their first half).
fn index(kind: BackendKind, workers: u64, blocks: u64) -> Indexer {
    let ix = Indexer::new(Config {
        backend: kind,
        event_threads: 0,
        ..Config::default()
    })
    .unwrap();
    for w in 0..workers {
        let chain = (0..blocks)
            .map(|p| {
                let local = if p < blocks / 2 { p } else { w << 32 | p };
                Block::new(local, w << 32 | p)
            })
            .collect();
        ix.apply_event(Event::stored(Worker::new(w, 0), 0, None, chain))
            .unwrap();
    }
    ix
}

/// (peak live bytes above the start during the write, snapshot bytes).
fn write_peak(ix: &Indexer) -> (usize, u64) {
    let mut out = Counter::default();
    let (result, peak) = peak_during(|| ix.write_snapshot(&mut out));
    result.unwrap();
    (peak, out.0)
}

#[test]
fn writing_holds_one_worker_at_a_time() {
    let _serial = SERIAL.lock().unwrap();
    for kind in [
        BackendKind::Positional,
        BackendKind::Radix,
        BackendKind::Runs,
    ] {
        let small = index(kind, 100, 1000);
        let (small_peak, small_bytes) = write_peak(&small);
        drop(small);
        let large = index(kind, 200, 1000);
        let (large_peak, large_bytes) = write_peak(&large);
        if std::env::var_os("SNAPSHOT_MEMORY_REPORT").is_some() {
            println!(
                "{kind:?}: 100 workers: peak {small_peak} B for {small_bytes} B; \
                 200 workers: peak {large_peak} B for {large_bytes} B"
            );
        }
        assert!(
            large_bytes > 2 * small_bytes - 1000,
            "{kind:?}: twice the data"
        );
        assert!(
            large_peak < small_peak + small_peak / 4 + 16 * 1024,
            "{kind:?}: the peak grew with the workers: {small_peak} -> {large_peak}"
        );
        assert!(
            (large_peak as u64) < large_bytes / 8,
            "{kind:?}: peak {large_peak} B for a {large_bytes} B snapshot"
        );
    }
}

/// A snapshot's header and one section's fixed fields, then `filler` bytes of `fill` (a
/// source that ends there); counts the bytes it hands out.
struct Hostile {
    head: Vec<u8>,
    fill: u8,
    filler: u64,
    served: u64,
}

/// The header of a snapshot and of its first section, claiming `records`, `names` and `len`.
fn hostile_head(records: u64, names: u64, len: u64) -> Vec<u8> {
    let mut head = b"KVIDXSNP".to_vec();
    head.extend_from_slice(&1u32.to_le_bytes()); // version
    head.extend_from_slice(&0u32.to_le_bytes()); // flags
    head.push(b'W');
    head.extend_from_slice(&7u64.to_le_bytes()); // worker id
    head.extend_from_slice(&0u32.to_le_bytes()); // dp rank
    head.extend_from_slice(&0u64.to_le_bytes()); // watermark
    for value in [records, names, len] {
        head.extend_from_slice(&value.to_le_bytes());
    }
    assert_eq!(head.len(), 61);
    head
}

impl std::io::Read for Hostile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let at = self.served as usize;
        let n = if at < self.head.len() {
            let n = buf.len().min(self.head.len() - at);
            buf[..n].copy_from_slice(&self.head[at..at + n]);
            n
        } else {
            let left = self.filler - (self.served - self.head.len() as u64);
            let n = buf.len().min(left as usize);
            buf[..n].fill(self.fill);
            n
        };
        self.served += n as u64;
        Ok(n)
    }
}

#[test]
fn a_section_claiming_a_terabyte_is_malformed_after_one_chunk() {
    let _serial = SERIAL.lock().unwrap();
    const TIB: u64 = 1 << 40;
    // A valid first record (tag, local hash, name), then more input than the records use.
    let mut one_record = hostile_head(1, 1, TIB);
    one_record.push(0);
    one_record.extend_from_slice(&5u64.to_le_bytes());
    one_record.extend_from_slice(&9u64.to_le_bytes());
    let cases = [
        (
            "zeros after a terabyte claim",
            hostile_head(TIB / 32, TIB / 32, TIB),
            0,
        ),
        ("no records in a terabyte", hostile_head(0, 0, TIB), 0),
        (
            "the largest claims",
            hostile_head(u64::MAX / 9, u64::MAX / 8, u64::MAX),
            0,
        ),
        ("one record in a terabyte", one_record, 0),
        ("0xff garbage", hostile_head(TIB / 32, TIB / 32, TIB), 0xff),
    ];
    for backend in [BackendKind::Positional, BackendKind::Radix] {
        for (what, head, fill) in &cases {
            let ix = Indexer::new(Config {
                backend,
                event_threads: 0,
                ..Config::default()
            })
            .unwrap();
            // 64 MiB of filler: a restore that buffered the claimed section would read it all.
            let mut input = Hostile {
                head: head.clone(),
                fill: *fill,
                filler: 64 << 20,
                served: 0,
            };
            let (result, peak) = peak_during(|| ix.restore_snapshot(&mut input));
            if std::env::var_os("SNAPSHOT_MEMORY_REPORT").is_some() {
                println!(
                    "{backend:?}, {what}: {result:?} after {} B, peak {peak} B",
                    input.served
                );
            }
            assert!(
                matches!(result, Err(Error::Malformed(_))),
                "{backend:?}, {what}: {result:?}"
            );
            assert!(
                input.served <= 61 + 64 * 1024 + 64,
                "{backend:?}, {what}: read {} B of input",
                input.served
            );
            assert!(peak < 1 << 20, "{backend:?}, {what}: peak {peak} B");
            assert_eq!(ix.stats().workers, 0, "{backend:?}, {what}: left empty");
        }
    }
}
