// An engine feed's hash check and llm-d's request keys through the C++ wrapper: payloads made
// by vLLM 0.33.0's own block hasher (tests/fixtures/hash_check) match when the check is told
// the engine's algorithm and seed, a wrong seed mismatches in the first batch, and a feed set
// to llm-d's keys answers the keys llmd_request_keys computes.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_support.hpp"

#ifndef KVIDX_HASH_CHECK_FIXTURES
#error "KVIDX_HASH_CHECK_FIXTURES must name the directory of the hash check fixtures"
#endif

#if defined(KVIDX_HAS_HASH_CHECK) && defined(KVIDX_HAS_LLMD_KEYS)
namespace {

std::vector<std::uint8_t> payload(const std::string& name) {
  const std::string path = std::string(KVIDX_HASH_CHECK_FIXTURES) + "/" + name + ".msgpack";
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>());
}

kvidx::Indexer sync_indexer() {
  kvidx::Config cfg;
  cfg.event_threads = 0;
  auto r = kvidx::Indexer::create(cfg);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(r).value();
}

kvidx::EngineFeed vllm_feed() {
  auto created = kvidx::EngineFeed::create(kvidx::EngineFormat::vllm);
  EXPECT_TRUE(created.ok()) << created.status().message();
  return std::move(created).value_or(kvidx::EngineFeed(nullptr));
}

const kvidx::Worker kWorker{3, 0};

TEST(HashCheckTest, TheEnginesOwnHashesMatchAndAWrongSeedDoesNot) {
  auto idx = sync_indexer();
  auto feed = vllm_feed();
  EXPECT_EQ(feed.hash_check_totals().status(), kvidx::Errc::invalid_argument);
  ASSERT_TRUE(feed.set_hash_check(kvidx::HashAlgorithm::vllm_sha256_cbor,
                                  kvidx::vllm_default_seed, 16)
                  .ok());
  for (int i = 0; i < 4; i++) {
    auto r = feed.apply(idx, kWorker.id, kWorker.rank, {},
                        payload("vllm_sha256_cbor_default_" + std::to_string(i)));
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  auto st = feed.hash_check_stats(kWorker);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->matched, 16u);
  EXPECT_EQ(st->mismatched, 0u);
  EXPECT_EQ(st->unverifiable, 4u);  // the LoRA store: its adapter's path is not published

  ASSERT_TRUE(feed.set_hash_check(kvidx::HashAlgorithm::vllm_sha256_cbor, "0").ok());
  ASSERT_TRUE(
      feed.apply(idx, kWorker.id, kWorker.rank, {}, payload("vllm_sha256_cbor_default_0")).ok());
  st = feed.hash_check_totals();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->matched, 0u);
  EXPECT_EQ(st->mismatched, 5u);
  ASSERT_TRUE(feed.clear_hash_check().ok());
  EXPECT_EQ(feed.hash_check_stats(kWorker).status(), kvidx::Errc::invalid_argument);
}

TEST(HashCheckTest, AnLlmdFeedAnswersLlmdRequestKeys) {
  auto idx = sync_indexer();
  auto feed = vllm_feed();
  ASSERT_TRUE(feed.set_llmd_keys("", "base-model").ok());
  ASSERT_TRUE(
      feed.apply(idx, kWorker.id, kWorker.rank, {}, payload("vllm_sha256_cbor_default_0")).ok());
  std::vector<std::uint32_t> tokens;
  for (std::uint32_t t = 1000; t < 1064; t++) tokens.push_back(t);
  for (std::uint32_t t = 1; t <= 16; t++) tokens.push_back(t);
  for (const auto& [model, want] : {std::pair<const char*, std::uint32_t>{"base-model", 5},
                                    std::pair<const char*, std::uint32_t>{"other", 0}}) {
    auto keys = kvidx::llmd_request_keys(tokens, 16, "", model);
    ASSERT_TRUE(keys.ok());
    ASSERT_EQ(keys->size(), 5u);
    kvidx::MatchBuffer buf;
    ASSERT_TRUE(idx.find_matches(*keys, buf).ok());
    std::uint32_t depth = 0;
    for (const auto& m : buf.view()) {
      if (m.worker_id == kWorker.id) depth = m.depth;
    }
    EXPECT_EQ(depth, want) << model;
  }
  EXPECT_EQ(kvidx::llmd_request_keys(tokens, 0, "", "m").status(), kvidx::Errc::invalid_argument);
}

}  // namespace
#endif  // KVIDX_HAS_HASH_CHECK && KVIDX_HAS_LLMD_KEYS
