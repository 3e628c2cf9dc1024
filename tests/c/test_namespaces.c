/* Namespaced and multimodal requests through the C ABI (KVIDX_HAS_NAMESPACES):
 * kvidx_hash_request gives the golden values of docs/contract.md section 3.1, equals
 * kvidx_hash_tokens with no namespace and no spans, follows the buffer and pointer rules of
 * the other hashing calls, and a query under another salt or image stops where they differ. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#ifndef KVIDX_HAS_NAMESPACES
#error "the header lacks KVIDX_HAS_NAMESPACES"
#endif

static const mode SYNC = {"sync", KVIDX_BACKEND_POSITIONAL, 0, 0};

static uint32_t TOKENS[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

static kvidx_namespace ns_of(const char *lora, const char *salt) {
    kvidx_namespace ns;
    ns.lora_name = (const uint8_t *)lora;
    ns.lora_name_len = lora ? strlen(lora) : 0;
    ns.cache_salt = (const uint8_t *)salt;
    ns.cache_salt_len = salt ? strlen(salt) : 0;
    return ns;
}

static kvidx_mm_span span_of(const char *id, uint64_t start, uint64_t end) {
    kvidx_mm_span s;
    s.identifier = (const uint8_t *)id;
    s.identifier_len = strlen(id);
    s.start = start;
    s.end = end;
    return s;
}

/* Hashes TOKENS (block size 4) into out[3]; returns the status. */
static kvidx_status hash3(const kvidx_namespace *ns, const kvidx_mm_span *spans, size_t n,
                          uint64_t out[3]) {
    size_t len = 99;
    kvidx_status st = kvidx_hash_request(TOKENS, 12, 4, ns, spans, n, out, 3, &len);
    if (st == KVIDX_OK) CHECK_EQ(len, 3);
    return st;
}

static void golden_values(void) {
    static const uint64_t want[5][3] = {
        {14643705804678351452ull, 16777012769546811212ull, 483935686894639516ull},
        {1461199381953589153ull, 16777012769546811212ull, 483935686894639516ull},
        {11381080598872079209ull, 5698110331184095209ull, 10923852707342720619ull},
        {1978177322621556195ull, 10355098053434598600ull, 483935686894639516ull},
        {7859937575092783861ull, 15422904220237451310ull, 10923852707342720619ull},
    };
    kvidx_namespace none = ns_of(NULL, NULL), salt = ns_of(NULL, "tenant-a"),
                    lora = ns_of("adapter-a", NULL), both = ns_of("adapter-a", "tenant-a");
    kvidx_mm_span image = span_of("image-1", 2, 6);
    uint64_t got[3];
    CHECK_EQ(hash3(&none, NULL, 0, got), KVIDX_OK);
    for (int i = 0; i < 3; i++) CHECK_EQ(got[i], want[0][i]);
    CHECK_EQ(hash3(&salt, NULL, 0, got), KVIDX_OK);
    for (int i = 0; i < 3; i++) CHECK_EQ(got[i], want[1][i]);
    CHECK_EQ(hash3(&lora, NULL, 0, got), KVIDX_OK);
    for (int i = 0; i < 3; i++) CHECK_EQ(got[i], want[2][i]);
    CHECK_EQ(hash3(NULL, &image, 1, got), KVIDX_OK);
    for (int i = 0; i < 3; i++) CHECK_EQ(got[i], want[3][i]);
    CHECK_EQ(hash3(&both, &image, 1, got), KVIDX_OK);
    for (int i = 0; i < 3; i++) CHECK_EQ(got[i], want[4][i]);

    /* No namespace (NULL) and no spans: exactly kvidx_hash_tokens. */
    uint64_t plain[3];
    size_t len = 0;
    CHECK_EQ(kvidx_hash_tokens(TOKENS, 12, 4, plain, 3, &len), KVIDX_OK);
    CHECK_EQ(hash3(NULL, NULL, 0, got), KVIDX_OK);
    CHECK(memcmp(plain, got, sizeof got) == 0);
}

static void buffer_and_pointer_rules(void) {
    uint64_t out[3] = {7, 7, 7};
    size_t len = 0;
    CHECK_EQ(kvidx_hash_request(TOKENS, 12, 4, NULL, NULL, 0, out, 2, &len),
             KVIDX_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(len, 3);
    CHECK_EQ(out[0], 7); /* untouched */
    CHECK_EQ(kvidx_hash_request(TOKENS, 12, 0, NULL, NULL, 0, out, 3, &len),
             KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_hash_request(TOKENS, 12, 4, NULL, NULL, 0, out, 3, NULL),
             KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_hash_request(NULL, 12, 4, NULL, NULL, 0, out, 3, &len), KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_hash_request(TOKENS, 12, 4, NULL, NULL, 1, out, 3, &len),
             KVIDX_ERR_NULL_POINTER);
    kvidx_namespace bad = ns_of(NULL, NULL);
    bad.cache_salt_len = 3; /* NULL salt with a length */
    CHECK_EQ(kvidx_hash_request(TOKENS, 12, 4, &bad, NULL, 0, out, 3, &len),
             KVIDX_ERR_NULL_POINTER);
    kvidx_mm_span nameless = span_of("x", 0, 4);
    nameless.identifier = NULL;
    CHECK_EQ(kvidx_hash_request(TOKENS, 12, 4, NULL, &nameless, 1, out, 3, &len),
             KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(out[0], 7);
    /* Fewer tokens than a block: no hashes, and (NULL, 0) output is fine. */
    CHECK_EQ(kvidx_hash_request(TOKENS, 3, 4, NULL, NULL, 0, NULL, 0, &len), KVIDX_OK);
    CHECK_EQ(len, 0);
}

static void another_salt_or_image_stops_where_it_differs(void) {
    kvidx_indexer *ix = make_indexer(&SYNC);
    kvidx_namespace a = ns_of("adapter-a", "tenant-a"), b = ns_of("adapter-a", "tenant-b");
    kvidx_mm_span cat = span_of("cat", 6, 10), dog = span_of("dog", 6, 10);
    uint64_t local[3], query[3];
    CHECK_EQ(hash3(&a, &cat, 1, local), KVIDX_OK);
    kvidx_block blocks[3];
    for (int i = 0; i < 3; i++) {
        blocks[i].local_hash = local[i];
        blocks[i].seq_hash = 100 + (uint64_t)i;
    }
    CHECK_EQ(apply(ix, stored(1, 0, blocks, 3)), KVIDX_OK);
    CHECK_EQ(hash3(&a, &cat, 1, query), KVIDX_OK);
    CHECK_EQ(depth_of(ix, query, 3, 1, 0), 3);
    CHECK_EQ(hash3(&b, &cat, 1, query), KVIDX_OK); /* another tenant: nothing */
    CHECK_EQ(depth_of(ix, query, 3, 1, 0), 0);
    CHECK_EQ(hash3(&a, &dog, 1, query), KVIDX_OK); /* another image from block 1 on */
    CHECK_EQ(depth_of(ix, query, 3, 1, 0), 1);
    kvidx_free(ix);
}

static void feed_flags_for_extra_keys(void) {
    kvidx_engine_feed *feed = NULL;
    CHECK_EQ(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, KVIDX_FEED_SKIP_EXTRAS, &feed), KVIDX_OK);
    kvidx_engine_feed_free(feed);
    feed = NULL;
    CHECK_EQ(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM,
                                   KVIDX_FEED_SKIP_EXTRAS | KVIDX_FEED_HASH_TOKENS_ONLY, &feed),
             KVIDX_ERR_INVALID_ARGUMENT);
    CHECK(feed == NULL);
}

int main(void) {
    RUN(golden_values);
    RUN(buffer_and_pointer_rules);
    RUN(another_salt_or_image_stops_where_it_differs);
    RUN(feed_flags_for_extra_keys);
    return finish("test_namespaces");
}
