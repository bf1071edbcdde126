#include "core/strategies/op_schema.h"

#include <cstring>
#include <stdexcept>
#include <unordered_map>

namespace tlm::strategies {

namespace {

struct RawArg {
  const char* name;
  const char* type;
  bool kwarg_only;
  const char* dflt;  // JSON, nullptr when the schema gives none
};
struct RawSchema {
  const char* op;
  int returns;  // -1: no fixed count
  std::vector<RawArg> args;
  bool known;
};

const std::vector<RawSchema>& raw_schemas() {
  static const std::vector<RawSchema> table = {
#include "core/strategies/op_schemas.inc"
  };
  return table;
}

ArgSchema decode(const RawArg& a, const char* op) {
  ArgSchema s;
  s.name = a.name;
  s.type = a.type;
  s.kwarg_only = a.kwarg_only;
  std::string t = a.type;
  if (!t.empty() && t.back() == '?') {
    s.optional = true;
    t.pop_back();
  }
  static const std::unordered_map<std::string, ArgKind> kinds = {
      {"Tensor", ArgKind::Tensor}, {"Tensor[]", ArgKind::TensorList}, {"Tensor?[]", ArgKind::TensorList},
      {"int", ArgKind::Int},       {"int[]", ArgKind::IntList},       {"float", ArgKind::Float},
      {"Scalar", ArgKind::Scalar}, {"bool", ArgKind::Bool},           {"bool[]", ArgKind::BoolList},
      {"Any[]", ArgKind::List},    {"Subgraph", ArgKind::Subgraph},   {"str", ArgKind::Str}};
  auto it = kinds.find(t);
  s.kind = it == kinds.end() ? ArgKind::Other : it->second;
  if (a.dflt != nullptr) {
    s.has_default = true;
    try {
      s.dflt = json::parse(a.dflt);
    } catch (const std::exception& e) {
      throw std::logic_error(std::string("op_schemas.inc: default of ") + op + "." + a.name + " is not JSON: " +
                             e.what());
    }
  }
  return s;
}

}  // namespace

int OpSchema::index_of(const char* name) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == name) return static_cast<int>(i);
  return -1;
}

const std::vector<OpSchema>& all_op_schemas() {
  static const std::vector<OpSchema> all = [] {
    std::vector<OpSchema> out;
    for (const auto& r : raw_schemas()) {
      OpSchema s;
      s.op = r.op;
      s.known = r.known;
      if (r.returns >= 0) s.returns = r.returns;
      for (const auto& a : r.args) s.args.push_back(decode(a, r.op));
      out.push_back(std::move(s));
    }
    return out;
  }();
  return all;
}

const OpSchema* op_schema(const std::string& op) {
  static const std::unordered_map<std::string, const OpSchema*> by_op = [] {
    std::unordered_map<std::string, const OpSchema*> m;
    for (const auto& s : all_op_schemas()) m.emplace(s.op, &s);
    return m;
  }();
  auto it = by_op.find(op);
  return it == by_op.end() ? nullptr : it->second;
}

}  // namespace tlm::strategies
