// Reading and writing workload files (docs/contract.md section 4).
#include "workload.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <ostream>
#include <sstream>

#include "json.hpp"

namespace sched {

kvidx::Event Op::to_event() const {
  switch (kind) {
    case Kind::stored:
      return kvidx::stored(worker, event_id, parent, blocks);
    case Kind::removed:
      return kvidx::removed(worker, event_id, hashes);
    case Kind::cleared:
    case Kind::match:
      break;
  }
  return kvidx::cleared(worker, event_id);
}

namespace {

using Type = JsonValue::Type;

/// Reads the unsigned integer member `key`; `required` decides whether absence is an error.
bool get_uint(const JsonValue& obj, const char* key, std::uint64_t& out, bool required,
              std::string& error) {
  const JsonValue* v = obj.find(key);
  if (v == nullptr) {
    if (required) error = std::string("missing \"") + key + "\"";
    return !required;
  }
  if (v->type != Type::uint) {
    error = std::string("\"") + key + "\" must be an unsigned integer";
    return false;
  }
  out = v->uint;
  return true;
}

/// Reads an array of unsigned integers.
bool get_uint_array(const JsonValue& obj, const char* key, std::vector<std::uint64_t>& out,
                    std::string& error) {
  const JsonValue* v = obj.find(key);
  if (v == nullptr || v->type != Type::array) {
    error = std::string("\"") + key + "\" must be an array";
    return false;
  }
  out.clear();
  out.reserve(v->items.size());
  for (const auto& item : v->items) {
    if (item.type != Type::uint) {
      error = std::string("\"") + key + "\" must hold unsigned integers";
      return false;
    }
    out.push_back(item.uint);
  }
  return true;
}

bool get_blocks(const JsonValue& obj, std::vector<kvidx::Block>& out, std::string& error) {
  const JsonValue* v = obj.find("blocks");
  if (v == nullptr || v->type != Type::array) {
    error = "\"blocks\" must be an array";
    return false;
  }
  out.clear();
  out.reserve(v->items.size());
  for (const auto& pair : v->items) {
    if (pair.type != Type::array || pair.items.size() != 2 ||
        pair.items[0].type != Type::uint || pair.items[1].type != Type::uint) {
      error = "\"blocks\" must hold [local_hash, seq_hash] pairs";
      return false;
    }
    out.push_back({pair.items[0].uint, pair.items[1].uint});
  }
  return true;
}

bool get_event_fields(const JsonValue& obj, Op& op, std::string& error) {
  std::uint64_t rank = 0;
  if (!get_uint(obj, "worker", op.worker.id, true, error)) return false;
  if (!get_uint(obj, "dp_rank", rank, false, error)) return false;
  if (rank > UINT32_MAX) {
    error = "\"dp_rank\" exceeds 32 bits";
    return false;
  }
  op.worker.rank = static_cast<std::uint32_t>(rank);
  return get_uint(obj, "event_id", op.event_id, false, error);
}

}  // namespace

bool parse_op(const std::string& line, Op& op, std::string& error) {
  JsonValue obj;
  if (!parse_json(line, obj, error)) return false;
  if (obj.type != Type::object) {
    error = "a line must be a JSON object";
    return false;
  }
  op = Op{};
  if (const JsonValue* t = obj.find("t")) {
    if (t->type != Type::uint && t->type != Type::real) {
      error = "\"t\" must be a number";
      return false;
    }
    op.t_ms = t->real;
  }
  const JsonValue* kind = obj.find("op");
  if (kind == nullptr || kind->type != Type::string) {
    error = "missing \"op\"";
    return false;
  }
  if (kind->text == "match") {
    op.kind = Op::Kind::match;
    return get_uint_array(obj, "local_hashes", op.hashes, error);
  }
  if (kind->text == "stored") {
    op.kind = Op::Kind::stored;
    if (!get_event_fields(obj, op, error)) return false;
    if (const JsonValue* p = obj.find("parent"); p != nullptr && p->type != Type::null) {
      if (p->type != Type::uint) {
        error = "\"parent\" must be null or an unsigned integer";
        return false;
      }
      op.parent = p->uint;
    }
    return get_blocks(obj, op.blocks, error);
  }
  if (kind->text == "removed") {
    op.kind = Op::Kind::removed;
    return get_event_fields(obj, op, error) &&
           get_uint_array(obj, "seq_hashes", op.hashes, error);
  }
  if (kind->text == "cleared") {
    op.kind = Op::Kind::cleared;
    return get_event_fields(obj, op, error);
  }
  error = "unknown op \"" + kind->text + "\"";
  return false;
}

bool read_workload(const std::string& path, Workload& out, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot open";
    return false;
  }
  out = Workload{};
  std::string line;
  std::size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    Op op;
    std::string why;
    if (!parse_op(line, op, why)) {
      error = path + ":" + std::to_string(lineno) + ": " + why;
      return false;
    }
    if (op.is_event()) {
      ++out.events;
      out.workers.push_back(op.worker);
    } else {
      ++out.matches;
    }
    out.ops.push_back(std::move(op));
  }
  auto less = [](kvidx::Worker a, kvidx::Worker b) {
    return a.id != b.id ? a.id < b.id : a.rank < b.rank;
  };
  std::sort(out.workers.begin(), out.workers.end(), less);
  out.workers.erase(std::unique(out.workers.begin(), out.workers.end()), out.workers.end());
  return true;
}

namespace {

void write_list(std::ostream& os, const std::vector<std::uint64_t>& xs) {
  os << '[';
  for (std::size_t i = 0; i < xs.size(); ++i) os << (i ? "," : "") << xs[i];
  os << ']';
}

void write_t(std::ostream& os, double t) {
  if (t >= 0 && t < 9.0e15 && std::floor(t) == t) {
    os << static_cast<std::uint64_t>(t);
  } else {
    std::ostringstream s;
    s.precision(17);
    s << t;
    os << s.str();
  }
}

}  // namespace

void write_op(std::ostream& os, const Op& op) {
  os << "{\"t\":";
  write_t(os, op.t_ms);
  if (op.kind == Op::Kind::match) {
    os << ",\"op\":\"match\",\"local_hashes\":";
    write_list(os, op.hashes);
    os << '}';
    return;
  }
  static const char* const names[] = {"stored", "removed", "cleared"};
  os << ",\"op\":\"" << names[static_cast<int>(op.kind)] << "\",\"worker\":" << op.worker.id
     << ",\"dp_rank\":" << op.worker.rank << ",\"event_id\":" << op.event_id;
  if (op.kind == Op::Kind::stored) {
    os << ",\"parent\":";
    if (op.parent) {
      os << *op.parent;
    } else {
      os << "null";
    }
    os << ",\"blocks\":[";
    for (std::size_t i = 0; i < op.blocks.size(); ++i) {
      os << (i ? "," : "") << '[' << op.blocks[i].local_hash << ',' << op.blocks[i].seq_hash
         << ']';
    }
    os << ']';
  } else if (op.kind == Op::Kind::removed) {
    os << ",\"seq_hashes\":";
    write_list(os, op.hashes);
  }
  os << '}';
}

bool write_workload(const std::string& path, const Workload& w) {
  std::ofstream out(path);
  if (!out) return false;
  for (const auto& op : w.ops) {
    write_op(out, op);
    out << '\n';
  }
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace sched
