#include "core/gather_units.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace tlm {

std::string gather_unit(const std::string& fqn) {
  size_t begin = 0;
  while (true) {
    const size_t dot = fqn.find('.', begin);
    if (dot == std::string::npos) break;  // the last part is the parameter's own name
    const std::string part = fqn.substr(begin, dot - begin);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](unsigned char c) { return std::isdigit(c) != 0; }))
      return fqn.substr(0, dot);
    begin = dot + 1;
  }
  return begin == 0 ? std::string() : fqn.substr(0, begin - 1);
}

std::vector<int> small_unit_groups(const std::vector<int64_t>& unit_bytes) {
  std::vector<int> group(unit_bytes.size(), 0);
  int current = -1;
  int64_t current_bytes = 0;
  for (size_t u = 0; u < unit_bytes.size(); ++u) {
    if (current >= 0 && (unit_bytes[u] < kSmallUnitBytes || current_bytes < kSmallUnitBytes)) {
      current_bytes += unit_bytes[u];
    } else {
      current = static_cast<int>(u);
      current_bytes = unit_bytes[u];
    }
    group[u] = current;
  }
  return group;
}

std::vector<int64_t> gather_bucket_bytes(const Graph& g, int64_t cap_bytes) {
  std::vector<int64_t> out(g.nodes.size(), 0);
  if (cap_bytes <= 0) return out;
  // Units in the order their parameters are first read (placeholders come first in the
  // graph; their first reader says when the runtime gathers them).
  std::map<std::string, int> unit_index;
  std::vector<int> unit_of(g.nodes.size(), -1);
  std::vector<std::pair<int, int64_t>> first_use_and_bytes;  // by unit
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    const IrNode& node = g.nodes[v];
    if (node.op != "placeholder" || node.role != "param" || node.outputs.empty()) continue;
    const json::Value* target = node.extra.find("target");
    const std::string unit = gather_unit(target != nullptr && target->is_string() ? target->as_string() : node.name);
    const auto it = unit_index.emplace(unit, static_cast<int>(first_use_and_bytes.size())).first;
    if (it->second == static_cast<int>(first_use_and_bytes.size()))
      first_use_and_bytes.emplace_back(static_cast<int>(g.nodes.size()), 0);
    auto& [first_use, bytes] = first_use_and_bytes[static_cast<size_t>(it->second)];
    if (!node.users.empty()) first_use = std::min(first_use, node.users.front());
    bytes += node.outputs[0].nbytes();
    unit_of[v] = it->second;
  }
  std::vector<int> order(first_use_and_bytes.size());
  for (size_t u = 0; u < order.size(); ++u) order[u] = static_cast<int>(u);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return first_use_and_bytes[static_cast<size_t>(a)].first < first_use_and_bytes[static_cast<size_t>(b)].first;
  });
  std::vector<int64_t> ordered_bytes;
  for (int u : order) ordered_bytes.push_back(first_use_and_bytes[static_cast<size_t>(u)].second);
  const std::vector<int> group = small_unit_groups(ordered_bytes);
  std::vector<int64_t> group_bytes(order.size(), 0), bucket_of_unit(order.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) group_bytes[static_cast<size_t>(group[k])] += ordered_bytes[k];
  for (size_t k = 0; k < order.size(); ++k)
    bucket_of_unit[static_cast<size_t>(order[k])] = std::min(cap_bytes, group_bytes[static_cast<size_t>(group[k])]);
  // A parameter as read: the parameter, or a single-input op on one (the runtime gathers
  // through views and casts, bucketing.py's _source_param).
  const std::vector<int> roots = state_read_roots(g);
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    const int unit = roots[v] < 0 ? -1 : unit_of[static_cast<size_t>(roots[v])];
    if (unit >= 0) out[v] = bucket_of_unit[static_cast<size_t>(unit)];
  }
  return out;
}

}  // namespace tlm
