// Percentiles over recorded latency samples.
#include "latency.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sched {

std::uint64_t Latencies::quantile(double q) {
  if (ns_.empty()) return 0;
  if (!sorted_) {
    std::sort(ns_.begin(), ns_.end());
    sorted_ = true;
  }
  const double rank = std::ceil(q * static_cast<double>(ns_.size()));
  const std::size_t idx = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return ns_[std::min(idx, ns_.size() - 1)];
}

std::string Latencies::summary() {
  char buf[192];
  auto us = [this](double q) { return static_cast<double>(quantile(q)) / 1000.0; };
  std::snprintf(buf, sizeof buf, "n=%zu p50=%.2fus p90=%.2fus p99=%.2fus p99.9=%.2fus max=%.2fus",
                count(), us(0.5), us(0.9), us(0.99), us(0.999), us(1.0));
  return buf;
}

}  // namespace sched
