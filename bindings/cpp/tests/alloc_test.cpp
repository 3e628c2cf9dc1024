// Once a MatchBuffer (TieredMatchBuffer) is warm, find_matches (find_matches_tiered) makes no
// C++ heap allocation. This binary replaces
// the global operator new to count allocations made by the calling thread.
#include <atomic>
#include <cstdlib>
#include <new>

#include "test_support.hpp"

namespace {
thread_local long g_allocations = 0;  // operator new calls on this thread
}  // namespace

namespace {
void* counted_malloc(std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
}  // namespace

// The replacements pair malloc with free; GCC's heuristic cannot see that across them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) { return counted_malloc(n); }
void* operator new[](std::size_t n) { return counted_malloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

TEST(HotPath, WarmFindMatchesAllocatesNothing) {
  auto created = kvidx::Indexer::create();
  ASSERT_TRUE(created.ok());
  kvidx::Indexer idx = std::move(created).value();
  for (std::uint64_t id = 1; id <= 100; ++id) {
    const kvidx::Worker w{id, 0};
    const auto blocks = kvidx_test::chain(w, 0, 1 + id % 8);
    ASSERT_EQ(idx.apply(kvidx::stored(w, 0, std::nullopt, blocks)), kvidx::Errc::ok);
  }
  ASSERT_EQ(idx.flush(), kvidx::Errc::ok);
  const auto q = kvidx_test::query(8);
  kvidx::MatchBuffer buf(4);

  const long before_cold = g_allocations;
  ASSERT_EQ(idx.find_matches(q, buf), kvidx::Errc::ok);  // grows the buffer once
  EXPECT_GT(g_allocations, before_cold) << "the counter must see the buffer's growth";
  ASSERT_EQ(buf.size(), 100u);

  const long before_warm = g_allocations;
  for (int i = 0; i < 100; ++i) {
    const kvidx::Status s = idx.find_matches(q, buf);
    if (!s.ok()) FAIL() << s.message();
  }
  EXPECT_EQ(g_allocations, before_warm) << "a warm find_matches allocated";
  EXPECT_EQ(buf.size(), 100u);
}

TEST(HotPath, WarmFindMatchesTieredAllocatesNothing) {
  auto created = kvidx::Indexer::create();
  ASSERT_TRUE(created.ok());
  kvidx::Indexer idx = std::move(created).value();
  for (std::uint64_t id = 1; id <= 100; ++id) {
    const kvidx::Worker w{id, 0};
    const auto blocks = kvidx_test::chain(w, 0, 1 + id % 8);
    ASSERT_EQ(idx.apply(kvidx::stored(w, 0, std::nullopt, blocks)), kvidx::Errc::ok);
    // Every third worker also has its chain on the host and its tail evicted from the device,
    // so the tiered walk (not only the device-only fast path) runs.
    if (id % 3 == 0) {
      ASSERT_EQ(idx.apply_event_on_tier(kvidx::stored(w, 1, std::nullopt, blocks),
                                        kvidx::Tier::host),
                kvidx::Errc::ok);
      const std::uint64_t tail[] = {blocks.back().seq_hash};
      ASSERT_EQ(idx.apply_event_on_tier(kvidx::removed(w, 2, tail), kvidx::Tier::device),
                kvidx::Errc::ok);
    }
  }
  ASSERT_EQ(idx.flush(), kvidx::Errc::ok);
  const auto q = kvidx_test::query(8);
  kvidx::TieredMatchBuffer buf(4);

  const long before_cold = g_allocations;
  ASSERT_EQ(idx.find_matches_tiered(q, buf), kvidx::Errc::ok);  // grows the buffer once
  EXPECT_GT(g_allocations, before_cold) << "the counter must see the buffer's growth";
  ASSERT_EQ(buf.size(), 100u);

  const kvidx::TierWeights weights{1.0, 0.8, 0.5, 0.2};
  double total = 0.0;
  const long before_warm = g_allocations;
  for (int i = 0; i < 100; ++i) {
    const kvidx::Status s = idx.find_matches_tiered(q, buf);
    if (!s.ok()) FAIL() << s.message();
    for (const kvidx::TieredMatch& m : buf) total += kvidx::tiered_score(m, weights).value_or(0);
  }
  EXPECT_EQ(g_allocations, before_warm) << "a warm find_matches_tiered or tiered_score allocated";
  EXPECT_EQ(buf.size(), 100u);
  EXPECT_GT(total, 0.0);
}

}  // namespace
