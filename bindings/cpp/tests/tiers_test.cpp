// Storage tiers through the wrapper: events on a tier, per-tier depths, bad tiers, the
// reusable TieredMatchBuffer and the score, on both backends, synchronous and with event
// threads.
#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "test_support.hpp"

namespace {

using kvidx::Backend;
using kvidx::Errc;
using kvidx::Tier;
using kvidx::Worker;
using kvidx_test::chain;
using kvidx_test::matches;
using kvidx_test::query;
using kvidx_test::seq_of;

// The wrapper's values are the C ABI's.
static_assert(static_cast<std::uint32_t>(Tier::device) == KVIDX_TIER_DEVICE);
static_assert(static_cast<std::uint32_t>(Tier::host) == KVIDX_TIER_HOST);
static_assert(static_cast<std::uint32_t>(Tier::disk) == KVIDX_TIER_DISK);
static_assert(static_cast<std::uint32_t>(Tier::external) == KVIDX_TIER_EXTERNAL);
static_assert(static_cast<std::uint32_t>(Tier::all) == KVIDX_TIER_ALL);
static_assert(kvidx::tier_count == 4);
static_assert(std::is_same_v<kvidx::TieredMatch, kvidx_tiered_match>);
static_assert(static_cast<std::uint32_t>(kvidx::FeedFlags::unknown_medium_device) ==
              KVIDX_FEED_UNKNOWN_MEDIUM_DEVICE);
static_assert(static_cast<std::uint32_t>(kvidx::FeedFlags::unknown_medium_host) ==
              KVIDX_FEED_UNKNOWN_MEDIUM_HOST);
static_assert(static_cast<std::uint32_t>(kvidx::FeedFlags::unknown_medium_disk) ==
              KVIDX_FEED_UNKNOWN_MEDIUM_DISK);

/// "id/rank:depth[d,h,s,e] ..." for a tiered match list.
std::string render(const std::vector<kvidx::TieredMatch>& ms) {
  std::string s;
  for (const auto& m : ms) {
    if (!s.empty()) s += ' ';
    s += std::to_string(m.worker_id) + "/" + std::to_string(m.dp_rank) + ":" +
         std::to_string(m.depth) + "[";
    for (std::size_t t = 0; t < kvidx::tier_count; ++t) {
      if (t) s += ',';
      s += std::to_string(m.tier_depths[t]);
    }
    s += ']';
  }
  return s;
}

std::string tiered(const kvidx::Indexer& idx, const std::vector<std::uint64_t>& q) {
  auto r = idx.find_matches_tiered(q);
  if (!r) return "ERROR";
  return render(*r);
}

/// The engine names of worker `w`'s blocks [from, to).
std::vector<std::uint64_t> names(Worker w, std::size_t from, std::size_t to) {
  std::vector<std::uint64_t> v;
  for (std::size_t i = from; i < to; ++i) v.push_back(seq_of(w, i));
  return v;
}

/// (backend, event_threads)
using kvidx_test::Mode;

class Tiers : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    auto r = kvidx_test::create_indexer(std::get<0>(GetParam()), std::get<1>(GetParam()));
    ASSERT_TRUE(r.ok()) << r.status().message();
    idx_ = std::move(r).value();
  }
  /// Applies one event on `tier` and waits until it is applied.
  void apply(const kvidx::Event& e, Tier tier) {
    ASSERT_EQ(idx_.apply_event_on_tier(e, tier), Errc::ok);
    ASSERT_EQ(idx_.flush(), Errc::ok);
  }
  kvidx::Stats stats() {
    EXPECT_EQ(idx_.flush(), Errc::ok);
    auto s = idx_.stats();
    EXPECT_TRUE(s.ok());
    return s.value_or(kvidx::Stats{});
  }

  kvidx::Indexer idx_{nullptr};
};

TEST_P(Tiers, OffloadToHostThenEvictFromDevice) {
  const Worker w{3, 1};
  const auto blocks = chain(w, 0, 4);
  apply(kvidx::stored(w, 0, std::nullopt, blocks), Tier::device);
  EXPECT_EQ(tiered(idx_, query(6)), "3/1:4[4,4,4,4]");
  // The engine offloads the whole chain to host memory, then evicts blocks 2 and 3 from the
  // GPU: they are still held, on the host.
  apply(kvidx::stored(w, 1, std::nullopt, blocks), Tier::host);
  EXPECT_EQ(tiered(idx_, query(6)), "3/1:4[4,4,4,4]");
  const auto evicted = names(w, 2, 4);
  apply(kvidx::removed(w, 2, evicted), Tier::device);
  EXPECT_EQ(tiered(idx_, query(6)), "3/1:4[2,4,4,4]");
  EXPECT_EQ(matches(idx_, query(6)), "3/1:4") << "plain depth: on any tier";
  // A hole on the device in the middle of the prefix caps the device depth there.
  const auto one = names(w, 1, 2);
  apply(kvidx::removed(w, 3, one), Tier::device);
  EXPECT_EQ(tiered(idx_, query(6)), "3/1:4[1,4,4,4]");
  // Block 3 leaves the host as well: it is gone.
  const auto last = names(w, 3, 4);
  apply(kvidx::removed(w, 4, last), Tier::host);
  EXPECT_EQ(tiered(idx_, query(6)), "3/1:3[1,3,3,3]");
  EXPECT_EQ(matches(idx_, query(6)), "3/1:3");
  auto r = idx_.find_matches_tiered(query(6));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ(kvidx::tier_depth((*r)[0], Tier::device), 1u);
  EXPECT_EQ(kvidx::tier_depth((*r)[0], Tier::host), 3u);
  EXPECT_EQ(kvidx::tier_depth((*r)[0], Tier::all), 3u);
  EXPECT_EQ(stats().worker_blocks, 3u);
}

TEST_P(Tiers, RemovalFromOneTierLeavesTheOthers) {
  const Worker w{5, 0};
  const auto blocks = chain(w, 0, 3);
  apply(kvidx::stored(w, 0, std::nullopt, blocks), Tier::host);
  apply(kvidx::stored(w, 1, std::nullopt, blocks), Tier::disk);
  EXPECT_EQ(tiered(idx_, query(3)), "5/0:3[0,3,3,3]");
  const auto all = names(w, 0, 3);
  apply(kvidx::removed(w, 2, all), Tier::host);
  EXPECT_EQ(tiered(idx_, query(3)), "5/0:3[0,0,3,3]");
  EXPECT_EQ(matches(idx_, query(3)), "5/0:3");
  // A name not on the tier is an unknown removal and changes nothing.
  const std::uint64_t before = stats().unknown_removals;
  const auto first = names(w, 0, 1);
  apply(kvidx::removed(w, 3, first), Tier::device);
  EXPECT_EQ(stats().unknown_removals, before + 1);
  EXPECT_EQ(tiered(idx_, query(3)), "5/0:3[0,0,3,3]");
  // Tier::all takes every tier off.
  apply(kvidx::removed(w, 4, all), Tier::all);
  EXPECT_EQ(tiered(idx_, query(3)), "");
  EXPECT_EQ(matches(idx_, query(3)), "");
}

TEST_P(Tiers, BatchOnTiersAndClearedDropsEveryTier) {
  const Worker a{1, 0}, b{2, 0};
  const auto ba = chain(a, 0, 2), bb = chain(b, 0, 3);
  const std::vector<kvidx::Event> events{kvidx::stored(a, 0, std::nullopt, ba),
                                         kvidx::stored(b, 0, std::nullopt, bb),
                                         kvidx::stored(b, 1, std::nullopt, bb)};
  const std::vector<Tier> tiers{Tier::external, Tier::device, Tier::disk};
  ASSERT_EQ(idx_.apply_events_on_tiers(events, tiers), Errc::ok);
  ASSERT_EQ(idx_.flush(), Errc::ok);
  EXPECT_EQ(tiered(idx_, query(4)), "2/0:3[3,3,3,3] 1/0:2[0,0,0,2]");
  // The same order and depths as find_matches.
  EXPECT_EQ(matches(idx_, query(4)), "2/0:3 1/0:2");
  // Raw C tier values and the pointer + size form are the same call.
  const std::array<kvidx::Event, 1> clear_b{kvidx::cleared(b, 2)};
  const std::array<std::uint32_t, 1> raw{KVIDX_TIER_HOST};
  ASSERT_EQ(idx_.apply_events_on_tiers(clear_b, raw), Errc::ok);
  ASSERT_EQ(idx_.flush(), Errc::ok);
  EXPECT_EQ(tiered(idx_, query(4)), "1/0:2[0,0,0,2]") << "CLEARED on a tier drops every tier";
  const kvidx::Event clear_a = kvidx::cleared(a, 1);
  const Tier all = Tier::all;
  ASSERT_EQ(idx_.apply_events_on_tiers(&clear_a, &all, 1), Errc::ok);
  ASSERT_EQ(idx_.flush(), Errc::ok);
  EXPECT_EQ(tiered(idx_, query(4)), "");
}

TEST_P(Tiers, BadTierIsInvalidArgumentAndAppliesNothing) {
  const Worker w{9, 0};
  const auto blocks = chain(w, 0, 2);
  const kvidx::Event store = kvidx::stored(w, 0, std::nullopt, blocks);
  EXPECT_EQ(idx_.apply_event_on_tier(store, static_cast<Tier>(4)), Errc::invalid_argument);
  EXPECT_EQ(idx_.apply_event_on_tier(store, static_cast<Tier>(254)), Errc::invalid_argument);
  EXPECT_EQ(idx_.apply_event_on_tier(store, Tier::all), Errc::invalid_argument)
      << "a STORED must name one tier";
  // One bad tier anywhere in a batch: none of the batch is applied.
  const std::vector<kvidx::Event> batch{store, kvidx::stored(w, 1, std::nullopt, blocks)};
  const std::vector<Tier> bad{Tier::device, static_cast<Tier>(7)};
  EXPECT_EQ(idx_.apply_events_on_tiers(batch, bad), Errc::invalid_argument);
  const std::vector<Tier> all_on_store{Tier::host, Tier::all};
  EXPECT_EQ(idx_.apply_events_on_tiers(batch, all_on_store), Errc::invalid_argument);
  const std::vector<std::uint32_t> raw_bad{0, 100};
  EXPECT_EQ(idx_.apply_events_on_tiers(batch, raw_bad), Errc::invalid_argument);
  // Sizes that differ are refused by the wrapper before the library sees them.
  const std::vector<Tier> short_tiers{Tier::device};
  EXPECT_EQ(idx_.apply_events_on_tiers(batch, short_tiers), Errc::invalid_argument);
  EXPECT_EQ(idx_.apply_events_on_tiers(kvidx::Span<kvidx::Event>(), short_tiers),
            Errc::invalid_argument);
  EXPECT_EQ(tiered(idx_, query(2)), "");
  EXPECT_EQ(matches(idx_, query(2)), "");
  const auto st = stats();
  EXPECT_EQ(st.events_applied, 0u);
  EXPECT_EQ(st.events_rejected, 0u) << "shape errors count nowhere";
  EXPECT_EQ(st.worker_blocks, 0u);
  // Empty batches are valid.
  EXPECT_EQ(idx_.apply_events_on_tiers(kvidx::Span<kvidx::Event>(), kvidx::Span<Tier>()),
            Errc::ok);
}

TEST_P(Tiers, ScoreEqualsTheCFunction) {
  const Worker a{1, 0}, b{2, 0};
  const auto ba = chain(a, 0, 4), bb = chain(b, 0, 3);
  apply(kvidx::stored(a, 0, std::nullopt, ba), Tier::host);
  apply(kvidx::stored(a, 1, std::nullopt, chain(a, 0, 1)), Tier::device);
  apply(kvidx::stored(a, 2, std::nullopt, ba), Tier::external);
  const auto tail = names(a, 2, 4);
  apply(kvidx::removed(a, 3, tail), Tier::host);
  apply(kvidx::stored(b, 0, std::nullopt, bb), Tier::disk);
  EXPECT_EQ(tiered(idx_, query(4)), "1/0:4[1,2,2,4] 2/0:3[0,0,3,3]");

  const kvidx::TierWeights weights{1.0, 0.8, 0.5, 0.2};
  kvidx::TieredMatchBuffer buf;
  ASSERT_EQ(idx_.find_matches_tiered(query(4), buf), Errc::ok);
  ASSERT_EQ(buf.size(), 2u);
  const double want[] = {1.0 + 0.8 + 2 * 0.2, 3 * 0.5};
  for (std::size_t i = 0; i < buf.size(); ++i) {
    auto score = kvidx::tiered_score(buf[i], weights);
    ASSERT_TRUE(score.ok()) << score.status().message();
    double c = -1.0;
    ASSERT_EQ(kvidx_tiered_score(&buf[i], weights.data(), &c), KVIDX_OK);
    EXPECT_EQ(*score, c) << "the wrapper returns the C function's value";
    EXPECT_DOUBLE_EQ(*score, want[i]);
  }
  // Any weights, including unusual ones, give what the C function gives.
  const kvidx::TierWeights odd{-1.5, 0.0, 1e9, 3.25};
  double c = 0.0;
  ASSERT_EQ(kvidx_tiered_score(&buf[0], odd.data(), &c), KVIDX_OK);
  EXPECT_EQ(kvidx::tiered_score(buf[0], odd).value_or(-7.0), c);
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, Tiers,
    ::testing::Combine(::testing::Values(Backend::positional, Backend::radix, Backend::runs),
                       ::testing::Values(0u, 2u)),
    [](const ::testing::TestParamInfo<Mode>& info) {
      return kvidx_test::backend_title(std::get<0>(info.param)) +
             (std::get<1>(info.param) == 0 ? "Sync" : "Threads");
    });

TEST(TieredMatchBufferTest, GrowsOnceThenReusesItsStorage) {
  auto created = kvidx::Indexer::create();
  ASSERT_TRUE(created.ok());
  const kvidx::Indexer idx = std::move(created).value();
  for (std::uint64_t id = 1; id <= 40; ++id) {
    const Worker w{id, 0};
    const auto blocks = chain(w, 0, 1 + id % 5);
    ASSERT_EQ(idx.apply_event_on_tier(kvidx::stored(w, 0, std::nullopt, blocks),
                                      id % 2 ? Tier::device : Tier::host),
              Errc::ok);
  }
  ASSERT_EQ(idx.flush(), Errc::ok);
  const auto q = query(5);
  kvidx::TieredMatchBuffer buf(1);
  ASSERT_EQ(idx.find_matches_tiered(q, buf), Errc::ok);
  ASSERT_EQ(buf.size(), 40u);
  EXPECT_GE(buf.capacity(), 40u);
  EXPECT_EQ(buf[0].depth, 5u);
  EXPECT_EQ(buf[39].depth, 1u);
  const kvidx::TieredMatch* storage = buf.data();
  const std::size_t cap = buf.capacity();
  kvidx::MatchBuffer plain;
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(idx.find_matches_tiered(q.data(), q.size(), buf), Errc::ok);
    EXPECT_EQ(buf.data(), storage) << "a warm buffer must not reallocate";
    EXPECT_EQ(buf.capacity(), cap);
    EXPECT_EQ(buf.size(), 40u);
  }
  // The same workers, depths and order as find_matches; odd ids on the device, even on host.
  ASSERT_EQ(idx.find_matches(q, plain), Errc::ok);
  ASSERT_EQ(plain.size(), buf.size());
  std::size_t i = 0;
  for (const kvidx::TieredMatch& m : buf.view()) {
    EXPECT_EQ(m.worker_id, plain[i].worker_id);
    EXPECT_EQ(m.dp_rank, plain[i].dp_rank);
    EXPECT_EQ(m.depth, plain[i].depth);
    EXPECT_EQ(m.tier_depths[3], m.depth);
    EXPECT_EQ(m.tier_depths[0], m.worker_id % 2 ? m.depth : 0u);
    EXPECT_EQ(m.tier_depths[1], m.depth);
    ++i;
  }
  kvidx::TieredMatchBuffer empty(0);  // a zero-capacity buffer works too
  ASSERT_EQ(idx.find_matches_tiered(q, empty), Errc::ok);
  EXPECT_EQ(empty.size(), 40u);
  buf.clear();
  EXPECT_TRUE(buf.empty());
  EXPECT_EQ(buf.capacity(), cap);
}

TEST(TiersErrors, NullHandleAndNullInputs) {
  kvidx::Indexer gone{nullptr};
  const kvidx::Event e = kvidx::cleared({1, 0}, 0);
  const Tier t = Tier::device;
  kvidx::TieredMatchBuffer buf;
  EXPECT_EQ(gone.apply_event_on_tier(e, Tier::all), Errc::null_pointer);
  EXPECT_EQ(gone.apply_events_on_tiers(&e, &t, 1), Errc::null_pointer);
  EXPECT_EQ(gone.find_matches_tiered(query(1), buf), Errc::null_pointer);
  EXPECT_TRUE(buf.empty());
  EXPECT_EQ(gone.find_matches_tiered(query(1)).status(), Errc::null_pointer);

  auto created = kvidx::Indexer::create();
  ASSERT_TRUE(created.ok());
  const kvidx::Indexer idx = std::move(created).value();
  EXPECT_EQ(idx.find_matches_tiered(kvidx::Span<std::uint64_t>(nullptr, 2), buf),
            Errc::null_pointer);
  EXPECT_EQ(idx.apply_events_on_tiers(&e, nullptr, 1), Errc::null_pointer);
  EXPECT_EQ(idx.find_matches_tiered(kvidx::Span<std::uint64_t>(), buf), Errc::ok);
  EXPECT_TRUE(buf.empty());
}

TEST(TiersErrors, AtMostOneUnknownMediumFlag) {
  using kvidx::FeedFlags;
  for (const FeedFlags f : {FeedFlags::unknown_medium_device, FeedFlags::unknown_medium_host,
                            FeedFlags::unknown_medium_disk}) {
    auto feed = kvidx::EngineFeed::create(kvidx::EngineFormat::vllm, FeedFlags::all_media | f);
    EXPECT_TRUE(feed.ok()) << feed.status().message();
  }
  auto two = kvidx::EngineFeed::create(
      kvidx::EngineFormat::vllm,
      FeedFlags::all_media | FeedFlags::unknown_medium_host | FeedFlags::unknown_medium_disk);
  EXPECT_EQ(two.status(), Errc::invalid_argument);
}

}  // namespace
