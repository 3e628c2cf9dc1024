//! Workload files (docs/contract.md section 4): JSON Lines, one operation per line, in issue order.
//!
//! ```text
//! {"t":0,"op":"stored","worker":3,"dp_rank":0,"event_id":0,"parent":null,"blocks":[[11,11],[12,907]]}
//! {"t":5,"op":"removed","worker":3,"dp_rank":0,"event_id":1,"seq_hashes":[907]}
//! {"t":5,"op":"cleared","worker":3,"dp_rank":0,"event_id":2}
//! {"t":9,"op":"match","local_hashes":[11,12,13]}
//! ```
//!
//! Writing produces exactly this shape (keys in this order, no spaces) so the same file can be
//! fed to any other index implementation; reading accepts any key order and whitespace.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use kvidx::{Block, Event, EventData, Tier, Worker};
use serde::Deserialize;

/// One operation of a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// An engine event to apply.
    Event(Event),
    /// A `find_matches` query over local hashes.
    Match(Vec<u64>),
}

/// An operation and its time in milliseconds since the start of the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedOp {
    /// Milliseconds since the start of the trace.
    pub t: u64,
    /// What to do.
    pub op: Op,
}

/// Counts of a workload, used by the replay report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Stored events.
    pub stored: u64,
    /// Removed events.
    pub removed: u64,
    /// Cleared events.
    pub cleared: u64,
    /// Match queries.
    pub matches: u64,
    /// Blocks named by Stored events plus names in Removed events.
    pub block_ops: u64,
    /// Events that name a storage tier: Stored off the device, Removed from one tier.
    pub tiered: u64,
}

impl Counts {
    /// Counts the operations of a workload.
    pub fn of(ops: &[TimedOp]) -> Self {
        let mut c = Counts::default();
        for op in ops {
            match &op.op {
                Op::Match(_) => c.matches += 1,
                Op::Event(e) => match &e.data {
                    EventData::Stored { blocks, tier, .. } => {
                        c.stored += 1;
                        c.block_ops += blocks.len() as u64;
                        c.tiered += u64::from(*tier != Tier::Device);
                    }
                    EventData::Removed { seq_hashes, tier } => {
                        c.removed += 1;
                        c.block_ops += seq_hashes.len() as u64;
                        c.tiered += u64::from(tier.is_some());
                    }
                    EventData::Cleared => c.cleared += 1,
                },
            }
        }
        c
    }

    /// Events of every kind.
    pub fn events(&self) -> u64 {
        self.stored + self.removed + self.cleared
    }

    /// Events plus queries.
    pub fn ops(&self) -> u64 {
        self.events() + self.matches
    }
}

fn write_list(out: &mut impl Write, values: impl Iterator<Item = u64>) -> std::io::Result<()> {
    out.write_all(b"[")?;
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write!(out, "{v}")?;
    }
    out.write_all(b"]")
}

/// Writes one operation as one line (with its newline).
pub fn write_op(out: &mut impl Write, op: &TimedOp) -> std::io::Result<()> {
    write!(out, "{{\"t\":{},", op.t)?;
    match &op.op {
        Op::Match(locals) => {
            out.write_all(b"\"op\":\"match\",\"local_hashes\":")?;
            write_list(out, locals.iter().copied())?;
        }
        Op::Event(e) => {
            let kind = match e.data {
                EventData::Stored { .. } => "stored",
                EventData::Removed { .. } => "removed",
                EventData::Cleared => "cleared",
            };
            write!(
                out,
                "\"op\":\"{kind}\",\"worker\":{},\"dp_rank\":{},\"event_id\":{}",
                e.worker.worker_id, e.worker.dp_rank, e.event_id
            )?;
            match &e.data {
                EventData::Stored {
                    parent,
                    blocks,
                    tier,
                } => {
                    match parent {
                        Some(p) => write!(out, ",\"parent\":{p},\"blocks\":[")?,
                        None => out.write_all(b",\"parent\":null,\"blocks\":[")?,
                    }
                    for (i, b) in blocks.iter().enumerate() {
                        if i > 0 {
                            out.write_all(b",")?;
                        }
                        write!(out, "[{},{}]", b.local_hash, b.seq_hash)?;
                    }
                    out.write_all(b"]")?;
                    if *tier != Tier::Device {
                        write!(out, ",\"tier\":\"{}\"", tier.name())?;
                    }
                }
                EventData::Removed { seq_hashes, tier } => {
                    out.write_all(b",\"seq_hashes\":")?;
                    write_list(out, seq_hashes.iter().copied())?;
                    if let Some(tier) = tier {
                        write!(out, ",\"tier\":\"{}\"", tier.name())?;
                    }
                }
                EventData::Cleared => {}
            }
        }
    }
    out.write_all(b"}\n")
}

/// Writes a whole workload to a file.
pub fn write_workload(path: &Path, ops: &[TimedOp]) -> Result<(), String> {
    let file = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let mut out = BufWriter::new(file);
    for op in ops {
        write_op(&mut out, op).map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    out.flush()
        .map_err(|e| format!("write {}: {e}", path.display()))
}

/// One line as found in a file; which fields are required depends on `op`.
#[derive(Deserialize)]
struct Line {
    t: serde_json::Number,
    op: String,
    worker: Option<u64>,
    dp_rank: Option<u32>,
    event_id: Option<u64>,
    parent: Option<u64>,
    blocks: Option<Vec<[u64; 2]>>,
    seq_hashes: Option<Vec<u64>>,
    local_hashes: Option<Vec<u64>>,
    /// The storage tier of a store or removal (absent: the device for a store, every tier
    /// for a removal).
    tier: Option<String>,
}

/// Parses one line of a workload file.
pub fn parse_op(text: &str) -> Result<TimedOp, String> {
    let line: Line = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let t = match (line.t.as_u64(), line.t.as_f64()) {
        (Some(t), _) => t,
        (None, Some(t)) if t >= 0.0 => t.round() as u64,
        _ => return Err(format!("bad time {}", line.t)),
    };
    let tier = match line.tier.as_deref() {
        None => None,
        Some(name) => Some(Tier::from_name(name).ok_or_else(|| format!("unknown tier {name:?}"))?),
    };
    let worker = || -> Result<(Worker, u64), String> {
        let id = line.worker.ok_or("missing \"worker\"")?;
        let event_id = line.event_id.ok_or("missing \"event_id\"")?;
        Ok((Worker::new(id, line.dp_rank.unwrap_or(0)), event_id))
    };
    let op = match line.op.as_str() {
        "match" => Op::Match(
            line.local_hashes
                .clone()
                .ok_or("missing \"local_hashes\"")?,
        ),
        "stored" => {
            let (w, id) = worker()?;
            let blocks = line.blocks.as_ref().ok_or("missing \"blocks\"")?;
            let blocks = blocks.iter().map(|[l, s]| Block::new(*l, *s)).collect();
            Op::Event(Event::stored_on(
                w,
                id,
                line.parent,
                blocks,
                tier.unwrap_or_default(),
            ))
        }
        "removed" => {
            let (w, id) = worker()?;
            let names = line.seq_hashes.clone().ok_or("missing \"seq_hashes\"")?;
            Op::Event(match tier {
                None => Event::removed(w, id, names),
                Some(tier) => Event::removed_from(w, id, names, tier),
            })
        }
        "cleared" => {
            let (w, id) = worker()?;
            Op::Event(Event::cleared(w, id))
        }
        other => return Err(format!("unknown op {other:?}")),
    };
    Ok(TimedOp { t, op })
}

/// Reads a whole workload file; blank lines are skipped, errors name the line.
pub fn read_workload(path: &Path) -> Result<Vec<TimedOp>, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut ops = Vec::new();
    for (index, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let op = parse_op(&line).map_err(|e| format!("{}:{}: {e}", path.display(), index + 1))?;
        ops.push(op);
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTRACT_EXAMPLE: &str = r#"{"t":0,"op":"stored","worker":3,"dp_rank":0,"event_id":0,"parent":null,"blocks":[[11,11],[12,907]]}
{"t":5,"op":"removed","worker":3,"dp_rank":0,"event_id":1,"seq_hashes":[907]}
{"t":5,"op":"cleared","worker":3,"dp_rank":0,"event_id":2}
{"t":9,"op":"match","local_hashes":[11,12,13]}
"#;

    fn to_text(ops: &[TimedOp]) -> String {
        let mut buf = Vec::new();
        for op in ops {
            write_op(&mut buf, op).unwrap();
        }
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn tiers_are_written_only_when_not_the_default_and_read_back() {
        let w = Worker::new(3, 0);
        let ops = vec![
            TimedOp {
                t: 0,
                op: Op::Event(Event::stored_on(
                    w,
                    0,
                    None,
                    vec![Block::new(11, 11)],
                    Tier::Host,
                )),
            },
            TimedOp {
                t: 1,
                op: Op::Event(Event::removed_from(w, 1, vec![11], Tier::Device)),
            },
            TimedOp {
                t: 2,
                op: Op::Event(Event::removed(w, 2, vec![11])),
            },
        ];
        let text = to_text(&ops);
        assert_eq!(
            text,
            concat!(
                r#"{"t":0,"op":"stored","worker":3,"dp_rank":0,"event_id":0,"parent":null,"blocks":[[11,11]],"tier":"host"}"#,
                "\n",
                r#"{"t":1,"op":"removed","worker":3,"dp_rank":0,"event_id":1,"seq_hashes":[11],"tier":"device"}"#,
                "\n",
                r#"{"t":2,"op":"removed","worker":3,"dp_rank":0,"event_id":2,"seq_hashes":[11]}"#,
                "\n"
            )
        );
        let back: Vec<TimedOp> = text.lines().map(|l| parse_op(l).unwrap()).collect();
        assert_eq!(back, ops);
        let bad = r#"{"t":0,"op":"removed","worker":3,"event_id":0,"seq_hashes":[1],"tier":"GPU"}"#;
        assert_eq!(parse_op(bad).unwrap_err(), "unknown tier \"GPU\"");
    }

    #[test]
    fn contract_example_reads_and_writes_back_byte_for_byte() {
        let ops: Vec<TimedOp> = CONTRACT_EXAMPLE
            .lines()
            .map(|l| parse_op(l).unwrap())
            .collect();
        let w = Worker::new(3, 0);
        assert_eq!(
            ops[0].op,
            Op::Event(Event::stored(
                w,
                0,
                None,
                vec![Block::new(11, 11), Block::new(12, 907)]
            ))
        );
        assert_eq!(ops[1].op, Op::Event(Event::removed(w, 1, vec![907])));
        assert_eq!(ops[2].op, Op::Event(Event::cleared(w, 2)));
        assert_eq!(
            ops[3],
            TimedOp {
                t: 9,
                op: Op::Match(vec![11, 12, 13])
            }
        );
        assert_eq!(to_text(&ops), CONTRACT_EXAMPLE);
    }

    #[test]
    fn full_range_hashes_and_parents_round_trip_through_a_file() {
        let w = Worker::new(u64::MAX, 7);
        let ops = vec![
            TimedOp {
                t: 1,
                op: Op::Event(Event::stored(
                    w,
                    0,
                    Some(u64::MAX - 1),
                    vec![Block::new(u64::MAX, 1 << 63)],
                )),
            },
            TimedOp {
                t: 2,
                op: Op::Match(vec![]),
            },
            TimedOp {
                t: 3,
                op: Op::Event(Event::removed(w, 1, vec![])),
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.jsonl");
        write_workload(&path, &ops).unwrap();
        assert_eq!(read_workload(&path).unwrap(), ops);
    }

    #[test]
    fn lenient_reading_and_clear_errors() {
        let op = parse_op(r#"{ "op": "cleared", "event_id": 4, "worker": 2, "t": 1.6 }"#).unwrap();
        assert_eq!(
            op,
            TimedOp {
                t: 2,
                op: Op::Event(Event::cleared(Worker::new(2, 0), 4))
            }
        );
        assert!(parse_op(r#"{"t":0,"op":"stored","worker":1,"event_id":0}"#)
            .unwrap_err()
            .contains("blocks"));
        assert!(parse_op(r#"{"t":0,"op":"evicted"}"#)
            .unwrap_err()
            .contains("evicted"));
    }

    #[test]
    fn counts_add_up() {
        let ops: Vec<TimedOp> = CONTRACT_EXAMPLE
            .lines()
            .map(|l| parse_op(l).unwrap())
            .collect();
        let c = Counts::of(&ops);
        assert_eq!((c.stored, c.removed, c.cleared, c.matches), (1, 1, 1, 1));
        assert_eq!((c.block_ops, c.events(), c.ops(), c.tiered), (3, 3, 4, 0));
        let w = Worker::new(0, 0);
        let tiered = [
            Event::stored_on(w, 0, None, vec![Block::new(1, 1)], Tier::Host),
            Event::stored_on(w, 1, None, vec![Block::new(2, 2)], Tier::Device),
            Event::removed_from(w, 2, vec![1], Tier::Device),
            Event::removed(w, 3, vec![2]),
        ]
        .map(|e| TimedOp {
            t: 0,
            op: Op::Event(e),
        });
        assert_eq!(Counts::of(&tiered).tiered, 2);
    }
}
