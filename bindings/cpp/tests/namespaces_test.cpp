// hash_request (KVIDX_HAS_NAMESPACES): the golden values of docs/contract.md section 3.1, and a
// chain stored under a salt, an adapter and an image is reached to its depth by a query with
// the same namespace and spans only.
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "test_support.hpp"

#ifndef KVIDX_HAS_NAMESPACES
#error "the header lacks KVIDX_HAS_NAMESPACES"
#endif

namespace {

using kvidx::Errc;
using kvidx::MultimodalSpan;
using kvidx::Namespace;

std::vector<std::uint32_t> tokens_to(std::uint32_t last) {
  std::vector<std::uint32_t> t;
  for (std::uint32_t i = 1; i <= last; ++i) t.push_back(i);
  return t;
}

TEST(Namespaces, GoldenValues) {
  const auto tokens = tokens_to(12);
  const std::array<MultimodalSpan, 1> image{{{"image-1", 2, 6}}};
  struct Case {
    Namespace ns;
    bool with_image;
    std::vector<std::uint64_t> want;
  };
  const std::vector<Case> cases{
      {{}, false, {14643705804678351452ull, 16777012769546811212ull, 483935686894639516ull}},
      {{"", "tenant-a"},
       false,
       {1461199381953589153ull, 16777012769546811212ull, 483935686894639516ull}},
      {{"adapter-a", ""},
       false,
       {11381080598872079209ull, 5698110331184095209ull, 10923852707342720619ull}},
      {{}, true, {1978177322621556195ull, 10355098053434598600ull, 483935686894639516ull}},
      {{"adapter-a", "tenant-a"},
       true,
       {7859937575092783861ull, 15422904220237451310ull, 10923852707342720619ull}},
  };
  for (const Case& c : cases) {
    auto got = c.with_image ? kvidx::hash_request(tokens, 4, c.ns, image)
                            : kvidx::hash_request(tokens, 4, c.ns);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, c.want) << c.ns.lora_name << "/" << c.ns.cache_salt << "/" << c.with_image;
  }
  std::vector<std::uint64_t> out{7};
  EXPECT_EQ(kvidx::hash_request(tokens, 0, Namespace{}, image, out), Errc::invalid_argument);
  EXPECT_TRUE(kvidx::hash_request(tokens_to(3), 4, Namespace{"a", "b"})->empty());
}

TEST(Namespaces, AQueryReachesItsOwnNamespaceOnly) {
  auto idx = kvidx_test::create_indexer(kvidx::Backend::positional, 0);
  ASSERT_TRUE(idx.ok());
  const auto tokens = tokens_to(16);
  const Namespace ns{"lora-l", "salt-a"};
  const std::array<MultimodalSpan, 1> img{{{"image-i", 5, 9}}};
  auto local = kvidx::hash_request(tokens, 4, ns, img);
  ASSERT_TRUE(local.ok());
  std::vector<kvidx::Block> blocks;
  for (std::size_t i = 0; i < local->size(); ++i) blocks.push_back({(*local)[i], 100 + i});
  ASSERT_EQ(idx->apply(kvidx::stored({1, 0}, 1, std::nullopt, blocks)), Errc::ok);
  const auto reach = [&](const Namespace& n, kvidx::Span<MultimodalSpan> spans) {
    auto q = kvidx::hash_request(tokens, 4, n, spans);
    EXPECT_TRUE(q.ok());
    return kvidx_test::matches(*idx, *q);
  };
  const std::array<MultimodalSpan, 1> other{{{"image-j", 5, 9}}};
  EXPECT_EQ(reach(ns, img), "1/0:4");
  EXPECT_EQ(reach({"lora-l", "salt-b"}, img), "");
  EXPECT_EQ(reach({"lora-m", "salt-a"}, img), "");
  EXPECT_EQ(reach(ns, other), "1/0:1");  // the image starts in block 1
  EXPECT_EQ(reach({}, img), "");
}

TEST(Namespaces, SkipExtrasExcludesHashTokensOnly) {
  EXPECT_TRUE(kvidx::EngineFeed::create(kvidx::EngineFormat::vllm, kvidx::FeedFlags::skip_extras).ok());
  auto both = kvidx::EngineFeed::create(
      kvidx::EngineFormat::vllm,
      kvidx::FeedFlags::skip_extras | kvidx::FeedFlags::hash_tokens_only);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), Errc::invalid_argument);
}

}  // namespace
