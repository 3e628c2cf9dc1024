/* Every function of the C ABI, every status code a caller can provoke, every bad input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvidx.h>

#include "check.h"
#include "helpers.h"

static const mode SYNC = {"sync", KVIDX_BACKEND_POSITIONAL, 0, 0};
static const mode POOLED = {"pooled", KVIDX_BACKEND_RADIX, 2, 0};

static void versions_match_the_header(void) {
    CHECK_EQ(KVIDX_ABI_VERSION, 1);
    CHECK_EQ(kvidx_abi_version(), KVIDX_ABI_VERSION);
    CHECK(strcmp(kvidx_version(), KVIDX_VERSION) == 0);
    char joined[64];
    snprintf(joined, sizeof joined, "%d.%d.%d", KVIDX_VERSION_MAJOR, KVIDX_VERSION_MINOR,
             KVIDX_VERSION_PATCH);
    CHECK(strncmp(joined, KVIDX_VERSION, strlen(joined)) == 0);
}

static void status_codes_have_fixed_values_and_texts(void) {
    CHECK_EQ(KVIDX_OK, 0);
    CHECK_EQ(KVIDX_ERR_NULL_POINTER, 1);
    CHECK_EQ(KVIDX_ERR_INVALID_ARGUMENT, 2);
    CHECK_EQ(KVIDX_ERR_BUFFER_TOO_SMALL, 3);
    CHECK_EQ(KVIDX_ERR_PARENT_NOT_FOUND, 4);
    CHECK_EQ(KVIDX_ERR_SHUT_DOWN, 5);
    CHECK_EQ(KVIDX_ERR_PANIC, 6);
    CHECK_EQ(KVIDX_ERR_POISONED, 7);
    CHECK_EQ(KVIDX_ERR_MALFORMED, 8);
    CHECK_EQ(KVIDX_ERR_TOO_LARGE, 9);
    CHECK_EQ(KVIDX_ERR_IO, 10);
    static const char *names[] = {"KVIDX_OK",
                                  "KVIDX_ERR_NULL_POINTER",
                                  "KVIDX_ERR_INVALID_ARGUMENT",
                                  "KVIDX_ERR_BUFFER_TOO_SMALL",
                                  "KVIDX_ERR_PARENT_NOT_FOUND",
                                  "KVIDX_ERR_SHUT_DOWN",
                                  "KVIDX_ERR_PANIC",
                                  "KVIDX_ERR_POISONED",
                                  "KVIDX_ERR_MALFORMED",
                                  "KVIDX_ERR_TOO_LARGE",
                                  "KVIDX_ERR_IO"};
    for (uint32_t code = 0; code < 11; code++) {
        const char *text = kvidx_status_str(code);
        CHECK(text != NULL);
        if (text != NULL) CHECK(strstr(text, names[code]) == text);
    }
    const uint32_t unknown[] = {11, 100, UINT32_MAX};
    for (size_t i = 0; i < 3; i++) {
        const char *text = kvidx_status_str(unknown[i]);
        CHECK(text != NULL);
        if (text != NULL) CHECK(strstr(text, "unknown") != NULL);
    }
    CHECK(kvidx_status_str(1) != kvidx_status_str(2));
}

static void config_default_is_runs_one_thread(void) {
    kvidx_config c = kvidx_config_default();
    CHECK_EQ(c.backend, KVIDX_BACKEND_RUNS);
    CHECK_EQ(c.event_threads, 1);
    CHECK_EQ(c.jump_size, 0);
}

static void new_validates_config_and_writes_out_only_on_success(void) {
    kvidx_indexer *sentinel = (kvidx_indexer *)&tests_passed; /* never dereferenced */
    kvidx_indexer *ix = sentinel;
    CHECK_EQ(kvidx_new(NULL, NULL), KVIDX_ERR_NULL_POINTER);
    kvidx_config c = kvidx_config_default();
    CHECK_EQ(kvidx_new(&c, NULL), KVIDX_ERR_NULL_POINTER);

    const uint32_t bad_backends[] = {3, 4, 99, UINT32_MAX};
    for (size_t i = 0; i < 4; i++) {
        c = kvidx_config_default();
        c.backend = bad_backends[i];
        CHECK_EQ(kvidx_new(&c, &ix), KVIDX_ERR_INVALID_ARGUMENT);
        CHECK(ix == sentinel);
    }
    c = kvidx_config_default();
    c.event_threads = 1025;
    CHECK_EQ(kvidx_new(&c, &ix), KVIDX_ERR_INVALID_ARGUMENT);
    c.event_threads = UINT32_MAX;
    CHECK_EQ(kvidx_new(&c, &ix), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK(ix == sentinel);

    /* NULL config: the defaults. */
    CHECK_EQ(kvidx_new(NULL, &ix), KVIDX_OK);
    CHECK(ix != sentinel && ix != NULL);
    kvidx_free(ix);

    const uint32_t backends[] = {KVIDX_BACKEND_POSITIONAL, KVIDX_BACKEND_RADIX, KVIDX_BACKEND_RUNS};
    const uint32_t threads[] = {0, 1, 4};
    /* Any jump size is accepted (larger ones act as the largest jump, 65536). */
    const uint32_t jumps[] = {0, 1, 5, 65536, 65537, UINT32_MAX};
    for (size_t b = 0; b < 3; b++) {
        for (size_t t = 0; t < 3; t++) {
            for (size_t j = 0; j < 6; j++) {
                c.backend = backends[b];
                c.event_threads = threads[t];
                c.jump_size = jumps[j];
                ix = NULL;
                CHECK_EQ(kvidx_new(&c, &ix), KVIDX_OK);
                CHECK(ix != NULL);
                kvidx_free(ix);
            }
        }
    }
    kvidx_free(NULL); /* a no-op */
    /* Every other setting is range-checked: INVALID_ARGUMENT, never an abort. */
    c = kvidx_config_default();
    c.event_threads = 1025;
    ix = NULL;
    CHECK_EQ(kvidx_new(&c, &ix), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK(ix == NULL);
}

static void null_handle_is_null_pointer_everywhere(void) {
    kvidx_event e = cleared(1, 0);
    kvidx_stats st;
    kvidx_match out[4];
    size_t len = 77;
    uint64_t q[1] = {1};
    CHECK_EQ(kvidx_apply_event(NULL, &e), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_apply_events(NULL, &e, 1), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_apply_events(NULL, NULL, 0), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_remove_worker(NULL, 1), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_remove_worker_dp_rank(NULL, 1, 0), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_flush(NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_find_matches(NULL, q, 1, out, 4, &len), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(len, 77);
    CHECK_EQ(kvidx_get_stats(NULL, &st), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_debug_panic(NULL), KVIDX_ERR_NULL_POINTER);
}

/* Malformed events are refused whole, count nowhere, and leave the index unchanged. */
static void check_event_shapes(const mode *m) {
    kvidx_indexer *ix = make_indexer(m);
    kvidx_block blocks[2];
    chain(blocks, 2, 10);
    uint64_t names[2] = {10000, 11000};

    CHECK_EQ(kvidx_apply_event(ix, NULL), KVIDX_ERR_NULL_POINTER);

    kvidx_event e = stored(1, 0, blocks, 2);
    e.kind = 3;
    CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_ERR_INVALID_ARGUMENT);
    e.kind = UINT32_MAX;
    CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_ERR_INVALID_ARGUMENT);

    e = stored(1, 0, blocks, 2);
    e.has_parent = 2;
    CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_ERR_INVALID_ARGUMENT);
    e.has_parent = 255;
    CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_ERR_INVALID_ARGUMENT);

    e = stored(1, 0, NULL, 1);
    CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_ERR_NULL_POINTER);
    e = removed(1, 0, NULL, 2);
    CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_ERR_NULL_POINTER);

    /* A misaligned array, or a length whose byte size overflows, is an invalid argument. */
    unsigned char raw[sizeof(kvidx_block) * 3];
    e = stored(1, 0, (const kvidx_block *)(const void *)(raw + 1), 1);
    CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_ERR_INVALID_ARGUMENT);
    e = stored(1, 0, blocks, SIZE_MAX);
    CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_ERR_INVALID_ARGUMENT);
    e = removed(1, 0, names, SIZE_MAX / 4);
    CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_ERR_INVALID_ARGUMENT);

    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    kvidx_stats st = stats_of(ix);
    CHECK_EQ(st.events_applied, 0);
    CHECK_EQ(st.events_rejected, 0);
    CHECK_EQ(st.workers, 0);

    /* Fields a kind does not use are ignored, whatever they hold. */
    e = removed(1, 0, names, 1);
    e.has_parent = 9;
    e.blocks = NULL;
    e.num_blocks = 5;
    CHECK_EQ(apply(ix, e), KVIDX_OK);
    e = cleared(1, 0);
    e.seq_hashes = NULL;
    e.num_seq_hashes = 3;
    e.has_parent = 200;
    CHECK_EQ(apply(ix, e), KVIDX_OK);
    e = stored(1, 0, blocks, 2);
    e.seq_hashes = NULL;
    e.num_seq_hashes = 3;
    CHECK_EQ(apply(ix, e), KVIDX_OK);

    /* (NULL, 0) is a valid empty array. */
    CHECK_EQ(apply(ix, stored(2, 0, NULL, 0)), KVIDX_OK);
    CHECK_EQ(apply(ix, removed(2, 0, NULL, 0)), KVIDX_OK);
    st = stats_of(ix);
    CHECK_EQ(st.events_applied, 5);
    CHECK_EQ(st.unknown_removals, 1);
    CHECK_EQ(st.workers, 2);
    CHECK_EQ(st.worker_blocks, 2);
    kvidx_free(ix);
}

static void event_shapes_sync(void) { check_event_shapes(&SYNC); }
static void event_shapes_pooled(void) { check_event_shapes(&POOLED); }

/* A malformed event anywhere in a batch: none of the batch is applied or queued. */
static void check_batches(const mode *m) {
    kvidx_indexer *ix = make_indexer(m);
    kvidx_block blocks[3];
    chain(blocks, 3, 20);
    uint64_t q[3];
    query_of(q, 3, 20);

    CHECK_EQ(kvidx_apply_events(ix, NULL, 0), KVIDX_OK);
    CHECK_EQ(kvidx_apply_events(ix, NULL, 3), KVIDX_ERR_NULL_POINTER);

    kvidx_event batch[4];
    batch[0] = stored(1, 0, blocks, 3);
    batch[1] = stored(2, 0, blocks, 2);
    batch[2] = removed(1, 0, NULL, 0);
    batch[3] = cleared(3, 0);
    batch[3].kind = 7;
    CHECK_EQ(kvidx_apply_events(ix, batch, 4), KVIDX_ERR_INVALID_ARGUMENT);
    batch[3] = stored(3, 0, NULL, 4);
    CHECK_EQ(kvidx_apply_events(ix, batch, 4), KVIDX_ERR_NULL_POINTER);
    batch[3] = stored(3, 0, blocks, 1);
    batch[3].has_parent = 2;
    CHECK_EQ(kvidx_apply_events(ix, batch, 4), KVIDX_ERR_INVALID_ARGUMENT);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    kvidx_stats st = stats_of(ix);
    CHECK_EQ(st.events_applied, 0);
    CHECK_EQ(st.workers, 0);
    kvidx_match out[4];
    CHECK_EQ(find(ix, q, 3, out, 4), 0);

    /* A well-formed batch with a missing parent in the middle: later events still apply. */
    batch[2] = stored_after(4, 0, 999999, blocks, 1);
    batch[3] = stored(3, 0, blocks, 1);
    kvidx_status s = kvidx_apply_events(ix, batch, 4);
    CHECK_EQ(s, m->event_threads == 0 ? KVIDX_ERR_PARENT_NOT_FOUND : KVIDX_OK);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    st = stats_of(ix);
    CHECK_EQ(st.events_applied, 3);
    CHECK_EQ(st.events_rejected, 1);
    CHECK_EQ(st.workers, 3);
    CHECK_EQ(st.worker_blocks, 6);
    size_t n = find(ix, q, 3, out, 4);
    CHECK_EQ(n, 3);
    if (n == 3) {
        CHECK_EQ(out[0].worker_id, 1);
        CHECK_EQ(out[0].depth, 3);
        CHECK_EQ(out[1].worker_id, 2);
        CHECK_EQ(out[1].depth, 2);
        CHECK_EQ(out[2].worker_id, 3);
        CHECK_EQ(out[2].depth, 1);
    }
    kvidx_free(ix);
}

static void batches_sync(void) { check_batches(&SYNC); }
static void batches_pooled(void) { check_batches(&POOLED); }

static void find_matches_arguments_and_buffer_protocol(void) {
    kvidx_indexer *ix = make_indexer(&SYNC);
    kvidx_block blocks[2];
    chain(blocks, 2, 30);
    for (uint64_t w = 1; w <= 3; w++) CHECK_EQ(apply(ix, stored(w, 0, blocks, 2)), KVIDX_OK);
    uint64_t q[2];
    query_of(q, 2, 30);

    const kvidx_match sentinel = {0xdeadbeefULL, 0xabcd, 0x1234};
    kvidx_match out[4] = {sentinel, sentinel, sentinel, sentinel};
    size_t len = 99;
    CHECK_EQ(kvidx_find_matches(ix, q, 2, out, 4, NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_find_matches(ix, NULL, 2, out, 4, &len), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_find_matches(ix, q, 2, NULL, 4, &len), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(len, 99);
    CHECK(memcmp(&out[0], &sentinel, sizeof sentinel) == 0);

    /* Too small: *out_len says how many, out is untouched. */
    CHECK_EQ(kvidx_find_matches(ix, q, 2, out, 2, &len), KVIDX_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(len, 3);
    for (size_t i = 0; i < 4; i++) CHECK(memcmp(&out[i], &sentinel, sizeof sentinel) == 0);
    len = 99;
    CHECK_EQ(kvidx_find_matches(ix, q, 2, NULL, 0, &len), KVIDX_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(len, 3);

    /* Exact fit. */
    CHECK_EQ(kvidx_find_matches(ix, q, 2, out, 3, &len), KVIDX_OK);
    CHECK_EQ(len, 3);
    CHECK(memcmp(&out[3], &sentinel, sizeof sentinel) == 0);
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ(out[i].worker_id, i + 1);
        CHECK_EQ(out[i].dp_rank, 0);
        CHECK_EQ(out[i].depth, 2);
    }

    /* Empty query (NULL, 0) and no matches with an empty out (NULL, 0). */
    len = 99;
    CHECK_EQ(kvidx_find_matches(ix, NULL, 0, out, 4, &len), KVIDX_OK);
    CHECK_EQ(len, 0);
    uint64_t miss[1] = {424242};
    len = 99;
    CHECK_EQ(kvidx_find_matches(ix, miss, 1, NULL, 0, &len), KVIDX_OK);
    CHECK_EQ(len, 0);

    /* A misaligned output array is refused before anything is written. */
    unsigned char raw[sizeof(kvidx_match) * 5];
    len = 99;
    CHECK_EQ(kvidx_find_matches(ix, q, 2, (kvidx_match *)(void *)(raw + 4), 4, &len),
             KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(len, 99);

    kvidx_stats st;
    CHECK_EQ(kvidx_get_stats(ix, NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_get_stats(ix, &st), KVIDX_OK);
    CHECK_EQ(st.workers, 3);
    kvidx_free(ix);
}

static void hash_tokens_follows_the_hashing_contract(void) {
    uint32_t tokens[14];
    for (uint32_t i = 0; i < 14; i++) tokens[i] = i + 1;
    uint64_t out[4] = {7, 7, 7, 7};
    size_t len = 99;
    CHECK_EQ(kvidx_hash_tokens(tokens, 14, 4, out, 4, &len), KVIDX_OK);
    CHECK_EQ(len, 3); /* 2 trailing tokens ignored */
    CHECK_EQ(out[0], 14643705804678351452ULL);
    CHECK_EQ(out[1], 16777012769546811212ULL);
    CHECK_EQ(out[2], 483935686894639516ULL);
    CHECK_EQ(out[3], 7);

    uint64_t seq[3];
    CHECK_EQ(kvidx_seq_hashes(out, 3, seq), KVIDX_OK);
    CHECK_EQ(seq[0], 14643705804678351452ULL);
    CHECK_EQ(seq[1], 4945711292740353085ULL);
    CHECK_EQ(seq[2], 12583592247330656132ULL);
    /* In place. */
    CHECK_EQ(kvidx_seq_hashes(out, 3, out), KVIDX_OK);
    CHECK(memcmp(out, seq, sizeof seq) == 0);

    /* Buffer too small: count in *out_len, out untouched. */
    uint64_t small[2] = {5, 5};
    len = 0;
    CHECK_EQ(kvidx_hash_tokens(tokens, 12, 4, small, 2, &len), KVIDX_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(len, 3);
    CHECK_EQ(small[0], 5);
    CHECK_EQ(small[1], 5);
    len = 0;
    CHECK_EQ(kvidx_hash_tokens(tokens, 12, 4, NULL, 0, &len), KVIDX_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(len, 3);

    /* Fewer tokens than a block, empty input, bad arguments. */
    len = 99;
    CHECK_EQ(kvidx_hash_tokens(tokens, 3, 4, NULL, 0, &len), KVIDX_OK);
    CHECK_EQ(len, 0);
    len = 99;
    CHECK_EQ(kvidx_hash_tokens(NULL, 0, 4, NULL, 0, &len), KVIDX_OK);
    CHECK_EQ(len, 0);
    len = 99;
    CHECK_EQ(kvidx_hash_tokens(tokens, 12, 0, out, 4, &len), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_hash_tokens(NULL, 0, 0, out, 4, &len), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_hash_tokens(tokens, 12, 4, out, 4, NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_hash_tokens(NULL, 12, 4, out, 4, &len), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_hash_tokens(tokens, 12, 4, NULL, 4, &len), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(len, 99);
    /* block_size larger than the input: no full block. */
    CHECK_EQ(kvidx_hash_tokens(tokens, 14, UINT32_MAX, out, 4, &len), KVIDX_OK);
    CHECK_EQ(len, 0);

    CHECK_EQ(kvidx_seq_hashes(NULL, 0, NULL), KVIDX_OK);
    CHECK_EQ(kvidx_seq_hashes(NULL, 2, seq), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_seq_hashes(seq, 2, NULL), KVIDX_ERR_NULL_POINTER);
}

static void remove_and_flush_statuses(void) {
    const mode *modes[] = {&SYNC, &POOLED};
    for (size_t i = 0; i < 2; i++) {
        kvidx_indexer *ix = make_indexer(modes[i]);
        CHECK_EQ(kvidx_remove_worker(ix, 12345), KVIDX_OK);
        CHECK_EQ(kvidx_remove_worker_dp_rank(ix, 12345, 7), KVIDX_OK);
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        kvidx_stats st = stats_of(ix);
        CHECK_EQ(st.events_applied, 0);
        CHECK_EQ(st.workers, 0);
        kvidx_free(ix);
    }
}

/* Engine payloads: bytes that are not a batch are MALFORMED and apply nothing; a bad format,
 * flag or sequence frame is INVALID_ARGUMENT (checked before the payload is read). */
static void engine_payload_statuses(void) {
    kvidx_indexer *ix = make_indexer(&SYNC);
    const uint8_t empty_batch[] = {0x92, 0x00, 0x90};          /* [0, []] */
    const uint8_t trailing[] = {0x92, 0x00, 0x90, 0x00};       /* [0, []] then a byte */
    const uint8_t short_envelope[] = {0x91, 0x00};             /* [0] */
    const uint8_t not_msgpack[] = {0xc1};                      /* a never-used marker */
    kvidx_engine_batch_result r;
    memset(&r, 0xab, sizeof r);
    const kvidx_engine_batch_result untouched = r;
    CHECK_EQ(kvidx_apply_engine_batch(ix, KVIDX_ENGINE_VLLM, 1, 0, trailing, 4, &r),
             KVIDX_ERR_MALFORMED);
    CHECK_EQ(kvidx_apply_engine_batch(ix, KVIDX_ENGINE_SGLANG, 1, 0, short_envelope, 2, &r),
             KVIDX_ERR_MALFORMED);
    CHECK_EQ(kvidx_apply_engine_batch(ix, KVIDX_ENGINE_TRTLLM, 1, 0, not_msgpack, 1, &r),
             KVIDX_ERR_MALFORMED);
    CHECK_EQ(kvidx_apply_engine_batch(ix, KVIDX_ENGINE_VLLM, 1, 0, NULL, 0, &r),
             KVIDX_ERR_MALFORMED);
    CHECK_EQ(kvidx_apply_engine_batch(ix, 3, 1, 0, empty_batch, 3, &r),
             KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_apply_engine_batch(ix, 3, 1, 0, not_msgpack, 1, &r),
             KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_apply_engine_batch(ix, KVIDX_ENGINE_VLLM, 1, 0, NULL, 1, &r),
             KVIDX_ERR_NULL_POINTER);
    CHECK(memcmp(&r, &untouched, sizeof r) == 0);
    CHECK_EQ(kvidx_apply_engine_batch(ix, KVIDX_ENGINE_VLLM, 1, 0, empty_batch, 3, &r), KVIDX_OK);
    CHECK_EQ(r.events_decoded, 0);

    kvidx_engine_feed *feed = NULL;
    CHECK_EQ(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, 512, &feed), KVIDX_ERR_INVALID_ARGUMENT);
    /* At most one tier for unknown media. */
    CHECK_EQ(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM,
                                   KVIDX_FEED_UNKNOWN_MEDIUM_HOST | KVIDX_FEED_UNKNOWN_MEDIUM_DISK,
                                   &feed),
             KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_engine_feed_new(3, 0, &feed), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK(feed == NULL);
    REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, 0, &feed) == KVIDX_OK);
    const uint8_t seq[8] = {0}, seq7[7] = {0};
    CHECK_EQ(kvidx_engine_feed_apply(feed, ix, 1, 0, seq, 8, trailing, 4, &r), KVIDX_ERR_MALFORMED);
    CHECK_EQ(kvidx_engine_feed_apply(feed, ix, 1, 0, seq7, 7, empty_batch, 3, &r),
             KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_engine_feed_apply(feed, ix, 1, 0, seq7, 7, trailing, 4, &r),
             KVIDX_ERR_INVALID_ARGUMENT);
    kvidx_engine_stats es;
    CHECK_EQ(kvidx_engine_feed_stats(feed, &es), KVIDX_OK);
    CHECK_EQ(es.batches_malformed, 1);
    CHECK_EQ(es.batches, 0);
    /* The malformed batch did not record sequence 0: it is still the first one. */
    CHECK_EQ(kvidx_engine_feed_apply(feed, ix, 1, 0, seq, 8, empty_batch, 3, &r), KVIDX_OK);
    CHECK_EQ(r.seq_status, KVIDX_SEQ_FIRST);
    kvidx_engine_feed_free(feed);

    kvidx_stats st = stats_of(ix);
    CHECK_EQ(st.events_applied, 0);
    CHECK_EQ(st.workers, 0);
    kvidx_free(ix);
}

/* The engine values are C enums with the values they always had (source compatible: they
 * still work as uint32_t arguments, in switch cases and combined with |). */
static void engine_enums_keep_their_values(void) {
    const kvidx_engine_format formats[] = {KVIDX_ENGINE_VLLM, KVIDX_ENGINE_SGLANG,
                                           KVIDX_ENGINE_TRTLLM};
    for (uint32_t i = 0; i < 3; i++) CHECK_EQ(formats[i], i);
    const kvidx_seq_status seq[] = {KVIDX_SEQ_UNTRACKED, KVIDX_SEQ_FIRST, KVIDX_SEQ_IN_ORDER,
                                    KVIDX_SEQ_GAP, KVIDX_SEQ_RESTART};
    for (uint32_t i = 0; i < 5; i++) CHECK_EQ(seq[i], i);
    const uint32_t flags = KVIDX_FEED_NO_CLEAR_ON_GAP | KVIDX_FEED_NO_CLEAR_ON_RESTART |
                           KVIDX_FEED_ALL_MEDIA | KVIDX_FEED_ALL_GROUPS |
                           KVIDX_FEED_HASH_TOKENS_ONLY;
    CHECK_EQ(flags, 31);
    CHECK_EQ(KVIDX_DP_RANK_FROM_BATCH, UINT32_MAX);
    CHECK_EQ(KVIDX_ENGINE_MAX_PAYLOAD, 32u << 20);
}

/* Queue limits: an addition next to kvidx_config, validated (never an abort). */
static void new_with_limits_validates(void) {
    const kvidx_queue_limits d = kvidx_queue_limits_default();
    CHECK_EQ(d.queue_capacity, 0);
    CHECK_EQ(d.queue_bytes, 0);
    kvidx_config c = kvidx_config_default();
    c.event_threads = 2;
    kvidx_indexer *ix = NULL;
    const uint64_t bad[] = {(uint64_t)1 << 31, UINT64_MAX, ((uint64_t)1 << 20) + 1};
    for (size_t i = 0; i < 3; i++) {
        kvidx_queue_limits l = d;
        l.queue_capacity = bad[i];
        CHECK_EQ(kvidx_new_with_limits(&c, &l, &ix), KVIDX_ERR_INVALID_ARGUMENT);
        CHECK(ix == NULL);
    }
    CHECK_EQ(kvidx_new_with_limits(&c, &d, NULL), KVIDX_ERR_NULL_POINTER);
    /* NULL config and limits: the defaults. */
    REQUIRE(kvidx_new_with_limits(NULL, NULL, &ix) == KVIDX_OK);
    kvidx_free(ix);
    /* The smallest budget still accepts every event (one at a time) and applies it. */
    kvidx_queue_limits tiny = {1, 1};
    ix = NULL;
    REQUIRE(kvidx_new_with_limits(&c, &tiny, &ix) == KVIDX_OK);
    kvidx_block blocks[4];
    chain(blocks, 4, 70);
    for (uint64_t w = 0; w < 30; w++) CHECK_EQ(apply(ix, stored(w, 0, blocks, 4)), KVIDX_OK);
    CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
    CHECK_EQ(stats_of(ix).workers, 30);
    kvidx_free(ix);
}

/* const handles: every call but the free functions takes one, so a const pointer (shared by
 * threads) is all a caller needs. */
static void const_handles_are_enough(void) {
    kvidx_indexer *owned = make_indexer(&SYNC);
    const kvidx_indexer *ix = owned;
    kvidx_engine_feed *owned_feed = NULL;
    REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, 0, &owned_feed) == KVIDX_OK);
    const kvidx_engine_feed *feed = owned_feed;
    const uint8_t empty_batch[] = {0x92, 0x00, 0x90};
    const uint8_t seq[8] = {0};
    kvidx_engine_batch_result r;
    kvidx_event e = cleared(1, 0);
    CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_OK);
    CHECK_EQ(kvidx_apply_events(ix, &e, 1), KVIDX_OK);
    CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
    CHECK_EQ(kvidx_apply_engine_batch(ix, KVIDX_ENGINE_VLLM, 2, 0, empty_batch, 3, &r), KVIDX_OK);
    CHECK_EQ(kvidx_engine_feed_apply(feed, ix, 3, 0, seq, 8, empty_batch, 3, &r), KVIDX_OK);
    CHECK_EQ(kvidx_engine_feed_apply(feed, ix, 3, 1, seq, 8, empty_batch, 3, &r), KVIDX_OK);
    CHECK_EQ(kvidx_engine_feed_apply(feed, ix, 4, 0, seq, 8, empty_batch, 3, &r), KVIDX_OK);
    uint64_t publishers = 0;
    CHECK_EQ(kvidx_engine_feed_publishers(feed, &publishers), KVIDX_OK);
    CHECK_EQ(publishers, 3);
    /* Forget one publisher: its next batch is FIRST again; forgetting it twice is a no-op. */
    uint8_t known = 9;
    CHECK_EQ(kvidx_engine_feed_forget(feed, 4, 0, &known), KVIDX_OK);
    CHECK_EQ(known, 1);
    CHECK_EQ(kvidx_engine_feed_forget(feed, 4, 0, &known), KVIDX_OK);
    CHECK_EQ(known, 0);
    CHECK_EQ(kvidx_engine_feed_forget(feed, 4, 0, NULL), KVIDX_OK);
    const uint8_t seq5[8] = {0, 0, 0, 0, 0, 0, 0, 5};
    CHECK_EQ(kvidx_engine_feed_apply(feed, ix, 4, 0, seq5, 8, empty_batch, 3, &r), KVIDX_OK);
    CHECK_EQ(r.seq_status, KVIDX_SEQ_FIRST);
    /* Removing a worker through the feed drops every rank from the index and the feed. */
    CHECK_EQ(kvidx_engine_feed_remove_worker(feed, ix, 3), KVIDX_OK);
    CHECK_EQ(kvidx_engine_feed_publishers(feed, &publishers), KVIDX_OK);
    CHECK_EQ(publishers, 1);
    CHECK_EQ(kvidx_engine_feed_remove_worker_dp_rank(feed, ix, 4, 0), KVIDX_OK);
    CHECK_EQ(kvidx_engine_feed_publishers(feed, &publishers), KVIDX_OK);
    CHECK_EQ(publishers, 0);
    CHECK_EQ(kvidx_engine_feed_remove_worker(feed, NULL, 3), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_engine_feed_remove_worker(NULL, ix, 3), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_engine_feed_publishers(feed, NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_engine_feed_forget(NULL, 1, 0, &known), KVIDX_ERR_NULL_POINTER);
    kvidx_engine_feed_free(owned_feed);
    kvidx_free(owned);
}

/* Payloads above KVIDX_ENGINE_MAX_PAYLOAD are TOO_LARGE, counted as refused, apply nothing. */
static void engine_payload_too_large(void) {
    kvidx_indexer *ix = make_indexer(&SYNC);
    kvidx_engine_feed *feed = NULL;
    REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, 0, &feed) == KVIDX_OK);
    const size_t len = (size_t)KVIDX_ENGINE_MAX_PAYLOAD + 1;
    uint8_t *big = calloc(len, 1);
    REQUIRE(big != NULL);
    big[0] = 0x92;
    kvidx_engine_batch_result r;
    CHECK_EQ(kvidx_apply_engine_batch(ix, KVIDX_ENGINE_VLLM, 1, 0, big, len, &r),
             KVIDX_ERR_TOO_LARGE);
    CHECK_EQ(kvidx_engine_feed_apply(feed, ix, 1, 0, NULL, 0, big, len, &r), KVIDX_ERR_TOO_LARGE);
    kvidx_engine_stats es;
    CHECK_EQ(kvidx_engine_feed_stats(feed, &es), KVIDX_OK);
    CHECK_EQ(es.batches_malformed, 1);
    CHECK_EQ(stats_of(ix).events_applied, 0);
    CHECK(strstr(kvidx_status_str(KVIDX_ERR_TOO_LARGE), "KVIDX_ERR_TOO_LARGE") != NULL);
    free(big);
    kvidx_engine_feed_free(feed);
    kvidx_free(ix);
}

/* A panic inside the boundary is contained: PANIC once, then POISONED on that handle only. */
static void check_panic_poisons(const mode *m) {
    kvidx_indexer *ix = make_indexer(m);
    kvidx_indexer *other = make_indexer(m);
    kvidx_block blocks[2];
    chain(blocks, 2, 40);
    CHECK_EQ(apply(ix, stored(1, 0, blocks, 2)), KVIDX_OK);

    fprintf(stderr, "(a deliberate panic message follows)\n");
    CHECK_EQ(kvidx_debug_panic(ix), KVIDX_ERR_PANIC);

    kvidx_event e = cleared(1, 0);
    kvidx_stats st;
    kvidx_match out[2];
    size_t len = 55;
    uint64_t q[2];
    query_of(q, 2, 40);
    CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_ERR_POISONED);
    CHECK_EQ(kvidx_apply_events(ix, &e, 1), KVIDX_ERR_POISONED);
    CHECK_EQ(kvidx_remove_worker(ix, 1), KVIDX_ERR_POISONED);
    CHECK_EQ(kvidx_remove_worker_dp_rank(ix, 1, 0), KVIDX_ERR_POISONED);
    CHECK_EQ(kvidx_flush(ix), KVIDX_ERR_POISONED);
    CHECK_EQ(kvidx_find_matches(ix, q, 2, out, 2, &len), KVIDX_ERR_POISONED);
    CHECK_EQ(len, 55);
    CHECK_EQ(kvidx_get_stats(ix, &st), KVIDX_ERR_POISONED);
    CHECK_EQ(kvidx_debug_panic(ix), KVIDX_ERR_POISONED);

    /* Another handle is unaffected. */
    CHECK_EQ(apply(other, stored(2, 0, blocks, 2)), KVIDX_OK);
    CHECK_EQ(depth_of(other, q, 2, 2, 0), 2);
    kvidx_free(ix); /* a poisoned handle is still freed */
    kvidx_free(other);
}

static void panic_sync(void) { check_panic_poisons(&SYNC); }
static void panic_pooled(void) { check_panic_poisons(&POOLED); }

int main(void) {
    RUN(versions_match_the_header);
    RUN(status_codes_have_fixed_values_and_texts);
    RUN(config_default_is_runs_one_thread);
    RUN(new_validates_config_and_writes_out_only_on_success);
    RUN(null_handle_is_null_pointer_everywhere);
    RUN(event_shapes_sync);
    RUN(event_shapes_pooled);
    RUN(batches_sync);
    RUN(batches_pooled);
    RUN(find_matches_arguments_and_buffer_protocol);
    RUN(hash_tokens_follows_the_hashing_contract);
    RUN(remove_and_flush_statuses);
    RUN(engine_payload_statuses);
    RUN(engine_enums_keep_their_values);
    RUN(new_with_limits_validates);
    RUN(const_handles_are_enough);
    RUN(engine_payload_too_large);
    RUN(panic_sync);
    RUN(panic_pooled);
    return finish("test_api");
}
