// C status codes map to kvidx::Errc one to one; the wrapper's own checks and the reusable
// match buffer behave as documented.
#include <array>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using kvidx::Errc;
using kvidx::Status;

kvidx::Indexer make(std::uint32_t event_threads = 0) {
  kvidx::Config cfg;
  cfg.event_threads = event_threads;
  auto r = kvidx::Indexer::create(cfg);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(r).value();
}

TEST(Errors, EveryCodeHasADistinctMessage) {
  std::set<std::string> seen;
  for (std::uint32_t c = KVIDX_OK; c <= KVIDX_ERR_TOO_LARGE; ++c) {
    const Status s(static_cast<Errc>(c));
    ASSERT_NE(s.message(), nullptr);
    EXPECT_GT(std::strlen(s.message()), 0u);
    seen.insert(s.message());
    EXPECT_EQ(s.ok(), c == KVIDX_OK);
    EXPECT_EQ(Status::from_c(static_cast<kvidx_status>(c)).code(), static_cast<Errc>(c));
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_STREQ(Status(Errc::malformed).message(), kvidx_status_str(KVIDX_ERR_MALFORMED));
  EXPECT_NE(Status(static_cast<Errc>(99)).message(), nullptr) << "unknown codes too";
}

TEST(Errors, InvalidBackendIsInvalidArgument) {
  kvidx::Config cfg;
  cfg.backend = static_cast<kvidx::Backend>(9);
  auto r = kvidx::Indexer::create(cfg);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Errc::invalid_argument);
}

TEST(Errors, DefaultConfigComesFromTheLibrary) {
  const kvidx::Config cfg;
  const kvidx_config c = kvidx_config_default();
  EXPECT_EQ(static_cast<std::uint32_t>(cfg.backend), c.backend);
  EXPECT_EQ(cfg.event_threads, c.event_threads);
  EXPECT_EQ(cfg.jump_size, c.jump_size);
}

TEST(Errors, QueueLimitsOutOfRangeAreInvalidArgument) {
  const kvidx::Config defaults;
  EXPECT_EQ(defaults.queue_capacity, kvidx_queue_limits_default().queue_capacity);
  EXPECT_EQ(defaults.queue_bytes, kvidx_queue_limits_default().queue_bytes);
  for (const std::uint64_t capacity : {std::uint64_t{1} << 31, ~std::uint64_t{0},
                                       (std::uint64_t{1} << 20) + 1}) {
    kvidx::Config cfg;
    cfg.event_threads = 2;
    cfg.queue_capacity = capacity;
    EXPECT_EQ(kvidx::Indexer::create(cfg).status(), Errc::invalid_argument) << capacity;
  }
  // A one-event, one-byte budget still accepts and applies every event (one at a time).
  kvidx::Config cfg;
  cfg.event_threads = 2;
  cfg.queue_capacity = 1;
  cfg.queue_bytes = 1;
  auto created = kvidx::Indexer::create(cfg);
  ASSERT_TRUE(created.ok()) << created.status().message();
  const kvidx::Indexer idx = std::move(created).value();
  const kvidx::Block block{5, 50};
  for (std::uint64_t w = 0; w < 40; ++w) {
    ASSERT_TRUE(idx.apply(kvidx::stored({w, 0}, 0, std::nullopt, {&block, 1})).ok());
  }
  ASSERT_TRUE(idx.flush().ok());
  auto st = idx.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->workers, 40u);
}

TEST(Errors, BadEventKindIsInvalidArgumentAndAppliesNothing) {
  auto idx = make();
  const kvidx::Worker w{1, 0};
  const auto blocks = kvidx_test::chain(w, 0, 2);
  kvidx::Event bad = kvidx::cleared(w, 1);
  bad.kind = 42;
  EXPECT_EQ(idx.apply(bad), Errc::invalid_argument);
  // A malformed event anywhere in a batch: none of the batch is applied.
  const std::vector<kvidx::Event> batch{kvidx::stored(w, 0, std::nullopt, blocks), bad};
  EXPECT_EQ(idx.apply(batch), Errc::invalid_argument);
  EXPECT_EQ(kvidx_test::matches(idx, kvidx_test::query(2)), "");
  auto st = idx.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->events_applied, 0u);
  EXPECT_EQ(st->events_rejected, 0u) << "shape errors count nowhere";
}

TEST(Errors, NullDataWithALengthIsNullPointer) {
  auto idx = make();
  kvidx::MatchBuffer buf;
  EXPECT_EQ(idx.find_matches(kvidx::Span<std::uint64_t>(nullptr, 3), buf), Errc::null_pointer);
  EXPECT_EQ(idx.apply(kvidx::removed({1, 0}, 0, kvidx::Span<std::uint64_t>(nullptr, 2))),
            Errc::null_pointer);
  EXPECT_EQ(idx.apply(static_cast<const kvidx::Event*>(nullptr), 1), Errc::null_pointer);
  // (NULL, 0) is a valid empty array.
  EXPECT_EQ(idx.find_matches(kvidx::Span<std::uint64_t>(), buf), Errc::ok);
  EXPECT_EQ(idx.apply(kvidx::removed({1, 0}, 0, kvidx::Span<std::uint64_t>())), Errc::ok);
}

TEST(Errors, ZeroBlockSizeIsInvalidArgument) {
  const std::array<std::uint32_t, 4> tokens{1, 2, 3, 4};
  std::vector<std::uint64_t> out{1};
  EXPECT_EQ(kvidx::hash_tokens(tokens, 0, out), Errc::invalid_argument);
  auto r = kvidx::hash_tokens(tokens, 0);
  EXPECT_EQ(r.status(), Errc::invalid_argument);
}

TEST(Errors, ParentNotFoundInSynchronousMode) {
  auto idx = make(0);
  const kvidx::Worker w{1, 0};
  const auto blocks = kvidx_test::chain(w, 1, 2);
  const Status s = idx.apply(kvidx::stored(w, 0, 5555, blocks));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s, Errc::parent_not_found);
  EXPECT_EQ(s.code(), Errc::parent_not_found);
}

TEST(Errors, ResultHoldsEitherAValueOrAnError) {
  kvidx::Result<int> good(7);
  EXPECT_TRUE(good.ok());
  EXPECT_EQ(good.status(), Errc::ok);
  EXPECT_EQ(*good, 7);
  kvidx::Result<int> bad(Status(Errc::shut_down));
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status(), Errc::shut_down);
  EXPECT_EQ(std::move(bad).value_or(3), 3);
  // An "error" of ok would be a lie: it is reported as invalid_argument.
  kvidx::Result<int> odd{Status()};
  EXPECT_FALSE(odd.ok());
  EXPECT_EQ(odd.status(), Errc::invalid_argument);
}

TEST(ErrorsDeathTest, ValueOfAnErrorAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  kvidx::Result<int> bad(Status(Errc::poisoned));
  EXPECT_DEATH({ [[maybe_unused]] int v = bad.value(); }, "");
}

TEST(Errors, PanicIsCaughtAndPoisonsTheHandle) {
  auto idx = make();
  const Status p = Status::from_c(kvidx_debug_panic(idx.native_handle()));
  EXPECT_EQ(p, Errc::panic);
  kvidx::MatchBuffer buf;
  EXPECT_EQ(idx.find_matches(kvidx_test::query(1), buf), Errc::poisoned);
  EXPECT_EQ(idx.apply(kvidx::cleared({1, 0}, 0)), Errc::poisoned);
  EXPECT_EQ(idx.stats().status(), Errc::poisoned);
  // Freeing a poisoned handle is allowed (the destructor does it).
}

TEST(MatchBufferTest, GrowsOnceThenAllocatesNothing) {
  auto idx = make();
  for (std::uint64_t id = 1; id <= 40; ++id) {
    const kvidx::Worker w{id, 0};
    const auto blocks = kvidx_test::chain(w, 0, 1 + id % 5);
    ASSERT_EQ(idx.apply(kvidx::stored(w, 0, std::nullopt, blocks)), Errc::ok);
  }
  const auto q = kvidx_test::query(5);
  kvidx::MatchBuffer buf(1);
  ASSERT_EQ(idx.find_matches(q, buf), Errc::ok);
  ASSERT_EQ(buf.size(), 40u);
  EXPECT_GE(buf.capacity(), 40u);
  EXPECT_EQ(buf[0].depth, 5u);
  EXPECT_EQ(buf[39].depth, 1u);
  const kvidx::Match* storage = buf.data();
  const std::size_t cap = buf.capacity();
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(idx.find_matches(q, buf), Errc::ok);
    EXPECT_EQ(buf.data(), storage) << "a warm buffer must not reallocate";
    EXPECT_EQ(buf.capacity(), cap);
    EXPECT_EQ(buf.size(), 40u);
  }
  // Ordered by depth descending, then worker id ascending.
  for (std::size_t i = 1; i < buf.size(); ++i) {
    const auto& a = buf[i - 1];
    const auto& b = buf[i];
    EXPECT_TRUE(a.depth > b.depth || (a.depth == b.depth && a.worker_id < b.worker_id));
  }
  kvidx::MatchBuffer empty(0);  // a zero-capacity buffer works too
  ASSERT_EQ(idx.find_matches(q, empty), Errc::ok);
  EXPECT_EQ(empty.size(), 40u);
  buf.clear();
  EXPECT_TRUE(buf.empty());
  EXPECT_EQ(buf.capacity(), cap);
}

}  // namespace
