// Evaluator and validator for the strategy-selection problem. Kept apart from
// the solver so a solution's cost is checked by code that never searched.
#include "core/solver/problem.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace tlm::solver {

std::string to_string(__int128 v) {
  if (v == 0) return "0";
  bool neg = v < 0;
  unsigned __int128 u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string s;
  while (u > 0) {
    s.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  if (neg) s.push_back('-');
  std::reverse(s.begin(), s.end());
  return s;
}

static std::string node_name(size_t i) { return "node " + std::to_string(i); }

void validate(const Problem& p) {
  const size_t n = p.nodes.size();
  if (p.usage_limit && *p.usage_limit < 0)
    throw std::invalid_argument("usage_limit is " + std::to_string(*p.usage_limit) +
                                "; expected a non-negative number (or none for no limit)");
  for (size_t i = 0; i < n; ++i) {
    const Node& node = p.nodes[i];
    if (node.strategies.empty())
      throw std::invalid_argument(node_name(i) + " has no strategies; expected at least one");
    for (size_t s = 0; s < node.strategies.size(); ++s)
      if (node.strategies[s].usage < 0)
        throw std::invalid_argument(node_name(i) + " strategy " + std::to_string(s) + " has negative usage " +
                                    std::to_string(node.strategies[s].usage) + "; expected >= 0");
    if (node.pinned < -1 || node.pinned >= static_cast<int>(node.strategies.size()))
      throw std::invalid_argument(node_name(i) + " is pinned to strategy " + std::to_string(node.pinned) +
                                  " but has " + std::to_string(node.strategies.size()) + " strategies");
  }
  auto check_node = [&](int idx, const std::string& what) {
    if (idx < 0 || static_cast<size_t>(idx) >= n)
      throw std::invalid_argument(what + " refers to node " + std::to_string(idx) + "; expected 0.." +
                                  std::to_string(n == 0 ? 0 : n - 1));
  };
  for (size_t e = 0; e < p.edges.size(); ++e) {
    const Edge& edge = p.edges[e];
    const std::string what = "edge " + std::to_string(e);
    check_node(edge.u, what);
    check_node(edge.v, what);
    if (edge.u == edge.v) throw std::invalid_argument(what + " connects node " + std::to_string(edge.u) + " to itself");
    size_t want = p.nodes[edge.u].strategies.size() * p.nodes[edge.v].strategies.size();
    if (!edge.costs)
      throw std::invalid_argument(what + " (" + std::to_string(edge.u) + ", " + std::to_string(edge.v) +
                                  ") has no cost matrix; expected |S_u| x |S_v| = " + std::to_string(want) + " costs");
    if (edge.costs->size() != want)
      throw std::invalid_argument(what + " (" + std::to_string(edge.u) + ", " + std::to_string(edge.v) + ") has " +
                                  std::to_string(edge.costs->size()) + " costs; expected |S_u| x |S_v| = " +
                                  std::to_string(want));
  }
  for (size_t c = 0; c < p.couplings.size(); ++c) {
    const Coupling& cp = p.couplings[c];
    const std::string what = "coupling " + std::to_string(c);
    check_node(cp.u, what);
    check_node(cp.v, what);
    if (cp.u == cp.v) throw std::invalid_argument(what + " couples node " + std::to_string(cp.u) + " with itself");
    size_t su = p.nodes[cp.u].strategies.size(), sv = p.nodes[cp.v].strategies.size();
    if (cp.map.size() != su)
      throw std::invalid_argument(what + " map has " + std::to_string(cp.map.size()) + " entries; expected |S_u| = " +
                                  std::to_string(su));
    for (size_t k = 0; k < su; ++k)
      if (cp.map[k] < -1 || cp.map[k] >= static_cast<int>(sv))
        throw std::invalid_argument(what + " map[" + std::to_string(k) + "] = " + std::to_string(cp.map[k]) +
                                    "; expected -1 or 0.." + std::to_string(sv - 1));
  }
}

// Sweeps interval starts/ends in time order; reports each maximal time range
// where the live usage exceeds the limit, with the peak inside it.
static void check_memory(const Problem& p, const Solution& x, Evaluation& ev) {
  std::vector<std::pair<int64_t, Usage>> events;  // (time, +/- usage)
  events.reserve(2 * p.nodes.size());
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node& node = p.nodes[i];
    if (node.start >= node.end) continue;
    Usage u = node.strategies[x[i]].usage;
    if (u == 0) continue;
    events.emplace_back(node.start, u);
    events.emplace_back(node.end, -u);
  }
  std::sort(events.begin(), events.end());
  __int128 load = 0, peak = 0;
  int64_t peak_t = 0;
  bool over = false;
  int64_t over_from = 0;
  __int128 over_peak = 0;
  const bool limited = p.usage_limit.has_value();
  for (size_t k = 0; k < events.size();) {
    int64_t t = events[k].first;
    while (k < events.size() && events[k].first == t) load += events[k++].second;
    if (load > peak) { peak = load; peak_t = t; }
    if (!limited) continue;
    bool now_over = load > *p.usage_limit;
    if (now_over && !over) { over = true; over_from = t; over_peak = load; }
    if (now_over) over_peak = std::max(over_peak, load);
    if (!now_over && over) {
      over = false;
      ev.violations.push_back("usage " + to_string(over_peak) + " exceeds usage_limit " +
                              std::to_string(*p.usage_limit) + " during [" + std::to_string(over_from) + ", " +
                              std::to_string(t) + ")");
    }
  }
  ev.peak_usage = static_cast<Usage>(std::min<__int128>(peak, std::numeric_limits<Usage>::max()));
  ev.peak_time = peak_t;
}

std::vector<__int128> load_by_step(const Problem& problem, const Solution& solution, size_t steps) {
  std::vector<__int128> load(steps + 1, 0);
  const int64_t last = static_cast<int64_t>(steps);
  for (size_t j = 0; j < problem.nodes.size() && j < solution.size(); ++j) {
    const Node& node = problem.nodes[j];
    if (node.start >= node.end || solution[j] < 0) continue;
    const __int128 u = node.strategies[static_cast<size_t>(solution[j])].usage;
    load[static_cast<size_t>(std::clamp<int64_t>(node.start, 0, last))] += u;
    load[static_cast<size_t>(std::clamp<int64_t>(node.end, 0, last))] -= u;
  }
  for (size_t t = 1; t <= steps; ++t) load[t] += load[t - 1];
  return load;
}

Evaluation evaluate(const Problem& p, const Solution& x) {
  Evaluation ev;
  if (x.size() != p.nodes.size()) {
    ev.feasible = false;
    ev.violations.push_back("solution has " + std::to_string(x.size()) + " entries; expected one per node (" +
                            std::to_string(p.nodes.size()) + ")");
    return ev;
  }
  bool indices_ok = true;
  for (size_t i = 0; i < x.size(); ++i) {
    const Node& node = p.nodes[i];
    if (x[i] < 0 || x[i] >= static_cast<int>(node.strategies.size())) {
      ev.violations.push_back(node_name(i) + " picks strategy " + std::to_string(x[i]) + " of " +
                              std::to_string(node.strategies.size()));
      indices_ok = false;
      continue;
    }
    const Strategy& s = node.strategies[x[i]];
    if (s.cost == kInfiniteCost)
      ev.violations.push_back(node_name(i) + " picks forbidden strategy " + std::to_string(x[i]));
    else
      ev.cost += s.cost;
    if (node.pinned >= 0 && x[i] != node.pinned)
      ev.violations.push_back(node_name(i) + " is pinned to strategy " + std::to_string(node.pinned) + " but picks " +
                              std::to_string(x[i]));
    if (node.usage_lower && s.usage < *node.usage_lower)
      ev.violations.push_back(node_name(i) + " usage " + std::to_string(s.usage) + " is below its lower bound " +
                              std::to_string(*node.usage_lower));
    if (node.usage_upper && s.usage > *node.usage_upper)
      ev.violations.push_back(node_name(i) + " usage " + std::to_string(s.usage) + " is above its upper bound " +
                              std::to_string(*node.usage_upper));
  }
  if (!indices_ok) {
    ev.feasible = false;
    return ev;
  }
  for (size_t e = 0; e < p.edges.size(); ++e) {
    const Edge& edge = p.edges[e];
    if (!edge.costs) throw std::invalid_argument("edge " + std::to_string(e) + " has no cost matrix");
    size_t sv_count = p.nodes[edge.v].strategies.size();
    Cost c = (*edge.costs)[static_cast<size_t>(x[edge.u]) * sv_count + x[edge.v]];
    if (c == kInfiniteCost)
      ev.violations.push_back("edge " + std::to_string(e) + " (" + std::to_string(edge.u) + ", " +
                              std::to_string(edge.v) + ") forbids strategies (" + std::to_string(x[edge.u]) + ", " +
                              std::to_string(x[edge.v]) + ")");
    else
      ev.cost += c;
  }
  for (size_t c = 0; c < p.couplings.size(); ++c) {
    const Coupling& cp = p.couplings[c];
    int want = cp.map[x[cp.u]];
    if (want != x[cp.v])
      ev.violations.push_back("coupling " + std::to_string(c) + ": node " + std::to_string(cp.u) + " strategy " +
                              std::to_string(x[cp.u]) +
                              (want < 0 ? std::string(" allows no strategy of node ")
                                        : " requires strategy " + std::to_string(want) + " of node ") +
                              std::to_string(cp.v) + ", got " + std::to_string(x[cp.v]));
  }
  check_memory(p, x, ev);
  ev.feasible = ev.violations.empty();
  return ev;
}

}  // namespace tlm::solver
