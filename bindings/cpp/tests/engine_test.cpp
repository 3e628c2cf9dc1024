// Engine KV events through the wrapper: the committed msgpack fixtures of
// tests/fixtures/engine (directory given by CMake as KVIDX_ENGINE_FIXTURES) applied with
// Indexer::apply_engine_batch and through an EngineFeed (sequence gaps and restarts).
#include <array>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "test_support.hpp"

#ifndef KVIDX_ENGINE_FIXTURES
#error "KVIDX_ENGINE_FIXTURES must name the directory of the engine fixtures"
#endif

namespace {

using kvidx::EngineFeed;
using kvidx::EngineFormat;
using kvidx::Errc;
using kvidx::FeedFlags;
using kvidx::SeqStatus;

static_assert(!std::is_copy_constructible_v<EngineFeed>, "EngineFeed must not be copyable");
static_assert(!std::is_copy_assignable_v<EngineFeed>, "EngineFeed must not be copy-assignable");
static_assert(std::is_nothrow_move_constructible_v<EngineFeed>, "moves must not throw");
static_assert(std::is_nothrow_move_assignable_v<EngineFeed>, "moves must not throw");
static_assert(sizeof(EngineFeed) == sizeof(void*), "the deleter must add no size");
static_assert(!std::is_convertible_v<kvidx_engine_feed*, EngineFeed>, "adoption is explicit");
static_assert(static_cast<std::uint32_t>(Errc::malformed) == KVIDX_ERR_MALFORMED);
static_assert(static_cast<std::uint32_t>(Errc::too_large) == KVIDX_ERR_TOO_LARGE);
static_assert(kvidx::max_engine_payload == KVIDX_ENGINE_MAX_PAYLOAD);
static_assert(static_cast<std::uint32_t>(SeqStatus::restart) == KVIDX_SEQ_RESTART);
static_assert(static_cast<std::uint32_t>(FeedFlags::no_clear_on_gap | FeedFlags::all_media) ==
              (KVIDX_FEED_NO_CLEAR_ON_GAP | KVIDX_FEED_ALL_MEDIA));
static_assert(kvidx::seq_frame(0x0102030405060708u)[0] == 1 &&
              kvidx::seq_frame(0x0102030405060708u)[7] == 8, "big-endian");

/// The bytes of fixture `name` (without the .msgpack suffix); empty if it cannot be read.
std::vector<std::uint8_t> fixture(const std::string& name) {
  const std::string path = std::string(KVIDX_ENGINE_FIXTURES) + "/" + name + ".msgpack";
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>());
}

/// A synchronous indexer (events applied before each call returns).
kvidx::Indexer make() {
  kvidx::Config cfg;
  cfg.event_threads = 0;
  auto r = kvidx::Indexer::create(cfg);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(r).value();
}

/// Local hashes of tokens first..last in blocks of 4 (the fixtures' block size).
std::vector<std::uint64_t> token_query(std::uint32_t first, std::uint32_t last) {
  std::vector<std::uint32_t> tokens;
  for (std::uint32_t t = first; t <= last; ++t) tokens.push_back(t);
  auto r = kvidx::hash_tokens(tokens, 4);
  EXPECT_TRUE(r.ok());
  return std::move(r).value_or({});
}

/// One store of tokens 1..4 (one block, engine hash 2^64-1) in vLLM's 12-field array form.
const char* const kOneBlock = "vllm_annotated_array_gen12";

TEST(Engine, VllmBatchAppliesAndFindMatchesSeesTheBlocks) {
  auto idx = make();
  const auto payload = fixture(kOneBlock);
  ASSERT_FALSE(payload.empty());
  EXPECT_EQ(kvidx_test::matches(idx, token_query(1, 4)), "");
  auto r = idx.apply_engine_batch(EngineFormat::vllm, 7, kvidx::dp_rank_from_batch, payload);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->events_decoded, 1u);
  EXPECT_EQ(r->events_submitted, 1u);
  EXPECT_EQ(r->events_rejected, 0u);
  EXPECT_EQ(r->dp_rank, 0u) << "the envelope's rank";
  EXPECT_EQ(r->seq(), SeqStatus::untracked);
  EXPECT_FALSE(r->cleared());
  EXPECT_EQ(kvidx_test::matches(idx, token_query(1, 4)), "7/0:1");
  EXPECT_EQ(kvidx_test::matches(idx, token_query(5, 8)), "") << "other tokens do not match";

  // A chain of two stores (tokens 1..12), then a removal of block 0, through the TRT-LLM
  // publisher's format, on rank 3: positions 1 and 2 stay, so a query from token 1 misses.
  const auto trt = fixture("trtllm_map");
  auto t = idx.apply_engine_batch(EngineFormat::trtllm, 8, 3, trt);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->events_decoded, 3u);
  EXPECT_EQ(t->events_submitted, 3u);
  EXPECT_EQ(t->dp_rank, 3u);
  EXPECT_EQ(kvidx_test::matches(idx, token_query(1, 12)), "7/0:1");
  auto st = idx.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->workers, 2u);
  EXPECT_EQ(st->worker_blocks, 3u) << "7/0 holds 1 block, 8/3 holds 2";
}

TEST(Engine, MalformedPayloadIsMalformedAndChangesNothing) {
  auto idx = make();
  const auto good = fixture(kOneBlock);
  ASSERT_TRUE(idx.apply_engine_batch(EngineFormat::vllm, 1, 0, good).ok());
  const auto before = idx.stats();
  ASSERT_TRUE(before.ok());

  const auto truncated = std::vector<std::uint8_t>(good.begin(), good.end() - 1);
  auto trailing = good;
  trailing.push_back(0xc0);
  const std::vector<std::uint8_t> not_msgpack{0xc1};
  for (const auto& bad : {truncated, trailing, not_msgpack}) {
    auto r = idx.apply_engine_batch(EngineFormat::vllm, 2, 0, bad);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status(), Errc::malformed);
  }
  EXPECT_EQ(idx.apply_engine_batch(EngineFormat::vllm, 2, 0, {}).status(), Errc::malformed)
      << "an empty payload is not a batch";
  // Argument errors are not payload errors, and win over them.
  EXPECT_EQ(idx.apply_engine_batch(static_cast<EngineFormat>(9), 2, 0, good).status(),
            Errc::invalid_argument);
  EXPECT_EQ(idx.apply_engine_batch(static_cast<EngineFormat>(9), 2, 0, truncated).status(),
            Errc::invalid_argument);
  EXPECT_EQ(idx.apply_engine_batch(EngineFormat::vllm, 2, 0, {nullptr, 4}).status(),
            Errc::null_pointer);

  const auto after = idx.stats();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->events_applied, before->events_applied);
  EXPECT_EQ(after->workers, before->workers);
  EXPECT_EQ(after->worker_blocks, before->worker_blocks);
  EXPECT_EQ(kvidx_test::matches(idx, token_query(1, 4)), "1/0:1");
  EXPECT_STREQ(kvidx::Status(Errc::malformed).message(),
               "KVIDX_ERR_MALFORMED: the payload is not a valid engine event batch; "
               "nothing was applied");
}

/// Stores two blocks (local hashes 1000, 1001) for `w` directly, so a clear is visible.
void store_marker(kvidx::Indexer& idx, kvidx::Worker w) {
  const auto blocks = kvidx_test::chain(w, 0, 2);
  ASSERT_EQ(idx.apply(kvidx::stored(w, 100, std::nullopt, blocks)), Errc::ok);
}

TEST(EngineFeedTest, GapAndRestartClearTheWorkerByDefault) {
  auto idx = make();
  auto created = EngineFeed::create(EngineFormat::vllm);
  ASSERT_TRUE(created.ok()) << created.status().message();
  EngineFeed feed = std::move(created).value();
  const auto payload = fixture(kOneBlock);
  const kvidx::Worker w{5, 0};

  auto r = feed.apply(idx, w.id, w.rank, kvidx::seq_frame(0), payload);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->seq(), SeqStatus::first);
  r = feed.apply(idx, w.id, w.rank, kvidx::seq_frame(1), payload);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seq(), SeqStatus::in_order);
  EXPECT_FALSE(r->cleared());

  store_marker(idx, w);
  EXPECT_EQ(kvidx_test::matches(idx, kvidx_test::query(2)), "5/0:2");
  r = feed.apply(idx, w.id, w.rank, kvidx::seq_frame(5), payload);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seq(), SeqStatus::gap);
  EXPECT_EQ(r->seq_expected, 2u);
  EXPECT_EQ(r->batches_missed, 3u);
  EXPECT_TRUE(r->cleared());
  EXPECT_EQ(kvidx_test::matches(idx, kvidx_test::query(2)), "") << "cleared before the batch";
  EXPECT_EQ(kvidx_test::matches(idx, token_query(1, 4)), "5/0:1") << "then the batch applied";

  store_marker(idx, w);
  r = feed.apply(idx, w.id, w.rank, kvidx::seq_frame(0), payload);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seq(), SeqStatus::restart);
  EXPECT_EQ(r->seq_expected, 6u);
  EXPECT_TRUE(r->cleared());
  EXPECT_EQ(kvidx_test::matches(idx, kvidx_test::query(2)), "");

  // No sequence frame: untracked.
  r = feed.apply(idx, w.id, w.rank, {}, payload);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seq(), SeqStatus::untracked);

  auto st = feed.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->batches, 5u);
  EXPECT_EQ(st->batches_malformed, 0u);
  EXPECT_EQ(st->gaps, 1u);
  EXPECT_EQ(st->batches_missed, 3u);
  EXPECT_EQ(st->restarts, 1u);
  EXPECT_EQ(st->workers_cleared, 2u);
  EXPECT_EQ(st->events_decoded, 5u);
}

#if defined(KVIDX_HAS_FEED_START)
// A publisher's sequence starts at 0: its first batch above 0 follows batches the feed never
// saw. next_seq() says where the feed expects it from (0 before its first batch: where a
// caller asks the replay socket from); start_stats() counts them; the worker is not cleared.
TEST(EngineFeedTest, AFirstBatchAbove0IsReportedMissedFromTheStart) {
  auto idx = make();
  auto created = EngineFeed::create(EngineFormat::vllm);
  ASSERT_TRUE(created.ok()) << created.status().message();
  EngineFeed feed = std::move(created).value();
  const auto payload = fixture(kOneBlock);
  const kvidx::Worker late{5, 0}, early{5, 1};

  auto next = feed.next_seq(late);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 0u) << "a publisher not seen yet is expected from 0";
  auto r = feed.apply(idx, late.id, late.rank, kvidx::seq_frame(5), payload);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->seq(), SeqStatus::first);
  EXPECT_FALSE(r->cleared());
  next = feed.next_seq(late);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 6u);
  ASSERT_TRUE(feed.apply(idx, early.id, early.rank, kvidx::seq_frame(0), payload).ok());

  auto st = feed.start_stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->late_starts, 1u);
  EXPECT_EQ(st->batches_missed_from_start, 5u);
  auto es = feed.stats();
  ASSERT_TRUE(es.ok());
  EXPECT_EQ(es->gaps, 0u);
  EXPECT_EQ(es->workers_cleared, 0u);

  EngineFeed moved = std::move(feed);
  EXPECT_EQ(feed.next_seq(late).status(), Errc::null_pointer);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(feed.start_stats().status(), Errc::null_pointer);   // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(moved.start_stats().ok());
}
#endif  // KVIDX_HAS_FEED_START

#if defined(KVIDX_HAS_FEED_STATE)
/// A feed of `format` (the test fails if it cannot be created).
EngineFeed make_feed(EngineFormat format) {
  auto created = EngineFeed::create(format);
  EXPECT_TRUE(created.ok()) << created.status().message();
  return std::move(created).value_or(EngineFeed(nullptr));
}

/// The sequence status of `feed`'s batch `seq` for publisher `w` in `epoch`, at `offset`.
SeqStatus apply_in_epoch(const EngineFeed& feed, const kvidx::Indexer& idx, kvidx::Worker w,
                         std::optional<std::uint64_t> epoch, std::uint64_t seq,
                         std::uint64_t offset) {
  auto r = feed.apply_epoch_at(idx, w.id, w.rank, epoch, kvidx::seq_frame(seq),
                               fixture(kOneBlock), offset);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->seq() : SeqStatus::untracked;
}

// An epoch other than the publisher's previous one is a restart: the worker is cleared and
// the sequence tracked afresh (2 would be in order in the old epoch); no epoch keeps it.
TEST(EngineFeedTest, ANewEpochThroughApplyEpochAtIsARestartThatClearsTheWorker) {
  auto idx = make();
  const EngineFeed feed = make_feed(EngineFormat::vllm);
  const kvidx::Worker w{7, 0};
  EXPECT_EQ(apply_in_epoch(feed, idx, w, 10, 0, 1), SeqStatus::first);
  EXPECT_EQ(apply_in_epoch(feed, idx, w, 10, 1, 2), SeqStatus::in_order);

  store_marker(idx, w);
  EXPECT_EQ(kvidx_test::matches(idx, kvidx_test::query(2)), "7/0:2");
  auto r = feed.apply_epoch_at(idx, w.id, w.rank, 11, kvidx::seq_frame(2), fixture(kOneBlock), 3);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->seq(), SeqStatus::restart);
  EXPECT_TRUE(r->cleared());
  EXPECT_EQ(kvidx_test::matches(idx, kvidx_test::query(2)), "") << "cleared before the batch";
  EXPECT_EQ(kvidx_test::matches(idx, token_query(1, 4)), "7/0:1") << "then the batch applied";

  EXPECT_EQ(apply_in_epoch(feed, idx, w, 11, 3, 4), SeqStatus::in_order);
  EXPECT_EQ(apply_in_epoch(feed, idx, w, std::nullopt, 4, 5), SeqStatus::in_order);
  auto st = feed.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->restarts, 1u);
  EXPECT_EQ(st->workers_cleared, 1u);
  EXPECT_EQ(st->gaps, 0u);
  EXPECT_EQ(feed.apply_epoch_at(idx, w.id, w.rank, 10, kvidx::seq_frame(5), fixture(kOneBlock), 0)
                .status(),
            Errc::invalid_argument)
      << "offset 0";
}

// save_state() taken from one feed and restore_state() into a new one: the new feed
// classifies each publisher's next batch (in order, gap, new epoch) as the original does.
// Bytes that are not a saved state, or the state of another format, change nothing.
TEST(EngineFeedTest, ASavedStateRestoredIntoANewFeedClassifiesTheNextBatchAlike) {
  auto idx_saved = make();
  auto idx_restored = make();
  const EngineFeed saved = make_feed(EngineFormat::vllm);
  const EngineFeed restored = make_feed(EngineFormat::vllm);
  const EngineFeed other = make_feed(EngineFormat::sglang);
  const kvidx::Worker in_epoch{1, 0}, no_epoch{2, 0}, own{3, 0};
  apply_in_epoch(saved, idx_saved, in_epoch, 5, 3, 1);
  apply_in_epoch(saved, idx_saved, no_epoch, std::nullopt, 9, 2);
  EXPECT_EQ(apply_in_epoch(restored, idx_restored, own, std::nullopt, 0, 1), SeqStatus::first);

  auto state = saved.save_state();
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->size(), 20u + 2 * 40u);

  EXPECT_EQ(other.restore_state(*state), Errc::invalid_argument);
  const std::vector<std::uint8_t> truncated(state->begin(), state->end() - 1);
  EXPECT_EQ(restored.restore_state(truncated), Errc::malformed);
  const std::vector<std::uint8_t> garbage(state->size(), 0xAB);
  EXPECT_EQ(restored.restore_state(garbage), Errc::malformed);
  EXPECT_EQ(restored.restore_state({nullptr, 0}), Errc::malformed);
  auto publishers = restored.publishers();
  ASSERT_TRUE(publishers.ok());
  EXPECT_EQ(*publishers, 1u) << "a refused state leaves the feed's own publisher";
#if defined(KVIDX_HAS_FEED_START)
  auto next = restored.next_seq(own);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 1u) << "and its sequence";
#endif

  ASSERT_EQ(restored.restore_state(*state), Errc::ok);
  publishers = restored.publishers();
  ASSERT_TRUE(publishers.ok());
  EXPECT_EQ(*publishers, 2u) << "the saved publishers replace the feed's own";
  auto st = restored.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->batches, 1u) << "the counters are kept";

  for (const EngineFeed* feed : {&restored, &saved}) {
    const kvidx::Indexer& idx = feed == &saved ? idx_saved : idx_restored;
    SCOPED_TRACE(feed == &saved ? "saved" : "restored");
    EXPECT_EQ(apply_in_epoch(*feed, idx, in_epoch, 5, 4, 3), SeqStatus::in_order);
    auto r = feed->apply_epoch_at(idx, no_epoch.id, no_epoch.rank, std::nullopt,
                                  kvidx::seq_frame(12), fixture(kOneBlock), 4);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->seq(), SeqStatus::gap);
    EXPECT_EQ(r->seq_expected, 10u);
    EXPECT_EQ(r->batches_missed, 2u);
    EXPECT_EQ(apply_in_epoch(*feed, idx, in_epoch, 6, 5, 5), SeqStatus::restart);
  }
  EXPECT_EQ(apply_in_epoch(restored, idx_restored, own, std::nullopt, 1, 6), SeqStatus::first)
      << "the feed's own publisher was replaced";

  const EngineFeed empty = make_feed(EngineFormat::vllm);
  auto empty_state = empty.save_state();
  ASSERT_TRUE(empty_state.ok());
  EXPECT_EQ(empty_state->size(), 20u) << "a feed without publishers saves the header only";
}

TEST(EngineFeedTest, MovedFromFeedSaveRestoreAndEpochApplyAreNullPointer) {
  auto idx = make();
  EngineFeed feed = make_feed(EngineFormat::vllm);
  EngineFeed moved = std::move(feed);
  // NOLINTBEGIN(bugprone-use-after-move)
  EXPECT_EQ(feed.save_state().status(), Errc::null_pointer);
  EXPECT_EQ(feed.restore_state({}), Errc::null_pointer);
  EXPECT_EQ(feed.apply_epoch_at(idx, 1, 0, 1, kvidx::seq_frame(0), fixture(kOneBlock), 1)
                .status(),
            Errc::null_pointer);
  // NOLINTEND(bugprone-use-after-move)
  EXPECT_TRUE(moved.save_state().ok());
}
#endif  // KVIDX_HAS_FEED_STATE

TEST(EngineFeedTest, FlagsKeepTheWorkerAndPublishersAreTrackedApart) {
  auto idx = make();
  auto created = EngineFeed::create(
      EngineFormat::vllm, FeedFlags::no_clear_on_gap | FeedFlags::no_clear_on_restart);
  ASSERT_TRUE(created.ok());
  EngineFeed feed = std::move(created).value();
  const auto payload = fixture(kOneBlock);
  const kvidx::Worker w{6, 1};
  ASSERT_TRUE(feed.apply(idx, w.id, w.rank, kvidx::seq_frame(10), payload).ok());
  // Another publisher (same worker id, other rank) has its own sequence.
  auto other = feed.apply(idx, w.id, 2, kvidx::seq_frame(0), payload);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->seq(), SeqStatus::first);

  store_marker(idx, w);
  auto r = feed.apply(idx, w.id, w.rank, kvidx::seq_frame(12), payload);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seq(), SeqStatus::gap);
  EXPECT_EQ(r->batches_missed, 1u);
  EXPECT_FALSE(r->cleared()) << "the caller replays instead";
  r = feed.apply(idx, w.id, w.rank, kvidx::seq_frame(3), payload);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seq(), SeqStatus::restart);
  EXPECT_FALSE(r->cleared());
  EXPECT_EQ(kvidx_test::matches(idx, kvidx_test::query(2)), "6/1:2");
  auto st = feed.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->workers_cleared, 0u);
  EXPECT_EQ(st->gaps, 1u);
  EXPECT_EQ(st->restarts, 1u);
}

TEST(EngineFeedTest, MalformedBatchIsNotRecordedAndBadArgumentsAreRefused) {
  auto idx = make();
  auto created = EngineFeed::create(EngineFormat::vllm);
  ASSERT_TRUE(created.ok());
  EngineFeed feed = std::move(created).value();
  const auto payload = fixture(kOneBlock);
  const auto truncated = std::vector<std::uint8_t>(payload.begin(), payload.end() - 2);
  ASSERT_TRUE(feed.apply(idx, 1, 0, kvidx::seq_frame(0), payload).ok());
  const auto before = idx.stats();
  ASSERT_TRUE(before.ok());

  EXPECT_EQ(feed.apply(idx, 1, 0, kvidx::seq_frame(1), truncated).status(), Errc::malformed);
  const std::array<std::uint8_t, 7> short_frame{};
  EXPECT_EQ(feed.apply(idx, 1, 0, short_frame, payload).status(), Errc::invalid_argument);
  EXPECT_EQ(feed.apply(idx, 1, 0, short_frame, truncated).status(), Errc::invalid_argument)
      << "the frame is checked before the payload";
  const auto after = idx.stats();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->events_applied, before->events_applied);
  EXPECT_EQ(after->worker_blocks, before->worker_blocks);

  // Batch 1 was never recorded, so batch 2 reveals it as missed.
  auto r = feed.apply(idx, 1, 0, kvidx::seq_frame(2), payload);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seq(), SeqStatus::gap);
  EXPECT_EQ(r->seq_expected, 1u);
  auto st = feed.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->batches_malformed, 1u) << "bad frames count nowhere";
  EXPECT_EQ(st->batches, 2u);

  EXPECT_EQ(EngineFeed::create(static_cast<EngineFormat>(3)).status(), Errc::invalid_argument);
  // 64 became FeedFlags::unknown_medium_host with storage tiers, 256 FeedFlags::skip_extras
  // with namespaces; 512 is the first unused bit.
  for (const std::uint32_t bit : {512u, 1u << 31}) {
    EXPECT_EQ(EngineFeed::create(EngineFormat::vllm, static_cast<FeedFlags>(bit)).status(),
              Errc::invalid_argument)
        << bit;
  }
}

TEST(EngineFeedTest, MovedFromFeedAndIndexerAreNullPointer) {
  auto idx = make();
  auto created = EngineFeed::create(EngineFormat::sglang);
  ASSERT_TRUE(created.ok());
  EngineFeed feed = std::move(created).value();
  const auto payload = fixture("sglang_array");
  EngineFeed moved = std::move(feed);
  EXPECT_FALSE(feed.valid());  // NOLINT(bugprone-use-after-move): testing the moved-from state
  EXPECT_TRUE(moved.valid());
  EXPECT_EQ(feed.apply(idx, 1, 0, {}, payload).status(), Errc::null_pointer);
  EXPECT_EQ(feed.stats().status(), Errc::null_pointer);
  auto r = moved.apply(idx, 1, kvidx::dp_rank_from_batch, {}, payload);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->events_decoded, 2u);
  kvidx::Indexer gone = std::move(idx);
  EXPECT_EQ(moved.apply(idx, 1, 0, {}, payload).status(), Errc::null_pointer);  // NOLINT
  EXPECT_EQ(idx.apply_engine_batch(EngineFormat::sglang, 1, 0, payload).status(),  // NOLINT
            Errc::null_pointer);
  // Adopt and release a raw feed.
  kvidx_engine_feed* raw = moved.release();
  EXPECT_FALSE(moved.valid());
  EngineFeed adopted(raw);
  EXPECT_TRUE(adopted.stats().ok());
}

TEST(EngineFeedTest, OneFeedServesConcurrentPublishers) {
  kvidx::Config cfg;
  cfg.event_threads = 2;
  auto created_idx = kvidx::Indexer::create(cfg);
  ASSERT_TRUE(created_idx.ok());
  kvidx::Indexer idx = std::move(created_idx).value();
  auto created = EngineFeed::create(EngineFormat::vllm);
  ASSERT_TRUE(created.ok());
  EngineFeed feed = std::move(created).value();
  const auto payload = fixture(kOneBlock);
  constexpr int kThreads = 4;
  constexpr std::uint64_t kBatches = 50;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t seq = 0; seq < kBatches; ++seq) {
        auto r = feed.apply(idx, 40 + static_cast<std::uint64_t>(t), 0, kvidx::seq_frame(seq),
                            payload);
        const SeqStatus want = seq == 0 ? SeqStatus::first : SeqStatus::in_order;
        if (!r.ok() || r->seq() != want) ++failures[static_cast<std::size_t>(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
  ASSERT_EQ(idx.flush(), Errc::ok);
  EXPECT_EQ(kvidx_test::matches(idx, token_query(1, 4)), "40/0:1 41/0:1 42/0:1 43/0:1");
  auto st = feed.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->batches, kThreads * kBatches);
  EXPECT_EQ(st->gaps + st->restarts, 0u);
}

TEST(EngineFeedTest, ForgetAndRemoveWorkerDropThePublishersState) {
  const auto idx = make();
  auto created = EngineFeed::create(EngineFormat::vllm);
  ASSERT_TRUE(created.ok());
  const EngineFeed feed = std::move(created).value();
  const auto payload = fixture(kOneBlock);
  for (const kvidx::Worker w : {kvidx::Worker{1, 0}, kvidx::Worker{1, 1}, kvidx::Worker{2, 0}}) {
    ASSERT_TRUE(feed.apply(idx, w.id, w.rank, kvidx::seq_frame(0), payload).ok());
  }
  EXPECT_EQ(feed.publishers().value_or(0), 3u);
  auto known = feed.forget({2, 0});
  ASSERT_TRUE(known.ok());
  EXPECT_TRUE(*known);
  EXPECT_FALSE(feed.forget({2, 0}).value_or(true)) << "unknown publishers are a no-op";
  EXPECT_EQ(feed.publishers().value_or(0), 2u);
  // A forgotten publisher starts over.
  auto r = feed.apply(idx, 2, 0, kvidx::seq_frame(9), payload);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seq(), SeqStatus::first);
  // Removing worker 1 through the feed: both ranks leave the index and the feed.
  ASSERT_TRUE(feed.remove_worker(idx, 1).ok());
  EXPECT_EQ(feed.publishers().value_or(0), 1u);
  ASSERT_TRUE(feed.remove_worker(idx, kvidx::Worker{2, 0}).ok());
  EXPECT_EQ(feed.publishers().value_or(9), 0u);
  auto st = idx.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->workers, 0u);
}

TEST(EngineFeedTest, PayloadsAboveTheMaximumAreTooLarge) {
  const auto idx = make();
  auto created = EngineFeed::create(EngineFormat::vllm);
  ASSERT_TRUE(created.ok());
  const EngineFeed feed = std::move(created).value();
  auto big = fixture(kOneBlock);
  big.resize(kvidx::max_engine_payload + 1);
  EXPECT_EQ(idx.apply_engine_batch(EngineFormat::vllm, 1, 0, big).status(), Errc::too_large);
  EXPECT_EQ(feed.apply(idx, 1, 0, kvidx::seq_frame(0), big).status(), Errc::too_large);
  auto st = idx.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->events_applied, 0u);
  EXPECT_EQ(feed.stats()->batches_malformed, 1u);
}

}  // namespace
