// Offset batches, watermarks and snapshots through the wrapper (KVIDX_HAS_SNAPSHOTS):
// std::stringstream round trips on both backends, replay idempotence, malformed and failing
// streams, stream exceptions rethrown after the C call, and engine batches at offsets.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <vector>

#include "test_support.hpp"

#ifndef KVIDX_ENGINE_FIXTURES
#error "KVIDX_ENGINE_FIXTURES must name the directory of the engine fixtures"
#endif

namespace {

using kvidx::Backend;
using kvidx::Errc;
using kvidx::Worker;
using kvidx_test::chain;
using kvidx_test::matches;
using kvidx_test::query;

static_assert(static_cast<std::uint32_t>(Errc::io) == KVIDX_ERR_IO);

kvidx::Indexer make(Backend b, std::uint32_t threads) {
  auto r = kvidx_test::create_indexer(b, threads);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(r).value();
}

/// One worker's events at one offset; the blocks live in the batch.
struct Batch {
  std::uint64_t offset;
  Worker worker;
  int kind;  // 0 store from 0, 1 store continuing, 2 remove, 3 clear
  std::size_t from, to;
};

/// A deterministic log of offset batches over 4 workers (stores, extensions, removals,
/// clears), offsets 1..n.
std::vector<Batch> make_log(std::size_t n) {
  std::vector<Batch> log;
  std::uint64_t x = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    const Worker w{(x >> 33) % 4, static_cast<std::uint32_t>((x >> 40) % 2)};
    const int r = static_cast<int>((x >> 45) % 10);
    const std::size_t from = (x >> 50) % 6;
    Batch b{i + 1, w, r < 5 ? 0 : r < 7 ? 1 : r < 9 ? 2 : 3, from, from + 1 + (x >> 55) % 4};
    log.push_back(b);
  }
  return log;
}

/// Applies one batch at its offset.
void apply(const kvidx::Indexer& ix, const Batch& b) {
  std::vector<kvidx::Block> blocks =
      chain(b.worker, b.kind == 0 ? 0 : b.from, b.kind == 0 ? b.to - b.from : b.to);
  std::vector<std::uint64_t> names;
  for (const auto& blk : blocks) names.push_back(blk.seq_hash);
  kvidx::Event e{};
  switch (b.kind) {
    case 0:
      e = kvidx::stored(b.worker, b.offset, std::nullopt, blocks);
      break;
    case 1:
      e = kvidx::stored(b.worker, b.offset,
                        b.from == 0 ? std::optional<std::uint64_t>()
                                    : std::optional<std::uint64_t>(kvidx_test::seq_of(b.worker, b.from - 1)),
                        blocks);
      break;
    case 2:
      e = kvidx::removed(b.worker, b.offset, names);
      break;
    default:
      e = kvidx::cleared(b.worker, b.offset);
  }
  const kvidx::Status s = ix.apply_events_at(&e, 1, b.offset);
  EXPECT_TRUE(s.ok() || s == Errc::parent_not_found) << s.message();
}

/// Every query prefix up to 10 blocks, and every watermark, agree.
void expect_same(const kvidx::Indexer& a, const kvidx::Indexer& b) {
  ASSERT_TRUE(a.flush().ok());
  ASSERT_TRUE(b.flush().ok());
  for (std::size_t n = 1; n <= 10; ++n) EXPECT_EQ(matches(a, query(n)), matches(b, query(n)));
  for (std::uint64_t id = 0; id < 4; ++id) {
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(a.watermark({id, rank}).value(), b.watermark({id, rank}).value());
    }
  }
}

class SnapshotTest : public ::testing::TestWithParam<Backend> {};

TEST_P(SnapshotTest, RoundTripThenReplayIsExactlyOnce) {
  const auto log = make_log(500);
  auto ix = make(GetParam(), 2);
  for (std::size_t i = 0; i < 300; ++i) apply(ix, log[i]);
  ASSERT_TRUE(ix.flush().ok());
  std::stringstream snap;
  auto info = ix.write_snapshot(snap);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->bytes, snap.str().size());
  EXPECT_EQ(info->max_watermark <= 300 && info->max_watermark > 0, true);

  auto copy = make(GetParam(), 0);
  auto rinfo = copy.restore_snapshot(snap);
  ASSERT_TRUE(rinfo.ok()) << rinfo.status().message();
  EXPECT_EQ(rinfo->blocks, info->blocks);
  EXPECT_EQ(rinfo->workers, info->workers);
  expect_same(ix, copy);

  // The whole log again: the first 300 batches are skipped, the rest applied once.
  for (const auto& b : log) apply(copy, b);
  for (std::size_t i = 300; i < log.size(); ++i) apply(ix, log[i]);
  expect_same(ix, copy);
  const auto st = copy.replica_stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->batches_skipped, 300u);
  EXPECT_EQ(st->batches_applied, 200u);
  EXPECT_EQ(st->events_skipped, 300u);

  // Restoring into a non-empty indexer is refused.
  std::stringstream again(snap.str());
  EXPECT_EQ(copy.restore_snapshot(again).status(), Errc::invalid_argument);
}

TEST_P(SnapshotTest, MalformedAndFailingStreamsLeaveTheIndexerEmpty) {
  auto ix = make(GetParam(), 0);
  for (const auto& b : make_log(200)) apply(ix, b);
  std::stringstream good;
  ASSERT_TRUE(ix.write_snapshot(good).ok());
  const std::string raw = good.str();

  auto target = make(GetParam(), 0);
  const auto expect_refused = [&](const std::string& bytes, Errc want) {
    std::istringstream in(bytes);
    EXPECT_EQ(target.restore_snapshot(in).status(), want);
    const auto st = target.stats();
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->workers, 0u);
    EXPECT_EQ(st->worker_blocks, 0u);
  };
  expect_refused(raw.substr(0, raw.size() - 1), Errc::malformed);
  expect_refused(raw.substr(0, raw.size() / 2), Errc::malformed);
  expect_refused("", Errc::malformed);
  expect_refused("not a kvidx snapshot, not at all", Errc::malformed);
  std::string flipped = raw;
  flipped[raw.size() / 2] = static_cast<char>(flipped[raw.size() / 2] ^ 0x04);
  expect_refused(flipped, Errc::malformed);
  expect_refused(raw + "x", Errc::malformed);

  // A stream already failed: Errc::io, for writes and reads.
  std::ostringstream bad_out;
  bad_out.setstate(std::ios::badbit);
  EXPECT_EQ(ix.write_snapshot(bad_out).status(), Errc::io);
  std::istringstream bad_in(raw);
  bad_in.setstate(std::ios::badbit);
  EXPECT_EQ(target.restore_snapshot(bad_in).status(), Errc::io);

  // Usable afterwards.
  std::istringstream in(raw);
  ASSERT_TRUE(target.restore_snapshot(in).ok());
  expect_same(ix, target);
}

INSTANTIATE_TEST_SUITE_P(Backends, SnapshotTest,
                         ::testing::Values(Backend::positional, Backend::radix, Backend::runs));

/// A stream buffer that throws after `budget` bytes.
class ThrowingBuf : public std::streambuf {
 public:
  explicit ThrowingBuf(std::size_t budget) : budget_(budget) {}

 protected:
  int_type overflow(int_type c) override {
    if (budget_ == 0) throw std::runtime_error("disk full (test)");
    --budget_;
    return traits_type::not_eof(c);
  }

 private:
  std::size_t budget_;
};

TEST(SnapshotStreams, StreamExceptionsAreRethrownAfterTheCall) {
  auto ix = make(Backend::positional, 0);
  for (const auto& b : make_log(100)) apply(ix, b);
  ThrowingBuf buf(10);
  std::ostream out(&buf);
  out.exceptions(std::ios::badbit);
  EXPECT_THROW((void)ix.write_snapshot(out), std::exception);
  // Without exceptions enabled the stream swallows the throw and sets badbit: Errc::io.
  ThrowingBuf quiet(10);
  std::ostream out2(&quiet);
  EXPECT_EQ(ix.write_snapshot(out2).status(), Errc::io);
  EXPECT_TRUE(ix.stats().ok());
}

TEST(SnapshotStreams, OffsetZeroAndMovedFromIndexer) {
  auto ix = make(Backend::positional, 0);
  const auto blocks = chain({1, 0}, 0, 2);
  const kvidx::Event e = kvidx::stored({1, 0}, 1, std::nullopt, blocks);
  EXPECT_EQ(ix.apply_events_at(&e, 1, 0), Errc::invalid_argument);
  EXPECT_TRUE(ix.apply_events_at(&e, 1, 7).ok());
  EXPECT_EQ(ix.watermark({1, 0}).value(), 7u);
  EXPECT_EQ(ix.watermark({2, 0}).value(), 0u);
  kvidx::Indexer moved = std::move(ix);
  EXPECT_EQ(ix.watermark({1, 0}).status(), Errc::null_pointer);  // NOLINT: use after move
  EXPECT_EQ(ix.replica_stats().status(), Errc::null_pointer);    // NOLINT
  std::stringstream s;
  EXPECT_EQ(ix.write_snapshot(s).status(), Errc::null_pointer);  // NOLINT
  EXPECT_TRUE(moved.write_snapshot(s).ok());
}

std::vector<std::uint8_t> fixture(const std::string& name) {
  const std::string path = std::string(KVIDX_ENGINE_FIXTURES) + "/" + name + ".msgpack";
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>());
}

TEST(SnapshotEngine, EngineBatchesAtOffsetsSkipAndKeepTheSequence) {
  const auto payload = fixture("vllm_annotated_array_gen12");
  auto ix = make(Backend::positional, 0);
  auto feed = kvidx::EngineFeed::create(kvidx::EngineFormat::vllm);
  ASSERT_TRUE(feed.ok());
  const auto s0 = kvidx::seq_frame(0);
  const auto s1 = kvidx::seq_frame(1);
  const auto s2 = kvidx::seq_frame(2);
  ASSERT_TRUE(feed->apply_at(ix, 3, 0, s0, payload, 10).ok());
  // Offset at the watermark: skipped, but its sequence is recorded (batch 2 is in order).
  ASSERT_TRUE(feed->apply_at(ix, 3, 0, s1, payload, 10).ok());
  auto r = feed->apply_at(ix, 3, 0, s2, payload, 11);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seq(), kvidx::SeqStatus::in_order);
  EXPECT_FALSE(r->cleared());
  EXPECT_EQ(feed->apply_at(ix, 3, 0, s2, payload, 0).status(), Errc::invalid_argument);
  EXPECT_TRUE(ix.apply_engine_batch_at(kvidx::EngineFormat::vllm, 4, 0, payload, 5).ok());
  EXPECT_TRUE(ix.apply_engine_batch_at(kvidx::EngineFormat::vllm, 4, 0, payload, 5).ok());
  const auto st = ix.replica_stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->batches_applied, 3u);
  EXPECT_EQ(st->batches_skipped, 2u);
  EXPECT_EQ(ix.watermark({3, 0}).value(), 11u);
}

}  // namespace
