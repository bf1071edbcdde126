#include "core/strategy_signature.h"

#include "core/json.h"

namespace tlm {

namespace {

// Position of `r` among `distinct` (its size when absent).
size_t position_of(const std::vector<TensorRef>& distinct, const TensorRef& r) {
  size_t k = 0;
  while (k < distinct.size() && !(distinct[k] == r)) ++k;
  return k;
}

void append_meta(std::string& out, const TensorMeta& m) {
  out += to_string(m.dtype);
  for (int64_t s : m.shape) out += ',' + std::to_string(s);
  out += ';';
}

// `v` with each tensor reference written as its position among the node's distinct
// tensor inputs (their metas are appended separately).
void append_canonical(std::string& out, const json::Value& v, const std::vector<TensorRef>& distinct) {
  if (is_tensor_ref(v)) {
    std::vector<TensorRef> one;
    collect_tensor_refs(v, one);
    out += "#" + std::to_string(position_of(distinct, one.front()));
  } else if (v.is_array()) {
    out += '[';
    for (const json::Value& x : v.as_array()) append_canonical(out, x, distinct), out += ',';
    out += ']';
  } else if (v.is_object()) {
    out += '{';
    for (const auto& [key, x] : v.as_object()) out += key + ':', append_canonical(out, x, distinct), out += ',';
    out += '}';
  } else {
    out += v.dump();
  }
}

}  // namespace

std::string strategy_signature(const Graph& g, int id, const std::vector<uint8_t>& input_kinds) {
  const IrNode& n = g.nodes.at(static_cast<size_t>(id));
  if (n.op == "placeholder" || n.op == "output" || n.has_fixed) return "";
  std::vector<TensorRef> distinct;
  std::string out = n.op + '|' + n.role + '|';
  for (const TensorRef& r : n.tensor_inputs) {
    const size_t k = position_of(distinct, r);
    if (k == distinct.size()) distinct.push_back(r);
    out += std::to_string(k) + ':';
    append_meta(out, g.meta(r));
  }
  out += '|';
  for (const TensorMeta& m : n.outputs) append_meta(out, m);
  out += '|';
  append_canonical(out, n.args, distinct);
  out += '|';
  append_canonical(out, n.kwargs, distinct);
  out += '|';
  if (n.extra.is_object())
    for (const auto& [key, x] : n.extra.as_object())
      if (key != "block") out += key + ':', append_canonical(out, x, distinct), out += ',';
  out += '|';
  for (uint8_t k : input_kinds) out += std::to_string(k) + ',';
  return out;
}

}  // namespace tlm
