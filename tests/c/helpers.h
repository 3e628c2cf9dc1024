/* Helpers shared by the C tests: building indexers and events, querying. */
#ifndef KVIDX_TEST_HELPERS_H
#define KVIDX_TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <kvidx.h>

#include "check.h"

/* The modes every semantic test runs in: every backend, synchronous and pooled. */
typedef struct mode {
    const char *name;
    uint32_t backend;
    uint32_t event_threads;
    uint32_t jump_size;
} mode;

static const mode MODES[] = {
    {"positional-sync", KVIDX_BACKEND_POSITIONAL, 0, 0},
    {"positional-sync-jump1", KVIDX_BACKEND_POSITIONAL, 0, 1},
    {"positional-pooled", KVIDX_BACKEND_POSITIONAL, 2, 3},
    {"radix-sync", KVIDX_BACKEND_RADIX, 0, 0},
    {"radix-pooled", KVIDX_BACKEND_RADIX, 3, 0},
    {"runs-sync", KVIDX_BACKEND_RUNS, 0, 0},
    {"runs-pooled", KVIDX_BACKEND_RUNS, 2, 0},
};
#define NUM_MODES (sizeof(MODES) / sizeof(MODES[0]))

static inline kvidx_indexer *make_indexer(const mode *m) {
    kvidx_config config = kvidx_config_default();
    config.backend = m->backend;
    config.event_threads = m->event_threads;
    config.jump_size = m->jump_size;
    kvidx_indexer *ix = NULL;
    REQUIRE(kvidx_new(&config, &ix) == KVIDX_OK);
    REQUIRE(ix != NULL);
    return ix;
}

static inline kvidx_event stored(uint64_t worker, uint32_t rank, const kvidx_block *blocks, size_t n) {
    kvidx_event e;
    memset(&e, 0, sizeof e);
    e.kind = KVIDX_EVENT_STORED;
    e.worker_id = worker;
    e.dp_rank = rank;
    e.blocks = blocks;
    e.num_blocks = n;
    return e;
}

static inline kvidx_event stored_after(uint64_t worker, uint32_t rank, uint64_t parent,
                                const kvidx_block *blocks, size_t n) {
    kvidx_event e = stored(worker, rank, blocks, n);
    e.has_parent = 1;
    e.parent_seq_hash = parent;
    return e;
}

static inline kvidx_event removed(uint64_t worker, uint32_t rank, const uint64_t *names, size_t n) {
    kvidx_event e;
    memset(&e, 0, sizeof e);
    e.kind = KVIDX_EVENT_REMOVED;
    e.worker_id = worker;
    e.dp_rank = rank;
    e.seq_hashes = names;
    e.num_seq_hashes = n;
    return e;
}

static inline kvidx_event cleared(uint64_t worker, uint32_t rank) {
    kvidx_event e;
    memset(&e, 0, sizeof e);
    e.kind = KVIDX_EVENT_CLEARED;
    e.worker_id = worker;
    e.dp_rank = rank;
    return e;
}

/* Applies one event and returns its status (after a flush in pooled mode). */
static inline kvidx_status apply(kvidx_indexer *ix, kvidx_event e) {
    kvidx_status s = kvidx_apply_event(ix, &e);
    REQUIRE(kvidx_flush(ix) == KVIDX_OK);
    return s;
}

/* A chain of n blocks: local hashes base+i, sequence hashes (base+i)*1000 (opaque names). */
static inline void chain(kvidx_block *out, size_t n, uint64_t base) {
    for (size_t i = 0; i < n; i++) {
        out[i].local_hash = base + i;
        out[i].seq_hash = (base + i) * 1000u;
    }
}

/* The query of the first n blocks of the chain starting at base. */
static inline void query_of(uint64_t *out, size_t n, uint64_t base) {
    for (size_t i = 0; i < n; i++) out[i] = base + i;
}

/* Runs a query that must succeed; returns the number of matches. */
static inline size_t find(const kvidx_indexer *ix, const uint64_t *q, size_t n, kvidx_match *out,
                   size_t cap) {
    size_t len = 0;
    kvidx_status s = kvidx_find_matches(ix, q, n, out, cap, &len);
    CHECK_EQ(s, KVIDX_OK);
    return s == KVIDX_OK ? len : 0;
}

/* The depth a worker reaches for a query (0 if not reported). */
static inline uint32_t depth_of(const kvidx_indexer *ix, const uint64_t *q, size_t n, uint64_t worker,
                         uint32_t rank) {
    kvidx_match out[64];
    size_t len = find(ix, q, n, out, 64);
    for (size_t i = 0; i < len; i++) {
        if (out[i].worker_id == worker && out[i].dp_rank == rank) return out[i].depth;
    }
    return 0;
}

static inline kvidx_stats stats_of(const kvidx_indexer *ix) {
    kvidx_stats st;
    memset(&st, 0, sizeof st);
    REQUIRE(kvidx_get_stats(ix, &st) == KVIDX_OK);
    return st;
}

#endif
