//! Fuzzing the engine decoder with proptest: arbitrary bytes, mutated valid payloads and
//! hostile length prefixes. Properties: no panic; a payload that fails to decode leaves the
//! indexer exactly as it was. Allocation bounds: `scripts/test-engine.sh` runs this binary
//! under a 1 GiB address-space limit, so any allocation sized by a hostile 32-bit length
//! prefix (up to 4 GiB of elements) aborts the run.
//!
//! `ENGINE_FUZZ_CASES=N` raises the number of cases per property (default 256).

use std::sync::OnceLock;

use kvidx::engine::{apply_payload, decode_batch, to_events, ApplyOptions, EventSink, Format};
use kvidx::hashing::hash_tokens;
use kvidx::{Config, Indexer, Match, Stats};
use proptest::prelude::*;

const FORMATS: [Format; 3] = [Format::Vllm, Format::Sglang, Format::TrtLlm];

/// Every committed fixture, read once.
fn fixtures() -> &'static [Vec<u8>] {
    static ALL: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    ALL.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/engine");
        let mut out: Vec<Vec<u8>> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
            .collect();
        out.sort();
        assert!(out.len() >= 10, "fixtures missing");
        out
    })
}

/// Decodes with every format (a panic fails the test); whether any format accepted it.
fn decode_all(payload: &[u8]) -> bool {
    FORMATS.iter().fold(false, |ok, &format| {
        decode_batch(format, payload).is_ok() | ok
    })
}

fn snapshot(indexer: &Indexer) -> (Stats, Vec<Match>) {
    indexer.flush().unwrap();
    let q = hash_tokens(&(1..=12).collect::<Vec<u32>>(), 4);
    (indexer.stats(), indexer.find_matches(&q))
}

/// A synchronous indexer holding chain A for worker 1, so a malformed batch has state to
/// disturb.
fn seeded_indexer(fixtures: &[Vec<u8>]) -> Indexer {
    let indexer = Indexer::new(Config {
        event_threads: 0,
        ..Config::default()
    })
    .unwrap();
    for payload in fixtures {
        let _ = apply_payload(
            &indexer,
            Format::Vllm,
            1,
            Some(0),
            payload,
            &ApplyOptions::default(),
        );
    }
    indexer
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
    /// Overwrite with a 32-bit length header (array32, map32, str32, bin32) of a huge size.
    Hostile(usize, u8, u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Remove),
        any::<usize>().prop_map(Mutation::Truncate),
        (
            any::<usize>(),
            prop::sample::select(vec![0xddu8, 0xdf, 0xdb, 0xc6, 0xdc, 0xde]),
            any::<u32>()
        )
            .prop_map(|(i, m, n)| Mutation::Hostile(i, m, n)),
    ]
}

fn mutate(payload: &mut Vec<u8>, m: &Mutation) {
    if payload.is_empty() {
        return;
    }
    let len = payload.len();
    match *m {
        Mutation::Flip(i, b) => payload[i % len] ^= b.max(1),
        Mutation::Insert(i, b) => payload.insert(i % (len + 1), b),
        Mutation::Remove(i) => {
            payload.remove(i % len);
        }
        Mutation::Truncate(i) => payload.truncate(i % len),
        Mutation::Hostile(i, marker, n) => {
            let at = i % len;
            let mut header = vec![marker];
            header.extend_from_slice(&n.to_be_bytes());
            let end = (at + header.len()).min(len);
            payload.splice(at..end, header);
        }
    }
}

fn cases() -> u32 {
    std::env::var("ENGINE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        decode_all(&bytes);
    }

    #[test]
    fn arbitrary_bytes_after_an_envelope_prefix(
        prefix in prop::sample::select(vec![
            vec![0x93u8, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0],
            vec![0x92u8, 0x00],
            vec![0x93u8, 0x00, 0x91],
            vec![0x93u8, 0x00, 0x91, 0x84, 0xa4, b't', b'y', b'p', b'e'],
        ]),
        tail in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut bytes = prefix;
        bytes.extend(tail);
        decode_all(&bytes);
    }

    #[test]
    fn mutated_payloads_decode_or_change_nothing(
        pick in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let all = fixtures();
        let mut payload = pick.get(all).clone();
        for m in &mutations {
            mutate(&mut payload, m);
        }
        decode_all(&payload);
        let indexer = seeded_indexer(&all[..3]);
        let before = snapshot(&indexer);
        let result = apply_payload(&indexer, Format::Vllm, 1, Some(0), &payload,
                                   &ApplyOptions::default());
        if result.is_err() {
            prop_assert_eq!(snapshot(&indexer), before);
        }
        // The streaming apply path decodes exactly what the full decode accepts, and
        // converts it the same way.
        let full = decode_batch(Format::Vllm, &payload);
        prop_assert_eq!(result.is_ok(), full.is_ok());
        if let Ok(batch) = full {
            let worker = kvidx::Worker::new(1, 0);
            let want = to_events(&batch, worker, 0, &ApplyOptions::default());
            let sink = Recorder::default();
            let report = apply_payload(&sink, Format::Vllm, 1, Some(0), &payload,
                                       &ApplyOptions::default());
            prop_assert_eq!(report.map(|r| r.skipped), Ok(want.skipped));
            prop_assert_eq!(sink.0.into_inner(), want.events);
        }
    }
}

/// Records the events it is given.
#[derive(Default)]
struct Recorder(std::cell::RefCell<Vec<kvidx::Event>>);

impl EventSink for Recorder {
    fn apply_event(&self, event: kvidx::Event) -> Result<(), kvidx::Error> {
        self.0.borrow_mut().push(event);
        Ok(())
    }
}

#[test]
fn every_fixture_survives_every_truncation_and_single_byte_flip() {
    let all = fixtures();
    let indexer = seeded_indexer(&all[..3]);
    let before = snapshot(&indexer);
    for payload in all {
        assert!(decode_all(payload), "the fixture itself decodes");
        for cut in 0..payload.len() {
            decode_all(&payload[..cut]);
        }
        for i in 0..payload.len() {
            let mut p = payload.clone();
            p[i] ^= 0xff;
            if decode_batch(Format::Vllm, &p).is_err() {
                let r = apply_payload(&indexer, Format::Vllm, 1, Some(0), &p, &Default::default());
                assert!(r.is_err());
            }
        }
    }
    assert_eq!(snapshot(&indexer), before);
}

#[test]
fn hostile_length_prefixes_are_refused() {
    // Each 32-bit header claims 4 Gi elements or bytes in a tiny payload, at every nesting
    // level a batch has (events, event, field).
    let prefixes: [&[u8]; 4] = [
        &[0x93, 0x00],
        &[0x93, 0x00, 0x91],
        &[
            0x93, 0x00, 0x91, 0x92, 0xab, b'B', b'l', b'o', b'c', b'k', b'S', b't', b'o', b'r',
            b'e', b'd',
        ],
        &[0x93, 0x00, 0x91, 0x81, 0xa4, b't', b'y', b'p', b'e'],
    ];
    for prefix in prefixes {
        for marker in [0xddu8, 0xdf, 0xdb, 0xc6, 0xc9] {
            let mut payload = prefix.to_vec();
            payload.extend_from_slice(&[marker, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00]);
            assert!(
                decode_batch(Format::Vllm, &payload).is_err(),
                "{payload:x?}"
            );
        }
    }
}
