//! Engine decoding memory, measured: a counting global allocator records the peak of live
//! heap bytes while a payload is decoded (`decode_batch`) and while it is decoded and
//! converted for an indexer (`apply_payload` into a sink that drops the events), per payload
//! byte, for realistic batches and for the shapes that cost the most per byte (1-byte
//! fixints everywhere, tiny events). Also: payloads above `MAX_PAYLOAD_BYTES` are refused
//! before anything is allocated.
//!
//! `ENGINE_MEMORY_REPORT=1` prints the figures. `scripts/test-engine.sh` also runs
//! `largest_payload_decodes_under_an_address_space_limit` under `ulimit -v`.

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{peak_during, SERIAL};

use kvidx::engine::{
    apply_payload, decode_batch, ApplyOptions, DecodeError, EventSink, Format, MAX_PAYLOAD_BYTES,
};
use kvidx::{Error, Event};

/// Drops every event: isolates decoding and conversion from the index's own growth.
struct NullSink;

impl EventSink for NullSink {
    fn apply_event(&self, event: Event) -> Result<(), Error> {
        drop(event);
        Ok(())
    }
}

// A few msgpack writers, enough for the payload shapes below.
fn array(out: &mut Vec<u8>, len: usize) {
    if len < 16 {
        out.push(0x90 | len as u8);
    } else {
        out.push(0xdd);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn str(out: &mut Vec<u8>, s: &str) {
    assert!(s.len() < 32);
    out.push(0xa0 | s.len() as u8);
    out.extend_from_slice(s.as_bytes());
}

fn uint(out: &mut Vec<u8>, v: u64) {
    match v {
        0..=0x7f => out.push(v as u8),
        0x80..=0xffff => {
            out.push(0xcd);
            out.extend_from_slice(&(v as u16).to_be_bytes());
        }
        _ => {
            out.push(0xcf);
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

/// `[ts, [events...]]` around the events written by `events` (`count` of them).
fn batch(count: usize, events: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = vec![0x92, 0x00];
    array(&mut out, count);
    events(&mut out);
    out
}

/// Realistic: vLLM array events of 16 blocks of 16 tokens, uint64 hashes, 2-byte tokens.
fn realistic(events: usize) -> Vec<u8> {
    batch(events, |out| {
        for e in 0..events {
            array(out, 5);
            str(out, "BlockStored");
            array(out, 16);
            for b in 0..16u64 {
                uint(out, u64::MAX - (e as u64) * 16 - b);
            }
            out.push(0xc0);
            array(out, 256);
            for t in 0..256u64 {
                uint(out, 1000 + (t * 7919) % 30000);
            }
            uint(out, 16);
        }
    })
}

/// One store of `n` blocks of one token each, every hash and token a 1-byte fixint.
fn fixint_store(n: usize) -> Vec<u8> {
    batch(1, |out| {
        array(out, 5);
        str(out, "BlockStored");
        array(out, n);
        out.extend((0..n).map(|i| (i % 128) as u8));
        out.push(0xc0);
        array(out, n);
        out.extend((0..n).map(|i| (i % 100) as u8));
        uint(out, 1);
    })
}

/// One removal of `n` fixint hashes.
fn fixint_removal(n: usize) -> Vec<u8> {
    batch(1, |out| {
        array(out, 2);
        str(out, "BlockRemoved");
        array(out, n);
        out.extend((0..n).map(|i| (i % 128) as u8));
    })
}

/// `n` events `[""]` (an unknown, empty tag: 2 bytes each).
fn tiny_unknown(n: usize) -> Vec<u8> {
    batch(n, |out| {
        for _ in 0..n {
            out.extend_from_slice(&[0x91, 0xa0]);
        }
    })
}

/// `n` events `["AllBlocksCleared"]`.
fn clears(n: usize) -> Vec<u8> {
    batch(n, |out| {
        for _ in 0..n {
            array(out, 1);
            str(out, "AllBlocksCleared");
        }
    })
}

/// The head of a one-block store with `fields` array elements (tag included): block hash 5,
/// no parent, token 9, block size 1; the caller writes the fields after `block_size`.
fn one_block_store(out: &mut Vec<u8>, fields: usize) {
    array(out, fields);
    str(out, "BlockStored");
    array(out, 1);
    uint(out, 5);
    out.push(0xc0); // parent
    array(out, 1);
    uint(out, 9); // tokens
    uint(out, 1); // block_size
}

/// One store whose `extra_keys` is `n` nils (1 byte each, one list entry each).
fn nil_extra_keys(n: usize) -> Vec<u8> {
    batch(1, |out| {
        one_block_store(out, 9);
        out.extend_from_slice(&[0xc0, 0xc0, 0xc0]); // lora_id, medium, lora_name
        array(out, n);
        out.extend(std::iter::repeat(0xc0).take(n));
    })
}

/// One store whose single `extra_keys` entry lists `n` 1-byte ints (each an opaque key).
fn int_extra_keys(n: usize) -> Vec<u8> {
    batch(1, |out| {
        one_block_store(out, 9);
        out.extend_from_slice(&[0xc0, 0xc0, 0xc0]); // lora_id, medium, lora_name
        array(out, 1);
        array(out, n);
        out.extend(std::iter::repeat(0x01).take(n));
    })
}

/// One store whose `lookahead_token_ids` is `n` empty lists (vLLM field 15).
fn empty_lookahead(n: usize) -> Vec<u8> {
    batch(1, |out| {
        one_block_store(out, 16);
        out.extend(std::iter::repeat(0xc0).take(10)); // lora_id .. session_id
        array(out, n);
        out.extend(std::iter::repeat(0x90).take(n));
    })
}

/// Bytes of peak heap per payload byte: (decode_batch, apply_payload into a null sink).
fn ratios(payload: &[u8]) -> (f64, f64) {
    let (decoded, decode_peak) = peak_during(|| decode_batch(Format::Vllm, payload));
    decoded.expect("the payload decodes");
    let options = ApplyOptions {
        group: None,
        ..ApplyOptions::default()
    };
    let (applied, apply_peak) =
        peak_during(|| apply_payload(&NullSink, Format::Vllm, 1, Some(0), payload, &options));
    applied.expect("the payload applies");
    let per_byte = |peak: usize| peak as f64 / payload.len() as f64;
    (per_byte(decode_peak), per_byte(apply_peak))
}

#[test]
fn decode_memory_is_a_small_constant_of_the_payload() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let report = std::env::var_os("ENGINE_MEMORY_REPORT").is_some();
    let n = 1 << 20;
    let cases: [(&str, Vec<u8>, f64, f64); 8] = [
        // (name, payload, bound for decode_batch, bound for apply), bytes per payload byte.
        ("realistic", realistic(1000), 2.0, 0.5),
        ("fixint store", fixint_store(n), 6.5, 14.5),
        ("fixint removal", fixint_removal(n), 8.5, 8.5),
        ("tiny unknown events", tiny_unknown(n), 12.5, 0.5),
        // One 72-byte event per 12-byte clear (8 of them the event's storage tier).
        ("clears", clears(n), 1.5, 6.5),
        ("nil extra_keys", nil_extra_keys(n), 24.5, 0.5),
        ("int extra_keys", int_extra_keys(n), 32.5, 0.5),
        ("empty lookahead", empty_lookahead(n), 24.5, 0.5),
    ];
    for (name, payload, decode_bound, apply_bound) in &cases {
        let (decode, apply) = ratios(payload);
        if report {
            eprintln!(
                "{name:>20}: {:>9} bytes, decode_batch {decode:5.2} B/B, apply {apply:5.2} B/B",
                payload.len()
            );
        }
        assert!(
            decode <= *decode_bound,
            "{name}: decode_batch {decode:.2} B/B"
        );
        assert!(apply <= *apply_bound, "{name}: apply {apply:.2} B/B");
    }
}

#[test]
fn payloads_above_the_maximum_are_refused_before_any_allocation() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut payload = fixint_removal(16);
    payload.resize(MAX_PAYLOAD_BYTES + 1, 0);
    let (result, peak) = peak_during(|| decode_batch(Format::Vllm, &payload));
    assert_eq!(
        result,
        Err(DecodeError::TooLarge {
            len: MAX_PAYLOAD_BYTES + 1,
            max: MAX_PAYLOAD_BYTES
        })
    );
    assert_eq!(peak, 0);
    let (result, _) = peak_during(|| {
        apply_payload(
            &NullSink,
            Format::Vllm,
            1,
            None,
            &payload,
            &ApplyOptions::default(),
        )
    });
    assert!(result.is_err());
}

/// The worst shape at the largest accepted size; `scripts/test-engine.sh` runs it under a
/// 2 GiB address-space limit (`ulimit -v`), where an unbounded decoder aborted the process.
#[test]
fn largest_payload_decodes_under_an_address_space_limit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut payload = fixint_removal(MAX_PAYLOAD_BYTES - 64);
    assert!(payload.len() <= MAX_PAYLOAD_BYTES);
    let (report, _) = peak_during(|| {
        apply_payload(
            &NullSink,
            Format::Vllm,
            1,
            Some(0),
            &payload,
            &ApplyOptions::default(),
        )
    });
    assert_eq!(report.expect("applies").events_submitted, 1);
    payload.truncate(0);
}
