/* An engine feed's hash check (KVIDX_HAS_HASH_CHECK) and llm-d's request keys
 * (KVIDX_HAS_LLMD_KEYS) through the C ABI: payloads made by vLLM 0.33.0's own block hasher
 * (tests/fixtures/hash_check) match when the check is told the engine's algorithm and seed and
 * mismatch with another seed; kvidx_llmd_request_keys gives the keys of the independent Go
 * implementation (tests/fixtures/llmd_keys.txt); a feed set to llm-d's keys answers them.
 * Run from the repository's root (the fixtures are read from there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#ifndef KVIDX_HAS_HASH_CHECK
#error "the header lacks KVIDX_HAS_HASH_CHECK"
#endif
#ifndef KVIDX_HAS_LLMD_KEYS
#error "the header lacks KVIDX_HAS_LLMD_KEYS"
#endif

static const mode SYNC = {"sync", KVIDX_BACKEND_POSITIONAL, 0, 0};

static uint8_t *read_fixture(const char *name, size_t *len) {
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/hash_check/%s.msgpack", name);
    FILE *f = fopen(path, "rb");
    REQUIRE(f != NULL);
    uint8_t *buf = malloc(1 << 16);
    REQUIRE(buf != NULL);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    REQUIRE(*len > 0);
    return buf;
}

static void apply_fixture(const kvidx_engine_feed *feed, const kvidx_indexer *ix, const char *name) {
    size_t len = 0;
    uint8_t *payload = read_fixture(name, &len);
    kvidx_engine_batch_result r;
    CHECK_EQ(kvidx_engine_feed_apply(feed, ix, 3, 0, NULL, 0, payload, len, &r), KVIDX_OK);
    free(payload);
}

static const char DEFAULT_SEED[] = "vllm-none-hash";

static void the_engines_hashes_match_and_a_wrong_seed_does_not(void) {
    kvidx_indexer *ix = make_indexer(&SYNC);
    kvidx_engine_feed *feed = NULL;
    REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, 0, &feed) == KVIDX_OK);
    kvidx_hash_check_stats s;
    /* Off by default. */
    CHECK_EQ(kvidx_engine_feed_hash_check_totals(feed, &s), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_engine_feed_set_hash_check(feed, 99, NULL, 0, 0), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_engine_feed_set_hash_check(feed, KVIDX_HASH_VLLM_SHA256_CBOR, NULL, 3, 0),
             KVIDX_ERR_NULL_POINTER);
    CHECK_EQ(kvidx_engine_feed_set_hash_check(feed, KVIDX_HASH_VLLM_SHA256_CBOR,
                                              (const uint8_t *)"\xff", 1, 0),
             KVIDX_ERR_INVALID_ARGUMENT);

    CHECK_EQ(kvidx_engine_feed_set_hash_check(feed, KVIDX_HASH_VLLM_SHA256_CBOR,
                                              (const uint8_t *)DEFAULT_SEED, strlen(DEFAULT_SEED), 16),
             KVIDX_OK);
    apply_fixture(feed, ix, "vllm_sha256_cbor_default_0");
    apply_fixture(feed, ix, "vllm_sha256_cbor_default_1");
    memset(&s, 0xab, sizeof s);
    CHECK_EQ(kvidx_engine_feed_hash_check_stats(feed, 3, 0, &s), KVIDX_OK);
    CHECK_EQ(s.matched, 11); /* 5 blocks, 2 continuing them, 4 salted */
    CHECK_EQ(s.mismatched, 0);
    CHECK_EQ(s.unverifiable, 0);
    CHECK_EQ(kvidx_engine_feed_hash_check_stats(feed, 4, 0, &s), KVIDX_OK);
    CHECK_EQ(s.matched, 0);
    CHECK_EQ(kvidx_engine_feed_hash_check_totals(feed, &s), KVIDX_OK);
    CHECK_EQ(s.matched, 11);

    /* A router that believes the engine's seed is PYTHONHASHSEED=0: the first batch mismatches. */
    CHECK_EQ(kvidx_engine_feed_set_hash_check(feed, KVIDX_HASH_VLLM_SHA256_CBOR,
                                              (const uint8_t *)"0", 1, 0),
             KVIDX_OK);
    apply_fixture(feed, ix, "vllm_sha256_cbor_default_0");
    CHECK_EQ(kvidx_engine_feed_hash_check_stats(feed, 3, 0, &s), KVIDX_OK);
    CHECK_EQ(s.matched, 0);
    CHECK_EQ(s.mismatched, 5);
    CHECK_EQ(kvidx_engine_feed_clear_hash_check(feed), KVIDX_OK);
    CHECK_EQ(kvidx_engine_feed_hash_check_stats(feed, 3, 0, &s), KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_engine_feed_hash_check_stats(NULL, 3, 0, &s), KVIDX_ERR_NULL_POINTER);
    kvidx_engine_feed_free(feed);
    kvidx_free(ix);
}

static void llmd_keys_are_the_go_implementations(void) {
    /* tests/fixtures/llmd_keys.txt: "0" "meta-llama/Llama-3.1-8B-Instruct" 16 1 48 */
    static const char MODEL[] = "meta-llama/Llama-3.1-8B-Instruct";
    const uint64_t want[3] = {0xc92615b886a6ba00ull, 0x109a5c624722a18bull, 0x4e01535f41c34500ull};
    uint32_t tokens[50];
    for (uint32_t i = 0; i < 50; i++) tokens[i] = i + 1;
    uint64_t keys[3] = {0};
    size_t n = 0;
    CHECK_EQ(kvidx_llmd_request_keys(tokens, 48, 16, (const uint8_t *)"0", 1, (const uint8_t *)MODEL,
                                     strlen(MODEL), keys, 3, &n),
             KVIDX_OK);
    CHECK_EQ(n, 3);
    for (int i = 0; i < 3; i++) CHECK_EQ(keys[i], want[i]);
    /* A partial tail is not a block; a small buffer reports the count. */
    CHECK_EQ(kvidx_llmd_request_keys(tokens, 50, 16, (const uint8_t *)"0", 1, (const uint8_t *)MODEL,
                                     strlen(MODEL), keys, 2, &n),
             KVIDX_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(n, 3);
    CHECK_EQ(kvidx_llmd_request_keys(tokens, 48, 0, NULL, 0, NULL, 0, keys, 3, &n),
             KVIDX_ERR_INVALID_ARGUMENT);
    CHECK_EQ(kvidx_llmd_request_keys(tokens, 48, 16, NULL, 0, NULL, 0, keys, 3, NULL),
             KVIDX_ERR_NULL_POINTER);
}

static void an_llmd_feed_answers_llmd_keys(void) {
    static const char MODEL[] = "base-model";
    kvidx_indexer *ix = make_indexer(&SYNC);
    kvidx_engine_feed *feed = NULL;
    REQUIRE(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, 0, &feed) == KVIDX_OK);
    CHECK_EQ(kvidx_engine_feed_set_llmd_keys(feed, NULL, 0, (const uint8_t *)MODEL, strlen(MODEL)),
             KVIDX_OK);
    apply_fixture(feed, ix, "vllm_sha256_cbor_default_0");
    /* That batch stores the 5 blocks of 1000..1063 ++ 1..16. */
    uint32_t tokens[80];
    for (uint32_t i = 0; i < 64; i++) tokens[i] = 1000 + i;
    for (uint32_t i = 0; i < 16; i++) tokens[64 + i] = 1 + i;
    uint64_t keys[5];
    size_t n = 0;
    CHECK_EQ(kvidx_llmd_request_keys(tokens, 80, 16, NULL, 0, (const uint8_t *)MODEL, strlen(MODEL),
                                     keys, 5, &n),
             KVIDX_OK);
    CHECK_EQ(depth_of(ix, keys, 5, 3, 0), 5);
    CHECK_EQ(kvidx_llmd_request_keys(tokens, 80, 16, NULL, 0, (const uint8_t *)"other", 5, keys, 5,
                                     &n),
             KVIDX_OK);
    CHECK_EQ(depth_of(ix, keys, 5, 3, 0), 0);
    kvidx_engine_feed_free(feed);
    kvidx_free(ix);
}

int main(void) {
    RUN(the_engines_hashes_match_and_a_wrong_seed_does_not);
    RUN(llmd_keys_are_the_go_implementations);
    RUN(an_llmd_feed_answers_llmd_keys);
    return finish("test_hash_check");
}
