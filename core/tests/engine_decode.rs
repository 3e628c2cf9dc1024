//! Byte-exact engine payloads (tests/fixtures/engine/, written by
//! scripts/gen_engine_fixtures.py) decoded field by field, plus the facts file's annotated
//! payload typed in by hand.

use kvidx::engine::{
    decode_batch, BlockRemoved, BlockStored, DecodeError, DecodedBatch, EngineEvent, ExtraKey,
    Format, Medium,
};

const H1: u64 = 8866452693264111234;
const H2: u64 = 807986237951177663;
const NEG: i64 = -8070450532247928832;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../tests/fixtures/engine/{name}.msgpack",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn decode(format: Format, name: &str) -> DecodedBatch {
    decode_batch(format, &fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn stored(event: &EngineEvent) -> &BlockStored {
    match event {
        EngineEvent::BlockStored(s) => s,
        other => panic!("expected BlockStored, got {other:?}"),
    }
}

fn removed(event: &EngineEvent) -> &BlockRemoved {
    match event {
        EngineEvent::BlockRemoved(r) => r,
        other => panic!("expected BlockRemoved, got {other:?}"),
    }
}

/// The chain-A store common to the vLLM generations, as far as every generation has it.
fn assert_stored_a(s: &BlockStored, hashes: [u64; 2]) {
    assert_eq!(s.block_hashes, hashes);
    assert_eq!(s.parent_block_hash, None);
    assert_eq!(s.token_ids, (1..=8).collect::<Vec<u32>>());
    assert_eq!(s.block_size, 4);
    assert_eq!(s.lora_id, None);
}

fn assert_stored_b(s: &BlockStored, hash: u64, parent: u64) {
    assert_eq!(s.block_hashes, [hash]);
    assert_eq!(s.parent_block_hash, Some(parent));
    assert_eq!(s.token_ids, [9, 10, 11, 12]);
    assert_eq!(s.block_size, 4);
}

/// Annotated example of the facts file (section 2.9), typed in from its hex dump.
const ANNOTATED: &str = concat!(
    "93cb3ff800000000000093",
    "de000ba474797065ab426c6f636b53746f726564",
    "ac626c6f636b5f68617368657391cfffffffffffffffff",
    "b1706172656e745f626c6f636b5f68617368c0",
    "a9746f6b656e5f6964739401020304",
    "aa626c6f636b5f73697a6504",
    "a76c6f72615f6964c0",
    "a66d656469756da3475055",
    "a96c6f72615f6e616d65c0",
    "aa65787472615f6b65797391c0",
    "a967726f75705f69647800",
    "b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e",
    "84a474797065ac426c6f636b52656d6f766564ac626c6f636b5f6861736865739107",
    "a66d656469756da3475055a967726f75705f69647800",
    "81a474797065b0416c6c426c6f636b73436c6561726564",
    "00",
);

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn assert_annotated(batch: &DecodedBatch) {
    assert_eq!(batch.ts, 1.5);
    assert_eq!(batch.dp_rank, Some(0));
    assert_eq!(batch.events.len(), 3);
    let s = stored(&batch.events[0]);
    assert_eq!(
        *s,
        BlockStored {
            block_hashes: vec![u64::MAX],
            parent_block_hash: None,
            token_ids: vec![1, 2, 3, 4],
            block_size: 4,
            lora_id: None,
            medium: Some(Medium::Gpu),
            lora_name: None,
            extra_keys: Some(vec![None]),
            group_idx: Some(0),
            kv_cache_spec_kind: Some("full_attention".into()),
            ..BlockStored::default()
        }
    );
    assert_eq!(
        *removed(&batch.events[1]),
        BlockRemoved {
            block_hashes: vec![7],
            medium: Some(Medium::Gpu),
            group_idx: Some(0),
            ..BlockRemoved::default()
        }
    );
    assert_eq!(batch.events[2], EngineEvent::AllBlocksCleared);
}

#[test]
fn annotated_payload_from_the_facts_file() {
    let bytes = unhex(ANNOTATED);
    assert_eq!(
        bytes,
        fixture("vllm_annotated_0_33"),
        "generator matches the facts"
    );
    assert_annotated(&decode_batch(Format::Vllm, &bytes).unwrap());
    assert_annotated(&decode_batch(Format::TrtLlm, &bytes).unwrap());
}

#[test]
fn annotated_old_array_form() {
    let batch = decode(Format::Vllm, "vllm_annotated_array_gen12");
    assert_eq!(batch.events.len(), 1);
    let s = stored(&batch.events[0]);
    assert_eq!(s.block_hashes, [u64::MAX]);
    assert_eq!(s.token_ids, [1, 2, 3, 4]);
    assert_eq!(s.medium, Some(Medium::Gpu));
    assert_eq!(s.extra_keys, Some(vec![None]));
    assert_eq!(s.group_idx, Some(0));
    assert_eq!(s.kv_cache_spec_kind.as_deref(), Some("full_attention"));
    assert_eq!(s.kv_cache_spec_sliding_window, None);
}

#[test]
fn vllm_gen6_two_element_envelope_and_negative_hashes() {
    let batch = decode(Format::Vllm, "vllm_array_gen6_env2");
    assert_eq!(batch.ts, 1.25);
    assert_eq!(batch.dp_rank, None);
    assert_eq!(batch.events.len(), 4);
    let a = stored(&batch.events[0]);
    assert_stored_a(a, [NEG as u64, 42]);
    assert_eq!(a.medium, None, "gen 6 has no medium");
    assert_stored_b(stored(&batch.events[1]), u64::MAX, 42);
    let r = removed(&batch.events[2]);
    assert_eq!(r.block_hashes, [NEG as u64]);
    assert_eq!(r.medium, None);
    assert_eq!(batch.events[3], EngineEvent::AllBlocksCleared);
}

/// Generations 7 (+medium), 9 (+extra_keys), 10 (+group_idx), 12 (+kind, window).
#[test]
fn vllm_array_generations() {
    for (name, gen) in [
        ("vllm_array_gen7", 7),
        ("vllm_array_gen9", 9),
        ("vllm_array_gen10", 10),
        ("vllm_array_gen12", 12),
    ] {
        let batch = decode(Format::Vllm, name);
        assert_eq!(batch.ts, 1.5, "{name}");
        assert_eq!(batch.dp_rank, Some(0), "{name}");
        assert_eq!(batch.events.len(), 4, "{name}");
        let a = stored(&batch.events[0]);
        assert_stored_a(a, [H1, H2]);
        assert_eq!(a.medium, Some(Medium::Gpu), "{name}");
        assert_eq!(a.lora_name, None, "{name}");
        let keys = (gen >= 9).then(|| vec![None, None]);
        assert_eq!(a.extra_keys, keys, "{name}");
        assert_eq!(a.group_idx, (gen >= 10).then_some(0), "{name}");
        let kind = (gen >= 12).then(|| "full_attention".to_string());
        assert_eq!(a.kv_cache_spec_kind, kind, "{name}");
        assert_stored_b(stored(&batch.events[1]), u64::MAX, H2);
        let r = removed(&batch.events[2]);
        assert_eq!(r.block_hashes, [H1]);
        assert_eq!(r.medium, Some(Medium::Gpu));
        assert_eq!(r.group_idx, (gen >= 10).then_some(0), "{name}");
        assert_eq!(batch.events[3], EngineEvent::AllBlocksCleared);
    }
}

#[test]
fn vllm_gen8_lora() {
    let batch = decode(Format::Vllm, "vllm_array_gen8_lora");
    assert_eq!(batch.dp_rank, Some(1));
    let s = stored(&batch.events[0]);
    assert_eq!(s.lora_id, Some(3));
    assert_eq!(s.lora_name.as_deref(), Some("adapter-a"));
    assert_eq!(s.extra_keys, None);
    assert_eq!(removed(&batch.events[1]).medium, Some(Medium::Gpu));
}

#[test]
fn vllm_longer_arrays_ignore_trailing_fields() {
    let batch = decode(Format::Vllm, "vllm_array_longer");
    let s = stored(&batch.events[0]);
    assert_stored_a(s, [H1, H2]);
    assert_eq!(s.extra_keys, None);
    assert_eq!(s.group_idx, Some(0));
    assert_eq!(s.kv_cache_spec_kind.as_deref(), Some("full_attention"));
    assert_eq!(s.locality.as_deref(), Some("LOCAL"));
    assert_eq!(s.session_id.as_deref(), Some("sess"));
    let r = removed(&batch.events[1]);
    assert_eq!(r.block_hashes, [H1]);
}

#[test]
fn vllm_map_0_26() {
    let batch = decode(Format::Vllm, "vllm_map_0_26");
    assert_eq!(batch.ts, 4.5);
    assert_eq!(batch.events.len(), 4);
    let a = stored(&batch.events[0]);
    assert_stored_a(a, [H1, H2]);
    assert_eq!(a.extra_keys, Some(vec![None, None]));
    assert_eq!(a.kv_cache_spec_kind.as_deref(), Some("full_attention"));
    let b = stored(&batch.events[1]);
    assert_stored_b(b, u64::MAX, H2);
    assert_eq!(b.group_idx, Some(0));
    assert_eq!(b.extra_keys, None, "omitted when None");
    assert_eq!(removed(&batch.events[2]).group_idx, Some(0));
    assert_eq!(batch.events[3], EngineEvent::AllBlocksCleared);
}

#[test]
fn vllm_map_0_33_every_field_bin_hashes_unknowns() {
    let batch = decode(Format::Vllm, "vllm_map_0_33_full");
    assert_eq!(batch.ts, 5.75);
    assert_eq!(batch.dp_rank, Some(3));
    assert_eq!(batch.events.len(), 6);
    // Digest bytes 0..32: last 8 bytes big-endian.
    let d1 = u64::from_be_bytes([24, 25, 26, 27, 28, 29, 30, 31]);
    let d2 = u64::from_be_bytes([124, 125, 126, 127, 128, 129, 130, 131]);
    let a = stored(&batch.events[0]);
    assert_stored_a(a, [d1, d2]);
    assert_eq!(a.locality.as_deref(), Some("LOCAL"));
    assert_eq!(a.session_id.as_deref(), Some("s-1"));
    assert_eq!(a.ownership, None);
    let mm = stored(&batch.events[1]);
    assert_eq!(
        mm.extra_keys,
        Some(vec![Some(vec![
            ExtraKey::Multimodal {
                identifier: "mmhash-1".into(),
                offset: -2
            },
            ExtraKey::Text("salt-x".into()),
            ExtraKey::Digest(vec![1; 32]),
        ])])
    );
    let cpu = stored(&batch.events[2]);
    assert_eq!(cpu.medium, Some(Medium::Cpu), "case-insensitive");
    assert_eq!(cpu.ownership.as_deref(), Some("tier-2"));
    let sw = stored(&batch.events[3]);
    assert_eq!(sw.group_idx, Some(1));
    assert_eq!(sw.kv_cache_spec_kind.as_deref(), Some("sliding_window"));
    assert_eq!(sw.kv_cache_spec_sliding_window, Some(128));
    assert_eq!(sw.lookahead_token_ids, Some(vec![vec![13, 14]]));
    assert_eq!(
        batch.events[4],
        EngineEvent::Unknown {
            tag: "BlockUpdated".into()
        }
    );
    let r = removed(&batch.events[5]);
    assert_eq!(r.block_hashes, [d1]);
    assert_eq!(r.locality.as_deref(), Some("LOCAL"));
    assert_eq!(r.ownership.as_deref(), Some("o"));
}

#[test]
fn vllm_map_envelope() {
    let batch = decode(Format::Vllm, "vllm_map_envelope");
    assert_eq!(batch.ts, 6.0);
    assert_eq!(batch.dp_rank, Some(2));
    assert_stored_a(stored(&batch.events[0]), [H1, H2]);
    assert_eq!(batch.events[1], EngineEvent::AllBlocksCleared);
}

#[test]
fn sglang_map() {
    let batch = decode(Format::Sglang, "sglang_map");
    assert_eq!(batch.dp_rank, Some(1));
    assert_eq!(batch.events.len(), 6);
    let a = stored(&batch.events[0]);
    assert_stored_a(a, [NEG as u64, (-2i64) as u64]);
    assert_eq!(a.session_id.as_deref(), Some("sess-9"));
    let b = stored(&batch.events[1]);
    assert_stored_b(b, (-3i64) as u64, (-2i64) as u64);
    assert_eq!(b.medium, None, "omitted when None");
    assert_eq!(stored(&batch.events[2]).medium, Some(Medium::CpuPinned));
    assert_eq!(
        stored(&batch.events[3]).cache_salt.as_deref(),
        Some("salty")
    );
    assert_eq!(removed(&batch.events[4]).block_hashes, [NEG as u64]);
    assert_eq!(batch.events[5], EngineEvent::AllBlocksCleared);
}

#[test]
fn sglang_array_positions_differ_from_vllm() {
    let batch = decode(Format::Sglang, "sglang_array");
    let s = stored(&batch.events[0]);
    assert_eq!(s.lora_id, Some(5));
    assert_eq!(s.lora_name.as_deref(), Some("sg-lora"));
    assert_eq!(s.session_id.as_deref(), Some("sess-1"));
    assert_eq!(s.cache_salt, None);
    assert_eq!(removed(&batch.events[1]).block_hashes, [(-2i64) as u64]);
    // Read with vLLM's positions, SGLang's lora_name lands on vLLM's extra_keys: refused.
    // Engines never share a positional decoder.
    assert!(matches!(
        decode_batch(Format::Vllm, &fixture("sglang_array")),
        Err(DecodeError::Field {
            event: 0,
            field: "extra_keys",
            ..
        })
    ));
}

#[test]
fn trtllm_vllm_compatible_publisher() {
    let batch = decode(Format::TrtLlm, "trtllm_map");
    assert_eq!(batch.ts, 9.25);
    let a = stored(&batch.events[0]);
    assert_stored_a(a, [H1, H2]);
    assert_eq!(a.locality.as_deref(), Some("LOCAL"));
    assert_stored_b(stored(&batch.events[1]), u64::MAX, H2);
    assert_eq!(removed(&batch.events[2]).locality.as_deref(), Some("LOCAL"));
}

#[test]
fn malformed_payloads_are_errors() {
    let annotated = unhex(ANNOTATED);
    // Truncated anywhere.
    for cut in 0..annotated.len() {
        assert!(
            decode_batch(Format::Vllm, &annotated[..cut]).is_err(),
            "cut {cut}"
        );
    }
    let mut trailing = annotated.clone();
    trailing.push(0);
    assert_eq!(
        decode_batch(Format::Vllm, &trailing),
        Err(DecodeError::TrailingBytes(1))
    );
    // Envelope of one element; not an array.
    assert!(matches!(
        decode_batch(Format::Vllm, &[0x91, 0x00]),
        Err(DecodeError::Envelope(_))
    ));
    assert!(matches!(
        decode_batch(Format::Vllm, &[0x07]),
        Err(DecodeError::Envelope(_))
    ));
    // A token id that is a string: event 0, field token_ids.
    let bad = [
        0x93, 0x00, 0x91, 0x94, 0xab, b'B', b'l', b'o', b'c', b'k', b'S', b't', b'o', b'r', b'e',
        b'd', 0x91, 0x01, 0xc0, 0xa1, b'x', 0x00,
    ];
    let err = decode_batch(Format::Vllm, &bad).unwrap_err();
    assert!(
        matches!(
            err,
            DecodeError::Field {
                event: 0,
                field: "token_ids",
                ..
            }
        ),
        "{err}"
    );
    // A hostile length prefix: array32 of 2^32-1 elements in a 10-byte payload.
    let hostile = [0x93, 0x00, 0xdd, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00];
    assert!(decode_batch(Format::Vllm, &hostile).is_err());
    // Nesting deeper than the limit.
    let deep = vec![0x91; 10_000];
    assert!(matches!(
        decode_batch(Format::Vllm, &deep),
        Err(DecodeError::Msgpack(_))
    ));
}
