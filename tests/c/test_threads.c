/* Concurrency through the C ABI: pthread readers query while writer threads apply events,
 * in pooled and synchronous modes. Readers check every answer is well-formed; the final
 * state is checked exactly after a flush. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <kvidx.h>

#include "check.h"
#include "helpers.h"

#define WORKERS 16
#define CHAIN 12
#define ROUNDS 300
#define WRITERS 2
#define READERS 4

typedef struct shared {
    kvidx_indexer *ix;
    atomic_int writers_left;
    atomic_int bad_answers;
    atomic_long queries;
} shared;

typedef struct writer_arg {
    shared *s;
    uint64_t first_worker; /* this writer owns workers first_worker, +WRITERS, ... */
} writer_arg;

static void *writer(void *p) {
    writer_arg *a = p;
    kvidx_block blocks[CHAIN];
    chain(blocks, CHAIN, 1);
    for (int round = 0; round < ROUNDS; round++) {
        for (uint64_t w = a->first_worker; w < WORKERS; w += WRITERS) {
            /* Grow the chain to a round-dependent length, then trim its tail. */
            size_t keep = 1 + (size_t)((round + w) % CHAIN);
            kvidx_event e = stored(w, 0, blocks, CHAIN);
            if (kvidx_apply_event(a->s->ix, &e) != KVIDX_OK) atomic_fetch_add(&a->s->bad_answers, 1);
            uint64_t tail[CHAIN];
            size_t n = 0;
            for (size_t i = keep; i < CHAIN; i++) tail[n++] = blocks[i].seq_hash;
            e = removed(w, 0, tail, n);
            if (kvidx_apply_event(a->s->ix, &e) != KVIDX_OK) atomic_fetch_add(&a->s->bad_answers, 1);
        }
    }
    atomic_fetch_sub(&a->s->writers_left, 1);
    return NULL;
}

static void *reader(void *p) {
    shared *s = p;
    uint64_t q[CHAIN];
    query_of(q, CHAIN, 1);
    kvidx_match out[WORKERS];
    do { /* at least one query, however the threads are scheduled */
        size_t len = 0;
        kvidx_status st = kvidx_find_matches(s->ix, q, CHAIN, out, WORKERS, &len);
        int bad = st != KVIDX_OK || len > WORKERS;
        for (size_t i = 0; !bad && i < len; i++) {
            bad |= out[i].worker_id >= WORKERS || out[i].dp_rank != 0 || out[i].depth == 0 ||
                   out[i].depth > CHAIN;
            if (i > 0) {
                bad |= out[i - 1].depth < out[i].depth;
                bad |= out[i - 1].depth == out[i].depth && out[i - 1].worker_id >= out[i].worker_id;
            }
        }
        kvidx_stats stats;
        bad |= kvidx_get_stats(s->ix, &stats) != KVIDX_OK || stats.workers > WORKERS;
        if (bad) atomic_fetch_add(&s->bad_answers, 1);
        atomic_fetch_add(&s->queries, 1);
    } while (atomic_load(&s->writers_left) > 0);
    return NULL;
}

static void readers_during_writes(const mode *m) {
    shared s;
    s.ix = make_indexer(m);
    atomic_init(&s.writers_left, WRITERS);
    atomic_init(&s.bad_answers, 0);
    atomic_init(&s.queries, 0);
    pthread_t readers[READERS], writers[WRITERS];
    writer_arg args[WRITERS];
    for (int i = 0; i < READERS; i++) REQUIRE(pthread_create(&readers[i], NULL, reader, &s) == 0);
    for (int i = 0; i < WRITERS; i++) {
        args[i].s = &s;
        args[i].first_worker = (uint64_t)i;
        REQUIRE(pthread_create(&writers[i], NULL, writer, &args[i]) == 0);
    }
    for (int i = 0; i < WRITERS; i++) pthread_join(writers[i], NULL);
    for (int i = 0; i < READERS; i++) pthread_join(readers[i], NULL);
    CHECK_EQ(atomic_load(&s.bad_answers), 0);
    CHECK(atomic_load(&s.queries) > 0);

    /* After the barrier, each worker holds exactly the prefix of its last round. */
    REQUIRE(kvidx_flush(s.ix) == KVIDX_OK);
    uint64_t q[CHAIN];
    query_of(q, CHAIN, 1);
    uint64_t blocks_total = 0;
    for (uint64_t w = 0; w < WORKERS; w++) {
        size_t keep = 1 + (size_t)((ROUNDS - 1 + w) % CHAIN);
        CHECK_EQ(depth_of(s.ix, q, CHAIN, w, 0), keep);
        blocks_total += keep;
    }
    kvidx_stats st = stats_of(s.ix);
    CHECK_EQ(st.events_applied, 2ull * ROUNDS * WORKERS);
    CHECK_EQ(st.workers, WORKERS);
    CHECK_EQ(st.worker_blocks, blocks_total);
    CHECK_EQ(st.unknown_removals, 0);
    printf("       %s: %ld queries during %d events\n", m->name, (long)atomic_load(&s.queries),
           2 * ROUNDS * WORKERS);
    kvidx_free(s.ix);
}

static void readers_during_writes_all_modes(void) {
    for (size_t i = 0; i < NUM_MODES; i++) readers_during_writes(&MODES[i]);
}

int main(void) {
    RUN(readers_during_writes_all_modes);
    return finish("test_threads");
}
