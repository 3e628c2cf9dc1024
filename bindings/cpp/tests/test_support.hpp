// Shared helpers for the kvidx C++ wrapper tests.
#ifndef KVIDX_TEST_SUPPORT_HPP
#define KVIDX_TEST_SUPPORT_HPP

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "kvidx.hpp"

namespace kvidx {
/// Lets GoogleTest print error codes by name.
inline void PrintTo(Errc code, std::ostream* os) {
  *os << "Errc(" << static_cast<std::uint32_t>(code) << ": "
      << kvidx_status_str(static_cast<std::uint32_t>(code)) << ")";
}
/// Lets GoogleTest print backends (test parameters) by name.
inline void PrintTo(Backend b, std::ostream* os) {
  *os << (b == Backend::radix ? "radix" : b == Backend::runs ? "runs" : "positional");
}
/// Lets GoogleTest print statuses by name.
inline void PrintTo(Status s, std::ostream* os) { PrintTo(s.code(), os); }
}  // namespace kvidx

namespace kvidx_test {

/// A backend's name in test names ("Positional", "Radix", "Runs").
inline std::string backend_title(kvidx::Backend b) {
  switch (b) {
    case kvidx::Backend::radix:
      return "Radix";
    case kvidx::Backend::runs:
      return "Runs";
    default:
      return "Positional";
  }
}

/// A test mode: (backend, event_threads).
using Mode = std::tuple<kvidx::Backend, std::uint32_t>;

/// Creates an indexer with `backend` and `event_threads` (the rest defaults).
inline kvidx::Result<kvidx::Indexer> create_indexer(kvidx::Backend backend,
                                                    std::uint32_t event_threads) {
  kvidx::Config cfg;
  cfg.backend = backend;
  cfg.event_threads = event_threads;
  return kvidx::Indexer::create(cfg);
}

/// The shared local hashes every test chain uses: position i has local hash 1000 + i.
inline std::uint64_t local_at(std::size_t i) { return 1000 + i; }

/// A query of the first `n` local hashes.
inline std::vector<std::uint64_t> query(std::size_t n) {
  std::vector<std::uint64_t> q;
  for (std::size_t i = 0; i < n; ++i) q.push_back(local_at(i));
  return q;
}

/// The engine name of worker `w`'s block at position `i` (unique per worker and position).
inline std::uint64_t seq_of(kvidx::Worker w, std::size_t i) {
  return (w.id << 24) ^ (std::uint64_t{w.rank} << 16) ^ (i + 1);
}

/// Blocks [from, to) of worker `w`'s chain.
inline std::vector<kvidx::Block> chain(kvidx::Worker w, std::size_t from, std::size_t to) {
  std::vector<kvidx::Block> blocks;
  for (std::size_t i = from; i < to; ++i) blocks.push_back({local_at(i), seq_of(w, i)});
  return blocks;
}

/// A compact, printable form of a match list: "id/rank:depth ...".
inline std::string render(const std::vector<kvidx::Match>& ms) {
  std::string s;
  for (const auto& m : ms) {
    if (!s.empty()) s += ' ';
    s += std::to_string(m.worker_id) + "/" + std::to_string(m.dp_rank) + ":" +
         std::to_string(m.depth);
  }
  return s;
}

/// The matches of `q` on `idx`, rendered; "ERROR" if the call fails.
inline std::string matches(const kvidx::Indexer& idx, const std::vector<std::uint64_t>& q) {
  auto r = idx.find_matches(q);
  if (!r) return "ERROR";
  return render(*r);
}

}  // namespace kvidx_test

#endif  // KVIDX_TEST_SUPPORT_HPP
