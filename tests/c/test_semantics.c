/* The contract's semantics seen through the C ABI, in every mode (both backends, sync and
 * pooled): holes, missing parents, replacement, ordering, removal, and the stats rules. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <kvidx.h>

#include "check.h"
#include "helpers.h"

/* Holes count: depth 2 when position 2 is removed, 4 again once it is stored again. */
static void holes(const mode *m) {
    kvidx_indexer *ix = make_indexer(m);
    kvidx_block blocks[4];
    chain(blocks, 4, 100);
    uint64_t q[4];
    query_of(q, 4, 100);
    CHECK_EQ(apply(ix, stored(7, 1, blocks, 4)), KVIDX_OK);
    CHECK_EQ(depth_of(ix, q, 4, 7, 1), 4);

    uint64_t gone[1] = {blocks[2].seq_hash};
    CHECK_EQ(apply(ix, removed(7, 1, gone, 1)), KVIDX_OK);
    CHECK_EQ(depth_of(ix, q, 4, 7, 1), 2);
    CHECK_EQ(stats_of(ix).worker_blocks, 3);

    CHECK_EQ(apply(ix, stored_after(7, 1, blocks[1].seq_hash, &blocks[2], 1)), KVIDX_OK);
    CHECK_EQ(depth_of(ix, q, 4, 7, 1), 4);
    CHECK_EQ(stats_of(ix).worker_blocks, 4);

    /* Removing the first block hides the whole chain; blocks removed in any order. */
    uint64_t first[1] = {blocks[0].seq_hash};
    CHECK_EQ(apply(ix, removed(7, 1, first, 1)), KVIDX_OK);
    CHECK_EQ(depth_of(ix, q, 4, 7, 1), 0);
    uint64_t rest[3] = {blocks[3].seq_hash, blocks[1].seq_hash, blocks[2].seq_hash};
    CHECK_EQ(apply(ix, removed(7, 1, rest, 3)), KVIDX_OK);
    CHECK_EQ(stats_of(ix).worker_blocks, 0);
    CHECK_EQ(stats_of(ix).workers, 1);
    kvidx_free(ix);
}

/* A STORED whose parent the worker does not hold is rejected whole. */
static void missing_parent(const mode *m) {
    kvidx_indexer *ix = make_indexer(m);
    kvidx_block blocks[3];
    chain(blocks, 3, 200);
    uint64_t q[3];
    query_of(q, 3, 200);
    kvidx_event e = stored_after(5, 0, 123456789, blocks, 3);
    kvidx_status s = kvidx_apply_event(ix, &e);
    CHECK_EQ(s, m->event_threads == 0 ? KVIDX_ERR_PARENT_NOT_FOUND : KVIDX_OK);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    kvidx_stats st = stats_of(ix);
    CHECK_EQ(st.events_rejected, 1);
    CHECK_EQ(st.events_applied, 0);
    CHECK_EQ(st.workers, 0); /* a rejected STORED does not make the worker known */
    CHECK_EQ(st.worker_blocks, 0);
    CHECK_EQ(depth_of(ix, q, 3, 5, 0), 0);

    /* The parent held by another worker or another dp_rank does not count either. */
    CHECK_EQ(apply(ix, stored(6, 0, blocks, 1)), KVIDX_OK);
    CHECK_EQ(apply(ix, stored(5, 1, blocks, 1)), KVIDX_OK);
    s = apply(ix, stored_after(5, 0, blocks[0].seq_hash, &blocks[1], 2));
    CHECK_EQ(s, m->event_threads == 0 ? KVIDX_ERR_PARENT_NOT_FOUND : KVIDX_OK);
    CHECK_EQ(stats_of(ix).events_rejected, 2);

    /* With the parent held, the blocks continue its chain. */
    CHECK_EQ(apply(ix, stored_after(6, 0, blocks[0].seq_hash, &blocks[1], 2)), KVIDX_OK);
    CHECK_EQ(depth_of(ix, q, 3, 6, 0), 3);
    kvidx_free(ix);
}

/* Storing a held name again is a no-op; with another position/identity it replaces the old. */
static void restore_and_replace(const mode *m) {
    kvidx_indexer *ix = make_indexer(m);
    kvidx_block blocks[3];
    chain(blocks, 3, 300);
    uint64_t q[3];
    query_of(q, 3, 300);
    CHECK_EQ(apply(ix, stored(1, 0, blocks, 3)), KVIDX_OK);
    CHECK_EQ(apply(ix, stored(1, 0, blocks, 3)), KVIDX_OK);
    CHECK_EQ(stats_of(ix).worker_blocks, 3);
    CHECK_EQ(depth_of(ix, q, 3, 1, 0), 3);

    /* The name of block 2 now names a block at position 0 with another local hash. */
    kvidx_block other = {999, blocks[2].seq_hash};
    CHECK_EQ(apply(ix, stored(1, 0, &other, 1)), KVIDX_OK);
    CHECK_EQ(stats_of(ix).worker_blocks, 3);
    CHECK_EQ(depth_of(ix, q, 3, 1, 0), 2);
    uint64_t q2[1] = {999};
    CHECK_EQ(depth_of(ix, q2, 1, 1, 0), 1);
    kvidx_free(ix);
}

/* Results: depth descending, then worker_id ascending, then dp_rank ascending. */
static void ordering(const mode *m) {
    kvidx_indexer *ix = make_indexer(m);
    kvidx_block blocks[5];
    chain(blocks, 5, 400);
    uint64_t q[5];
    query_of(q, 5, 400);
    /* (worker, rank, depth) in a scrambled order. */
    const uint64_t spec[][3] = {{9, 0, 2}, {3, 2, 5}, {3, 0, 2}, {1, 1, 5}, {8, 0, 1},
                                {1, 0, 2}, {3, 1, 5}, {2, 0, 4}};
    const size_t n = sizeof spec / sizeof spec[0];
    for (size_t i = 0; i < n; i++) {
        CHECK_EQ(apply(ix, stored(spec[i][0], (uint32_t)spec[i][1], blocks, spec[i][2])),
                 KVIDX_OK);
    }
    const uint64_t want[][3] = {{1, 1, 5}, {3, 1, 5}, {3, 2, 5}, {2, 0, 4},
                                {1, 0, 2}, {3, 0, 2}, {9, 0, 2}, {8, 0, 1}};
    kvidx_match out[16];
    size_t len = find(ix, q, 5, out, 16);
    CHECK_EQ(len, n);
    for (size_t i = 0; i < len && i < n; i++) {
        CHECK_EQ(out[i].worker_id, want[i][0]);
        CHECK_EQ(out[i].dp_rank, want[i][1]);
        CHECK_EQ(out[i].depth, want[i][2]);
    }
    /* A query that diverges after 3 blocks caps every depth at 3. */
    q[3] = 77777;
    len = find(ix, q, 5, out, 16);
    CHECK_EQ(len, n);
    if (len > 0) CHECK_EQ(out[0].depth, 3);
    /* A query that starts elsewhere matches nobody. */
    len = find(ix, &q[1], 4, out, 16);
    CHECK_EQ(len, 0);
    kvidx_free(ix);
}

/* The counting rules of the contract. */
static void stats_rules(const mode *m) {
    kvidx_indexer *ix = make_indexer(m);
    kvidx_block blocks[3];
    chain(blocks, 3, 500);
    kvidx_stats st = stats_of(ix);
    CHECK(st.events_applied == 0 && st.events_rejected == 0 && st.unknown_removals == 0 &&
          st.workers == 0 && st.worker_blocks == 0);

    /* No-ops still count once and make the worker known. */
    CHECK_EQ(apply(ix, stored(1, 0, NULL, 0)), KVIDX_OK);
    CHECK_EQ(apply(ix, removed(2, 0, NULL, 0)), KVIDX_OK);
    CHECK_EQ(apply(ix, cleared(3, 0)), KVIDX_OK);
    st = stats_of(ix);
    CHECK_EQ(st.events_applied, 3);
    CHECK_EQ(st.workers, 3);
    CHECK_EQ(st.worker_blocks, 0);

    /* A REMOVED with unknown names: applied once, each unknown name counted. */
    CHECK_EQ(apply(ix, stored(1, 0, blocks, 3)), KVIDX_OK);
    uint64_t names[4] = {blocks[0].seq_hash, 1, blocks[2].seq_hash, 2};
    CHECK_EQ(apply(ix, removed(1, 0, names, 4)), KVIDX_OK);
    st = stats_of(ix);
    CHECK_EQ(st.events_applied, 5);
    CHECK_EQ(st.unknown_removals, 2);
    CHECK_EQ(st.worker_blocks, 1);

    /* CLEARED drops the blocks, the worker stays known. */
    CHECK_EQ(apply(ix, stored(4, 2, blocks, 3)), KVIDX_OK);
    CHECK_EQ(apply(ix, cleared(4, 2)), KVIDX_OK);
    st = stats_of(ix);
    CHECK_EQ(st.events_applied, 7);
    CHECK_EQ(st.workers, 4);
    CHECK_EQ(st.worker_blocks, 1);

    /* Worker removal: not an event; forgets every rank (or one). */
    CHECK_EQ(apply(ix, stored(5, 0, blocks, 2)), KVIDX_OK);
    CHECK_EQ(apply(ix, stored(5, 1, blocks, 3)), KVIDX_OK);
    CHECK_EQ(apply(ix, stored(5, 2, blocks, 1)), KVIDX_OK);
    st = stats_of(ix);
    CHECK_EQ(st.events_applied, 10);
    CHECK_EQ(st.workers, 7);
    CHECK_EQ(st.worker_blocks, 7);
    CHECK_EQ(kvidx_remove_worker_dp_rank(ix, 5, 1), KVIDX_OK);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    st = stats_of(ix);
    CHECK_EQ(st.workers, 6);
    CHECK_EQ(st.worker_blocks, 4);
    CHECK_EQ(kvidx_remove_worker(ix, 5), KVIDX_OK);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    st = stats_of(ix);
    CHECK_EQ(st.events_applied, 10);
    CHECK_EQ(st.workers, 4);
    CHECK_EQ(st.worker_blocks, 1);
    uint64_t q[3];
    query_of(q, 3, 500);
    CHECK_EQ(depth_of(ix, q, 3, 5, 0), 0);
    CHECK_EQ(depth_of(ix, q, 3, 5, 2), 0);

    /* Rejections count only in events_rejected. */
    CHECK_EQ(apply(ix, stored_after(6, 0, 4242, blocks, 1)),
             m->event_threads == 0 ? KVIDX_ERR_PARENT_NOT_FOUND : KVIDX_OK);
    st = stats_of(ix);
    CHECK_EQ(st.events_applied, 10);
    CHECK_EQ(st.events_rejected, 1);
    CHECK_EQ(st.workers, 4);
    kvidx_free(ix);
}

/* Worker removal is ordered after the worker's earlier events, also when queued. */
static void removal_is_ordered(const mode *m) {
    kvidx_indexer *ix = make_indexer(m);
    kvidx_block blocks[2];
    chain(blocks, 2, 600);
    uint64_t q[2];
    query_of(q, 2, 600);
    for (uint64_t round = 0; round < 50; round++) {
        kvidx_event e = stored(round % 5, 0, blocks, 2);
        CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_OK);
        CHECK_EQ(kvidx_remove_worker(ix, round % 5), KVIDX_OK);
    }
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    kvidx_match out[8];
    CHECK_EQ(find(ix, q, 2, out, 8), 0);
    CHECK_EQ(stats_of(ix).workers, 0);
    CHECK_EQ(stats_of(ix).events_applied, 50);
    kvidx_free(ix);
}

/* Freeing an indexer with queued events applies them first and joins its threads. */
static void free_with_queued_events(const mode *m) {
    kvidx_indexer *ix = make_indexer(m);
    kvidx_block blocks[8];
    chain(blocks, 8, 700);
    for (uint64_t w = 0; w < 200; w++) {
        kvidx_event e = stored(w, (uint32_t)(w % 3), blocks, 8);
        CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_OK);
    }
    kvidx_free(ix);
}

/* Storage tiers: blocks offloaded to host memory and evicted from the GPU, a disk copy, the
 * tiered answer beside the plain one, the weighted score, and bad tier arguments. */
static void tiers(const mode *m) {
    kvidx_indexer *ix = make_indexer(m);
    kvidx_block blocks[4];
    chain(blocks, 4, 800);
    uint64_t q[4];
    query_of(q, 4, 800);
    kvidx_event all = stored(9, 0, blocks, 4);
    CHECK_EQ(kvidx_apply_event(ix, &all), KVIDX_OK);
    /* Blocks 2 and 3 are copied to host memory, then leave the GPU; block 3 also to disk. */
    kvidx_event copy = stored_after(9, 0, blocks[1].seq_hash, &blocks[2], 2);
    kvidx_event to_disk = stored_after(9, 0, blocks[2].seq_hash, &blocks[3], 1);
    uint64_t evicted[2] = {blocks[2].seq_hash, blocks[3].seq_hash};
    kvidx_event eviction = removed(9, 0, evicted, 2);
    kvidx_event batch[3] = {copy, to_disk, eviction};
    uint32_t batch_tiers[3] = {KVIDX_TIER_HOST, KVIDX_TIER_DISK, KVIDX_TIER_DEVICE};
    CHECK_EQ(kvidx_apply_events_on_tiers(ix, batch, batch_tiers, 3), KVIDX_OK);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    CHECK_EQ(depth_of(ix, q, 4, 9, 0), 4); /* the plain depth counts every tier */
    kvidx_tiered_match out[2];
    size_t n = 0;
    CHECK_EQ(kvidx_find_matches_tiered(ix, q, 4, out, 2, &n), KVIDX_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(out[0].worker_id, 9);
    CHECK_EQ(out[0].depth, 4);
    CHECK_EQ(out[0].tier_depths[KVIDX_TIER_DEVICE], 2);
    CHECK_EQ(out[0].tier_depths[KVIDX_TIER_HOST], 4);
    CHECK_EQ(out[0].tier_depths[KVIDX_TIER_DISK], 4);
    CHECK_EQ(out[0].tier_depths[KVIDX_TIER_EXTERNAL], 4);
    double weights[4] = {1.0, 0.5, 0.25, 0.0};
    double score = 0;
    CHECK_EQ(kvidx_tiered_score(&out[0], weights, &score), KVIDX_OK);
    CHECK(score == 3.0); /* 2 blocks on the GPU + 2 in host memory at half weight */
    CHECK_EQ(kvidx_tiered_score(&out[0], NULL, &score), KVIDX_ERR_NULL_POINTER);
    /* Host copies of 2 and 3 go: block 3 stays on disk, block 2 is gone (a hole). */
    kvidx_event host_gone = removed(9, 0, evicted, 2);
    CHECK_EQ(kvidx_apply_event_on_tier(ix, &host_gone, KVIDX_TIER_HOST), KVIDX_OK);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    CHECK_EQ(kvidx_find_matches_tiered(ix, q, 4, out, 2, &n), KVIDX_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(out[0].depth, 2);
    CHECK_EQ(out[0].tier_depths[KVIDX_TIER_DEVICE], 2);
    CHECK_EQ(stats_of(ix).worker_blocks, 3);
    /* Not on that tier: an unknown removal; every tier: the plain removal. */
    uint64_t first[1] = {blocks[0].seq_hash};
    kvidx_event not_there = removed(9, 0, first, 1);
    CHECK_EQ(kvidx_apply_event_on_tier(ix, &not_there, KVIDX_TIER_EXTERNAL), KVIDX_OK);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    CHECK_EQ(stats_of(ix).unknown_removals, 1);
    CHECK_EQ(kvidx_apply_event_on_tier(ix, &not_there, KVIDX_TIER_ALL), KVIDX_OK);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    CHECK_EQ(depth_of(ix, q, 4, 9, 0), 0);
    /* Bad tiers are refused whole, before anything is applied. */
    uint64_t before = stats_of(ix).events_applied;
    CHECK_EQ(kvidx_apply_event_on_tier(ix, &all, 4), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_apply_event_on_tier(ix, &all, KVIDX_TIER_ALL), KVIDX_ERR_INVALID_ARGUMENT);
    uint32_t bad[2] = {KVIDX_TIER_HOST, 7};
    kvidx_event two[2] = {all, all};
    CHECK_EQ(kvidx_apply_events_on_tiers(ix, two, bad, 2), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_apply_events_on_tiers(ix, two, NULL, 2), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_apply_events_on_tiers(ix, NULL, NULL, 0), KVIDX_OK);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    CHECK_EQ(stats_of(ix).events_applied, before);
    /* Buffer too small: the count needed, the array untouched. */
    CHECK_EQ(kvidx_apply_event(ix, &all), KVIDX_OK);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    out[0].worker_id = 12345;
    CHECK_EQ(kvidx_find_matches_tiered(ix, q, 4, out, 0, &n), KVIDX_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(n, 1);
    CHECK_EQ(out[0].worker_id, 12345);
    CHECK_EQ(kvidx_find_matches_tiered(NULL, q, 4, out, 2, &n), KVIDX_ERR_NULL_POINTER);
    kvidx_free(ix);
}

#define FOR_EVERY_MODE(test)                                              \
    static void test##_all_modes(void) {                                  \
        for (size_t i = 0; i < NUM_MODES; i++) {                          \
            int before = checks_failed_in_test;                           \
            test(&MODES[i]);                                              \
            if (checks_failed_in_test != before)                          \
                fprintf(stderr, "  (in mode %s)\n", MODES[i].name);       \
        }                                                                 \
    }

FOR_EVERY_MODE(holes)
FOR_EVERY_MODE(missing_parent)
FOR_EVERY_MODE(restore_and_replace)
FOR_EVERY_MODE(ordering)
FOR_EVERY_MODE(stats_rules)
FOR_EVERY_MODE(removal_is_ordered)
FOR_EVERY_MODE(free_with_queued_events)
FOR_EVERY_MODE(tiers)

/* kvidx_tiered_score refuses a match whose fields contradict each other and weights that do
 * not give a finite score, writing nothing; negative finite weights are fine. */
static void tiered_score_refuses_contradictions(void) {
    const double weights[4] = {1.0, 0.8, 0.5, 0.2};
    kvidx_tiered_match good = {1, 0, 4, {2, 4, 4, 4}};
    double score = -1.0;
    CHECK_EQ(kvidx_tiered_score(&good, weights, &score), KVIDX_OK);
    CHECK(score == 1.0 * 2 + 0.8 * 2);
    const double negative[4] = {1.0, -0.5, 0.0, 0.0};
    CHECK_EQ(kvidx_tiered_score(&good, negative, &score), KVIDX_OK);
    CHECK(score == 1.0);
    kvidx_tiered_match none = {1, 0, 0, {0, 0, 0, 0}};
    CHECK_EQ(kvidx_tiered_score(&none, weights, &score), KVIDX_OK);
    CHECK(score == 0.0);
    /* Tier depths that decrease, or that end elsewhere than the depth. */
    const kvidx_tiered_match bad[] = {
        {1, 0, 4, {4, 2, 4, 4}}, {1, 0, 5, {5, 2, 4, 5}}, {1, 0, 4, {1, 2, 3, 5}},
        {1, 0, 4, {1, 2, 3, 3}}, {1, 0, 0, {0, 0, 0, 1}}, {1, 0, 1, {0, 0, 0, 0}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        score = -1.0;
        CHECK_EQ(kvidx_tiered_score(&bad[i], weights, &score), KVIDX_ERR_INVALID_ARGUMENT);
        CHECK(score == -1.0); /* nothing written */
    }
    /* NaN or infinite weights, and finite ones too large for a finite score. */
    const double bad_weights[][4] = {
        {NAN, 0.8, 0.5, 0.2},  {1.0, 0.8, 0.5, INFINITY}, {1.0, -INFINITY, 0.5, 0.2},
        {DBL_MAX, 0, 0, DBL_MAX}, {DBL_MAX, 0, 0, -DBL_MAX},
    };
    kvidx_tiered_match spread = {1, 0, 4, {2, 2, 2, 4}};
    for (size_t i = 0; i < sizeof bad_weights / sizeof bad_weights[0]; i++) {
        score = -1.0;
        CHECK_EQ(kvidx_tiered_score(&spread, bad_weights[i], &score), KVIDX_ERR_INVALID_ARGUMENT);
        CHECK(score == -1.0);
    }
}

int main(void) {
    RUN(holes_all_modes);
    RUN(missing_parent_all_modes);
    RUN(restore_and_replace_all_modes);
    RUN(ordering_all_modes);
    RUN(stats_rules_all_modes);
    RUN(removal_is_ordered_all_modes);
    RUN(free_with_queued_events_all_modes);
    RUN(tiers_all_modes);
    RUN(tiered_score_refuses_contradictions);
    return finish("test_semantics");
}
