// Chooses a worker for each request from the index's overlaps and the workers' current load.
#ifndef CPP_SCHEDULER_ROUTER_HPP
#define CPP_SCHEDULER_ROUTER_HPP

#include <kvidx.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace sched {

/// The outcome of routing one request.
struct Decision {
  std::size_t worker = 0;       ///< Index into Router::workers().
  std::uint32_t overlap = 0;    ///< Blocks of the request the chosen worker already holds.
  std::uint32_t best = 0;       ///< The deepest overlap any worker had.
};

/// Cost-based router: cost(w) = overlap_weight * blocks_to_prefill(w) + active_blocks(w);
/// the cheapest worker wins, ties go to the lower (worker_id, dp_rank). Load counters are
/// atomics, so any number of threads may route at once.
class Router {
 public:
  /// A router over `workers` (sorted by (id, rank), as Workload::workers).
  Router(std::vector<kvidx::Worker> workers, double overlap_weight);

  /// Per-thread working memory for route(): one overlap slot per worker, all zero between
  /// calls.
  using Scratch = std::vector<std::uint32_t>;
  /// A zeroed Scratch sized for this router.
  [[nodiscard]] Scratch make_scratch() const { return Scratch(workers_.size(), 0); }

  /// Picks a worker for a request of `query_len` blocks whose per-worker overlaps are
  /// `matches` (as find_matches returns them), and charges its blocks to that worker.
  /// Needs at least one worker. Allocates nothing.
  [[nodiscard]] Decision route(kvidx::Span<kvidx::Match> matches, std::size_t query_len,
                               Scratch& scratch);

  /// The request routed by `d` finished: its blocks stop counting as load.
  void finish(const Decision& d, std::size_t query_len);

  /// The workers, in routing-index order.
  [[nodiscard]] const std::vector<kvidx::Worker>& workers() const { return workers_; }
  /// Requests routed to each worker so far.
  [[nodiscard]] std::vector<std::uint64_t> routed_counts() const;

 private:
  /// Index of `w` in workers_, or workers_.size() if unknown.
  [[nodiscard]] std::size_t index_of(std::uint64_t id, std::uint32_t rank) const;

  std::vector<kvidx::Worker> workers_;
  double overlap_weight_;
  std::unique_ptr<std::atomic<std::int64_t>[]> active_;  // active blocks per worker
  std::unique_ptr<std::atomic<std::uint64_t>[]> routed_;  // requests per worker
};

}  // namespace sched

#endif  // CPP_SCHEDULER_ROUTER_HPP
