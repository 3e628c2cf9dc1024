// Predicted blocks through the wrapper (KVIDX_HAS_PREDICTIONS): predict() extends the
// predicted depth only, until the TTL runs out on a manual clock or events settle it; the
// byte bound and the per-worker capacity hold; bad arguments are refused.
#include <chrono>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "test_support.hpp"

namespace {

using kvidx::Backend;
using kvidx::Errc;
using kvidx::Worker;
using kvidx_test::chain;
using kvidx_test::Mode;
using kvidx_test::query;
using kvidx_test::seq_of;
using std::chrono::milliseconds;

static_assert(static_cast<std::uint32_t>(kvidx::Clock::monotonic) == KVIDX_CLOCK_MONOTONIC);
static_assert(static_cast<std::uint32_t>(kvidx::Clock::manual) == KVIDX_CLOCK_MANUAL);
static_assert(std::is_same_v<kvidx::PredictedMatch, kvidx_predicted_match>);

/// "id/rank:depth~predicted ..." for a predicted answer; "ERROR" if the call fails.
std::string predicted(const kvidx::Indexer& idx, const std::vector<std::uint64_t>& q) {
  auto r = idx.find_matches_predicted(q);
  if (!r) return "ERROR";
  std::string s;
  for (const auto& m : *r) {
    if (!s.empty()) s += ' ';
    s += std::to_string(m.worker_id) + "/" + std::to_string(m.dp_rank) + ":" +
         std::to_string(m.depth) + "~" + std::to_string(m.predicted_depth);
  }
  return s;
}

kvidx::Indexer manual(Backend backend, std::uint32_t threads, kvidx::PredictionConfig p = {}) {
  kvidx::Config cfg;
  cfg.backend = backend;
  cfg.event_threads = threads;
  cfg.predictions = p;
  cfg.predictions.clock = kvidx::Clock::manual;
  auto r = kvidx::Indexer::create(cfg);
  EXPECT_TRUE(r.ok());
  return std::move(r).value();
}

class Predictions : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override { idx_ = manual(std::get<0>(GetParam()), std::get<1>(GetParam())); }
  void apply(const kvidx::Event& e) {
    ASSERT_EQ(idx_.apply(e), Errc::ok);
    ASSERT_EQ(idx_.flush(), Errc::ok);
  }
  kvidx::Indexer idx_{nullptr};
};

TEST_P(Predictions, ExtendThePredictedDepthUntilTheyExpire) {
  const Worker a{1, 0}, b{2, 0};
  const auto blocks = chain(a, 0, 2);
  apply(kvidx::stored(a, 0, std::nullopt, blocks));
  ASSERT_EQ(idx_.predict(a, query(4), milliseconds(100)), Errc::ok);
  ASSERT_EQ(idx_.predict(b, query(3), milliseconds(100)), Errc::ok);
  EXPECT_EQ(kvidx_test::matches(idx_, query(4)), "1/0:2");
  EXPECT_EQ(predicted(idx_, query(4)), "1/0:2~4 2/0:0~3");
  ASSERT_EQ(idx_.advance_time(milliseconds(99)), Errc::ok);
  EXPECT_EQ(predicted(idx_, query(4)), "1/0:2~4 2/0:0~3");
  ASSERT_EQ(idx_.set_time(milliseconds(100)), Errc::ok);
  EXPECT_EQ(predicted(idx_, query(4)), "1/0:2~2");
  auto now = idx_.now();
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(*now, milliseconds(100));
  EXPECT_EQ(idx_.set_time(milliseconds(1)), Errc::invalid_argument);
}

TEST_P(Predictions, EventsSettleThem) {
  const Worker a{1, 0}, b{2, 0};
  ASSERT_EQ(idx_.predict(a, query(3), milliseconds(100)), Errc::ok);
  ASSERT_EQ(idx_.predict(b, query(3), milliseconds(100)), Errc::ok);
  apply(kvidx::stored(a, 0, std::nullopt, chain(a, 0, 2)));
  const std::vector<std::uint64_t> second{seq_of(a, 1)};
  apply(kvidx::removed(a, 1, second));
  apply(kvidx::cleared(b, 2));
  EXPECT_EQ(predicted(idx_, query(3)), "1/0:1~1");
  auto st = idx_.prediction_stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->confirmed, 2u);
  EXPECT_EQ(st->dropped_by_events, 3u);
  EXPECT_EQ(st->blocks, 1u);
  ASSERT_EQ(idx_.remove_worker(a), Errc::ok);
  ASSERT_EQ(idx_.flush(), Errc::ok);
  EXPECT_EQ(predicted(idx_, query(3)), "");
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, Predictions,
    ::testing::Combine(::testing::Values(Backend::positional, Backend::radix, Backend::runs),
                       ::testing::Values(0u, 2u)),
    [](const ::testing::TestParamInfo<Mode>& info) {
      return kvidx_test::backend_title(std::get<0>(info.param)) +
             (std::get<1>(info.param) == 0 ? "Sync" : "Threads");
    });

TEST(PredictionBounds, CapacityAndBytesHold) {
  kvidx::PredictionConfig capacity;
  capacity.worker_capacity = 2;
  auto idx = manual(Backend::positional, 0, capacity);
  ASSERT_EQ(idx.predict(Worker{1, 0}, query(3), milliseconds(100)), Errc::ok);
  EXPECT_EQ(predicted(idx, query(3)), "1/0:0~2");

  kvidx::PredictionConfig bytes;
  bytes.max_bytes = 64 * 1024;
  idx = manual(Backend::positional, 0, bytes);
  for (std::uint64_t i = 0; i < 20000; ++i) {
    const std::vector<std::uint64_t> c{i * 4, i * 4 + 1, i * 4 + 2, i * 4 + 3};
    ASSERT_EQ(idx.predict(Worker{i % 7, 0}, c, milliseconds(100)), Errc::ok);
  }
  auto st = idx.prediction_stats();
  ASSERT_TRUE(st.ok());
  EXPECT_LE(st->bytes, bytes.max_bytes);
  EXPECT_GT(st->blocks, 0u);
  EXPECT_EQ(st->blocks + st->dropped_for_bytes, 80000u);
}

TEST(PredictionBuffer, GrowsOnceThenReusesItsStorage) {
  auto idx = manual(Backend::positional, 0);
  for (std::uint64_t w = 0; w < 100; ++w) {
    ASSERT_EQ(idx.predict(Worker{w, 0}, query(2), milliseconds(100)), Errc::ok);
  }
  kvidx::PredictedMatchBuffer buf(4);
  ASSERT_EQ(idx.find_matches_predicted(query(2), buf), Errc::ok);
  EXPECT_EQ(buf.size(), 100u);
  const auto* storage = buf.data();
  ASSERT_EQ(idx.find_matches_predicted(query(2), buf), Errc::ok);
  EXPECT_EQ(buf.data(), storage);
  EXPECT_EQ(buf[0].predicted_depth, 2u);
}

TEST(PredictionErrors, BadArgumentsAreRefused) {
  kvidx::Config cfg;
  cfg.predictions.clock = static_cast<kvidx::Clock>(9);
  EXPECT_EQ(kvidx::Indexer::create(cfg).status(), Errc::invalid_argument);
  auto idx = kvidx::Indexer::create();
  ASSERT_TRUE(idx.ok());
  EXPECT_EQ(idx->set_time(milliseconds(1)), Errc::invalid_argument);
  EXPECT_EQ(idx->advance_time(milliseconds(1)), Errc::invalid_argument);
  EXPECT_EQ(idx->predict(Worker{1, 0}, query(1), milliseconds(-1)), Errc::invalid_argument);
  const kvidx::Indexer empty(nullptr);
  EXPECT_EQ(empty.predict(Worker{1, 0}, query(1), milliseconds(1)), Errc::null_pointer);
  EXPECT_EQ(empty.now().status(), Errc::null_pointer);
}

}  // namespace
