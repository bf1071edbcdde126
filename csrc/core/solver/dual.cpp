#include "core/solver/dual.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tlm::solver {

static constexpr double kInf = std::numeric_limits<double>::infinity();

DualSolver::DualSolver(const Model& m, EdgeCosts mat) : m_(m), mat_(std::move(mat)) {
  if (!mat_ || mat_->block_of_edge.size() != m.edges.size())
    throw std::logic_error("DualSolver: edge costs of another model");
  pot_.resize(m.cost.size());
  for (size_t k = 0; k < m.cost.size(); ++k) pot_[k] = static_cast<double>(m.cost[k]);
  phi_off_.resize(m.edges.size() + 1, 0);
  for (size_t e = 0; e < m.edges.size(); ++e)
    phi_off_[e + 1] = phi_off_[e] + m.num_strategies(m.edges[e].u) + m.num_strategies(m.edges[e].v);
  phi_.assign(phi_off_.back(), 0.0);
  n_before_.assign(m.n, 0);
  n_after_.assign(m.n, 0);
  for (const auto& e : m.edges) {
    // the order is the model index order; edges are stored with u < v
    int lo = std::min(e.u, e.v), hi = std::max(e.u, e.v);
    ++n_after_[lo];
    ++n_before_[hi];
  }
}

void DualSolver::add_penalty(const std::vector<double>& delta) {
  for (int i = 0; i < m_.n; ++i) {
    if (delta[i] == 0.0) continue;
    for (size_t k = m_.off[i]; k < m_.off[i + 1]; ++k) pot_[k] += delta[i] * static_cast<double>(m_.usage[k]);
  }
}

void DualSolver::add_potentials(const std::vector<double>& delta) {
  for (size_t k = 0; k < pot_.size(); ++k) pot_[k] += delta[k];
}

// min over t of M[s][t] + pv[t] is min over column classes c of K[row(s)][c]
// plus the least pv[t] in class c (factored_costs.h), and symmetrically.
// Blocks without repeated rows (columns) skip the class step on that side.
void DualSolver::collect(int e, int i) {
  const auto& ed = m_.edges[e];
  const FactoredBlock& b = mat_->of(e);
  const int su = m_.num_strategies(ed.u), sv = m_.num_strategies(ed.v);
  double* pu = &phi_[phi_off_[e]];
  double* pv = pu + su;
  double* node = &pot_[m_.off[i]];
  const double* K = b.k;
  if (line_min_.size() < static_cast<size_t>(std::max(b.rows, b.cols))) {
    line_min_.resize(static_cast<size_t>(std::max(b.rows, b.cols)));
    class_best_.resize(line_min_.size());
  }
  double* lmin = line_min_.data();
  double* cbest = class_best_.data();
  if (i == ed.u) {
    const double* colmin = pv;
    if (!b.identity_cols) {
      std::fill_n(lmin, b.cols, kInf);
      for (int t = 0; t < sv; ++t) lmin[b.col[t]] = std::min(lmin[b.col[t]], pv[t]);
      colmin = lmin;
    }
    row_min_plus(K, b.rows, b.cols, colmin, cbest);
    for (int s = 0; s < su; ++s) {
      double mu = cbest[b.identity_rows ? s : b.row[s]] + pu[s];
      pu[s] -= mu;
      node[s] += mu;
    }
  } else {
    const double* rowmin = pu;
    if (!b.identity_rows) {
      std::fill_n(lmin, b.rows, kInf);
      for (int s = 0; s < su; ++s) lmin[b.row[s]] = std::min(lmin[b.row[s]], pu[s]);
      rowmin = lmin;
    }
    col_min_plus(K, b.rows, b.cols, rowmin, cbest);
    for (int t = 0; t < sv; ++t) {
      double mu = cbest[b.identity_cols ? t : b.col[t]] + pv[t];
      pv[t] -= mu;
      node[t] += mu;
    }
  }
}

void DualSolver::push(int e, int i, double frac) {
  const auto& ed = m_.edges[e];
  double* ph = &phi_[phi_off_[e]] + (i == ed.u ? 0 : m_.num_strategies(ed.u));
  double* node = &pot_[m_.off[i]];
  const int s_count = m_.num_strategies(i);
  for (int s = 0; s < s_count; ++s) {
    double d = frac * node[s];
    ph[s] += d;
    node[s] -= d;
  }
}

void DualSolver::forward(std::vector<int>& labels) {
  labels.assign(m_.n, 0);
  std::vector<double> score;
  for (int i = 0; i < m_.n; ++i) {
    const int s_count = m_.num_strategies(i);
    for (size_t k = m_.adj_off[i]; k < m_.adj_off[i + 1]; ++k) {
      int e = m_.adj[k];
      int j = m_.edges[e].u == i ? m_.edges[e].v : m_.edges[e].u;
      if (j < i) collect(e, i);
    }
    // Decode: node potential plus the edge potentials towards the earlier, already labelled neighbours.
    score.assign(pot_.begin() + m_.off[i], pot_.begin() + m_.off[i + 1]);
    for (size_t k = m_.adj_off[i]; k < m_.adj_off[i + 1]; ++k) {
      int e = m_.adj[k];
      const auto& ed = m_.edges[e];
      int j = ed.u == i ? ed.v : ed.u;
      if (j > i) continue;
      // i is the edge's v side (u < v); row x_j of the matrix
      const FactoredBlock& b = mat_->of(e);
      const double* krow = &b.k[static_cast<size_t>(b.row[labels[j]]) * b.cols];
      const double* pv = &phi_[phi_off_[e]] + m_.num_strategies(ed.u);
      for (int t = 0; t < s_count; ++t) score[t] += krow[b.col[t]] + pv[t];
    }
    int best = 0;
    for (int s = 1; s < s_count; ++s)
      if (score[s] < score[best]) best = s;
    if (!(score[best] < kInf)) {  // no compatible choice: fall back to the node's own best
      for (int s = 1; s < s_count; ++s)
        if (pot_[m_.off[i] + s] < pot_[m_.off[i] + best]) best = s;
    }
    labels[i] = best;
    int n_fwd = n_after_[i];
    if (n_fwd == 0) continue;
    double frac = 1.0 / std::max(n_before_[i], n_fwd);
    for (size_t k = m_.adj_off[i]; k < m_.adj_off[i + 1]; ++k) {
      int e = m_.adj[k];
      int j = m_.edges[e].u == i ? m_.edges[e].v : m_.edges[e].u;
      if (j > i) push(e, i, frac);
    }
  }
}

void DualSolver::backward() {
  for (int i = m_.n - 1; i >= 0; --i) {
    for (size_t k = m_.adj_off[i]; k < m_.adj_off[i + 1]; ++k) {
      int e = m_.adj[k];
      int j = m_.edges[e].u == i ? m_.edges[e].v : m_.edges[e].u;
      if (j > i) collect(e, i);
    }
    int n_bwd = n_before_[i];
    if (n_bwd == 0) continue;
    double frac = 1.0 / std::max(n_before_[i], n_after_[i]);
    for (size_t k = m_.adj_off[i]; k < m_.adj_off[i + 1]; ++k) {
      int e = m_.adj[k];
      int j = m_.edges[e].u == i ? m_.edges[e].v : m_.edges[e].u;
      if (j < i) push(e, i, frac);
    }
  }
}

double DualSolver::node_min(int i) const {
  double best = kInf;
  for (size_t k = m_.off[i]; k < m_.off[i + 1]; ++k) best = std::min(best, pot_[k]);
  return best;
}

double DualSolver::reduced_cost(int i, int s) const { return pot_[m_.off[i] + s] - node_min(i); }

std::vector<double> DualSolver::reduced_costs() const {
  std::vector<double> out(pot_.size());
  for (int i = 0; i < m_.n; ++i) {
    double lo = node_min(i);
    for (size_t k = m_.off[i]; k < m_.off[i + 1]; ++k) out[k] = pot_[k] - lo;
  }
  return out;
}

double DualSolver::quick_bound() const {
  double total = 0.0;
  for (int i = 0; i < m_.n; ++i) total += node_min(i);
  return total;
}

long double DualSolver::exact_bound(long double* magnitude) const {
  long double total = 0.0L, mag = 0.0L;
  for (int i = 0; i < m_.n; ++i) {
    long double b = node_min(i);
    total += b;
    mag += std::fabs(b);
  }
  std::vector<double> rmin, cmin;
  for (size_t e = 0; e < m_.edges.size(); ++e) {
    const auto& ed = m_.edges[e];
    const FactoredBlock& b = mat_->of(static_cast<int>(e));
    const int su = m_.num_strategies(ed.u), sv = m_.num_strategies(ed.v);
    const double* pu = &phi_[phi_off_[e]];
    const double* pv = pu + su;
    // min over finite entries of M[s][t] + pu[s] + pv[t], by classes.
    rmin.assign(b.rows, kInf);
    cmin.assign(b.cols, kInf);
    for (int s = 0; s < su; ++s) rmin[b.row[s]] = std::min(rmin[b.row[s]], pu[s]);
    for (int t = 0; t < sv; ++t) cmin[b.col[t]] = std::min(cmin[b.col[t]], pv[t]);
    // Fast path in doubles (long double arithmetic was most of this loop on
    // 3-D meshes). Each term k + c + r is off by at most eps * (|k| + |c| +
    // |r|) after two roundings, and |k| <= |term| + |c| + |r|; so near the
    // minimum the error is below eps * (|best| + 2 (max|r| + max|c|)). When
    // twice that is under one cost unit it is subtracted; otherwise (huge
    // potentials, as "practically forbidden" entries of 1e18 and more give:
    // contest instance L) the edge is summed exactly in long double.
    double fast = kInf, rtop = 0, ctop = 0;
    for (int r = 0; r < b.rows; ++r)
      if (rmin[r] < kInf) {
        fast = std::min(fast, min_plus(b.k + static_cast<size_t>(r) * b.cols, cmin.data(), b.cols) + rmin[r]);
        rtop = std::max(rtop, std::fabs(rmin[r]));
      }
    for (int c = 0; c < b.cols; ++c)
      if (cmin[c] < kInf) ctop = std::max(ctop, std::fabs(cmin[c]));
    const long double slack =
        2.0L * std::numeric_limits<double>::epsilon() * (std::fabs(fast) + 2.0 * (rtop + ctop));
    long double best = kInf;
    if (fast == kInf) {
      best = kInf;
    } else if (slack <= 1.0L) {
      best = static_cast<long double>(fast) - slack;
    } else {
      for (int r = 0; r < b.rows; ++r) {
        if (rmin[r] == kInf) continue;
        const double* krow = b.k + static_cast<size_t>(r) * b.cols;
        for (int c = 0; c < b.cols; ++c)
          if (krow[c] != kInf) best = std::min(best, static_cast<long double>(krow[c]) + rmin[r] + cmin[c]);
      }
    }
    total += best;
    mag += std::fabs(best);
  }
  if (magnitude) *magnitude = mag;
  return total;
}

}  // namespace tlm::solver

