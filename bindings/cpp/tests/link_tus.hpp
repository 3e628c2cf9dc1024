// Functions defined in two separate translation units that both include kvidx.hpp.
#ifndef KVIDX_LINK_TUS_HPP
#define KVIDX_LINK_TUS_HPP

#include <cstdint>

#include "kvidx.hpp"

namespace kvidx_link {
/// Stores a two-block chain for `worker` (defined in link_tu_a.cpp); returns blocks stored.
std::uint64_t tu_a_store(kvidx::Indexer& idx, std::uint64_t worker);
/// The deepest match of the chain's query (defined in link_tu_b.cpp).
std::uint32_t tu_b_depth(const kvidx::Indexer& idx);
}  // namespace kvidx_link

#endif  // KVIDX_LINK_TUS_HPP
