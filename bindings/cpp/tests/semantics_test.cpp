// The wrapper gives the contract's answers (section 1) on both backends, synchronous and with
// event threads.
#include <array>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "test_support.hpp"

namespace {

using kvidx::Backend;
using kvidx::Errc;
using kvidx::Worker;
using kvidx_test::chain;
using kvidx_test::matches;
using kvidx_test::query;
using kvidx_test::seq_of;

/// (backend, event_threads)
using kvidx_test::Mode;

class Semantics : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    auto r = kvidx_test::create_indexer(std::get<0>(GetParam()), std::get<1>(GetParam()));
    ASSERT_TRUE(r.ok()) << r.status().message();
    idx_ = std::move(r).value();
  }
  /// Applies one event and waits until it is applied.
  void apply(const kvidx::Event& e) {
    ASSERT_EQ(idx_.apply(e), Errc::ok);
    ASSERT_EQ(idx_.flush(), Errc::ok);
  }
  kvidx::Stats stats() {
    EXPECT_EQ(idx_.flush(), Errc::ok);
    auto s = idx_.stats();
    EXPECT_TRUE(s.ok());
    return s.value_or(kvidx::Stats{});
  }
  bool sync() const { return std::get<1>(GetParam()) == 0; }

  kvidx::Indexer idx_{nullptr};
};

TEST_P(Semantics, EmptyIndexAndEmptyQueryMatchNothing) {
  EXPECT_EQ(matches(idx_, query(4)), "");
  EXPECT_EQ(matches(idx_, {}), "");
  const auto s = stats();
  EXPECT_EQ(s.workers, 0u);
  EXPECT_EQ(s.worker_blocks, 0u);
}

TEST_P(Semantics, ResultsOrderedByDepthThenWorkerThenRank) {
  const Worker a{2, 0}, b{1, 1}, c{1, 0}, d{7, 3};
  const auto ba = chain(a, 0, 3), bb = chain(b, 0, 3), bc = chain(c, 0, 1), bd = chain(d, 0, 2);
  apply(kvidx::stored(a, 0, std::nullopt, ba));
  apply(kvidx::stored(b, 0, std::nullopt, bb));
  apply(kvidx::stored(c, 0, std::nullopt, bc));
  apply(kvidx::stored(d, 0, std::nullopt, bd));
  EXPECT_EQ(matches(idx_, query(5)), "1/1:3 2/0:3 7/3:2 1/0:1");
  EXPECT_EQ(matches(idx_, query(2)), "1/1:2 2/0:2 7/3:2 1/0:1");
  // A query that differs at position 0 matches nobody.
  EXPECT_EQ(matches(idx_, {5, 1001, 1002}), "");
  const auto s = stats();
  EXPECT_EQ(s.workers, 4u);
  EXPECT_EQ(s.worker_blocks, 9u);
  EXPECT_EQ(s.events_applied, 4u);
}

TEST_P(Semantics, ParentContinuesTheChain) {
  const Worker w{3, 0};
  const auto head = chain(w, 0, 2), tail = chain(w, 2, 5);
  apply(kvidx::stored(w, 0, std::nullopt, head));
  apply(kvidx::stored(w, 1, seq_of(w, 1), tail));
  EXPECT_EQ(matches(idx_, query(8)), "3/0:5");
  // The same local hashes under a different parent are a different prefix: no match.
  EXPECT_EQ(matches(idx_, {1002, 1003}), "");
}

TEST_P(Semantics, MissingParentRejectsTheWholeEvent) {
  const Worker w{4, 1};
  const auto tail = chain(w, 2, 5);
  const kvidx::Status s = idx_.apply(kvidx::stored(w, 0, 424242, tail));
  if (sync()) {
    EXPECT_EQ(s, Errc::parent_not_found);
  } else {
    EXPECT_EQ(s, Errc::ok);  // queued; the outcome shows in the stats
  }
  const auto st = stats();
  EXPECT_EQ(st.events_rejected, 1u);
  EXPECT_EQ(st.events_applied, 0u);
  EXPECT_EQ(st.workers, 0u) << "a rejected STORED must not make the worker known";
  EXPECT_EQ(matches(idx_, query(5)), "");
}

TEST_P(Semantics, HolesCountAndRefillRestoresDepth) {
  const Worker w{9, 0};
  const auto blocks = chain(w, 0, 4);
  apply(kvidx::stored(w, 0, std::nullopt, blocks));
  const std::array<std::uint64_t, 2> gone{seq_of(w, 2), 77777};  // 77777 is unknown
  apply(kvidx::removed(w, 1, gone));
  EXPECT_EQ(matches(idx_, query(4)), "9/0:2");
  auto st = stats();
  EXPECT_EQ(st.unknown_removals, 1u);
  EXPECT_EQ(st.worker_blocks, 3u);
  const auto again = chain(w, 2, 3);
  apply(kvidx::stored(w, 2, seq_of(w, 1), again));
  EXPECT_EQ(matches(idx_, query(4)), "9/0:4");
  st = stats();
  EXPECT_EQ(st.events_applied, 3u);
}

TEST_P(Semantics, ClearedDropsBlocksButKeepsTheWorker) {
  const Worker w{5, 2};
  const auto blocks = chain(w, 0, 3);
  apply(kvidx::stored(w, 0, std::nullopt, blocks));
  apply(kvidx::cleared(w, 1));
  EXPECT_EQ(matches(idx_, query(3)), "");
  const auto st = stats();
  EXPECT_EQ(st.workers, 1u);
  EXPECT_EQ(st.worker_blocks, 0u);
}

TEST_P(Semantics, RemoveWorkerDropsEveryRankAndRankFormDropsOne) {
  const Worker r0{6, 0}, r1{6, 1}, other{8, 0};
  for (Worker w : {r0, r1, other}) {
    const auto blocks = chain(w, 0, 2);
    apply(kvidx::stored(w, 0, std::nullopt, blocks));
  }
  ASSERT_EQ(idx_.remove_worker(Worker{6, 1}), Errc::ok);
  ASSERT_EQ(idx_.flush(), Errc::ok);
  EXPECT_EQ(matches(idx_, query(2)), "6/0:2 8/0:2");
  ASSERT_EQ(idx_.remove_worker(6), Errc::ok);
  ASSERT_EQ(idx_.flush(), Errc::ok);
  EXPECT_EQ(matches(idx_, query(2)), "8/0:2");
  EXPECT_EQ(stats().workers, 1u);
  // Unknown workers and ranks are valid no-ops.
  EXPECT_EQ(idx_.remove_worker(12345), Errc::ok);
  EXPECT_EQ(idx_.remove_worker(Worker{8, 9}), Errc::ok);
}

TEST_P(Semantics, BatchesAcceptVectorsArraysAndPointerPlusSize) {
  const Worker a{10, 0}, b{11, 0};
  const auto ba = chain(a, 0, 3), bb = chain(b, 0, 2);
  const std::vector<kvidx::Event> batch{kvidx::stored(a, 0, std::nullopt, ba),
                                        kvidx::stored(b, 0, std::nullopt, bb)};
  ASSERT_EQ(idx_.apply(batch), Errc::ok);
  const std::array<std::uint64_t, 1> drop{seq_of(a, 2)};
  const std::array<kvidx::Event, 1> one{kvidx::removed(a, 1, drop)};
  ASSERT_EQ(idx_.apply(one), Errc::ok);
  ASSERT_EQ(idx_.apply(one.data(), 0), Errc::ok);  // (ptr, 0) is an empty batch
  ASSERT_EQ(idx_.flush(), Errc::ok);

  const auto q = query(3);
  kvidx::MatchBuffer buf;
  ASSERT_EQ(idx_.find_matches(q.data(), q.size(), buf), Errc::ok);
  ASSERT_EQ(buf.size(), 2u);
  EXPECT_EQ(buf[0].worker_id, 10u);
  EXPECT_EQ(buf[0].depth, 2u);
  EXPECT_EQ(buf[1].worker_id, 11u);
  EXPECT_EQ(buf[1].depth, 2u);
  const std::array<std::uint64_t, 1> first{kvidx_test::local_at(0)};
  ASSERT_EQ(idx_.find_matches(first, buf), Errc::ok);
  EXPECT_EQ(buf.size(), 2u);
  const std::uint64_t c_array[] = {kvidx_test::local_at(0), kvidx_test::local_at(1),
                                   kvidx_test::local_at(2)};
  ASSERT_EQ(idx_.find_matches(c_array, buf), Errc::ok);
  EXPECT_EQ(kvidx_test::render(std::vector<kvidx::Match>(buf.begin(), buf.end())), "10/0:2 11/0:2");
}

TEST_P(Semantics, RestoringTheSameBlockIsANoOp) {
  const Worker w{12, 0};
  const auto blocks = chain(w, 0, 3);
  apply(kvidx::stored(w, 0, std::nullopt, blocks));
  apply(kvidx::stored(w, 1, std::nullopt, blocks));
  EXPECT_EQ(matches(idx_, query(3)), "12/0:3");
  const auto st = stats();
  EXPECT_EQ(st.worker_blocks, 3u);
  EXPECT_EQ(st.events_applied, 2u);
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, Semantics,
    ::testing::Combine(::testing::Values(Backend::positional, Backend::radix, Backend::runs),
                       ::testing::Values(0u, 2u)),
    [](const ::testing::TestParamInfo<Mode>& info) {
      return kvidx_test::backend_title(std::get<0>(info.param)) +
             (std::get<1>(info.param) == 0 ? "Sync" : "Threads");
    });

TEST(Hashing, GoldenValuesOfTheHashingContract) {
  std::vector<std::uint32_t> tokens;
  for (std::uint32_t t = 1; t <= 13; ++t) tokens.push_back(t);  // 13: a partial last block
  auto local = kvidx::hash_tokens(tokens, 4);
  ASSERT_TRUE(local.ok());
  const std::vector<std::uint64_t> want_local{14643705804678351452ull, 16777012769546811212ull,
                                              483935686894639516ull};
  EXPECT_EQ(*local, want_local);
  auto seq = kvidx::seq_hashes(*local);
  ASSERT_TRUE(seq.ok());
  const std::vector<std::uint64_t> want_seq{14643705804678351452ull, 4945711292740353085ull,
                                            12583592247330656132ull};
  EXPECT_EQ(*seq, want_seq);
}

TEST(Hashing, FewerTokensThanABlockGiveNoHashes) {
  const std::array<std::uint32_t, 3> tokens{1, 2, 3};
  std::vector<std::uint64_t> out{99, 98};
  ASSERT_EQ(kvidx::hash_tokens(tokens, 4, out), Errc::ok);
  EXPECT_TRUE(out.empty());
  ASSERT_EQ(kvidx::seq_hashes(kvidx::Span<std::uint64_t>(), out), Errc::ok);
  EXPECT_TRUE(out.empty());
}

TEST(Version, MatchesTheHeader) {
  EXPECT_EQ(kvidx::abi_version(), static_cast<std::uint32_t>(KVIDX_ABI_VERSION));
  EXPECT_EQ(kvidx::abi_version(), 1u);
  ASSERT_NE(kvidx::version(), nullptr);
  EXPECT_GT(std::strlen(kvidx::version()), 0u);
}

}  // namespace
