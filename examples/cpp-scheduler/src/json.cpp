// Recursive-descent reader for the JSON subset described in json.hpp.
#include "json.hpp"

#include <cstdlib>
#include <string>

namespace sched {

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

/// Cursor over the text with one-character lookahead.
class Reader {
 public:
  explicit Reader(std::string_view text) : s_(text) {}

  bool document(JsonValue& out) {
    if (!value(out, 0)) return false;
    skip_ws();
    return pos_ == s_.size() || fail("trailing characters");
  }
  const std::string& error() const { return error_; }

 private:
  static constexpr int kMaxDepth = 16;

  bool fail(const char* what) {
    if (error_.empty()) error_ = std::string(what) + " at column " + std::to_string(pos_ + 1);
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r' ||
                                s_[pos_] == '\n')) {
      ++pos_;
    }
  }
  bool eat(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("bad literal");
    pos_ += word.size();
    return true;
  }

  bool value(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    skip_ws();
    if (pos_ >= s_.size()) return fail("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out.type = JsonValue::Type::string;
      return string(out.text);
    }
    if (c == 'n') {
      out.type = JsonValue::Type::null;
      return literal("null");
    }
    if (c == 't' || c == 'f') {
      out.type = JsonValue::Type::boolean;
      out.boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    return number(out);
  }

  bool object(JsonValue& out, int depth) {
    out.type = JsonValue::Type::object;
    ++pos_;  // '{'
    if (eat('}')) return true;
    do {
      skip_ws();
      std::string key;
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a key");
      if (!string(key)) return false;
      if (!eat(':')) return fail("expected ':'");
      out.members.emplace_back(std::move(key), JsonValue{});
      if (!value(out.members.back().second, depth + 1)) return false;
    } while (eat(','));
    return eat('}') || fail("expected ',' or '}'");
  }

  bool array(JsonValue& out, int depth) {
    out.type = JsonValue::Type::array;
    ++pos_;  // '['
    if (eat(']')) return true;
    do {
      out.items.emplace_back();
      if (!value(out.items.back(), depth + 1)) return false;
    } while (eat(','));
    return eat(']') || fail("expected ',' or ']'");
  }

  bool string(std::string& out) {
    ++pos_;  // opening quote
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      if (e != '"' && e != '\\' && e != '/') return fail("unsupported string escape");
      out += e;
    }
    return fail("unterminated string");
  }

  bool number(JsonValue& out) {
    const std::size_t start = pos_;
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '-') {
      integral = false;
      ++pos_;
    }
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        integral = false;
        ++pos_;
      } else {
        break;
      }
    }
    if (pos_ == start) return fail("expected a value");
    const std::string digits(s_.substr(start, pos_ - start));
    char* end = nullptr;
    if (integral) {
      std::uint64_t v = 0;
      for (char d : digits) {
        const auto digit = static_cast<std::uint64_t>(d - '0');
        if (v > (UINT64_MAX - digit) / 10) return fail("integer exceeds 64 bits");
        v = v * 10 + digit;
      }
      out.type = JsonValue::Type::uint;
      out.uint = v;
      out.real = static_cast<double>(v);
      return true;
    }
    out.type = JsonValue::Type::real;
    out.real = std::strtod(digits.c_str(), &end);
    return end == digits.c_str() + digits.size() || fail("bad number");
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::string error_;
};

}  // namespace

bool parse_json(std::string_view text, JsonValue& out, std::string& error) {
  Reader r(text);
  out = JsonValue{};
  if (r.document(out)) return true;
  error = r.error();
  return false;
}

}  // namespace sched
