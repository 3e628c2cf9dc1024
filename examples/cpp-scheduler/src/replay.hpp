// Replays a workload through one Indexer from several threads, routing every match.
#ifndef CPP_SCHEDULER_REPLAY_HPP
#define CPP_SCHEDULER_REPLAY_HPP

#include <kvidx.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "latency.hpp"
#include "router.hpp"
#include "workload.hpp"

namespace sched {

/// How the replay is spread over threads.
struct ReplayOptions {
  unsigned writers = 2;        ///< Threads applying events; a worker's events stay on one.
  unsigned readers = 2;        ///< Threads routing matches (round-robin over match lines).
  std::size_t window = 0;      ///< An op waits until every op of the other kind more than
                               ///< `window` lines earlier is done. 0: a match sees exactly
                               ///< the events before it (modulo event-thread lag); more lets
                               ///< reads and writes overlap (and matches see later events).
  std::size_t inflight = 32;   ///< A routed request counts as load until its reader routed
                               ///< this many more.
};

/// What a replay measured.
struct ReplayReport {
  Latencies find_ns;                ///< find_matches calls.
  Latencies route_ns;               ///< find_matches plus the routing choice.
  Latencies apply_ns;               ///< apply calls (queueing only, with event threads).
  std::uint64_t routed = 0;         ///< Matches routed.
  std::uint64_t hits = 0;           ///< ... to a worker holding at least one block.
  std::uint64_t query_blocks = 0;   ///< Sum of query lengths.
  std::uint64_t reused_blocks = 0;  ///< Sum of the chosen workers' overlaps.
  std::uint64_t best_blocks = 0;    ///< Sum of the deepest overlaps available.
  std::uint64_t rejected_at_call = 0;  ///< Synchronous mode: STORED calls returning
                                       ///< parent_not_found (a semantic outcome).
  std::uint64_t errors = 0;         ///< Calls that failed otherwise.
  std::string first_error;          ///< The first such failure.
  double wall_seconds = 0;          ///< Replay time, flush included.
};

/// Replays `w` into `idx` (then flushes it), routing matches with `router`.
[[nodiscard]] ReplayReport replay(const Workload& w, kvidx::Indexer& idx, Router& router,
                                  const ReplayOptions& opt);

/// Replays `w`'s events sequentially into a fresh synchronous radix indexer and compares its
/// stats and every distinct match query's answer (up to `max_queries`) with `idx`.
/// Returns "" when identical, else what differed.
[[nodiscard]] std::string verify_against_sequential(const Workload& w, const kvidx::Indexer& idx,
                                                    std::size_t max_queries,
                                                    std::size_t& compared);

}  // namespace sched

#endif  // CPP_SCHEDULER_REPLAY_HPP
