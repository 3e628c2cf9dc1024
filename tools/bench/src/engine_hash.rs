//! How the mock engines name their blocks: one hash scheme for the whole fleet, or one per
//! worker.
//!
//! By default every engine computes sequence hashes by the hashing contract (docs/contract.md
//! section 3), so a prefix has the same names on every worker. With
//! [`EngineHash::PerWorker`] each worker salts its chains, as an engine with its own hash seed
//! does (vLLM, for one, starts every chain from a random `NONE_HASH` per process unless
//! `PYTHONHASHSEED` is fixed): the first block of a chain hashes after the worker's salt
//! instead of being its local hash, `seq_w[0] = XXH3(le64(salt_w) || le64(local[0]))`, and
//! every later block hashes after its salted parent, `seq_w[i] = XXH3(le64(seq_w[i-1]) ||
//! le64(local[i]))` (XXH3-64 with the contract's seed). Local hashes, and so the queries, stay
//! the same; only the names a worker publishes change, so an index that treats names as
//! opaque (as kvidx does) answers exactly as before, and one that relies on names being equal
//! across workers, or recomputes them from the query, does not.
//!
//! The mock pools keep naming blocks by the shared chain internally; [`Salter`] renames each
//! published event on its way out. A salted name is a function of the worker and the block's
//! whole prefix, so a block re-announced in a later chain gets the name it had, parents and
//! removals name blocks exactly as they were stored, and the stream stays valid.

use kvidx::hashing::{next_seq_hash, HASH_SEED};
use kvidx::{Event, EventData, Tier, Worker};
use rustc_hash::FxHashMap;

/// How the mock engines compute the sequence hashes they publish (`--engine-hash`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineHash {
    /// Every worker hashes by the hashing contract (seed 1337, `seq[0] = local[0]`): the same
    /// prefix has the same sequence hashes on every worker.
    #[default]
    Shared,
    /// Each worker salts its sequence hashes, as an engine with its own hash seed does: the
    /// same prefix has different sequence hashes on different workers (local hashes and
    /// queries unchanged).
    PerWorker,
}

impl EngineHash {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            EngineHash::Shared => "shared",
            EngineHash::PerWorker => "per-worker",
        }
    }
}

/// Seed of the per-worker salts (any fixed value: runs are reproducible).
const SALT_SEED: u64 = 0x6b76_6964_7873_616c;

/// The salt a worker's chains start from under [`EngineHash::PerWorker`].
pub fn worker_salt(worker: Worker) -> u64 {
    next_seq_hash(worker.worker_id, u64::from(worker.dp_rank), SALT_SEED)
}

/// A held block's salted name and the tiers it is on (bit `t` = [`Tier::index`] `t`).
#[derive(Debug, Clone, Copy)]
struct Named {
    salted: u64,
    tiers: u8,
}

/// A tier's bit in [`Named::tiers`].
fn tier_bit(tier: Tier) -> u8 {
    1 << tier.index()
}

/// Renames the sequence hashes of published events to each worker's salted chain.
///
/// Keeps, per worker, the salted name of every block the worker holds (shared name -> salted
/// name) and the tiers it is on, learnt from its `Stored` events and forgotten on `Removed`
/// (of the block's last tier) and `Cleared`.
#[derive(Debug, Default)]
pub struct Salter {
    names: FxHashMap<Worker, FxHashMap<u64, Named>>,
}

impl Salter {
    /// A salter that has seen no event.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rewrites `event`'s sequence hashes (blocks, parent, removed names) to its worker's
    /// salted names.
    ///
    /// # Panics
    /// If a `Stored` event's parent or a removed name is not a block the worker holds (per the
    /// events seen so far): the mock engine never publishes such an event.
    pub fn rename(&mut self, event: &mut Event) {
        let worker = event.worker;
        let names = self.names.entry(worker).or_default();
        match &mut event.data {
            EventData::Stored {
                parent,
                blocks,
                tier,
            } => {
                let mut prev = match parent {
                    None => worker_salt(worker),
                    Some(p) => {
                        let salted = names
                            .get(p)
                            .expect("a Stored event's parent is held by its worker")
                            .salted;
                        *p = salted;
                        salted
                    }
                };
                for block in blocks.iter_mut() {
                    let salted = next_seq_hash(prev, block.local_hash, HASH_SEED);
                    let named = names
                        .entry(block.seq_hash)
                        .or_insert(Named { salted, tiers: 0 });
                    debug_assert_eq!(
                        named.salted, salted,
                        "a re-announced block keeps its salted name"
                    );
                    named.tiers |= tier_bit(*tier);
                    block.seq_hash = salted;
                    prev = salted;
                }
            }
            EventData::Removed { seq_hashes, tier } => {
                for name in seq_hashes.iter_mut() {
                    let named = names
                        .get_mut(name)
                        .expect("a removed block is held by its worker");
                    let salted = named.salted;
                    // One tier only: the block stays held (its name kept) while on another.
                    named.tiers &= !tier.map_or(u8::MAX, tier_bit);
                    if named.tiers == 0 {
                        names.remove(name);
                    }
                    *name = salted;
                }
            }
            EventData::Cleared => names.clear(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvidx::hashing::seq_hashes;
    use kvidx::Block;

    fn shared_chain(locals: &[u64]) -> Vec<Block> {
        locals
            .iter()
            .zip(seq_hashes(locals))
            .map(|(&l, s)| Block::new(l, s))
            .collect()
    }

    #[test]
    fn salted_names_differ_per_worker_and_follow_the_chain() {
        let locals = [5, 6, 7];
        let chain = shared_chain(&locals);
        let (a, b) = (Worker::new(0, 0), Worker::new(1, 0));
        assert_ne!(worker_salt(a), worker_salt(b));
        assert_ne!(worker_salt(a), worker_salt(Worker::new(0, 1)));
        let mut salter = Salter::new();
        let mut ea = Event::stored(a, 0, None, chain.clone());
        let mut eb = Event::stored(b, 0, None, chain.clone());
        salter.rename(&mut ea);
        salter.rename(&mut eb);
        let names = |e: &Event| match &e.data {
            EventData::Stored { blocks, .. } => {
                assert_eq!(
                    blocks.iter().map(|b| b.local_hash).collect::<Vec<_>>(),
                    locals,
                    "local hashes are kept"
                );
                blocks.iter().map(|b| b.seq_hash).collect::<Vec<_>>()
            }
            _ => unreachable!(),
        };
        let (na, nb) = (names(&ea), names(&eb));
        let shared: Vec<u64> = chain.iter().map(|b| b.seq_hash).collect();
        for i in 0..3 {
            assert_ne!(na[i], nb[i], "position {i}");
            assert_ne!(na[i], shared[i], "position {i}");
        }
        // The salted chain: the first block hashes after the salt, the rest after their parent.
        assert_eq!(na[0], next_seq_hash(worker_salt(a), 5, HASH_SEED));
        assert_eq!(na[2], next_seq_hash(na[1], 7, HASH_SEED));

        // A continuation names its parent by the salted name and extends the same chain.
        let more = shared_chain(&[5, 6, 7, 8]);
        let mut next = Event::stored(a, 1, Some(more[2].seq_hash), vec![more[3]]);
        salter.rename(&mut next);
        let EventData::Stored { parent, blocks, .. } = &next.data else {
            unreachable!()
        };
        assert_eq!(*parent, Some(na[2]));
        assert_eq!(blocks[0].seq_hash, next_seq_hash(na[2], 8, HASH_SEED));

        // Removals name the salted blocks; a re-announced block gets its old name back.
        let mut removed = Event::removed(a, 2, vec![more[3].seq_hash, chain[0].seq_hash]);
        salter.rename(&mut removed);
        assert_eq!(
            removed.data,
            EventData::Removed {
                seq_hashes: vec![blocks[0].seq_hash, na[0]],
                tier: None,
            }
        );
        let mut again = Event::stored(a, 3, None, chain.clone());
        salter.rename(&mut again);
        assert_eq!(names(&again), na);
    }

    #[test]
    fn a_name_is_kept_while_its_block_is_on_some_tier() {
        let w = Worker::new(0, 0);
        let chain = shared_chain(&[5, 6]);
        let mut salter = Salter::new();
        let mut stored = Event::stored(w, 0, None, chain.clone());
        salter.rename(&mut stored);
        let EventData::Stored { blocks, .. } = &stored.data else {
            unreachable!()
        };
        let salted = blocks[1].seq_hash;
        // Offloaded: stored on the host (naming its salted parent), then off the device.
        let mut host = Event::stored_on(w, 1, Some(chain[0].seq_hash), vec![chain[1]], Tier::Host);
        salter.rename(&mut host);
        let EventData::Stored { parent, blocks, .. } = &host.data else {
            unreachable!()
        };
        assert_eq!(
            (*parent, blocks[0].seq_hash),
            (Some(blocks_parent(&stored)), salted)
        );
        let mut off_device = Event::removed_from(w, 2, vec![chain[1].seq_hash], Tier::Device);
        salter.rename(&mut off_device);
        assert_eq!(
            off_device.data,
            EventData::Removed {
                seq_hashes: vec![salted],
                tier: Some(Tier::Device),
            }
        );
        let held = |s: &Salter| s.names[&w].contains_key(&chain[1].seq_hash);
        assert!(held(&salter), "still on the host");
        let mut off_host = Event::removed_from(w, 3, vec![chain[1].seq_hash], Tier::Host);
        salter.rename(&mut off_host);
        assert!(!held(&salter), "on no tier: forgotten");
        assert_eq!(salter.names[&w].len(), 1);
    }

    /// The salted name of the first block of a renamed `Stored` event.
    fn blocks_parent(event: &Event) -> u64 {
        match &event.data {
            EventData::Stored { blocks, .. } => blocks[0].seq_hash,
            _ => unreachable!(),
        }
    }

    #[test]
    #[should_panic(expected = "a removed block is held by its worker")]
    fn a_removal_of_a_block_never_stored_is_a_bug() {
        let mut salter = Salter::new();
        salter.rename(&mut Event::removed(Worker::new(0, 0), 0, vec![1]));
    }
}
