#include "core/placement.h"

#include <cctype>

#include "core/placement_kinds.h"

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
  const KindInfo& k = kind_info(kind);
  std::string s(1, k.letter);
  if (k.takes_dim) s += "(" + std::to_string(dim) + ")";
  if (k.takes_reduce_op) s += std::string("(") + tlm::to_string(reduce) + ")";
  return s;
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
  const KindInfo* k = s.empty() ? nullptr : kind_by_letter(s[0]);
  if (k == nullptr)
    throw InvalidArgument("cannot parse placement '" + raw + "' (expected R, S(d) or P(sum|avg|max|min))");
  Placement p{k->kind, 0, ReduceOp::Sum};
  if (s.size() == 1 && !k->takes_dim) return p;  // "R", and "P" alone means P(sum)
  if (s.size() < 3 || s[1] != '(' || s.back() != ')' || !(k->takes_dim || k->takes_reduce_op))
    throw InvalidArgument("cannot parse placement '" + raw + "' (expected R, S(d) or P(sum|avg|max|min))");
  const std::string arg = s.substr(2, s.size() - 3);
  if (k->takes_reduce_op) {
    p.reduce = parse_reduce_op(arg);
    return p;
  }
  size_t used = 0;
  try {
    p.dim = std::stoi(arg, &used);
  } catch (...) {
    used = 0;
  }
  if (used != arg.size()) throw InvalidArgument("bad Shard dim in placement '" + raw + "'");
  return p;
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
    if (const KindInfo* k = depth == 0 ? kind_by_letter(c) : nullptr) {
      flush();  // a kind's letter starts a new placement
      if (!k->takes_dim && !k->takes_reduce_op) {
        out.push_back(Placement{k->kind, 0, ReduceOp::Sum});
        continue;
      }
    }
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
