// Uses functions from two translation units that each include kvidx.hpp.
#include "link_tus.hpp"
#include "test_support.hpp"

namespace {

TEST(Link, TwoTranslationUnitsShareOneIndexer) {
  auto r = kvidx::Indexer::create();
  ASSERT_TRUE(r.ok());
  kvidx::Indexer idx = std::move(r).value();
  EXPECT_EQ(kvidx_link::tu_a_store(idx, 7), 2u);
  EXPECT_EQ(kvidx_link::tu_b_depth(idx), 2u);
}

}  // namespace
