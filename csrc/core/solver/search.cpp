#include "search.h"

#include <algorithm>
#include <cmath>

#include "dual.h"
#include "primal.h"

namespace tlm::solver {

long double safe_integer_bound(long double b, long double magnitude) {
  // Message passing is exact up to double rounding: allow 1e-9 of the terms' size.
  return std::ceil(b - 1e-9L * magnitude - 1e-6L);
}

namespace {

// Per-node sums of the point multipliers over the node's live points.
std::vector<double> node_multipliers(const Model& m, const std::vector<double>& lam) {
  std::vector<double> prefix(lam.size() + 1, 0.0);
  for (size_t k = 0; k < lam.size(); ++k) prefix[k + 1] = prefix[k] + lam[k];
  std::vector<double> out(m.n, 0.0);
  for (int i = 0; i < m.n; ++i)
    if (m.plo[i] < m.phi[i]) out[i] = prefix[m.phi[i]] - prefix[m.plo[i]];
  return out;
}

std::vector<double> overuse(const Model& m, const std::vector<int>& x) {
  std::vector<double> diff(m.cap.size() + 1, 0.0);
  for (int i = 0; i < m.n; ++i) {
    Usage u = m.usage[m.off[i] + x[i]];
    if (u == 0 || m.plo[i] >= m.phi[i]) continue;
    diff[m.plo[i]] += static_cast<double>(u);
    diff[m.phi[i]] -= static_cast<double>(u);
  }
  std::vector<double> g(m.cap.size());
  double load = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    load += diff[k];
    g[k] = load - static_cast<double>(m.cap[k]);
  }
  return g;
}

}  // namespace

SearchResult lagrangian_search(const Model& m, const SolveOptions& opt, Clock::time_point deadline,
                               const std::function<void(const SearchResult&)>& progress) {
  SearchResult best;
  bool found = false;
  best.bound = -std::numeric_limits<long double>::infinity();
  DualSolver dual(m);
  Primal primal(m);
  std::vector<double> lam(m.cap.size(), 0.0), Lam(m.n, 0.0);
  std::vector<int> labels;
  auto last_report = Clock::now();
  int stall = 0;
  long double last_bound = best.bound;
  double step_scale = 1.0;
  double prev_lagr = -1e300;
  for (int it = 0;; ++it) {
    dual.forward(labels);
    dual.backward();
    best.iterations = it + 1;
    // Primal: repair the decoded labelling's memory use, then local search.
    primal.set(labels);
    if (primal.repair()) {
      primal.improve();
      if (primal.feasible()) {
        __int128 c = primal.cost();
        if (!found || c < best.cost) {
          best.cost = c;
          best.labels = primal.labels();
          found = true;
          stall = 0;
        }
      }
    }
    // Bound: exact evaluation is a full sweep over the edges, so only every few passes.
    long double cap_term = 0;
    for (size_t k = 0; k < lam.size(); ++k) cap_term += static_cast<long double>(lam[k]) * m.cap[k];
    bool exact_now = it < 5 || it % 5 == 4;
    double lagr = dual.quick_bound() - static_cast<double>(cap_term);
    if (exact_now) {
      long double mag = 0;
      long double b = dual.exact_bound(&mag) - cap_term;
      b = safe_integer_bound(b, mag + std::fabs(cap_term));
      if (b > best.bound) best.bound = b;
    }
    const bool optimal = found && static_cast<long double>(best.cost) <= best.bound;
    if (optimal || Clock::now() >= deadline) break;
    if (best.bound > last_bound + 1e-9L * std::fabs(last_bound) + 0.5L) {
      last_bound = best.bound;
      stall = 0;
    } else if (++stall > 300) {
      break;  // neither the bound nor the primal moved for a long while
    }
    if (progress && Clock::now() - last_report > std::chrono::seconds(1)) {
      last_report = Clock::now();
      progress(best);
    }
    // Subgradient step on the memory multipliers from the decoded labelling.
    if (!lam.empty()) {
      std::vector<double> g = overuse(m, labels);
      double norm2 = 0;
      for (size_t k = 0; k < g.size(); ++k) {
        if (lam[k] <= 0 && g[k] < 0) g[k] = 0;  // projected: no pull below zero
        norm2 += g[k] * g[k];
      }
      if (norm2 > 0) {
        if (lagr < prev_lagr) step_scale = std::max(step_scale * 0.7, 1e-3);
        prev_lagr = lagr;
        double target = found ? static_cast<double>(best.cost) : std::fabs(lagr) * 1.1 + 1.0;
        double alpha = step_scale * std::max(target - lagr, 1e-9 * std::fabs(target) + 1.0) / norm2;
        for (size_t k = 0; k < lam.size(); ++k) lam[k] = std::max(0.0, lam[k] + alpha * g[k]);
        std::vector<double> L = node_multipliers(m, lam);
        for (int i = 0; i < m.n; ++i) {
          double d = L[i] - Lam[i];
          Lam[i] = L[i];
          L[i] = d;
        }
        dual.add_penalty(L);
      }
    }
  }
  if (!found) best.labels.clear();
  return best;
}

}  // namespace tlm::solver
