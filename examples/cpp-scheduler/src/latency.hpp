// Latency samples and their percentiles.
#ifndef CPP_SCHEDULER_LATENCY_HPP
#define CPP_SCHEDULER_LATENCY_HPP

#include <cstdint>
#include <string>
#include <vector>

namespace sched {

/// Nanosecond samples; one per thread while recording (reserve first: no allocation), merged
/// afterwards.
class Latencies {
 public:
  /// Makes room for `n` samples.
  void reserve(std::size_t n) { ns_.reserve(n); }
  /// Records one sample.
  void add(std::uint64_t ns) {
    ns_.push_back(ns);
    sorted_ = false;
  }
  /// Appends another set's samples.
  void merge(const Latencies& other) {
    ns_.insert(ns_.end(), other.ns_.begin(), other.ns_.end());
    sorted_ = false;
  }
  /// Number of samples.
  [[nodiscard]] std::size_t count() const { return ns_.size(); }
  /// The q-quantile (0..1) in nanoseconds, nearest-rank; 0 without samples. Sorts the samples.
  [[nodiscard]] std::uint64_t quantile(double q);
  /// "n=… p50=… p90=… p99=… p99.9=… max=…" in microseconds. Sorts the samples.
  [[nodiscard]] std::string summary();

 private:
  std::vector<std::uint64_t> ns_;
  bool sorted_ = false;
};

}  // namespace sched

#endif  // CPP_SCHEDULER_LATENCY_HPP
