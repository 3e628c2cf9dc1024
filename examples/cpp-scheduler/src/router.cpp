// Cost-based routing over overlaps and load.
#include "router.hpp"

#include <algorithm>
#include <limits>

namespace sched {

Router::Router(std::vector<kvidx::Worker> workers, double overlap_weight)
    : workers_(std::move(workers)),
      overlap_weight_(overlap_weight),
      active_(new std::atomic<std::int64_t>[workers_.size()]),
      routed_(new std::atomic<std::uint64_t>[workers_.size()]) {
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    active_[i].store(0);
    routed_[i].store(0);
  }
}

std::size_t Router::index_of(std::uint64_t id, std::uint32_t rank) const {
  auto it = std::lower_bound(workers_.begin(), workers_.end(), kvidx::Worker{id, rank},
                             [](kvidx::Worker a, kvidx::Worker b) {
                               return a.id != b.id ? a.id < b.id : a.rank < b.rank;
                             });
  if (it == workers_.end() || it->id != id || it->rank != rank) return workers_.size();
  return static_cast<std::size_t>(it - workers_.begin());
}

Decision Router::route(kvidx::Span<kvidx::Match> matches, std::size_t query_len,
                       Scratch& scratch) {
  for (const auto& m : matches) {
    const std::size_t i = index_of(m.worker_id, m.dp_rank);
    if (i < workers_.size()) scratch[i] = m.depth;
  }
  Decision choice;
  choice.best = matches.empty() ? 0 : matches[0].depth;
  double best_cost = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    const std::size_t overlap = std::min<std::size_t>(scratch[i], query_len);
    const double prefill = static_cast<double>(query_len - overlap);
    const double load = static_cast<double>(active_[i].load(std::memory_order_relaxed));
    const double cost = overlap_weight_ * prefill + load;
    if (cost < best_cost) {  // strict: ties keep the lower index, i.e. (id, rank)
      best_cost = cost;
      choice.worker = i;
      choice.overlap = static_cast<std::uint32_t>(overlap);
    }
  }
  for (const auto& m : matches) {
    const std::size_t i = index_of(m.worker_id, m.dp_rank);
    if (i < workers_.size()) scratch[i] = 0;
  }
  active_[choice.worker].fetch_add(static_cast<std::int64_t>(query_len),
                                   std::memory_order_relaxed);
  routed_[choice.worker].fetch_add(1, std::memory_order_relaxed);
  return choice;
}

void Router::finish(const Decision& d, std::size_t query_len) {
  active_[d.worker].fetch_sub(static_cast<std::int64_t>(query_len), std::memory_order_relaxed);
}

std::vector<std::uint64_t> Router::routed_counts() const {
  std::vector<std::uint64_t> out(workers_.size());
  for (std::size_t i = 0; i < workers_.size(); ++i) out[i] = routed_[i].load();
  return out;
}

}  // namespace sched
