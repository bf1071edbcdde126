#include "core/placement.h"

#include <cctype>

namespace tlm {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

ReduceOp parse_reduce_op(const std::string& s) {
  if (s == "sum") return ReduceOp::Sum;
  if (s == "avg") return ReduceOp::Avg;
  if (s == "max") return ReduceOp::Max;
  if (s == "min") return ReduceOp::Min;
  throw InvalidArgument("unknown Partial reduce op '" + s + "' (expected sum, avg, max or min)");
}

std::string Placement::to_string() const {
  switch (kind) {
    case Kind::Replicate: return "R";
    case Kind::Shard: return "S(" + std::to_string(dim) + ")";
    case Kind::Partial: return std::string("P(") + tlm::to_string(reduce) + ")";
  }
  return "?";
}

std::string to_string(const PlacementSpec& spec) {
  std::string out;
  for (const auto& p : spec) out += p.to_string();
  return out;
}

Placement parse_placement(const std::string& raw) {
  std::string s;
  for (char c : raw)
    if (!std::isspace(static_cast<unsigned char>(c))) s.push_back(c);
  if (s == "R") return Placement::replicate();
  if (s == "P") return Placement::partial();
  auto inner = [&](const std::string& prefix) -> std::string {
    if (s.size() < prefix.size() + 2 || s.compare(0, prefix.size() + 1, prefix + "(") != 0 || s.back() != ')')
      return {};
    return s.substr(prefix.size() + 1, s.size() - prefix.size() - 2);
  };
  std::string arg = inner("S");
  if (!arg.empty()) {
    size_t used = 0;
    int d = 0;
    try {
      d = std::stoi(arg, &used);
    } catch (...) {
      used = 0;
    }
    if (used != arg.size()) throw InvalidArgument("bad Shard dim in placement '" + raw + "'");
    return Placement::shard(d);
  }
  arg = inner("P");
  if (!arg.empty()) return Placement::partial(parse_reduce_op(arg));
  throw InvalidArgument("cannot parse placement '" + raw + "' (expected R, S(d) or P(sum|avg|max|min))");
}

PlacementSpec parse_spec(const std::string& raw) {
  PlacementSpec out;
  std::string cur;
  int depth = 0;
  auto flush = [&]() {
    if (!cur.empty()) out.push_back(parse_placement(cur));
    cur.clear();
  };
  for (char c : raw) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '[' || c == ']') continue;
    if (c == ',' && depth == 0) { flush(); continue; }
    if (c == '(') ++depth;
    if (c == ')') {
      --depth;
      cur.push_back(c);
      if (depth == 0) flush();
      continue;
    }
    if (depth == 0 && c == 'R') { flush(); out.push_back(Placement::replicate()); continue; }
    if (depth == 0 && (c == 'S' || c == 'P')) flush();
    cur.push_back(c);
  }
  if (depth != 0) throw InvalidArgument("unbalanced parentheses in placement spec '" + raw + "'");
  flush();
  return out;
}

void validate_spec(PlacementSpec& spec, int64_t ndim, size_t mesh_ndim, const std::string& what) {
  if (spec.size() != mesh_ndim)
    throw InvalidArgument(what + ": got " + std::to_string(spec.size()) + " placements but the mesh has " +
                          std::to_string(mesh_ndim) + " dims (one placement per mesh dim expected)");
  for (auto& p : spec) {
    if (!p.is_shard()) continue;
    int d = p.dim < 0 ? p.dim + static_cast<int>(ndim) : p.dim;
    if (d < 0 || d >= ndim)
      throw InvalidArgument(what + ": Shard(" + std::to_string(p.dim) + ") is out of range for a tensor with " +
                            std::to_string(ndim) + " dims (expected -" + std::to_string(ndim) + " <= d < " +
                            std::to_string(ndim) + ")");
    p.dim = d;
  }
}

}  // namespace tlm
