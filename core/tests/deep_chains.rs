//! Stack use does not grow with chain length: one worker's chain of `chain_len()` blocks
//! (Stored events of 4,096 blocks, each continuing the last) driven through store, find,
//! remove, clear, `remove_worker`, snapshot write and restore, and drop, for every backend,
//! synchronous and with event threads, all on a thread with a 64 KiB stack. A recursion over
//! the chain (a few hundred bytes a level) overflows that stack within a few hundred blocks.
//!
//! Chain length: 1,048,576 blocks in release builds; 65,536 in debug builds (still far past
//! what a 64 KiB stack survives with recursion), or `KVIDX_DEEP_CHAIN` blocks.

use kvidx::{BackendKind, Block, Config, Event, Indexer, Worker};

/// The stack of the thread that drives every operation.
const SMALL_STACK: usize = 64 * 1024;
/// Blocks per Stored event.
const EVENT_BLOCKS: u64 = 4096;

fn chain_len() -> u64 {
    std::env::var("KVIDX_DEEP_CHAIN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            1 << 16
        } else {
            1 << 20
        })
}

const WORKER: Worker = Worker {
    worker_id: 7,
    dp_rank: 0,
};

fn local(position: u64) -> u64 {
    position.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

fn name(position: u64) -> u64 {
    position + 1_000
}

/// The chain as Stored events of `EVENT_BLOCKS` blocks, each continuing the previous one.
fn store_chain(ix: &Indexer, len: u64) {
    let mut first = 0;
    while first < len {
        let last = (first + EVENT_BLOCKS).min(len);
        let parent = (first > 0).then(|| name(first - 1));
        let blocks = (first..last)
            .map(|p| Block::new(local(p), name(p)))
            .collect();
        ix.apply_event(Event::stored(WORKER, first, parent, blocks))
            .unwrap();
        first = last;
    }
    ix.flush().unwrap();
}

fn query(len: u64) -> Vec<u64> {
    (0..len).map(local).collect()
}

/// The depth `ix` reports for the worker on the whole chain (0: not found).
fn depth(ix: &Indexer, q: &[u64]) -> u32 {
    let plain = ix.find_matches(q);
    let tiered = ix.find_matches_tiered(q);
    assert_eq!(plain.len(), tiered.len());
    let depth = plain.first().map_or(0, |m| m.depth);
    assert_eq!(depth, tiered.first().map_or(0, |m| m.depth));
    depth
}

/// Every backend. A new one fails to compile [`has_snapshots`] until it is added here too.
const BACKENDS: [BackendKind; 4] = [
    BackendKind::Positional,
    BackendKind::Radix,
    BackendKind::Runs,
    BackendKind::Reference,
];

fn has_snapshots(backend: BackendKind) -> bool {
    match backend {
        BackendKind::Positional | BackendKind::Radix | BackendKind::Runs => true,
        BackendKind::Reference => false,
    }
}

fn configs() -> Vec<(String, Config)> {
    let mut out = Vec::new();
    for backend in BACKENDS {
        for event_threads in [0, 2] {
            out.push((
                format!("{backend:?}(threads={event_threads})"),
                Config {
                    backend,
                    event_threads,
                    ..Config::default()
                },
            ));
        }
    }
    out
}

/// Every operation on a chain of `len` blocks, for one configuration.
fn drive(name_of: &str, config: Config, len: u64) {
    let q = query(len);
    let full = u32::try_from(len).unwrap();
    let snapshots = has_snapshots(config.backend);

    // Store, find, snapshot, drop.
    let ix = Indexer::new(config).unwrap();
    store_chain(&ix, len);
    assert_eq!(depth(&ix, &q), full, "{name_of}: stored");
    let mut bytes = Vec::new();
    if snapshots {
        let info = ix.write_snapshot(&mut bytes).unwrap();
        assert_eq!(info.blocks, len, "{name_of}: snapshot");
    }
    drop(ix);

    // Restore into each backend with snapshots, find, drop.
    if snapshots {
        for backend in BACKENDS.into_iter().filter(|&b| has_snapshots(b)) {
            let restored = Indexer::new(Config { backend, ..config }).unwrap();
            restored.restore_snapshot(bytes.as_slice()).unwrap();
            assert_eq!(
                depth(&restored, &q),
                full,
                "{name_of}: restored {backend:?}"
            );
            drop(restored);
        }
    }

    // Remove every name from the root down: the last removal releases the whole chain.
    let ix = Indexer::new(config).unwrap();
    store_chain(&ix, len);
    for first in (0..len).step_by(EVENT_BLOCKS as usize) {
        let names = (first..(first + EVENT_BLOCKS).min(len)).map(name).collect();
        ix.apply_event(Event::removed(WORKER, 0, names)).unwrap();
    }
    ix.flush().unwrap();
    assert_eq!(depth(&ix, &q), 0, "{name_of}: removed");
    assert_eq!(ix.stats().worker_blocks, 0, "{name_of}: removed");

    // Clear, then `remove_worker`, each of a whole chain.
    store_chain(&ix, len);
    ix.apply_event(Event::cleared(WORKER, 0)).unwrap();
    ix.flush().unwrap();
    assert_eq!(depth(&ix, &q), 0, "{name_of}: cleared");
    store_chain(&ix, len);
    ix.remove_worker(WORKER.worker_id).unwrap();
    ix.flush().unwrap();
    assert_eq!(depth(&ix, &q), 0, "{name_of}: removed worker");
    assert_eq!(ix.stats().workers, 0, "{name_of}: removed worker");
}

#[test]
fn a_long_chain_needs_no_more_stack_than_a_short_one() {
    let len = chain_len();
    for (name_of, config) in configs() {
        let label = name_of.clone();
        std::thread::Builder::new()
            .name(format!("small-stack {label}"))
            .stack_size(SMALL_STACK)
            .spawn(move || drive(&name_of, config, len))
            .unwrap()
            .join()
            .unwrap_or_else(|_| panic!("{label}: a {len}-block chain failed"));
    }
}
