// kvidx::Indexer is move-only and owns exactly one handle; a moved-from object is empty.
#include <type_traits>
#include <utility>
#include <vector>

#include "test_support.hpp"

namespace {

using kvidx::Errc;
using kvidx::Indexer;

static_assert(!std::is_copy_constructible_v<Indexer>, "Indexer must not be copyable");
static_assert(!std::is_copy_assignable_v<Indexer>, "Indexer must not be copy-assignable");
static_assert(std::is_nothrow_move_constructible_v<Indexer>, "moves must not throw");
static_assert(std::is_nothrow_move_assignable_v<Indexer>, "moves must not throw");
static_assert(std::is_nothrow_destructible_v<Indexer>);
static_assert(sizeof(Indexer) == sizeof(void*), "the deleter must add no size");
static_assert(!std::is_default_constructible_v<Indexer>, "create() or an owned handle only");
static_assert(!std::is_convertible_v<kvidx_indexer*, Indexer>, "adoption must be explicit");
static_assert(std::is_move_constructible_v<kvidx::Result<Indexer>>);
static_assert(!std::is_copy_constructible_v<kvidx::Result<Indexer>>);
static_assert(std::is_copy_constructible_v<kvidx::MatchBuffer>, "buffers are plain values");
// The C++ names are the C types themselves, so arrays pass through without copies.
static_assert(std::is_same_v<kvidx::Event, kvidx_event>);
static_assert(std::is_same_v<kvidx::Block, kvidx_block>);
static_assert(std::is_same_v<kvidx::Match, kvidx_match>);
static_assert(static_cast<std::uint32_t>(Errc::poisoned) == KVIDX_ERR_POISONED);
static_assert(static_cast<std::uint32_t>(Errc::null_pointer) == KVIDX_ERR_NULL_POINTER);

Indexer make() {
  auto r = Indexer::create();
  EXPECT_TRUE(r.ok());
  return std::move(r).value();
}

void store_one(Indexer& idx, std::uint64_t worker) {
  const kvidx::Worker w{worker, 0};
  const auto blocks = kvidx_test::chain(w, 0, 1);
  ASSERT_EQ(idx.apply(kvidx::stored(w, 0, std::nullopt, blocks)), Errc::ok);
  ASSERT_EQ(idx.flush(), Errc::ok);
}

TEST(Ownership, MoveConstructionTransfersTheHandle) {
  Indexer a = make();
  kvidx_indexer* raw = a.native_handle();
  ASSERT_NE(raw, nullptr);
  store_one(a, 1);
  Indexer b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_TRUE(b.valid());
  EXPECT_EQ(b.native_handle(), raw);
  EXPECT_EQ(kvidx_test::matches(b, kvidx_test::query(1)), "1/0:1");
}

TEST(Ownership, MovedFromIndexerReportsNullPointer) {
  Indexer a = make();
  Indexer b = std::move(a);
  kvidx::MatchBuffer buf;
  const auto q = kvidx_test::query(2);
  EXPECT_EQ(a.find_matches(q, buf), Errc::null_pointer);  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(buf.empty());
  EXPECT_EQ(a.flush(), Errc::null_pointer);
  EXPECT_EQ(a.remove_worker(3), Errc::null_pointer);
  EXPECT_EQ(a.apply(kvidx::cleared({1, 0}, 0)), Errc::null_pointer);
  EXPECT_EQ(a.stats().status(), Errc::null_pointer);
  EXPECT_FALSE(static_cast<bool>(a));
  EXPECT_TRUE(static_cast<bool>(b));
}

TEST(Ownership, MoveAssignmentReplacesAndFreesTheOldHandle) {
  Indexer a = make();
  Indexer b = make();
  store_one(a, 1);
  store_one(b, 2);
  kvidx_indexer* raw_b = b.native_handle();
  a = std::move(b);  // a's old handle is freed here (LeakSanitizer checks it in the ASan run)
  EXPECT_EQ(a.native_handle(), raw_b);
  EXPECT_EQ(kvidx_test::matches(a, kvidx_test::query(1)), "2/0:1");
  EXPECT_FALSE(b.valid());  // NOLINT(bugprone-use-after-move)
}

TEST(Ownership, IndexersLiveInContainers) {
  std::vector<Indexer> all;
  for (int i = 0; i < 8; ++i) all.push_back(make());  // reallocation moves them
  for (std::size_t i = 0; i < all.size(); ++i) store_one(all[i], i + 1);
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(kvidx_test::matches(all[i], kvidx_test::query(1)),
              std::to_string(i + 1) + "/0:1");
  }
}

TEST(Ownership, ReleaseHandsTheHandleBack) {
  Indexer a = make();
  kvidx_indexer* raw = a.release();
  ASSERT_NE(raw, nullptr);
  EXPECT_FALSE(a.valid());
  Indexer again(raw);  // adopt it back; freed once, by `again`
  EXPECT_TRUE(again.valid());
}

TEST(Ownership, AdoptingNullIsAnEmptyIndexer) {
  Indexer none(nullptr);
  EXPECT_FALSE(none.valid());
  EXPECT_EQ(none.flush(), Errc::null_pointer);
}

}  // namespace
