/* A minimal KV-aware router written only from kvidx.h: two workers publish what they cache,
 * and each request goes to the worker holding the longest prefix of its blocks.
 *
 * Build (after `bash scripts/install.sh`, with PKG_CONFIG_PATH=<prefix>/lib/pkgconfig):
 *   cc router.c $(pkg-config --cflags --libs kvidx) -o router    (run with LD_LIBRARY_PATH)
 *   cc router.c $(pkg-config --cflags --libs kvidx-static) -o router
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <kvidx.h>

#define BLOCK_SIZE 4
#define MAX_BLOCKS 16

/* Turns a request's tokens into local and sequence hashes; returns the number of blocks. */
static size_t hash_request(const uint32_t *tokens, size_t n, uint64_t *local, uint64_t *seq) {
    size_t len = 0;
    kvidx_status s = kvidx_hash_tokens(tokens, n, BLOCK_SIZE, local, MAX_BLOCKS, &len);
    if (s != KVIDX_OK || kvidx_seq_hashes(local, len, seq) != KVIDX_OK) {
        fprintf(stderr, "hashing failed: %s\n", kvidx_status_str(s));
        return 0;
    }
    return len;
}

/* Publishes that `worker` cached the blocks of a request (a STORED event from position 0). */
static kvidx_status publish(kvidx_indexer *ix, uint64_t worker, uint64_t event_id,
                            const uint64_t *local, const uint64_t *seq, size_t n) {
    kvidx_block blocks[MAX_BLOCKS];
    for (size_t i = 0; i < n; i++) {
        blocks[i].local_hash = local[i];
        blocks[i].seq_hash = seq[i];
    }
    kvidx_event e;
    memset(&e, 0, sizeof e);
    e.kind = KVIDX_EVENT_STORED;
    e.worker_id = worker;
    e.event_id = event_id;
    e.blocks = blocks;
    e.num_blocks = n;
    return kvidx_apply_event(ix, &e);
}

int main(void) {
    if (kvidx_abi_version() != KVIDX_ABI_VERSION) {
        fprintf(stderr, "header and library ABI differ\n");
        return 1;
    }
    kvidx_config config = kvidx_config_default(); /* one event thread */
    kvidx_indexer *ix = NULL;
    kvidx_status s = kvidx_new(&config, &ix);
    if (s != KVIDX_OK) {
        fprintf(stderr, "kvidx_new: %s\n", kvidx_status_str(s));
        return 1;
    }

    /* Worker 1 cached a 12-token system prompt; worker 2 that prompt plus a question. */
    uint32_t prompt[16];
    for (uint32_t i = 0; i < 16; i++) prompt[i] = 100 + i;
    uint64_t local[MAX_BLOCKS], seq[MAX_BLOCKS];
    size_t n = hash_request(prompt, 12, local, seq);
    publish(ix, 1, 0, local, seq, n);
    n = hash_request(prompt, 16, local, seq);
    publish(ix, 2, 0, local, seq, n);
    kvidx_flush(ix); /* events are queued; the barrier makes them visible */

    /* A request sharing all 16 tokens, then 2 more blocks. */
    uint32_t request[24];
    memcpy(request, prompt, sizeof prompt);
    for (uint32_t i = 16; i < 24; i++) request[i] = 900 + i;
    n = hash_request(request, 24, local, seq);

    kvidx_match matches[8];
    size_t found = 0;
    s = kvidx_find_matches(ix, local, n, matches, 8, &found);
    if (s != KVIDX_OK) {
        fprintf(stderr, "kvidx_find_matches: %s\n", kvidx_status_str(s));
        kvidx_free(ix);
        return 1;
    }
    printf("kvidx %s, request of %zu blocks\n", kvidx_version(), n);
    for (size_t i = 0; i < found; i++) {
        printf("worker %llu (dp_rank %u) holds %u blocks\n",
               (unsigned long long)matches[i].worker_id, matches[i].dp_rank, matches[i].depth);
    }
    if (found > 0) printf("route to worker %llu\n", (unsigned long long)matches[0].worker_id);

    kvidx_stats st;
    kvidx_get_stats(ix, &st);
    printf("events applied %llu, workers %llu, blocks %llu\n",
           (unsigned long long)st.events_applied, (unsigned long long)st.workers,
           (unsigned long long)st.worker_blocks);
    kvidx_free(ix);
    return 0;
}
