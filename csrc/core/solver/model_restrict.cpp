#include <stdexcept>

#include "core/solver/model.h"

namespace tlm::solver {

Model restrict_strategies(const Model& m, const std::vector<char>& keep, std::vector<int>* kept) {
  Model r;
  r.n = m.n;
  r.orig = m.orig;
  r.plo = m.plo;
  r.phi = m.phi;
  r.cap = m.cap;
  r.point_time = m.point_time;
  r.offset = m.offset;
  r.adj_off = m.adj_off;
  r.adj = m.adj;
  r.off.assign(1, 0);
  std::vector<int> local(m.strat.size(), -1);
  kept->clear();
  for (int i = 0; i < m.n; ++i) {
    for (size_t k = m.off[i]; k < m.off[i + 1]; ++k) {
      if (!keep[k]) continue;
      local[k] = static_cast<int>(r.strat.size() - r.off.back());
      kept->push_back(static_cast<int>(k - m.off[i]));
      r.strat.push_back(m.strat[k]);
      r.cost.push_back(m.cost[k]);
      r.usage.push_back(m.usage[k]);
    }
    if (r.strat.size() == r.off.back()) throw std::logic_error("restrict_strategies: a node kept no strategy");
    r.off.push_back(r.strat.size());
  }
  size_t cells = 0;  // reserved once (see reduce.cpp)
  for (const auto& e : m.edges) cells += static_cast<size_t>(r.num_strategies(e.u)) * r.num_strategies(e.v);
  r.mat.reserve(cells);
  for (const auto& e : m.edges) {
    Model::ModelEdge ne{e.u, e.v, r.mat.size()};
    const int sv = m.num_strategies(e.v);
    for (int s = 0; s < m.num_strategies(e.u); ++s) {
      if (local[m.off[e.u] + s] < 0) continue;
      for (int t = 0; t < sv; ++t)
        if (local[m.off[e.v] + t] >= 0) r.mat.push_back(m.mat[e.off + static_cast<size_t>(s) * sv + t]);
    }
    r.edges.push_back(ne);
  }
  return r;
}

std::vector<int> to_restricted(const Model& r, const std::vector<int>& kept, const std::vector<int>& x) {
  std::vector<int> y(r.n, 0);
  for (int i = 0; i < r.n; ++i)
    for (size_t k = r.off[i]; k < r.off[i + 1]; ++k)
      if (kept[k] == x[i]) y[i] = static_cast<int>(k - r.off[i]);
  return y;
}

std::vector<int> from_restricted(const Model& r, const std::vector<int>& kept, const std::vector<int>& y) {
  std::vector<int> x(r.n);
  for (int i = 0; i < r.n; ++i) x[i] = kept[r.off[i] + y[i]];
  return x;
}

}  // namespace tlm::solver
