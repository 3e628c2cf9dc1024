//! Snapshot memory, measured: a counting global allocator records the peak of live heap
//! bytes while an index is written as a snapshot into a writer that keeps nothing. The write
//! holds one worker's section at a time, so the peak does not grow with the number of
//! workers: twice the workers, the same peak (and far below the snapshot's size).
//!
//! `SNAPSHOT_MEMORY_REPORT=1` prints the figures.

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{peak_during, SERIAL};

use kvidx::{BackendKind, Block, Config, Event, Indexer, Worker};

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
