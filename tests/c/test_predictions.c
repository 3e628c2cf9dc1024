/* Predicted blocks through the C ABI (KVIDX_HAS_PREDICTIONS): kvidx_predict credits a worker
 * with a chain until its TTL runs out on the indexer's clock (a manual one here, so nothing
 * sleeps) or events settle it; kvidx_find_matches_predicted reports both depths while
 * kvidx_find_matches stays as it was; the byte bound and the per-worker capacity hold. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#ifndef KVIDX_HAS_PREDICTIONS
#error "the header lacks KVIDX_HAS_PREDICTIONS"
#endif

static const uint64_t MS = 1000000;

static kvidx_indexer *manual_indexer(const mode *m, uint64_t max_bytes, uint64_t capacity) {
    kvidx_config config = kvidx_config_default();
    config.backend = m->backend;
    config.event_threads = m->event_threads;
    config.jump_size = m->jump_size;
    kvidx_prediction_config p = kvidx_prediction_config_default();
    p.max_bytes = max_bytes;
    p.worker_capacity = capacity;
    p.clock = KVIDX_CLOCK_MANUAL;
    kvidx_indexer *ix = NULL;
    REQUIRE(kvidx_new_with_predictions(&config, NULL, &p, &ix) == KVIDX_OK);
    REQUIRE(ix != NULL);
    return ix;
}

/* The predicted answer of a query, into `out` (at most 8), returning how many. */
static size_t predicted(const kvidx_indexer *ix, const uint64_t *q, size_t n,
                        kvidx_predicted_match out[8]) {
    size_t len = 99;
    CHECK_EQ(kvidx_find_matches_predicted(ix, q, n, out, 8, &len), KVIDX_OK);
    return len;
}

static void a_prediction_extends_only_the_predicted_depth(void) {
    for (size_t i = 0; i < NUM_MODES; i++) {
        kvidx_indexer *ix = manual_indexer(&MODES[i], 0, 0);
        const kvidx_block chain[] = {{1, 1001}, {2, 1002}};
        kvidx_event e = stored(1, 0, chain, 2);
        CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_OK);
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        const uint64_t q[] = {1, 2, 3, 4};
        CHECK_EQ(kvidx_predict(ix, 1, 0, q, 4, 100 * MS), KVIDX_OK);
        CHECK_EQ(kvidx_predict(ix, 2, 0, q, 3, 100 * MS), KVIDX_OK);

        kvidx_match plain[4];
        size_t len = 0;
        CHECK_EQ(kvidx_find_matches(ix, q, 4, plain, 4, &len), KVIDX_OK);
        CHECK_EQ(len, 1);
        CHECK_EQ(plain[0].depth, 2);

        kvidx_predicted_match m[8];
        CHECK_EQ(predicted(ix, q, 4, m), 2);
        CHECK_EQ(m[0].worker_id, 1);
        CHECK_EQ(m[0].depth, 2);
        CHECK_EQ(m[0].predicted_depth, 4);
        CHECK_EQ(m[1].worker_id, 2);
        CHECK_EQ(m[1].depth, 0);
        CHECK_EQ(m[1].predicted_depth, 3);

        /* Too small a buffer: the count needed, nothing written. */
        kvidx_predicted_match one = {77, 77, 77, 77};
        len = 0;
        CHECK_EQ(kvidx_find_matches_predicted(ix, q, 4, &one, 1, &len),
                 KVIDX_ERR_BUFFER_TOO_SMALL);
        CHECK_EQ(len, 2);
        CHECK_EQ(one.worker_id, 77);

        /* Expiry on the manual clock. */
        CHECK_EQ(kvidx_advance_time(ix, 99 * MS), KVIDX_OK);
        CHECK_EQ(predicted(ix, q, 4, m), 2);
        CHECK_EQ(kvidx_set_time(ix, 100 * MS), KVIDX_OK);
        CHECK_EQ(predicted(ix, q, 4, m), 1);
        CHECK_EQ(m[0].predicted_depth, 2);
        uint64_t now = 0;
        CHECK_EQ(kvidx_now(ix, &now), KVIDX_OK);
        CHECK_EQ(now, 100 * MS);
        CHECK_EQ(kvidx_set_time(ix, 1), KVIDX_ERR_INVALID_ARGUMENT);
        kvidx_free(ix);
    }
}

static void events_settle_predictions(void) {
    for (size_t i = 0; i < NUM_MODES; i++) {
        kvidx_indexer *ix = manual_indexer(&MODES[i], 0, 0);
        const uint64_t q[] = {1, 2, 3};
        CHECK_EQ(kvidx_predict(ix, 1, 0, q, 3, 100 * MS), KVIDX_OK);
        CHECK_EQ(kvidx_predict(ix, 2, 0, q, 3, 100 * MS), KVIDX_OK);
        /* A STORED confirms two blocks; a REMOVED of one of them leaves it neither held nor
         * predicted. */
        const kvidx_block chain[] = {{1, 1001}, {2, 1002}};
        kvidx_event e = stored(1, 0, chain, 2);
        CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_OK);
        const uint64_t name = 1002;
        e = removed(1, 0, &name, 1);
        CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_OK);
        /* A CLEARED drops worker 2's predictions. */
        e = cleared(2, 0);
        CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_OK);
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        kvidx_predicted_match m[8];
        CHECK_EQ(predicted(ix, q, 3, m), 1);
        CHECK_EQ(m[0].worker_id, 1);
        CHECK_EQ(m[0].depth, 1);
        CHECK_EQ(m[0].predicted_depth, 1);
        kvidx_prediction_stats s;
        memset(&s, 0xab, sizeof s);
        CHECK_EQ(kvidx_get_prediction_stats(ix, &s), KVIDX_OK);
        CHECK_EQ(s.confirmed, 2);
        CHECK_EQ(s.dropped_by_events, 3);
        CHECK_EQ(s.blocks, 1);
        CHECK_EQ(s.workers, 1);
        /* Removing the worker drops the rest. */
        CHECK_EQ(kvidx_remove_worker(ix, 1), KVIDX_OK);
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        CHECK_EQ(predicted(ix, q, 3, m), 0);
        kvidx_free(ix);
    }
}

static void bounds_hold(void) {
    /* Per-worker capacity: the least recently predicted blocks go first. */
    kvidx_indexer *ix = manual_indexer(&MODES[0], 0, 2);
    const uint64_t a[] = {1, 2, 3};
    CHECK_EQ(kvidx_predict(ix, 1, 0, a, 3, 100 * MS), KVIDX_OK);
    kvidx_predicted_match m[8];
    CHECK_EQ(predicted(ix, a, 3, m), 1);
    CHECK_EQ(m[0].predicted_depth, 2);
    kvidx_free(ix);

    /* Bytes: a flood stays within the bound the stats report against. */
    const uint64_t max_bytes = 64 * 1024;
    ix = manual_indexer(&MODES[0], max_bytes, 0);
    for (uint64_t i = 0; i < 20000; i++) {
        const uint64_t chain[] = {i * 4, i * 4 + 1, i * 4 + 2, i * 4 + 3};
        CHECK_EQ(kvidx_predict(ix, i % 7, 0, chain, 4, 100 * MS), KVIDX_OK);
    }
    kvidx_prediction_stats s;
    CHECK_EQ(kvidx_get_prediction_stats(ix, &s), KVIDX_OK);
    CHECK(s.bytes <= max_bytes);
    CHECK(s.blocks > 0);
    CHECK_EQ(s.blocks + s.dropped_for_bytes, 80000);
    kvidx_free(ix);
}

static void bad_arguments_are_refused(void) {
    kvidx_prediction_config p = kvidx_prediction_config_default();
    CHECK_EQ(p.max_bytes, 0);
    CHECK_EQ(p.worker_capacity, 0);
    CHECK_EQ(p.clock, KVIDX_CLOCK_MONOTONIC);
    p.clock = 7;
    kvidx_indexer *ix = NULL;
    CHECK_EQ(kvidx_new_with_predictions(NULL, NULL, &p, &ix), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK(ix == NULL);
    CHECK_EQ(kvidx_new_with_predictions(NULL, NULL, NULL, NULL), KVIDX_ERR_NULL_POINTER);
    /* Defaults: a monotonic clock the caller cannot set. */
    REQUIRE(kvidx_new_with_predictions(NULL, NULL, NULL, &ix) == KVIDX_OK);
    CHECK_EQ(kvidx_set_time(ix, 5), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_advance_time(ix, 5), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_predict(ix, 1, 0, NULL, 3, 1), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_predict(ix, 1, 0, NULL, 0, 1), KVIDX_OK);
    CHECK_EQ(kvidx_predict(NULL, 1, 0, NULL, 0, 1), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_now(ix, NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_get_prediction_stats(ix, NULL), KVIDX_ERR_NULL_POINTER);
    size_t len = 5;
    CHECK_EQ(kvidx_find_matches_predicted(ix, NULL, 0, NULL, 0, &len), KVIDX_OK);
    CHECK_EQ(len, 0);
    CHECK_EQ(kvidx_find_matches_predicted(ix, NULL, 0, NULL, 0, NULL), KVIDX_ERR_NULL_POINTER);
    kvidx_free(ix);
}

int main(void) {
    RUN(a_prediction_extends_only_the_predicted_depth);
    RUN(events_settle_predictions);
    RUN(bounds_hold);
    RUN(bad_arguments_are_refused);
    return finish("test_predictions");
}
