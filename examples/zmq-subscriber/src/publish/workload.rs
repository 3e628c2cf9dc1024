//! A workload file (docs/contract.md, section 4) turned into engine batches: each selected
//! publisher's events, in workload order, grouped into msgpack `KVEventBatch`es of at most
//! `per_batch` events (map-form events, as vLLM and SGLang send them), and the workload's
//! queries as `POST /route` bodies.
//!
//! A workload names blocks by arbitrary local hashes; an engine sends the tokens. Each local
//! hash `l` stands for the block of tokens [`tokens_for`]`(l)` (a splitmix64 sequence seeded
//! with `l`), so equal local hashes give equal tokens and the library hashes them alike.

use std::collections::HashMap;
use std::io::BufRead;

use kvidx::engine::Format;
use serde_json::Value;

/// One publisher's batches, in sequence order (sequence = index).
pub type Batches = Vec<Vec<u8>>;

/// The tokens standing for the block with workload local hash `local` (`block_size` tokens).
pub fn tokens_for(local: u64, block_size: usize) -> Vec<u32> {
    let mut x = local;
    (0..block_size)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as u32
        })
        .collect()
}

/// What a workload file gives the publishers.
pub struct Converted {
    /// Per selected `(worker, dp_rank)`, its batches.
    pub batches: HashMap<(u64, u32), Batches>,
    /// Events of workers no publisher was given (not sent).
    pub unselected_events: u64,
    /// The `match` queries as `{"token_ids":[...]}` lines.
    pub queries: Vec<String>,
}

/// How to encode the batches.
#[derive(Debug, Clone, Copy)]
pub struct Encoding {
    /// `vllm` (hashes as unsigned integers) or `sglang` (as signed 64-bit integers).
    pub format: Format,
    /// Tokens per block.
    pub block_size: usize,
    /// Most events in one batch.
    pub per_batch: usize,
}

/// Reads the workload and encodes the events of the `selected` publishers.
pub fn convert(
    reader: impl BufRead,
    selected: &[(u64, u32)],
    enc: Encoding,
) -> Result<Converted, String> {
    let mut pending: HashMap<(u64, u32), Vec<Value>> =
        selected.iter().map(|&k| (k, Vec::new())).collect();
    let mut out = Converted {
        batches: selected.iter().map(|&k| (k, Vec::new())).collect(),
        unselected_events: 0,
        queries: Vec::new(),
    };
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| format!("line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let op: Value = serde_json::from_str(&line).map_err(|e| format!("line {}: {e}", i + 1))?;
        let kind = op["op"].as_str().unwrap_or_default();
        if kind == "match" {
            let locals =
                u64s(&op["local_hashes"]).ok_or(format!("line {}: local_hashes", i + 1))?;
            let tokens: Vec<String> = locals
                .iter()
                .flat_map(|&l| tokens_for(l, enc.block_size))
                .map(|t| t.to_string())
                .collect();
            out.queries
                .push(format!("{{\"token_ids\":[{}]}}", tokens.join(",")));
            continue;
        }
        if !matches!(kind, "stored" | "removed" | "cleared") {
            return Err(format!("line {}: unknown op {kind:?}", i + 1));
        }
        let worker = op["worker"]
            .as_u64()
            .ok_or(format!("line {}: worker", i + 1))?;
        let rank = op["dp_rank"].as_u64().unwrap_or(0) as u32;
        let Some(queue) = pending.get_mut(&(worker, rank)) else {
            out.unselected_events += 1;
            continue;
        };
        queue.push(op);
        if queue.len() >= enc.per_batch {
            let batch =
                encode_batch(queue, rank, enc).map_err(|e| format!("line {}: {e}", i + 1))?;
            out.batches.get_mut(&(worker, rank)).unwrap().push(batch);
            queue.clear();
        }
    }
    for (key, queue) in pending {
        if !queue.is_empty() {
            let batch = encode_batch(&queue, key.1, enc)?;
            out.batches.get_mut(&key).unwrap().push(batch);
        }
    }
    Ok(out)
}

fn u64s(v: &Value) -> Option<Vec<u64>> {
    v.as_array()?.iter().map(Value::as_u64).collect()
}

/// `[ts, [event, ...], dp_rank]` with map-form events.
fn encode_batch(ops: &[Value], rank: u32, enc: Encoding) -> Result<Vec<u8>, String> {
    let mut m = Msgpack::default();
    m.array(3);
    m.float(ops[0]["t"].as_f64().unwrap_or(0.0) / 1000.0);
    m.array(ops.len());
    let hash = |m: &mut Msgpack, h: u64| match enc.format {
        Format::Sglang => m.int(h as i64),
        _ => m.uint(h),
    };
    for op in ops {
        match op["op"].as_str() {
            Some("stored") => {
                let blocks = op["blocks"].as_array().ok_or("stored: blocks")?;
                let pairs: Vec<Vec<u64>> = blocks
                    .iter()
                    .map(|b| u64s(b).filter(|p| p.len() == 2))
                    .collect::<Option<_>>()
                    .ok_or("stored: blocks are [local, seq] pairs")?;
                m.map(7);
                m.str("type");
                m.str("BlockStored");
                m.str("block_hashes");
                m.array(pairs.len());
                for p in &pairs {
                    hash(&mut m, p[1]);
                }
                m.str("parent_block_hash");
                match op["parent"].as_u64() {
                    Some(p) => hash(&mut m, p),
                    None => m.nil(),
                }
                m.str("token_ids");
                m.array(pairs.len() * enc.block_size);
                for p in &pairs {
                    for t in tokens_for(p[0], enc.block_size) {
                        m.uint(u64::from(t));
                    }
                }
                m.str("block_size");
                m.uint(enc.block_size as u64);
                m.str("lora_id");
                m.nil();
                m.str("medium");
                m.str("GPU");
            }
            Some("removed") => {
                let hashes = u64s(&op["seq_hashes"]).ok_or("removed: seq_hashes")?;
                m.map(3);
                m.str("type");
                m.str("BlockRemoved");
                m.str("block_hashes");
                m.array(hashes.len());
                for h in hashes {
                    hash(&mut m, h);
                }
                m.str("medium");
                m.str("GPU");
            }
            _ => {
                m.map(1);
                m.str("type");
                m.str("AllBlocksCleared");
            }
        }
    }
    m.uint(u64::from(rank));
    Ok(m.0)
}

/// The few msgpack shapes a batch needs.
#[derive(Default)]
struct Msgpack(Vec<u8>);

impl Msgpack {
    fn uint(&mut self, v: u64) {
        match v {
            0..=0x7f => self.0.push(v as u8),
            0x80..=0xff => self.0.extend_from_slice(&[0xcc, v as u8]),
            0x100..=0xffff => {
                self.0.push(0xcd);
                self.0.extend_from_slice(&(v as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                self.0.push(0xce);
                self.0.extend_from_slice(&(v as u32).to_be_bytes());
            }
            _ => {
                self.0.push(0xcf);
                self.0.extend_from_slice(&v.to_be_bytes());
            }
        }
    }
    fn int(&mut self, v: i64) {
        if v >= 0 {
            self.uint(v as u64);
        } else {
            self.0.push(0xd3);
            self.0.extend_from_slice(&v.to_be_bytes());
        }
    }
    fn float(&mut self, v: f64) {
        self.0.push(0xcb);
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn nil(&mut self) {
        self.0.push(0xc0);
    }
    fn header(&mut self, len: usize, fix: u8, tag16: u8) {
        if len < 16 {
            self.0.push(fix | len as u8);
        } else if len <= 0xffff {
            self.0.push(tag16);
            self.0.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            self.0.push(tag16 + 1);
            self.0.extend_from_slice(&(len as u32).to_be_bytes());
        }
    }
    fn array(&mut self, len: usize) {
        self.header(len, 0x90, 0xdc);
    }
    fn map(&mut self, len: usize) {
        self.header(len, 0x80, 0xde);
    }
    fn str(&mut self, s: &str) {
        assert!(s.len() < 32, "short strings only");
        self.0.push(0xa0 | s.len() as u8);
        self.0.extend_from_slice(s.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvidx::engine::{EngineFeed, FeedConfig};
    use kvidx::hashing::hash_tokens;
    use kvidx::{Config, Indexer};

    const WORKLOAD: &str = r#"{"t":0,"op":"stored","worker":7,"dp_rank":0,"event_id":0,"parent":null,"blocks":[[11,11],[12,907],[13,908]]}
{"t":1,"op":"stored","worker":9,"dp_rank":0,"event_id":0,"parent":null,"blocks":[[11,11]]}
{"t":2,"op":"removed","worker":7,"dp_rank":0,"event_id":1,"seq_hashes":[908]}
{"t":3,"op":"match","local_hashes":[11,12,13]}
"#;

    /// The batches decode with the engine feed into the workload's state, in both formats,
    /// and the query's tokens hash to the blocks the batches stored.
    #[test]
    fn batches_apply_to_the_workloads_state_and_queries_hit_them() {
        for format in [Format::Vllm, Format::Sglang] {
            let enc = Encoding {
                format,
                block_size: 16,
                per_batch: 1,
            };
            let c = convert(WORKLOAD.as_bytes(), &[(7, 0)], enc).unwrap();
            assert_eq!(c.unselected_events, 1);
            let batches = &c.batches[&(7, 0)];
            assert_eq!(batches.len(), 2, "2 events, 1 per batch");
            let indexer = Indexer::new(Config::default()).unwrap();
            let mut feed = EngineFeed::new(FeedConfig::new(format));
            for (seq, b) in batches.iter().enumerate() {
                let r = feed
                    .apply_message(&indexer, 7, Some(0), Some(seq as u64), b)
                    .unwrap();
                assert_eq!(r.skipped.total(), 0, "{format:?}");
            }
            indexer.flush().unwrap();
            let body: Value = serde_json::from_str(&c.queries[0]).unwrap();
            let tokens: Vec<u32> = body["token_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap() as u32)
                .collect();
            let m = indexer.find_matches(&hash_tokens(&tokens, 16));
            assert_eq!(m.len(), 1, "{format:?}: {m:?}");
            assert_eq!((m[0].worker_id, m[0].depth), (7, 2), "{format:?}");
        }
    }
}
