#include "core/symmetry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <vector>

namespace tlm {

RepeatedBlocks find_repeated_blocks(const Graph& g, const CostTables& t) {
  RepeatedBlocks out;
  const size_t n = g.nodes.size();
  std::vector<const RecomputeSite*> site_of(n, nullptr);
  for (const RecomputeSite& s : t.recompute) site_of[static_cast<size_t>(s.node)] = &s;
  std::vector<std::vector<int>> sinks_of(n);  // a parameter's gradient sinks move with it (a coupling)
  for (const OutputSink& s : t.sinks)
    if (s.coupled_param >= 0) sinks_of[static_cast<size_t>(s.coupled_param)].push_back(s.problem_node);
  // Each block's problem nodes in graph order, and what must match for two blocks to be one
  // block repeated: the ops and every node's number of strategies.
  std::map<std::string, std::vector<int>> members;
  std::map<std::string, std::string> signature;
  for (size_t i = 0; i + 1 < n; ++i) {
    const json::Value* b = g.nodes[i].extra.find("block");
    if (b == nullptr || b->is_null()) continue;
    const std::string name = b->as_string("extra.block");
    std::vector<int>& m = members[name];
    std::string& sig = signature[name];
    auto add = [&](int p) {
      m.push_back(p);
      sig += std::to_string(t.problem.nodes[static_cast<size_t>(p)].strategies.size()) + ",";
    };
    sig += g.nodes[i].op + ":";
    add(static_cast<int>(i));
    for (int sink : sinks_of[i]) add(sink);
    if (site_of[i] != nullptr) {
      add(site_of[i]->hold);
      if (site_of[i]->tail >= 0) add(site_of[i]->tail);
    }
    sig += ";";
  }
  std::map<std::string, int> count;
  for (const auto& kv : signature) ++count[kv.second];
  const std::string* common = nullptr;
  int most = 0;
  for (const auto& kv : count)  // ties: the first signature in order (deterministic)
    if (kv.second > most) most = kv.second, common = &kv.first;
  if (most < 2) return out;
  std::vector<std::pair<int, std::string>> order;  // by each block's first IR node: forward order
  for (const auto& kv : members)
    if (signature[kv.first] == *common) order.emplace_back(kv.second.front(), kv.first);
  std::sort(order.begin(), order.end());
  for (const auto& [first, name] : order) {
    out.names.push_back(name);
    out.members.push_back(std::move(members[name]));
  }
  return out;
}

SymmetryResult place_blocks_alike(const Graph& g, const CostTables& t, solver::SolveResult& r) {
  SymmetryResult out;
  if (r.solution.empty()) return out;
  const RepeatedBlocks found = find_repeated_blocks(g, t);
  if (found.members.size() < 2) return out;
  std::vector<const std::vector<int>*> blocks;
  for (const std::vector<int>& m : found.members) blocks.push_back(&m);
  out.blocks = static_cast<int>(blocks.size());

  std::set<std::vector<int>> patterns;
  for (const std::vector<int>* m : blocks) {
    std::vector<int> p;
    for (int k : *m) p.push_back(r.solution[static_cast<size_t>(k)]);
    patterns.insert(std::move(p));
  }
  if (patterns.size() == 1) return out;
  {  // and the consensus: every position's most common label across the blocks (ties: the smallest)
    const size_t width = blocks.front()->size();
    std::vector<int> consensus(width);
    for (size_t k = 0; k < width; ++k) {
      std::map<int, int> votes;
      for (const std::vector<int>* m : blocks) ++votes[r.solution[static_cast<size_t>((*m)[k])]];
      int top = -1;
      for (const auto& kv : votes)
        if (top < 0 || kv.second > votes[top]) top = kv.first;
      consensus[k] = top;
    }
    patterns.insert(std::move(consensus));
  }
  __int128 best = std::numeric_limits<__int128>::max();
  solver::Solution best_solution;
  for (const std::vector<int>& p : patterns) {
    solver::Solution s = r.solution;
    for (const std::vector<int>* m : blocks)
      for (size_t k = 0; k < m->size(); ++k) s[static_cast<size_t>((*m)[k])] = p[k];
    const solver::Evaluation ev = solver::evaluate(t.problem, s);
    if (ev.feasible && ev.cost < best) best = ev.cost, best_solution = std::move(s);
  }
  if (!best_solution.empty() && best <= r.cost) {
    r.solution = std::move(best_solution);
    r.cost = best;
    const double cost = static_cast<double>(best);
    r.gap = std::max(0.0, (cost - r.bound) / std::max(std::abs(cost), 1.0));
    return out;
  }
  out.alike = false;
  out.asymmetry_gain_s = best_solution.empty() ? std::numeric_limits<double>::infinity()
                                               : to_seconds(static_cast<solver::Cost>(best - r.cost));
  return out;
}

}  // namespace tlm
