/* Engine epochs and saved feed state through the C ABI (KVIDX_HAS_FEED_STATE): a new epoch is
 * a restart whose sequence tracking starts afresh; a feed restored from saved state classifies
 * the next batch of every publisher as the saved feed does; bad state is refused unchanged. */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#ifndef KVIDX_HAS_FEED_STATE
#error "the header lacks KVIDX_HAS_FEED_STATE"
#endif

static const uint8_t EMPTY_BATCH[] = {0x92, 0x00, 0x90}; /* [0, []] */

static uint32_t apply_in_epoch(kvidx_engine_feed *feed, kvidx_indexer *ix, uint64_t worker,
                      const uint64_t *epoch, uint8_t seq, uint64_t offset) {
    const uint8_t frame[8] = {0, 0, 0, 0, 0, 0, 0, seq};
    kvidx_engine_batch_result r;
    REQUIRE(kvidx_engine_feed_apply_epoch_at(feed, ix, worker, 0, epoch, frame, 8, EMPTY_BATCH,
                                             sizeof EMPTY_BATCH, offset, &r) == KVIDX_OK);
    return r.seq_status;
}

static void a_new_epoch_is_a_restart(void) {
    kvidx_indexer *ix = make_indexer(&MODES[0]);
    kvidx_engine_feed *feed = NULL;
    REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, 0, &feed) == KVIDX_OK);
    const uint64_t old_epoch = 10, new_epoch = 11;
    CHECK_EQ(apply_in_epoch(feed, ix, 7, &old_epoch, 0, 1), KVIDX_SEQ_FIRST);
    CHECK_EQ(apply_in_epoch(feed, ix, 7, &old_epoch, 1, 2), KVIDX_SEQ_IN_ORDER);
    /* 2 would be in order in the old epoch: in the new one it is a restart. */
    CHECK_EQ(apply_in_epoch(feed, ix, 7, &new_epoch, 2, 3), KVIDX_SEQ_RESTART);
    CHECK_EQ(apply_in_epoch(feed, ix, 7, &new_epoch, 3, 4), KVIDX_SEQ_IN_ORDER);
    CHECK_EQ(apply_in_epoch(feed, ix, 7, NULL, 4, 5), KVIDX_SEQ_IN_ORDER);
    kvidx_engine_stats es;
    CHECK_EQ(kvidx_engine_feed_stats(feed, &es), KVIDX_OK);
    CHECK_EQ(es.restarts, 1);
    CHECK_EQ(es.workers_cleared, 1);
    kvidx_engine_batch_result r;
    CHECK_EQ(kvidx_engine_feed_apply_epoch_at(feed, ix, 7, 0, &old_epoch, NULL, 0, EMPTY_BATCH,
                                              sizeof EMPTY_BATCH, 0, &r),
             KVIDX_ERR_INVALID_ARGUMENT);
    kvidx_engine_feed_free(feed);
    kvidx_free(ix);
}

static void saved_state_restores_the_classification(void) {
    kvidx_indexer *ix = make_indexer(&MODES[0]);
    kvidx_engine_feed *saved = NULL, *restored = NULL, *other = NULL;
    REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, 0, &saved) == KVIDX_OK);
    REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, 0, &restored) == KVIDX_OK);
    REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_SGLANG, 0, &other) == KVIDX_OK);
    const uint64_t epoch = 5;
    apply_in_epoch(saved, ix, 1, &epoch, 3, 1);
    apply_in_epoch(saved, ix, 2, NULL, 9, 2);

    size_t len = 0;
    CHECK_EQ(kvidx_engine_feed_save_state(saved, NULL, 0, &len), KVIDX_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(len, 20 + 2 * 40);
    CHECK_EQ(kvidx_engine_feed_save_state(saved, NULL, 0, NULL), KVIDX_ERR_NULL_POINTER);
    uint8_t *state = (uint8_t *)malloc(len);
    REQUIRE(state != NULL);
    size_t got = 0;
    CHECK_EQ(kvidx_engine_feed_save_state(saved, state, len, &got), KVIDX_OK);
    CHECK_EQ(got, len);

    CHECK_EQ(kvidx_engine_feed_restore_state(other, state, len), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_engine_feed_restore_state(restored, state, len - 1), KVIDX_ERR_MALFORMED);
    CHECK_EQ(kvidx_engine_feed_restore_state(restored, NULL, 1), KVIDX_ERR_NULL_POINTER);
    uint64_t publishers = 9;
    CHECK_EQ(kvidx_engine_feed_publishers(restored, &publishers), KVIDX_OK);
    CHECK_EQ(publishers, 0);
    CHECK_EQ(kvidx_engine_feed_restore_state(restored, state, len), KVIDX_OK);
    CHECK_EQ(kvidx_engine_feed_publishers(restored, &publishers), KVIDX_OK);
    CHECK_EQ(publishers, 2);

    /* The next batch of each publisher: in order, gap, new epoch; alike in both feeds. */
    const uint64_t next_epoch = 6;
    CHECK_EQ(apply_in_epoch(restored, ix, 1, &epoch, 4, 3), KVIDX_SEQ_IN_ORDER);
    CHECK_EQ(apply_in_epoch(restored, ix, 2, NULL, 12, 4), KVIDX_SEQ_GAP);
    CHECK_EQ(apply_in_epoch(restored, ix, 1, &next_epoch, 5, 5), KVIDX_SEQ_RESTART);
    CHECK_EQ(apply_in_epoch(saved, ix, 1, &epoch, 4, 3), KVIDX_SEQ_IN_ORDER);
    CHECK_EQ(apply_in_epoch(saved, ix, 2, NULL, 12, 4), KVIDX_SEQ_GAP);
    CHECK_EQ(apply_in_epoch(saved, ix, 1, &next_epoch, 5, 5), KVIDX_SEQ_RESTART);

    free(state);
    kvidx_engine_feed_free(saved);
    kvidx_engine_feed_free(restored);
    kvidx_engine_feed_free(other);
    kvidx_free(ix);
}

int main(void) {
    RUN(a_new_epoch_is_a_restart);
    RUN(saved_state_restores_the_classification);
    return finish("test_feed_state");
}
