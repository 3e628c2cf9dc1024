// cpp-scheduler: replays a kvidx workload file (docs/contract.md section 4) through one index from
// several threads, routes every match to a worker by overlap and load, and prints routing
// statistics and latency percentiles.
#include <kvidx.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

#include "replay.hpp"
#include "router.hpp"
#include "workload.hpp"

namespace {

struct Args {
  std::string workload;
  std::string rewrite;  // write the parsed workload back out here
  kvidx::Config config;
  sched::ReplayOptions replay;
  double overlap_weight = 1.0;
  bool verify = false;
  std::size_t verify_queries = 5000;
};

void usage() {
  std::fputs(
      "usage: cpp-scheduler WORKLOAD.jsonl [options]\n"
      "  --backend positional|radix   index backend (default: the library's)\n"
      "  --event-threads N            0 = writers apply events synchronously (default 0)\n"
      "  --writers N                  threads applying events (default 2)\n"
      "  --readers N                  threads routing matches (default 2)\n"
      "  --window N                   lines a match/event may overtake the other kind (default 0)\n"
      "  --inflight N                 requests per reader counted as load (default 32)\n"
      "  --overlap-weight F           cost = F * blocks to prefill + active blocks (default 1)\n"
      "  --verify                     cross-check the final index against a sequential replay\n"
      "  --rewrite OUT.jsonl          write the parsed workload back out (canonical form)\n",
      stderr);
}

bool parse_uint(const char* s, unsigned long long max, unsigned long long& out) {
  char* end = nullptr;
  errno = 0;
  out = std::strtoull(s, &end, 10);
  return errno == 0 && end != s && *end == '\0' && out <= max && s[0] != '-';
}

bool parse_args(int argc, char** argv, Args& a) {
  a.config.event_threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&](const char*& v) {
      if (i + 1 >= argc) return false;
      v = argv[++i];
      return true;
    };
    const char* v = nullptr;
    unsigned long long n = 0;
    if (arg == "--verify") {
      a.verify = true;
    } else if (arg == "--backend" && next(v)) {
      if (std::strcmp(v, "positional") == 0) {
        a.config.backend = kvidx::Backend::positional;
      } else if (std::strcmp(v, "radix") == 0) {
        a.config.backend = kvidx::Backend::radix;
      } else {
        return false;
      }
    } else if (arg == "--event-threads" && next(v) && parse_uint(v, 64, n)) {
      a.config.event_threads = static_cast<std::uint32_t>(n);
    } else if (arg == "--writers" && next(v) && parse_uint(v, 64, n) && n > 0) {
      a.replay.writers = static_cast<unsigned>(n);
    } else if (arg == "--readers" && next(v) && parse_uint(v, 64, n) && n > 0) {
      a.replay.readers = static_cast<unsigned>(n);
    } else if (arg == "--window" && next(v) && parse_uint(v, 1ull << 40, n)) {
      a.replay.window = static_cast<std::size_t>(n);
    } else if (arg == "--inflight" && next(v) && parse_uint(v, 1ull << 20, n)) {
      a.replay.inflight = static_cast<std::size_t>(n);
    } else if (arg == "--overlap-weight" && next(v)) {
      char* end = nullptr;
      a.overlap_weight = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(a.overlap_weight >= 0)) return false;
    } else if (arg == "--rewrite" && next(v)) {
      a.rewrite = v;
    } else if (!arg.empty() && arg[0] != '-' && a.workload.empty()) {
      a.workload = arg;
    } else {
      return false;
    }
  }
  return !a.workload.empty();
}

double pct(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

void print_load(const sched::Router& router) {
  const auto counts = router.routed_counts();
  if (counts.empty()) return;
  const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
  const double mean = static_cast<double>(std::accumulate(counts.begin(), counts.end(), 0ull)) /
                      static_cast<double>(counts.size());
  const auto busiest = router.workers()[static_cast<std::size_t>(hi - counts.begin())];
  std::printf(
      "load: requests per worker min=%llu mean=%.1f max=%llu (max/mean %.2f), busiest %llu/%u\n",
      static_cast<unsigned long long>(*lo), mean, static_cast<unsigned long long>(*hi),
      mean > 0 ? static_cast<double>(*hi) / mean : 0.0,
      static_cast<unsigned long long>(busiest.id), busiest.rank);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, args)) {
    usage();
    return 2;
  }
  sched::Workload w;
  std::string error;
  if (!sched::read_workload(args.workload, w, error)) {
    std::fprintf(stderr, "cpp-scheduler: %s\n", error.c_str());
    return 1;
  }
  if (!args.rewrite.empty() && !sched::write_workload(args.rewrite, w)) {
    std::fprintf(stderr, "cpp-scheduler: cannot write %s\n", args.rewrite.c_str());
    return 1;
  }
  if (w.matches > 0 && w.workers.empty()) {
    std::fprintf(stderr, "cpp-scheduler: the workload has matches but names no worker\n");
    return 1;
  }
  auto created = kvidx::Indexer::create(args.config);
  if (!created) {
    std::fprintf(stderr, "cpp-scheduler: kvidx_new: %s\n", created.status().message());
    return 1;
  }
  kvidx::Indexer idx = std::move(created).value();
  sched::Router router(w.workers, args.overlap_weight);

  std::printf("kvidx %s cpp-scheduler: %s: %zu ops (%zu events, %zu matches), %zu workers\n",
              kvidx::version(), args.workload.c_str(), w.ops.size(), w.events, w.matches,
              w.workers.size());
  std::printf(
      "config: backend=%s event_threads=%u writers=%u readers=%u window=%zu inflight=%zu "
      "overlap_weight=%.2f\n",
      args.config.backend == kvidx::Backend::radix ? "radix" : "positional",
      args.config.event_threads, args.replay.writers, args.replay.readers, args.replay.window,
      args.replay.inflight, args.overlap_weight);

  sched::ReplayReport r = sched::replay(w, idx, router, args.replay);
  auto st = idx.stats();
  if (!st) {
    std::fprintf(stderr, "cpp-scheduler: stats: %s\n", st.status().message());
    return 1;
  }
  std::printf("replay: %zu ops in %.3f s (%.0f ops/s), errors=%llu\n", w.ops.size(),
              r.wall_seconds, static_cast<double>(w.ops.size()) / std::max(r.wall_seconds, 1e-9),
              static_cast<unsigned long long>(r.errors));
  std::printf("index: events applied=%llu rejected=%llu unknown_removals=%llu workers=%llu "
              "blocks=%llu\n",
              static_cast<unsigned long long>(st->events_applied),
              static_cast<unsigned long long>(st->events_rejected),
              static_cast<unsigned long long>(st->unknown_removals),
              static_cast<unsigned long long>(st->workers),
              static_cast<unsigned long long>(st->worker_blocks));
  std::printf("routing: %llu of %zu matches routed, hit rate %.1f%%, reused blocks %llu/%llu "
              "(%.1f%%), deepest available %llu (%.1f%%), efficiency %.1f%%\n",
              static_cast<unsigned long long>(r.routed), w.matches, pct(r.hits, r.routed),
              static_cast<unsigned long long>(r.reused_blocks),
              static_cast<unsigned long long>(r.query_blocks), pct(r.reused_blocks, r.query_blocks),
              static_cast<unsigned long long>(r.best_blocks), pct(r.best_blocks, r.query_blocks),
              pct(r.reused_blocks, r.best_blocks));
  print_load(router);
  std::printf("latency find_matches: %s\n", r.find_ns.summary().c_str());
  std::printf("latency route (find_matches + choice): %s\n", r.route_ns.summary().c_str());
  std::printf("latency apply: %s\n", r.apply_ns.summary().c_str());
  if (r.errors > 0) {
    std::fprintf(stderr, "cpp-scheduler: %llu failed calls, first: %s\n",
                 static_cast<unsigned long long>(r.errors), r.first_error.c_str());
    return 1;
  }
  if (args.verify) {
    std::size_t compared = 0;
    const std::string diff =
        sched::verify_against_sequential(w, idx, args.verify_queries, compared);
    if (!diff.empty()) {
      std::printf("verify: FAILED: %s\n", diff.c_str());
      return 1;
    }
    std::printf("verify: OK (stats and %zu distinct queries match a sequential radix replay)\n",
                compared);
  }
  return 0;
}
