#include "search.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <thread>

#include "coarse_milp.h"
#include "coarsen.h"
#include "dual.h"
#include "forest.h"
#include "highs_api.h"
#include "lns.h"
#include <random>
#include "primal.h"
#include "trace.h"

namespace tlm::solver {

long double safe_integer_bound(long double b, long double magnitude) {
  // Message passing is exact up to double rounding: allow 1e-9 of the terms' size.
  return std::ceil(b - 1e-9L * magnitude - 1e-6L);
}

namespace {

// Load minus capacity per check point for a labelling.
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

// What the two searches share: the best labelling (the primal side writes
// it) and the best bound (the dual side writes it); each stops when they meet.
struct Shared {
  std::mutex mu;
  bool found = false;
  __int128 cost = 0;
  std::vector<int> labels;
  long double bound = -std::numeric_limits<long double>::infinity();
  std::atomic<bool> done{false};
  std::vector<double> reduced_cost;  // at the best bound (dual side only)
  long double rc_bound = 0;

  bool offer(const std::vector<int>& x, __int128 c) {
    std::lock_guard<std::mutex> lock(mu);
    if (found && c >= cost) return false;
    found = true;
    cost = c;
    labels = x;
    if (static_cast<long double>(cost) <= bound) done = true;
    return true;
  }
  void raise_bound(long double b) {
    std::lock_guard<std::mutex> lock(mu);
    if (b <= bound) return;
    bound = b;
    if (found && static_cast<long double>(cost) <= bound) done = true;
  }
  bool upper(double* ub) {
    std::lock_guard<std::mutex> lock(mu);
    if (found) *ub = static_cast<double>(cost);
    return found;
  }
};

// Dual side: message passing on cost + sum_k lambda_k * usage (a Lagrangian
// of the memory constraints), lambda by projected subgradient steps. Every
// bound it reports is exact for the lambda it was computed with.
void bound_search(const Model& m, Shared& sh, Clock::time_point deadline, int max_stall) {
  DualSolver dual(m);
  std::vector<double> lam(m.cap.size(), 0.0), node_lam(m.n, 0.0);
  std::vector<int> labels;
  // Points are strongly correlated (a node spans many): scale steps by the mean span.
  double span = 0;
  int with_points = 0;
  for (int i = 0; i < m.n; ++i)
    if (m.plo[i] < m.phi[i]) span += m.phi[i] - m.plo[i], ++with_points;
  span = with_points ? std::max(1.0, span / with_points) : 1.0;
  double scale = 0.5, prev = -1e300;
  long double last = -std::numeric_limits<long double>::infinity();
  int stall = 0;
  for (int it = 0; !sh.done && Clock::now() < deadline; ++it) {
    dual.forward(labels);
    dual.backward();
    long double cap_term = 0;
    for (size_t k = 0; k < lam.size(); ++k) cap_term += static_cast<long double>(lam[k]) * m.cap[k];
    if (it < 3 || it % 4 == 3) {
      long double mag = 0;
      long double raw = dual.exact_bound(&mag) - cap_term;
      long double b = safe_integer_bound(raw, mag + std::fabs(cap_term));
      if (b > last) {
        std::vector<double> rc = dual.reduced_costs();
        std::lock_guard<std::mutex> lock(sh.mu);
        sh.reduced_cost = std::move(rc);
        sh.rc_bound = raw - 1e-9L * (mag + std::fabs(cap_term)) - 1e-6L;
      }
      sh.raise_bound(b);
      if (b > last + 1e-7L * std::fabs(last) + 0.5L) {
        last = b;
        stall = 0;
      } else if (++stall > max_stall) {
        break;
      }
    }
    if (lam.empty()) continue;
    double lagr = dual.quick_bound() - static_cast<double>(cap_term);
    std::vector<double> g = overuse(m, labels);
    double norm2 = 0;
    for (size_t k = 0; k < g.size(); ++k) {
      if (lam[k] <= 0 && g[k] < 0) g[k] = 0;
      norm2 += g[k] * g[k];
    }
    if (norm2 <= 0) continue;
    scale = lagr < prev ? std::max(scale * 0.6, 1e-4) : std::min(scale * 1.1, 2.0);
    prev = lagr;
    double ub = 0;
    double target = sh.upper(&ub) ? ub : std::fabs(lagr) * 1.5 + 1.0;
    double alpha = scale * std::max(target - lagr, 1e-6 * std::fabs(target) + 1.0) / (norm2 * span);
    for (size_t k = 0; k < lam.size(); ++k) lam[k] = std::max(0.0, lam[k] + alpha * g[k]);
    std::vector<double> prefix(lam.size() + 1, 0.0);
    for (size_t k = 0; k < lam.size(); ++k) prefix[k + 1] = prefix[k] + lam[k];
    std::vector<double> delta(m.n, 0.0);
    for (int i = 0; i < m.n; ++i) {
      if (m.plo[i] >= m.phi[i]) continue;
      double v = prefix[m.phi[i]] - prefix[m.plo[i]];
      delta[i] = v - node_lam[i];
      node_lam[i] = v;
    }
    dual.add_penalty(delta);
  }
}

// Range maximum over check points (sparse table), for per-node prices.
class RangeMax {
 public:
  explicit RangeMax(const std::vector<double>& v) {
    size_t n = v.size();
    table_.push_back(v);
    for (size_t w = 1; 2 * w <= n; w *= 2) {
      const auto& prev = table_.back();
      std::vector<double> next(n - 2 * w + 1);
      for (size_t k = 0; k < next.size(); ++k) next[k] = std::max(prev[k], prev[k + w]);
      table_.push_back(std::move(next));
    }
  }
  double max(size_t l, size_t r) const {  // [l, r), l < r
    size_t level = 0;
    while ((static_cast<size_t>(2) << level) <= r - l) ++level;
    size_t w = static_cast<size_t>(1) << level;
    return std::max(table_[level][l], table_[level][r - w]);
  }

 private:
  std::vector<std::vector<double>> table_;
};

// Primal side: message passing on cost + price * usage, where a node's price
// is the highest price among the points it is live at, and prices rise where
// the decoded labelling overflows and decay where it fits. Each decoded
// labelling is repaired to fit, improved by local search and offered.
void primal_search(const Model& m, Shared& sh, Clock::time_point deadline, int max_stall,
                   const std::function<void()>& progress, uint64_t seed, bool allow_lns) {
  const auto t_start = Clock::now();
  const bool lns = allow_lns && highs_api() != nullptr;
  // With HiGHS at hand, the price-guided phase only builds a good start.
  const auto phase1_end = lns ? t_start + (deadline - t_start) * 3 / 10 : deadline;
  DualSolver guide(m);
  Primal primal(m);
  std::vector<int> labels;
  // Group moves (coarsen.h, forest.h) for labellings close to the best:
  // the groups are rebuilt when the best cost has halved since.
  std::mt19937_64 frng(seed + 7);
  std::unique_ptr<Coarsening> coarse;
  std::unique_ptr<ForestMoves> forest;
  __int128 coarse_ub = 0;
  auto polish = [&]() {
    __int128 best = 0;
    {
      std::lock_guard<std::mutex> lock(sh.mu);
      if (sh.found) best = sh.cost;
    }
    __int128 c = primal.cost();
    if (best > 0 && c > best + best / 20) return;
    if (!coarse || c < coarse_ub / 2) {
      forest.reset();
      coarse = std::make_unique<Coarsening>(coarsen(m, std::min(c, best > 0 ? best : c)));
      forest = std::make_unique<ForestMoves>(m, *coarse);
      coarse_ub = std::min(c, best > 0 ? best : c);
      trace("coarsened: %d groups for %d nodes (%d in groups of 2+), %zu coarse edges, %zu strategies", coarse->coarse.n,
            m.n, coarse->grouped_nodes, coarse->coarse.edges.size(), coarse->coarse.strat.size());
    }
    for (int sw = 0; sw < 8 && forest->sweep(primal, frng) > 0; ++sw) primal.improve();
  };
  std::vector<double> price(m.cap.size(), 0.0), node_price(m.n, 0.0);
  // Price unit: the median cost per byte between a node's cheapest and its leanest strategy.
  std::vector<double> ratios;
  for (int i = 0; i < m.n; ++i) {
    size_t cheap = m.off[i], lean = m.off[i];
    for (size_t k = m.off[i]; k < m.off[i + 1]; ++k) {
      if (m.cost[k] < m.cost[cheap]) cheap = k;
      if (m.usage[k] < m.usage[lean]) lean = k;
    }
    if (m.plo[i] < m.phi[i] && m.usage[cheap] > m.usage[lean] && m.cost[lean] > m.cost[cheap])
      ratios.push_back(static_cast<double>(m.cost[lean] - m.cost[cheap]) / static_cast<double>(m.usage[cheap] - m.usage[lean]));
  }
  double unit = 0;
  if (!ratios.empty()) {
    std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
    unit = ratios[ratios.size() / 2];
  }
  double rate = 0.5;
  int stall = 0;
  auto last_report = Clock::now();
  int it = 0;
  for (; !sh.done && Clock::now() < phase1_end; ++it) {
    guide.forward(labels);
    guide.backward();
    primal.set(labels);
    bool improved = false;
    const bool rep = primal.repair();
    if (rep) {
      primal.improve();
      if (primal.feasible()) polish();
      if (primal.feasible()) improved = sh.offer(primal.labels(), primal.cost());
    }
    stall = improved ? 0 : stall + 1;
    if (stall > max_stall) break;
    if (progress && Clock::now() - last_report > std::chrono::seconds(1)) {
      last_report = Clock::now();
      progress();
    }
    if (price.empty()) continue;
    std::vector<double> g = overuse(m, labels);
    bool any_over = false;
    for (size_t k = 0; k < g.size(); ++k) {
      double rel = g[k] / std::max(1.0, static_cast<double>(m.cap[k]));
      if (rel > 0) {
        price[k] += rate * unit * std::min(rel, 1.0) + 1e-3 * rate * unit;
        any_over = true;
      } else if (rel < -0.02) {
        price[k] *= 0.9;
      }
    }
    rate = any_over ? std::min(rate * 1.2, 4.0) : std::max(rate * 0.7, 0.01);
    RangeMax rmax(price);
    std::vector<double> delta(m.n, 0.0);
    for (int i = 0; i < m.n; ++i) {
      if (m.plo[i] >= m.phi[i]) continue;
      double v = rmax.max(m.plo[i], m.phi[i]);
      delta[i] = v - node_price[i];
      node_price[i] = v;
    }
    guide.add_penalty(delta);
  }
  trace("price phase: %d iterations, best %s", it, sh.found ? to_string(sh.cost).c_str() : "none");
  if (!lns) return;
  std::vector<int> start;
  __int128 start_cost = 0;
  {
    std::lock_guard<std::mutex> lock(sh.mu);
    if (!sh.found) return;
    start = sh.labels;
    start_cost = sh.cost;
  }
  // Phase 2: the coarse model exactly (HiGHS, memory rows on demand).
  if (!sh.done) {
    Coarsening cs = coarsen(m, start_cost);
    trace("coarse model: %d groups, %zu strategies, %zu edges", cs.coarse.n, cs.coarse.strat.size(), cs.coarse.edges.size());
    CoarseMilpResult cr = coarse_milp_search(
        m, cs, start, start_cost, deadline, 1, seed, [&](const std::vector<int>& x, __int128 c) { sh.offer(x, c); },
        [&]() { return sh.done.load(); });
    if (cr.optimal) sh.raise_bound(static_cast<long double>(start_cost));
    else if (cr.ran) sh.raise_bound(std::ceil(cr.bound));
    trace("coarse milp: %d rounds, %zu rows, optimal=%d", cr.rounds, cr.rows, (int)cr.optimal);
  }
  // Phase 3: large-neighbourhood search from the best labelling.
  primal.set(start);
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + 1);
  LnsOptions lo;
  lo.seed = seed;
  int fails = 0, wins = 0, step = 0;
  for (; !sh.done && Clock::now() < deadline; ++step) {
    std::vector<int> region;
    if (!m.cap.empty() && step % 3 != 2) {
      // Nodes live at one of the tightest points: memory can move between them.
      std::vector<int> tight = primal.tightest_points(8);
      int k = tight[rng() % tight.size()];
      std::vector<int> live;
      for (int i = 0; i < m.n; ++i)
        if (m.plo[i] <= k && k < m.phi[i] && m.num_strategies(i) > 1) live.push_back(i);
      if (step % 3 == 0) {
        std::shuffle(live.begin(), live.end(), rng);
        if (live.size() > static_cast<size_t>(lo.region_nodes)) live.resize(lo.region_nodes);
        region = live;
      } else if (!live.empty()) {
        region = bfs_region(m, live[rng() % live.size()], lo);
      }
    }
    if (region.empty()) region = bfs_region(m, static_cast<int>(rng() % m.n), lo);
    double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left < 0.05) break;
    if (lns_step(m, primal, std::move(region), lo, std::min(lo.step_seconds, left))) {
      sh.offer(primal.labels(), primal.cost());
      ++wins;
      fails = 0;
    } else if (++fails > 20 * max_stall) {
      break;
    }
    if (progress && Clock::now() - last_report > std::chrono::seconds(1)) {
      last_report = Clock::now();
      progress();
    }
  }
  trace("lns: %d steps, %d improving, final %s", step, wins, to_string(primal.cost()).c_str());
}

}  // namespace

SearchResult lagrangian_search(const Model& m, const SolveOptions& opt, Clock::time_point deadline,
                               const std::function<void(const SearchResult&)>& progress, bool allow_lns) {
  Shared sh;
  auto report = [&]() {
    if (!progress) return;
    SearchResult now;
    {
      std::lock_guard<std::mutex> lock(sh.mu);
      if (!sh.found) return;
      now.cost = sh.cost;
      now.bound = sh.bound;
      now.labels = sh.labels;
    }
    progress(now);
  };
  const int max_stall = 400;
  if (opt.threads >= 2) {
    std::thread dual_thread([&] { bound_search(m, sh, deadline, max_stall); });
    primal_search(m, sh, deadline, max_stall, report, opt.seed, allow_lns);
    sh.done = true;  // the primal side decides when to stop; the bound so far stands
    dual_thread.join();
  } else {
    auto mid = Clock::now() + (deadline - Clock::now()) * 2 / 3;
    primal_search(m, sh, mid, max_stall, report, opt.seed, allow_lns);
    bound_search(m, sh, deadline, max_stall);
  }
  SearchResult r;
  r.labels = sh.labels;
  r.cost = sh.cost;
  r.bound = sh.bound;
  r.reduced_cost = std::move(sh.reduced_cost);
  r.rc_bound = sh.rc_bound;
  return r;
}

}  // namespace tlm::solver
