//! The random operation sequences of the differential tests (see `differential.rs` for what
//! they cover), shared with the snapshot tests.

use super::{event, remove_worker, remove_worker_dp_rank, Op};
use kvidx::{Block, Event, Tier, Worker};
use proptest::prelude::*;

pub const MAX_CHAIN: u64 = 90;

fn worker_strategy() -> impl Strategy<Value = Worker> {
    // worker ids 0..2 x dp ranks 0..2: removals of a worker id hit several ranks.
    (0u64..2, 0u32..2).prop_map(|(id, rank)| Worker::new(id, rank))
}

fn tier_strategy() -> impl Strategy<Value = Tier> {
    prop_oneof![
        4 => Just(Tier::Device),
        3 => Just(Tier::Host),
        2 => Just(Tier::Disk),
        1 => Just(Tier::External),
    ]
}

/// A removal's tier: one tier, or (half the time) every tier.
fn removal_tier_strategy() -> impl Strategy<Value = Option<Tier>> {
    prop_oneof![1 => Just(None), 1 => tier_strategy().prop_map(Some)]
}

fn removed(w: Worker, names: Vec<u64>, tier: Option<Tier>) -> Op {
    event(match tier {
        None => Event::removed(w, 0, names),
        Some(tier) => Event::removed_from(w, 0, names, tier),
    })
}

pub fn template_local(template: u64, position: u64) -> u64 {
    // Repeats inside a chain and across templates: Multi entries and look-alike chains.
    (template * 7 + position * 13) % 5
}

pub fn chain_name(template: u64, position: u64, salt: u64) -> u64 {
    (1 << 20) | (template << 16) | (position << 2) | salt
}

pub fn op_strategy() -> impl Strategy<Value = Op> {
    let short_store = (
        worker_strategy(),
        prop::option::of(0u64..16),
        prop::collection::vec((0u64..3, 0u64..16), 0..5),
        tier_strategy(),
    )
        .prop_map(|(w, parent, blocks, tier)| {
            event(Event::stored_on(
                w,
                0,
                parent,
                blocks.into_iter().map(|(l, s)| Block::new(l, s)).collect(),
                tier,
            ))
        });
    let short_remove = (
        worker_strategy(),
        prop::collection::vec(0u64..16, 0..4),
        removal_tier_strategy(),
    )
        .prop_map(|(w, names, tier)| removed(w, names, tier));
    let chain_store = (
        worker_strategy(),
        0u64..3,
        0u64..MAX_CHAIN,
        1u64..60,
        0u64..2,
        tier_strategy(),
    )
        .prop_map(|(w, template, first, len, salt, tier)| {
            let last = (first + len).min(MAX_CHAIN);
            let parent = (first > 0).then(|| chain_name(template, first - 1, salt));
            let blocks = (first..last)
                .map(|p| Block::new(template_local(template, p), chain_name(template, p, salt)))
                .collect();
            event(Event::stored_on(w, 0, parent, blocks, tier))
        });
    let chain_remove = (
        worker_strategy(),
        0u64..3,
        prop::collection::vec(0u64..MAX_CHAIN, 1..6),
        0u64..2,
        removal_tier_strategy(),
    )
        .prop_map(|(w, template, positions, salt, tier)| {
            let names = positions
                .into_iter()
                .map(|p| chain_name(template, p, salt))
                .collect();
            removed(w, names, tier)
        });
    let chain_query = (
        0u64..3,
        0u64..MAX_CHAIN + 5,
        prop::option::of(0u64..MAX_CHAIN),
    )
        .prop_map(|(template, len, mutate)| {
            let mut q: Vec<u64> = (0..len).map(|p| template_local(template, p)).collect();
            if let Some(at) = mutate {
                if let Some(x) = q.get_mut(at as usize) {
                    *x += 1;
                }
            }
            Op::Query(q)
        });
    let short_query = prop::collection::vec(0u64..3, 0..8).prop_map(Op::Query);
    prop_oneof![
        4 => short_store,
        2 => short_remove,
        4 => chain_store,
        3 => chain_remove,
        4 => chain_query,
        3 => short_query,
        1 => worker_strategy().prop_map(|w| event(Event::cleared(w, 0))),
        1 => (0u64..3).prop_map(remove_worker),
        1 => worker_strategy().prop_map(remove_worker_dp_rank),
    ]
}
