// First of two translation units that include kvidx.hpp first and alone: this checks the
// header is self-contained, and linking both into one binary checks it defines nothing twice.
#include "kvidx.hpp"
#include "link_tus.hpp"

namespace kvidx_link {

std::uint64_t tu_a_store(kvidx::Indexer& idx, std::uint64_t worker) {
  const kvidx::Block blocks[] = {{1000, worker * 10}, {1001, worker * 10 + 1}};
  if (!idx.apply(kvidx::stored({worker, 0}, 0, std::nullopt, blocks)).ok()) return 0;
  return idx.flush().ok() ? 2 : 0;
}

}  // namespace kvidx_link
