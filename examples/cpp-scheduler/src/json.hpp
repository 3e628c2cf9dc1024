// A tiny JSON reader for the workload format's lines: objects, arrays, unsigned integers
// (exact 64-bit), other numbers (as double), strings without escapes beyond \" \\ \/, true,
// false and null. Nothing more is needed for docs/contract.md section 4.
#ifndef CPP_SCHEDULER_JSON_HPP
#define CPP_SCHEDULER_JSON_HPP

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sched {

/// One parsed JSON value.
struct JsonValue {
  /// The value's type.
  enum class Type { null, boolean, uint, real, string, array, object };
  Type type = Type::null;         ///< Which of the fields below is meaningful.
  bool boolean = false;           ///< Type::boolean.
  std::uint64_t uint = 0;         ///< Type::uint: a non-negative integer, exact.
  double real = 0;                ///< Type::real, and Type::uint converted.
  std::string text;               ///< Type::string.
  std::vector<JsonValue> items;   ///< Type::array.
  std::vector<std::pair<std::string, JsonValue>> members;  ///< Type::object, in file order.

  /// The member named `key`, or nullptr (objects only).
  [[nodiscard]] const JsonValue* find(std::string_view key) const;
};

/// Parses one complete JSON document; on failure returns false and sets `error`.
[[nodiscard]] bool parse_json(std::string_view text, JsonValue& out, std::string& error);

}  // namespace sched

#endif  // CPP_SCHEDULER_JSON_HPP
