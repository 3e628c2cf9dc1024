//! End to end: stores that vLLM 0.33 and SGLang 0.5.23 publish for salted, LoRA and
//! multimodal requests (tests/fixtures/engine-namespaces/, made by the engines' own code:
//! scripts/gen_engine_namespace_fixtures.py) are indexed under their namespace, so a query
//! hashed with `hash_request` and the same namespace and spans reaches them to their exact
//! depth, and one with another salt, adapter or image reaches nothing past the first block
//! that differs.
//!
//! Every fixture is one request of tokens 1..=12 in blocks of 4, published as two stores
//! (blocks 0-1, then block 2 after its parent); the image spans tokens [5, 9).

use std::sync::Mutex;

use kvidx::engine::{
    apply_payload, decode_batch, to_events, ApplyOptions, EventSink, ExtrasPolicy, Format,
    SkipCounts,
};
use kvidx::namespace::{hash_request, MultimodalSpan, Namespace};
use kvidx::{BackendKind, Config, Error, Event, Indexer, Worker};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../tests/fixtures/engine-namespaces/{name}.msgpack",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const WORKER: Worker = Worker::new(5, 0);

/// An indexer holding one fixture's stores, what applying them skipped and how many stores
/// were rejected (parent not held).
fn indexed(format: Format, name: &str, options: &ApplyOptions) -> (Indexer, SkipCounts, u64) {
    let indexer = Indexer::new(Config {
        backend: BackendKind::Positional,
        event_threads: 0,
        ..Config::default()
    })
    .unwrap();
    let report = apply_payload(&indexer, format, 5, None, &fixture(name), options)
        .expect("the fixture applies");
    (indexer, report.skipped, report.events_rejected)
}

/// The depth the fixture's worker reaches for tokens 1..=12 under `ns` and `spans`.
fn depth(indexer: &Indexer, ns: &Namespace<'_>, spans: &[MultimodalSpan<'_>]) -> u32 {
    let tokens: Vec<u32> = (1..=12).collect();
    let query = hash_request(&tokens, 4, ns, spans);
    let matches = indexer.find_matches(&query);
    matches
        .iter()
        .find(|m| m.worker() == WORKER)
        .map_or(0, |m| m.depth)
}

fn ns<'a>(lora_name: &'a str, cache_salt: &'a str) -> Namespace<'a> {
    Namespace {
        lora_name: lora_name.as_bytes(),
        cache_salt: cache_salt.as_bytes(),
    }
}

fn image(identifier: &str) -> [MultimodalSpan<'_>; 1] {
    [MultimodalSpan {
        identifier: identifier.as_bytes(),
        start: 5,
        end: 9,
    }]
}

/// (fixture, format, its namespace, whether it has the image)
const CASES: [(&str, Format, &str, &str, bool); 5] = [
    ("vllm_salt", Format::Vllm, "", "salt-a", false),
    ("vllm_lora", Format::Vllm, "lora-l", "", false),
    ("vllm_image", Format::Vllm, "", "", true),
    ("vllm_all", Format::Vllm, "lora-l", "salt-a", true),
    (
        "sglang_lora_salt",
        Format::Sglang,
        "lora-l",
        "salt-a",
        false,
    ),
];

#[test]
fn a_query_reaches_its_own_namespace_to_its_depth_and_no_other() {
    for (name, format, lora, salt, has_image) in CASES {
        let (indexer, skipped, rejected) = indexed(format, name, &ApplyOptions::default());
        assert_eq!(
            skipped,
            SkipCounts::default(),
            "{name}: every store indexed"
        );
        assert_eq!(rejected, 0, "{name}");
        let own: &[MultimodalSpan<'_>] = if has_image { &image("image-i") } else { &[] };
        let other: &[MultimodalSpan<'_>] = if has_image { &image("image-j") } else { &[] };
        assert_eq!(
            depth(&indexer, &ns(lora, salt), own),
            3,
            "{name}: same namespace"
        );
        if !salt.is_empty() {
            assert_eq!(
                depth(&indexer, &ns(lora, "salt-b"), own),
                0,
                "{name}: another salt"
            );
            assert_eq!(depth(&indexer, &ns(lora, ""), own), 0, "{name}: no salt");
        }
        if !lora.is_empty() {
            assert_eq!(
                depth(&indexer, &ns("lora-m", salt), own),
                0,
                "{name}: another LoRA"
            );
            assert_eq!(depth(&indexer, &ns("", salt), own), 0, "{name}: no LoRA");
        }
        if has_image {
            // The image starts in block 1: block 0 is shared, nothing after it.
            assert_eq!(
                depth(&indexer, &ns(lora, salt), other),
                1,
                "{name}: another image"
            );
            assert_eq!(depth(&indexer, &ns(lora, salt), &[]), 1, "{name}: no image");
        }
        if !(salt.is_empty() && lora.is_empty()) {
            assert_eq!(
                depth(&indexer, &Namespace::NONE, &[]),
                0,
                "{name}: plain tokens"
            );
        }
    }
}

/// Keeps the events it is given.
#[derive(Default)]
struct Capture(Mutex<Vec<Event>>);

impl EventSink for Capture {
    fn apply_event(&self, event: Event) -> Result<(), Error> {
        self.0.lock().unwrap().push(event);
        Ok(())
    }
}

/// The fully decoded batch (every published key kept, reduced at conversion) converts to
/// exactly the events the apply path (keys reduced while decoding) submits.
#[test]
fn both_decoding_paths_fold_the_same_keys() {
    for (name, format, ..) in CASES {
        let options = ApplyOptions::default();
        let full = to_events(
            &decode_batch(format, &fixture(name)).unwrap(),
            WORKER,
            0,
            &options,
        );
        let sink = Capture::default();
        apply_payload(&sink, format, 5, Some(0), &fixture(name), &options).unwrap();
        let streamed = sink.0.into_inner().unwrap();
        assert_eq!(streamed.len(), 2, "{name}");
        assert_eq!(streamed, full.events, "{name}");
    }
}

#[test]
fn the_skip_policy_still_skips_salted_and_multimodal_stores() {
    let skip = ApplyOptions {
        extras: ExtrasPolicy::Skip,
        ..ApplyOptions::default()
    };
    for (name, format, lora, salt, has_image) in CASES {
        let (indexer, skipped, rejected) = indexed(format, name, &skip);
        let own: &[MultimodalSpan<'_>] = if has_image { &image("image-i") } else { &[] };
        let namespaced = !salt.is_empty() || has_image;
        let want_depth = if namespaced { 0 } else { 3 };
        assert_eq!(depth(&indexer, &ns(lora, salt), own), want_depth, "{name}");
        assert_eq!(skipped.unhashable > 0, namespaced, "{name}: {skipped:?}");
        // vLLM's continuation store of a salted request carries no key (the salt is on block
        // 0 only): it is not skipped, but its parent was, so the index rejects it.
        let continuation_rejected = name == "vllm_salt";
        assert_eq!(rejected, u64::from(continuation_rejected), "{name}");
    }
}
