/* An engine feed's "missed from the start" through the C ABI (KVIDX_HAS_FEED_START): a
 * publisher's sequence starts at 0, so a first batch above 0 follows batches the feed never
 * saw. kvidx_engine_feed_next_seq says where the feed expects each publisher from (0 before its
 * first batch: where a caller asks the replay socket from), kvidx_engine_feed_start_stats
 * counts the late publishers and their batches before, and the worker is not cleared. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#ifndef KVIDX_HAS_FEED_START
#error "the header lacks KVIDX_HAS_FEED_START"
#endif

static const mode SYNC = {"sync", KVIDX_BACKEND_POSITIONAL, 0, 0};

static const uint8_t EMPTY_BATCH[] = {0x92, 0x00, 0x90}; /* [0, []] */

static void seq_frame(uint64_t seq, uint8_t out[8]) {
    for (int i = 7; i >= 0; i--, seq >>= 8) out[i] = (uint8_t)(seq & 0xff);
}

static kvidx_engine_batch_result feed_batch(const kvidx_engine_feed *feed, const kvidx_indexer *ix,
                                            uint32_t rank, uint64_t seq) {
    uint8_t frame[8];
    seq_frame(seq, frame);
    kvidx_engine_batch_result r;
    memset(&r, 0, sizeof r);
    CHECK_EQ(kvidx_engine_feed_apply(feed, ix, 7, rank, frame, 8, EMPTY_BATCH, sizeof EMPTY_BATCH,
                                     &r),
             KVIDX_OK);
    return r;
}

static uint64_t next_seq(const kvidx_engine_feed *feed, uint32_t rank) {
    uint64_t next = 12345;
    CHECK_EQ(kvidx_engine_feed_next_seq(feed, 7, rank, &next), KVIDX_OK);
    return next;
}

static void a_first_batch_above_0_is_reported_missed_from_the_start(void) {
    kvidx_indexer *ix = make_indexer(&SYNC);
    kvidx_engine_feed *feed = NULL;
    REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, 0, &feed) == KVIDX_OK);
    kvidx_engine_start_stats s;
    memset(&s, 0xab, sizeof s);
    CHECK_EQ(kvidx_engine_feed_start_stats(feed, &s), KVIDX_OK);
    CHECK_EQ(s.late_starts, 0);
    CHECK_EQ(s.batches_missed_from_start, 0);

    /* Rank 0 is first seen at sequence 5: batches 0-4 came before; until then it is
     * expected from 0, which is where a caller with a replay socket asks from. */
    CHECK_EQ(next_seq(feed, 0), 0);
    kvidx_engine_batch_result r = feed_batch(feed, ix, 0, 5);
    CHECK_EQ(r.seq_status, KVIDX_SEQ_FIRST);
    CHECK_EQ(r.worker_cleared, 0);
    CHECK_EQ(next_seq(feed, 0), 6);
    r = feed_batch(feed, ix, 0, 6);
    CHECK_EQ(r.seq_status, KVIDX_SEQ_IN_ORDER);
    /* Rank 1 starts at 0: nothing missed. */
    r = feed_batch(feed, ix, 1, 0);
    CHECK_EQ(r.seq_status, KVIDX_SEQ_FIRST);
    CHECK_EQ(next_seq(feed, 1), 1);

    CHECK_EQ(kvidx_engine_feed_start_stats(feed, &s), KVIDX_OK);
    CHECK_EQ(s.late_starts, 1);
    CHECK_EQ(s.batches_missed_from_start, 5);
    kvidx_engine_stats es;
    CHECK_EQ(kvidx_engine_feed_stats(feed, &es), KVIDX_OK);
    CHECK_EQ(es.gaps, 0);
    CHECK_EQ(es.workers_cleared, 0);

    /* A forgotten publisher is expected from 0 again. */
    uint8_t known = 0;
    CHECK_EQ(kvidx_engine_feed_forget(feed, 7, 0, &known), KVIDX_OK);
    CHECK_EQ(known, 1);
    CHECK_EQ(next_seq(feed, 0), 0);
    kvidx_engine_feed_free(feed);
    kvidx_free(ix);
}

static void bad_arguments_are_refused(void) {
    kvidx_engine_feed *feed = NULL;
    REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_SGLANG, 0, &feed) == KVIDX_OK);
    uint64_t next = 0;
    kvidx_engine_start_stats s;
    CHECK_EQ(kvidx_engine_feed_next_seq(NULL, 7, 0, &next), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_engine_feed_next_seq(feed, 7, 0, NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_engine_feed_start_stats(NULL, &s), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_engine_feed_start_stats(feed, NULL), KVIDX_ERR_NULL_POINTER);
    kvidx_engine_feed_free(feed);
}

int main(void) {
    RUN(a_first_batch_above_0_is_reported_missed_from_the_start);
    RUN(bad_arguments_are_refused);
    return finish("test_feed_start");
}
