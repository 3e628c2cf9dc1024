// Multi-threaded replay with bounded reordering, and the sequential cross-check.
#include "replay.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

namespace sched {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kDone = std::numeric_limits<std::size_t>::max();

std::uint64_t ns_since(Clock::time_point start) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

/// One thread's published progress: the line of its next unfinished op (kDone when finished).
struct alignas(64) Progress {
  std::atomic<std::size_t> next{kDone};
};

/// The lines each thread owns: writers first, then readers.
std::vector<std::vector<std::size_t>> assign_lines(const Workload& w, const ReplayOptions& opt) {
  std::vector<std::vector<std::size_t>> lines(opt.writers + opt.readers);
  std::size_t match_no = 0;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const Op& op = w.ops[i];
    if (op.is_event()) {
      // Sticky by worker id: one worker's events are issued in file order by one thread.
      const std::uint64_t mixed = op.worker.id * 0x9E3779B97F4A7C15ull;
      lines[(mixed >> 32) % opt.writers].push_back(i);
    } else {
      lines[opt.writers + match_no++ % opt.readers].push_back(i);
    }
  }
  return lines;
}

/// Everything a replay thread shares with the others.
struct Shared {
  const Workload& w;
  kvidx::Indexer& idx;
  Router& router;
  const ReplayOptions& opt;
  std::unique_ptr<Progress[]> progress;
  std::size_t threads;
  std::mutex report_mu;
  ReplayReport report;

  /// Waits until every op of the other kind (events for a match, matches for an event) more
  /// than `window` lines before `line` is done. Ops of the same kind never wait for each other.
  void wait_for(std::size_t line, bool is_writer) const {
    if (line <= opt.window) return;
    const std::size_t need = line - opt.window;
    const std::size_t begin = is_writer ? opt.writers : 0;
    const std::size_t end = is_writer ? threads : opt.writers;
    for (unsigned spins = 0;; ++spins) {
      bool ready = true;
      for (std::size_t u = begin; u < end && ready; ++u) {
        ready = progress[u].next.load(std::memory_order_acquire) >= need;
      }
      if (ready) return;
      if (spins > 64) std::this_thread::yield();
    }
  }

  void record_error(ReplayReport& local, kvidx::Status s, const char* what) {
    ++local.errors;
    if (local.first_error.empty()) local.first_error = std::string(what) + ": " + s.message();
  }

  /// Merges one thread's counters into the report.
  void merge(ReplayReport& local) {
    std::lock_guard<std::mutex> lock(report_mu);
    report.find_ns.merge(local.find_ns);
    report.route_ns.merge(local.route_ns);
    report.apply_ns.merge(local.apply_ns);
    report.routed += local.routed;
    report.hits += local.hits;
    report.query_blocks += local.query_blocks;
    report.reused_blocks += local.reused_blocks;
    report.best_blocks += local.best_blocks;
    report.rejected_at_call += local.rejected_at_call;
    report.errors += local.errors;
    if (report.first_error.empty()) report.first_error = local.first_error;
  }

  void run_writer(std::size_t self, const std::vector<std::size_t>& mine) {
    ReplayReport local;
    local.apply_ns.reserve(mine.size());
    for (std::size_t k = 0; k < mine.size(); ++k) {
      wait_for(mine[k], true);
      const kvidx::Event e = w.ops[mine[k]].to_event();
      const auto start = Clock::now();
      const kvidx::Status s = idx.apply(e);
      local.apply_ns.add(ns_since(start));
      if (s == kvidx::Errc::parent_not_found) {
        ++local.rejected_at_call;
      } else if (!s.ok()) {
        record_error(local, s, "apply");
      }
      progress[self].next.store(k + 1 < mine.size() ? mine[k + 1] : kDone,
                                std::memory_order_release);
    }
    merge(local);
  }

  void run_reader(std::size_t self, const std::vector<std::size_t>& mine) {
    ReplayReport local;
    local.find_ns.reserve(mine.size());
    local.route_ns.reserve(mine.size());
    kvidx::MatchBuffer buf(256);
    Router::Scratch scratch = router.make_scratch();
    // Requests still "running": a ring of the last `inflight` decisions of this thread.
    std::vector<std::pair<Decision, std::size_t>> ring(std::max<std::size_t>(opt.inflight, 1));
    std::size_t ring_len = 0, ring_head = 0;
    for (std::size_t k = 0; k < mine.size(); ++k) {
      wait_for(mine[k], false);
      const Op& op = w.ops[mine[k]];
      const auto start = Clock::now();
      const kvidx::Status s = idx.find_matches(op.hashes, buf);
      const std::uint64_t find_ns = ns_since(start);
      if (!s.ok()) {
        record_error(local, s, "find_matches");
        buf.clear();
      }
      const Decision d = router.route(buf.view(), op.hashes.size(), scratch);
      local.route_ns.add(ns_since(start));
      local.find_ns.add(find_ns);
      ++local.routed;
      local.hits += d.overlap > 0 ? 1 : 0;
      local.query_blocks += op.hashes.size();
      local.reused_blocks += d.overlap;
      local.best_blocks += d.best;
      if (opt.inflight == 0) {
        router.finish(d, op.hashes.size());
      } else {
        if (ring_len == ring.size()) {
          const auto& [old, len] = ring[ring_head];
          router.finish(old, len);
          ring_head = (ring_head + 1) % ring.size();
          --ring_len;
        }
        ring[(ring_head + ring_len) % ring.size()] = {d, op.hashes.size()};
        ++ring_len;
      }
      progress[self].next.store(k + 1 < mine.size() ? mine[k + 1] : kDone,
                                std::memory_order_release);
    }
    for (; ring_len > 0; --ring_len, ring_head = (ring_head + 1) % ring.size()) {
      router.finish(ring[ring_head].first, ring[ring_head].second);
    }
    merge(local);
  }
};

}  // namespace

ReplayReport replay(const Workload& w, kvidx::Indexer& idx, Router& router,
                    const ReplayOptions& opt) {
  const auto lines = assign_lines(w, opt);
  Shared sh{w, idx, router, opt, std::make_unique<Progress[]>(lines.size()), lines.size(), {}, {}};
  for (std::size_t t = 0; t < lines.size(); ++t) {
    sh.progress[t].next.store(lines[t].empty() ? kDone : lines[t].front());
  }
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < lines.size(); ++t) {
    threads.emplace_back([&sh, &lines, t, writers = opt.writers] {
      if (t < writers) {
        sh.run_writer(t, lines[t]);
      } else {
        sh.run_reader(t, lines[t]);
      }
    });
  }
  for (auto& th : threads) th.join();
  const kvidx::Status flushed = idx.flush();
  if (!flushed.ok()) sh.record_error(sh.report, flushed, "flush");
  sh.report.wall_seconds = static_cast<double>(ns_since(start)) / 1e9;
  return std::move(sh.report);
}

std::string verify_against_sequential(const Workload& w, const kvidx::Indexer& idx,
                                      std::size_t max_queries, std::size_t& compared) {
  compared = 0;
  kvidx::Config cfg;
  cfg.backend = kvidx::Backend::radix;
  cfg.event_threads = 0;
  auto created = kvidx::Indexer::create(cfg);
  if (!created) return std::string("cannot create the sequential indexer: ") +
                       created.status().message();
  kvidx::Indexer seq = std::move(created).value();
  for (const Op& op : w.ops) {
    if (!op.is_event()) continue;
    const kvidx::Status s = seq.apply(op.to_event());
    if (!s.ok() && s != kvidx::Errc::parent_not_found) {
      return std::string("sequential apply failed: ") + s.message();
    }
  }
  auto a = idx.stats();
  auto b = seq.stats();
  if (!a || !b) return "stats failed";
  if (a->events_applied != b->events_applied || a->events_rejected != b->events_rejected ||
      a->unknown_removals != b->unknown_removals || a->workers != b->workers ||
      a->worker_blocks != b->worker_blocks) {
    return "stats differ from the sequential replay";
  }
  std::set<std::vector<std::uint64_t>> seen;
  kvidx::MatchBuffer got, want;
  for (const Op& op : w.ops) {
    if (op.is_event() || compared >= max_queries || !seen.insert(op.hashes).second) continue;
    if (!idx.find_matches(op.hashes, got).ok() || !seq.find_matches(op.hashes, want).ok()) {
      return "find_matches failed during verification";
    }
    ++compared;
    const bool same =
        got.size() == want.size() &&
        std::equal(got.begin(), got.end(), want.begin(), [](const auto& x, const auto& y) {
          return x.worker_id == y.worker_id && x.dp_rank == y.dp_rank && x.depth == y.depth;
        });
    if (!same) return "answers differ for query #" + std::to_string(compared);
  }
  return "";
}

}  // namespace sched
