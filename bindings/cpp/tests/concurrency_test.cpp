// Writers and readers share one Indexer: readers always see well-formed answers, and once the
// writers are done (and flushed) the index holds exactly the final state.
#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "test_support.hpp"

namespace {

using kvidx::Errc;
using kvidx::Worker;
using kvidx_test::chain;
using kvidx_test::seq_of;

constexpr std::size_t kChain = 16;          // positions per worker chain
constexpr std::uint64_t kWritersN = 3;      // writer threads
constexpr std::uint64_t kWorkersPer = 6;    // workers owned by each writer
constexpr int kRounds = 200;                // churn rounds per worker
constexpr int kReaders = 3;                 // reader threads

/// The depth worker `w` ends with.
std::uint32_t final_depth(Worker w) { return static_cast<std::uint32_t>(1 + w.id % kChain); }

/// Churns every worker of writer `t` through stores, removals and clears, in order, then
/// leaves each with its final depth. Returns the number of non-OK statuses seen.
int write_all(kvidx::Indexer& idx, std::uint64_t t) {
  int failures = 0;
  auto check = [&failures](kvidx::Status s) {
    if (!s.ok()) ++failures;
  };
  for (int round = 0; round < kRounds; ++round) {
    for (std::uint64_t j = 0; j < kWorkersPer; ++j) {
      const Worker w{100 * (t + 1) + j, static_cast<std::uint32_t>(j % 2)};
      const std::uint64_t base = static_cast<std::uint64_t>(round) * 8;
      const auto head = chain(w, 0, kChain / 2);
      const auto tail = chain(w, kChain / 2, kChain);
      const std::vector<std::uint64_t> drop{seq_of(w, 3), seq_of(w, kChain - 1)};
      const std::vector<kvidx::Event> batch{
          kvidx::stored(w, base, std::nullopt, head),
          kvidx::stored(w, base + 1, seq_of(w, kChain / 2 - 1), tail),
          kvidx::removed(w, base + 2, drop)};
      check(idx.apply(batch));
      if (round % 3 == 0) check(idx.apply(kvidx::cleared(w, base + 3)));
    }
  }
  for (std::uint64_t j = 0; j < kWorkersPer; ++j) {
    const Worker w{100 * (t + 1) + j, static_cast<std::uint32_t>(j % 2)};
    const auto blocks = chain(w, 0, final_depth(w));
    check(idx.apply(kvidx::cleared(w, 10000)));
    check(idx.apply(kvidx::stored(w, 10001, std::nullopt, blocks)));
  }
  return failures;
}

/// Queries until `stop`; returns a description of the first malformed answer, or "".
std::string read_until(const kvidx::Indexer& idx, const std::atomic<bool>& stop,
                       std::atomic<long>& queries) {
  const auto q = kvidx_test::query(kChain);
  kvidx::MatchBuffer buf;
  while (!stop.load(std::memory_order_acquire)) {
    if (!idx.find_matches(q, buf).ok()) return "find_matches failed";
    for (std::size_t i = 0; i < buf.size(); ++i) {
      const auto& m = buf[i];
      if (m.depth == 0 || m.depth > kChain) return "depth out of range";
      if (m.worker_id < 100 || m.worker_id >= 100 * (kWritersN + 1)) return "unknown worker";
      if (i > 0) {
        const auto& p = buf[i - 1];
        const bool ordered =
            p.depth > m.depth ||
            (p.depth == m.depth && (p.worker_id < m.worker_id ||
                                    (p.worker_id == m.worker_id && p.dp_rank < m.dp_rank)));
        if (!ordered) return "answer not ordered";
      }
    }
    queries.fetch_add(1, std::memory_order_relaxed);
  }
  return "";
}

class Concurrency : public ::testing::TestWithParam<std::tuple<kvidx::Backend, std::uint32_t>> {};

TEST_P(Concurrency, ReadersSeeWellFormedAnswersAndWritersLandExactly) {
  auto created = kvidx_test::create_indexer(std::get<0>(GetParam()), std::get<1>(GetParam()));
  ASSERT_TRUE(created.ok());
  kvidx::Indexer idx = std::move(created).value();

  std::atomic<bool> stop{false};
  std::atomic<long> queries{0};
  std::vector<std::string> reader_errors(kReaders);
  std::vector<int> writer_failures(kWritersN, 0);
  std::vector<std::thread> readers, writers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back(
        [&, r] { reader_errors[r] = read_until(idx, stop, queries); });
  }
  for (std::uint64_t t = 0; t < kWritersN; ++t) {
    writers.emplace_back([&, t] { writer_failures[t] = write_all(idx, t); });
  }
  for (auto& th : writers) th.join();
  ASSERT_EQ(idx.flush(), Errc::ok);
  // Let readers also query the settled state for a moment.
  while (queries.load() < 50) std::this_thread::yield();
  stop.store(true, std::memory_order_release);
  for (auto& th : readers) th.join();

  for (int f : writer_failures) EXPECT_EQ(f, 0);
  for (const auto& e : reader_errors) EXPECT_EQ(e, "");
  EXPECT_GE(queries.load(), 50);

  std::vector<kvidx::Match> want;
  for (std::uint64_t t = 0; t < kWritersN; ++t) {
    for (std::uint64_t j = 0; j < kWorkersPer; ++j) {
      const Worker w{100 * (t + 1) + j, static_cast<std::uint32_t>(j % 2)};
      want.push_back({w.id, w.rank, final_depth(w)});
    }
  }
  std::sort(want.begin(), want.end(), [](const kvidx::Match& a, const kvidx::Match& b) {
    if (a.depth != b.depth) return a.depth > b.depth;
    if (a.worker_id != b.worker_id) return a.worker_id < b.worker_id;
    return a.dp_rank < b.dp_rank;
  });
  EXPECT_EQ(kvidx_test::matches(idx, kvidx_test::query(kChain)), kvidx_test::render(want));

  auto st = idx.stats();
  ASSERT_TRUE(st.ok());
  const std::uint64_t workers = kWritersN * kWorkersPer;
  const std::uint64_t per_worker_events = kRounds * 3 + (kRounds + 2) / 3 + 2;
  EXPECT_EQ(st->events_applied, workers * per_worker_events);
  EXPECT_EQ(st->events_rejected, 0u);
  EXPECT_EQ(st->workers, workers);
  std::uint64_t blocks = 0;
  for (const auto& m : want) blocks += m.depth;
  EXPECT_EQ(st->worker_blocks, blocks);
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, Concurrency,
    ::testing::Combine(::testing::Values(kvidx::Backend::positional, kvidx::Backend::radix,
                                         kvidx::Backend::runs),
                       ::testing::Values(0u, 2u)),
    [](const auto& info) {
      return kvidx_test::backend_title(std::get<0>(info.param)) +
             (std::get<1>(info.param) == 0 ? "Sync" : "Threads");
    });

}  // namespace
