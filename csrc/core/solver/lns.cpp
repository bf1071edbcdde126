#include "lns.h"

#include <algorithm>
#include <deque>

#include "cost_math.h"
#include "milp.h"

namespace tlm::solver {

std::vector<int> bfs_region(const Model& m, int center, const LnsOptions& opt) {
  // Region: breadth-first from the centre within the node and column budgets.
  std::vector<int> local(m.n, -1), region;
  std::deque<int> queue{center};
  local[center] = 0;
  size_t columns = 0;
  while (!queue.empty() && static_cast<int>(region.size()) < opt.region_nodes) {
    int i = queue.front();
    queue.pop_front();
    size_t add = m.num_strategies(i);
    for (size_t k = m.adj_off[i]; k < m.adj_off[i + 1]; ++k) {
      const auto& e = m.edges[m.adj[k]];
      int j = e.u == i ? e.v : e.u;
      if (local[j] >= 0 && local[j] < static_cast<int>(region.size()) && region[local[j]] == j)
        add += static_cast<size_t>(m.num_strategies(i)) * m.num_strategies(j);
    }
    if (!region.empty() && columns + add > opt.region_columns) continue;
    columns += add;
    local[i] = static_cast<int>(region.size());
    region.push_back(i);
    for (size_t k = m.adj_off[i]; k < m.adj_off[i + 1]; ++k) {
      const auto& e = m.edges[m.adj[k]];
      int j = e.u == i ? e.v : e.u;
      if (local[j] < 0) {
        local[j] = -2;  // queued
        queue.push_back(j);
      }
    }
  }
  return region;
}

bool lns_step(const Model& m, Primal& primal, std::vector<int> region, const LnsOptions& opt, double seconds) {
  const std::vector<int>& x = primal.labels();
  std::sort(region.begin(), region.end());  // keep model order (edges stay u < v)
  std::vector<int> local(m.n, -1);
  for (size_t r = 0; r < region.size(); ++r) local[region[r]] = static_cast<int>(r);

  Model sub;
  sub.n = static_cast<int>(region.size());
  sub.off.assign(1, 0);
  std::vector<std::vector<int>> to_sub(sub.n);  // model strategy -> sub strategy
  std::vector<int> start(sub.n, -1);
  for (int r = 0; r < sub.n; ++r) {
    int i = region[r];
    to_sub[r].assign(m.num_strategies(i), -1);
    for (int s = 0; s < m.num_strategies(i); ++s) {
      Cost c = m.cost[m.off[i] + s];
      for (size_t k = m.adj_off[i]; k < m.adj_off[i + 1]; ++k) {
        const auto& e = m.edges[m.adj[k]];
        int j = e.u == i ? e.v : e.u;
        if (local[j] >= 0) continue;
        Cost ec = e.u == i ? m.mat[e.off + static_cast<size_t>(s) * m.num_strategies(e.v) + x[j]]
                           : m.mat[e.off + static_cast<size_t>(x[j]) * m.num_strategies(e.v) + s];
        c = sat_add(c, ec);
      }
      if (c == kInfiniteCost) continue;
      to_sub[r][s] = static_cast<int>(sub.strat.size() - sub.off.back());
      sub.strat.push_back(s);
      sub.cost.push_back(c);
      sub.usage.push_back(m.usage[m.off[i] + s]);
    }
    sub.off.push_back(sub.strat.size());
    start[r] = to_sub[r][x[i]];
    if (start[r] < 0) return false;  // current choice must stay available
  }
  for (size_t e = 0; e < m.edges.size(); ++e) {
    const auto& ed = m.edges[e];
    int a = local[ed.u], b = local[ed.v];
    if (a < 0 || b < 0) continue;
    Model::ModelEdge se{a, b, sub.mat.size()};
    const int sv = m.num_strategies(ed.v);
    for (int s = 0; s < m.num_strategies(ed.u); ++s) {
      if (to_sub[a][s] < 0) continue;
      for (int t = 0; t < sv; ++t)
        if (to_sub[b][t] >= 0) sub.mat.push_back(m.mat[ed.off + static_cast<size_t>(s) * sv + t]);
    }
    sub.edges.push_back(se);
  }
  // Drop choices that cannot be part of an improvement: their excess over the
  // cheapest choice alone exceeds the current region cost minus a lower bound
  // of the region (sum of per-node and per-edge minima). Keeps HiGHS away from
  // the huge "practically forbidden" costs of contest files.
  {
    __int128 current = 0, lower = 0;
    std::vector<Cost> node_min(sub.n);
    for (int q = 0; q < sub.n; ++q) {
      node_min[q] = *std::min_element(sub.cost.begin() + sub.off[q], sub.cost.begin() + sub.off[q + 1]);
      current += sub.cost[sub.off[q] + start[q]];
      lower += node_min[q];
    }
    std::vector<Cost> edge_min(sub.edges.size(), kInfiniteCost);
    for (size_t e = 0; e < sub.edges.size(); ++e) {
      const auto& se = sub.edges[e];
      const int sv = sub.num_strategies(se.v);
      size_t cells = static_cast<size_t>(sub.num_strategies(se.u)) * sv;
      for (size_t k = 0; k < cells; ++k) edge_min[e] = std::min(edge_min[e], sub.mat[se.off + k]);
      current += sub.mat[se.off + static_cast<size_t>(start[se.u]) * sv + start[se.v]];
      lower += edge_min[e];
    }
    const __int128 room = current - lower;
    for (size_t e = 0; e < sub.edges.size(); ++e) {
      const auto& se = sub.edges[e];
      size_t cells = static_cast<size_t>(sub.num_strategies(se.u)) * sub.num_strategies(se.v);
      for (size_t k = 0; k < cells; ++k)
        if (sub.mat[se.off + k] != kInfiniteCost && static_cast<__int128>(sub.mat[se.off + k]) - edge_min[e] > room)
          sub.mat[se.off + k] = kInfiniteCost;
    }
    for (int q = 0; q < sub.n; ++q)
      for (size_t k = sub.off[q]; k < sub.off[q + 1]; ++k)
        if (static_cast<__int128>(sub.cost[k]) - node_min[q] > room) sub.cost[k] = kHugeCost;
  }
  // Memory: one check point per run of model points with the same live region
  // nodes; capacity = least slack over the run plus the region's own current usage.
  std::vector<int> cuts;
  for (int r = 0; r < sub.n; ++r) {
    int i = region[r];
    if (m.plo[i] < m.phi[i]) cuts.push_back(m.plo[i]), cuts.push_back(m.phi[i]);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  sub.plo.assign(sub.n, 0);
  sub.phi.assign(sub.n, 0);
  if (cuts.size() >= 2) {
    const size_t segs = cuts.size() - 1;
    std::vector<__int128> own(segs + 1, 0);
    for (int r = 0; r < sub.n; ++r) {
      int i = region[r];
      if (m.plo[i] >= m.phi[i]) continue;
      sub.plo[r] = static_cast<int>(std::lower_bound(cuts.begin(), cuts.end(), m.plo[i]) - cuts.begin());
      sub.phi[r] = static_cast<int>(std::lower_bound(cuts.begin(), cuts.end(), m.phi[i]) - cuts.begin());
      Usage u = m.usage[m.off[i] + x[i]];
      own[sub.plo[r]] += u;
      own[sub.phi[r]] -= u;
    }
    __int128 run = 0;
    for (size_t s = 0; s < segs; ++s) {
      run += own[s];
      __int128 c = primal.slack_min(cuts[s], cuts[s + 1]) + run;
      sub.cap.push_back(static_cast<Usage>(std::min<__int128>(c, std::numeric_limits<Usage>::max())));
    }
  }
  sub.adj_off.assign(sub.n + 1, 0);  // the MILP does not read adjacency
  MilpOptions mo;
  mo.time_limit_s = seconds;
  mo.threads = 1;
  mo.seed = opt.seed;
  mo.start = &start;
  MilpResult r = solve_milp(sub, mo);
  if (r.labels.empty()) return false;
  // Accept only a strict improvement, by exact evaluation of the changed nodes.
  __int128 before = primal.cost();
  std::vector<std::pair<int, int>> undo;
  for (int q = 0; q < sub.n; ++q) {
    int i = region[q];
    int s = sub.strat[sub.off[q] + r.labels[q]];
    if (s != x[i]) {
      undo.emplace_back(i, x[i]);
      primal.move(i, s);
    }
  }
  if (undo.empty()) return false;
  if (primal.cost() < before && primal.memory_ok()) return true;
  for (auto it = undo.rbegin(); it != undo.rend(); ++it) primal.move(it->first, it->second);
  return false;
}

}  // namespace tlm::solver
