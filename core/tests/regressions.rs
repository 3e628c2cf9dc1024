//! Named regression tests: each case of the contract, on every backend x mode x jump size,
//! checked against a hand-written answer and, step by step, against the reference model.

mod common;

use common::*;
use kvidx::{Error, Tier, TieredMatch, Worker};

/// A long chain of locals with repeats, so that jumps and Multi entries both matter.
fn long_locals(len: usize) -> Vec<u64> {
    (0..len as u64).map(|i| (i * 7) % 5).collect()
}

#[test]
fn prefix_match_and_order() {
    let ops = [
        stored(W1, None, &[(1, 101), (2, 102), (3, 103)]),
        stored(W0, None, &[(1, 201), (2, 202)]),
        stored(W0R1, None, &[(1, 301), (2, 302), (3, 303)]),
    ];
    expect_everywhere(&ops, &[1, 2, 3, 4], &answer(&[(W0R1, 3), (W1, 3), (W0, 2)]));
}

#[test]
fn empty_query_and_no_match() {
    let ops = [stored(W0, None, &[(1, 10)])];
    expect_everywhere(&ops, &[], &[]);
    expect_everywhere(&ops, &[9, 1], &[]);
}

#[test]
fn hole_in_the_middle_stops_the_match() {
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11), (3, 12), (4, 13)]),
        removed(W0, &[12]),
    ];
    expect_everywhere(&ops, &[1, 2, 3, 4], &answer(&[(W0, 2)]));
}

#[test]
fn restored_hole_matches_again() {
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11), (3, 12), (4, 13)]),
        removed(W0, &[12]),
        stored(W0, Some(11), &[(3, 12)]),
    ];
    expect_everywhere(&ops, &[1, 2, 3, 4], &answer(&[(W0, 4)]));
}

#[test]
fn front_eviction_hides_the_rest() {
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11), (3, 12)]),
        removed(W0, &[10]),
    ];
    expect_everywhere(&ops, &[1, 2, 3], &[]);
}

#[test]
fn removal_in_any_order() {
    let locals = long_locals(100);
    let mut ops = vec![chain(W0, &locals, 0, 100, 1000)];
    for name in [1050u64, 1099, 1003, 1064, 1032, 1031] {
        ops.push(removed(W0, &[name]));
        ops.push(query(&locals));
    }
    expect_everywhere(&ops, &locals, &answer(&[(W0, 3)]));
}

#[test]
fn hole_exactly_at_and_around_jump_points() {
    let locals = long_locals(130);
    for hole in [1usize, 2, 3, 7, 8, 9, 31, 32, 33, 64, 128, 129] {
        let ops = [
            chain(W0, &locals, 0, 130, 1000),
            chain(W1, &locals, 0, 130, 5000),
            removed(W0, &[1000 + hole as u64]),
        ];
        expect_everywhere(&ops, &locals, &answer(&[(W1, 130), (W0, hole as u32)]));
    }
}

#[test]
fn hole_filled_by_another_worker_does_not_count() {
    // W0 misses position 40; W1 holds it. A count check at jump points would see the same
    // number of holders and over-count W0.
    let locals = long_locals(80);
    let ops = [
        chain(W0, &locals, 0, 80, 1000),
        removed(W0, &[1040]),
        chain(W1, &locals, 0, 41, 5000),
    ];
    expect_everywhere(&ops, &locals, &answer(&[(W1, 41), (W0, 40)]));
}

#[test]
fn duplicate_store_is_a_no_op() {
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored(W0, Some(10), &[(2, 11)]),
    ];
    expect_everywhere(&ops, &[1, 2], &answer(&[(W0, 2)]));
}

/// A name twice in one Stored names the later block: the earlier loses it (and with its
/// only name, is no longer held), in the middle of a long chain and with name 0 too.
#[test]
fn a_name_twice_in_one_store_names_the_later_block() {
    let locals = long_locals(80);
    let mut blocks: Vec<(u64, u64)> = (0..80).map(|p| (locals[p], 1000 + p as u64)).collect();
    blocks[50].1 = 1010; // position 10's name again
    blocks[60].1 = 0;
    blocks[70].1 = 0;
    let ops = [stored(W0, None, &blocks)];
    expect_everywhere(&ops, &locals, &answer(&[(W0, 10)]));
    // The earlier blocks named again: held through the end.
    let again = [
        stored(W0, None, &blocks),
        stored(W0, Some(1009), &[(locals[10], 7)]),
        stored(W0, Some(1059), &[(locals[60], 8)]),
    ];
    expect_everywhere(&again, &locals, &answer(&[(W0, 80)]));
    // Dropping the name given twice drops the later block only.
    let dropped = [
        stored(W0, None, &blocks),
        stored(W0, Some(1009), &[(locals[10], 7)]),
        stored(W0, Some(1059), &[(locals[60], 8)]),
        removed(W0, &[1010]),
    ];
    expect_everywhere(&dropped, &locals, &answer(&[(W0, 50)]));
}

#[test]
fn name_reused_for_another_block_replaces_it() {
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        // name 11 now means a block after a different prefix
        stored(W0, None, &[(7, 20), (2, 11)]),
    ];
    expect_everywhere(&ops, &[1, 2], &answer(&[(W0, 1)]));
    expect_everywhere(&ops, &[7, 2], &answer(&[(W0, 2)]));
}

#[test]
fn two_names_for_one_identity() {
    // Two engines (or a re-hash) name the same blocks differently: removing one name keeps
    // the block held under the other.
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored(W0, None, &[(1, 90), (2, 91)]),
        removed(W0, &[11]),
    ];
    expect_everywhere(&ops, &[1, 2], &answer(&[(W0, 2)]));
    let more = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored(W0, None, &[(1, 90), (2, 91)]),
        removed(W0, &[11, 91]),
    ];
    expect_everywhere(&more, &[1, 2], &answer(&[(W0, 1)]));
}

#[test]
fn opaque_engine_hashes_agree_across_workers() {
    // Different sequence-hash algorithms per worker; identities come from local hashes only.
    let ops = [
        stored(W0, None, &[(1, 0xdead), (2, 0xbeef)]),
        stored(W1, None, &[(1, 7), (2, 8)]),
    ];
    expect_everywhere(&ops, &[1, 2], &answer(&[(W0, 2), (W1, 2)]));
}

#[test]
fn orphan_parent_rejects_the_whole_event() {
    let ops = [
        stored(W0, None, &[(1, 10)]),
        stored(W0, Some(999), &[(2, 11), (3, 12)]),
        // unknown worker with a parent: rejected, and the worker stays unknown
        stored(W1, Some(10), &[(2, 11)]),
    ];
    expect_everywhere(&ops, &[1, 2], &answer(&[(W0, 1)]));
}

#[test]
fn parent_continues_from_its_position() {
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored(W0, Some(11), &[(3, 12)]),
        stored(W1, None, &[(1, 20)]),
        stored(W1, Some(20), &[(2, 21), (3, 22)]),
    ];
    expect_everywhere(&ops, &[1, 2, 3], &answer(&[(W0, 3), (W1, 3)]));
}

#[test]
fn same_content_after_different_prefixes_is_not_confused() {
    // Position 1 holds local 2 after prefix 1 (W0) and after prefix 5 (W1): a Multi entry.
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored(W1, None, &[(5, 20), (2, 21)]),
        stored(W1, None, &[(1, 22)]),
    ];
    expect_everywhere(&ops, &[1, 2], &answer(&[(W0, 2), (W1, 1)]));
}

#[test]
fn unknown_removals_are_skipped_not_fatal() {
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11), (3, 12)]),
        removed(W0, &[777, 12, 888]),
        removed(W1, &[1]),
    ];
    expect_everywhere(&ops, &[1, 2, 3], &answer(&[(W0, 2)]));
}

#[test]
fn cleared_drops_blocks_but_keeps_the_worker() {
    let ops = [
        stored(W0, None, &[(1, 10)]),
        stored(W1, None, &[(1, 20)]),
        cleared(W0),
        cleared(Worker::new(9, 9)),
    ];
    expect_everywhere(&ops, &[1], &answer(&[(W1, 1)]));
}

#[test]
fn remove_worker_drops_every_dp_rank() {
    let ops = [
        stored(W0, None, &[(1, 10)]),
        stored(W0R1, None, &[(1, 10)]),
        stored(W1, None, &[(1, 10)]),
        remove_worker(0),
        remove_worker(42),
    ];
    expect_everywhere(&ops, &[1], &answer(&[(W1, 1)]));
}

#[test]
fn remove_worker_dp_rank_drops_one_rank() {
    let ops = [
        stored(W0, None, &[(1, 10)]),
        stored(W0R1, None, &[(1, 10)]),
        remove_worker_dp_rank(W0R1),
        remove_worker_dp_rank(Worker::new(0, 7)),
    ];
    expect_everywhere(&ops, &[1], &answer(&[(W0, 1)]));
}

#[test]
fn removed_worker_can_come_back() {
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        remove_worker(0),
        stored(W0, Some(10), &[(2, 11)]),
        stored(W0, None, &[(1, 30)]),
    ];
    expect_everywhere(&ops, &[1, 2], &answer(&[(W0, 1)]));
}

#[test]
fn empty_events_are_no_ops_that_make_the_worker_known() {
    let ops = [
        stored(W0, None, &[]),
        stored(W1, Some(5), &[]),
        removed(Worker::new(3, 0), &[]),
    ];
    expect_everywhere(&ops, &[1], &[]);
}

#[test]
fn reparenting_a_name_inside_its_own_chain() {
    // The new block takes its own parent's name: the parent is no longer held at all, so
    // the worker holds positions 0 and 2 of [1, 2, 3], and its depth is 1.
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored(W0, Some(11), &[(3, 11)]),
    ];
    expect_everywhere(&ops, &[1, 2, 3], &answer(&[(W0, 1)]));
}

#[test]
fn query_longer_than_any_chain() {
    let locals = long_locals(40);
    let ops = [chain(W0, &locals, 0, 40, 1000)];
    let mut q = locals.clone();
    q.extend([9, 9, 9]);
    expect_everywhere(&ops, &q, &answer(&[(W0, 40)]));
}

// Storage tiers (docs/contract.md section 1, "Storage tiers").

#[test]
fn tier_depths_are_cumulative_from_the_device() {
    // W0: blocks 0-1 on the GPU, 2 in host memory, 3 on disk. W1: everything in host memory.
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored_on(W0, Some(11), &[(3, 12)], Tier::Host),
        stored_on(W0, Some(12), &[(4, 13)], Tier::Disk),
        stored_on(W1, None, &[(1, 20), (2, 21), (3, 22)], Tier::Host),
    ];
    let want = tiered_answer(&[(W0, [2, 3, 4, 4]), (W1, [0, 3, 3, 3])]);
    expect_tiered_everywhere(&ops, &[1, 2, 3, 4, 5], &want);
    // The plain answer is the depth on any tier.
    expect_everywhere(&ops, &[1, 2, 3, 4, 5], &answer(&[(W0, 4), (W1, 3)]));
}

#[test]
fn offloading_then_evicting_from_the_device_moves_a_block_down() {
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11), (3, 12)]),
        // The engine copies block 2 to host memory, then evicts it from the GPU.
        stored_on(W0, Some(11), &[(3, 12)], Tier::Host),
        removed_from(W0, &[12], Tier::Device),
    ];
    expect_tiered_everywhere(&ops, &[1, 2, 3], &tiered_answer(&[(W0, [2, 3, 3, 3])]));
}

#[test]
fn a_removal_from_one_tier_leaves_the_others() {
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored_on(W0, None, &[(1, 10), (2, 11)], Tier::Disk),
        // A hole on the device only; the disk copy still holds the chain.
        removed_from(W0, &[10], Tier::Device),
        // Not on the host: an unknown removal that changes nothing.
        removed_from(W0, &[11], Tier::Host),
    ];
    expect_tiered_everywhere(&ops, &[1, 2], &tiered_answer(&[(W0, [0, 0, 2, 2])]));
    // Removing the last tier drops the block; a removal without a tier drops every tier.
    let mut more = ops.to_vec();
    more.push(removed_from(W0, &[10], Tier::Disk));
    expect_tiered_everywhere(&more, &[1, 2], &[]);
    let mut all = ops.to_vec();
    all.push(removed(W0, &[11]));
    expect_tiered_everywhere(&all, &[1, 2], &tiered_answer(&[(W0, [0, 0, 1, 1])]));
}

#[test]
fn a_renamed_block_starts_over_on_its_new_tier() {
    // Name 11 moves to another prefix (3 instead of 2): its host copy is not carried over.
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored_on(W0, Some(10), &[(2, 11)], Tier::Host),
        stored_on(W0, Some(10), &[(3, 11)], Tier::External),
    ];
    expect_tiered_everywhere(&ops, &[1, 3], &tiered_answer(&[(W0, [1, 1, 1, 2])]));
    expect_tiered_everywhere(&ops, &[1, 2], &tiered_answer(&[(W0, [1, 1, 1, 1])]));
}

#[test]
fn two_names_of_one_prefix_hold_it_on_both_their_tiers() {
    let ops = [
        stored_on(W0, None, &[(1, 10)], Tier::Disk),
        stored_on(W0, None, &[(1, 20)], Tier::Host),
        removed_from(W0, &[20], Tier::Host),
    ];
    expect_tiered_everywhere(&ops[..2], &[1], &tiered_answer(&[(W0, [0, 1, 1, 1])]));
    expect_tiered_everywhere(&ops, &[1], &tiered_answer(&[(W0, [0, 0, 1, 1])]));
}

#[test]
fn cleared_and_removed_workers_drop_every_tier() {
    let ops = [
        stored_on(W0, None, &[(1, 10)], Tier::Host),
        stored_on(W1, None, &[(1, 20)], Tier::Disk),
        cleared(W0),
        remove_worker(1),
    ];
    expect_tiered_everywhere(&ops, &[1], &[]);
}

#[test]
fn a_tiered_score_weighs_each_block_by_its_fastest_tier_and_refuses_contradictions() {
    let m = |depth, tier_depths| TieredMatch {
        worker_id: 1,
        dp_rank: 0,
        depth,
        tier_depths,
    };
    let weights = [1.0, 0.8, 0.5, 0.2];
    // The contract's example: A B on the GPU, C and D in host memory, D also on disk.
    assert_eq!(
        m(4, [2, 4, 4, 4]).score(&weights),
        Ok(2.0 * 1.0 + 2.0 * 0.8)
    );
    assert_eq!(m(0, [0; 4]).score(&weights), Ok(0.0), "no match scores 0");
    // Negative weights are finite weights: a tier's blocks count against the worker.
    assert_eq!(m(3, [1, 1, 3, 3]).score(&[1.0, 0.0, -0.5, 0.0]), Ok(0.0));
    let invalid =
        |m: TieredMatch, w: [f64; 4]| matches!(m.score(&w), Err(Error::InvalidArgument(_)));
    // Tier depths that decrease, or end elsewhere than the depth.
    for (depth, tier_depths) in [
        (4, [4, 2, 4, 4]),
        (5, [5, 2, 4, 5]),
        (4, [1, 2, 3, 5]),
        (4, [1, 2, 3, 3]),
        (0, [0, 0, 0, 1]),
        (1, [0, 0, 0, 0]),
    ] {
        let bad = m(depth, tier_depths);
        assert!(!bad.is_consistent(), "{bad:?}");
        assert!(invalid(bad, weights), "{bad:?}");
    }
    // Weights that are not finite, or too large for a finite score.
    let good = m(4, [2, 2, 2, 4]);
    for w in [
        [f64::NAN, 0.8, 0.5, 0.2],
        [1.0, 0.8, 0.5, f64::INFINITY],
        [1.0, f64::NEG_INFINITY, 0.5, 0.2],
        [f64::MAX, 0.0, 0.0, f64::MAX],
        [f64::MAX, 0.0, 0.0, -f64::MAX],
    ] {
        assert!(invalid(good, w), "{w:?}");
    }
    // Every answer a lookup gives scores.
    let ops = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored_on(W0, Some(11), &[(3, 12)], Tier::Host),
        stored_on(W1, None, &[(1, 20), (2, 21), (3, 22)], Tier::Disk),
    ];
    for (name, config) in configs() {
        let mut run = Lockstep::new(&name, config);
        for op in &ops {
            run.run(op);
        }
        run.indexer.flush().unwrap();
        for answer in run.indexer.find_matches_tiered(&[1, 2, 3]) {
            assert!(answer.is_consistent(), "{name}: {answer:?}");
            assert!(answer.score(&weights).is_ok(), "{name}: {answer:?}");
        }
    }
}

/// `apply_events` applies consecutive events of one worker as one change: the answers, the
/// counters and (synchronously) the first error must be those of applying them one by one.
#[test]
fn events_applied_in_one_call_match_events_applied_one_by_one() {
    let events: Vec<kvidx::Event> = [
        stored(W0, None, &[(1, 10), (2, 11)]),
        stored(W0, Some(999), &[(3, 12)]), // rejected: unknown parent
        removed(W0, &[11, 777]),           // one unknown removal
        stored(W1, None, &[(1, 20)]),
        stored(W1, Some(20), &[(2, 21)]),
        // Five events of W0 in a row: more than one change holds.
        stored(W0, Some(10), &[(2, 13)]),
        stored(W0, Some(13), &[(3, 14)]),
        stored(W0, Some(14), &[(4, 15)]),
        stored(W0, Some(888), &[(4, 16)]), // rejected
        removed(W0, &[15]),
        stored(W1, Some(555), &[(9, 22)]), // rejected
        cleared(W1),
        stored(W1, None, &[(1, 23)]),
    ]
    .into_iter()
    .map(|op| match op {
        Op::Write(kvidx::Write::Event(event)) => event,
        other => unreachable!("only events here: {other:?}"),
    })
    .collect();
    for (name, config) in configs() {
        let one_by_one = kvidx::Indexer::new(config).expect("valid config");
        let mut first_error = None;
        for event in events.clone() {
            if let Err(e) = one_by_one.apply_event(event) {
                first_error = first_error.or(Some(e));
            }
        }
        let at_once = kvidx::Indexer::new(config).expect("valid config");
        let result = at_once.apply_events(events.clone());
        one_by_one.flush().unwrap();
        at_once.flush().unwrap();
        assert_eq!(result.err(), first_error, "{name}: first error");
        if config.event_threads == 0 {
            assert_eq!(first_error, Some(kvidx::Error::ParentNotFound), "{name}");
        }
        assert_eq!(at_once.stats(), one_by_one.stats(), "{name}: counters");
        let stats = at_once.stats();
        assert_eq!(
            (
                stats.events_applied,
                stats.events_rejected,
                stats.unknown_removals
            ),
            (10, 3, 1),
            "{name}"
        );
        for q in [&[1u64, 2][..], &[1, 2, 3], &[1]] {
            assert_eq!(
                at_once.find_matches(q),
                one_by_one.find_matches(q),
                "{name}: {q:?}"
            );
        }
        assert_eq!(
            at_once.find_matches(&[1, 2, 3, 4]),
            answer(&[(W0, 3), (W1, 1)]),
            "{name}"
        );
    }
}
