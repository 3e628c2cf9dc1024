//! The byte format of one worker's section body: node records in depth-first order (see
//! docs/snapshots.md). [`Exporter`] turns a backend's nodes into records; [`decode_nodes`]
//! checks and reads them back, computing every node's position and prefix identity.

use std::ops::Range;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::identity::{mix, IDENTITY_SEED};
use crate::model::{Tier, TierMask, TIERS};
use crate::Error;

/// The record flag: the names count is written (else the node has exactly one name).
const FLAG_NAMES: u64 = 1;
/// The record flag: the node's parent is an anchor (its identity and position are written).
const FLAG_ANCHOR: u64 = 2;
/// The record flag: a tier mask byte follows each name (else every name is on the device).
const FLAG_TIERS: u64 = 4;
/// Bits of a record tag taken by the flags; the rest is the count of records popped.
const FLAG_BITS: u32 = 3;

/// The tier set "device only".
const DEVICE: TierMask = Tier::Device.bit();

/// What a node continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExportParent {
    /// Nothing: the node is at position 0.
    Root,
    /// Another node of the same worker, by its key.
    Node(u64),
    /// A block known only by its prefix identity and position (the positional backend's
    /// orphans whose parent is not held).
    Anchor {
        /// The parent's prefix identity.
        identity: u64,
        /// The parent's position.
        position: u32,
    },
}

#[derive(Debug, Clone, Copy)]
struct ExportNode {
    key: u64,
    parent: ExportParent,
    local: u64,
}

/// Collects one worker's nodes and names, then writes them as records.
///
/// A node is a block of the worker's chains: held (it has names) or not held but on the path
/// from a held node up to the root (no names). Keys are the backend's own and only need to
/// be unique within the worker.
#[derive(Debug, Default)]
pub(crate) struct Exporter {
    nodes: Vec<ExportNode>,
    /// (node key, name, tiers).
    names: Vec<(u64, u64, TierMask)>,
}

impl Exporter {
    /// Adds a node.
    pub(crate) fn node(&mut self, key: u64, parent: ExportParent, local: u64) {
        self.nodes.push(ExportNode { key, parent, local });
    }

    /// Gives the node `key` the name `name`, on `tiers`.
    pub(crate) fn name(&mut self, key: u64, name: u64, tiers: TierMask) {
        self.names.push((key, name, tiers));
    }

    /// Appends the records of every node to `out` in a canonical depth-first order
    /// (siblings by local hash, then first name); returns (records, names). Clears the
    /// exporter for the next worker.
    pub(crate) fn encode(&mut self, out: &mut Vec<u8>) -> Result<(u64, u64), Error> {
        self.names.sort_unstable();
        let count = self.nodes.len();
        let mut index: FxHashMap<u64, u32> = FxHashMap::default();
        index.reserve(count);
        for (i, node) in self.nodes.iter().enumerate() {
            index.insert(node.key, i as u32);
        }
        // Names of node i: names[name_start[i] .. name_start[i] + name_len[i]].
        let mut name_range = vec![(0u32, 0u32); count];
        let mut at = 0;
        while at < self.names.len() {
            let key = self.names[at].0;
            let start = at;
            while at < self.names.len() && self.names[at].0 == key {
                at += 1;
            }
            let Some(&i) = index.get(&key) else {
                return Err(Error::InvalidArgument(
                    "snapshot: a name of an unknown node",
                ));
            };
            name_range[i as usize] = (start as u32, (at - start) as u32);
        }
        const ROOTS: u32 = u32::MAX;
        let mut order: Vec<(u32, u64, u64, u32)> = Vec::with_capacity(count);
        for (i, node) in self.nodes.iter().enumerate() {
            let parent = match node.parent {
                ExportParent::Node(key) => *index.get(&key).ok_or(Error::InvalidArgument(
                    "snapshot: a node of an unknown parent",
                ))?,
                _ => ROOTS,
            };
            let (start, len) = name_range[i];
            let first_name = if len > 0 {
                self.names[start as usize].1
            } else {
                0
            };
            order.push((parent, node.local, first_name, i as u32));
        }
        order.sort_unstable();
        // Children of node p: order[child_start[p] .. child_start[p + 1]]; roots at the end.
        let mut child_start = vec![0u32; count + 1];
        {
            let mut at = 0usize;
            for (p, start) in child_start.iter_mut().enumerate() {
                *start = at as u32;
                while at < order.len() && order[at].0 == p as u32 {
                    at += 1;
                }
            }
        }
        let roots = child_start[count] as usize..order.len();
        let mut stack: Vec<Range<usize>> = vec![roots];
        let mut path_len = 0usize;
        let mut names_written = 0u64;
        while let Some(top) = stack.last_mut() {
            let Some(at) = top.next() else {
                stack.pop();
                continue;
            };
            let i = order[at].3 as usize;
            let depth = stack.len() - 1;
            let pops = (path_len - depth) as u64;
            path_len = depth + 1;
            let node = self.nodes[i];
            let (start, len) = name_range[i];
            let names = &self.names[start as usize..(start + len) as usize];
            let mut tag = pops << FLAG_BITS;
            if len != 1 {
                tag |= FLAG_NAMES;
            }
            let anchor = match node.parent {
                ExportParent::Anchor { identity, position } => Some((identity, position)),
                _ => None,
            };
            if anchor.is_some() {
                tag |= FLAG_ANCHOR;
            }
            let tiered = names.iter().any(|&(_, _, tiers)| tiers != DEVICE);
            if tiered {
                tag |= FLAG_TIERS;
            }
            put_varint(out, tag);
            if let Some((identity, position)) = anchor {
                out.extend_from_slice(&identity.to_le_bytes());
                put_varint(out, u64::from(position));
            }
            out.extend_from_slice(&node.local.to_le_bytes());
            if len != 1 {
                put_varint(out, u64::from(len));
            }
            for &(_, name, _) in names {
                out.extend_from_slice(&name.to_le_bytes());
            }
            if tiered {
                out.extend(names.iter().map(|&(_, _, tiers)| tiers));
            }
            names_written += u64::from(len);
            let children = child_start[i] as usize..child_start[i + 1] as usize;
            stack.push(children);
        }
        let records = count as u64;
        self.nodes.clear();
        self.names.clear();
        Ok((records, names_written))
    }
}

/// Appends `value` as a LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// One decoded node record.
#[derive(Debug, Clone)]
pub(crate) struct DecodedNode {
    /// The index of the parent record; `None` for a node at position 0 or below an anchor.
    pub(crate) parent: Option<u32>,
    /// Whether the parent is an anchor (known only by identity and position).
    pub(crate) anchored: bool,
    /// The node's position.
    pub(crate) position: u32,
    /// The node's local hash.
    pub(crate) local: u64,
    /// The node's prefix identity.
    pub(crate) identity: u64,
    /// The parent's prefix identity ([`IDENTITY_SEED`] at position 0).
    pub(crate) parent_identity: u64,
    /// The node's names: indexes into [`DecodedWorker::names`].
    pub(crate) names: Range<u32>,
}

/// One worker's section, decoded and checked.
#[derive(Debug, Default)]
pub(crate) struct DecodedWorker {
    /// Records in file order: a parent always comes before its children.
    pub(crate) nodes: Vec<DecodedNode>,
    /// (name, tiers) of every node, each node's contiguous.
    pub(crate) names: Vec<(u64, TierMask)>,
    /// Whether any node hangs below an anchor.
    pub(crate) has_anchors: bool,
}

impl DecodedWorker {
    /// Fails for a section with anchors, for the backends that rebuild blocks from their
    /// paths only (every backend but the positional one).
    pub(crate) fn paths_only(&self) -> Result<(), Error> {
        if self.has_anchors {
            return Err(Error::InvalidArgument(
                "the snapshot has orphans known by identity only (written by the positional \
                 backend); only the positional backend can restore them",
            ));
        }
        Ok(())
    }
}

/// Where the decoder reads one section's records from: the stream, a chunk at a time
/// (`stream.rs`), or a slice (the tests). A read past the records is malformed.
pub(crate) trait RecordBytes {
    /// Fills `out` with the next bytes of the records.
    fn read(&mut self, out: &mut [u8]) -> Result<(), Error>;

    /// Whether every byte of the records has been read.
    fn at_end(&self) -> bool;
}

/// What a read past the end of a section's records is.
pub(crate) const TRUNCATED: Error = Error::Malformed("a worker section's records end early");

/// A section's records held whole in memory.
#[cfg(test)]
pub(crate) struct SliceRecords<'a> {
    data: &'a [u8],
    at: usize,
}

#[cfg(test)]
impl<'a> SliceRecords<'a> {
    /// The records `data`, from their first byte.
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Self { data, at: 0 }
    }
}

#[cfg(test)]
impl RecordBytes for SliceRecords<'_> {
    fn read(&mut self, out: &mut [u8]) -> Result<(), Error> {
        let end = self.at.checked_add(out.len()).ok_or(TRUNCATED)?;
        out.copy_from_slice(self.data.get(self.at..end).ok_or(TRUNCATED)?);
        self.at = end;
        Ok(())
    }

    fn at_end(&self) -> bool {
        self.at == self.data.len()
    }
}

fn read_u64(bytes: &mut impl RecordBytes) -> Result<u64, Error> {
    let mut buf = [0u8; 8];
    bytes.read(&mut buf)?;
    Ok(u64::from_le_bytes(buf))
}

fn read_u8(bytes: &mut impl RecordBytes) -> Result<u8, Error> {
    let mut buf = [0u8; 1];
    bytes.read(&mut buf)?;
    Ok(buf[0])
}

fn read_varint(bytes: &mut impl RecordBytes) -> Result<u64, Error> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = read_u8(bytes)?;
        let bits = u64::from(byte & 0x7f);
        if shift == 63 && bits > 1 {
            return Err(Error::Malformed("a varint overflows 64 bits"));
        }
        value |= bits << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(Error::Malformed("a varint overflows 64 bits"))
}

/// Room reserved ahead for records or names, at most: what a section's header claims is not
/// trusted with memory, the decoded records grow with the bytes actually read.
const RESERVE_AT_MOST: u64 = 4096;

/// A stack entry of the decoder: the record, and whether it has a child yet.
struct Open {
    record: u32,
    has_child: bool,
}

/// Reads `records` node records holding `names` names, `len` bytes in all, from `bytes`,
/// checking the structure: pops within the path, anchors only at the top, positions within
/// `u32::MAX`, tier masks, no name twice, every nameless node with a child, every byte
/// used. Memory grows with the records read, whatever the counts claim, and the first
/// broken record stops the reading.
pub(crate) fn decode_nodes(
    bytes: &mut impl RecordBytes,
    len: u64,
    records: u64,
    names: u64,
) -> Result<DecodedWorker, Error> {
    // Every record takes at least 9 bytes and every name 8.
    if records > len / 9 || names > len / 8 {
        return Err(Error::Malformed(
            "a worker section's counts exceed its length",
        ));
    }
    let mut out = DecodedWorker {
        nodes: Vec::with_capacity(records.min(RESERVE_AT_MOST) as usize),
        names: Vec::with_capacity(names.min(RESERVE_AT_MOST) as usize),
        has_anchors: false,
    };
    let mut seen: FxHashSet<u64> = FxHashSet::default();
    seen.reserve(names.min(RESERVE_AT_MOST) as usize);
    let mut path: Vec<Open> = Vec::new();
    let close = |open: Open, out: &DecodedWorker| -> Result<(), Error> {
        let node = &out.nodes[open.record as usize];
        if node.names.is_empty() && !open.has_child {
            return Err(Error::Malformed("a block with no name has no child"));
        }
        Ok(())
    };
    for _ in 0..records {
        let tag = read_varint(bytes)?;
        let pops = tag >> FLAG_BITS;
        if pops > path.len() as u64 {
            return Err(Error::Malformed(
                "a record leaves more blocks than its path has",
            ));
        }
        for _ in 0..pops {
            close(path.pop().expect("checked"), &out)?;
        }
        let anchor = if tag & FLAG_ANCHOR != 0 {
            if !path.is_empty() {
                return Err(Error::Malformed("an anchor below another block"));
            }
            let identity = read_u64(bytes)?;
            let position = read_varint(bytes)?;
            if position >= u64::from(u32::MAX) {
                return Err(Error::Malformed("a position past u32::MAX"));
            }
            Some((identity, position as u32))
        } else {
            None
        };
        let local = read_u64(bytes)?;
        let count = if tag & FLAG_NAMES != 0 {
            read_varint(bytes)?
        } else {
            1
        };
        if count > (names - out.names.len() as u64) {
            return Err(Error::Malformed("more names than the section counts"));
        }
        let (parent, parent_identity, position) = match (path.last_mut(), anchor) {
            (Some(open), _) => {
                open.has_child = true;
                let p = &out.nodes[open.record as usize];
                if p.position == u32::MAX {
                    return Err(Error::Malformed("a position past u32::MAX"));
                }
                (Some(open.record), p.identity, p.position + 1)
            }
            (None, Some((identity, position))) => (None, identity, position + 1),
            (None, None) => (None, IDENTITY_SEED, 0),
        };
        let first = out.names.len() as u32;
        for _ in 0..count {
            let name = read_u64(bytes)?;
            if !seen.insert(name) {
                return Err(Error::Malformed("a worker holds one name twice"));
            }
            out.names.push((name, DEVICE));
        }
        if tag & FLAG_TIERS != 0 {
            for entry in &mut out.names[first as usize..] {
                let tiers = read_u8(bytes)?;
                if tiers == 0 || tiers >= 1 << TIERS {
                    return Err(Error::Malformed("a tier set out of range"));
                }
                entry.1 = tiers;
            }
        }
        let anchored = anchor.is_some() || parent.is_some_and(|p| out.nodes[p as usize].anchored);
        out.has_anchors |= anchored;
        let record = out.nodes.len() as u32;
        out.nodes.push(DecodedNode {
            parent,
            anchored,
            position,
            local,
            identity: mix(parent_identity, local),
            parent_identity,
            names: first..first + count as u32,
        });
        path.push(Open {
            record,
            has_child: false,
        });
    }
    while let Some(open) = path.pop() {
        close(open, &out)?;
    }
    if !bytes.at_end() {
        return Err(Error::Malformed(
            "a worker section has bytes after its records",
        ));
    }
    if out.names.len() as u64 != names {
        return Err(Error::Malformed(
            "a worker section holds another count of names",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(data: &[u8], records: u64, names: u64) -> Result<DecodedWorker, Error> {
        decode_nodes(
            &mut SliceRecords::new(data),
            data.len() as u64,
            records,
            names,
        )
    }

    #[test]
    fn a_chain_with_a_branch_and_an_anchor_round_trips() {
        let mut e = Exporter::default();
        e.node(1, ExportParent::Root, 10);
        e.node(2, ExportParent::Node(1), 20);
        e.node(3, ExportParent::Node(1), 30);
        e.node(
            4,
            ExportParent::Anchor {
                identity: 77,
                position: 5,
            },
            40,
        );
        e.name(1, 100, DEVICE);
        e.name(2, 200, DEVICE | Tier::Host.bit());
        e.name(3, 300, DEVICE);
        e.name(3, 301, DEVICE);
        e.name(4, 400, DEVICE);
        let mut out = Vec::new();
        assert_eq!(e.encode(&mut out).unwrap(), (4, 5));
        let d = decode(&out, 4, 5).unwrap();
        assert!(d.has_anchors);
        let by_local = |l: u64| d.nodes.iter().find(|n| n.local == l).unwrap();
        let root = mix(IDENTITY_SEED, 10);
        assert_eq!(by_local(10).identity, root);
        assert_eq!(by_local(20).identity, mix(root, 20));
        assert_eq!(by_local(20).position, 1);
        assert_eq!(by_local(30).parent_identity, root);
        assert_eq!(by_local(40).identity, mix(77, 40));
        assert_eq!(by_local(40).position, 6);
        assert!(by_local(40).anchored && !by_local(30).anchored);
        let n20 = by_local(20).names.clone();
        assert_eq!(
            d.names[n20.start as usize],
            (200, DEVICE | Tier::Host.bit())
        );
        assert_eq!(by_local(30).names.len(), 2);
        // A chain record costs a tag byte, the local hash and the name.
        let mut e = Exporter::default();
        for k in 0..100u64 {
            let parent = if k == 0 {
                ExportParent::Root
            } else {
                ExportParent::Node(k - 1)
            };
            e.node(k, parent, k * 3);
            e.name(k, k + 1000, DEVICE);
        }
        let mut out = Vec::new();
        e.encode(&mut out).unwrap();
        assert_eq!(out.len(), 100 * 17);
    }

    #[test]
    fn bad_records_are_malformed() {
        let mut one = Vec::new();
        put_varint(&mut one, 0);
        one.extend_from_slice(&5u64.to_le_bytes());
        one.extend_from_slice(&9u64.to_le_bytes());
        assert!(decode(&one, 1, 1).is_ok());
        let malformed = |data: &[u8], records, names| {
            matches!(decode(data, records, names), Err(Error::Malformed(_)))
        };
        assert!(malformed(&one[..16], 1, 1), "truncated");
        assert!(malformed(&one, 1, 2), "names count");
        assert!(malformed(&one, 2, 1), "records count");
        let mut twice = one.clone();
        twice.extend_from_slice(&one);
        assert!(malformed(&twice, 2, 2), "one name twice");
        let mut pop = Vec::new();
        put_varint(&mut pop, 1 << FLAG_BITS);
        pop.extend_from_slice(&one[1..]);
        assert!(malformed(&pop, 1, 1), "pops past the path");
        let mut nameless = Vec::new();
        put_varint(&mut nameless, FLAG_NAMES);
        nameless.extend_from_slice(&5u64.to_le_bytes());
        put_varint(&mut nameless, 0);
        assert!(malformed(&nameless, 1, 0), "a nameless leaf");
        let mut bad_tier = Vec::new();
        put_varint(&mut bad_tier, FLAG_TIERS);
        bad_tier.extend_from_slice(&one[1..]);
        bad_tier.push(0);
        assert!(malformed(&bad_tier, 1, 1), "an empty tier set");
    }
}
