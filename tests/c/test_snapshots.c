/* Offset batches, watermarks and snapshots through the C ABI (KVIDX_HAS_SNAPSHOTS):
 * round trips through callbacks and files into every mode, bad input (truncated, corrupted,
 * foreign, newer version) is KVIDX_ERR_MALFORMED and leaves the indexer empty and usable,
 * failing callbacks and files are KVIDX_ERR_IO, batches at or below a watermark are skipped,
 * a section claiming a terabyte is malformed after reading little of it, and a long chain
 * is built, snapshotted, restored and freed on a small stack. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

#ifndef KVIDX_HAS_SNAPSHOTS
#error "the header lacks KVIDX_HAS_SNAPSHOTS"
#endif

/* A growable byte buffer: the sink appends, the source reads from `at`. */
typedef struct buffer {
    uint8_t *data;
    size_t len, cap, at;
    int fail_after; /* calls left before the callback fails; -1: never */
    size_t max_chunk; /* the source hands out at most this many bytes per call (0: any) */
} buffer;

static int32_t sink(void *user, const uint8_t *data, size_t len) {
    buffer *b = (buffer *)user;
    if (b->fail_after == 0) return 7;
    if (b->fail_after > 0) b->fail_after--;
    if (b->len + len > b->cap) {
        size_t cap = (b->len + len) * 2;
        uint8_t *grown = (uint8_t *)realloc(b->data, cap);
        REQUIRE(grown != NULL);
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

static int32_t source(void *user, uint8_t *buf, size_t cap, size_t *got) {
    buffer *b = (buffer *)user;
    if (b->fail_after == 0) return -1;
    if (b->fail_after > 0) b->fail_after--;
    size_t n = b->len - b->at;
    if (n > cap) n = cap;
    if (b->max_chunk && n > b->max_chunk) n = b->max_chunk;
    memcpy(buf, b->data + b->at, n);
    b->at += n;
    *got = n;
    return 0;
}

static buffer empty_buffer(void) {
    buffer b;
    memset(&b, 0, sizeof b);
    b.fail_after = -1;
    return b;
}

/* A state with everything a snapshot must keep: chains of two workers and two dp ranks, a
 * hole, a second name for one block, a block on the host tier, an empty known worker, and
 * watermarks from offset batches. */
static void build_state(kvidx_indexer *ix) {
    kvidx_block a[8];
    chain(a, 8, 100);
    REQUIRE(apply(ix, stored(1, 0, a, 8)) == KVIDX_OK);
    uint64_t hole = 103 * 1000u; /* position 3 of worker 1 */
    REQUIRE(apply(ix, removed(1, 0, &hole, 1)) == KVIDX_OK);
    kvidx_block alias = {100, 77}; /* a second name for position 0 */
    REQUIRE(apply(ix, stored(1, 0, &alias, 1)) == KVIDX_OK);
    kvidx_block b[5];
    chain(b, 5, 100); /* worker 2 shares the prefix, on the host tier */
    kvidx_event on_host = stored(2, 1, b, 5);
    REQUIRE(kvidx_apply_event_on_tier(ix, &on_host, KVIDX_TIER_HOST) == KVIDX_OK);
    kvidx_event batch[2] = {cleared(3, 0), stored(3, 0, a, 3)};
    REQUIRE(kvidx_apply_events_at(ix, batch, 2, 41) == KVIDX_OK);
    kvidx_event empty = cleared(4, 0);
    REQUIRE(kvidx_apply_events_at(ix, &empty, 1, 9) == KVIDX_OK);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
}

/* Compares what two indexers answer: stats, plain and tiered lookups, watermarks. */
static void check_same(const kvidx_indexer *x, const kvidx_indexer *y) {
    kvidx_stats sx = stats_of(x), sy = stats_of(y);
    CHECK_EQ(sx.workers, sy.workers);
    CHECK_EQ(sx.worker_blocks, sy.worker_blocks);
    uint64_t q[12];
    query_of(q, 12, 100);
    for (size_t n = 1; n <= 12; n++) {
        kvidx_tiered_match mx[16], my[16];
        size_t lx = 0, ly = 0;
        CHECK_EQ(kvidx_find_matches_tiered(x, q, n, mx, 16, &lx), KVIDX_OK);
        CHECK_EQ(kvidx_find_matches_tiered(y, q, n, my, 16, &ly), KVIDX_OK);
        CHECK_EQ(lx, ly);
        CHECK(lx == ly && memcmp(mx, my, lx * sizeof mx[0]) == 0);
    }
    for (uint64_t w = 1; w <= 5; w++) {
        uint64_t wx = 1, wy = 2;
        CHECK_EQ(kvidx_watermark(x, w, 0, &wx), KVIDX_OK);
        CHECK_EQ(kvidx_watermark(y, w, 0, &wy), KVIDX_OK);
        CHECK_EQ(wx, wy);
    }
}

/* Applies the same later events to both: they must go on behaving alike. */
static void continue_both(kvidx_indexer *x, kvidx_indexer *y) {
    kvidx_indexer *both[2] = {x, y};
    for (int i = 0; i < 2; i++) {
        kvidx_block fill = {103, 103 * 1000u}; /* repairs worker 1's hole */
        kvidx_event e = stored_after(1, 0, 102 * 1000u, &fill, 1);
        CHECK_EQ(apply(both[i], e), KVIDX_OK);
        uint64_t alias = 77;
        CHECK_EQ(apply(both[i], removed(1, 0, &alias, 1)), KVIDX_OK);
        kvidx_event stale = cleared(3, 0);
        CHECK_EQ(kvidx_apply_events_at(both[i], &stale, 1, 41), KVIDX_OK); /* skipped */
        CHECK_EQ(kvidx_flush(both[i]), KVIDX_OK);
    }
    check_same(x, y);
    uint64_t q[8];
    query_of(q, 8, 100);
    CHECK_EQ(depth_of(x, q, 8, 1, 0), 8);
    CHECK_EQ(depth_of(x, q, 8, 3, 0), 3);
}

static void round_trip_through_callbacks(void) {
    for (size_t i = 0; i < NUM_MODES; i++) {
        kvidx_indexer *ix = make_indexer(&MODES[i]);
        build_state(ix);
        buffer b = empty_buffer();
        kvidx_snapshot_info info;
        CHECK_EQ(kvidx_snapshot_write(ix, sink, &b, &info), KVIDX_OK);
        CHECK_EQ(info.workers, 4);
        CHECK_EQ(info.blocks, stats_of(ix).worker_blocks);
        CHECK_EQ(info.bytes, b.len);
        CHECK_EQ(info.min_watermark, 0);
        CHECK_EQ(info.max_watermark, 41);
        for (size_t j = 0; j < NUM_MODES; j++) {
            kvidx_indexer *copy = make_indexer(&MODES[j]);
            b.at = 0;
            b.max_chunk = j == 0 ? 3 : 0; /* a source that hands out tiny chunks */
            kvidx_snapshot_info restored;
            CHECK_EQ(kvidx_snapshot_restore(copy, source, &b, &restored), KVIDX_OK);
            CHECK(memcmp(&restored, &info, sizeof info) == 0);
            check_same(ix, copy);
            kvidx_indexer *original = make_indexer(&MODES[i]);
            build_state(original);
            continue_both(original, copy);
            kvidx_free(original);
            kvidx_free(copy);
        }
        free(b.data);
        kvidx_free(ix);
    }
}

static void round_trip_through_files(void) {
    char path[] = "/tmp/kvidx-snapshot-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    for (size_t i = 0; i < NUM_MODES; i++) {
        kvidx_indexer *ix = make_indexer(&MODES[i]);
        build_state(ix);
        kvidx_snapshot_info info;
        CHECK_EQ(kvidx_snapshot_write_file(ix, path, &info), KVIDX_OK);
        kvidx_indexer *copy = make_indexer(&MODES[(i + 3) % NUM_MODES]);
        kvidx_snapshot_info restored;
        CHECK_EQ(kvidx_snapshot_restore_file(copy, path, &restored), KVIDX_OK);
        CHECK(memcmp(&restored, &info, sizeof info) == 0);
        check_same(ix, copy);
        CHECK_EQ(kvidx_snapshot_write_file(copy, path, NULL), KVIDX_OK); /* out is optional */
        kvidx_free(copy);
        kvidx_free(ix);
    }
    unlink(path);
}

/* The indexer is empty and still usable: a valid snapshot then restores. */
static void check_empty_and_usable(kvidx_indexer *ix, buffer *good) {
    CHECK_EQ(stats_of(ix).workers, 0);
    CHECK_EQ(stats_of(ix).worker_blocks, 0);
    uint64_t w = 5;
    CHECK_EQ(kvidx_watermark(ix, 3, 0, &w), KVIDX_OK);
    CHECK_EQ(w, 0);
    good->at = 0;
    good->fail_after = -1;
    CHECK_EQ(kvidx_snapshot_restore(ix, source, good, NULL), KVIDX_OK);
    CHECK_EQ(stats_of(ix).workers, 4);
}

static void bad_input_is_malformed_and_leaves_the_indexer_empty(void) {
    kvidx_indexer *src = make_indexer(&MODES[0]);
    build_state(src);
    buffer good = empty_buffer();
    REQUIRE(kvidx_snapshot_write(src, sink, &good, NULL) == KVIDX_OK);
    for (size_t m = 0; m < NUM_MODES; m++) {
        /* Truncated at every length. */
        for (size_t cut = 0; cut < good.len; cut += (cut < 64 ? 1 : 13)) {
            kvidx_indexer *ix = make_indexer(&MODES[m]);
            buffer b = good;
            b.len = cut;
            b.at = 0;
            CHECK_EQ(kvidx_snapshot_restore(ix, source, &b, NULL), KVIDX_ERR_MALFORMED);
            if (cut % 97 == 0) check_empty_and_usable(ix, &good);
            else CHECK_EQ(stats_of(ix).workers, 0);
            kvidx_free(ix);
        }
        /* One flipped bit anywhere. */
        uint8_t *copy = (uint8_t *)malloc(good.len);
        REQUIRE(copy != NULL);
        for (size_t at = 0; at < good.len; at += 7) {
            memcpy(copy, good.data, good.len);
            copy[at] ^= 0x10;
            kvidx_indexer *ix = make_indexer(&MODES[m]);
            buffer b = good;
            b.data = copy;
            b.at = 0;
            CHECK_EQ(kvidx_snapshot_restore(ix, source, &b, NULL), KVIDX_ERR_MALFORMED);
            check_empty_and_usable(ix, &good);
            kvidx_free(ix);
        }
        /* A newer format version (byte 8 is the version's low byte). */
        memcpy(copy, good.data, good.len);
        copy[8] = 2;
        kvidx_indexer *ix = make_indexer(&MODES[m]);
        buffer b = good;
        b.data = copy;
        b.at = 0;
        CHECK_EQ(kvidx_snapshot_restore(ix, source, &b, NULL), KVIDX_ERR_MALFORMED);
        check_empty_and_usable(ix, &good);
        kvidx_free(ix);
        free(copy);
        /* Foreign bytes, and trailing bytes after a valid snapshot. */
        ix = make_indexer(&MODES[m]);
        buffer foreign = empty_buffer();
        foreign.data = (uint8_t *)"{\"not\": \"a snapshot\"}";
        foreign.len = 21;
        CHECK_EQ(kvidx_snapshot_restore(ix, source, &foreign, NULL), KVIDX_ERR_MALFORMED);
        buffer longer = empty_buffer();
        REQUIRE(sink(&longer, good.data, good.len) == 0);
        REQUIRE(sink(&longer, (const uint8_t *)"x", 1) == 0);
        CHECK_EQ(kvidx_snapshot_restore(ix, source, &longer, NULL), KVIDX_ERR_MALFORMED);
        free(longer.data);
        check_empty_and_usable(ix, &good);
        kvidx_free(ix);
    }
    free(good.data);
    kvidx_free(src);
}

static void failing_callbacks_and_files_are_io_errors(void) {
    kvidx_indexer *ix = make_indexer(&MODES[0]);
    build_state(ix);
    buffer good = empty_buffer();
    REQUIRE(kvidx_snapshot_write(ix, sink, &good, NULL) == KVIDX_OK);
    /* A state of a few hundred KiB: the sink is called several times. */
    kvidx_indexer *big = make_indexer(&MODES[0]);
    for (uint64_t w = 0; w < 300; w++) {
        kvidx_block c[40];
        chain(c, 40, w * 100);
        REQUIRE(apply(big, stored(w, 0, c, 40)) == KVIDX_OK);
    }
    buffer all = empty_buffer();
    REQUIRE(kvidx_snapshot_write(big, sink, &all, NULL) == KVIDX_OK);
    CHECK(all.len > 3 * 65536);
    free(all.data);
    for (int after = 0; after < 3; after++) {
        buffer b = empty_buffer();
        b.fail_after = after;
        CHECK_EQ(kvidx_snapshot_write(big, sink, &b, NULL), KVIDX_ERR_IO);
        CHECK(b.len <= (size_t)after * 65536); /* at most the chunks before the failure */
        free(b.data);
        kvidx_indexer *copy = make_indexer(&MODES[3]);
        buffer r = good;
        r.at = 0;
        r.max_chunk = 5;
        r.fail_after = after;
        CHECK_EQ(kvidx_snapshot_restore(copy, source, &r, NULL), KVIDX_ERR_IO);
        check_empty_and_usable(copy, &good);
        kvidx_free(copy);
    }
    kvidx_indexer *copy = make_indexer(&MODES[0]);
    CHECK_EQ(kvidx_snapshot_restore_file(copy, "/nonexistent/kvidx/snapshot", NULL), KVIDX_ERR_IO);
    CHECK_EQ(kvidx_snapshot_write_file(ix, "/nonexistent/kvidx/snapshot", NULL), KVIDX_ERR_IO);
    /* Restoring into an indexer that knows a worker is refused; so is a NULL argument. */
    CHECK_EQ(kvidx_snapshot_restore(ix, source, &good, NULL), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_snapshot_write(NULL, sink, &good, NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_snapshot_write(ix, NULL, &good, NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_snapshot_restore(copy, NULL, &good, NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_snapshot_write_file(ix, NULL, NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_snapshot_restore_file(copy, NULL, NULL), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(stats_of(copy).workers, 0);
    free(good.data);
    kvidx_free(copy);
    kvidx_free(big);
    kvidx_free(ix);
}

static void offset_batches_are_skipped_at_or_below_the_watermark(void) {
    for (size_t m = 0; m < NUM_MODES; m++) {
        kvidx_indexer *ix = make_indexer(&MODES[m]);
        kvidx_block a[4];
        chain(a, 4, 10);
        kvidx_block more[2];
        chain(more, 2, 14);
        kvidx_event first[3] = {stored(1, 0, a, 4), stored(2, 0, a, 2), stored(2, 1, a, 1)};
        CHECK_EQ(kvidx_apply_events_at(ix, first, 3, 5), KVIDX_OK);
        kvidx_event next = stored_after(1, 0, 13 * 1000u, more, 2);
        CHECK_EQ(kvidx_apply_events_at(ix, &next, 1, 5), KVIDX_OK); /* replayed: skipped */
        CHECK_EQ(kvidx_apply_events_at(ix, &next, 1, 4), KVIDX_OK); /* older: skipped */
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        uint64_t q[6];
        query_of(q, 6, 10);
        CHECK_EQ(depth_of(ix, q, 6, 1, 0), 4);
        CHECK_EQ(kvidx_apply_events_at(ix, &next, 1, 6), KVIDX_OK);
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        CHECK_EQ(depth_of(ix, q, 6, 1, 0), 6);
        uint64_t w = 0;
        CHECK_EQ(kvidx_watermark(ix, 1, 0, &w), KVIDX_OK);
        CHECK_EQ(w, 6);
        CHECK_EQ(kvidx_watermark(ix, 2, 0, &w), KVIDX_OK);
        CHECK_EQ(w, 5);
        CHECK_EQ(kvidx_watermark(ix, 2, 1, &w), KVIDX_OK);
        CHECK_EQ(w, 5);
        CHECK_EQ(kvidx_watermark(ix, 9, 0, &w), KVIDX_OK);
        CHECK_EQ(w, 0);
        kvidx_replica_stats rs;
        CHECK_EQ(kvidx_get_replica_stats(ix, &rs), KVIDX_OK);
        CHECK_EQ(rs.batches_applied, 4); /* three workers at 5, worker 1 at 6 */
        CHECK_EQ(rs.batches_skipped, 2);
        CHECK_EQ(rs.events_skipped, 2);
        /* Bad arguments apply nothing. */
        CHECK_EQ(kvidx_apply_events_at(ix, &next, 1, 0), KVIDX_ERR_INVALID_ARGUMENT);
        CHECK_EQ(kvidx_apply_events_at(ix, NULL, 1, 7), KVIDX_ERR_NULL_POINTER);
        CHECK_EQ(kvidx_apply_events_at(ix, NULL, 0, 7), KVIDX_OK);
        CHECK_EQ(kvidx_watermark(ix, 1, 0, NULL), KVIDX_ERR_NULL_POINTER);
        CHECK_EQ(kvidx_get_replica_stats(ix, NULL), KVIDX_ERR_NULL_POINTER);
        CHECK_EQ(kvidx_get_replica_stats(NULL, &rs), KVIDX_ERR_NULL_POINTER);
        /* Removal forgets the watermark: the same offset applies again. */
        CHECK_EQ(kvidx_remove_worker(ix, 1), KVIDX_OK);
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        CHECK_EQ(kvidx_watermark(ix, 1, 0, &w), KVIDX_OK);
        CHECK_EQ(w, 0);
        CHECK_EQ(kvidx_apply_events_at(ix, first, 1, 5), KVIDX_OK);
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        CHECK_EQ(depth_of(ix, q, 6, 1, 0), 4);
        /* Synchronous mode: a rejected STORED in an applied batch. */
        if (MODES[m].event_threads == 0) {
            kvidx_event orphan = stored_after(7, 0, 12345, a, 1);
            CHECK_EQ(kvidx_apply_events_at(ix, &orphan, 1, 3), KVIDX_ERR_PARENT_NOT_FOUND);
            CHECK_EQ(kvidx_watermark(ix, 7, 0, &w), KVIDX_OK);
            CHECK_EQ(w, 3);
        }
        kvidx_free(ix);
    }
}

/* Reads a file of tests/fixtures/engine (the tests run from the repository's root). */
static uint8_t *read_fixture(const char *name, size_t *len) {
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/engine/%s.msgpack", name);
    FILE *f = fopen(path, "rb");
    REQUIRE(f != NULL);
    uint8_t *data = (uint8_t *)malloc(1 << 16);
    REQUIRE(data != NULL);
    *len = fread(data, 1, 1 << 16, f);
    fclose(f);
    REQUIRE(*len > 0);
    return data;
}

static void engine_batches_at_offsets_are_one_unit(void) {
    size_t len = 0;
    uint8_t *store = read_fixture("trtllm_map", &len); /* stores 3 blocks, removes one */
    for (size_t m = 0; m < NUM_MODES; m++) {
        kvidx_indexer *ix = make_indexer(&MODES[m]);
        kvidx_engine_feed *feed = NULL;
        REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_TRTLLM, 0, &feed) == KVIDX_OK);
        const uint8_t seq0[8] = {0}, seq1[8] = {0, 0, 0, 0, 0, 0, 0, 1};
        const uint8_t seq7[8] = {0, 0, 0, 0, 0, 0, 0, 7};
        kvidx_engine_batch_result r;
        CHECK_EQ(kvidx_engine_feed_apply_at(feed, ix, 4, 0, seq0, 8, store, len, 10, &r), KVIDX_OK);
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        CHECK_EQ(stats_of(ix).worker_blocks, 2);
        /* The same message replayed: skipped; the sequence is tracked anyway. */
        CHECK_EQ(kvidx_engine_feed_apply_at(feed, ix, 4, 0, seq1, 8, store, len, 10, &r), KVIDX_OK);
        CHECK_EQ(r.seq_status, KVIDX_SEQ_IN_ORDER);
        /* A gap at an old offset: its clear is skipped with the batch. */
        CHECK_EQ(kvidx_engine_feed_apply_at(feed, ix, 4, 0, seq7, 8, store, len, 9, &r), KVIDX_OK);
        CHECK_EQ(r.seq_status, KVIDX_SEQ_GAP);
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        CHECK_EQ(stats_of(ix).worker_blocks, 2);
        kvidx_replica_stats rs;
        CHECK_EQ(kvidx_get_replica_stats(ix, &rs), KVIDX_OK);
        CHECK_EQ(rs.batches_applied, 1);
        CHECK_EQ(rs.batches_skipped, 2);
        /* Without a feed, at a new offset: applied. Offset 0 is refused before decoding. */
        CHECK_EQ(kvidx_apply_engine_batch_at(ix, KVIDX_ENGINE_TRTLLM, 4, 0, store, len, 11, &r),
                 KVIDX_OK);
        CHECK_EQ(kvidx_apply_engine_batch_at(ix, KVIDX_ENGINE_TRTLLM, 4, 0, store, 1, 0, &r),
                 KVIDX_ERR_INVALID_ARGUMENT);
        CHECK_EQ(kvidx_engine_feed_apply_at(feed, ix, 4, 0, seq0, 8, store, len, 0, &r),
                 KVIDX_ERR_INVALID_ARGUMENT);
        CHECK_EQ(kvidx_engine_feed_apply_at(feed, ix, 4, 0, seq0, 8, store, 1, 12, &r),
                 KVIDX_ERR_MALFORMED);
        CHECK_EQ(kvidx_flush(ix), KVIDX_OK);
        uint64_t w = 0;
        CHECK_EQ(kvidx_watermark(ix, 4, 0, &w), KVIDX_OK);
        CHECK_EQ(w, 11);
        CHECK_EQ(kvidx_get_replica_stats(ix, &rs), KVIDX_OK);
        CHECK_EQ(rs.batches_applied, 2);
        kvidx_engine_feed_free(feed);
        kvidx_free(ix);
    }
    free(store);
}

/* A snapshot header and a section claiming a terabyte, then up to 64 MiB of zeros; counts
 * the bytes handed out. */
typedef struct hostile {
    uint8_t head[61];
    uint64_t served, total;
} hostile;

static int32_t hostile_source(void *user, uint8_t *buf, size_t cap, size_t *got) {
    hostile *h = (hostile *)user;
    size_t n = 0;
    while (n < cap && h->served < h->total) {
        buf[n++] = h->served < sizeof h->head ? h->head[h->served] : 0;
        h->served++;
    }
    *got = n;
    return 0;
}

static void put_le(uint8_t *at, uint64_t value, int bytes) {
    for (int i = 0; i < bytes; i++) at[i] = (uint8_t)(value >> (8 * i));
}

static void a_section_claiming_a_terabyte_is_malformed_early(void) {
    const uint64_t tib = 1ull << 40;
    const uint64_t claims[][3] = {/* records, names, len */
                                  {tib / 32, tib / 32, tib}, {0, 0, tib}, {UINT64_MAX / 9, UINT64_MAX / 8, UINT64_MAX}};
    for (size_t c = 0; c < sizeof claims / sizeof claims[0]; c++) {
        hostile h;
        memset(&h, 0, sizeof h);
        memcpy(h.head, "KVIDXSNP", 8);
        put_le(h.head + 8, 1, 4); /* version; flags 0 */
        h.head[16] = 'W';
        put_le(h.head + 17, 7, 8); /* worker 7, rank 0, no watermark */
        put_le(h.head + 37, claims[c][0], 8);
        put_le(h.head + 45, claims[c][1], 8);
        put_le(h.head + 53, claims[c][2], 8);
        h.total = sizeof h.head + (64u << 20);
        kvidx_indexer *ix = make_indexer(&MODES[c % NUM_MODES]);
        CHECK_EQ(kvidx_snapshot_restore(ix, hostile_source, &h, NULL), KVIDX_ERR_MALFORMED);
        /* At most a chunk of the library's and one of the restore's, never the claim. */
        CHECK(h.served <= sizeof h.head + 2 * 65536);
        CHECK_EQ(stats_of(ix).workers, 0);
        kvidx_free(ix);
    }
}

/* A chain far longer than a small stack survives one frame per block of: built, snapshotted,
 * restored and freed on a thread with a 64 KiB stack, in every mode. */
#define LONG_CHAIN (1u << 18)
#define EVENT_BLOCKS 4096u
#define SMALL_STACK (64u << 10)

static void *long_chain_on_a_small_stack(void *arg) {
    const mode *m = (const mode *)arg;
    kvidx_block *blocks = (kvidx_block *)malloc(EVENT_BLOCKS * sizeof *blocks);
    REQUIRE(blocks != NULL);
    kvidx_indexer *ix = make_indexer(m);
    for (uint64_t first = 0; first < LONG_CHAIN; first += EVENT_BLOCKS) {
        chain(blocks, EVENT_BLOCKS, first + 1);
        kvidx_event e = first == 0 ? stored(1, 0, blocks, EVENT_BLOCKS)
                                   : stored_after(1, 0, first * 1000u, blocks, EVENT_BLOCKS);
        CHECK_EQ(kvidx_apply_event(ix, &e), KVIDX_OK);
    }
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    CHECK_EQ(stats_of(ix).worker_blocks, LONG_CHAIN);
    buffer b = empty_buffer();
    CHECK_EQ(kvidx_snapshot_write(ix, sink, &b, NULL), KVIDX_OK);
    kvidx_free(ix);
    kvidx_indexer *restored = make_indexer(m);
    CHECK_EQ(kvidx_snapshot_restore(restored, source, &b, NULL), KVIDX_OK);
    CHECK_EQ(stats_of(restored).worker_blocks, LONG_CHAIN);
    kvidx_free(restored);
    free(b.data);
    free(blocks);
    return NULL;
}

static void a_long_chain_is_freed_on_a_small_stack(void) {
    for (size_t i = 0; i < NUM_MODES; i++) {
        pthread_attr_t attr;
        REQUIRE(pthread_attr_init(&attr) == 0);
        REQUIRE(pthread_attr_setstacksize(&attr, SMALL_STACK) == 0);
        pthread_t thread;
        REQUIRE(pthread_create(&thread, &attr, long_chain_on_a_small_stack, (void *)&MODES[i]) == 0);
        REQUIRE(pthread_join(thread, NULL) == 0);
        pthread_attr_destroy(&attr);
    }
}

int main(void) {
    RUN(round_trip_through_callbacks);
    RUN(round_trip_through_files);
    RUN(bad_input_is_malformed_and_leaves_the_indexer_empty);
    RUN(failing_callbacks_and_files_are_io_errors);
    RUN(offset_batches_are_skipped_at_or_below_the_watermark);
    RUN(engine_batches_at_offsets_are_one_unit);
    RUN(a_long_chain_is_freed_on_a_small_stack);
    RUN(a_section_claiming_a_terabyte_is_malformed_early);
    return finish("test_snapshots");
}
