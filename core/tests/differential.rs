//! Differential property tests: every backend x {sync, pooled} x several jump sizes against
//! the reference model, on random operation sequences.
//!
//! Two kinds of operations mix in one sequence:
//! - short events over a tiny alphabet of locals (0..3) and names (0..16): collisions, shared
//!   prefixes, duplicate stores, names reused for other blocks, two names for one identity,
//!   orphan parents, unknown removals;
//! - long chains from a few templates (up to 90 positions, so jumps of every size matter):
//!   stored from any position with a parent, removed at any positions (holes, front eviction,
//!   any order), re-stored, and queried with and without a mutation.
//!
//! Stores and removals carry storage tiers (device most often; removals of one tier or of
//! all), so blocks move between tiers, sit on several at once, and leave holes on one tier
//! only; every query compares both the plain and the tiered answer.
//!
//! Cases per configuration: `KVIDX_PROPTEST_CASES` (default 24). The long-run figure in the
//! README comes from `KVIDX_PROPTEST_CASES=...`.

mod common;

use common::ops::{op_strategy, template_local, MAX_CHAIN};
use common::{configs_of, Lockstep, Op};
use kvidx::BackendKind;
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("KVIDX_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

fn check(kind: BackendKind, ops: &[Op]) {
    for (name, config) in configs_of(kind) {
        let mut lockstep = Lockstep::new(&name, config);
        for op in ops {
            lockstep.run(op);
        }
        // A final full sweep: every template prefix, every short query of length 2.
        for template in 0..3 {
            let q: Vec<u64> = (0..MAX_CHAIN)
                .map(|p| template_local(template, p))
                .collect();
            lockstep.run(&Op::Query(q));
        }
        for a in 0..3 {
            for b in 0..3 {
                lockstep.run(&Op::Query(vec![a, b]));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn positional_matches_reference(ops in prop::collection::vec(op_strategy(), 1..80)) {
        check(BackendKind::Positional, &ops);
    }

    #[test]
    fn radix_matches_reference(ops in prop::collection::vec(op_strategy(), 1..80)) {
        check(BackendKind::Radix, &ops);
    }

    #[test]
    fn runs_matches_reference(ops in prop::collection::vec(op_strategy(), 1..80)) {
        check(BackendKind::Runs, &ops);
    }
}
