//! Plain data shared by every part of the crate: workers, blocks, events, matches, stats.
//!
//! Nothing here has logic beyond construction helpers; the semantics live in
//! [`crate::reference`] (the oracle) and the backends in [`crate::index`].

use crate::Error;

/// A worker: one inference engine instance and its data-parallel rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Worker {
    /// The engine instance.
    pub worker_id: u64,
    /// The data-parallel rank inside that instance.
    pub dp_rank: u32,
}

impl Worker {
    /// Builds a worker from its id and dp rank.
    pub const fn new(worker_id: u64, dp_rank: u32) -> Self {
        Self { worker_id, dp_rank }
    }
}

/// One block of a `Stored` event: its local hash and the engine's (opaque) sequence hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct Block {
    /// Hash of the tokens inside the block only.
    pub local_hash: u64,
    /// The engine's name for the block (a rolling hash of any algorithm); opaque to the index.
    pub seq_hash: u64,
}

impl Block {
    /// Builds a block from its local hash and the engine's sequence hash.
    pub const fn new(local_hash: u64, seq_hash: u64) -> Self {
        Self {
            local_hash,
            seq_hash,
        }
    }
}

/// A storage tier a worker keeps KV blocks on, fastest first.
///
/// A held block has a set of tiers (at least one). Engines that offload publish the medium
/// of each store and removal; engines that do not are on [`Tier::Device`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum Tier {
    /// The accelerator's own memory (GPU HBM): the default.
    #[default]
    Device = 0,
    /// Host memory (CPU DRAM) of the worker's node.
    Host = 1,
    /// Local disk (NVMe, SSD).
    Disk = 2,
    /// Anything further: a remote or shared store.
    External = 3,
}

/// How many tiers there are; tier depth arrays have this length.
pub const TIERS: usize = 4;

impl Tier {
    /// Every tier, fastest first (index = the tier's number).
    pub const ALL: [Tier; TIERS] = [Tier::Device, Tier::Host, Tier::Disk, Tier::External];

    /// The tier with this number (0 = device ... 3 = external), if any.
    pub const fn from_index(index: u32) -> Option<Tier> {
        match index {
            0 => Some(Tier::Device),
            1 => Some(Tier::Host),
            2 => Some(Tier::Disk),
            3 => Some(Tier::External),
            _ => None,
        }
    }

    /// The tier's number: its index in tier depth arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The tier's name: `"device"`, `"host"`, `"disk"` or `"external"`.
    pub const fn name(self) -> &'static str {
        match self {
            Tier::Device => "device",
            Tier::Host => "host",
            Tier::Disk => "disk",
            Tier::External => "external",
        }
    }

    /// The tier of a [`Tier::name`].
    pub fn from_name(name: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|tier| tier.name() == name)
    }

    /// The tier's bit in a set of tiers.
    pub(crate) const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of tiers as bits (bit `t` = [`Tier::index`] `t`).
pub(crate) type TierMask = u8;

/// The fastest tier of a non-empty set, as its index.
pub(crate) fn fastest(mask: TierMask) -> usize {
    debug_assert!(mask != 0 && mask < 1 << TIERS);
    mask.trailing_zeros() as usize
}

/// What an event does to one worker's set of blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventData {
    /// Blocks were cached. `parent` names a block the worker holds (the blocks continue its
    /// chain); `None` means the blocks start at position 0.
    Stored {
        /// The engine's sequence hash of the block these blocks continue, if any.
        parent: Option<u64>,
        /// The new blocks, in chain order.
        blocks: Vec<Block>,
        /// The tier the blocks were stored on; a block already held (same name, same
        /// prefix) gains this tier.
        tier: Tier,
    },
    /// Blocks were evicted, named by the engine's sequence hashes.
    Removed {
        /// The names of the removed blocks.
        seq_hashes: Vec<u64>,
        /// The tier they left: the block stays held while it is on another tier. `None`:
        /// every tier (the block is dropped).
        tier: Option<Tier>,
    },
    /// Every block of the worker was dropped.
    Cleared,
}

/// An engine event for one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The worker the event is about.
    pub worker: Worker,
    /// Per-worker increasing id, recorded for diagnostics.
    pub event_id: u64,
    /// What happened.
    pub data: EventData,
}

impl EventData {
    /// The memory this event's data holds while queued: itself plus its block and hash
    /// arrays.
    #[inline]
    pub fn queued_bytes(&self) -> usize {
        let arrays = match self {
            EventData::Stored { blocks, .. } => std::mem::size_of_val(blocks.as_slice()),
            EventData::Removed { seq_hashes, .. } => std::mem::size_of_val(seq_hashes.as_slice()),
            EventData::Cleared => 0,
        };
        std::mem::size_of::<Self>() + arrays
    }
}

impl Event {
    /// The memory this event holds while queued: the event itself plus its block and hash
    /// arrays. Queue byte budgets ([`Config::queue_bytes`](crate::Config::queue_bytes)) count
    /// this.
    #[inline]
    pub fn queued_bytes(&self) -> usize {
        std::mem::size_of::<Self>() - std::mem::size_of::<EventData>() + self.data.queued_bytes()
    }

    /// A `Stored` event.
    pub fn stored(worker: Worker, event_id: u64, parent: Option<u64>, blocks: Vec<Block>) -> Self {
        Self {
            worker,
            event_id,
            data: EventData::Stored {
                parent,
                blocks,
                tier: Tier::Device,
            },
        }
    }

    /// A `Removed` event.
    pub fn removed(worker: Worker, event_id: u64, seq_hashes: Vec<u64>) -> Self {
        Self {
            worker,
            event_id,
            data: EventData::Removed {
                seq_hashes,
                tier: None,
            },
        }
    }

    /// A `Stored` event on a given tier (host memory, disk, ...).
    pub fn stored_on(
        worker: Worker,
        event_id: u64,
        parent: Option<u64>,
        blocks: Vec<Block>,
        tier: Tier,
    ) -> Self {
        Self {
            worker,
            event_id,
            data: EventData::Stored {
                parent,
                blocks,
                tier,
            },
        }
    }

    /// A `Removed` event for one tier: each named block leaves that tier only.
    pub fn removed_from(worker: Worker, event_id: u64, seq_hashes: Vec<u64>, tier: Tier) -> Self {
        Self {
            worker,
            event_id,
            data: EventData::Removed {
                seq_hashes,
                tier: Some(tier),
            },
        }
    }

    /// A `Cleared` event.
    pub fn cleared(worker: Worker, event_id: u64) -> Self {
        Self {
            worker,
            event_id,
            data: EventData::Cleared,
        }
    }
}

/// One change to an index: everything the write path carries, in one type.
///
/// Writes of one `worker_id` are applied in the order they were accepted, whichever way the
/// indexer applies them (inline on the caller's thread, or queued to an event thread).
/// New kinds of write (restored snapshots, tiers) will be added as variants, so code outside
/// this crate that matches on a `Write` needs a wildcard arm.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Write {
    /// An engine event.
    Event(Event),
    /// Drop and forget every dp rank of a worker id.
    RemoveWorker(u64),
    /// Drop and forget one `(worker_id, dp_rank)`.
    RemoveWorkerDpRank(Worker),
    /// Several events of one worker applied as one unit under that worker's exclusion (a
    /// reader or a snapshot sees all of them or none). With an `offset`, the batch is skipped
    /// whole when `offset` is at or below the worker's watermark, and otherwise the
    /// watermark becomes `offset` (see [`crate::Indexer::apply_batch_at`]).
    Batch {
        /// The worker every event is about.
        worker: Worker,
        /// The batch's offset (>= 1; [`crate::Indexer::apply_batch_at`] refuses 0, which a
        /// batch submitted directly is skipped at), or `None` for a plain batch that neither
        /// checks nor moves the watermark.
        offset: Option<u64>,
        /// What the events do, in order.
        events: Vec<EventData>,
    },
}

impl Write {
    /// The worker id the write is about: writes are ordered (and routed) per worker id.
    #[inline]
    pub fn worker_id(&self) -> u64 {
        match self {
            Write::Event(event) => event.worker.worker_id,
            Write::RemoveWorker(worker_id) => *worker_id,
            Write::RemoveWorkerDpRank(worker) => worker.worker_id,
            Write::Batch { worker, .. } => worker.worker_id,
        }
    }

    /// The memory this write holds while queued (see [`Event::queued_bytes`]).
    #[inline]
    pub fn queued_bytes(&self) -> usize {
        match self {
            Write::Event(event) => event.queued_bytes(),
            Write::Batch { events, .. } => {
                std::mem::size_of::<Self>()
                    + events.iter().map(EventData::queued_bytes).sum::<usize>()
            }
            _ => std::mem::size_of::<Self>(),
        }
    }
}

/// One worker's answer to a query: how many leading blocks of the query it holds.
///
/// Laid out exactly like the C ABI's `kvidx_match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct Match {
    /// The worker's engine instance.
    pub worker_id: u64,
    /// The worker's data-parallel rank.
    pub dp_rank: u32,
    /// Length of the longest prefix of the query the worker holds (always > 0 in results).
    pub depth: u32,
}

impl Match {
    /// The worker this match is about.
    pub const fn worker(&self) -> Worker {
        Worker::new(self.worker_id, self.dp_rank)
    }
}

/// One worker's answer to a predicted query ([`crate::Indexer::find_matches_predicted`]):
/// its confirmed depth, exactly as [`crate::Indexer::find_matches`] reports it (0 when it
/// holds no prefix), and its predicted depth: the longest prefix of the query whose every
/// block it either holds within its confirmed depth or is predicted to hold (unexpired), so
/// `predicted_depth >= depth` and `predicted_depth > 0`.
///
/// Laid out exactly like the C ABI's `kvidx_predicted_match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct PredictedMatch {
    /// The worker's engine instance.
    pub worker_id: u64,
    /// The worker's data-parallel rank.
    pub dp_rank: u32,
    /// Confirmed depth: the longest prefix of the query the worker holds, by events.
    pub depth: u32,
    /// Predicted depth: at least `depth`, extended by the worker's predicted blocks.
    pub predicted_depth: u32,
}

impl PredictedMatch {
    /// The worker this match is about.
    pub const fn worker(&self) -> Worker {
        Worker::new(self.worker_id, self.dp_rank)
    }
}

/// One worker's answer to a tiered query: its depth, and its depth on each tier.
///
/// `tier_depths[t]` is the longest prefix of the query whose every block the worker holds on
/// tier `t` or a faster one, so the depths grow from device to external and
/// `tier_depths[3] == depth`. Laid out exactly like the C ABI's `kvidx_tiered_match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct TieredMatch {
    /// The worker's engine instance.
    pub worker_id: u64,
    /// The worker's data-parallel rank.
    pub dp_rank: u32,
    /// Length of the longest prefix of the query the worker holds on any tier (> 0).
    pub depth: u32,
    /// Cumulative depths per tier: device, device or host, ... (index = [`Tier::index`]).
    pub tier_depths: [u32; TIERS],
}

impl TieredMatch {
    /// The worker this match is about.
    pub const fn worker(&self) -> Worker {
        Worker::new(self.worker_id, self.dp_rank)
    }

    /// The plain match (the depth on any tier).
    pub const fn to_match(&self) -> Match {
        Match {
            worker_id: self.worker_id,
            dp_rank: self.dp_rank,
            depth: self.depth,
        }
    }

    /// Blocks of the prefix whose fastest tier is `tier` (the prefix's blocks split by tier).
    pub fn blocks_on(&self, tier: Tier) -> u32 {
        let t = tier.index();
        let below = if t == 0 { 0 } else { self.tier_depths[t - 1] };
        self.tier_depths[t].saturating_sub(below)
    }

    /// Whether the fields agree as a tiered lookup reports them (docs/contract.md section
    /// 1.3): the tier depths never decrease from device to external, and the last one is
    /// `depth`. (All zero, "no match", agrees too.)
    pub fn is_consistent(&self) -> bool {
        self.tier_depths.windows(2).all(|pair| pair[0] <= pair[1])
            && self.tier_depths[TIERS - 1] == self.depth
    }

    /// A weighted hit score: each block of the prefix counts the weight of its fastest tier
    /// (e.g. `[1.0, 0.8, 0.5, 0.2]`: a block in host memory is worth 80% of one on the GPU).
    /// Weights are any finite numbers; a negative one counts a tier's blocks against the
    /// worker.
    ///
    /// Errors ([`Error::InvalidArgument`]): a match that is not [consistent](
    /// Self::is_consistent), a weight that is NaN or infinite, or weights so large that the
    /// score is not a finite number. The score returned is always finite.
    pub fn score(&self, weights: &[f64; TIERS]) -> Result<f64, Error> {
        if !self.is_consistent() {
            return Err(Error::InvalidArgument(
                "a tiered match's tier depths decrease or end elsewhere than its depth",
            ));
        }
        if weights.iter().any(|w| !w.is_finite()) {
            return Err(Error::InvalidArgument("a tier weight is NaN or infinite"));
        }
        let score: f64 = Tier::ALL
            .iter()
            .map(|&tier| weights[tier.index()] * f64::from(self.blocks_on(tier)))
            .sum();
        if !score.is_finite() {
            return Err(Error::InvalidArgument(
                "the tier weights are too large for a finite score",
            ));
        }
        Ok(score)
    }
}

/// Sorts tiered matches in the contract's order (by `depth`, as [`sort_matches`]).
pub fn sort_tiered_matches(matches: &mut [TieredMatch]) {
    matches.sort_unstable_by_key(|m| order_key(m.depth, m.worker_id, m.dp_rank));
}

/// Sorts matches in the contract's order: depth descending, then worker id, then dp rank.
///
/// Each match packs into one integer key that holds all of it, so the keys are sorted as
/// plain integers (on the stack for up to 128 matches) and written back: about half the
/// time of sorting the matches through a key function, which rebuilds both keys at every
/// comparison. When every depth, worker id and dp rank of the answer fits in 64 bits
/// together (small ids, the common case), the keys are 64-bit, cheaper to compare and move;
/// otherwise 128-bit.
pub fn sort_matches(matches: &mut [Match]) {
    if matches.len() < 2 {
        return; // sorted already: no buffer to clear
    }
    match Packing::of(matches) {
        Some(packing) => sort_packed(matches, |m| packing.key(m), |key| packing.unpack(key)),
        None => sort_packed(
            matches,
            |m| order_key(m.depth, m.worker_id, m.dp_rank),
            |key| Match {
                worker_id: (key >> 32) as u64,
                dp_rank: key as u32,
                depth: !((key >> 96) as u32),
            },
        ),
    }
}

/// Sorts `matches` by the keys `key` gives them (ascending), writing each back from its
/// key with `unpack`.
fn sort_packed<K: Ord + Copy + Default>(
    matches: &mut [Match],
    key: impl Fn(&Match) -> K,
    unpack: impl Fn(K) -> Match,
) {
    let mut on_stack = [K::default(); SORT_ON_STACK];
    let mut on_heap = Vec::new();
    let keys = if matches.len() <= SORT_ON_STACK {
        &mut on_stack[..matches.len()]
    } else {
        on_heap.resize(matches.len(), K::default());
        &mut on_heap[..]
    };
    for (k, m) in keys.iter_mut().zip(matches.iter()) {
        *k = key(m);
    }
    keys.sort_unstable();
    for (m, &k) in matches.iter_mut().zip(keys.iter()) {
        *m = unpack(k);
    }
}

/// How an answer's matches pack into 64-bit keys in the contract's order: the depth's
/// complement (within the answer's largest depth) above the worker id above the dp rank.
#[derive(Clone, Copy)]
struct Packing {
    /// The largest depth: a depth `d` packs as `max_depth - d`, so deeper sorts first.
    max_depth: u32,
    /// Bits of the dp rank, and of the dp rank and worker id together.
    rank_bits: u32,
    low_bits: u32,
}

impl Packing {
    /// `None` when the answer's depths, worker ids and dp ranks need more than 64 bits.
    fn of(matches: &[Match]) -> Option<Self> {
        let (mut depths, mut workers, mut ranks) = (0u32, 0u64, 0u32);
        for m in matches {
            depths |= m.depth;
            workers |= m.worker_id;
            ranks |= m.dp_rank;
        }
        let bits = |used: u64| u64::BITS - used.leading_zeros();
        let rank_bits = bits(u64::from(ranks));
        let low_bits = rank_bits + bits(workers);
        (low_bits + bits(u64::from(depths)) <= 64).then(|| Packing {
            max_depth: matches.iter().map(|m| m.depth).max().unwrap_or(0),
            rank_bits,
            low_bits,
        })
    }

    fn key(&self, m: &Match) -> u64 {
        let deeper_first = u64::from(self.max_depth - m.depth);
        deeper_first.checked_shl(self.low_bits).unwrap_or(0)
            | (m.worker_id << self.rank_bits)
            | u64::from(m.dp_rank)
    }

    fn unpack(&self, key: u64) -> Match {
        Match {
            worker_id: (key >> self.rank_bits) & low_mask(self.low_bits - self.rank_bits),
            dp_rank: (key & low_mask(self.rank_bits)) as u32,
            depth: self.max_depth - key.checked_shr(self.low_bits).unwrap_or(0) as u32,
        }
    }
}

/// The lowest `bits` bits set.
fn low_mask(bits: u32) -> u64 {
    1u64.checked_shl(bits).map_or(u64::MAX, |b| b - 1)
}

/// Matches [`sort_matches`] sorts without allocating.
const SORT_ON_STACK: usize = 128;

/// The contract's order as one packed key: the complement of the depth first, so deeper
/// sorts first, then worker id, then dp rank.
fn order_key(depth: u32, worker_id: u64, dp_rank: u32) -> u128 {
    (u128::from(!depth) << 96) | (u128::from(worker_id) << 32) | u128::from(dp_rank)
}

/// Counters of an indexer, as in the contract.
///
/// Laid out exactly like the C ABI's `kvidx_stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Stats {
    /// Events fully applied (a Removed with unknown names still counts once).
    pub events_applied: u64,
    /// Stored events rejected for a missing parent (or otherwise invalid).
    pub events_rejected: u64,
    /// Names in Removed events that the worker did not hold.
    pub unknown_removals: u64,
    /// Known `(worker_id, dp_rank)` pairs.
    pub workers: u64,
    /// Sum over workers of the blocks (names) they hold.
    pub worker_blocks: u64,
}

/// Counters of offset batches ([`crate::Indexer::apply_batch_at`]): how many were applied and
/// how many were skipped because their offset was at or below their worker's watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct ReplicaStats {
    /// Offset batches applied (their events count in [`Stats`] as usual).
    pub batches_applied: u64,
    /// Offset batches skipped whole (offset <= the worker's watermark).
    pub batches_skipped: u64,
    /// Events in the skipped batches (counted nowhere else).
    pub events_skipped: u64,
}

/// What submitting a batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Event threads: the batch was queued; its outcome shows in the counters after a flush.
    Queued,
    /// Its offset was at or below the worker's watermark: nothing was applied.
    Skipped,
    /// Every event was applied in order; `rejected` Stored events of it were rejected.
    Applied {
        /// Stored events of the batch that were rejected (missing parent or overflow).
        rejected: u64,
    },
}

/// What applying one event did, as seen by the indexer's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The event was applied; `unknown_removals` names of a Removed were not held.
    Applied {
        /// Names the worker did not hold (Removed only; 0 otherwise).
        unknown_removals: u64,
    },
    /// A Stored event was rejected as a whole: nothing was applied.
    Rejected(RejectReason),
}

/// Whether a chain of `len` blocks starting at position `first` stays within the largest
/// position the index can hold (`u32::MAX`).
pub(crate) fn chain_fits(first: u64, len: usize) -> bool {
    first + len as u64 <= u64::from(u32::MAX) + 1
}

/// Why a Stored event was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// The worker holds no block named by the parent hash.
    ParentNotFound,
    /// The chain would pass the largest position the index can hold (`u32::MAX`).
    PositionOverflow,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_fit_up_to_the_last_position() {
        let max = u64::from(u32::MAX);
        assert!(chain_fits(0, 1));
        assert!(chain_fits(max, 1), "a block at position u32::MAX fits");
        assert!(!chain_fits(max, 2));
        assert!(chain_fits(max - 9, 10));
        assert!(!chain_fits(max - 9, 11));
        assert!(chain_fits(max + 1, 0), "an empty chain never overflows");
    }

    /// The contract's order, by comparing fields.
    fn sort_by_comparisons(matches: &mut [Match]) {
        matches.sort_by(|a, b| {
            b.depth
                .cmp(&a.depth)
                .then(a.worker_id.cmp(&b.worker_id))
                .then(a.dp_rank.cmp(&b.dp_rank))
        });
    }

    #[test]
    fn matches_sort_in_the_contracts_order_at_every_size_and_extreme() {
        let mut rng = crate::test_rng::Lcg(9);
        let mut next = || rng.next();
        // Sizes on both sides of the stack buffer; values drawn from a few each (ties on
        // every field) including the extremes of each field.
        for len in [0, 1, 2, 3, 17, SORT_ON_STACK, SORT_ON_STACK + 1, 1_000] {
            let mut matches: Vec<Match> = (0..len)
                .map(|_| {
                    let r = next();
                    Match {
                        worker_id: [0, 1, 7, u64::MAX - 1, u64::MAX][(r % 5) as usize],
                        dp_rank: [0, 3, u32::MAX][((r >> 8) % 3) as usize],
                        depth: [1, 2, 900, u32::MAX][((r >> 16) % 4) as usize],
                    }
                })
                .collect();
            let mut expected = matches.clone();
            sort_by_comparisons(&mut expected);
            sort_matches(&mut matches);
            assert_eq!(matches, expected, "{len} matches");
        }
    }

    #[test]
    fn matches_whose_fields_fit_64_bits_sort_alike_at_every_width() {
        let mut rng = crate::test_rng::Lcg(11);
        // (depth, worker id, dp rank) bits: well inside 64, exactly 64, one past it (the
        // 128-bit keys), and each field alone taking all it can.
        let widths = [
            (13, 8, 0),
            (12, 20, 2),
            (20, 36, 8),
            (32, 31, 1),
            (32, 32, 1),
            (0, 64, 0),
            (1, 63, 0),
            (32, 0, 32),
            (1, 32, 32),
        ];
        for (depth_bits, worker_bits, rank_bits) in widths {
            let mask = |bits: u32| 1u64.checked_shl(bits).map_or(u64::MAX, |b| b - 1);
            for len in [2, 9, 64, SORT_ON_STACK + 7] {
                let mut matches: Vec<Match> = (0..len)
                    .map(|at| {
                        // The first match takes each field's largest value.
                        let (d, w, r) = if at == 0 {
                            (u64::MAX, u64::MAX, u64::MAX)
                        } else {
                            (rng.next() % 5, rng.next(), rng.next() % 3)
                        };
                        Match {
                            worker_id: w & mask(worker_bits),
                            dp_rank: (r & mask(rank_bits)) as u32,
                            depth: (d & mask(depth_bits)) as u32,
                        }
                    })
                    .collect();
                let mut expected = matches.clone();
                sort_by_comparisons(&mut expected);
                sort_matches(&mut matches);
                assert_eq!(
                    matches, expected,
                    "{len} matches, bits {depth_bits}/{worker_bits}/{rank_bits}"
                );
            }
        }
    }
}
