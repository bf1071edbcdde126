// Helpers shared by the solver tests: small problem builders, a brute-force
// optimum written independently of the solver and the evaluator, and the
// HiGHS location (the same library the Python package uses).
#pragma once

#include <cstdlib>
#include <optional>
#include <random>
#include <string>

#include "core/solver/highs_api.h"
#include "core/solver/problem.h"

namespace tlm::solver::testing {

inline Node node(int64_t start, int64_t end, std::vector<Strategy> strategies) {
  Node n;
  n.start = start;
  n.end = end;
  n.strategies = std::move(strategies);
  return n;
}

// Points HiGHS at the highspy package CMake found (TLM_HIGHSPY_DIR) unless
// TLM_HIGHS_LIBRARY says where it is; the library is found by its C API.
inline bool locate_highs() {
#ifdef TLM_HIGHSPY_DIR
  if (!highs_api() && *TLM_HIGHSPY_DIR) set_highs_library(TLM_HIGHSPY_DIR);
#endif
  return highs_api() != nullptr;
}

// Minimum cost over all feasible solutions by enumeration (nullopt: infeasible).
inline std::optional<__int128> brute_force(const Problem& p, Solution* best_x = nullptr) {
  const size_t n = p.nodes.size();
  Solution x(n, 0);
  std::optional<__int128> best;
  std::vector<int64_t> times;
  for (const Node& nd : p.nodes)
    if (nd.start < nd.end) times.push_back(nd.start);
  while (true) {
    bool ok = true;
    __int128 c = 0;
    for (size_t i = 0; i < n && ok; ++i) {
      const Node& nd = p.nodes[i];
      const Strategy& s = nd.strategies[x[i]];
      if (s.cost == kInfiniteCost || (nd.pinned >= 0 && x[i] != nd.pinned) ||
          (nd.usage_lower && s.usage < *nd.usage_lower) || (nd.usage_upper && s.usage > *nd.usage_upper))
        ok = false;
      c += s.cost;
    }
    for (size_t e = 0; e < p.edges.size() && ok; ++e) {
      const Edge& ed = p.edges[e];
      Cost v = (*ed.costs)[static_cast<size_t>(x[ed.u]) * p.nodes[ed.v].strategies.size() + x[ed.v]];
      if (v == kInfiniteCost) ok = false;
      c += v;
    }
    for (const Coupling& cp : p.couplings)
      if (ok && cp.map[x[cp.u]] != x[cp.v]) ok = false;
    if (ok && p.usage_limit)
      for (int64_t t : times) {
        __int128 load = 0;
        for (size_t i = 0; i < n; ++i)
          if (p.nodes[i].start <= t && t < p.nodes[i].end) load += p.nodes[i].strategies[x[i]].usage;
        if (load > *p.usage_limit) { ok = false; break; }
      }
    if (ok && (!best || c < *best)) {
      best = c;
      if (best_x) *best_x = x;
    }
    size_t i = 0;
    while (i < n && ++x[i] == static_cast<int>(p.nodes[i].strategies.size())) x[i++] = 0;
    if (i == n) break;
  }
  return best;
}

// Random small problem: <= 10 nodes, <= 4 strategies, random edges with some
// forbidden entries, couplings, pins, usage bounds and a random memory limit.
inline Problem random_problem(std::mt19937_64& rng) {
  auto uni = [&](int lo, int hi) { return static_cast<int>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  Problem p;
  int n = uni(1, 10);
  size_t product = 1;
  for (int i = 0; i < n; ++i) {
    int s = uni(1, 4);
    while (product * s > 20000) --s;
    product *= s;
    int64_t a = uni(0, 12), len = uni(0, 8);
    std::vector<Strategy> st;
    for (int k = 0; k < s; ++k) st.push_back({uni(0, 20) == 0 ? kInfiniteCost : uni(0, 100), uni(0, 10)});
    p.nodes.push_back(node(a, a + len, st));
    if (uni(0, 12) == 0) p.nodes.back().pinned = uni(0, s - 1);
    if (uni(0, 12) == 0) p.nodes.back().usage_upper = uni(2, 10);
    if (uni(0, 15) == 0) p.nodes.back().usage_lower = uni(0, 3);
  }
  int edges = n > 1 ? uni(0, 2 * n) : 0;
  for (int k = 0; k < edges; ++k) {
    int u = uni(0, n - 1), v = uni(0, n - 1);
    if (u == v) continue;
    std::vector<Cost> costs;
    size_t cells = p.nodes[u].strategies.size() * p.nodes[v].strategies.size();
    for (size_t c = 0; c < cells; ++c) costs.push_back(uni(0, 9) == 0 ? kInfiniteCost : uni(0, 60));
    p.edges.emplace_back(u, v, std::move(costs));
  }
  if (n > 1 && uni(0, 3) == 0) {
    int u = uni(0, n - 1), v = uni(0, n - 1);
    if (u != v) {
      Coupling c{u, v, {}};
      for (size_t s = 0; s < p.nodes[u].strategies.size(); ++s)
        c.map.push_back(uni(0, 6) == 0 ? -1 : uni(0, static_cast<int>(p.nodes[v].strategies.size()) - 1));
      p.couplings.push_back(std::move(c));
    }
  }
  if (uni(0, 4) != 0) p.usage_limit = uni(0, 35);
  return p;
}

}  // namespace tlm::solver::testing
