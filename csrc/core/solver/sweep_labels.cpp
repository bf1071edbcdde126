#include "core/solver/sweep_labels.h"

#include <limits>

#include "core/solver/cost_math.h"

namespace tlm::solver {

void sweep_labels(const Model& m, const std::vector<double>& unary, std::vector<int>& labels) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (int i = 0; i < m.n; ++i) {
    // The current label's value first: a strategy replaces it only when strictly cheaper, so
    // the total never rises.
    int best_s = labels[static_cast<size_t>(i)];
    const auto value = [&](int s, double stop) {
      const size_t k = m.off[static_cast<size_t>(i)] + static_cast<size_t>(s);
      if (m.cost[k] >= kHugeCost) return kInf;
      double v = unary[k];
      for (size_t a = m.adj_off[static_cast<size_t>(i)]; a < m.adj_off[static_cast<size_t>(i) + 1] && v < stop; ++a) {
        const Model::ModelEdge& e = m.edges[static_cast<size_t>(m.adj[a])];
        const size_t sv = static_cast<size_t>(m.num_strategies(e.v));
        const Cost c = e.u == i ? m.mat[e.off + static_cast<size_t>(s) * sv + static_cast<size_t>(labels[e.v])]
                                : m.mat[e.off + static_cast<size_t>(labels[e.u]) * sv + static_cast<size_t>(s)];
        v = c >= kHugeCost ? kInf : v + static_cast<double>(c);
      }
      return v;
    };
    double best = value(best_s, kInf);
    for (int s = 0; s < m.num_strategies(i); ++s) {
      if (s == labels[static_cast<size_t>(i)]) continue;
      const double v = value(s, best);
      if (v < best) best = v, best_s = s;
    }
    labels[static_cast<size_t>(i)] = best_s;
  }
}

}  // namespace tlm::solver
