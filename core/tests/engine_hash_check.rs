//! The feed's hash check on payloads whose hashes come from the engines' own code
//! (tests/fixtures/hash_check, written by scripts/gen_hash_check_fixtures.py): every block
//! the engine's published keys determine matches when the check is configured as the engine
//! was, and a wrong seed, block size or algorithm shows as mismatches in the first batch.
//! Also the llm-d keys scheme: stores indexed under llm-d's keys answer llm-d's queries.

use kvidx::engine::{
    EngineFeed, FeedConfig, Format, HashAlgorithm, HashCheckConfig, HashCheckCounts, LlmdKeysConfig,
};
use kvidx::{llmd, BackendKind, Config, Indexer, Worker};

struct Scenario {
    name: String,
    format: Format,
    algorithm: HashAlgorithm,
    seed: String,
    block_size: u32,
    batches: usize,
    matched: u64,
    unverifiable: u64,
}

fn dir() -> String {
    format!(
        "{}/../tests/fixtures/hash_check",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn scenarios() -> Vec<Scenario> {
    let manifest = std::fs::read_to_string(format!("{}/manifest.txt", dir())).unwrap();
    let all: Vec<Scenario> = manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(f.len(), 8, "manifest line {line:?}");
            Scenario {
                name: f[0].to_owned(),
                format: match f[1] {
                    "vllm" => Format::Vllm,
                    "sglang" => Format::Sglang,
                    other => panic!("format {other}"),
                },
                algorithm: match f[2] {
                    "sha256_cbor" => HashAlgorithm::VllmSha256Cbor,
                    "xxhash_cbor" => HashAlgorithm::VllmXxhashCbor,
                    "sglang_sha256" => HashAlgorithm::SglangSha256,
                    other => panic!("algorithm {other}"),
                },
                seed: f[3].to_owned(),
                block_size: f[4].parse().unwrap(),
                batches: f[5].parse().unwrap(),
                matched: f[6].parse().unwrap(),
                unverifiable: f[7].parse().unwrap(),
            }
        })
        .collect();
    assert!(all.len() >= 3, "manifest lists {} scenarios", all.len());
    all
}

fn batch(s: &Scenario, i: usize) -> Vec<u8> {
    let path = format!("{}/{}_{i}.msgpack", dir(), s.name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn indexer() -> Indexer {
    Indexer::new(Config {
        backend: BackendKind::Positional,
        event_threads: 0,
        ..Config::default()
    })
    .unwrap()
}

const W: Worker = Worker {
    worker_id: 3,
    dp_rank: 0,
};

/// A feed with the given check, and the counts of worker `W` after each batch.
fn run(s: &Scenario, check: HashCheckConfig, batches: usize) -> Vec<HashCheckCounts> {
    let mut feed = EngineFeed::new(FeedConfig::new(s.format));
    feed.set_hash_check(Some(check));
    let index = indexer();
    (0..batches)
        .map(|i| {
            feed.apply_message(&index, W.worker_id, Some(0), Some(i as u64), &batch(s, i))
                .unwrap();
            feed.hash_check_counts(W).unwrap()
        })
        .collect()
}

fn configured(s: &Scenario) -> HashCheckConfig {
    HashCheckConfig {
        algorithm: s.algorithm,
        seed: s.seed.clone(),
        block_size: Some(s.block_size),
    }
}

#[test]
fn the_engines_own_hashes_all_match() {
    for s in scenarios() {
        let counts = run(&s, configured(&s), s.batches);
        let want = HashCheckCounts {
            matched: s.matched,
            mismatched: 0,
            unverifiable: s.unverifiable,
        };
        assert_eq!(*counts.last().unwrap(), want, "{}", s.name);
        // Each store's own block size gives the same answer.
        let own = HashCheckConfig {
            block_size: None,
            ..configured(&s)
        };
        assert_eq!(run(&s, own, s.batches).last(), Some(&want), "{}", s.name);
    }
}

#[test]
fn a_wrong_seed_block_size_or_algorithm_mismatches_in_the_first_batch() {
    for s in scenarios() {
        let mut wrong = vec![
            HashCheckConfig {
                block_size: Some(s.block_size * 2),
                ..configured(&s)
            },
            HashCheckConfig {
                block_size: Some(s.block_size / 2),
                ..configured(&s)
            },
        ];
        if s.format == Format::Vllm {
            wrong.push(HashCheckConfig {
                seed: format!("{}-other", s.seed),
                ..configured(&s)
            });
            let other = if s.algorithm == HashAlgorithm::VllmSha256Cbor {
                HashAlgorithm::VllmXxhashCbor
            } else {
                HashAlgorithm::VllmSha256Cbor
            };
            wrong.push(HashCheckConfig {
                algorithm: other,
                ..configured(&s)
            });
        }
        for check in wrong {
            let first = run(&s, check.clone(), 1)[0];
            assert_eq!(first.matched, 0, "{} with {check:?}", s.name);
            assert!(first.mismatched > 0, "{} with {check:?}: {first:?}", s.name);
        }
    }
}

#[test]
fn counts_are_per_publisher_and_off_by_default() {
    let s = &scenarios()[0];
    let index = indexer();
    let mut feed = EngineFeed::new(FeedConfig::new(s.format));
    assert_eq!(feed.hash_check_counts(W), None);
    feed.set_hash_check(Some(configured(s)));
    let other = Worker::new(4, 1);
    feed.apply_message(&index, W.worker_id, Some(0), Some(0), &batch(s, 0))
        .unwrap();
    feed.apply_message(&index, other.worker_id, Some(1), Some(0), &batch(s, 0))
        .unwrap();
    let one = feed.hash_check_counts(W).unwrap();
    assert!(one.matched > 0);
    assert_eq!(feed.hash_check_counts(other), Some(one));
    assert_eq!(feed.hash_check_workers(), vec![(W, one), (other, one)]);
    let totals = feed.hash_check_totals().unwrap();
    assert_eq!(totals.matched, 2 * one.matched);
    // A removed worker's counts stay in the totals.
    feed.remove_worker(&index, other.worker_id).unwrap();
    assert_eq!(feed.hash_check_workers(), vec![(W, one)]);
    assert_eq!(feed.hash_check_totals(), Some(totals));
}

#[test]
fn a_malformed_batch_counts_nothing() {
    let s = &scenarios()[0];
    let index = indexer();
    let mut feed = EngineFeed::new(FeedConfig::new(s.format));
    feed.set_hash_check(Some(configured(s)));
    let mut truncated = batch(s, 0);
    truncated.pop();
    assert!(feed
        .apply_message(&index, W.worker_id, Some(0), None, &truncated)
        .is_err());
    assert_eq!(feed.hash_check_counts(W), Some(HashCheckCounts::default()));
    // A continuation whose parent was only in the malformed batch cannot be verified.
    feed.apply_message(&index, W.worker_id, Some(0), None, &batch(s, 1))
        .unwrap();
    let counts = feed.hash_check_counts(W).unwrap();
    assert!(counts.unverifiable > 0, "{counts:?}");
}

fn depth(index: &Indexer, query: &[u64]) -> u32 {
    index
        .find_matches(query)
        .iter()
        .find(|m| m.worker() == W)
        .map_or(0, |m| m.depth)
}

/// vLLM's default sha256 scenario, and the llm-d scheme of the tests: llm-d's default seed,
/// model "base-model".
fn llmd_setup() -> (Scenario, LlmdKeysConfig) {
    let s = scenarios()
        .into_iter()
        .find(|s| s.name == "vllm_sha256_cbor_default")
        .unwrap();
    let config = LlmdKeysConfig {
        seed: String::new(),
        model: "base-model".to_owned(),
    };
    (s, config)
}

#[test]
fn an_llmd_feed_answers_llmd_request_keys() {
    // vLLM's default sha256 scenario: batch 0 stores 5 blocks of prompt ++ 1..=16, batch 1
    // continues them with 2 blocks of 50..=81 and stores a salted prompt, batch 2 removes
    // the fifth block and stores an image request, batch 3 a LoRA store of the prompt.
    let (s, config) = llmd_setup();
    let index = indexer();
    let mut feed = EngineFeed::new(FeedConfig::new(s.format));
    feed.set_llmd_keys(Some(config.clone()));
    for i in 0..s.batches {
        feed.apply_message(&index, W.worker_id, Some(0), Some(i as u64), &batch(&s, i))
            .unwrap();
    }
    let prompt: Vec<u32> = (1000..1064).collect();
    let keys = |tail: std::ops::RangeInclusive<u32>, model: &str| {
        let tokens: Vec<u32> = prompt.iter().copied().chain(tail).collect();
        llmd::request_keys(&tokens, 16, &config.seed, model)
    };
    // The fifth block of the first request was removed; the second request's continue.
    assert_eq!(depth(&index, &keys(1..=16, "base-model")), 4);
    assert_eq!(depth(&index, &keys(50..=81, "base-model")), 6);
    assert_eq!(depth(&index, &keys(50..=81, "other-model")), 0);
    let seeded = llmd::request_keys(&prompt, 16, "0", "base-model");
    assert_eq!(depth(&index, &seeded), 0);
    // The LoRA store is keyed from its adapter's name.
    let adapter = llmd::request_keys(&prompt, 16, &config.seed, "sql-adapter");
    assert_eq!(depth(&index, &adapter), 4);
    // kvidx's own local hashes find nothing in an llm-d keyed feed.
    let local = kvidx::hashing::hash_tokens(&prompt, 16);
    assert_eq!(depth(&index, &local), 0);
}

#[test]
fn damaged_payloads_never_panic_and_count_nothing_when_refused() {
    for s in scenarios() {
        for i in 0..s.batches {
            let good = batch(&s, i);
            let mut damaged: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
            for at in 0..good.len() {
                for bit in [0x01u8, 0x10, 0x80] {
                    let mut flipped = good.clone();
                    flipped[at] ^= bit;
                    damaged.push(flipped);
                }
            }
            for payload in damaged {
                let index = indexer();
                let mut feed = EngineFeed::new(FeedConfig::new(s.format));
                feed.set_hash_check(Some(configured(&s)));
                feed.set_llmd_keys(Some(LlmdKeysConfig {
                    seed: String::new(),
                    model: "m".to_owned(),
                }));
                let applied = feed.apply_message(&index, W.worker_id, Some(0), None, &payload);
                if applied.is_err() {
                    assert_eq!(feed.hash_check_totals(), Some(HashCheckCounts::default()));
                }
            }
        }
    }
}

/// Batch 0 of the default vLLM scenario with its store moved to KV-cache group 1.
fn in_group_1(s: &Scenario) -> Vec<u8> {
    use rmpv::Value;
    let mut batch = rmpv::decode::read_value(&mut &batch(s, 0)[..]).unwrap();
    let Value::Array(envelope) = &mut batch else {
        panic!("envelope")
    };
    let Value::Array(events) = &mut envelope[1] else {
        panic!("events")
    };
    let Value::Map(fields) = &mut events[0] else {
        panic!("event")
    };
    let group = fields
        .iter_mut()
        .find(|(k, _)| k.as_str() == Some("group_idx"))
        .expect("group_idx");
    group.1 = Value::from(1);
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, &batch).unwrap();
    out
}

#[test]
fn stores_of_a_group_the_feed_does_not_index_are_not_checked() {
    let s = scenarios().into_iter().next().unwrap();
    let payload = in_group_1(&s);
    for (group, matched) in [(Some(0), 0), (Some(1), 5), (None, 5)] {
        let mut config = FeedConfig::new(s.format);
        config.options.group = group;
        let mut feed = EngineFeed::new(config);
        feed.set_hash_check(Some(configured(&s)));
        feed.apply_message(&indexer(), W.worker_id, Some(0), None, &payload)
            .unwrap();
        let counts = feed.hash_check_counts(W).unwrap();
        assert_eq!(counts.matched, matched, "group {group:?}: {counts:?}");
    }
}

#[test]
fn a_restored_feed_learns_chains_from_the_offset_batches_it_skips() {
    let (s, config) = llmd_setup();
    let index = indexer();
    let mut before = EngineFeed::new(FeedConfig::new(s.format));
    before.set_llmd_keys(Some(config.clone()));
    before
        .apply_message_at(&index, W.worker_id, Some(0), Some(0), &batch(&s, 0), 1)
        .unwrap();
    // A replica restored at offset 1: its feed has the tracking state, not the keys.
    let mut after = EngineFeed::new(FeedConfig::new(s.format));
    after.restore_state(&before.save_state()).unwrap();
    after.set_llmd_keys(Some(config.clone()));
    after.set_hash_check(Some(configured(&s)));
    let replayed = after
        .apply_message_at(&index, W.worker_id, Some(0), Some(0), &batch(&s, 0), 1)
        .unwrap();
    assert!(replayed.batch_skipped);
    assert_eq!(after.hash_check_totals().unwrap().matched, 0);
    after
        .apply_message_at(&index, W.worker_id, Some(0), Some(1), &batch(&s, 1), 2)
        .unwrap();
    // The second request's 2 blocks continue the skipped batch's chain; the salted 4 too.
    assert_eq!(after.hash_check_totals().unwrap().matched, 6);
    let tokens: Vec<u32> = (1000..1064).chain(50..=81).collect();
    let keys = llmd::request_keys(&tokens, 16, &config.seed, &config.model);
    assert_eq!(depth(&index, &keys), 6);
}
