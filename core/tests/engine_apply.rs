//! Decoded engine batches applied to an indexer: local hashes from tokens (LoRA seed
//! included), filters, skip counts, dp rank, sequence tracking, and malformed batches that
//! change nothing.

use kvidx::engine::{
    apply_batch, apply_payload, decode_batch, ApplyOptions, BlockStored, DecodedBatch, EngineEvent,
    EngineFeed, ExtrasPolicy, FeedConfig, FeedError, Format, MediaFilter, SeqStatus, SkipCounts,
};
use kvidx::hashing::{hash_tokens, hash_tokens_with_seed, lora_seed};
use kvidx::namespace::{hash_request, Namespace};
use kvidx::{BackendKind, Config, Indexer, Match, Worker};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../tests/fixtures/engine/{name}.msgpack",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn sync_indexer() -> Indexer {
    Indexer::new(Config {
        backend: BackendKind::Positional,
        event_threads: 0,
        ..Config::default()
    })
    .unwrap()
}

fn tokens(range: std::ops::RangeInclusive<u32>) -> Vec<u32> {
    range.collect()
}

fn depth(indexer: &Indexer, query: &[u64], worker: Worker) -> u32 {
    indexer
        .find_matches(query)
        .iter()
        .find(|m| m.worker() == worker)
        .map_or(0, |m| m.depth)
}

/// Applies the first `n` events of a fixture's batch.
fn apply_prefix(indexer: &Indexer, batch: &DecodedBatch, n: usize, worker: Worker) {
    let part = DecodedBatch {
        events: batch.events[..n].to_vec(),
        ..batch.clone()
    };
    apply_batch(indexer, &part, worker, 0, &ApplyOptions::default()).unwrap();
}

#[test]
fn chain_of_a_vllm_batch_matches_token_queries() {
    let batch = decode_batch(Format::Vllm, &fixture("vllm_array_gen12")).unwrap();
    let query = hash_tokens(&tokens(1..=12), 4);
    let w = Worker::new(9, 0);
    for (n, expected) in [(1, 2), (2, 3), (3, 0), (4, 0)] {
        let indexer = sync_indexer();
        apply_prefix(&indexer, &batch, n, w);
        assert_eq!(depth(&indexer, &query, w), expected, "after {n} events");
    }
    // Removing block 0 leaves positions 1 and 2 held; storing it again restores depth 3.
    let indexer = sync_indexer();
    apply_prefix(&indexer, &batch, 3, w);
    assert_eq!(indexer.stats().worker_blocks, 2);
    apply_prefix(&indexer, &batch, 1, w);
    assert_eq!(depth(&indexer, &query, w), 3);
}

#[test]
fn whole_batch_report_and_stats() {
    let indexer = sync_indexer();
    let report = apply_payload(
        &indexer,
        Format::Vllm,
        5,
        None,
        &fixture("vllm_annotated_0_33"),
        &ApplyOptions::default(),
    )
    .unwrap();
    assert_eq!(report.dp_rank, 0);
    assert_eq!(report.events_decoded, 3);
    assert_eq!(report.events_submitted, 3);
    assert_eq!(report.events_rejected, 0);
    assert_eq!(report.skipped, SkipCounts::default());
    let stats = indexer.stats();
    assert_eq!(stats.events_applied, 3);
    assert_eq!(stats.unknown_removals, 1, "hash 7 was never stored");
    assert_eq!(stats.workers, 1);
    assert_eq!(stats.worker_blocks, 0, "AllBlocksCleared");
}

#[test]
fn lora_name_seeds_local_hashes() {
    let indexer = sync_indexer();
    let report = apply_payload(
        &indexer,
        Format::Vllm,
        1,
        None,
        &fixture("vllm_array_gen8_lora"),
        &ApplyOptions::default(),
    )
    .unwrap();
    assert_eq!(report.dp_rank, 1, "rank taken from the envelope");
    let w = Worker::new(1, 1);
    let lora_query = hash_tokens_with_seed(&tokens(1..=8), 4, lora_seed("adapter-a"));
    // Block 0 was removed by the batch's second event: the chain starts with a hole.
    assert_eq!(depth(&indexer, &lora_query, w), 0);
    assert_eq!(indexer.stats().worker_blocks, 1);
    let batch = decode_batch(Format::Vllm, &fixture("vllm_array_gen8_lora")).unwrap();
    let indexer = sync_indexer();
    apply_prefix(&indexer, &batch, 1, w);
    assert_eq!(depth(&indexer, &lora_query, w), 2);
    assert_eq!(depth(&indexer, &hash_tokens(&tokens(1..=8), 4), w), 0);
}

#[test]
fn filters_and_skip_reasons() {
    let payload = fixture("vllm_map_0_33_full");
    let indexer = sync_indexer();
    let report = apply_payload(
        &indexer,
        Format::Vllm,
        2,
        Some(0),
        &payload,
        &ApplyOptions::default(),
    )
    .unwrap();
    assert_eq!(report.events_decoded, 6);
    assert_eq!(report.events_submitted, 2);
    assert_eq!(
        report.skipped,
        SkipCounts {
            unknown_tag: 1,
            filtered: 2,
            unhashable: 1
        }
    );
    assert_eq!(
        indexer.stats().worker_blocks,
        1,
        "d2 stays after d1 removed"
    );

    let everything = ApplyOptions {
        media: MediaFilter::All,
        group: None,
        extras: ExtrasPolicy::HashTokensOnly,
        ..ApplyOptions::default()
    };
    let indexer = sync_indexer();
    let report = apply_payload(&indexer, Format::Vllm, 2, Some(0), &payload, &everything).unwrap();
    assert_eq!(report.events_submitted, 5);
    assert_eq!(report.skipped.total(), 1);
    assert_eq!(report.skipped.unknown_tag, 1);
}

#[test]
fn sglang_signed_hashes_link_parents() {
    let indexer = sync_indexer();
    let batch = decode_batch(Format::Sglang, &fixture("sglang_map")).unwrap();
    let w = Worker::new(3, 1);
    let report = apply_batch(&indexer, &batch, w, 0, &ApplyOptions::default()).unwrap();
    // GPU store, medium-less store (parent -2), CPU_PINNED filtered, salted store indexed
    // under its salt: reached by a query with the salt only.
    assert_eq!(report.skipped.filtered, 1);
    assert_eq!(report.skipped.unhashable, 0);
    assert_eq!(report.events_rejected, 0);
    let salted = Namespace {
        lora_name: b"",
        cache_salt: b"salty",
    };
    let tail = tokens(9..=12);
    let indexer = sync_indexer();
    apply_prefix(&indexer, &batch, 4, w); // up to the salted store
    assert_eq!(depth(&indexer, &hash_request(&tail, 4, &salted, &[]), w), 1);
    assert_eq!(depth(&indexer, &hash_tokens(&tail, 4), w), 0);
    let skip = ApplyOptions {
        extras: ExtrasPolicy::Skip,
        ..ApplyOptions::default()
    };
    let report = apply_batch(&sync_indexer(), &batch, w, 0, &skip).unwrap();
    assert_eq!(
        report.skipped.unhashable, 1,
        "the old policy skips the salted store"
    );
    let indexer = sync_indexer();
    apply_prefix(&indexer, &batch, 2, w);
    assert_eq!(depth(&indexer, &hash_tokens(&tokens(1..=12), 4), w), 3);
}

#[test]
fn unhashable_stores_are_skipped() {
    let base = BlockStored {
        block_hashes: vec![1, 2],
        token_ids: tokens(1..=8),
        block_size: 4,
        ..BlockStored::default()
    };
    let cases = [
        BlockStored {
            token_ids: vec![],
            ..base.clone()
        },
        BlockStored {
            token_ids: tokens(1..=7),
            ..base.clone()
        },
        BlockStored {
            block_size: 0,
            ..base.clone()
        },
        BlockStored {
            lora_id: Some(4),
            ..base.clone()
        },
        BlockStored {
            lookahead_token_ids: Some(vec![vec![9], vec![10]]),
            ..base.clone()
        },
        BlockStored {
            block_hashes: vec![],
            token_ids: vec![],
            ..base.clone()
        },
    ];
    for case in cases {
        let batch = DecodedBatch {
            ts: 0.0,
            events: vec![EngineEvent::BlockStored(Box::new(case.clone()))],
            dp_rank: None,
        };
        let indexer = sync_indexer();
        let report = apply_batch(
            &indexer,
            &batch,
            Worker::new(1, 0),
            0,
            &ApplyOptions::default(),
        )
        .unwrap();
        assert_eq!(report.skipped.unhashable, 1, "{case:?}");
        assert_eq!(indexer.stats().events_applied, 0);
    }
    // The well-formed one is applied.
    let batch = DecodedBatch {
        ts: 0.0,
        events: vec![EngineEvent::BlockStored(Box::new(base))],
        dp_rank: None,
    };
    let indexer = sync_indexer();
    apply_batch(
        &indexer,
        &batch,
        Worker::new(1, 0),
        0,
        &ApplyOptions::default(),
    )
    .unwrap();
    assert_eq!(indexer.stats().worker_blocks, 2);
}

#[test]
fn missing_parent_counts_as_rejected() {
    let batch = decode_batch(Format::Vllm, &fixture("vllm_array_gen12")).unwrap();
    let only_b = DecodedBatch {
        events: vec![batch.events[1].clone()],
        ..batch
    };
    let indexer = sync_indexer();
    let report = apply_batch(
        &indexer,
        &only_b,
        Worker::new(1, 0),
        0,
        &ApplyOptions::default(),
    )
    .unwrap();
    assert_eq!((report.events_submitted, report.events_rejected), (1, 1));
    assert_eq!(indexer.stats().events_rejected, 1);
}

fn snapshot(indexer: &Indexer) -> (kvidx::Stats, Vec<Match>) {
    indexer.flush().unwrap();
    let query = hash_tokens(&tokens(1..=12), 4);
    (indexer.stats(), indexer.find_matches(&query))
}

#[test]
fn feed_tracks_sequences_and_reacts() {
    let indexer = Indexer::new(Config::default()).unwrap(); // pooled mode
    let mut feed = EngineFeed::new(FeedConfig::new(Format::TrtLlm));
    let store = fixture("trtllm_map"); // stores chain A (3 blocks), removes block 0
    let w = Worker::new(4, 0);
    let query = hash_tokens(&tokens(1..=12), 4);
    let send = |feed: &mut EngineFeed, seq| {
        feed.apply_message(&indexer, 4, Some(0), Some(seq), &store)
            .unwrap()
    };
    let r = send(&mut feed, 0);
    assert_eq!((r.seq, r.cleared_worker), (Some(SeqStatus::First), false));
    let r = send(&mut feed, 1);
    assert_eq!(r.seq, Some(SeqStatus::InOrder));
    let r = send(&mut feed, 5);
    assert_eq!(
        r.seq,
        Some(SeqStatus::Gap {
            expected: 2,
            got: 5
        })
    );
    assert!(r.cleared_worker);
    let r = send(&mut feed, 0);
    assert_eq!(
        r.seq,
        Some(SeqStatus::Restart {
            expected: 6,
            got: 0
        })
    );
    assert!(r.cleared_worker);
    indexer.flush().unwrap();
    assert_eq!(indexer.stats().worker_blocks, 2);
    assert_eq!(depth(&indexer, &query, w), 0, "block 0 removed");

    // A malformed payload: error, nothing applied, sequence not recorded.
    let before = snapshot(&indexer);
    let mut broken = store.clone();
    broken.truncate(broken.len() - 3);
    let err = feed
        .apply_message(&indexer, 4, Some(0), Some(1), &broken)
        .unwrap_err();
    assert!(matches!(err, FeedError::Decode(_)));
    assert_eq!(snapshot(&indexer), before);
    assert_eq!(feed.tracker().expected(&w), Some(1));

    let stats = feed.stats();
    assert_eq!(stats.batches, 4);
    assert_eq!(stats.batches_malformed, 1);
    assert_eq!(stats.gaps, 1);
    assert_eq!(stats.batches_missed, 3);
    assert_eq!(stats.restarts, 1);
    assert_eq!(stats.workers_cleared, 2);
    assert_eq!(stats.events_decoded, 12);
    assert_eq!(stats.events_submitted, 12);
}

/// A publisher's sequence starts at 0: a first batch above 0 follows batches the feed never
/// saw. The feed reports them ("missed from the start"), expects the publisher from 0 until
/// then (where a caller asks the replay socket from), and does not clear the worker for them.
#[test]
fn a_first_batch_above_0_reports_the_batches_missed_from_the_start() {
    let indexer = sync_indexer();
    let mut feed = EngineFeed::new(FeedConfig::new(Format::TrtLlm));
    let store = fixture("trtllm_map");
    let (late, early) = (Worker::new(4, 0), Worker::new(4, 1));
    assert_eq!(
        feed.next_expected(late),
        0,
        "a publisher not seen yet starts at 0"
    );
    let r = feed
        .apply_message(&indexer, 4, Some(0), Some(5), &store)
        .unwrap();
    assert_eq!(r.seq, Some(SeqStatus::First));
    assert_eq!(r.missed_from_start, 5, "batches 0-4 came before");
    assert!(!r.cleared_worker);
    assert_eq!(r.events_submitted, 3);
    assert_eq!(feed.next_expected(late), 6);
    let r = feed
        .apply_message(&indexer, 4, Some(0), Some(6), &store)
        .unwrap();
    assert_eq!((r.seq, r.missed_from_start), (Some(SeqStatus::InOrder), 0));
    let r = feed
        .apply_message(&indexer, 4, Some(1), Some(0), &store)
        .unwrap();
    assert_eq!((r.seq, r.missed_from_start), (Some(SeqStatus::First), 0));
    assert_eq!(feed.next_expected(early), 1);
    // Untracked batches (no sequence) report nothing.
    let r = feed
        .apply_message(&indexer, 4, Some(2), None, &store)
        .unwrap();
    assert_eq!((r.seq, r.missed_from_start), (None, 0));
    let stats = feed.stats();
    assert_eq!((stats.late_starts, stats.batches_missed_from_start), (1, 5));
    assert_eq!(
        (stats.gaps, stats.batches_missed, stats.workers_cleared),
        (0, 0, 0)
    );
    let c = feed.tracker().counters();
    assert_eq!((c.late_starts, c.missed_from_start), (1, 5));
    feed.forget(late);
    assert_eq!(feed.next_expected(late), 0);
}

#[test]
fn a_batch_with_one_malformed_event_applies_nothing() {
    // [1.0, [<valid BlockStored>, ["BlockRemoved", "not-a-list"]], 0]
    use rmpv::Value;
    let valid = decode_batch(Format::Vllm, &fixture("vllm_annotated_array_gen12")).unwrap();
    assert_eq!(valid.events.len(), 1);
    let stored = rmpv::decode::read_value(&mut &fixture("vllm_annotated_array_gen12")[..])
        .unwrap()
        .as_array()
        .unwrap()[1]
        .as_array()
        .unwrap()[0]
        .clone();
    let bad = Value::Array(vec![Value::from("BlockRemoved"), Value::from("not-a-list")]);
    let batch = Value::Array(vec![
        Value::F64(1.0),
        Value::Array(vec![stored, bad]),
        Value::from(0),
    ]);
    let mut payload = Vec::new();
    rmpv::encode::write_value(&mut payload, &batch).unwrap();
    let indexer = sync_indexer();
    let before = snapshot(&indexer);
    let result = apply_payload(
        &indexer,
        Format::Vllm,
        1,
        None,
        &payload,
        &ApplyOptions::default(),
    );
    assert!(matches!(result, Err(FeedError::Decode(_))));
    assert_eq!(snapshot(&indexer), before);
}

#[test]
fn feed_forgets_publishers_and_removed_workers() {
    let indexer = sync_indexer();
    let mut feed = EngineFeed::new(FeedConfig::new(Format::TrtLlm));
    let store = fixture("trtllm_map");
    for (worker_id, rank) in [(1, 0), (1, 1), (2, 0)] {
        feed.apply_message(&indexer, worker_id, Some(rank), Some(0), &store)
            .unwrap();
    }
    assert_eq!(feed.publishers(), 3);
    assert!(feed.forget(Worker::new(2, 0)));
    assert!(!feed.forget(Worker::new(2, 0)), "unknown: a no-op");
    assert_eq!(feed.publishers(), 2);
    // A forgotten publisher starts over: its next batch is First, not a gap or restart.
    let r = feed
        .apply_message(&indexer, 2, Some(0), Some(9), &store)
        .unwrap();
    assert_eq!((r.seq, r.cleared_worker), (Some(SeqStatus::First), false));
    // Removing a worker through the feed: every rank leaves the index and the feed.
    feed.remove_worker(&indexer, 1).unwrap();
    assert_eq!(feed.publishers(), 1);
    assert_eq!(feed.tracker().expected(&Worker::new(1, 1)), None);
    assert_eq!(indexer.stats().workers, 1);
    feed.remove_worker_dp_rank(&indexer, Worker::new(2, 0))
        .unwrap();
    assert_eq!((feed.publishers(), indexer.stats().workers), (0, 0));
    assert!(feed.tracker().is_empty());
}

#[test]
fn feed_counters_saturate() {
    let indexer = sync_indexer();
    let mut feed = EngineFeed::new(FeedConfig {
        clear_on_gap: false,
        clear_on_restart: false,
        ..FeedConfig::new(Format::TrtLlm)
    });
    let store = fixture("trtllm_map");
    let mut send = |seq| {
        feed.apply_message(&indexer, 3, Some(0), Some(seq), &store)
            .unwrap()
    };
    // Two gaps of almost 2^64 batches each (with a restart between): the sum saturates.
    send(0);
    assert_eq!(send(u64::MAX - 1).seq.unwrap().missed(), u64::MAX - 2);
    send(0);
    send(u64::MAX - 1);
    let stats = feed.stats();
    assert_eq!((stats.gaps, stats.restarts), (2, 1));
    assert_eq!(stats.batches_missed, u64::MAX);
}

/// A sink that counts events and panics on the n-th, like an indexer with a bug.
struct PanickingSink {
    seen: std::cell::Cell<u32>,
    panic_at: u32,
}

impl kvidx::engine::EventSink for PanickingSink {
    fn apply_event(&self, _event: kvidx::Event) -> Result<(), kvidx::Error> {
        self.seen.set(self.seen.get() + 1);
        assert!(self.seen.get() != self.panic_at, "sink bug");
        Ok(())
    }
}

#[test]
fn any_event_sink_receives_the_converted_events_in_order() {
    let sink = PanickingSink {
        seen: std::cell::Cell::new(0),
        panic_at: u32::MAX,
    };
    let r = apply_payload(
        &sink,
        Format::TrtLlm,
        1,
        None,
        &fixture("trtllm_map"),
        &ApplyOptions::default(),
    )
    .unwrap();
    assert_eq!((r.events_submitted, sink.seen.get()), (3, 3));
    // A panic inside the sink unwinds to the caller (the C ABI poisons the indexer then).
    let sink = PanickingSink {
        seen: std::cell::Cell::new(0),
        panic_at: 2,
    };
    let mut feed = EngineFeed::new(FeedConfig::new(Format::TrtLlm));
    let store = fixture("trtllm_map");
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        feed.apply_message(&sink, 1, None, Some(0), &store)
    }));
    assert!(outcome.is_err());
}

/// Records the events it is given.
#[derive(Default)]
struct RecordingSink(std::cell::RefCell<Vec<kvidx::Event>>);

impl kvidx::engine::EventSink for RecordingSink {
    fn apply_event(&self, event: kvidx::Event) -> Result<(), kvidx::Error> {
        self.0.borrow_mut().push(event);
        Ok(())
    }
}

/// The streaming apply path (which keeps only what conversion reads of `extra_keys` and
/// `lookahead_token_ids`) converts every payload exactly as `to_events` does on the fully
/// decoded batch, for every option set.
#[test]
fn streaming_apply_converts_like_the_full_decode() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/engine");
    let mut payloads: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
        .collect();
    payloads.sort();
    assert!(payloads.len() >= 10);
    let all = ApplyOptions {
        media: MediaFilter::All,
        group: None,
        extras: ExtrasPolicy::HashTokensOnly,
        ..ApplyOptions::default()
    };
    for payload in &payloads {
        for format in [Format::Vllm, Format::Sglang, Format::TrtLlm] {
            let Ok(batch) = decode_batch(format, payload) else {
                continue;
            };
            for options in [ApplyOptions::default(), all] {
                let worker = Worker::new(1, batch.dp_rank.unwrap_or(0));
                let want = kvidx::engine::to_events(&batch, worker, 0, &options);
                let sink = RecordingSink::default();
                let report = apply_payload(&sink, format, 1, None, payload, &options).unwrap();
                assert_eq!(sink.0.into_inner(), want.events, "{format:?} {options:?}");
                assert_eq!(report.skipped, want.skipped);
            }
        }
    }
}

/// With every medium indexed, each engine medium lands on its storage tier: a block the GPU
/// offloads to CPU memory and then evicts is held in host memory only, and an unknown medium
/// lands on the tier the options name.
#[test]
fn media_map_to_storage_tiers() {
    use kvidx::engine::{BlockRemoved, Medium};
    use kvidx::Tier;
    let all = ApplyOptions {
        media: MediaFilter::All,
        unknown_medium: Tier::Disk,
        ..ApplyOptions::default()
    };
    let store = |hashes: Vec<u64>, parent: Option<u64>, first: u32, medium: Option<&str>| {
        let n = hashes.len() as u32;
        EngineEvent::BlockStored(Box::new(BlockStored {
            block_hashes: hashes,
            parent_block_hash: parent,
            token_ids: tokens(first..=first + 4 * n - 1),
            block_size: 4,
            medium: medium.map(Medium::parse),
            ..BlockStored::default()
        }))
    };
    let remove = |hashes: Vec<u64>, medium: Option<&str>| {
        EngineEvent::BlockRemoved(Box::new(BlockRemoved {
            block_hashes: hashes,
            medium: medium.map(Medium::parse),
            ..BlockRemoved::default()
        }))
    };
    let batch = DecodedBatch {
        ts: 0.0,
        events: vec![
            store(vec![1, 2, 3], None, 1, None),     // no medium: the GPU
            store(vec![3], Some(2), 9, Some("cpu")), // block 3 copied to CPU memory
            remove(vec![3], Some("GPU")),            // and evicted from the GPU
            store(vec![4], Some(3), 13, Some("NVME_POOL")), // an unknown medium
        ],
        dp_rank: None,
    };
    let w = Worker::new(5, 0);
    let indexer = sync_indexer();
    apply_batch(&indexer, &batch, w, 0, &all).unwrap();
    let query = hash_tokens(&tokens(1..=16), 4);
    let tiered = indexer.find_matches_tiered(&query);
    assert_eq!(tiered.len(), 1);
    assert_eq!(tiered[0].tier_depths, [2, 3, 4, 4]);
    // A removal without a medium drops every tier; with the default options (GPU only) the
    // CPU events are filtered and block 3 is simply gone.
    let gone = DecodedBatch {
        ts: 0.0,
        events: vec![remove(vec![3], None)],
        dp_rank: None,
    };
    apply_batch(&indexer, &gone, w, 10, &all).unwrap();
    assert_eq!(depth(&indexer, &query, w), 2);
    let gpu_only = sync_indexer();
    let report = apply_batch(&gpu_only, &batch, w, 0, &ApplyOptions::default()).unwrap();
    assert_eq!(report.skipped.filtered, 2);
    assert_eq!(depth(&gpu_only, &query, w), 2);
    assert_eq!(Medium::parse("Cpu_Pinned").tier(Tier::External), Tier::Host);
    assert_eq!(Medium::parse("storage").tier(Tier::External), Tier::Disk);
    assert_eq!(Medium::parse("weird").tier(Tier::Host), Tier::Host);
}

#[test]
fn an_engine_batch_at_an_offset_is_one_unit_skipped_at_or_below_the_watermark() {
    let store = fixture("trtllm_map"); // stores chain A (3 blocks), removes block 0
    let w = Worker::new(4, 0);
    for threads in [0, 2] {
        let indexer = Indexer::new(Config {
            event_threads: threads,
            ..Config::default()
        })
        .unwrap();
        let mut feed = EngineFeed::new(FeedConfig::new(Format::TrtLlm));
        let r = feed
            .apply_message_at(&indexer, 4, Some(0), Some(0), &store, 10)
            .unwrap();
        assert!(!r.batch_skipped);
        indexer.flush().unwrap();
        assert_eq!(indexer.watermark(w), Some(10));
        let after_first = snapshot(&indexer);
        assert_eq!(after_first.0.worker_blocks, 2);
        // The same stream message again (a replayed range): skipped whole, the sequence is
        // still tracked.
        let r = feed
            .apply_message_at(&indexer, 4, Some(0), Some(1), &store, 10)
            .unwrap();
        assert_eq!(r.batch_skipped, threads == 0);
        assert_eq!(snapshot(&indexer).1, after_first.1);
        assert_eq!(feed.tracker().expected(&w), Some(2));
        // A gap's clear is part of the batch: skipped with it at an old offset...
        let r = feed
            .apply_message_at(&indexer, 4, Some(0), Some(7), &store, 9)
            .unwrap();
        assert!(r.cleared_worker);
        indexer.flush().unwrap();
        assert_eq!(indexer.stats().worker_blocks, 2, "nothing cleared");
        // ...and applied with it at a new one: cleared, then stored again (one unit).
        let r = feed
            .apply_message_at(&indexer, 4, Some(0), Some(12), &store, 11)
            .unwrap();
        assert!(r.cleared_worker && !r.batch_skipped);
        indexer.flush().unwrap();
        assert_eq!(indexer.watermark(w), Some(11));
        let replica = indexer.replica_stats();
        assert_eq!((replica.batches_applied, replica.batches_skipped), (2, 2));
        // The plain function, and offset 0.
        let options = ApplyOptions::default();
        let r = kvidx::engine::apply_payload_at(
            &indexer,
            Format::TrtLlm,
            4,
            Some(0),
            &store,
            &options,
            11,
        )
        .unwrap();
        assert_eq!(r.batch_skipped, threads == 0);
        assert!(kvidx::engine::apply_payload_at(
            &indexer,
            Format::TrtLlm,
            4,
            Some(0),
            &store,
            &options,
            0
        )
        .is_err());
        assert!(feed
            .apply_message_at(&indexer, 4, Some(0), Some(13), &store, 0)
            .is_err());
        assert_eq!(
            feed.tracker().expected(&w),
            Some(13),
            "offset 0 records nothing"
        );
    }
}

#[test]
fn a_new_engine_epoch_is_a_restart_never_a_gap_filled() {
    let indexer = sync_indexer();
    let mut feed = EngineFeed::new(FeedConfig::new(Format::TrtLlm));
    let store = fixture("trtllm_map");
    let w = Worker::new(7, 0);
    let mut offset = 0;
    let mut apply = |feed: &mut EngineFeed, epoch, seq| {
        offset += 1;
        feed.apply_message_in_epoch_at(&indexer, 7, Some(0), epoch, seq, &store, offset)
            .unwrap()
    };
    assert_eq!(
        apply(&mut feed, Some(10), Some(0)).seq,
        Some(SeqStatus::First)
    );
    assert_eq!(
        apply(&mut feed, Some(10), Some(1)).seq,
        Some(SeqStatus::InOrder)
    );
    // Epoch 11 sends 2: in the old epoch "in order", in truth a new engine's batch.
    let r = apply(&mut feed, Some(11), Some(2));
    assert_eq!(
        (r.seq, r.cleared_worker),
        (
            Some(SeqStatus::Restart {
                expected: 2,
                got: 2
            }),
            true
        )
    );
    // Tracking restarted at the new epoch's batch: 3 is in order, not a gap of the old one.
    assert_eq!(
        apply(&mut feed, Some(11), Some(3)).seq,
        Some(SeqStatus::InOrder)
    );
    // A batch without an epoch keeps the publisher's.
    assert_eq!(
        apply(&mut feed, None, Some(4)).seq,
        Some(SeqStatus::InOrder)
    );
    assert_eq!(
        apply(&mut feed, Some(11), Some(5)).seq,
        Some(SeqStatus::InOrder)
    );
    // A new epoch without a sequence is still a restart.
    let r = apply(&mut feed, Some(12), None);
    assert!(r.cleared_worker);
    assert_eq!(feed.tracker().expected(&w), None);
    assert_eq!(feed.stats().restarts, 2);
}

#[test]
fn a_restored_feed_classifies_every_next_batch_as_the_saved_one() {
    let store = fixture("trtllm_map");
    let indexer = sync_indexer();
    let mut saved = EngineFeed::new(FeedConfig::new(Format::TrtLlm));
    // Publishers in every state: tracked, with an epoch, untracked, rank from the batch.
    saved
        .apply_message_in_epoch_at(&indexer, 1, Some(0), Some(5), Some(3), &store, 1)
        .unwrap();
    saved
        .apply_message_in_epoch_at(&indexer, 2, Some(1), None, None, &store, 2)
        .unwrap();
    saved
        .apply_message_in_epoch_at(&indexer, 3, None, Some(9), Some(0), &store, 3)
        .unwrap();
    let bytes = saved.save_state();
    let mut restored = EngineFeed::new(FeedConfig::new(Format::TrtLlm));
    restored.restore_state(&bytes).unwrap();
    assert_eq!(restored.save_state(), bytes);
    assert_eq!(restored.publishers(), 3);
    let mut other = EngineFeed::new(FeedConfig::new(Format::Vllm));
    assert!(other.restore_state(&bytes).is_err());
    assert!(restored.restore_state(&bytes[..bytes.len() - 3]).is_err());
    assert_eq!(restored.publishers(), 3, "a refused state changes nothing");
    let mut offset = 10;
    for (id, rank, epoch, seq) in [
        (1, Some(0), Some(5), Some(4)),
        (1, Some(0), Some(6), Some(5)),
        (2, Some(1), None, Some(8)),
        (3, None, Some(9), Some(7)),
    ] {
        offset += 1;
        let a = saved
            .apply_message_in_epoch_at(&indexer, id, rank, epoch, seq, &store, offset)
            .unwrap();
        let b = restored
            .apply_message_in_epoch_at(&indexer, id, rank, epoch, seq, &store, offset)
            .unwrap();
        assert_eq!((a.seq, a.cleared_worker), (b.seq, b.cleared_worker));
    }
    assert_eq!(restored.save_state(), saved.save_state());
}

#[test]
fn a_batch_claiming_the_rank_from_batch_value_is_refused_when_its_rank_is_taken() {
    use rmpv::Value;
    let batch = Value::Array(vec![
        Value::F64(1.0),
        Value::Array(vec![]),
        Value::from(u32::MAX),
    ]);
    let mut payload = Vec::new();
    rmpv::encode::write_value(&mut payload, &batch).unwrap();
    let indexer = sync_indexer();
    let mut feed = EngineFeed::new(FeedConfig::new(Format::Vllm));
    let taken = feed.apply_message_at(&indexer, 7, None, Some(0), &payload, 1);
    assert!(matches!(taken, Err(FeedError::Decode(_))), "{taken:?}");
    assert_eq!(feed.publishers(), 0);
    // A rank given by the caller does not read the batch's.
    let given = feed.apply_message_at(&indexer, 7, Some(2), Some(0), &payload, 1);
    assert_eq!(given.unwrap().dp_rank, 2);
}
