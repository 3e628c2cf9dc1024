// Workload files (docs/contract.md section 4): JSON Lines, one operation per line, read and written.
#ifndef CPP_SCHEDULER_WORKLOAD_HPP
#define CPP_SCHEDULER_WORKLOAD_HPP

#include <kvidx.hpp>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace sched {

/// One line of a workload file.
struct Op {
  /// The line's "op" field.
  enum class Kind { stored, removed, cleared, match };
  Kind kind = Kind::match;                 ///< What the line does.
  double t_ms = 0;                         ///< "t": milliseconds since the trace start.
  kvidx::Worker worker;                    ///< "worker", "dp_rank" (events only).
  std::uint64_t event_id = 0;              ///< "event_id" (events only).
  std::optional<std::uint64_t> parent;     ///< "parent" (stored; null = none).
  std::vector<kvidx::Block> blocks;        ///< "blocks" (stored): [local, seq] pairs.
  std::vector<std::uint64_t> hashes;       ///< "seq_hashes" (removed) or "local_hashes" (match).

  /// True for stored/removed/cleared lines.
  [[nodiscard]] bool is_event() const { return kind != Kind::match; }
  /// A non-owning C event pointing into this Op (valid while the Op lives, unmodified).
  [[nodiscard]] kvidx::Event to_event() const;
};

/// A whole workload file.
struct Workload {
  std::vector<Op> ops;                 ///< In file order.
  std::vector<kvidx::Worker> workers;  ///< Every worker named by an event, sorted by (id, rank).
  std::size_t events = 0;              ///< Number of stored/removed/cleared lines.
  std::size_t matches = 0;             ///< Number of match lines.
};

/// Reads a workload file; on failure returns false and sets `error` ("file:line: why").
[[nodiscard]] bool read_workload(const std::string& path, Workload& out, std::string& error);

/// Parses one line into `op`; on failure returns false and sets `error`.
[[nodiscard]] bool parse_op(const std::string& line, Op& op, std::string& error);

/// Writes `op` as one line of the workload format (no trailing newline).
void write_op(std::ostream& os, const Op& op);

/// Writes a whole workload file; returns false if the file cannot be written.
[[nodiscard]] bool write_workload(const std::string& path, const Workload& w);

}  // namespace sched

#endif  // CPP_SCHEDULER_WORKLOAD_HPP
