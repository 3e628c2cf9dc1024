// kvidx.hpp — header-only C++17 wrapper over the kvidx C ABI v1 (kvidx.h).
//
// Error handling: the wrapper never throws for a library error. Every fallible call returns a
// [[nodiscard]] kvidx::Status (no value) or kvidx::Result<T> (a value or a Status). The only
// exceptions that can escape are std::bad_alloc from growing a caller-owned buffer
// (MatchBuffer, hash output vectors) or allocating returned bytes (EngineFeed::save_state),
// as with any standard container.
//
// Ownership: kvidx::Indexer is move-only and owns its C handle through std::unique_ptr with a
// deleter calling kvidx_free. A moved-from Indexer holds no handle; calls on it return
// Errc::null_pointer (the C ABI's answer for a NULL handle).
//
// Inputs are non-owning views (kvidx::Span): pass a pointer + size, a std::vector, a
// std::array or a C array. The library keeps no pointer after a call returns.
//
// Engine events: Indexer::apply_engine_batch() decodes and applies one msgpack KVEventBatch
// payload as vLLM, SGLang or TensorRT-LLM publish it; kvidx::EngineFeed (move-only, owns a
// kvidx_engine_feed) adds per-publisher tracking of the 8-byte batch sequence (gaps, restarts).
// Bytes that are not a batch give Errc::malformed, payloads above max_engine_payload bytes
// Errc::too_large; either way nothing changes. EngineFeed::remove_worker() removes a worker
// from the indexer and forgets its publishers in the feed; EngineFeed::forget() forgets one.
// With KVIDX_HAS_FEED_STATE, EngineFeed::apply_epoch_at() takes the engine epoch of a batch
// (a new epoch is a restart) and save_state() / restore_state() carry the per-publisher
// tracking to another feed (a replica restored from a snapshot).
//
// Storage tiers (when kvidx.h defines KVIDX_HAS_TIERS): kvidx::Tier names where a worker holds
// a block (device, host, disk, external; Tier::all for removals on every tier).
// Indexer::apply_event_on_tier() / apply_events_on_tiers() apply events on one tier each,
// find_matches_tiered() reports each worker's depth per tier into a reusable
// TieredMatchBuffer, and tiered_score() weighs a TieredMatch by tier.
//
// Offset batches and snapshots (when kvidx.h defines KVIDX_HAS_SNAPSHOTS): a worker's batch
// at an offset (apply_events_at, apply_engine_batch_at, EngineFeed::apply_at) is skipped whole
// when the offset is at or below the worker's watermark (watermark()), so replaying an
// overlapping range of a log is idempotent; replica_stats() counts applied and skipped batches.
// write_snapshot(std::ostream&) streams the state (each worker's section taken under its lock,
// with its watermark) while events keep being applied; restore_snapshot(std::istream&) loads
// one into an empty indexer. Bad input: Errc::malformed; a failing stream: Errc::io; either way
// the indexer is left empty. An exception thrown by the stream itself (std::ios::exceptions)
// is caught before it reaches the library and rethrown once the C call has returned.
//
// Predicted blocks (when kvidx.h defines KVIDX_HAS_PREDICTIONS): Indexer::predict() credits a
// worker with a request's chain for a TTL on the indexer's clock (Config::predictions chooses
// the byte bound, a per-worker capacity and a monotonic or manual clock: set_time(),
// advance_time()); find_matches_predicted() reports each worker's confirmed depth, unchanged,
// and its predicted depth into a reusable PredictedMatchBuffer; events settle predictions.
//
// Thread safety: as the C ABI, whose rule is "a const handle may be used by any number of
// threads at once". Every member function of one Indexer (or EngineFeed) is const for that
// reason (except release()) and may be called from any number of threads at once; destruction
// and move-assignment must not overlap any other call on that object. A MatchBuffer (or
// TieredMatchBuffer) belongs to one thread at a time.
#ifndef KVIDX_HPP
#define KVIDX_HPP

#include <kvidx.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#if defined(KVIDX_HAS_SNAPSHOTS)
#include <exception>
#include <istream>
#include <limits>
#include <ostream>
#include <string_view>
#endif
#include <memory>
#include <optional>
#include <string_view>
#if defined(KVIDX_HAS_PREDICTIONS)
#include <chrono>
#endif
#include <type_traits>
#include <utility>
#include <vector>

namespace kvidx {

/// The C ABI's status codes as a scoped enum (same values; never renumbered).
enum class Errc : std::uint32_t {
  ok = KVIDX_OK,                               ///< Success.
  null_pointer = KVIDX_ERR_NULL_POINTER,       ///< A required pointer (or handle) was null.
  invalid_argument = KVIDX_ERR_INVALID_ARGUMENT,  ///< Bad enum/config value or inconsistent fields.
  buffer_too_small = KVIDX_ERR_BUFFER_TOO_SMALL,  ///< Never returned by the wrapper (it regrows).
  parent_not_found = KVIDX_ERR_PARENT_NOT_FOUND,  ///< Synchronous mode: a STORED was rejected.
  shut_down = KVIDX_ERR_SHUT_DOWN,             ///< The indexer's event threads are gone.
  panic = KVIDX_ERR_PANIC,                     ///< An internal bug was caught at the boundary.
  poisoned = KVIDX_ERR_POISONED,               ///< A panic happened earlier on this handle.
  malformed = KVIDX_ERR_MALFORMED,  ///< Engine payload is not a valid batch; nothing applied.
  too_large = KVIDX_ERR_TOO_LARGE,  ///< Engine payload above max_engine_payload; nothing applied.
#if defined(KVIDX_HAS_SNAPSHOTS)
  io = KVIDX_ERR_IO,  ///< A snapshot's stream (or file) failed; a restore left the indexer empty.
#endif
};

/// The outcome of a call that returns no value: Errc::ok or an error code.
class [[nodiscard]] Status {
 public:
  /// A successful status.
  constexpr Status() noexcept = default;
  /// A status holding `code`.
  constexpr explicit Status(Errc code) noexcept : code_(code) {}
  /// Maps a raw C status (any value, also unknown ones) to a Status.
  static constexpr Status from_c(kvidx_status code) noexcept {
    return Status(static_cast<Errc>(static_cast<std::uint32_t>(code)));
  }

  /// True when the call succeeded.
  [[nodiscard]] constexpr bool ok() const noexcept { return code_ == Errc::ok; }
  /// Same as ok().
  constexpr explicit operator bool() const noexcept { return ok(); }
  /// The status code.
  [[nodiscard]] constexpr Errc code() const noexcept { return code_; }
  /// A static, never-null English description (from kvidx_status_str).
  [[nodiscard]] const char* message() const noexcept {
    return kvidx_status_str(static_cast<std::uint32_t>(code_));
  }

  /// Statuses compare by code.
  friend constexpr bool operator==(Status a, Status b) noexcept { return a.code_ == b.code_; }
  /// Statuses compare by code.
  friend constexpr bool operator!=(Status a, Status b) noexcept { return a.code_ != b.code_; }
  /// A status equals the code it holds.
  friend constexpr bool operator==(Status a, Errc b) noexcept { return a.code_ == b; }
  /// A status differs from any other code.
  friend constexpr bool operator!=(Status a, Errc b) noexcept { return a.code_ != b; }

 private:
  Errc code_ = Errc::ok;
};

/// Either a value of type T or an error Status (never Errc::ok without a value).
///
/// Accessing value() of an error result is a precondition violation: it aborts the process
/// (the wrapper does not throw). Check ok() first, or use value_or().
template <class T>
class [[nodiscard]] Result {
 public:
  /// A successful result holding `value`.
  Result(T value) noexcept(std::is_nothrow_move_constructible_v<T>)  // NOLINT: implicit by design
      : value_(std::move(value)) {}
  /// A failed result; `error` must not be Errc::ok (it is mapped to Errc::invalid_argument).
  Result(Status error) noexcept  // NOLINT: implicit by design
      : status_(error.ok() ? Status(Errc::invalid_argument) : error) {}

  /// True when a value is held.
  [[nodiscard]] bool ok() const noexcept { return value_.has_value(); }
  /// Same as ok().
  explicit operator bool() const noexcept { return ok(); }
  /// Errc::ok when a value is held, else the error.
  [[nodiscard]] Status status() const noexcept { return status_; }

  /// The value; aborts if there is none.
  [[nodiscard]] T& value() & noexcept { return checked(), *value_; }
  /// The value; aborts if there is none.
  [[nodiscard]] const T& value() const& noexcept { return checked(), *value_; }
  /// The value, moved out; aborts if there is none.
  [[nodiscard]] T&& value() && noexcept { return checked(), std::move(*value_); }
  /// A copy of the value, or `fallback` on error.
  [[nodiscard]] T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }
  /// The value moved out, or `fallback` on error.
  [[nodiscard]] T value_or(T fallback) && {
    return ok() ? std::move(*value_) : std::move(fallback);
  }
  /// The value; aborts if there is none.
  [[nodiscard]] T& operator*() & noexcept { return value(); }
  /// The value; aborts if there is none.
  [[nodiscard]] const T& operator*() const& noexcept { return value(); }
  /// Member access to the value; aborts if there is none.
  [[nodiscard]] T* operator->() noexcept { return &value(); }
  /// Member access to the value; aborts if there is none.
  [[nodiscard]] const T* operator->() const noexcept { return &value(); }

 private:
  void checked() const noexcept {
    if (!value_) std::abort();
  }
  std::optional<T> value_;
  Status status_;
};

/// A non-owning view of `size` contiguous elements (a minimal std::span for C++17).
template <class T>
class Span {
 public:
  /// An empty view.
  constexpr Span() noexcept = default;
  /// A view of `size` elements at `data` (`data` may be null only when `size` is 0).
  constexpr Span(const T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  /// A view of a vector's elements.
  template <class A>
  Span(const std::vector<T, A>& v) noexcept : data_(v.data()), size_(v.size()) {}  // NOLINT
  /// A view of an array's elements.
  template <std::size_t N>
  constexpr Span(const std::array<T, N>& a) noexcept : data_(a.data()), size_(N) {}  // NOLINT
  /// A view of a C array's elements.
  template <std::size_t N>
  constexpr Span(const T (&a)[N]) noexcept : data_(a), size_(N) {}  // NOLINT

  /// First element (may be null when empty).
  [[nodiscard]] constexpr const T* data() const noexcept { return data_; }
  /// Number of elements.
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  /// True when there are no elements.
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }
  /// Iterator to the first element.
  [[nodiscard]] constexpr const T* begin() const noexcept { return data_; }
  /// Iterator past the last element.
  [[nodiscard]] constexpr const T* end() const noexcept { return data_ + size_; }
  /// Element `i` (no bounds check).
  [[nodiscard]] constexpr const T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  const T* data_ = nullptr;
  std::size_t size_ = 0;
};

/// One block of a STORED event: {local_hash, seq_hash} (the C struct itself).
using Block = kvidx_block;
/// One worker's match depth: {worker_id, dp_rank, depth} (the C struct itself).
using Match = kvidx_match;
/// Indexer counters (the C struct itself).
using Stats = kvidx_stats;
/// A non-owning event description (the C struct itself); build it with stored(), removed(),
/// cleared(). It points into the caller's arrays, which must outlive the apply call only.
using Event = kvidx_event;

/// A worker: (worker_id, dp_rank).
struct Worker {
  std::uint64_t id = 0;    ///< The engine's worker id.
  std::uint32_t rank = 0;  ///< The data-parallel rank.
  /// Workers compare by (id, rank).
  friend constexpr bool operator==(Worker a, Worker b) noexcept {
    return a.id == b.id && a.rank == b.rank;
  }
  /// Workers compare by (id, rank).
  friend constexpr bool operator!=(Worker a, Worker b) noexcept { return !(a == b); }
};

/// Index backends.
enum class Backend : std::uint32_t {
  positional = KVIDX_BACKEND_POSITIONAL,  ///< Per-position tables with exact jump search.
  radix = KVIDX_BACKEND_RADIX,            ///< The concurrent radix tree.
  runs = KVIDX_BACKEND_RUNS,              ///< The tree of runs of shared consecutive blocks (the default).
};

/// A STORED event: `blocks` continue `parent` (a seq hash the worker holds) or, when `parent`
/// is empty, start at position 0.
[[nodiscard]] inline Event stored(Worker worker, std::uint64_t event_id,
                                  std::optional<std::uint64_t> parent,
                                  Span<Block> blocks) noexcept {
  Event e{};
  e.kind = KVIDX_EVENT_STORED;
  e.worker_id = worker.id;
  e.dp_rank = worker.rank;
  e.event_id = event_id;
  e.has_parent = parent ? 1 : 0;
  e.parent_seq_hash = parent.value_or(0);
  e.blocks = blocks.data();
  e.num_blocks = blocks.size();
  return e;
}

/// A REMOVED event dropping the blocks named by `seq_hashes` from `worker`.
[[nodiscard]] inline Event removed(Worker worker, std::uint64_t event_id,
                                   Span<std::uint64_t> seq_hashes) noexcept {
  Event e{};
  e.kind = KVIDX_EVENT_REMOVED;
  e.worker_id = worker.id;
  e.dp_rank = worker.rank;
  e.event_id = event_id;
  e.seq_hashes = seq_hashes.data();
  e.num_seq_hashes = seq_hashes.size();
  return e;
}

/// A CLEARED event dropping every block of `worker`.
[[nodiscard]] inline Event cleared(Worker worker, std::uint64_t event_id) noexcept {
  Event e{};
  e.kind = KVIDX_EVENT_CLEARED;
  e.worker_id = worker.id;
  e.dp_rank = worker.rank;
  e.event_id = event_id;
  return e;
}

class Indexer;

/// A reusable output buffer of one find call's matches (type `T`), in the call's order. It
/// grows when a query has more matches than it can hold and keeps its capacity, so once warm
/// a query allocates nothing. MatchBuffer, TieredMatchBuffer and PredictedMatchBuffer are
/// its kinds.
template <typename T>
class BasicMatchBuffer {
 public:
  /// An empty buffer with room for `initial_capacity` matches.
  explicit BasicMatchBuffer(std::size_t initial_capacity = 64) : storage_(initial_capacity) {}

  /// Number of matches of the last successful query (0 after a failed one).
  [[nodiscard]] std::size_t size() const noexcept { return len_; }
  /// True when the last query matched no worker (or failed).
  [[nodiscard]] bool empty() const noexcept { return len_ == 0; }
  /// How many matches fit without growing.
  [[nodiscard]] std::size_t capacity() const noexcept { return storage_.size(); }
  /// The matches, in the call's order (deepest first).
  [[nodiscard]] const T* data() const noexcept { return storage_.data(); }
  /// Iterator to the first (deepest) match.
  [[nodiscard]] const T* begin() const noexcept { return storage_.data(); }
  /// Iterator past the last match.
  [[nodiscard]] const T* end() const noexcept { return storage_.data() + len_; }
  /// Match `i` (no bounds check).
  [[nodiscard]] const T& operator[](std::size_t i) const noexcept { return storage_[i]; }
  /// The matches as a view.
  [[nodiscard]] Span<T> view() const noexcept { return {storage_.data(), len_}; }
  /// Ensures room for `n` matches.
  void reserve(std::size_t n) {
    if (n > storage_.size()) storage_.resize(n);
  }
  /// Forgets the matches (keeps the capacity).
  void clear() noexcept { len_ = 0; }

 private:
  friend class Indexer;
  std::vector<T> storage_;
  std::size_t len_ = 0;
};

/// A reusable output buffer for find_matches.
class MatchBuffer : public BasicMatchBuffer<Match> {
 public:
  using BasicMatchBuffer<Match>::BasicMatchBuffer;
};

#if defined(KVIDX_HAS_TIERS)
/// Storage tiers, fastest first (KVIDX_TIER_*; same values). The first four index
/// TieredMatch::tier_depths.
enum class Tier : std::uint32_t {
  device = KVIDX_TIER_DEVICE,      ///< The accelerator's memory (GPU): where apply() puts blocks.
  host = KVIDX_TIER_HOST,          ///< Host memory (CPU DRAM).
  disk = KVIDX_TIER_DISK,          ///< Local disk.
  external = KVIDX_TIER_EXTERNAL,  ///< A remote or shared store.
  all = KVIDX_TIER_ALL,            ///< REMOVED and CLEARED only: every tier (as apply()).
};

/// Number of real tiers (entries of TieredMatch::tier_depths and of TierWeights).
inline constexpr std::size_t tier_count = 4;

/// One weight per tier for tiered_score(), indexed by Tier (e.g. {1.0, 0.8, 0.5, 0.2}).
using TierWeights = std::array<double, tier_count>;

/// One worker's answer to a tiered query (the C struct itself): worker_id, dp_rank, depth (the
/// depth find_matches reports: the prefix held on any tier) and tier_depths[t], the longest
/// prefix held on tier t or a faster one (never decreasing in t; tier_depths[3] == depth).
using TieredMatch = kvidx_tiered_match;

static_assert(std::is_standard_layout_v<TieredMatch> && std::is_trivially_copyable_v<TieredMatch>,
              "TieredMatch must stay the C struct");
static_assert(sizeof(TieredMatch) == 32 && alignof(TieredMatch) == alignof(std::uint64_t),
              "kvidx_tiered_match layout (ABI v1)");
static_assert(offsetof(TieredMatch, worker_id) == 0 && offsetof(TieredMatch, dp_rank) == 8 &&
                  offsetof(TieredMatch, depth) == 12 && offsetof(TieredMatch, tier_depths) == 16,
              "kvidx_tiered_match field offsets (ABI v1)");
static_assert(sizeof(TieredMatch::tier_depths) == tier_count * sizeof(std::uint32_t),
              "one depth per tier");
static_assert(sizeof(Tier) == sizeof(std::uint32_t) && alignof(Tier) == alignof(std::uint32_t),
              "a Tier array is passed to the C ABI as its uint32_t tier values");

/// The depth of `m` on tier `t` or a faster one (Tier::all: on any tier, i.e. m.depth).
[[nodiscard]] constexpr std::uint32_t tier_depth(const TieredMatch& m, Tier t) noexcept {
  const auto i = static_cast<std::uint32_t>(t);
  return i < tier_count ? m.tier_depths[i] : m.depth;
}

/// A reusable output buffer for find_matches_tiered (as MatchBuffer).
class TieredMatchBuffer : public BasicMatchBuffer<TieredMatch> {
 public:
  using BasicMatchBuffer<TieredMatch>::BasicMatchBuffer;
};

/// The weighted hit score of `m` (kvidx_tiered_score): each block of its prefix counts the
/// weight of the fastest tier it is on (weights[t] for Tier t). Routers compare workers by it.
[[nodiscard]] inline Result<double> tiered_score(const TieredMatch& m,
                                                 const TierWeights& weights) noexcept {
  double out = 0.0;
  const Status s = Status::from_c(kvidx_tiered_score(&m, weights.data(), &out));
  if (!s) return s;
  return out;
}
#endif  // KVIDX_HAS_TIERS

#if defined(KVIDX_HAS_PREDICTIONS)
/// The clock an indexer's predictions expire by (KVIDX_CLOCK_*; same values).
enum class Clock : std::uint32_t {
  monotonic = KVIDX_CLOCK_MONOTONIC,  ///< The system's monotonic clock (0: the indexer's creation).
  manual = KVIDX_CLOCK_MANUAL,        ///< Moves only by set_time() and advance_time().
};

/// How an indexer keeps predicted blocks (kvidx_prediction_config); the defaults are the
/// library's (64 MiB, no per-worker bound, the monotonic clock).
struct PredictionConfig {
  /// Bytes all predictions may take (PredictionStats::bytes); the least recently predicted
  /// blocks are dropped first to stay within it. 0 = the default (64 MiB).
  std::uint64_t max_bytes = 0;
  /// Predicted blocks each worker may hold, its least recently predicted dropped first
  /// beyond it (the event-free mode's stand-in for the engine's cache); 0 = no bound.
  std::uint64_t worker_capacity = 0;
  /// The clock predictions expire by.
  Clock clock = Clock::monotonic;

  /// The equivalent C settings.
  [[nodiscard]] kvidx_prediction_config to_c() const noexcept {
    kvidx_prediction_config c = kvidx_prediction_config_default();
    c.max_bytes = max_bytes;
    c.worker_capacity = worker_capacity;
    c.clock = static_cast<std::uint32_t>(clock);
    return c;
  }
};

/// One worker's answer to a predicted lookup (the C struct itself): worker_id, dp_rank, depth
/// (confirmed: what find_matches reports, 0 when the worker holds no prefix) and
/// predicted_depth (the longest prefix whose every block it holds within its confirmed depth
/// or is predicted to hold; >= depth, > 0).
using PredictedMatch = kvidx_predicted_match;

static_assert(std::is_standard_layout_v<PredictedMatch> &&
                  std::is_trivially_copyable_v<PredictedMatch>,
              "PredictedMatch must stay the C struct");
static_assert(sizeof(PredictedMatch) == 24 && offsetof(PredictedMatch, dp_rank) == 8 &&
                  offsetof(PredictedMatch, depth) == 12 &&
                  offsetof(PredictedMatch, predicted_depth) == 16,
              "kvidx_predicted_match layout (ABI v1)");

/// State and counters of an indexer's predictions (the C struct itself): blocks, workers,
/// bytes, dropped_for_bytes, dropped_for_capacity, expired, confirmed, dropped_by_events.
using PredictionStats = kvidx_prediction_stats;

/// A reusable output buffer for find_matches_predicted (as MatchBuffer).
class PredictedMatchBuffer : public BasicMatchBuffer<PredictedMatch> {
 public:
  using BasicMatchBuffer<PredictedMatch>::BasicMatchBuffer;
};
#endif  // KVIDX_HAS_PREDICTIONS

/// Library version string, e.g. "0.1.0".
[[nodiscard]] inline const char* version() noexcept { return kvidx_version(); }
/// The library's C ABI version (the header's KVIDX_ABI_VERSION when they agree).
[[nodiscard]] inline std::uint32_t abi_version() noexcept { return kvidx_abi_version(); }

/// Hashes `tokens` into one local hash per full block of `block_size` tokens (hashing
/// contract), written to `out` (resized to the number of full blocks).
[[nodiscard]] inline Status hash_tokens(Span<std::uint32_t> tokens, std::uint32_t block_size,
                                        std::vector<std::uint64_t>& out) {
  if (block_size == 0) return Status(Errc::invalid_argument);
  out.resize(tokens.size() / block_size);
  std::size_t len = 0;
  const Status s = Status::from_c(kvidx_hash_tokens(tokens.data(), tokens.size(), block_size,
                                                    out.data(), out.size(), &len));
  out.resize(s.ok() ? len : 0);
  return s;
}

/// Same as hash_tokens(tokens, block_size, out), returning a new vector.
[[nodiscard]] inline Result<std::vector<std::uint64_t>> hash_tokens(Span<std::uint32_t> tokens,
                                                                    std::uint32_t block_size) {
  std::vector<std::uint64_t> out;
  const Status s = hash_tokens(tokens, block_size, out);
  if (!s) return s;
  return out;
}

#if defined(KVIDX_HAS_NAMESPACES)
/// A request's namespace (docs/contract.md section 3.1): the LoRA adapter's name seeds every
/// block, the cache salt folds into the first block. Views of the caller's bytes; empty means
/// none, so a default Namespace hashes exactly like hash_tokens.
struct Namespace {
  std::string_view lora_name;   ///< The adapter's name as the engine publishes it.
  std::string_view cache_salt;  ///< The request's cache salt.
};

/// A multimodal item of a request: its identifier (the engine's mm_hash) and the token span
/// [start, end) of its placeholder tokens; it folds into every block the span overlaps.
struct MultimodalSpan {
  std::string_view identifier;  ///< The item's identifier bytes (a view).
  std::uint64_t start = 0;      ///< Index of the item's first token.
  std::uint64_t end = 0;        ///< Index one past its last token.
};

/// Hashes a request into one local hash per full block of `block_size` tokens under its
/// namespace and multimodal spans (docs/contract.md section 3.1), written to `out` (resized
/// to the number of full blocks): what a router queries with to reach exactly the blocks
/// engines stored for the same adapter, salt and inputs.
[[nodiscard]] inline Status hash_request(Span<std::uint32_t> tokens, std::uint32_t block_size,
                                         const Namespace& ns, Span<MultimodalSpan> spans,
                                         std::vector<std::uint64_t>& out) {
  if (block_size == 0) return Status(Errc::invalid_argument);
  const auto bytes = [](std::string_view v) {
    return reinterpret_cast<const std::uint8_t*>(v.data());
  };
  const kvidx_namespace c_ns{bytes(ns.lora_name), ns.lora_name.size(), bytes(ns.cache_salt),
                             ns.cache_salt.size()};
  std::vector<kvidx_mm_span> c_spans;
  c_spans.reserve(spans.size());
  for (const MultimodalSpan& m : spans) {
    c_spans.push_back(kvidx_mm_span{bytes(m.identifier), m.identifier.size(), m.start, m.end});
  }
  out.resize(tokens.size() / block_size);
  std::size_t len = 0;
  const Status s = Status::from_c(kvidx_hash_request(tokens.data(), tokens.size(), block_size,
                                                     &c_ns, c_spans.data(), c_spans.size(),
                                                     out.data(), out.size(), &len));
  out.resize(s.ok() ? len : 0);
  return s;
}

/// Same as hash_request(tokens, block_size, ns, spans, out), returning a new vector.
[[nodiscard]] inline Result<std::vector<std::uint64_t>> hash_request(
    Span<std::uint32_t> tokens, std::uint32_t block_size, const Namespace& ns,
    Span<MultimodalSpan> spans = {}) {
  std::vector<std::uint64_t> out;
  const Status s = hash_request(tokens, block_size, ns, spans, out);
  if (!s) return s;
  return out;
}
#endif  // KVIDX_HAS_NAMESPACES

/// Computes the sequence hash chain of `local_hashes` (hashing contract) into `out`
/// (resized to the same length).
[[nodiscard]] inline Status seq_hashes(Span<std::uint64_t> local_hashes,
                                       std::vector<std::uint64_t>& out) {
  out.resize(local_hashes.size());
  const Status s =
      Status::from_c(kvidx_seq_hashes(local_hashes.data(), local_hashes.size(), out.data()));
  if (!s) out.clear();
  return s;
}

/// Same as seq_hashes(local_hashes, out), returning a new vector.
[[nodiscard]] inline Result<std::vector<std::uint64_t>> seq_hashes(
    Span<std::uint64_t> local_hashes) {
  std::vector<std::uint64_t> out;
  const Status s = seq_hashes(local_hashes, out);
  if (!s) return s;
  return out;
}

/// Indexer settings (kvidx_config plus kvidx_queue_limits); the defaults are the library's
/// (kvidx_config_default, kvidx_queue_limits_default). Out-of-range values make
/// Indexer::create return Errc::invalid_argument.
struct Config {
  Backend backend;              ///< Which index backend.
  std::uint32_t event_threads;  ///< 0: events applied synchronously on the caller's thread.
  std::uint32_t jump_size;      ///< Positional backend; 0 = the library's default.
  /// Events each event thread may have queued before apply calls block; 0 = the default
  /// (4096); at most 1048576.
  std::uint64_t queue_capacity = 0;
  /// Bytes of queued work each event thread may hold before apply calls block; 0 = the
  /// default (32 MiB). An event larger than the budget is still accepted on its own.
  std::uint64_t queue_bytes = 0;
#if defined(KVIDX_HAS_PREDICTIONS)
  /// How the indexer keeps predicted blocks (Indexer::predict).
  PredictionConfig predictions{};
#endif

  /// The library's defaults.
  Config() noexcept : Config(kvidx_config_default()) {}
  /// Settings taken from a C config (default queue limits).
  explicit Config(const kvidx_config& c) noexcept
      : backend(static_cast<Backend>(c.backend)),
        event_threads(c.event_threads),
        jump_size(c.jump_size) {}
  /// Settings taken from a C config and C queue limits.
  Config(const kvidx_config& c, const kvidx_queue_limits& limits) noexcept : Config(c) {
    queue_capacity = limits.queue_capacity;
    queue_bytes = limits.queue_bytes;
  }
  /// The equivalent C config.
  [[nodiscard]] kvidx_config to_c() const noexcept {
    kvidx_config c{};
    c.backend = static_cast<std::uint32_t>(backend);
    c.event_threads = event_threads;
    c.jump_size = jump_size;
    return c;
  }
  /// The equivalent C queue limits.
  [[nodiscard]] kvidx_queue_limits limits_to_c() const noexcept {
    kvidx_queue_limits l = kvidx_queue_limits_default();
    l.queue_capacity = queue_capacity;
    l.queue_bytes = queue_bytes;
    return l;
  }
};

/// The wire formats of engine KV event payloads (KVIDX_ENGINE_*).
enum class EngineFormat : std::uint32_t {
  vllm = KVIDX_ENGINE_VLLM,      ///< vLLM, every generation (tagged arrays and tagged maps).
  sglang = KVIDX_ENGINE_SGLANG,  ///< SGLang (its own field positions; signed hashes).
  trtllm = KVIDX_ENGINE_TRTLLM,  ///< TensorRT-LLM's vLLM-compatible ZMQ publisher.
};

/// How a batch's sequence number relates to its publisher's previous one (KVIDX_SEQ_*).
enum class SeqStatus : std::uint32_t {
  untracked = KVIDX_SEQ_UNTRACKED,  ///< No sequence frame was given.
  first = KVIDX_SEQ_FIRST,          ///< The first batch seen from this publisher.
  in_order = KVIDX_SEQ_IN_ORDER,    ///< The expected next batch.
  gap = KVIDX_SEQ_GAP,              ///< Batches seq_expected.. were missed (batches_missed).
  restart = KVIDX_SEQ_RESTART,      ///< The sequence went backwards: the publisher restarted.
};

/// Options of an EngineFeed (KVIDX_FEED_*); combine them with `|`. FeedFlags::none is the
/// recommended reaction without a replay socket: clear the worker on gaps and restarts, index
/// the GPU medium and KV-cache group 0 only, index stores whose engine hashes have a cache salt
/// or multimodal keys under their namespace (hash_request).
enum class FeedFlags : std::uint32_t {
  none = 0,                                              ///< The defaults above.
  no_clear_on_gap = KVIDX_FEED_NO_CLEAR_ON_GAP,          ///< The caller replays missed batches.
  no_clear_on_restart = KVIDX_FEED_NO_CLEAR_ON_RESTART,  ///< Keep the worker on a restart.
  all_media = KVIDX_FEED_ALL_MEDIA,                      ///< Index every medium, not only GPU.
  all_groups = KVIDX_FEED_ALL_GROUPS,                    ///< Index every KV-cache group.
  hash_tokens_only = KVIDX_FEED_HASH_TOKENS_ONLY,  ///< Index stores with extra keys by tokens.
#if defined(KVIDX_HAS_TIERS)
  /// With all_media: a medium the decoder does not know is on Tier::device (default: external).
  /// At most one unknown_medium_* flag.
  unknown_medium_device = KVIDX_FEED_UNKNOWN_MEDIUM_DEVICE,
  unknown_medium_host = KVIDX_FEED_UNKNOWN_MEDIUM_HOST,  ///< ... is on Tier::host.
  unknown_medium_disk = KVIDX_FEED_UNKNOWN_MEDIUM_DISK,  ///< ... is on Tier::disk.
#endif
#if defined(KVIDX_HAS_NAMESPACES)
  /// Skip every store with extra keys instead of indexing it under its namespace (not with
  /// hash_tokens_only).
  skip_extras = KVIDX_FEED_SKIP_EXTRAS,
#endif
};
/// The union of two flag sets.
[[nodiscard]] constexpr FeedFlags operator|(FeedFlags a, FeedFlags b) noexcept {
  return static_cast<FeedFlags>(static_cast<std::uint32_t>(a) | static_cast<std::uint32_t>(b));
}
/// The intersection of two flag sets (test a flag with `(flags & f) == f`).
[[nodiscard]] constexpr FeedFlags operator&(FeedFlags a, FeedFlags b) noexcept {
  return static_cast<FeedFlags>(static_cast<std::uint32_t>(a) & static_cast<std::uint32_t>(b));
}

/// `dp_rank` argument of the engine calls: take the rank from the batch's envelope (0 when the
/// envelope has none).
inline constexpr std::uint32_t dp_rank_from_batch = KVIDX_DP_RANK_FROM_BATCH;

/// The largest engine payload accepted, in bytes (KVIDX_ENGINE_MAX_PAYLOAD); a larger one is
/// Errc::too_large.
inline constexpr std::size_t max_engine_payload = KVIDX_ENGINE_MAX_PAYLOAD;

/// The 8-byte big-endian sequence frame engines send before each payload, for a known number.
[[nodiscard]] constexpr std::array<std::uint8_t, 8> seq_frame(std::uint64_t seq) noexcept {
  std::array<std::uint8_t, 8> frame{};
  for (std::size_t i = 0; i < frame.size(); ++i) {
    frame[i] = static_cast<std::uint8_t>(seq >> (56 - 8 * i));
  }
  return frame;
}

/// What applying one engine batch did: the C struct kvidx_engine_batch_result (every field:
/// events_decoded, events_submitted, events_rejected, skipped_*, seq_expected, batches_missed,
/// dp_rank, seq_status, worker_cleared) plus typed accessors.
struct EngineBatchResult : kvidx_engine_batch_result {
  /// All counters zero, SeqStatus::untracked.
  EngineBatchResult() noexcept : kvidx_engine_batch_result{} {}
  /// A copy of a C result.
  explicit EngineBatchResult(const kvidx_engine_batch_result& c) noexcept
      : kvidx_engine_batch_result(c) {}
  /// seq_status as an enum.
  [[nodiscard]] SeqStatus seq() const noexcept { return static_cast<SeqStatus>(seq_status); }
  /// True when the worker was cleared before the batch (the gap or restart reaction).
  [[nodiscard]] bool cleared() const noexcept { return worker_cleared != 0; }
};

/// Counters of an EngineFeed (the C struct itself).
using EngineStats = kvidx_engine_stats;
#if defined(KVIDX_HAS_FEED_START)
/// Counters of a feed's publishers first seen above sequence 0 ("missed from the start"):
/// late_starts, batches_missed_from_start.
using EngineStartStats = kvidx_engine_start_stats;
#endif  // KVIDX_HAS_FEED_START

#if defined(KVIDX_HAS_HASH_CHECK)
/// How an engine hashes its blocks, for EngineFeed::set_hash_check (kvidx_hash_algorithm).
enum class HashAlgorithm : std::uint32_t {
  vllm_sha256_cbor = KVIDX_HASH_VLLM_SHA256_CBOR,  ///< vLLM --prefix-caching-hash-algo sha256_cbor
  vllm_xxhash_cbor = KVIDX_HASH_VLLM_XXHASH_CBOR,  ///< vLLM --prefix-caching-hash-algo xxhash_cbor
  sglang_sha256 = KVIDX_HASH_SGLANG_SHA256,        ///< SGLang 0.5.23's per-page SHA-256 chain
};
/// The seed vLLM 0.33 derives NONE_HASH from for the sha256 algorithms when PYTHONHASHSEED
/// is unset.
inline constexpr std::string_view vllm_default_seed = "vllm-none-hash";
/// A hash check's counts of blocks: matched, mismatched, unverifiable (the C struct).
using HashCheckStats = kvidx_hash_check_stats;
#endif  // KVIDX_HAS_HASH_CHECK

#if defined(KVIDX_HAS_LLMD_KEYS)
/// llm-d's request keys of each full block of `block_size` tokens (FNV-64a over the canonical
/// CBOR of [parent, block tokens, null], chained from the root key of `model` under llm-d's
/// hash `seed`). Query an index fed through EngineFeed::set_llmd_keys with them.
[[nodiscard]] inline Result<std::vector<std::uint64_t>> llmd_request_keys(
    Span<std::uint32_t> tokens, std::uint32_t block_size, std::string_view seed,
    std::string_view model) {
  if (block_size == 0) return Status(Errc::invalid_argument);
  std::vector<std::uint64_t> out(tokens.size() / block_size);
  std::size_t len = 0;
  const Status s = Status::from_c(kvidx_llmd_request_keys(
      tokens.data(), tokens.size(), block_size, reinterpret_cast<const std::uint8_t*>(seed.data()),
      seed.size(), reinterpret_cast<const std::uint8_t*>(model.data()), model.size(), out.data(),
      out.size(), &len));
  if (!s) return s;
  out.resize(len);
  return out;
}
#endif  // KVIDX_HAS_LLMD_KEYS

#if defined(KVIDX_HAS_SNAPSHOTS)
/// Offset batch counters: {batches_applied, batches_skipped, events_skipped} (the C struct).
using ReplicaStats = kvidx_replica_stats;
/// What a snapshot holds: {workers, blocks, bytes, min_watermark, max_watermark} (the C struct).
using SnapshotInfo = kvidx_snapshot_info;
#endif

/// An index of cached KV blocks across workers. Move-only; owns its C handle.
class Indexer {
 public:
  /// Creates an indexer with `config` (kvidx_new_with_predictions; kvidx_new_with_limits
  /// before KVIDX_HAS_PREDICTIONS). Errc::invalid_argument for any setting out of range.
  [[nodiscard]] static Result<Indexer> create(const Config& config = Config()) noexcept {
    const kvidx_config c = config.to_c();
    const kvidx_queue_limits l = config.limits_to_c();
    kvidx_indexer* raw = nullptr;
#if defined(KVIDX_HAS_PREDICTIONS)
    const kvidx_prediction_config p = config.predictions.to_c();
    const Status s = Status::from_c(kvidx_new_with_predictions(&c, &l, &p, &raw));
#else
    const Status s = Status::from_c(kvidx_new_with_limits(&c, &l, &raw));
#endif
    if (!s) return s;
    return Indexer(raw);
  }

  /// Takes ownership of a handle from kvidx_new (or null).
  explicit Indexer(kvidx_indexer* owned) noexcept : handle_(owned) {}
  /// Not copyable: one owner per handle.
  Indexer(const Indexer&) = delete;
  /// Not copyable: one owner per handle.
  Indexer& operator=(const Indexer&) = delete;
  /// Moves the handle; `other` is left empty.
  Indexer(Indexer&&) noexcept = default;
  /// Frees the current handle (joining its event threads) and takes `other`'s.
  Indexer& operator=(Indexer&&) noexcept = default;
  /// Frees the handle (joining its event threads).
  ~Indexer() = default;

  /// True when this object holds a handle (false after being moved from).
  [[nodiscard]] bool valid() const noexcept { return handle_ != nullptr; }
  /// Same as valid().
  explicit operator bool() const noexcept { return valid(); }
  /// The C handle, still owned by this object (for calls the wrapper does not cover).
  [[nodiscard]] kvidx_indexer* native_handle() const noexcept { return handle_.get(); }
  /// Gives up ownership of the C handle; the caller must kvidx_free it.
  [[nodiscard]] kvidx_indexer* release() noexcept { return handle_.release(); }

  /// Applies (synchronous mode) or queues (event threads) one event.
  [[nodiscard]] Status apply(const Event& event) const noexcept {
    return Status::from_c(kvidx_apply_event(handle_.get(), &event));
  }
  /// Applies or queues events in order; if any is malformed, none is applied (C ABI rules).
  /// A worker's consecutive events are applied a few per change (cheaper than one by one).
  [[nodiscard]] Status apply(Span<Event> events) const noexcept {
    return Status::from_c(kvidx_apply_events(handle_.get(), events.data(), events.size()));
  }
  /// Pointer + size form of apply(Span<Event>).
  [[nodiscard]] Status apply(const Event* events, std::size_t n) const noexcept {
    return apply(Span<Event>(events, n));
  }
  /// Drops and forgets every dp_rank of worker `worker_id` (ordered after its queued events).
  [[nodiscard]] Status remove_worker(std::uint64_t worker_id) const noexcept {
    return Status::from_c(kvidx_remove_worker(handle_.get(), worker_id));
  }
  /// Drops and forgets one (worker_id, dp_rank).
  [[nodiscard]] Status remove_worker(Worker worker) const noexcept {
    return Status::from_c(kvidx_remove_worker_dp_rank(handle_.get(), worker.id, worker.rank));
  }
  /// Barrier: returns once every event accepted before the call is applied.
  [[nodiscard]] Status flush() const noexcept { return Status::from_c(kvidx_flush(handle_.get())); }

  /// Finds, per worker, the depth of the longest prefix of `local_hashes` it holds, into `out`
  /// (deepest first, then worker id, then dp_rank). Grows `out` if needed and retries, so the
  /// call allocates only while `out` is still too small. On error `out` is empty.
  [[nodiscard]] Status find_matches(Span<std::uint64_t> local_hashes, MatchBuffer& out) const {
    return find_into(kvidx_find_matches, local_hashes, out);
  }
  /// Pointer + size form of find_matches(Span, MatchBuffer&).
  [[nodiscard]] Status find_matches(const std::uint64_t* local_hashes, std::size_t n,
                                    MatchBuffer& out) const {
    return find_matches(Span<std::uint64_t>(local_hashes, n), out);
  }
  /// Convenience form returning a new vector (allocates on every call; not for the hot path).
  [[nodiscard]] Result<std::vector<Match>> find_matches(Span<std::uint64_t> local_hashes) const {
    MatchBuffer buf(16);
    const Status s = find_matches(local_hashes, buf);
    if (!s) return s;
    return std::vector<Match>(buf.begin(), buf.end());
  }

#if defined(KVIDX_HAS_TIERS)
  /// Like apply(event), on storage tier `tier`: a STORED puts its blocks on `tier` (a block
  /// the worker already holds gains it); a REMOVED takes `tier` off each named block, which
  /// stays held while it is on another tier (Tier::all: every tier, as apply(); a name not on
  /// `tier` counts in Stats::unknown_removals); a CLEARED drops every tier.
  /// Errc::invalid_argument for an unknown tier or Tier::all on a STORED (nothing applied).
  [[nodiscard]] Status apply_event_on_tier(const Event& event, Tier tier) const noexcept {
    return Status::from_c(
        kvidx_apply_event_on_tier(handle_.get(), &event, static_cast<std::uint32_t>(tier)));
  }
  /// Applies or queues events in order, events[i] on tiers[i]. Every event and tier is
  /// checked first: if one is malformed, none is applied (C ABI rules). Errc::invalid_argument,
  /// without calling the library, when the two spans differ in size.
  [[nodiscard]] Status apply_events_on_tiers(Span<Event> events,
                                             Span<Tier> tiers) const noexcept {
    if (events.size() != tiers.size()) return Status(Errc::invalid_argument);
    // Tier's fixed underlying type is uint32_t (same size and alignment, asserted above): the
    // library reads the array as the uint32_t tier values it expects.
    return Status::from_c(kvidx_apply_events_on_tiers(
        handle_.get(), events.data(), reinterpret_cast<const std::uint32_t*>(tiers.data()),
        events.size()));
  }
  /// Same as apply_events_on_tiers(Span<Event>, Span<Tier>), with raw KVIDX_TIER_* values.
  [[nodiscard]] Status apply_events_on_tiers(Span<Event> events,
                                             Span<std::uint32_t> tiers) const noexcept {
    if (events.size() != tiers.size()) return Status(Errc::invalid_argument);
    return Status::from_c(
        kvidx_apply_events_on_tiers(handle_.get(), events.data(), tiers.data(), events.size()));
  }
  /// Pointer + size form of apply_events_on_tiers: `n` events and `n` tiers.
  [[nodiscard]] Status apply_events_on_tiers(const Event* events, const Tier* tiers,
                                             std::size_t n) const noexcept {
    return apply_events_on_tiers(Span<Event>(events, n), Span<Tier>(tiers, n));
  }

  /// Like find_matches, with each worker's depth per tier (the same workers, depths and
  /// order), into `out`. Grows `out` if needed and retries, so the call allocates only while
  /// `out` is still too small. On error `out` is empty.
  [[nodiscard]] Status find_matches_tiered(Span<std::uint64_t> local_hashes,
                                           TieredMatchBuffer& out) const {
    return find_into(kvidx_find_matches_tiered, local_hashes, out);
  }
  /// Pointer + size form of find_matches_tiered(Span, TieredMatchBuffer&).
  [[nodiscard]] Status find_matches_tiered(const std::uint64_t* local_hashes, std::size_t n,
                                           TieredMatchBuffer& out) const {
    return find_matches_tiered(Span<std::uint64_t>(local_hashes, n), out);
  }
  /// Convenience form returning a new vector (allocates on every call; not for the hot path).
  [[nodiscard]] Result<std::vector<TieredMatch>> find_matches_tiered(
      Span<std::uint64_t> local_hashes) const {
    TieredMatchBuffer buf(16);
    const Status s = find_matches_tiered(local_hashes, buf);
    if (!s) return s;
    return std::vector<TieredMatch>(buf.begin(), buf.end());
  }
#endif  // KVIDX_HAS_TIERS

#if defined(KVIDX_HAS_PREDICTIONS)
  /// Credits `worker` with the chain of `local_hashes` (a request's blocks from its first) for
  /// `ttl` from now on the indexer's clock (kvidx_predict): until then, or until events settle
  /// it, find_matches_predicted counts these blocks for the worker; find_matches never sees
  /// them. A STORED of the worker holding a predicted block confirms it (the prediction is
  /// dropped); a REMOVED of it, a CLEARED of the worker and its removal drop it. Applied
  /// before returning, even with event threads, within the PredictionConfig bounds. An empty
  /// chain or a zero ttl credits nothing; a negative ttl is Errc::invalid_argument.
  [[nodiscard]] Status predict(Worker worker, Span<std::uint64_t> local_hashes,
                               std::chrono::nanoseconds ttl) const noexcept {
    if (ttl.count() < 0) return Status(Errc::invalid_argument);
    return Status::from_c(kvidx_predict(handle_.get(), worker.id, worker.rank,
                                        local_hashes.data(), local_hashes.size(),
                                        static_cast<std::uint64_t>(ttl.count())));
  }

  /// The workers holding or predicted to hold a prefix of `local_hashes`, with both depths,
  /// into `out`: every worker of find_matches with the same confirmed depth, and every worker
  /// predicted to hold the first block; by predicted depth, deepest first, then confirmed
  /// depth, then worker id and dp_rank. Grows `out` as find_matches does; on error `out` is
  /// empty. With no prediction held it costs what find_matches costs.
  [[nodiscard]] Status find_matches_predicted(Span<std::uint64_t> local_hashes,
                                              PredictedMatchBuffer& out) const {
    return find_into(kvidx_find_matches_predicted, local_hashes, out);
  }
  /// Convenience form returning a new vector (allocates on every call; not for the hot path).
  [[nodiscard]] Result<std::vector<PredictedMatch>> find_matches_predicted(
      Span<std::uint64_t> local_hashes) const {
    PredictedMatchBuffer buf(16);
    const Status s = find_matches_predicted(local_hashes, buf);
    if (!s) return s;
    return std::vector<PredictedMatch>(buf.begin(), buf.end());
  }

  /// The time on the indexer's clock: since its creation (monotonic) or as last set (manual).
  [[nodiscard]] Result<std::chrono::nanoseconds> now() const noexcept {
    std::uint64_t ns = 0;
    const Status s = Status::from_c(kvidx_now(handle_.get(), &ns));
    if (!s) return s;
    constexpr auto most = static_cast<std::uint64_t>(std::chrono::nanoseconds::max().count());
    return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(std::min(ns, most)));
  }
  /// Sets a manual clock to `now`. Errc::invalid_argument with the monotonic clock, for a
  /// time before the clock's current one (it never goes back) or a negative one.
  [[nodiscard]] Status set_time(std::chrono::nanoseconds now) const noexcept {
    if (now.count() < 0) return Status(Errc::invalid_argument);
    return Status::from_c(kvidx_set_time(handle_.get(), static_cast<std::uint64_t>(now.count())));
  }
  /// Moves a manual clock forward by `by`. Errc::invalid_argument with the monotonic clock or
  /// for a negative `by`.
  [[nodiscard]] Status advance_time(std::chrono::nanoseconds by) const noexcept {
    if (by.count() < 0) return Status(Errc::invalid_argument);
    return Status::from_c(
        kvidx_advance_time(handle_.get(), static_cast<std::uint64_t>(by.count())));
  }
  /// The state and counters of the indexer's predictions.
  [[nodiscard]] Result<PredictionStats> prediction_stats() const noexcept {
    PredictionStats st{};
    const Status s = Status::from_c(kvidx_get_prediction_stats(handle_.get(), &st));
    if (!s) return s;
    return st;
  }
#endif  // KVIDX_HAS_PREDICTIONS

  /// Decodes one engine payload (the last frame of the engine's ZMQ message) completely, then
  /// applies its events to (worker_id, dp_rank); pass dp_rank_from_batch for the envelope's
  /// rank. No sequence tracking (see EngineFeed); GPU medium and KV-cache group 0 only.
  /// Errc::malformed: the bytes are not a batch of `format`; Errc::too_large: more than
  /// max_engine_payload bytes (nothing was applied either way); Errc::invalid_argument:
  /// unknown format. In synchronous mode a STORED whose parent is
  /// missing is counted in events_rejected and the call still succeeds.
  [[nodiscard]] Result<EngineBatchResult> apply_engine_batch(EngineFormat format,
                                                            std::uint64_t worker_id,
                                                            std::uint32_t dp_rank,
                                                            Span<std::uint8_t> payload) const noexcept {
    kvidx_engine_batch_result r{};
    const Status s = Status::from_c(
        kvidx_apply_engine_batch(handle_.get(), static_cast<std::uint32_t>(format), worker_id,
                                 dp_rank, payload.data(), payload.size(), &r));
    if (!s) return s;
    return EngineBatchResult(r);
  }

  /// The indexer's counters (call flush() first to see queued events' outcomes).
  [[nodiscard]] Result<Stats> stats() const noexcept {
    Stats st{};
    const Status s = Status::from_c(kvidx_get_stats(handle_.get(), &st));
    if (!s) return s;
    return st;
  }

#if defined(KVIDX_HAS_SNAPSHOTS)
  /// Applies or queues `events` as offset batches: each worker named gets its events (in
  /// order) as one batch at `offset` (>= 1), skipped whole when `offset` is at or below the
  /// worker's watermark, else applied under one hold of the worker's lock (the watermark
  /// becomes `offset`). Errc::invalid_argument for offset 0 or a malformed event (nothing
  /// applied); synchronous mode: Errc::parent_not_found when a STORED was rejected.
  [[nodiscard]] Status apply_events_at(Span<Event> events, std::uint64_t offset) const noexcept {
    return Status::from_c(
        kvidx_apply_events_at(handle_.get(), events.data(), events.size(), offset));
  }
  /// Pointer + size form of apply_events_at(Span<Event>, offset).
  [[nodiscard]] Status apply_events_at(const Event* events, std::size_t n,
                                       std::uint64_t offset) const noexcept {
    return apply_events_at(Span<Event>(events, n), offset);
  }
  /// The worker's watermark: the offset of the last batch applied to it (or restored), 0 when
  /// unknown or none. With event threads, flush() first.
  [[nodiscard]] Result<std::uint64_t> watermark(Worker worker) const noexcept {
    std::uint64_t w = 0;
    const Status s = Status::from_c(kvidx_watermark(handle_.get(), worker.id, worker.rank, &w));
    if (!s) return s;
    return w;
  }
  /// The offset batch counters (flush() first with event threads).
  [[nodiscard]] Result<ReplicaStats> replica_stats() const noexcept {
    ReplicaStats st{};
    const Status s = Status::from_c(kvidx_get_replica_stats(handle_.get(), &st));
    if (!s) return s;
    return st;
  }
  /// apply_engine_batch() as one offset batch at `offset` (see apply_events_at()).
  [[nodiscard]] Result<EngineBatchResult> apply_engine_batch_at(
      EngineFormat format, std::uint64_t worker_id, std::uint32_t dp_rank,
      Span<std::uint8_t> payload, std::uint64_t offset) const noexcept {
    kvidx_engine_batch_result r{};
    const Status s = Status::from_c(kvidx_apply_engine_batch_at(
        handle_.get(), static_cast<std::uint32_t>(format), worker_id, dp_rank, payload.data(),
        payload.size(), offset, &r));
    if (!s) return s;
    return EngineBatchResult(r);
  }

  /// Writes a snapshot of the index to `out` while events keep being applied (flush() first
  /// with event threads to include everything accepted). Errc::io when `out` fails (its
  /// badbit or failbit set by a write); an exception thrown by `out` is rethrown after the
  /// library call returns.
  [[nodiscard]] Result<SnapshotInfo> write_snapshot(std::ostream& out) const {
    StreamContext<std::ostream> ctx{out, nullptr};
    SnapshotInfo info{};
    const Status s =
        Status::from_c(kvidx_snapshot_write(handle_.get(), &Indexer::sink, &ctx, &info));
    if (ctx.error) std::rethrow_exception(ctx.error);
    if (!s) return s;
    return info;
  }
  /// Restores a snapshot read from `in` into this indexer, which must be empty
  /// (Errc::invalid_argument otherwise). Errc::malformed for input that is not a valid
  /// snapshot, Errc::io when `in` fails (badbit); either way the indexer is left empty and
  /// usable. An exception thrown by `in` is rethrown after the library call returns.
  [[nodiscard]] Result<SnapshotInfo> restore_snapshot(std::istream& in) const {
    StreamContext<std::istream> ctx{in, nullptr};
    SnapshotInfo info{};
    const Status s =
        Status::from_c(kvidx_snapshot_restore(handle_.get(), &Indexer::source, &ctx, &info));
    if (ctx.error) std::rethrow_exception(ctx.error);
    if (!s) return s;
    return info;
  }
#endif  // KVIDX_HAS_SNAPSHOTS

 private:
#if defined(KVIDX_HAS_SNAPSHOTS)
  /// A stream and the exception it threw, for the snapshot callbacks.
  template <class Stream>
  struct StreamContext {
    Stream& stream;
    std::exception_ptr error;
  };
  /// The largest chunk one stream call takes (std::streamsize is signed).
  static constexpr std::size_t max_chunk() noexcept {
    return static_cast<std::size_t>(std::numeric_limits<std::streamsize>::max());
  }
  /// kvidx_snapshot_sink over a std::ostream; no exception crosses the library.
  static std::int32_t sink(void* user, const std::uint8_t* data, std::size_t len) noexcept {
    auto* ctx = static_cast<StreamContext<std::ostream>*>(user);
    try {
      while (len > 0) {
        const std::size_t n = std::min(len, max_chunk());
        ctx->stream.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
        if (!ctx->stream) return 1;
        data += n;
        len -= n;
      }
      return 0;
    } catch (...) {
      ctx->error = std::current_exception();
      return 1;
    }
  }
  /// kvidx_snapshot_source over a std::istream: the end of the stream is the end of input.
  static std::int32_t source(void* user, std::uint8_t* buf, std::size_t cap,
                             std::size_t* got) noexcept {
    auto* ctx = static_cast<StreamContext<std::istream>*>(user);
    *got = 0;
    try {
      if (ctx->stream.eof()) return 0;
      if (!ctx->stream) return 1;
      const std::size_t n = std::min(cap, max_chunk());
      ctx->stream.read(reinterpret_cast<char*>(buf), static_cast<std::streamsize>(n));
      *got = static_cast<std::size_t>(ctx->stream.gcount());
      if (ctx->stream.bad()) return 1;
      return 0;  // a short read at the end sets eofbit (and failbit): the next call ends
    } catch (...) {
      ctx->error = std::current_exception();
      return 1;
    }
  }
#endif  // KVIDX_HAS_SNAPSHOTS

  /// Runs a find call of the C ABI into `out`, growing it and calling again while the answer
  /// does not fit; on error `out` is empty.
  template <typename CFind, typename Buffer>
  [[nodiscard]] Status find_into(CFind find, Span<std::uint64_t> local_hashes,
                                 Buffer& out) const {
    for (;;) {
      std::size_t len = 0;
      const kvidx_status s = find(handle_.get(), local_hashes.data(), local_hashes.size(),
                                  out.storage_.data(), out.storage_.size(), &len);
      if (s == KVIDX_OK) {
        out.len_ = len;
        return Status();
      }
      out.len_ = 0;
      if (s != KVIDX_ERR_BUFFER_TOO_SMALL || len <= out.storage_.size()) {
        return Status::from_c(s);
      }
      // Matches may grow between the two calls (concurrent writers): leave some slack.
      out.storage_.resize(len + len / 4 + 8);
    }
  }

  struct Deleter {
    void operator()(kvidx_indexer* p) const noexcept { kvidx_free(p); }
  };
  std::unique_ptr<kvidx_indexer, Deleter> handle_;
};

/// Applies engine payloads with per-publisher (worker_id, dp_rank) tracking of the batch
/// sequence, reacting to gaps and restarts as its FeedFlags say, and keeps counters.
/// Move-only; owns its kvidx_engine_feed. One feed serves any number of indexers and
/// publishers; calls on one feed are serialised by the library.
class EngineFeed {
 public:
  /// Creates a feed for one wire format. Errc::invalid_argument: unknown format or flag bit.
  [[nodiscard]] static Result<EngineFeed> create(EngineFormat format,
                                                 FeedFlags flags = FeedFlags::none) noexcept {
    kvidx_engine_feed* raw = nullptr;
    const Status s = Status::from_c(kvidx_engine_feed_new(static_cast<std::uint32_t>(format),
                                                          static_cast<std::uint32_t>(flags), &raw));
    if (!s) return s;
    return EngineFeed(raw);
  }

  /// Takes ownership of a feed from kvidx_engine_feed_new (or null).
  explicit EngineFeed(kvidx_engine_feed* owned) noexcept : handle_(owned) {}
  /// Not copyable: one owner per feed.
  EngineFeed(const EngineFeed&) = delete;
  /// Not copyable: one owner per feed.
  EngineFeed& operator=(const EngineFeed&) = delete;
  /// Moves the feed; `other` is left empty.
  EngineFeed(EngineFeed&&) noexcept = default;
  /// Frees the current feed and takes `other`'s.
  EngineFeed& operator=(EngineFeed&&) noexcept = default;
  /// Frees the feed.
  ~EngineFeed() = default;

  /// True when this object holds a feed (false after being moved from).
  [[nodiscard]] bool valid() const noexcept { return handle_ != nullptr; }
  /// Same as valid().
  explicit operator bool() const noexcept { return valid(); }
  /// The C feed, still owned by this object.
  [[nodiscard]] kvidx_engine_feed* native_handle() const noexcept { return handle_.get(); }
  /// Gives up ownership of the C feed; the caller must kvidx_engine_feed_free it.
  [[nodiscard]] kvidx_engine_feed* release() noexcept { return handle_.release(); }

  /// Like Indexer::apply_engine_batch, with the publisher's sequence frame (the message's
  /// second frame: exactly 8 bytes, big-endian, see seq_frame(); empty for no tracking).
  /// After a gap or a restart the worker is cleared first unless the flags say otherwise;
  /// the result's seq() and cleared() tell. Errc::malformed: the payload is not a batch,
  /// nothing was applied and the sequence was not recorded (the next batch reports a gap);
  /// Errc::invalid_argument: a sequence frame that is not 8 bytes (checked first).
  [[nodiscard]] Result<EngineBatchResult> apply(const Indexer& indexer, std::uint64_t worker_id,
                                                std::uint32_t dp_rank,
                                                Span<std::uint8_t> seq_frame,
                                                Span<std::uint8_t> payload) const noexcept {
    kvidx_engine_batch_result r{};
    const Status s = Status::from_c(kvidx_engine_feed_apply(
        handle_.get(), indexer.native_handle(), worker_id, dp_rank, seq_frame.data(),
        seq_frame.size(), payload.data(), payload.size(), &r));
    if (!s) return s;
    return EngineBatchResult(r);
  }

#if defined(KVIDX_HAS_SNAPSHOTS)
  /// apply() as one offset batch at `offset` (see Indexer::apply_events_at): the decoded
  /// batch, with the clear a gap or restart calls for, is skipped whole when `offset` is at or
  /// below the worker's watermark; the sequence is tracked either way. Errc::invalid_argument
  /// for offset 0 (nothing recorded).
  [[nodiscard]] Result<EngineBatchResult> apply_at(const Indexer& indexer,
                                                   std::uint64_t worker_id, std::uint32_t dp_rank,
                                                   Span<std::uint8_t> seq_frame,
                                                   Span<std::uint8_t> payload,
                                                   std::uint64_t offset) const noexcept {
    kvidx_engine_batch_result r{};
    const Status s = Status::from_c(kvidx_engine_feed_apply_at(
        handle_.get(), indexer.native_handle(), worker_id, dp_rank, seq_frame.data(),
        seq_frame.size(), payload.data(), payload.size(), offset, &r));
    if (!s) return s;
    return EngineBatchResult(r);
  }
#endif  // KVIDX_HAS_SNAPSHOTS

  /// The feed's counters (each saturates at UINT64_MAX).
  [[nodiscard]] Result<EngineStats> stats() const noexcept {
    EngineStats st{};
    const Status s = Status::from_c(kvidx_engine_feed_stats(handle_.get(), &st));
    if (!s) return s;
    return st;
  }

  /// Forgets one publisher's state (tracked sequence, event ids); the index is untouched. The
  /// publisher's next batch is SeqStatus::first. True if the feed knew the publisher.
  [[nodiscard]] Result<bool> forget(Worker publisher) const noexcept {
    std::uint8_t known = 0;
    const Status s = Status::from_c(
        kvidx_engine_feed_forget(handle_.get(), publisher.id, publisher.rank, &known));
    if (!s) return s;
    return known != 0;
  }

  /// Removes every dp rank of `worker_id` from `indexer` (as Indexer::remove_worker) and
  /// forgets its publishers in this feed. Use it instead of Indexer::remove_worker for workers
  /// fed through this feed, so a worker that is gone costs the feed nothing.
  [[nodiscard]] Status remove_worker(const Indexer& indexer,
                                     std::uint64_t worker_id) const noexcept {
    return Status::from_c(
        kvidx_engine_feed_remove_worker(handle_.get(), indexer.native_handle(), worker_id));
  }

  /// Removes one (worker_id, dp_rank) from `indexer` and forgets that publisher here.
  [[nodiscard]] Status remove_worker(const Indexer& indexer, Worker worker) const noexcept {
    return Status::from_c(kvidx_engine_feed_remove_worker_dp_rank(
        handle_.get(), indexer.native_handle(), worker.id, worker.rank));
  }

  /// How many publishers the feed holds state for (about 100 bytes each).
  [[nodiscard]] Result<std::uint64_t> publishers() const noexcept {
    std::uint64_t n = 0;
    const Status s = Status::from_c(kvidx_engine_feed_publishers(handle_.get(), &n));
    if (!s) return s;
    return n;
  }

#if defined(KVIDX_HAS_FEED_START)
  /// The next sequence the feed expects from `publisher` (the rank its batches were applied
  /// to): one past its last tracked batch, or 0 for a publisher not tracked yet (a publisher's
  /// sequence starts at 0). A batch above it follows missing batches, the publisher's first
  /// batch included: a caller with the engine's replay socket asks it from here before
  /// applying the batch (with FeedFlags::no_clear_on_gap). Changes nothing.
  [[nodiscard]] Result<std::uint64_t> next_seq(Worker publisher) const noexcept {
    std::uint64_t next = 0;
    const Status s = Status::from_c(
        kvidx_engine_feed_next_seq(handle_.get(), publisher.id, publisher.rank, &next));
    if (!s) return s;
    return next;
  }

  /// The counters of publishers first seen above sequence 0 (their first batch reports
  /// SeqStatus::first; its sequence is the number of batches missed from the start; the
  /// worker is not cleared for them).
  [[nodiscard]] Result<EngineStartStats> start_stats() const noexcept {
    EngineStartStats st{};
    const Status s = Status::from_c(kvidx_engine_feed_start_stats(handle_.get(), &st));
    if (!s) return s;
    return st;
  }
#endif  // KVIDX_HAS_FEED_START

#if defined(KVIDX_HAS_HASH_CHECK)
  /// Turns the hash check on (off by default), replacing any earlier check and its counts:
  /// each store is recomputed with `algorithm` and compared with the engine's names. `seed` is
  /// vLLM's NONE_HASH seed (the engine's PYTHONHASHSEED, or vllm_default_seed for the sha256
  /// algorithms when it is unset; SGLang ignores it); `block_size` the router's (0: each
  /// store's own). Changes nothing in what the feed indexes.
  [[nodiscard]] Status set_hash_check(HashAlgorithm algorithm, std::string_view seed,
                                      std::uint32_t block_size = 0) const noexcept {
    return Status::from_c(kvidx_engine_feed_set_hash_check(
        handle_.get(), static_cast<std::uint32_t>(algorithm),
        reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size(), block_size));
  }

  /// Turns the hash check off and drops its state and counts.
  [[nodiscard]] Status clear_hash_check() const noexcept {
    return Status::from_c(kvidx_engine_feed_clear_hash_check(handle_.get()));
  }

  /// The hash check's counts for `publisher` (zeros for one it saw no store of);
  /// Errc::invalid_argument when the check is off.
  [[nodiscard]] Result<HashCheckStats> hash_check_stats(Worker publisher) const noexcept {
    HashCheckStats st{};
    const Status s = Status::from_c(
        kvidx_engine_feed_hash_check_stats(handle_.get(), publisher.id, publisher.rank, &st));
    if (!s) return s;
    return st;
  }

  /// The hash check's counts summed over every publisher (forgotten ones included);
  /// Errc::invalid_argument when the check is off.
  [[nodiscard]] Result<HashCheckStats> hash_check_totals() const noexcept {
    HashCheckStats st{};
    const Status s = Status::from_c(kvidx_engine_feed_hash_check_totals(handle_.get(), &st));
    if (!s) return s;
    return st;
  }
#endif  // KVIDX_HAS_HASH_CHECK

#if defined(KVIDX_HAS_LLMD_KEYS)
  /// Indexes stores under llm-d's request keys (llmd_request_keys with llm-d's `seed` and
  /// `model`; a store with a LoRA adapter roots at the adapter's name) instead of kvidx's local
  /// hashes. Stores those keys cannot express, or whose parent the feed never saw, are skipped
  /// (unhashable). Set it before the feed's first batch.
  [[nodiscard]] Status set_llmd_keys(std::string_view seed, std::string_view model) const noexcept {
    return Status::from_c(kvidx_engine_feed_set_llmd_keys(
        handle_.get(), reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size(),
        reinterpret_cast<const std::uint8_t*>(model.data()), model.size()));
  }
#endif  // KVIDX_HAS_LLMD_KEYS

#if defined(KVIDX_HAS_FEED_STATE)
  /// apply_at() with the engine epoch the batch came in (the bridge's id of one engine
  /// connection, its Kvidx-Engine-Epoch header; std::nullopt: not known, the publisher keeps
  /// its epoch). A publisher whose epoch differs from the one of its previous batch restarted:
  /// the result's seq() is SeqStatus::restart, the worker is cleared first (in the offset
  /// batch, unless the flags say otherwise) and its sequence tracking starts afresh at this
  /// batch, so no sequence of the new epoch is taken for one of the old. Statuses as apply_at().
  [[nodiscard]] Result<EngineBatchResult> apply_epoch_at(
      const Indexer& indexer, std::uint64_t worker_id, std::uint32_t dp_rank,
      std::optional<std::uint64_t> epoch, Span<std::uint8_t> seq_frame,
      Span<std::uint8_t> payload, std::uint64_t offset) const noexcept {
    kvidx_engine_batch_result r{};
    const Status s = Status::from_c(kvidx_engine_feed_apply_epoch_at(
        handle_.get(), indexer.native_handle(), worker_id, dp_rank,
        epoch ? &*epoch : nullptr, seq_frame.data(), seq_frame.size(), payload.data(),
        payload.size(), offset, &r));
    if (!s) return s;
    return EngineBatchResult(r);
  }

  /// The feed's per-publisher tracking state (each publisher's next expected sequence, epoch
  /// and next event id; 40 bytes per publisher plus 20) for restore_state(); the counters are
  /// not included. Save it while no batch is being applied through the feed, at the position
  /// the index's snapshot is taken for (a replica: the stream sequence of the last message
  /// fed): a feed restored from it classifies every publisher's next batch as this one would.
  /// Allocates the returned bytes (std::bad_alloc can escape, as from any vector).
  [[nodiscard]] Result<std::vector<std::uint8_t>> save_state() const {
    std::vector<std::uint8_t> out;
    for (;;) {
      std::size_t len = 0;
      const kvidx_status s =
          kvidx_engine_feed_save_state(handle_.get(), out.data(), out.size(), &len);
      if (s == KVIDX_OK) {
        out.resize(len);
        return out;
      }
      if (s != KVIDX_ERR_BUFFER_TOO_SMALL || len <= out.size()) return Status::from_c(s);
      // Publishers may be added between the two calls (concurrent applies): ask again.
      out.resize(len);
    }
  }

  /// Replaces the feed's per-publisher tracking state with bytes save_state() returned for a
  /// feed of the same format; the counters are kept. Errc::malformed: the bytes are not a
  /// saved state; Errc::invalid_argument: the state of a feed of another format; either way
  /// nothing changes.
  [[nodiscard]] Status restore_state(Span<std::uint8_t> state) const noexcept {
    return Status::from_c(
        kvidx_engine_feed_restore_state(handle_.get(), state.data(), state.size()));
  }
#endif  // KVIDX_HAS_FEED_STATE

 private:
  struct Deleter {
    void operator()(kvidx_engine_feed* p) const noexcept { kvidx_engine_feed_free(p); }
  };
  std::unique_ptr<kvidx_engine_feed, Deleter> handle_;
};

}  // namespace kvidx

#endif  // KVIDX_HPP
