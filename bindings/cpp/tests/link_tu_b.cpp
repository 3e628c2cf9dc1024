// Second translation unit including kvidx.hpp first and alone (see link_tu_a.cpp).
#include "kvidx.hpp"
#include "link_tus.hpp"

namespace kvidx_link {

std::uint32_t tu_b_depth(const kvidx::Indexer& idx) {
  const std::uint64_t q[] = {1000, 1001, 1002};
  kvidx::MatchBuffer buf;
  if (!idx.find_matches(q, buf).ok() || buf.empty()) return 0;
  return buf[0].depth;
}

}  // namespace kvidx_link
